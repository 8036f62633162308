// One delivery attempt against real receivers on 127.0.0.1: success codes, timeouts, redirects not
// followed, Retry-After, 410, bounded responses, forwarded headers and Standard Webhooks
// signatures; plus the retry schedule and the custom-header check.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, afterEach, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import type { Dispatcher } from 'undici';
import {
  checkCustomHeaders, deliverOnce, FORBIDDEN_HEADER_NAMES, headerMap, MAX_DELIVERY_ATTEMPTS, newSigningSecret,
  parseRetryAfter, RESPONSE_EXCERPT_BYTES, RETRY_AFTER_CAP_MS, RETRY_SCHEDULE_MS, retryDelayMs, signatureHeaders,
  type DeliveryRequest,
} from '../../src/webhooks/deliver.ts';
import { checkCustomHeaders as checkCustomHeadersFromSsrf, guardedDispatcher } from '../../src/webhooks/ssrf.ts';

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void;

/** A receiver on 127.0.0.1 that records every request and answers with the current handler. */
async function receiver() {
  const requests: Received[] = [];
  let handler: Handler = (_req, res) => res.end('ok');
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    requests,
    url: (path = '/hook') => `http://127.0.0.1:${port}${path}`,
    answer(h: Handler) { handler = h; },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const ANY_2XX = Array.from({ length: 100 }, (_, i) => 200 + i);

describe('deliverOnce', () => {
  let rx: Awaited<ReturnType<typeof receiver>>;
  let other: Awaited<ReturnType<typeof receiver>>;
  let dispatcher: Dispatcher;
  const send = (over: Partial<DeliveryRequest> = {}) => deliverOnce({
    url: rx.url(), body: Buffer.from('{"event":"task.finished"}'), contentType: 'application/json', headers: {},
    timeoutMs: 5000, successStatusCodes: ANY_2XX, ...over,
  }, dispatcher);

  before(async () => {
    rx = await receiver();
    other = await receiver();
    dispatcher = guardedDispatcher({ allowPrivate: true });
  });
  afterEach(() => {
    rx.requests.length = 0;
    other.requests.length = 0;
    rx.answer((_req, res) => res.end('ok'));
  });
  after(async () => {
    await dispatcher.close();
    await rx.close();
    await other.close();
  });

  it('POSTs the body with its content type and the given headers, and succeeds on a 2xx', async () => {
    const r = await send({ headers: { Authorization: 'Bearer xyz', 'X-Customer-ID': 'abc123' } });
    assert.equal(r.ok, true, r.error);
    assert.equal(r.statusCode, 200);
    assert.equal(r.error, undefined);
    assert.equal(r.responseExcerpt, 'ok');
    assert.equal(typeof r.durationMs, 'number');
    assert.equal(rx.requests.length, 1);
    const got = rx.requests[0];
    assert.equal(got.method, 'POST');
    assert.equal(got.url, '/hook');
    assert.equal(got.body.toString(), '{"event":"task.finished"}');
    assert.equal(got.headers['content-type'], 'application/json');
    assert.equal(got.headers.authorization, 'Bearer xyz');
    assert.equal(got.headers['x-customer-id'], 'abc123');
    assert.equal(got.headers['content-length'], String(Buffer.byteLength('{"event":"task.finished"}')));
    assert.equal(got.headers['user-agent'], 'callplane-webhooks');
  });

  it('forwards raw bytes as they are, with no content type when none is given', async () => {
    const bytes = Buffer.from([0, 1, 2, 0xff, 0xfe, 10, 13]);
    const r = await send({ body: bytes, contentType: undefined });
    assert.equal(r.ok, true, r.error);
    assert.deepEqual(rx.requests[0].body, bytes);
    assert.equal(rx.requests[0].headers['content-type'], undefined);
  });

  it('sends Standard Webhooks headers that the standardwebhooks library verifies', async () => {
    const secret = newSigningSecret();
    const body = Buffer.from(JSON.stringify({ type: 'task.finished', data: { id: 'tsk_1', note: 'héllo ✓' } }));
    const now = Math.floor(Date.now() / 1000);
    const r = await send({ body, headers: { ...signatureHeaders(secret, 'evt_123', now, body), 'X-Other': '1' } });
    assert.equal(r.ok, true, r.error);
    const got = rx.requests[0];
    assert.equal(got.headers['webhook-id'], 'evt_123');
    assert.equal(got.headers['webhook-timestamp'], String(now));
    assert.match(String(got.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]+=*$/);
    const verified = new Webhook(secret).verify(got.body.toString('utf8'), got.headers as Record<string, string>);
    assert.deepEqual(verified, JSON.parse(body.toString()));
    // A changed body or another secret does not verify.
    assert.throws(() => new Webhook(secret).verify(`${got.body.toString()} `, got.headers as Record<string, string>));
    assert.throws(() => new Webhook(newSigningSecret()).verify(got.body.toString(), got.headers as Record<string, string>));
  });

  it('succeeds only on the listed codes: a 200 fails when only 202 is listed', async () => {
    rx.answer((_req, res) => { res.statusCode = 200; res.end('fine'); });
    const r = await send({ successStatusCodes: [202] });
    assert.equal(r.ok, false);
    assert.equal(r.statusCode, 200);
    assert.equal(r.error, 'the receiver answered 200, not a success status (expected 202)');
    assert.equal(r.responseExcerpt, 'fine');

    rx.answer((_req, res) => { res.statusCode = 202; res.end(); });
    const accepted = await send({ successStatusCodes: [202] });
    assert.equal(accepted.ok, true, accepted.error);
    assert.equal(accepted.statusCode, 202);
    assert.equal(accepted.responseExcerpt, undefined);

    rx.answer((_req, res) => { res.statusCode = 500; res.end('boom'); });
    const failed = await send();
    assert.equal(failed.ok, false);
    assert.equal(failed.error, 'the receiver answered 500, not a success status (expected 200-299)');
    assert.equal(failed.gone, undefined);
  });

  it('gives up on a receiver slower than the timeout, without a status', async () => {
    let answered = false;
    rx.answer((_req, res) => {
      setTimeout(() => { answered = true; if (!res.destroyed) res.end('late'); }, 3000).unref();
    });
    const r = await send({ timeoutMs: 300 });
    assert.equal(r.ok, false);
    assert.equal(r.statusCode, undefined);
    assert.equal(r.error, 'no response within 300 ms');
    assert.equal(answered, false, 'the attempt ended before the receiver answered');
    assert.ok(r.durationMs >= 250, `aborted after ${r.durationMs} ms`);
  });

  it("ends an attempt when the caller's signal aborts (a worker stopping), well before the timeout", async () => {
    rx.answer((_req, res) => {
      setTimeout(() => { if (!res.destroyed) res.end('late'); }, 3000).unref();
    });
    const stop = new AbortController();
    setTimeout(() => stop.abort(new Error('stopping')), 200).unref();
    const r = await deliverOnce({
      url: rx.url(), body: Buffer.from('{}'), contentType: 'application/json', headers: {},
      timeoutMs: 5000, successStatusCodes: ANY_2XX,
    }, dispatcher, stop.signal);
    assert.equal(r.ok, false);
    assert.equal(r.statusCode, undefined);
    assert.equal(r.error, 'attempt abandoned before a response (the worker stopped or lost its lease)');
    assert.ok(r.durationMs < 2500, `ended after ${r.durationMs} ms, not at the 5000 ms timeout`);
  });

  it('stops reading a body that is still arriving at the deadline; the status decides', async () => {
    let ended = false;
    rx.answer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first part;');
      // A byte every 50 ms: never idle long enough for an idle timeout, so only the deadline stops it.
      const drip = setInterval(() => { if (!res.destroyed) res.write('.'); }, 50);
      setTimeout(() => { clearInterval(drip); ended = true; if (!res.destroyed) res.end('rest'); }, 3000).unref();
      res.on('close', () => clearInterval(drip));
    });
    const r = await send({ timeoutMs: 400 });
    assert.equal(ended, false, 'the attempt ended before the body did');
    assert.equal(r.ok, true, r.error);
    assert.equal(r.statusCode, 200);
    assert.match(r.responseExcerpt ?? '', /^first part;\.*$/);
  });

  for (const status of [301, 302, 303, 307, 308]) {
    it(`does not follow a ${status}: a failure naming the Location, and the target gets nothing`, async () => {
      const target = other.url('/stolen');
      rx.answer((_req, res) => { res.writeHead(status, { location: target }); res.end(); });
      const r = await send();
      assert.equal(r.ok, false);
      assert.equal(r.statusCode, status);
      assert.equal(r.error, `redirect not followed: the receiver answered ${status} to ${target}`);
      await sleep(50);
      assert.equal(other.requests.length, 0);
      assert.equal(rx.requests.length, 1);
    });
  }

  it('reads Retry-After in seconds and as an HTTP date', async () => {
    rx.answer((_req, res) => { res.writeHead(503, { 'retry-after': '120' }); res.end(); });
    const secs = await send();
    assert.equal(secs.ok, false);
    assert.equal(secs.statusCode, 503);
    assert.equal(secs.retryAfterMs, 120_000);

    const at = new Date(Date.now() + 90_000).toUTCString();
    rx.answer((_req, res) => { res.writeHead(429, { 'retry-after': at }); res.end(); });
    const dated = await send();
    assert.equal(dated.statusCode, 429);
    assert.ok(dated.retryAfterMs !== undefined && dated.retryAfterMs > 80_000 && dated.retryAfterMs <= 90_000, String(dated.retryAfterMs));

    rx.answer((_req, res) => { res.writeHead(503, { 'retry-after': 'soon' }); res.end(); });
    assert.equal((await send()).retryAfterMs, undefined);
  });

  it('marks a 410 as gone', async () => {
    rx.answer((_req, res) => { res.statusCode = 410; res.end('no such hook'); });
    const r = await send();
    assert.equal(r.ok, false);
    assert.equal(r.gone, true);
    assert.equal(r.statusCode, 410);
    assert.equal(r.responseExcerpt, 'no such hook');
  });

  it('reads a bounded part of a big response, keeps 1 KB and drops the connection', async () => {
    let closedEarly: boolean | undefined;
    const chunk = Buffer.alloc(64 * 1024, 'x');
    rx.answer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      let sent = 0;
      const total = 20 * 1024 * 1024;
      const pump = () => {
        while (sent < total) {
          sent += chunk.length;
          if (!res.write(chunk)) { res.once('drain', pump); return; }
        }
        res.end();
      };
      res.on('close', () => { closedEarly = !res.writableFinished; });
      pump();
    });
    const r = await send();
    assert.equal(r.ok, true, r.error);
    assert.equal(r.responseExcerpt, 'x'.repeat(RESPONSE_EXCERPT_BYTES));
    for (let i = 0; i < 100 && closedEarly === undefined; i++) await sleep(20);
    assert.equal(closedEarly, true, 'the receiver saw the connection dropped before it sent 20 MB');
  });

  it('never cuts a character in half in the excerpt', async () => {
    rx.answer((_req, res) => { res.statusCode = 500; res.end(`a${'é'.repeat(1000)}`); }); // 1 + 2000 bytes
    const r = await send();
    assert.equal(r.responseExcerpt, `a${'é'.repeat(511)}`); // 1023 bytes: the 1024th is half an é
  });

  it('reports a refused connection as an error, not an exception', async () => {
    const probe = http.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const r = await send({ url: `http://127.0.0.1:${port}/hook` });
    assert.equal(r.ok, false);
    assert.equal(r.statusCode, undefined);
    assert.equal(r.error, `connection refused by 127.0.0.1:${port}`);
  });

  it('reports an unusable URL or an unresolvable name as an error', async () => {
    const bad = await send({ url: 'not a url' });
    assert.equal(bad.ok, false);
    assert.equal(bad.error, 'request not sent: Invalid URL');
    const unknown = await send({ url: 'http://no-such-host.callplane.invalid/hook' });
    assert.equal(unknown.ok, false);
    assert.equal(unknown.error, 'could not resolve no-such-host.callplane.invalid');
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2025-01-01T00:00:00Z');
  it('reads delay-seconds and HTTP dates; ignores anything else', () => {
    assert.equal(parseRetryAfter('0', now), 0);
    assert.equal(parseRetryAfter(' 30 ', now), 30_000);
    assert.equal(parseRetryAfter('Wed, 01 Jan 2025 00:02:00 GMT', now), 120_000);
    assert.equal(parseRetryAfter('Tue, 31 Dec 2024 23:00:00 GMT', now), 0);
    assert.equal(parseRetryAfter(undefined, now), undefined);
    assert.equal(parseRetryAfter('-5', now), undefined);
    assert.equal(parseRetryAfter('1.5', now), undefined);
    assert.equal(parseRetryAfter('later', now), undefined);
  });
});

