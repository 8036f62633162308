// GET /api/v2/logs on a large history: 1,000,000 conversations of one organization (100 days,
// 10,000 a day, three agents, 5,000 rooms) plus 100,000 of another, seeded straight into a
// temporary database in batched multi-row inserts; then the first page, filtered pages, deep pages
// and a CSV export are timed through the real HTTP app (the test harness's app, listening on
// loopback), each run several times, median printed. SQLite always; PostgreSQL too when
// TEST_DATABASE_URL is set (the harness makes a scratch database there).
//   npx tsx bench/logs.ts
//   BENCH_CONVERSATIONS=200000 BENCH_RUNS=3 BENCH_ENGINES=postgres TEST_DATABASE_URL=… npx tsx bench/logs.ts
import crypto from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import type { ConversationChannel, ConversationOutcome, Executor } from '../src/db/types.ts';
import { ENGINES, startHarness, type Harness } from '../test/helpers/harness.ts';
import { fmt, median } from './lib.ts';

const TOTAL = Number(process.env.BENCH_CONVERSATIONS ?? 1_000_000);
const OTHER = Math.round(TOTAL / 10);
const DAYS = 100;
const ROOMS = 5000;
const RUNS = Number(process.env.BENCH_RUNS ?? 7);
const ROWS_PER_INSERT = 400;
const ROWS_PER_TRANSACTION = 50_000;

const CHANNELS: ConversationChannel[] = ['sms', 'sms', 'sms', 'sms', 'sms', 'api', 'api', 'voice', 'voice', 'web', 'sip'];
const OUTCOMES: (ConversationOutcome | null)[] = ['completed', 'completed', 'completed', 'completed', 'no_response', 'hung_up', 'ended_by_agent', 'transferred', 'failed', null];

/** A deterministic pseudo-random sequence (the same history on every run). */
function prng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function seedRooms(db: Executor, orgId: number, agents: number[], n: number, now: number): Promise<{ id: number; account_id: number; counterpart: string }[]> {
  const rows = Array.from({ length: n }, (_, i) => ({
    org_id: orgId, account_id: agents[i % agents.length], counterpart: `+1415${String(orgId % 100).padStart(2, '0')}${String(i).padStart(5, '0')}`,
    counterpart_kind: 'phone' as const, display_name: i % 7 === 0 ? `Caller ${i}` : null, last_message: 'hello', last_message_at: now,
    unread: i % 3, junk: 0, junk_reason: null, junk_override: null, created_at: now, updated_at: now,
  }));
  for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) await db.insertInto('conversation_rooms').values(rows.slice(i, i + ROWS_PER_INSERT)).execute();
  return db.selectFrom('conversation_rooms').select(['id', 'account_id', 'counterpart']).where('org_id', '=', orgId).orderBy('id').execute();
}

async function seedConversations(h: Harness, orgId: number, rooms: { id: number; account_id: number; counterpart: string }[], n: number, now: number, seed: number): Promise<void> {
  const rand = prng(seed);
  const span = DAYS * 86_400_000;
  const db = h.database.db;
  for (let done = 0; done < n;) {
    const inTx = Math.min(ROWS_PER_TRANSACTION, n - done);
    await db.transaction().execute(async (tx) => {
      for (let i = 0; i < inTx; i += ROWS_PER_INSERT) {
        const batch = Array.from({ length: Math.min(ROWS_PER_INSERT, inTx - i) }, (_, k) => {
          const index = done + i + k;
          const room = rooms[Math.floor(rand() * rooms.length)];
          // Spread evenly over the span, newest last: index 0 is DAYS days ago.
          const started = now - span + Math.floor((index / n) * span) + Math.floor(rand() * 1000);
          const outcome = OUTCOMES[Math.floor(rand() * OUTCOMES.length)];
          const duration = outcome ? 5_000 + Math.floor(rand() * 600_000) : null;
          const channel = CHANNELS[Math.floor(rand() * CHANNELS.length)];
          return {
            id: crypto.randomUUID(), room_id: room.id, org_id: orgId, account_id: room.account_id, channel,
            direction: rand() < 0.8 ? 'inbound' as const : 'outbound' as const, counterpart: room.counterpart, agent_version: null,
            engine: 'model' as const, provider: 'default', model: 'gpt-4o-mini', task_id: null, carrier_ref: null,
            started_at: started, last_activity_at: started + (duration ?? 0), ended_at: outcome ? started + duration! : null,
            outcome, outcome_detail: null, duration_ms: duration, messages_in: 1 + Math.floor(rand() * 6), messages_out: 1 + Math.floor(rand() * 6),
            model_calls: 2, tokens_in: 400 + Math.floor(rand() * 2000), tokens_out: 50 + Math.floor(rand() * 300), state: '{}',
            created_at: started, updated_at: started,
          };
        });
        await tx.insertInto('conversations').values(batch).execute();
      }
    });
    done += inTx;
  }
}

