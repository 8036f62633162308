// The live feed under one tenant's reconnect storm, with a real `serve --role api` process on
// loopback: organization A holds BENCH_LIVE_CONVERSATIONS conversations in progress with
// BENCH_LIVE_LINES lines of about 1 KB each; BENCH_LIVE_CLIENTS of its clients (spread over
// tokens, so the per-token cap is no limit) open GET /api/v2/conversations/live, read until the
// snapshot is whole, drop the connection and open it again at once (no Last-Event-ID, a 429 retried
// after 100 ms) for BENCH_LIVE_SECONDS. Meanwhile organization B reads GET /api/v2/account, one
// request at a time: its latency (p50, p99), and the server's resident memory (VmRSS, sampled
// every 100 ms), are reported before the storm (quiet) and during it, with the snapshots A got.
// Compare an older checkout with BENCH_SERVER_DIR (bench/lib.ts). Loopback only; bounded in count and time.
// Usage: npm run bench:live
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { api, ENGINES, fmt, median, percentile, startServer, type Server } from './lib.ts';

const CONVERSATIONS = Number(process.env.BENCH_LIVE_CONVERSATIONS ?? 100);
const LINES = Number(process.env.BENCH_LIVE_LINES ?? 100);
const CLIENTS = Number(process.env.BENCH_LIVE_CLIENTS ?? 20);
const SECONDS = Number(process.env.BENCH_LIVE_SECONDS ?? 15);

function rssMb(pid: number | undefined): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** B's reads, one at a time, until `until`: latencies in ms. */
async function probe(server: Server, token: string, until: number): Promise<number[]> {
  const out: number[] = [];
  while (performance.now() < until) {
    const t0 = performance.now();
    const res = await fetch(`${server.url}/api/v2/account?token=${token}`);
    await res.arrayBuffer();
    out.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, 20));
  }
  return out.sort((a, b) => a - b);
}

/** One of A's clients: connect, read the snapshot whole, drop, again, until `until`. */
async function storm(server: Server, token: string, until: number, tally: { streams: number; snapshots: number; bytes: number; refused: number }): Promise<void> {
  while (performance.now() < until) {
    const abort = new AbortController();
    try {
      const res = await fetch(`${server.url}/api/v2/conversations/live?token=${token}`, { signal: abort.signal });
      if (res.status !== 200) {
        tally.refused++;
        await res.arrayBuffer();
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      tally.streams++;
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
        const end = text.indexOf('event: snapshot\n');
        if (end >= 0 && text.indexOf('\n\n', end) >= 0) {
          tally.snapshots++;
          tally.bytes += text.length;
          break;
        }
      }
    } catch { /* dropped */ }
    abort.abort();
  }
}

for (const engine of ENGINES) {
  const server = await startServer(engine, 'api', {
    CALLPLANE_RATE_LIMIT_PER_TOKEN: '0', CALLPLANE_RATE_LIMIT_PER_ADDRESS: '0', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
    // The caps per token and per process are no limit here (the per-account ones are the fix's).
    CALLPLANE_LIVE_STREAMS_PER_TOKEN: '1000', CALLPLANE_LIVE_STREAMS_MAX: '10000', LOG_LEVEL: 'warn',
  });
  try {
    const me = await api(server, 'GET', '/api/v2/account', {});
    const reseller = await api(server, 'POST', '/api/v2/createReseller', { targetPartnerId: me.id }, { resellerName: 'Bench reseller' });
    const org = async (name: string) => {
      const o = await api(server, 'POST', '/api/v2/createOrganization', { targetResellerId: reseller.reseller.id }, { orgName: name });
      const t = await api(server, 'POST', '/api/v2/tokens', { targetAccountId: o.organization.id }, { type: 'admin', description: 'bench' });
      return { id: o.organization.id as number, agentId: o.organization.defaultAccountId as number, token: t.token.token as string };
    };
    const a = await org('Tenant A');
    const b = await org('Tenant B');
    const t0 = performance.now();
    const line = 'x'.repeat(1000);
    for (let c = 0; c < CONVERSATIONS; c++) {
      const jobs: Array<Promise<unknown>> = [];
      for (let n = 0; n < LINES; n++) {
        jobs.push(api(server, 'POST', '/api/v2/agent/receiveMessage', {}, {
          targetAgent: String(a.agentId), sourceAddress: `visitor-${c}`, message: `${n} ${line}`, outboundMessageWebhookUrl: 'http://127.0.0.1:9/none',
        }));
        if (jobs.length === 16) await Promise.all(jobs.splice(0));
      }
      await Promise.all(jobs);
    }
    const seeded = (performance.now() - t0) / 1000;
    const tokens: string[] = [];
    for (let i = 0; i < CLIENTS; i++) {
      tokens.push((await api(server, 'POST', '/api/v2/tokens', { targetAccountId: a.id }, { type: 'admin', description: `bench ${i}` })).token.token);
    }

    const quietRss = rssMb(server.pid);
    const quiet = await probe(server, b.token, performance.now() + 5000);
    let peak = rssMb(server.pid);
    const sampler = setInterval(() => { peak = Math.max(peak, rssMb(server.pid)); }, 100);
    const until = performance.now() + SECONDS * 1000;
    const tally = { streams: 0, snapshots: 0, bytes: 0, refused: 0 };
    const [busy] = await Promise.all([probe(server, b.token, until), ...tokens.map((t) => storm(server, t, until, tally))]);
    clearInterval(sampler);
    console.log(`\n${engine}: ${CONVERSATIONS} conversations × ${LINES} lines of 1 KB in A (seeded in ${seeded.toFixed(0)} s); ${CLIENTS} of A's clients reconnecting for ${SECONDS} s`);
    console.log(`  B's GET /api/v2/account quiet:  p50 ${median(quiet).toFixed(1)} ms, p99 ${percentile(quiet, 99).toFixed(1)} ms (${quiet.length} reads); RSS ${quietRss.toFixed(0)} MB`);
    console.log(`  B's GET /api/v2/account storm:  p50 ${median(busy).toFixed(1)} ms, p99 ${percentile(busy, 99).toFixed(1)} ms (${busy.length} reads); peak RSS ${peak.toFixed(0)} MB`);
    console.log(`  A's streams: ${fmt(tally.streams)} opened, ${fmt(tally.snapshots)} whole snapshots read (${fmt(tally.bytes / Math.max(1, tally.snapshots) / 1024)} KiB each), ${fmt(tally.refused)} refused (429)`);
  } finally {
    await server.stop();
  }
}
