// The task queue under load, per engine, with real processes:
//   submit   — POST /api/v2/tasks (a ping, and a call with a target) with an organization token,
//              against /healthz on the same process in the same run: `serve --role api` (no worker
//              competes with the API for its event loop), then `serve --role all`, the default,
//              whose worker runs the pings as they are submitted (issue 15's figure).
//   drain    — 10,000 pings committed in one transaction while `serve --role worker` processes
//              wait (1, then 2 on PostgreSQL; SQLite has its one worker): tasks/s until all finished.
//   lateness — 500 pings scheduled over the next ~10 s on `serve --role all`: started_at minus
//              scheduled_for, p50 / p99 / max, and any start before its time.
//   pgboss   — (PostgreSQL) pg-boss 10 draining as many no-op jobs on the same server, against
//              callplane's drain of as many pings, in the same run: issue 15's baseline
// Usage: npm run bench:tasks [-- submit drain pgboss lateness]   (all by default)
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import PgBoss from 'pg-boss';
import { openDatabase, type Database } from '../src/db/index.ts';
import type { TaskRow } from '../src/db/types.ts';
import { checkTask } from '../src/modules/tasks/validation.ts';
import { TASKS } from '../src/modules/tasks/queue-hooks.ts';
import { taskRepo } from '../src/modules/tasks/repository.ts';
import { uncachedSubscribers } from '../src/modules/tasks/subscribers.ts';
import { BULK_ROWS } from '../src/modules/tasks/service.ts';
import { notifyQueue } from '../src/queue/waker.ts';
import { createScratchPgDatabase } from '../test/helpers/scratch-pg.ts';
import { api, createStore, ENGINES, fmt, measure, median, percentile, PG_URL, postgresCpuSeconds, startServer, startWorker, type Engine, type Server, type Store } from './lib.ts';

const seconds = Number(process.env.BENCH_SECONDS ?? 8);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const DRAIN_N = Number(process.env.BENCH_DRAIN_TASKS ?? 10_000);
/** How many pings a drain commits (the pgboss part sets it to its own count). */
let drainN = DRAIN_N;
const LATE_N = Number(process.env.BENCH_LATENESS_TASKS ?? 500);
const LATE_SPREAD_S = 10;
const parts = process.argv.slice(2).filter((a) => a !== '--');
const run = (part: string) => parts.length === 0 || parts.includes(part);

/** A reseller, an organization (with its default agent) and a token of the organization. */
async function organization(server: Server): Promise<{ orgId: number; agentId: number; token: string }> {
  const partner = await api(server, 'GET', '/api/v2/account', {});
  const reseller = await api(server, 'POST', '/api/v2/createReseller', { targetPartnerId: partner.id }, { resellerName: 'Bench reseller' });
  const org = await api(server, 'POST', '/api/v2/createOrganization', { targetResellerId: reseller.reseller.id }, { orgName: 'Bench org' });
  const token = await api(server, 'POST', '/api/v2/tokens', { targetAccountId: org.organization.id }, { type: 'admin', description: 'bench' });
  return { orgId: org.organization.id, agentId: org.organization.defaultAccountId, token: token.token.token };
}

function open(store: Store): Database {
  return openDatabase({ databaseUrl: store.databaseUrl, sqliteFile: path.join(store.dataDir, 'callplane.db') });
}

async function finishedCount(database: Database, orgId: number): Promise<number> {
  const row = await database.db.selectFrom('org_task_counts').select(['finished', 'failed', 'canceled'])
    .where('org_id', '=', orgId).executeTakeFirst();
  if (row && Number(row.failed) + Number(row.canceled) > 0) throw new Error(`pings failed or were canceled: ${JSON.stringify(row)}`);
  return row ? Number(row.finished) : 0;
}

