// The campaign rules at scale (issue 37, "Proof"; docs/campaigns.md), per engine, with real
// processes:
//   submit — N call tasks (BENCH_CAMPAIGN_TASKS, default 100,000) through the bulk path
//            (POST /api/v2/agent/outboundCall, 1,000 targets a request, 4 requests at once) to an
//            organization with the rules: 10 % of its numbers on its do-not-call list, and a
//            calling window (every day 06:00–20:00, the recipient's time) open now where half the
//            numbers ring and closed where the other half ring. The same N numbers go, in the
//            same rounds interleaved, to an organization without any rule (no list entries, no
//            window): today's submission path without the rules. Items/s of each, and their ratio.
//   run    — after a further 1 % of the numbers is listed (after submission: the check at the
//            moment of dialling), a worker process on the SIMULATED carrier (calls of 0 s, the
//            organization's concurrency at its maximum, 1,000) runs everything due; then, from the database, every task is
//            checked: no listed number reached the carrier (no provider reference), every call
//            that went out went out inside its window in its recipient's zone, every number
//            outside its window is held (pending, not started, its reason naming the window).
// The window is set from the clock at the start: of a few zones (New York, Los Angeles, Honolulu,
// London, Mumbai, Tokyo, Sydney) the bench picks one where it is now between 07:00 and 17:00 (at
// least three hours before the window closes) and one where it is between 21:00 and 04:00 (at
// least two hours before it opens), so the split holds for the whole run.
// Usage: npm run bench:campaigns   (BENCH_DATABASE_URL also runs PostgreSQL, BENCH_ENGINE=postgres only it; BENCH_CAMPAIGN_TASKS=N)
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { isValidPhoneNumber } from 'libphonenumber-js';
import { openDatabase, type Database } from '../src/db/index.ts';
import { MAX_CONCURRENCY } from '../src/modules/limits/task-limits.ts';
import { api, createStore, ENGINES, fmt, median, startServer, startWorker, type Engine, type Server, type Store } from './lib.ts';

const N = Number(process.env.BENCH_CAMPAIGN_TASKS ?? 100_000);
const BATCH = 1000;
const PARALLEL = 4;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const LISTED_SHARE = 0.1;
const LATE_SHARE = 0.01;
const WINDOW = { days: [0, 1, 2, 3, 4, 5, 6], start: '06:00', end: '20:00' };

/** Zones and how to make valid numbers ringing there (a prefix, then `digits` digits). */
const ZONES = [
  { zone: 'America/New_York', prefix: '+1212', digits: 7 },
  { zone: 'America/Los_Angeles', prefix: '+1415', digits: 7 },
  { zone: 'Pacific/Honolulu', prefix: '+1808', digits: 7 },
  { zone: 'Europe/London', prefix: '+44207', digits: 7 },
  { zone: 'Asia/Calcutta', prefix: '+9122', digits: 8 },
  { zone: 'Asia/Tokyo', prefix: '+813', digits: 8 },
  { zone: 'Australia/Sydney', prefix: '+612', digits: 8 },
] as const;
type Zone = (typeof ZONES)[number];

/** Local hour (fractional) in `tz` at `ms`. */
function localHour(ms: number, tz: string): number {
  const p = new Intl.DateTimeFormat('en-US', { timeZone: tz, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).formatToParts(ms);
  return Number(p.find((x) => x.type === 'hour')!.value) + Number(p.find((x) => x.type === 'minute')!.value) / 60;
}

function pickZones(now: number): { open: Zone; closed: Zone } {
  const open = ZONES.find((z) => { const h = localHour(now, z.zone); return h >= 7 && h <= 17; });
  const closed = ZONES.find((z) => { const h = localHour(now, z.zone); return h >= 21 || h <= 4; });
  if (!open || !closed) throw new Error('no pair of zones with the window open in one and closed in the other at this hour');
  return { open, closed };
}

/** `n` distinct valid numbers of a zone (the NANP's exchange may not start with 0 or 1). */
function numbersIn(z: Zone, n: number, salt: number): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) {
    const x = String(2_000_000 + salt * 1_000_003 + i * 7).padStart(z.digits, '0').slice(-z.digits);
    const candidate = z.prefix + x;
    if (z.prefix.startsWith('+1') && (candidate[5] === '0' || candidate[5] === '1' || candidate.slice(6, 8) === '11')) continue;
    if (isValidPhoneNumber(candidate)) out.push(candidate);
  }
  return out;
}