describe('signatureHeaders and newSigningSecret', () => {
  it('matches the Standard Webhooks reference vector', () => {
    const h = signatureHeaders('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330,
      Buffer.from('{"test": 2432232314}'));
    assert.deepEqual(h, {
      'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      'webhook-timestamp': '1614265330',
      'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    });
  });

  it('makes whsec_ secrets of 24 random bytes', () => {
    const a = newSigningSecret();
    const b = newSigningSecret();
    assert.match(a, /^whsec_[A-Za-z0-9+/]{32}$/);
    assert.equal(Buffer.from(a.slice(6), 'base64').length, 24);
    assert.notEqual(a, b);
  });
});

describe('retryDelayMs', () => {
  const H = 3_600_000;
  it('follows the schedule: immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h', () => {
    assert.deepEqual([...RETRY_SCHEDULE_MS], [0, 5_000, 300_000, 1_800_000, 2 * H, 5 * H, 10 * H, 10 * H]);
    assert.equal(MAX_DELIVERY_ATTEMPTS, 8);
    const mid = () => 0.5; // no jitter
    assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map((n) => retryDelayMs(n, undefined, mid)), RETRY_SCHEDULE_MS.slice(1));
    assert.equal(retryDelayMs(8, undefined, mid), null);
    assert.equal(retryDelayMs(9, undefined, mid), null);
    assert.throws(() => retryDelayMs(0), RangeError);
  });

  it('jitters by at most 20% either way', () => {
    assert.equal(retryDelayMs(1, undefined, () => 0), 4_000);
    assert.equal(retryDelayMs(1, undefined, () => 0.999999), 6_000);
    const seen = new Set<number>();
    for (let i = 0; i < 500; i++) {
      const d = retryDelayMs(2)!;
      assert.ok(d >= 240_000 && d <= 360_000, String(d));
      seen.add(d);
    }
    assert.ok(seen.size > 10, 'delays are spread, not all the same');
  });

  it('honours a longer Retry-After up to the cap, and never lets it shorten the schedule', () => {
    const mid = () => 0.5;
    assert.equal(retryDelayMs(1, 60_000, mid), 60_000);
    assert.equal(retryDelayMs(3, 1_000, mid), 1_800_000);
    assert.equal(retryDelayMs(1, 7 * 24 * H, mid), RETRY_AFTER_CAP_MS);
    assert.equal(retryDelayMs(8, 1_000, mid), null);
  });
});

describe('checkCustomHeaders', () => {
  const refused = (input: unknown): string => {
    const r = checkCustomHeaders(input);
    assert.equal(r.ok, false, `expected ${JSON.stringify(input)} to be refused`);
    return (r as { message: string }).message;
  };

  it('accepts an array of single-key objects, keeping names as given', () => {
    const r = checkCustomHeaders([{ Authorization: 'Bearer xyz' }, { 'X-Customer-ID': 'abc123' }, { 'X-Empty': '' }]);
    assert.deepEqual(r, { ok: true, headers: [{ Authorization: 'Bearer xyz' }, { 'X-Customer-ID': 'abc123' }, { 'X-Empty': '' }] });
    assert.deepEqual(checkCustomHeaders(undefined), { ok: true, headers: [] });
    assert.deepEqual(checkCustomHeaders([]), { ok: true, headers: [] });
    assert.deepEqual(headerMap([{ Authorization: 'a' }, { 'X-B': 'b' }]), { authorization: 'a', 'x-b': 'b' });
    assert.equal(checkCustomHeadersFromSsrf, checkCustomHeaders);
  });

  it('refuses anything but an array of single-key objects', () => {
    for (const input of [{ Authorization: 'x' }, 'Authorization: x', 5, [['Authorization', 'x']], [{}], [{ A: '1', B: '2' }], [null], ['x']]) {
      assert.match(refused(input), /^headers must be an array of single-key objects/, JSON.stringify(input));
    }
  });

  it('refuses names we set or that break the request', () => {
    for (const name of ['Host', 'content-length', 'Content-Type', 'content-encoding', 'Content-MD5', 'transfer-encoding', 'Connection',
      'keep-alive', 'upgrade', 'TE', 'trailer', 'proxy-authorization', 'webhook-id', 'Webhook-Timestamp', 'webhook-signature']) {
      assert.equal(refused([{ 'X-Fine': '1' }, { [name]: 'v' }]), `headers[1]: '${name}' may not be set: we set it ourselves`);
    }
    for (const name of ['webhook-id', 'host', 'content-length', 'connection', 'transfer-encoding']) assert.ok(FORBIDDEN_HEADER_NAMES.has(name));
  });

  it('refuses names that are not header tokens, and the same name twice', () => {
    assert.equal(refused([{ 'X Space': 'v' }]), "headers[0]: 'X Space' is not a valid header name");
    assert.equal(refused([{ 'X:Colon': 'v' }]), "headers[0]: 'X:Colon' is not a valid header name");
    assert.equal(refused([{ '': 'v' }]), "headers[0]: '' is not a valid header name");
    assert.equal(refused([{ 'X-A': '1' }, { 'x-a': '2' }]), "headers[1]: 'x-a' is given more than once");
  });

  it('refuses values with CR, LF or other control characters, and values that are not strings', () => {
    for (const value of ['a\r\nX-Injected: 1', 'a\nb', 'a\rb', 'a\u0000b', 'a\u007fb']) {
      assert.equal(refused([{ 'X-A': value }]), "headers[0]: the value of 'X-A' must not contain CR, LF or other control characters");
    }
    assert.equal(checkCustomHeaders([{ 'X-A': 'tab\there' }]).ok, true);
    assert.equal(refused([{ 'X-A': 5 }]), "headers[0]: the value of 'X-A' must be a string");
    assert.equal(refused([{ 'X-A': null }]), "headers[0]: the value of 'X-A' must be a string");
  });
});