async function waitFinished(database: Database, orgId: number, n: number, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if ((await finishedCount(database, orgId)) >= n) return performance.now();
    if (Date.now() > deadline) throw new Error(`only ${await finishedCount(database, orgId)} of ${n} tasks finished in ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Rounds of /healthz, ping and call, each `seconds / ROUNDS` long: other load on the machine then
 * weighs on all three alike, and the ratio printed is the median of the rounds' ratios.
 */
async function submit(engine: Engine, role: 'api' | 'all'): Promise<void> {
  const server = await startServer(engine, role);
  try {
    const org = await organization(server);
    const post = `${server.url}/api/v2/tasks?token=${org.token}`;
    const ping = JSON.stringify({ type: 'ping' });
    const call = JSON.stringify({ type: 'call', target: '+14155552671' });
    await measure(`${server.url}/healthz`, { seconds: 2 }); // warm-up
    await measure(post, { seconds: 2, method: 'POST', body: ping });
    const each = Math.max(1, Math.round(seconds / ROUNDS));
    // Requests/s per round, and the server's CPU time per request (steadier than throughput when
    // other processes share the machine, though it leaves out waiting on disk). Each POST round
    // follows a /healthz round of its own, and its ratio is against that one.
    const runs = { ping: [] as number[], call: [] as number[] };
    const health = { ping: [] as number[], call: [] as number[] };
    const cpu = { health: [] as number[], ping: [] as number[], call: [] as number[] };
    const p99 = { ping: [] as number[], call: [] as number[] };
    // Role all runs what was submitted: a /healthz round starts once the pings of the round before
    // have all run, so it measures an idle server, not one still draining a backlog.
    const pingsLeft = async () => {
      let n = 0;
      for (const state of ['pending', 'running']) {
        n += (await api(server, 'GET', '/api/v2/tasks', { type: 'ping', state, limit: 1 }, undefined, org.token)).tasks.length;
      }
      return n;
    };
    const drained = async () => {
      for (let i = 0; role === 'all' && (await pingsLeft()) > 0; i++) {
        if (i > 600) throw new Error('the pings submitted did not all run within 60 s');
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    const round = async (name: 'ping' | 'call', body: string) => {
      await drained();
      for (const [kind, url, b] of [['health', `${server.url}/healthz`, undefined], [name, post, body]] as const) {
        const before = server.cpuSeconds();
        const m = await measure(url, { seconds: each, ...(b ? { method: 'POST', body: b } : {}) });
        if (m.non2xx || m.errors) throw new Error(`${kind} failed: ${m.non2xx} non-2xx, ${m.errors} errors`);
        cpu[kind].push(((server.cpuSeconds() - before) / (m.requestsPerSec * each)) * 1e6);
        if (kind === 'health') health[name].push(m.requestsPerSec);
        else { runs[name].push(m.requestsPerSec); p99[name].push(m.p99); }
      }
    };
    // Interleaved with the API role. With role all the ping rounds come first: the calls submitted
    // here (thousands a second to one organization that may run 5 at once, each 3 s long on the
    // SIMULATED carrier) build a backlog that cannot start, parked and brought back a minute later
    // (src/modules/tasks/queue-hooks.ts), so the ping figure is the submission and run of pings
    // alone. The role-all call figure is against a /healthz measured while that backlog is parked.
    if (role === 'api') {
      for (let r = 0; r < ROUNDS; r++) { await round('ping', ping); await round('call', call); }
    } else {
      for (let r = 0; r < ROUNDS; r++) await round('ping', ping);
      for (let r = 0; r < ROUNDS; r++) await round('call', call);
    }
    const ratios = (name: 'ping' | 'call') => runs[name].map((x, i) => x / health[name][i]);
    const ratio = (name: 'ping' | 'call') => median(ratios(name)).toFixed(2);
    const us = (xs: number[]) => `${median(xs).toFixed(0)} µs`;
    console.log(`${engine.padEnd(8)} role ${role.padEnd(3)} /healthz ${fmt(median([...health.ping, ...health.call]))} req/s (${us(cpu.health)} CPU/req) | ` +
      `POST ping ${fmt(median(runs.ping))} req/s (p99 ${median(p99.ping)} ms, ${us(cpu.ping)} CPU/req) ratio ${ratio('ping')} | ` +
      `POST call+target ${fmt(median(runs.call))} req/s (p99 ${median(p99.call)} ms, ${us(cpu.call)} CPU/req) ratio ${ratio('call')}`);
    console.log(`${''.padEnd(8)} per-round ratios: ping ${ratios('ping').map((x) => x.toFixed(2)).join(' ')}, call ${ratios('call').map((x) => x.toFixed(2)).join(' ')}; ` +
      `CPU-per-request ratio (healthz / ping) ${(median(cpu.health) / median(cpu.ping)).toFixed(2)}, (healthz / call) ${(median(cpu.health) / median(cpu.call)).toFixed(2)}`);
  } finally {
    await server.stop();
  }
}

/**
 * Commits DRAIN_N pings at once while `workers` worker processes wait; tasks/s until all finished.
 * `subscribed`: the organization has a task subscription (to a receiver in this process that
 * answers 200), so every state change writes an outbox event and the workers deliver it too.
 */
async function drain(engine: Engine, workers: number, opts: { subscribed?: boolean } = {}): Promise<number> {
  const store = await createStore(engine);
  let received = 0;
  const receiver = opts.subscribed ? http.createServer((req, res) => { received++; req.resume(); req.on('end', () => res.end('ok')); }) : undefined;
  if (receiver) await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const env: Record<string, string> = receiver ? { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' } : {};
  const setup = await startServer(engine, 'api', env, store);
  let org: Awaited<ReturnType<typeof organization>>;
  try {
    org = await organization(setup);
    if (receiver) {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/events`;
      await api(setup, 'POST', '/api/v2/webhooks', {}, { url, label: 'bench', type: 'task' }, org.token);
    }
  } finally {
    await setup.stop(); // one process per SQLite DATA_DIR: the API must be gone before the worker starts
  }
  const procs = await Promise.all(Array.from({ length: workers }, () => startWorker(store, env)));
  const database = open(store);
  try {
    const now = Date.now();
    const ctx = { orgId: org.orgId, defaultAccountId: org.agentId, allowedAccount: () => false, now };
    const rows: TaskRow[] = [];
    for (let i = 0; i < drainN; i++) {
      const checked = checkTask({ type: 'ping' }, ctx);
      if (!checked.ok) throw new Error(checked.message);
      rows.push(checked.task);
    }
    await database.db.transaction().execute(async (tx) => {
      await taskRepo.insert(tx, rows, now, uncachedSubscribers);
      await notifyQueue(tx, TASKS);
    });
    const committed = performance.now();
    // As the tasks service does after a bulk insert (src/modules/tasks/service.ts added()): in the
    // background, while the workers already claim.
    const refreshed = drainN >= BULK_ROWS ? database.refreshStatistics(['tasks', 'task_events']) : Promise.resolve();
    const cpu0 = procs.map((p) => p.cpuSeconds());
    const pg0 = engine === 'postgres' ? postgresCpuSeconds() : 0;
    const done = await waitFinished(database, org.orgId, drainN, 300_000);
    await refreshed;
    const workerCpu = procs.reduce((sum, p, i) => sum + p.cpuSeconds() - cpu0[i], 0);
    const pgCpu = engine === 'postgres' ? postgresCpuSeconds() - pg0 : 0;
    const span = await database.db.selectFrom('tasks')
      .select((eb) => [eb.fn.min('started_at').as('first'), eb.fn.max('finished_at').as('last'), eb.fn.max('attempt').as('attempts')])
      .where('org_id', '=', org.orgId).executeTakeFirstOrThrow();
    const busyS = (Number(span.last) - Number(span.first)) / 1000;
    const wallS = (done - committed) / 1000;
    console.log(`${engine.padEnd(8)} ${workers} worker${workers > 1 ? 's' : ' '} ${fmt(drainN)} pings${receiver ? ` (task subscription: ${fmt(received)} events delivered by then)` : ''}: ` +
      `${fmt(drainN / busyS)} tasks/s (first start → last finish ${busyS.toFixed(2)} s; commit → all seen finished ${wallS.toFixed(2)} s; max attempts ${span.attempts}); ` +
      `CPU per task: workers ${(workerCpu / drainN * 1e6).toFixed(0)} µs` +
      (engine === 'postgres' ? `, PostgreSQL server ${(pgCpu / drainN * 1e6).toFixed(0)} µs (CPU-seconds per second: ${((workerCpu + pgCpu) / wallS).toFixed(2)} of ${os.cpus().length})` : ''));
    if (receiver) {
      // Then every event's delivery: three per ping (pending, running, finished).
      const want = 3 * drainN;
      const deadline = Date.now() + 300_000;
      for (;;) {
        const r = await database.db.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll<number>().as('n'))
          .where('org_id', '=', org.orgId).where('state', '=', 'finished').executeTakeFirstOrThrow();
        if (Number(r.n) >= want) break;
        if (Date.now() > deadline) throw new Error(`only ${r.n} of ${want} deliveries finished`);
        await new Promise((res) => setTimeout(res, 50));
      }
      const d = await database.db.selectFrom('webhook_deliveries')
        .select((eb) => [eb.fn.min('created_at').as('first'), eb.fn.max('finished_at').as('last')])
        .where('org_id', '=', org.orgId).executeTakeFirstOrThrow();
      const spanS = (Number(d.last) - Number(d.first)) / 1000;
      console.log(`${''.padEnd(8)} and its ${fmt(want)} deliveries: ${fmt(want / spanS)} deliveries/s (first created → last delivered ${spanS.toFixed(2)} s; the receiver counted ${fmt(received)})`);
    }
    return drainN / busyS;
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
    await database.close();
    await store.drop();
    receiver?.close();
  }
}

