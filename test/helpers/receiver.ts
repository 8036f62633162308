// A real HTTP receiver on 127.0.0.1 for delivery tests: records every request (headers, raw body,
// arrival time) and answers as the test says, per request.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  at: number;
}

export interface Answer {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  /** Wait this long before answering (a slow receiver). */
  delayMs?: number;
}

export interface Receiver {
  url: string;
  requests: Received[];
  /** How the n-th request (0-based) is answered; default 200 "ok". */
  answer: (req: Received, n: number) => Answer | Promise<Answer>;
  /** Resolves once `n` requests have arrived (polling, generous timeout). */
  waitFor(n: number, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(answer: Receiver['answer'] = () => ({})): Promise<Receiver> {
  const requests: Received[] = [];
  const sockets = new Set<import('node:net').Socket>();
  const r: Receiver = {
    url: '',
    requests,
    answer,
    async waitFor(n, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      while (requests.length < n) {
        if (Date.now() > deadline) throw new Error(`receiver got ${requests.length} of ${n} requests within ${timeoutMs} ms`);
        await new Promise((res) => setTimeout(res, 20));
      }
      return requests;
    },
    close: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const rec: Received = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks), at: Date.now() };
      const n = requests.length;
      requests.push(rec);
      const a = await r.answer(rec, n);
      if (a.delayMs) await new Promise((res) => setTimeout(res, a.delayMs));
      if (res.destroyed) return;
      res.writeHead(a.status ?? 200, { 'content-type': 'text/plain', ...a.headers });
      res.end(a.body ?? 'ok');
    });
  });
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return r;
}
