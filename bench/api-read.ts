// Authenticated read (GET /api/v2/account: token hash lookup + account read) against /healthz
// (no database) on the same server in the same run, per engine. Prints requests/s and the ratio.
import { ENGINES, fmt, measure, startServer } from './lib.ts';

const seconds = Number(process.env.BENCH_SECONDS ?? 8);
console.log(`# bench/api-read — ${seconds}s per route, 32 connections, server in its own process`);
for (const engine of ENGINES) {
  const server = await startServer(engine);
  try {
    await measure(`${server.url}/healthz`, { seconds: 2 }); // warm-up
    const health = await measure(`${server.url}/healthz`, { seconds });
    const read = await measure(`${server.url}/api/v2/account?token=${server.token}`, { seconds });
    if (read.non2xx || read.errors) throw new Error(`authenticated read failed: ${read.non2xx} non-2xx, ${read.errors} errors`);
    console.log(`${engine.padEnd(8)} /healthz ${fmt(health.requestsPerSec)} req/s (p99 ${health.p99} ms) | ` +
      `GET /api/v2/account ${fmt(read.requestsPerSec)} req/s (p99 ${read.p99} ms) | ratio ${(read.requestsPerSec / health.requestsPerSec).toFixed(2)}`);
  } finally {
    await server.stop();
  }
}
