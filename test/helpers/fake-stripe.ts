// A stand-in for the few Stripe API endpoints callplane calls (retrieve the balance, create a
// Checkout Session, cancel a subscription), on 127.0.0.1, for the test suite only. The official
// `stripe` client talks to it (CALLPLANE_STRIPE_API_URL). It checks the secret key, records every
// request, honours Idempotency-Key as Stripe does (the same key answers the first result again),
// can be told to fail with 500s, and signs webhook events with Stripe's scheme
// (Stripe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">), implemented here on
// node:crypto independently of the library our code verifies with.
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StripeRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  form: URLSearchParams;
  at: number;
}

export interface FakeStripeSession {
  id: string;
  ui_mode: string;
  url: string | null;
  client_secret: string | null;
  client_reference_id: string | null;
  metadata: Record<string, string>;
  subscriptionMetadata: Record<string, string>;
}

export interface FakeStripeSubscription { id: string; customer: string; status: string; metadata: Record<string, string> }

const rand = (n = 14) => crypto.randomBytes(n).toString('hex').slice(0, n);

/** `prefix[key]=value` fields of a form, as an object. */
function bracketed(form: URLSearchParams, prefix: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of form) {
    const m = new RegExp(`^${prefix.replace(/[[\]]/g, '\\$&')}\\[([^\\]]+)\\]$`).exec(k);
    if (m) out[m[1]!] = v;
  }
  return out;
}

export class FakeStripe {
  readonly requests: StripeRequest[] = [];
  /** Secret keys the fake accepts. */
  readonly keys = new Set<string>();
  readonly sessions = new Map<string, FakeStripeSession>();
  readonly subscriptions = new Map<string, FakeStripeSubscription>();
  /** While true every API request is answered 500 (Stripe failing). */
  failing = false;
  /** While true every connection is dropped without an answer (Stripe unreachable). */
  dropping = false;
  readonly #idempotent = new Map<string, { status: number; body: unknown }>();
  #server!: http.Server;
  url = '';

  static async start(): Promise<FakeStripe> {
    const fake = new FakeStripe();
    fake.#server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => fake.#handle(req, Buffer.concat(chunks).toString('utf8'), res));
    });
    await new Promise<void>((resolve) => fake.#server.listen(0, '127.0.0.1', resolve));
    fake.url = `http://127.0.0.1:${(fake.#server.address() as AddressInfo).port}`;
    return fake;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  /** Requests to a path (method and path prefix, e.g. 'POST /v1/checkout/sessions'). */
  calls(what: string): StripeRequest[] {
    const [method, path] = what.split(' ');
    return this.requests.filter((r) => r.method === method && r.path.startsWith(path!));
  }

  /** The customer completes the checkout: Stripe makes the subscription. Returns the completed session event's object. */
  complete(sessionId: string): { session: Record<string, unknown>; subscription: FakeStripeSubscription } {
    const s = this.sessions.get(sessionId);
    if (!s) throw new Error(`no session ${sessionId}`);
    const subscription = { id: `sub_${rand()}`, customer: `cus_${rand()}`, status: 'active', metadata: s.subscriptionMetadata };
    this.subscriptions.set(subscription.id, subscription);
    return {
      subscription,
      session: {
        id: s.id, object: 'checkout.session', mode: 'subscription', status: 'complete', payment_status: 'paid',
        client_reference_id: s.client_reference_id, metadata: s.metadata, customer: subscription.customer, subscription: subscription.id,
      },
    };
  }

  /** A webhook event as Stripe sends it, and its Stripe-Signature under `secret`. */
  event(type: string, object: Record<string, unknown>, secret: string, opts: { t?: number; id?: string } = {}): { body: string; signature: string; id: string } {
    const id = opts.id ?? `evt_${rand(24)}`;
    const body = JSON.stringify({
      id, object: 'event', api_version: '2026-10-28.endive', created: Math.floor(Date.now() / 1000), livemode: false,
      pending_webhooks: 1, request: { id: null, idempotency_key: null }, type, data: { object },
    });
    return { body, signature: FakeStripe.sign(body, secret, opts.t), id };
  }

  static sign(body: string, secret: string, t = Math.floor(Date.now() / 1000)): string {
    return `t=${t},v1=${crypto.createHmac('sha256', secret).update(`${t}.${body}`, 'utf8').digest('hex')}`;
  }

  #send(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
    res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_${rand()}`, ...headers });
    res.end(JSON.stringify(body));
  }

  #handle(req: http.IncomingMessage, raw: string, res: http.ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://fake');
    const form = new URLSearchParams(req.method === 'GET' || req.method === 'DELETE' ? url.search : raw);
    this.requests.push({ method: req.method ?? '', path: url.pathname, headers: req.headers, form, at: Date.now() });
    if (this.dropping) { req.socket.destroy(); return; }
    if (this.failing) return this.#send(res, 500, { error: { type: 'api_error', message: 'Something went wrong on Stripe\'s end.' } });
    const auth = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    if (!auth || !this.keys.has(auth[1]!)) {
      return this.#send(res, 401, { error: { type: 'invalid_request_error', message: `Invalid API Key provided: ${(auth?.[1] ?? '').slice(0, 8)}****` } });
    }
    const key = req.headers['idempotency-key'];
    const idemKey = typeof key === 'string' ? `${auth[1]}:${req.method} ${url.pathname}:${key}` : undefined;
    if (idemKey && this.#idempotent.has(idemKey)) {
      const kept = this.#idempotent.get(idemKey)!;
      return this.#send(res, kept.status, kept.body, { 'idempotent-replayed': 'true' });
    }
    const answer = (status: number, body: unknown) => {
      if (idemKey) this.#idempotent.set(idemKey, { status, body });
      this.#send(res, status, body);
    };
    if (req.method === 'GET' && url.pathname === '/v1/balance') {
      return answer(200, { object: 'balance', available: [{ amount: 0, currency: 'usd', source_types: { card: 0 } }], pending: [], livemode: false });
    }
    if (req.method === 'POST' && url.pathname === '/v1/checkout/sessions') {
      const id = `cs_test_${rand(24)}`;
      const uiMode = form.get('ui_mode') ?? 'hosted_page';
      const session: FakeStripeSession = {
        id, ui_mode: uiMode,
        url: uiMode === 'hosted_page' ? `https://checkout.stripe.com/c/pay/${id}` : null,
        client_secret: uiMode === 'embedded_page' ? `${id}_secret_${rand(20)}` : null,
        client_reference_id: form.get('client_reference_id'),
        metadata: bracketed(form, 'metadata'), subscriptionMetadata: bracketed(form, 'subscription_data[metadata]'),
      };
      this.sessions.set(id, session);
      return answer(200, {
        id, object: 'checkout.session', mode: form.get('mode'), status: 'open', ui_mode: uiMode, url: session.url,
        client_secret: session.client_secret, client_reference_id: session.client_reference_id, metadata: session.metadata,
        success_url: form.get('success_url'), return_url: form.get('return_url'), cancel_url: form.get('cancel_url'),
      });
    }
    const sub = /^\/v1\/subscriptions\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'DELETE' && sub) {
      const found = this.subscriptions.get(decodeURIComponent(sub[1]!));
      if (!found) return answer(404, { error: { type: 'invalid_request_error', code: 'resource_missing', message: `No such subscription: '${sub[1]}'` } });
      found.status = 'canceled';
      return answer(200, { id: found.id, object: 'subscription', status: 'canceled', customer: found.customer, metadata: found.metadata });
    }
    return answer(404, { error: { type: 'invalid_request_error', message: `Unrecognized request URL (${req.method}: ${url.pathname})` } });
  }
}
