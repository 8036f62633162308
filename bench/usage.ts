// GET /api/v2/stats/usage on a large history. The usage query reads the usage_daily rollups only,
// so what it costs depends on the rows of the range (organizations × days × metrics), not on how
// many records were counted. This fills the rollups of BENCH_CONVERSATIONS conversations (default
// 1,000,000) of one organization over 365 days, with the calls, texts, tasks and tokens that go
// with them, as the write paths would have left them (aggregated here, then inserted directly in
// multi-row inserts), plus a year of rows for BENCH_ORGS other organizations of one reseller
// (default 50). It then times, through the real HTTP app (the test harness's, listening on
// loopback; the client in this process), each request RUNS times (default 7) after a warm-up, and
// prints the median and the ratio to GET /api/v2/account (an authenticated read) in the same run.
// It also times the hot path's write: usageRepo.add (the day's and the month's upserts) for 2,000
// records. The rollups are filled as the write path leaves them: usage_daily, and usage_monthly
// (the sums per local month) beside it.
//   npm run bench:usage
//   BENCH_ORGS=200 BENCH_ENGINES=postgres TEST_DATABASE_URL=… npx tsx bench/usage.ts
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { TaskRow } from '../src/db/types.ts';
import { cachedEntitlements, planAllowance } from '../src/modules/billing/entitlements.ts';
import { usageRepo } from '../src/modules/billing/repository.ts';
import { createTaskEngine } from '../src/modules/tasks/queue-hooks.ts';
import { taskRepo } from '../src/modules/tasks/repository.ts';
import { uncachedSubscribers } from '../src/modules/tasks/subscribers.ts';
import { checkTask } from '../src/modules/tasks/validation.ts';
import { ENGINES, startHarness, type Harness } from '../test/helpers/harness.ts';
import { median } from './lib.ts';

const CONVERSATIONS = Number(process.env.BENCH_CONVERSATIONS ?? 1_000_000);
const ORGS = Number(process.env.BENCH_ORGS ?? 50);
const RUNS = Number(process.env.BENCH_RUNS ?? 7);
const DAYS = 365;
const WRITES = 2_000;
const ROWS_PER_INSERT = 500;
/** Calls claimed and finished per plan in the admission part. */
const ADMITTED = Number(process.env.BENCH_ADMITTED ?? 2_000);

/**
 * The claim path with included amounts: ADMITTED calls of one organization claimed 5 at a time (its
 * concurrency) and finished with 30 s each, through the task engine with the process's cached
 * entitlements, as a worker would; µs per call from claim to finish. `planId` decides whether its
 * amounts are enforced (pplan-free: none sold past them, so each admission reads the period's
 * rollups) or not (pplan-enterprise sells overage of everything: nothing more is read).
 */
async function admission(h: Harness, resellerId: number, planId: string): Promise<number> {
  const o = await h.organization(resellerId, { productPlanId: planId });
  const db = h.database.db;
  const now = Date.now();
  const rows: TaskRow[] = [];
  for (let i = 0; i < ADMITTED; i++) {
    const checked = checkTask({ type: 'call', target: `+1415555${String(i % 10_000).padStart(4, '0')}` }, { orgId: o.id, defaultAccountId: o.agentId, allowedAccount: () => false, now });
    if (!checked.ok) throw new Error(checked.message);
    rows.push(checked.task);
  }
  await db.transaction().execute((tx) => taskRepo.insert(tx, rows, now, uncachedSubscribers));
  const engine = createTaskEngine({ workerId: `bench-${planId}`, subscribers: uncachedSubscribers, allowance: planAllowance(cachedEntitlements(db)), serialWrites: h.database.serialWrites });
  const result = JSON.stringify({ durationSeconds: 30 });
  const t0 = performance.now();
  let done = 0;
  while (done < ADMITTED) {
    const claimed = await engine.claim(db, 5);
    if (claimed.length === 0) throw new Error(`${planId}: nothing to claim after ${done} (held: the plan's included amounts?)`);
    await engine.completeMany(db, claimed.map((row) => ({ lease: row, state: 'finished' as const, set: { result } })));
    done += claimed.length;
  }
  return ((performance.now() - t0) * 1000) / ADMITTED;
}

const dayOf = (i: number) => new Date(Date.UTC(2026, 0, 1) + i * 86_400_000).toISOString().slice(0, 10);

/** One day's rollups for `n` conversations: per conversation about 1.5 calls of 2 minutes, 2 texts, 3 tasks, 900 tokens. */
function dayRows(orgId: number, day: string, n: number) {
  const calls = Math.round(n * 1.5);
  return [
    { metric: 'conversations', n }, { metric: 'calls', n: calls }, { metric: 'callSeconds', n: calls * 95 }, { metric: 'callMinutes', n: calls * 2 },
    { metric: 'texts', n: n * 2 }, { metric: 'tasks', n: n * 3 + calls }, { metric: 'modelTokens', n: n * 900 },
  ].map((m) => ({ org_id: orgId, day, ...m }));
}

