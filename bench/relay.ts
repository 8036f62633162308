// Webhook relays end to end, per engine, with real processes: a generic relay whose url is a
// receiver in this process; events posted to its ingress URL travel through the delivery queue to
// the receiver.
//   throughput — BENCH_RELAY_EVENTS events posted by 32 concurrent clients: relayed events per
//                second from the first post to the last arrival at the receiver (and the ingress
//                accept rate alone).
//   latency    — BENCH_RELAY_LATENCY_EVENTS events posted one at a time: post → arrival at the
//                receiver, against posting the same body to the receiver directly in the same run;
//                the difference is what the relay adds (verify, store, queue, sign, send).
//   drain      — the delivery queue alone: BENCH_RELAY_EVENTS relay events and their deliveries
//                committed at once while a `--role worker` process waits; deliveries/s until all
//                arrived.
// Topologies: `serve --role all` (the ingress wakes the runner in-process) and, on PostgreSQL,
// `--role api` + `--role worker` (the wakeup travels by NOTIFY).
// Usage: npm run bench:relay [-- throughput latency drain]   (all by default)
import http from 'node:http';
import { sql } from 'kysely';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import path from 'node:path';
import { Agent, request } from 'undici';
import { openDatabase } from '../src/db/index.ts';
import { newId } from '../src/lib/ids.ts';
import { MAX_DELIVERY_ATTEMPTS } from '../src/webhooks/deliver.ts';
import { api, createStore, ENGINES, fmt, median, percentile, startServer, startWorker, type Engine, type Proc, type Server } from './lib.ts';

const EVENTS = Number(process.env.BENCH_RELAY_EVENTS ?? 5000);
const LATENCY_EVENTS = Number(process.env.BENCH_RELAY_LATENCY_EVENTS ?? 300);
const CLIENTS = 32;
/** The receiver is on loopback; SIP is not under test (and two workers would race for its port). */
const RELAY_ENV = { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_SIP_ENABLED: 'false' };
const parts = process.argv.slice(2).filter((a) => a !== '--');
const run = (part: string) => parts.length === 0 || parts.includes(part);
const client = new Agent({ connections: CLIENTS * 2, keepAliveTimeout: 10_000 });

/** Records when each event (by the `n` in its JSON body) reached the receiver, per path. */
class Receiver {
  readonly arrivals = { relay: new Map<number, number>(), direct: new Map<number, number>() };
  readonly #waiters = new Map<string, () => void>();
  #server!: http.Server;
  url = '';
  duplicates = 0;

  async start(): Promise<void> {
    this.#server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const at = performance.now();
        const which = req.url === '/relay' ? 'relay' : 'direct';
        const n = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { n: number }).n;
        if (this.arrivals[which].has(n)) this.duplicates++;
        else this.arrivals[which].set(n, at);
        this.#waiters.get(`${which}:${n}`)?.();
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      });
    });
    this.#server.keepAliveTimeout = 10_000;
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** Resolves when event n arrives on `which` (or at once if it has). */
  arrival(which: 'relay' | 'direct', n: number): Promise<number> {
    const seen = this.arrivals[which].get(n);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve) => this.#waiters.set(`${which}:${n}`, () => {
      this.#waiters.delete(`${which}:${n}`);
      resolve(this.arrivals[which].get(n)!);
    }));
  }

  reset(): void {
    this.arrivals.relay.clear();
    this.arrivals.direct.clear();
    this.duplicates = 0;
  }

  close(): Promise<void> {
    return new Promise((r) => this.#server.close(() => r()));
  }
}

/** A premium organization with a generic relay to the receiver; answers the ingress path. */
async function relayTo(server: Server, receiverUrl: string): Promise<string> {
  return (await relayWithIds(server, receiverUrl)).ingressPath;
}