async function organization(server: Server, name: string): Promise<{ orgId: number; token: string }> {
  const partner = await api(server, 'GET', '/api/v2/account', {});
  const reseller = await api(server, 'POST', '/api/v2/createReseller', { targetPartnerId: partner.id }, { resellerName: `${name} reseller` });
  const org = await api(server, 'POST', '/api/v2/createOrganization', { targetResellerId: reseller.reseller.id }, { orgName: name });
  const token = await api(server, 'POST', '/api/v2/tokens', { targetAccountId: org.organization.id }, { type: 'admin', description: 'bench' });
  // As many calls at once as a run may (the default 5 parks most of a 50,000-call backlog for a minute at a time).
  await api(server, 'POST', '/api/v2/tasks/limits', { targetAccountId: org.organization.id }, { concurrencyPerRun: MAX_CONCURRENCY });
  return { orgId: org.organization.id, token: token.token.token };
}

async function listNumbers(server: Server, token: string, numbers: readonly string[]): Promise<void> {
  for (let i = 0; i < numbers.length; i += BATCH) {
    const res = await api(server, 'POST', '/api/v2/do-not-call', {}, { numbers: numbers.slice(i, i + BATCH), note: 'bench' }, token);
    if (res.added !== Math.min(BATCH, numbers.length - i)) throw new Error(`listed ${res.added} of ${Math.min(BATCH, numbers.length - i)}`);
  }
}

/**
 * Submits `numbers` in requests of BATCH targets, PARALLEL at once: items/s, the server's CPU time
 * per item (steadier than the rate when other processes share the machine), how many were refused.
 */
async function submitAll(server: Server, token: string, numbers: readonly string[]): Promise<{ perSec: number; cpuUs: number; inserted: number; refused: string[] }> {
  const chunks: string[][] = [];
  for (let i = 0; i < numbers.length; i += BATCH) chunks.push(numbers.slice(i, i + BATCH));
  let next = 0;
  let inserted = 0;
  const refused: string[] = [];
  const t0 = performance.now();
  const cpu0 = server.cpuSeconds();
  await Promise.all(Array.from({ length: PARALLEL }, async () => {
    for (let i = next++; i < chunks.length; i = next++) {
      const res = await api(server, 'POST', '/api/v2/agent/outboundCall', {}, { targets: chunks[i] }, token);
      inserted += res.inserted;
      for (const r of res.refused ?? []) refused.push(r.target);
    }
  }));
  const cpuUs = ((server.cpuSeconds() - cpu0) / numbers.length) * 1e6;
  return { perSec: numbers.length / ((performance.now() - t0) / 1000), cpuUs, inserted, refused };
}

function open(store: Store): Database {
  return openDatabase({ databaseUrl: store.databaseUrl, sqliteFile: path.join(store.dataDir, 'callplane.db') });
}

interface Row { id: string; target: string | null; state: string; provider_ref: string | null; held_reason: string | null; started_at: number | null; attempt: number; error: string | null; attempt_log: string | null }