/**
 * The baseline of issue 15: pg-boss 10 draining the same number of no-op jobs on the same
 * PostgreSQL server (a scratch database of its own), 4 workers each fetching batches of 500, in
 * this process. Jobs/s = N ÷ (first handler call → last job seen completed).
 */
async function pgBossDrain(n: number): Promise<number> {
  const scratch = await createScratchPgDatabase(PG_URL!, 'callplane_bench_pgboss');
  const boss = new PgBoss({ connectionString: scratch.url, max: 8 });
  boss.on('error', (err: Error) => console.error('pg-boss:', err.message));
  try {
    await boss.start();
    await boss.createQueue('noop');
    for (let i = 0; i < n; i += 1000) {
      await boss.insert(Array.from({ length: Math.min(1000, n - i) }, () => ({ name: 'noop', data: {} })));
    }
    const sql = new pg.Client({ connectionString: scratch.url });
    await sql.connect();
    try {
      let first = 0;
      const cpu0 = process.cpuUsage();
      const pg0 = postgresCpuSeconds();
      for (let w = 0; w < 4; w++) {
        await boss.work('noop', { batchSize: 500, pollingIntervalSeconds: 0.5 }, async () => { first ||= performance.now(); });
      }
      let done = 0;
      const deadline = Date.now() + 300_000;
      while (Date.now() < deadline) {
        const r = await sql.query<{ n: string }>("select count(*) as n from pgboss.job where name = 'noop' and state = 'completed'");
        if (Number(r.rows[0]!.n) >= n) { done = performance.now(); break; }
        await new Promise((r2) => setTimeout(r2, 20));
      }
      if (!done) throw new Error('pg-boss did not finish in 300 s');
      const cpu = process.cpuUsage(cpu0);
      const pgCpu = postgresCpuSeconds() - pg0;
      const seconds = (done - first) / 1000;
      console.log(`pg-boss  4 workers × batch 500, ${fmt(n)} no-op jobs: ${fmt(n / seconds)} jobs/s (first handler → all completed ${seconds.toFixed(2)} s); ` +
        `CPU per job: pg-boss's process ${(((cpu.user + cpu.system) / 1e6) / n * 1e6).toFixed(0)} µs, PostgreSQL server ${(pgCpu / n * 1e6).toFixed(0)} µs`);
      return n / seconds;
    } finally {
      await sql.end();
    }
  } finally {
    await boss.stop({ graceful: false, wait: true }).catch(() => {});
    await scratch.drop();
  }
}

