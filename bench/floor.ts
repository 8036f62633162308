// What this machine and stack allow for issue 15's submission figures, against which callplane's
// own are read. bench/floor-server.ts is the least a durable queue can do per task over
// callplane's schema (an insert, then with FLOOR_MODE=all a move to running and one to finished,
// batched and committed, answered after the insert's commit), in a bare Fastify process. Per
// engine, in rounds that alternate, from this (separate) process with autocannon:
//   - the floor's POST /submit req/s against its own /healthz, for api (insert only) and all;
//   - callplane's /healthz (`serve --role api` on the same store, idle meanwhile): the floor's POST req/s over it is
//     the most callplane's POST ping ÷ /healthz figure could be if a submission cost no more than
//     the floor's, since callplane's POST must do at least what the floor does.
// Usage: npm run bench:floor   (BENCH_DATABASE_URL adds PostgreSQL; BENCH_SECONDS, BENCH_ROUNDS;
//   FLOOR_STEPS=2: tasks inserted already running, a life of two writes; FLOOR_INDEXES=minimal:
//   the tasks table with only the indexes a queue needs)
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { sql } from 'kysely';
import { openDatabase } from '../src/db/index.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { createStore, ENGINES, cpuSecondsOf, fmt, freePort, measure, median, postgresCpuSeconds, startServer, type Engine, type Store } from './lib.ts';

const seconds = Number(process.env.BENCH_SECONDS ?? 8);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const each = Math.max(1, Math.round(seconds / ROUNDS));

interface Floor {
  url: string;
  cpuSeconds(): number;
  finished(): Promise<number>;
  stop(): Promise<void>;
}

async function startFloor(store: Store, mode: 'api' | 'all', orgId: number): Promise<Floor> {
  const port = await freePort();
  const env: Record<string, string> = { ...store.env, PORT: String(port), FLOOR_MODE: mode, FLOOR_ORG_ID: String(orgId) };
  if (!store.databaseUrl) env.FLOOR_SQLITE_FILE = path.join(store.dataDir, 'callplane.db');
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, 'floor-server.ts')], {
    env, stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise((r) => child.once('exit', r));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the floor server did not start')), 30_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready')) { clearTimeout(timer); resolve(); }
    });
    void exited.then(() => { clearTimeout(timer); reject(new Error('the floor server exited')); });
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    cpuSeconds: () => cpuSecondsOf(child.pid),
    finished: async () => ((await (await fetch(`${url}/finished`)).json()) as { finished: number }).finished,
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function organization(store: Store): Promise<number> {
  const database = openDatabase({ databaseUrl: store.databaseUrl, sqliteFile: path.join(store.dataDir, 'callplane.db') });
  try {
    await migrateToLatest(database);
    // FLOOR_INDEXES=minimal: only what a queue needs (the primary key, the claim's and the
    // rescuer's), not what the API's listings and idempotency need.
    if (process.env.FLOOR_INDEXES === 'minimal') {
      for (const index of ['tasks_org_created', 'tasks_org_updated', 'tasks_org_state', 'tasks_idempotency', 'tasks_parked']) {
        await sql`drop index ${sql.ref(index)}`.execute(database.db);
      }
    }
    const row = await sql<{ id: number }>`insert into accounts (kind, name, created_at, updated_at) values ('organization', 'Floor org', 0, 0) returning id`
      .execute(database.db);
    return Number(row.rows[0].id);
  } finally {
    await database.close();
  }
}

async function floor(engine: Engine): Promise<void> {
  const store = await createStore(engine);
  // Role api: a role-all process would run the floor's pings itself. /healthz is the same route.
  const callplane = await startServer(engine, 'api', {}, store);
  try {
    const orgId = await organization(store);
    for (const mode of ['api', 'all'] as const) {
      const f = await startFloor(store, mode, orgId);
      try {
        const post = { method: 'POST', body: JSON.stringify({ type: 'ping' }) };
        await measure(`${f.url}/healthz`, { seconds: 2 });
        await measure(`${f.url}/submit`, { seconds: 2, ...post });
        await measure(`${callplane.url}/healthz`, { seconds: 2 });
        const r = { ours: [] as number[], health: [] as number[], post: [] as number[], cpu: [] as number[], pgCpu: [] as number[] };
        let submitted = 0;
        for (let i = 0; i < ROUNDS; i++) {
          // Everything submitted has finished before the next round (FLOOR_MODE=all).
          if (mode === 'all') {
            for (let w = 0; (await f.finished()) < submitted; w++) {
              if (w > 600) throw new Error('the floor did not finish what was submitted within 60 s');
              await new Promise((res) => setTimeout(res, 100));
            }
          }
          r.ours.push((await measure(`${callplane.url}/healthz`, { seconds: each })).requestsPerSec);
          r.health.push((await measure(`${f.url}/healthz`, { seconds: each })).requestsPerSec);
          const before = f.cpuSeconds();
          const pgBefore = engine === 'postgres' ? postgresCpuSeconds() : 0;
          const m = await measure(`${f.url}/submit`, { seconds: each, ...post });
          if (m.non2xx || m.errors) throw new Error(`floor submit failed: ${m.non2xx} non-2xx, ${m.errors} errors`);
          const n = m.requestsPerSec * each;
          submitted += mode === 'all' ? Math.round(n) : 0;
          r.post.push(m.requestsPerSec);
          r.cpu.push(((f.cpuSeconds() - before) / n) * 1e6);
          if (engine === 'postgres') r.pgCpu.push(((postgresCpuSeconds() - pgBefore) / n) * 1e6);
        }
        const ratio = (a: number[], b: number[]) => median(a.map((x, i) => x / b[i])).toFixed(2);
        console.log(`${engine.padEnd(8)} floor ${mode.padEnd(3)} POST ${fmt(median(r.post))} req/s (${median(r.cpu).toFixed(0)} µs CPU/req` +
          `${engine === 'postgres' ? `, PostgreSQL ${median(r.pgCpu).toFixed(0)} µs` : ''}) | its /healthz ${fmt(median(r.health))} req/s, ratio ${ratio(r.post, r.health)}` +
          ` | callplane /healthz ${fmt(median(r.ours))} req/s: the most its POST ping ratio could be ${ratio(r.post, r.ours)}`);
      } finally {
        await f.stop();
      }
    }
  } finally {
    await callplane.stop();
    await store.drop();
  }
}

console.log(`# bench/floor — ${ROUNDS} rounds of ${each} s per route, 32 connections; engines: ${ENGINES.join(', ')}; ` +
  `life of ${process.env.FLOOR_STEPS === '2' ? 'two writes (claimed at insert)' : 'three writes'}, ${process.env.FLOOR_INDEXES === 'minimal' ? 'minimal' : "callplane's"} indexes`);
for (const engine of ENGINES) await floor(engine);