async function relayWithIds(server: Server, receiverUrl: string): Promise<{ ingressPath: string; orgId: number }> {
  const partner = await api(server, 'GET', '/api/v2/account', {});
  const reseller = await api(server, 'POST', '/api/v2/createReseller', { targetPartnerId: partner.id }, { resellerName: 'Bench reseller' });
  const org = await api(server, 'POST', '/api/v2/createOrganization', { targetResellerId: reseller.reseller.id }, { orgName: 'Bench org', vidaPremium: true });
  const relay = await api(server, 'POST', '/api/v2/webhookRelay/generic', { targetAccountId: org.organization.id }, { url: `${receiverUrl}/relay` });
  return { ingressPath: new URL(relay.config.ingressUrl).pathname, orgId: org.organization.id };
}

async function postJson(url: string, n: number): Promise<void> {
  const res = await request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ n }), dispatcher: client });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`POST ${url}: ${res.statusCode} ${text}`);
}

async function waitArrivals(rcv: Receiver, n: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (rcv.arrivals.relay.size < n) {
    if (Date.now() > deadline) throw new Error(`only ${rcv.arrivals.relay.size} of ${n} events arrived in ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function throughput(label: string, ingress: string, rcv: Receiver, server: Server): Promise<void> {
  // Warm-up: connections, statement caches, JIT.
  for (let i = 0; i < 200; i++) await postJson(ingress, -1 - i);
  await waitArrivals(rcv, 200, 30_000);
  rcv.reset();
  let next = 0;
  const cpuBefore = server.cpuSeconds();
  const start = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, async () => {
    for (let i = next++; i < EVENTS; i = next++) await postJson(ingress, i);
  }));
  const accepted = performance.now();
  await waitArrivals(rcv, EVENTS, 300_000);
  const last = Math.max(...rcv.arrivals.relay.values());
  const lag = [...rcv.arrivals.relay.values()].map((t) => t - start);
  // CPU time per event of the server process (steadier than rates when the machine is shared).
  const cpuUs = ((server.cpuSeconds() - cpuBefore) / EVENTS) * 1e6;
  console.log(`${label} ${fmt(EVENTS)} events, ${CLIENTS} clients: ${fmt(EVENTS / ((last - start) / 1000))} relayed events/s end to end ` +
    `(first post → last arrival ${((last - start) / 1000).toFixed(2)} s); ingress accepted ${fmt(EVENTS / ((accepted - start) / 1000))} events/s; ` +
    `last arrival ${(last - accepted).toFixed(0)} ms after the last accept; duplicates ${rcv.duplicates}; median arrival at ${(median(lag) / 1000).toFixed(2)} s; ` +
    `${cpuUs.toFixed(0)} µs CPU per event in the ${label.includes('all') ? 'serving process' : 'API process'}`);
}

async function latency(label: string, ingress: string, rcv: Receiver): Promise<void> {
  rcv.reset();
  const direct: number[] = [];
  const relayed: number[] = [];
  // Interleaved, so load on the machine weighs on both alike.
  for (let i = 0; i < LATENCY_EVENTS + 20; i++) {
    let t0 = performance.now();
    const d = rcv.arrival('direct', i);
    await postJson(`${rcv.url}/direct`, i);
    const dt = (await d) - t0;
    t0 = performance.now();
    const r = rcv.arrival('relay', i);
    await postJson(ingress, i);
    const rt = (await r) - t0;
    if (i >= 20) { direct.push(dt); relayed.push(rt); } // the first 20 warm up
  }
  direct.sort((a, b) => a - b);
  relayed.sort((a, b) => a - b);
  const ms = (x: number) => `${x.toFixed(1)} ms`;
  console.log(`${label} ${LATENCY_EVENTS} events one at a time: post → arrival direct p50 ${ms(percentile(direct, 50))} p99 ${ms(percentile(direct, 99))}; ` +
    `through the relay p50 ${ms(percentile(relayed, 50))} p99 ${ms(percentile(relayed, 99))}; ` +
    `added p50 ${ms(percentile(relayed, 50) - percentile(direct, 50))}, p99 ${ms(percentile(relayed, 99) - percentile(direct, 99))}`);
}

/** Commits EVENTS relay events with their deliveries at once while worker processes wait. */
async function drain(engine: Engine, workers: number): Promise<void> {
  const rcv = new Receiver();
  await rcv.start();
  const store = await createStore(engine);
  Object.assign(store.env, RELAY_ENV);
  const setup = await startServer(engine, 'api', {}, store);
  let orgId: number;
  try {
    orgId = (await relayWithIds(setup, rcv.url)).orgId;
  } finally {
    await setup.stop(); // one process per SQLite DATA_DIR
  }
  const procs = await Promise.all(Array.from({ length: workers }, () => startWorker(store)));
  const database = openDatabase({ databaseUrl: store.databaseUrl, sqliteFile: path.join(store.dataDir, 'callplane.db') });
  try {
    const relay = await database.db.selectFrom('webhook_relays').select('id').where('org_id', '=', orgId).executeTakeFirstOrThrow();
    const now = Date.now();
    await database.db.transaction().execute(async (tx) => {
      for (let i = 0; i < EVENTS; i += 500) {
        const events = [];
        const deliveries = [];
        for (let n = i; n < Math.min(EVENTS, i + 500); n++) {
          const id = newId('rev', now);
          events.push({ id, relay_id: relay.id, org_id: orgId, provider_event_id: null, content_type: 'application/json', headers: '{}', body: Buffer.from(JSON.stringify({ n })).toString('base64'), received_at: now });
          deliveries.push({ id: newId('dlv', now), org_id: orgId, kind: 'relay' as const, relay_id: relay.id, relay_event_id: id, webhook_id: null, event_id: id, event_type: 'generic', payload: null, state: 'pending' as const, run_at: now, attempt: 0, max_attempts: MAX_DELIVERY_ATTEMPTS, lease_owner: null, lease_expires_at: null, last_status: null, last_error: null, created_at: now, updated_at: now, finished_at: null });
        }
        await tx.insertInto('relay_events').values(events).execute();
        await tx.insertInto('webhook_deliveries').values(deliveries).execute();
      }
      if (database.dialect === 'postgres') await sql`select pg_notify('callplane_queue', 'webhook_deliveries')`.execute(tx);
    });
    const committed = performance.now();
    await waitArrivals(rcv, EVENTS, 300_000);
    const times = [...rcv.arrivals.relay.values()];
    const first = Math.min(...times);
    const last = Math.max(...times);
    console.log(`${engine.padEnd(8)} ${workers} worker${workers > 1 ? 's' : ' '}         ${fmt(EVENTS)} deliveries: ${fmt(EVENTS / ((last - first) / 1000))} deliveries/s ` +
      `(first → last arrival ${((last - first) / 1000).toFixed(2)} s; commit → last arrival ${((last - committed) / 1000).toFixed(2)} s; duplicates ${rcv.duplicates})`);
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
    await database.close();
    await store.drop();
    await rcv.close();
  }
}

async function bench(engine: Engine, topology: 'all' | 'split'): Promise<void> {
  const rcv = new Receiver();
  await rcv.start();
  const store = await createStore(engine);
  Object.assign(store.env, RELAY_ENV);
  const server = await startServer(engine, topology === 'all' ? 'all' : 'api', {}, store);
  let worker: Proc | undefined;
  try {
    if (topology === 'split') worker = await startWorker(store);
    const ingress = `${server.url}${await relayTo(server, rcv.url)}`;
    const label = `${engine.padEnd(8)} ${topology === 'all' ? '--role all        ' : '--role api+worker '}`;
    if (run('throughput')) await throughput(label, ingress, rcv, server);
    if (run('latency')) await latency(label, ingress, rcv);
  } finally {
    await worker?.stop();
    await server.stop();
    await store.drop();
    await rcv.close();
  }
}

console.log(`# bench/relay — engines: ${ENGINES.join(', ')}; load average at start ${os.loadavg().map((l) => l.toFixed(1)).join(' ')} on ${os.cpus().length} cores; ` +
  `receiver and clients in this process; CALLPLANE_DELIVERY_CONCURRENCY ${process.env.CALLPLANE_DELIVERY_CONCURRENCY ?? 50}`);
if (run('throughput') || run('latency')) {
  for (const engine of ENGINES) {
    await bench(engine, 'all');
    if (engine === 'postgres') await bench(engine, 'split');
  }
}
if (run('drain')) {
  for (const engine of ENGINES) {
    await drain(engine, 1);
    if (engine === 'postgres') await drain(engine, 2);
  }
}
await client.close();