async function bench(engine: Engine): Promise<void> {
  const store = await createStore(engine);
  const env = { CALLPLANE_SIMULATED_CALL_SECONDS: '0' };
  const server = await startServer(engine, 'api', env, store);
  const startedAt = Date.now();
  const { open: zoneOpen, closed: zoneClosed } = pickZones(startedAt);
  const half = Math.floor(N / 2);
  const numbers = [...numbersIn(zoneOpen, half, 1), ...numbersIn(zoneClosed, N - half, 2)];
  const zoneOf = new Map<string, Zone>(numbers.map((n, i) => [n, i < half ? zoneOpen : zoneClosed]));
  // Every tenth number listed (both zones alike), shuffled into the submission order.
  const listed = numbers.filter((_, i) => i % Math.round(1 / LISTED_SHARE) === 3);
  const order = [...numbers];
  for (let i = order.length - 1; i > 0; i--) { const j = (i * 2_654_435_761) % (i + 1); [order[i], order[j]] = [order[j]!, order[i]!]; }
  let database: Database | undefined;
  try {
    const plain = await organization(server, 'Bench plain');
    const ruled = await organization(server, 'Bench ruled');
    await api(server, 'POST', '/api/v2/tasks/limits', {}, { callingWindow: WINDOW }, ruled.token);
    await listNumbers(server, ruled.token, listed);
    console.log(`${engine.padEnd(8)} ${fmt(N)} numbers: half in ${zoneOpen.zone} (${localHour(startedAt, zoneOpen.zone).toFixed(1)} h there: open), half in ${zoneClosed.zone} ` +
      `(${localHour(startedAt, zoneClosed.zone).toFixed(1)} h: closed); window every day ${WINDOW.start}–${WINDOW.end}; ${fmt(listed.length)} listed before submission`);

    // Interleaved rounds: the same slice of numbers to each organization, the order alternating.
    const per = Math.ceil(order.length / ROUNDS);
    const rates = { plain: [] as number[], ruled: [] as number[] };
    const cpu = { plain: [] as number[], ruled: [] as number[] };
    const refused: string[] = [];
    let insertedRuled = 0;
    for (let r = 0; r < ROUNDS; r++) {
      const slice = order.slice(r * per, (r + 1) * per);
      if (slice.length === 0) break;
      const pair = r % 2 === 0 ? (['plain', 'ruled'] as const) : (['ruled', 'plain'] as const);
      for (const which of pair) {
        const res = await submitAll(server, which === 'plain' ? plain.token : ruled.token, slice);
        rates[which].push(res.perSec);
        cpu[which].push(res.cpuUs);
        if (which === 'ruled') { refused.push(...res.refused); insertedRuled += res.inserted; } else if (res.refused.length) throw new Error('the plain organization refused numbers');
      }
    }
    const ratios = rates.ruled.map((x, i) => x / rates.plain[i]!);
    console.log(`${''.padEnd(8)} submit (${ROUNDS} rounds, ${BATCH} targets a request, ${PARALLEL} at once): without rules ${fmt(median(rates.plain))} items/s, ` +
      `with the rules ${fmt(median(rates.ruled))} items/s; ratio ${median(ratios).toFixed(2)} (per round ${ratios.map((x) => x.toFixed(2)).join(' ')})`);
    console.log(`${''.padEnd(8)} server CPU per item: without rules ${median(cpu.plain).toFixed(0)} µs, with the rules ${median(cpu.ruled).toFixed(0)} µs ` +
      `(with ÷ without ${(median(cpu.ruled) / median(cpu.plain)).toFixed(2)}; the rules' organization inserts 10 % fewer rows: the listed ones are refused)`);
    const listedSet = new Set(listed);
    if (refused.length !== listed.length || refused.some((n) => !listedSet.has(n))) throw new Error(`refused ${refused.length}, listed ${listed.length}: not the same numbers`);
    if (insertedRuled !== N - listed.length) throw new Error(`inserted ${insertedRuled}, expected ${N - listed.length}`);

    // 1 % more listed after submission, half of them where the window is open: never to be dialled.
    const late = numbers.filter((n, i) => !listedSet.has(n) && i % Math.round(1 / LATE_SHARE) === 5);
    await listNumbers(server, ruled.token, late);
    await server.stop();

    database = open(store);
    // The plain organization's tasks are out of the way: due in the year 33658.
    await database.db.updateTable('tasks').set({ run_at: 1e15 }).where('org_id', '=', plain.orgId).execute();
    const dueCount = numbers.filter((n) => zoneOf.get(n) === zoneOpen && !listedSet.has(n)).length;
    const worker = await startWorker(store, env);
    const t0 = performance.now();
    try {
      const deadline = Date.now() + 1_800_000;
      for (;;) {
        const c = await database.db.selectFrom('tasks').select((eb) => eb.fn.countAll<number | string>().as('n'))
          .where('org_id', '=', ruled.orgId).where('state', 'in', ['finished', 'failed', 'canceled']).executeTakeFirstOrThrow();
        if (Number(c.n) >= dueCount) break;
        if (Date.now() > deadline) throw new Error(`only ${c.n} of ${dueCount} due calls ended in 30 minutes`);
        await new Promise((r) => setTimeout(r, 500));
      }
      // A moment more: anything held that the worker might still (wrongly) start would show.
      await new Promise((r) => setTimeout(r, 3000));
    } finally {
      await worker.stop();
    }
    const runS = (performance.now() - t0) / 1000;

    const rows = await database.db.selectFrom('tasks')
      .select(['id', 'target', 'state', 'provider_ref', 'held_reason', 'started_at', 'attempt', 'error', 'attempt_log'])
      .where('org_id', '=', ruled.orgId).execute() as Row[];
    const lateSet = new Set(late);
    const wrong: string[] = [];
    const seen = new Set<string>();
    let dialled = 0; let held = 0; let canceledLate = 0;
    const [ws, we] = [WINDOW.start, WINDOW.end].map((t) => Number(t.slice(0, 2)) + Number(t.slice(3)) / 60);
    for (const r of rows) {
      const n = r.target!;
      seen.add(n);
      const zone = zoneOf.get(n)!;
      const reached = r.provider_ref !== null;
      if (listedSet.has(n)) wrong.push(`${n} was listed before submission yet queued`);
      if (reached) {
        dialled++;
        if (lateSet.has(n)) wrong.push(`${n} was listed after submission and reached the carrier`);
        const h = localHour(Number(r.started_at), zone.zone);
        if (zone !== zoneOpen || h < ws! || h >= we!) wrong.push(`${n} dialled at ${h.toFixed(2)} h in ${zone.zone}, outside its window`);
        if (r.state !== 'finished') wrong.push(`${n} reached the carrier and ended ${r.state}`);
      } else if (zone === zoneClosed) {
        if (r.state !== 'pending' || r.attempt_log !== null || !/^outside the calling window \(every day 06:00–20:00 \(the organization's\), /.test(r.held_reason ?? '')) {
          wrong.push(`${n} outside its window is ${r.state}, held ${JSON.stringify(r.held_reason)}`);
        } else held++;
      } else if (lateSet.has(n)) {
        if (r.state !== 'canceled' || !/^canceled: on the do-not-call list .*nothing was dialled$/.test(r.error ?? '')) wrong.push(`${n} listed after submission is ${r.state}: ${r.error}`);
        else canceledLate++;
      } else {
        wrong.push(`${n} inside its window and not listed was not dialled (${r.state}: ${r.error})`);
      }
    }
    const lateOpen = late.filter((n) => zoneOf.get(n) === zoneOpen).length;
    const expectDialled = dueCount - lateOpen;
    if (dialled !== expectDialled) wrong.push(`${dialled} calls reached the carrier, expected ${expectDialled}`);
    if (held !== N - half - listed.filter((n) => zoneOf.get(n) === zoneClosed).length) wrong.push(`${held} held`);
    console.log(`${''.padEnd(8)} run: ${fmt(dialled)} dialled in ${runS.toFixed(1)} s (${fmt(dialled / runS)} calls/s, one worker), ${fmt(canceledLate)} listed after submission canceled before dialling, ` +
      `${fmt(held)} held for their window, ${fmt(listed.length)} refused at submission; dialled wrongly: ${wrong.length}`);
    if (wrong.length) throw new Error(`dialled or held wrongly:\n${wrong.slice(0, 20).join('\n')}`);
  } finally {
    await server.stop().catch(() => {});
    await database?.close();
    await store.drop();
  }
}

const engines = ENGINES.filter((e) => !process.env.BENCH_ENGINE || e === process.env.BENCH_ENGINE);
console.log(`# bench/campaigns — engines: ${engines.join(', ')}; ${fmt(N)} call tasks; load average at start ${os.loadavg().map((l) => l.toFixed(1)).join(' ')} on ${os.cpus().length} cores`);
for (const engine of engines) await bench(engine);