async function lateness(engine: Engine): Promise<void> {
  const store = await createStore(engine);
  const server = await startServer(engine, 'all', {}, store);
  const database = open(store);
  try {
    const org = await organization(server);
    // scheduledFor is whole unix seconds (the contract's unit): LATE_N pings over LATE_SPREAD_S seconds.
    const base = Math.ceil(Date.now() / 1000) + 3;
    let next = 0;
    const post = async () => {
      for (let i = next++; i < LATE_N; i = next++) {
        await api(server, 'POST', '/api/v2/tasks', {}, { type: 'ping', scheduledFor: base + (i % LATE_SPREAD_S) }, org.token);
      }
    };
    await Promise.all(Array.from({ length: 16 }, post));
    if (Date.now() >= base * 1000) console.log('  (warning: submissions were still running when the first ping was due)');
    await waitFinished(database, org.orgId, LATE_N, 60_000 + LATE_SPREAD_S * 1000);
    const rows = await database.db.selectFrom('tasks').select(['started_at', 'scheduled_for'])
      .where('org_id', '=', org.orgId).execute();
    const late = rows.map((r) => Number(r.started_at) - Number(r.scheduled_for)).sort((a, b) => a - b);
    const early = late.filter((ms) => ms < 0).length;
    console.log(`${engine.padEnd(8)} ${LATE_N} pings over ${LATE_SPREAD_S} s (${LATE_N / LATE_SPREAD_S} due per second): lateness ` +
      `p50 ${percentile(late, 50)} ms, p99 ${percentile(late, 99)} ms, max ${late[late.length - 1]} ms, min ${late[0]} ms; ` +
      `started early: ${early}`);
  } finally {
    await database.close();
    await server.stop();
    await store.drop();
  }
}