/** The day rows, and the month rows the write path keeps beside them (usage_monthly: their sums per local month). */
async function insertRows(h: Harness, rows: { org_id: number; day: string; metric: string; n: number }[]): Promise<number> {
  const months = new Map<string, { org_id: number; month: string; metric: string; n: number }>();
  for (const r of rows) {
    const key = `${r.org_id}:${r.day.slice(0, 7)}:${r.metric}`;
    const m = months.get(key);
    if (m) m.n += r.n;
    else months.set(key, { org_id: r.org_id, month: r.day.slice(0, 7), metric: r.metric, n: r.n });
  }
  const monthRows = [...months.values()];
  await h.database.db.transaction().execute(async (tx) => {
    for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) await tx.insertInto('usage_daily').values(rows.slice(i, i + ROWS_PER_INSERT)).execute();
    for (let i = 0; i < monthRows.length; i += ROWS_PER_INSERT) await tx.insertInto('usage_monthly').values(monthRows.slice(i, i + ROWS_PER_INSERT)).execute();
  });
  return monthRows.length;
}

const only = process.env.BENCH_ENGINES?.split(',');
console.log(`# bench/usage — ${CONVERSATIONS.toLocaleString('en-US')} conversations of one organization over ${DAYS} days, ${ORGS} other organizations, median of ${RUNS}`);
for (const engine of ENGINES.filter((e) => !only || only.includes(e))) {
  const h = await startHarness(engine);
  try {
    const r = await h.reseller();
    const big = await h.organization(r.id, { timezone: 'America/New_York' });
    const others = [];
    for (let i = 0; i < ORGS; i++) others.push(await h.organization(r.id));

    const t0 = performance.now();
    const perDay = Math.floor(CONVERSATIONS / DAYS);
    const rows = [];
    for (let d = 0; d < DAYS; d++) rows.push(...dayRows(big.id, dayOf(d), perDay + (d < CONVERSATIONS % DAYS ? 1 : 0)));
    for (const o of others) for (let d = 0; d < DAYS; d++) rows.push(...dayRows(o.id, dayOf(d), 50 + (d % 7)));
    const monthRows = await insertRows(h, rows);
    const seeded = performance.now() - t0;

    // The hot path's write: one usage upsert per record, each its own transaction (as a task's end would be).
    const w0 = performance.now();
    for (let i = 0; i < WRITES; i++) await h.database.db.transaction().execute((tx) => usageRepo.add(tx, big.id, Date.now(), { conversations: 1 }));
    const perWrite = (performance.now() - w0) / WRITES;

    await h.app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
    const time = async (url: string, token: string): Promise<number> => {
      const times: number[] = [];
      for (let i = 0; i <= RUNS; i++) {
        const s = performance.now();
        const res = await fetch(`${base}${url}`, { headers: { authorization: `Bearer ${token}` } });
        const body = await res.json() as { success?: boolean };
        if (res.status !== 200 || !body.success) throw new Error(`${url}: ${res.status} ${JSON.stringify(body)}`);
        if (i > 0) times.push(performance.now() - s);
      }
      return median(times);
    };
    const baseline = await time('/api/v2/account', big.token);
    const cases: [string, string, string][] = [
      ['organization, current period (a month), costs', '/api/v2/stats/usage?combineCosts=true', big.token],
      ['organization, a year, by day, costs', '/api/v2/stats/usage?combineCosts=true&timeseries=true&startDate=2026-01-01&endDate=2026-12-31', big.token],
      ['organization, a year, by month', '/api/v2/stats/usage?timeseries=true&frequency=month&startDate=2026-01-01&endDate=2026-12-31', big.token],
      [`reseller (${ORGS + 1} organizations), a month, costs`, '/api/v2/stats/usage?combineCosts=true&startDate=2026-03-01&endDate=2026-03-31', r.token],
      [`reseller (${ORGS + 1} organizations), a year, costs`, '/api/v2/stats/usage?combineCosts=true&startDate=2026-01-01&endDate=2026-12-31', r.token],
    ];
    console.log(`[${engine}] seeded ${rows.length.toLocaleString('en-US')} day and ${monthRows.toLocaleString('en-US')} month rollup rows in ${(seeded / 1000).toFixed(1)} s; ` +
      `usageRepo.add (the day's and the month's upserts, own transaction): ${(perWrite * 1000).toFixed(0)} µs a record`);
    console.log(`  baseline GET /api/v2/account: ${baseline.toFixed(1)} ms`);
    for (const [label, url, token] of cases) {
      const t = await time(url, token);
      console.log(`  ${label.padEnd(48)} ${t.toFixed(1).padStart(6)} ms  (${(t / baseline).toFixed(1)}× baseline)`);
    }
    if (ADMITTED > 0) {
      // A plan whose included minutes allow ADMITTED calls of 30 s without overage, to measure the check, not a hold.
      await h.call('PUT', '/api/v2/product/catalog/plan/pplan-bench-enforced', { token: r.token, body: {
        name: 'Bench enforced', monthlyPrice: 0, yearlyPrice: 0,
        included: { callMinutes: ADMITTED * 2, texts: 0, tasks: ADMITTED * 2, conversations: null, modelTokens: null },
        overage: { callMinute: null, text: null, task: null, conversation: null, modelTokensPer1k: null }, limits: { concurrencyPerRun: 5 },
      } });
      // Alternated, twice each, so outside load weighs on both alike.
      const sold: number[] = []; const enforced: number[] = [];
      for (let i = 0; i < 2; i++) {
        sold.push(await admission(h, r.id, 'pplan-enterprise'));
        enforced.push(await admission(h, r.id, 'pplan-bench-enforced'));
      }
      console.log(`  claim → finish of a call, 5 at a time: ${Math.min(...sold).toFixed(0)} µs with overage sold (nothing read), ` +
        `${Math.min(...enforced).toFixed(0)} µs with included amounts enforced (the period's rollups read at each admission) — best of 2`);
    }
  } finally {
    await h.close();
  }
}
