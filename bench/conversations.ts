// The conversation engine's own overhead per turn, per engine, with a real `serve --role all`
// process, against a model server that answers at once (test/helpers/fake-llm.ts) and a webhook
// receiver, both in this process, on loopback:
//   inbound  — POST /api/v2/agent/receiveMessage sent → the model request arrives
//              (authenticate, validate, record the message, queue the turn, claim it, build the
//              prompt: notes, history, knowledge, the request through the openai client);
//   outbound — the model's last byte written → the signed reply arrives at the receiver
//              (parse the stream, record the reply and usage, queue the delivery, sign, send).
// Baseline, in the same run: one POST of the same size straight to the receiver (one loopback
// HTTP hop). Turns run one at a time (BENCH_TURNS, default 200) after 20 warm-up turns.
// Usage: npm run bench:conversations
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { startFakeLlm } from '../test/helpers/fake-llm.ts';
import { api, ENGINES, median, percentile, startServer } from './lib.ts';

const TURNS = Number(process.env.BENCH_TURNS ?? 200);
const WARMUP = 20;

/** Resolves arrivals at the receiver by the reply's inReplyTo (or the baseline's n). */
function receiver() {
  const waiting = new Map<string, (t: number) => void>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const t = performance.now();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { inReplyTo?: string; n?: string };
      res.writeHead(200).end('ok');
      const key = body.inReplyTo ?? body.n ?? '';
      waiting.get(key)?.(t);
      waiting.delete(key);
    });
  });
  server.keepAliveTimeout = 10_000;
  return {
    server,
    arrival: (key: string) => new Promise<number>((resolve) => waiting.set(key, resolve)),
    async start() {
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    },
  };
}

const ms = (xs: number[]) => `p50 ${median(xs).toFixed(1)} ms, p99 ${percentile([...xs].sort((a, b) => a - b), 99).toFixed(1)} ms`;

for (const engine of ENGINES) {
  const llm = await startFakeLlm({ models: ['bench-model'] });
  const hook = receiver();
  const hookUrl = await hook.start();
  const server = await startServer(engine, 'all', {
    CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_SIP_ENABLED: 'false', LOG_LEVEL: 'warn',
    CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_MODEL: 'bench-model',
  });
  try {
    const partner = await api(server, 'GET', '/api/v2/account', {});
    const reseller = await api(server, 'POST', '/api/v2/createReseller', { targetPartnerId: partner.id }, { resellerName: 'Bench reseller' });
    const org = await api(server, 'POST', '/api/v2/createOrganization', { targetResellerId: reseller.reseller.id }, { orgName: 'Bench org' });
    const agentId = String(org.organization.defaultAccountId);
    await api(server, 'POST', '/api/v2/updateOrganization', { targetOrganizationId: org.organization.id }, { outboundMessageWebhookUrl: `${hookUrl}/reply` });

    const inbound: number[] = [];
    const outbound: number[] = [];
    const baseline: number[] = [];
    for (let i = 0; i < WARMUP + TURNS; i++) {
      // Baseline: the same size of JSON straight to the receiver.
      const b0 = performance.now();
      const n = `b${i}`;
      const direct = hook.arrival(n);
      await fetch(hookUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ n, message: 'What are your opening hours on Saturday?' }) });
      const b1 = await direct;

      const before = llm.requests.length;
      const t0 = performance.now();
      const res = await api(server, 'POST', '/api/v2/agent/receiveMessage', {}, {
        targetAgent: agentId, sourceAddress: `+1415555${String(1000 + (i % 50)).padStart(4, '0')}`, message: 'What are your opening hours on Saturday?',
      });
      const t3 = await hook.arrival(res.messageUuid as string);
      const call = llm.requests[before]!;
      if (i >= WARMUP) {
        baseline.push(b1 - b0);
        inbound.push(call.t - t0);
        outbound.push(t3 - call.doneT!);
      }
    }
    console.log(`[${engine}] ${TURNS} turns, one at a time, model answering at once`);
    console.log(`  baseline  one loopback POST to the receiver: ${ms(baseline)}`);
    console.log(`  inbound   receiveMessage → model request:    ${ms(inbound)}  (${(median(inbound) / median(baseline)).toFixed(1)}× baseline)`);
    console.log(`  outbound  model reply → webhook delivered:  ${ms(outbound)}  (${(median(outbound) / median(baseline)).toFixed(1)}× baseline)`);
    console.log(`  overhead  per turn (inbound + outbound):     p50 ${(median(inbound) + median(outbound)).toFixed(1)} ms`);
  } finally {
    await server.stop();
    hook.server.close();
    await llm.close();
  }
}