console.log(`# bench/tasks — engines: ${ENGINES.join(', ')}; load average at start ${os.loadavg().map((l) => l.toFixed(1)).join(' ')} on ${os.cpus().length} cores`);
if (run('submit')) {
  console.log(`## submit: ${ROUNDS} rounds of ${Math.max(1, Math.round(seconds / ROUNDS))} s per route, 32 connections, serve --role api and --role all (the default: its worker runs what is submitted) in its own process`);
  for (const engine of ENGINES) {
    await submit(engine, 'api');
    await submit(engine, 'all');
  }
}
if (run('drain')) {
  console.log(`## drain: ${fmt(DRAIN_N)} pings committed at once, worker processes already waiting (CALLPLANE_WORKER_CONCURRENCY ${process.env.CALLPLANE_WORKER_CONCURRENCY ?? 50})`);
  for (const engine of ENGINES) {
    if (engine === 'sqlite') {
      await drain(engine, 1);
    } else {
      const one = await drain(engine, 1);
      const two = await drain(engine, 2);
      console.log(`postgres 2 workers / 1 worker: ${(two / one).toFixed(2)}`);
    }
  }
}
if (run('pgboss') && PG_URL) {
  // Issue 15's target: callplane's PostgreSQL drain ≥ 1.0× pg-boss's on the same server, same run.
  const n = Number(process.env.BENCH_PGBOSS_TASKS ?? 20_000);
  console.log(`## pgboss: ${fmt(n)} due pings through callplane (1 and 2 worker processes) against ${fmt(n)} no-op jobs through pg-boss 10, on the same PostgreSQL server`);
  const saved = DRAIN_N;
  drainN = n;
  const boss = await pgBossDrain(n);
  const one = await drain('postgres', 1);
  const two = await drain('postgres', 2);
  // Not the target's case (pg-boss's jobs notify nobody), but what a subscribed organization costs.
  const subscribed = await drain('postgres', 1, { subscribed: true });
  drainN = saved;
  console.log(`callplane ÷ pg-boss: 1 worker ${(one / boss).toFixed(2)}×, 2 workers ${(two / boss).toFixed(2)}× (target ≥ 1.0×); ` +
    `1 worker with a task subscription ${(subscribed / boss).toFixed(2)}×`);
}
if (run('lateness')) {
  console.log('## lateness: serve --role all, pings due at whole seconds');
  for (const engine of ENGINES) await lateness(engine);
}