async function timed(url: string, runs = RUNS): Promise<{ ms: number; body: any; bytes: number }> {
  const times: number[] = [];
  let body: any;
  let bytes = 0;
  // One warm-up request, then the measured ones.
  for (let i = 0; i <= runs; i++) {
    const t0 = performance.now();
    const res = await fetch(url);
    const text = await res.text();
    const ms = performance.now() - t0;
    if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${text.slice(0, 300)}`);
    if (i > 0) times.push(ms);
    bytes = text.length;
    body = res.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : text;
  }
  return { ms: median(times), body, bytes };
}

console.log(`# bench/logs — ${fmt(TOTAL)} conversations of one organization over ${DAYS} days (+${fmt(OTHER)} of another), median of ${RUNS} requests each`);
const only = process.env.BENCH_ENGINES?.split(',');
for (const engine of ENGINES.filter((e) => !only || only.includes(e))) {
  const h = await startHarness(engine);
  try {
    const now = Date.now();
    const reseller = await h.reseller();
    const org = await h.organization(reseller.id);
    const agents = [org.agentId, (await h.agent(org.id)).id, (await h.agent(org.id)).id];
    const agentToken = await h.tokenFor(agents[1]);
    const other = await h.organization(reseller.id);
    const t0 = performance.now();
    const rooms = await seedRooms(h.database.db, org.id, agents, ROOMS, now);
    await seedConversations(h, org.id, rooms, TOTAL, now, 1);
    await seedConversations(h, other.id, await seedRooms(h.database.db, other.id, [other.agentId], 500, now), OTHER, now, 2);
    // As autovacuum leaves a table that has stood a while: statistics, and a visibility map that
    // lets the counts and id pages be index-only scans.
    if (engine === 'postgres') await sql`vacuum analyze conversations`.execute(h.database.db);
    const seedS = (performance.now() - t0) / 1000;
    console.log(`${engine}: seeded ${fmt(TOTAL + OTHER)} conversations in ${seedS.toFixed(1)} s (${fmt((TOTAL + OTHER) / seedS)}/s)`);

    await h.app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}/api/v2/logs?token=${org.token}`;
    const all = `&start=${Math.floor((now - DAYS * 86_400_000) / 1000) - 1}`;
    const cases: [string, string, number?][] = [
      ['first page (default: last 7 days, 20 rows)', base],
      ['first page, all 100 days', base + all],
      ['first page, all 100 days, pageSize 1000', `${base}${all}&pageSize=1000`],
      ['filtered: channel=voice&outcome=failed, 7 days', `${base}&channel=voice&outcome=failed`],
      ['filtered: channel=voice&outcome=failed, all 100 days', `${base}${all}&channel=voice&outcome=failed`],
      ['filtered: agentId (a third of the rows), 7 days', `${base}&agentId=camp${agents[1]}`],
      ['agent token (its own third), all 100 days', `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}/api/v2/logs?token=${agentToken}${all}`],
      ['filtered: roomId (one room), all 100 days', `${base}${all}&roomId=${rooms[10].account_id}:${rooms[10].id}`],
      ['deep page: all 100 days, page 5,000 (offset 100k)', `${base}${all}&page=5000`],
      ['deep page: all 100 days, page 49,999 (offset ~1M)', `${base}${all}&page=${Math.floor(TOTAL / 20) - 1}`],
      ['CSV export, 7 days (every row, streamed)', `${base}&format=csv`, 3],
    ];
    for (const [label, url, runs] of cases) {
      const r = await timed(url, runs);
      const rows = typeof r.body === 'string' ? r.body.split('\r\n').length - 2 : r.body.count;
      const total = typeof r.body === 'string' ? '' : `, totalCount ${fmt(r.body.totalCount)}`;
      console.log(`${engine.padEnd(8)} ${label.padEnd(56)} ${r.ms.toFixed(1).padStart(8)} ms  (${fmt(rows)} rows${total}, ${fmt(r.bytes)} bytes)`);
    }
  } finally {
    await h.close();
  }
}
