// What the API's rate limits cost (src/http/rate-limits.ts).
// 1. HTTP, per engine: GET /api/v2/account with the limits off (0) and on (10,000,000 per token and
//    per address a minute, so nothing is refused but every request passes both limiters), on the
//    same fresh database, 32 connections, alternating twice; with the server's CPU time per
//    request, which moves less than throughput when the machine is shared. On PostgreSQL a limit that high reserves slots in batches
//    of 200,000, so this is the limiters' cost in the process, not the database's.
// 2. PostgreSQL only, in this process: the shared store's own latency per request, with every
//    request a round trip (limits under 50 reserve one slot at a time) and at the default 1200 per
//    token (batches of 24), sequentially and 32 at once.
import { addToWindow } from '../src/db/rate-limit-counters.ts';
import { openDatabase } from '../src/db/index.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { SharedRateLimitStore } from '../src/http/shared-rate-limit-store.ts';
import { createScratchPgDatabase } from '../test/helpers/scratch-pg.ts';
import { ENGINES, PG_URL, createStore, fmt, measure, percentile, startServer } from './lib.ts';

const seconds = Number(process.env.BENCH_SECONDS ?? 8);
console.log(`# bench/rate-limit — ${seconds}s per run, 32 connections, server in its own process`);
for (const engine of ENGINES) {
  const store = await createStore(engine);
  try {
    const row: string[] = [];
    for (const [label, limit] of [['off', '0'], ['on', '10000000'], ['off again', '0'], ['on again', '10000000']] as const) {
      const server = await startServer(engine, 'api', { CALLPLANE_RATE_LIMIT_PER_TOKEN: limit, CALLPLANE_RATE_LIMIT_PER_ADDRESS: limit }, store);
      try {
        const url = `${server.url}/api/v2/account?token=${server.token}`;
        await measure(url, { seconds: 2 }); // warm-up
        const cpu0 = server.cpuSeconds();
        const m = await measure(url, { seconds });
        const cpuUs = ((server.cpuSeconds() - cpu0) / (m.requestsPerSec * seconds)) * 1e6;
        if (m.non2xx || m.errors) throw new Error(`${label}: ${m.non2xx} non-2xx, ${m.errors} errors`);
        row.push(`${label} ${fmt(m.requestsPerSec)} req/s (p50 ${m.p50} ms, p99 ${m.p99} ms, server CPU ${cpuUs.toFixed(0)} µs/request)`);
      } finally {
        await server.stop();
      }
    }
    console.log(`${engine.padEnd(8)} GET /api/v2/account: ${row.join(' | ')}`);
  } finally {
    await store.drop();
  }
}

if (PG_URL) {
  const scratch = await createScratchPgDatabase(PG_URL, 'callplane_bench');
  const database = openDatabase({ databaseUrl: scratch.url, poolSize: 10 });
  try {
    await migrateToLatest(database);
    const add = (k: string, ws: number, n: number) => addToWindow(database.db, k, ws, n);
    const run = async (label: string, max: number, n: number, concurrency: number, keyOf: (i: number) => string) => {
      const s = new SharedRateLimitStore(add);
      let trips = 0;
      const counted = new SharedRateLimitStore((k, ws, c) => { trips++; return s.add(k, ws, c); });
      const times: number[] = [];
      let next = 0;
      const t0 = performance.now();
      await Promise.all(Array.from({ length: concurrency }, async () => {
        while (next < n) {
          const i = next++;
          const t = performance.now();
          const r = await counted.take(keyOf(i), 3_600_000, max);
          times.push(performance.now() - t);
          if (r.current > max) throw new Error(`${label}: refused at ${i}`);
        }
      }));
      const wall = performance.now() - t0;
      times.sort((a, b) => a - b);
      const mean = times.reduce((a, b) => a + b, 0) / times.length;
      console.log(`postgres store, ${label}: mean ${mean.toFixed(3)} ms, p50 ${percentile(times, 50).toFixed(3)} ms, p99 ${percentile(times, 99).toFixed(3)} ms per request; ${trips} round trips for ${n} requests; ${fmt(n / (wall / 1000))} requests/s`);
    };
    const run1 = Date.now();
    await run('a round trip each, sequential', 40, 4000, 1, (i) => `bench:${run1}:one:${i}`);
    await run('a round trip each, 32 at once', 40, 8000, 32, (i) => `bench:${run1}:many:${i}`);
    await run('limit 1200 on one key, sequential', 1200, 1200, 1, () => `bench:${run1}:batch1`);
    await run('limit 1200 on each of 32 keys, 32 at once', 1200, 32 * 1200, 32, (i) => `bench:${run1}:batch32:${i % 32}`);
  } finally {
    await database.close();
    await scratch.drop();
  }
}
