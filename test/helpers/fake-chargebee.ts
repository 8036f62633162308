// A stand-in for the few Chargebee API endpoints callplane calls (list item prices, a hosted page
// checkout for items, cancel a subscription for items), on 127.0.0.1, for the test suite only. The
// official `chargebee` client talks to it with CALLPLANE_CHARGEBEE_API_URL=http://127.0.0.1:<port>/{site}
// (the site is the first path segment). It checks each site's API key (HTTP basic auth, the key as
// the user name), records every request, honours chargebee-idempotency-key (the same key answers
// the first result again), can be told to fail with 500s, and builds webhook events as Chargebee
// posts them (JSON, with the basic-auth credentials configured for the webhook).
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ChargebeeRequest {
  method: string;
  site: string;
  /** The path after /<site>/api/v2. */
  path: string;
  headers: http.IncomingHttpHeaders;
  form: URLSearchParams;
  at: number;
}

export interface FakeChargebeeSubscription { id: string; customer_id: string; status: string; item_price_id: string }

const rand = (n = 14) => crypto.randomBytes(n).toString('hex').slice(0, n);

export class FakeChargebee {
  readonly requests: ChargebeeRequest[] = [];
  /** Each site's API key. */
  readonly sites = new Map<string, string>();
  /** Item prices that exist (any site). */
  readonly itemPrices = new Set<string>();
  readonly pages = new Map<string, { id: string; site: string; subscriptionId: string; itemPriceId: string }>();
  readonly subscriptions = new Map<string, FakeChargebeeSubscription>();
  failing = false;
  readonly #idempotent = new Map<string, { status: number; body: unknown }>();
  #server!: http.Server;
  url = '';

  static async start(): Promise<FakeChargebee> {
    const fake = new FakeChargebee();
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

  calls(method: string, pathPrefix: string, site?: string): ChargebeeRequest[] {
    return this.requests.filter((r) => r.method === method && r.path.startsWith(pathPrefix) && (site === undefined || r.site === site));
  }

  /** The customer completes the hosted page: Chargebee makes the subscription (under the id the checkout asked for). */
  complete(pageId: string): FakeChargebeeSubscription {
    const page = this.pages.get(pageId);
    if (!page) throw new Error(`no hosted page ${pageId}`);
    const sub = { id: page.subscriptionId, customer_id: `cust_${rand()}`, status: 'active', item_price_id: page.itemPriceId };
    this.subscriptions.set(sub.id, sub);
    return sub;
  }

  /** A webhook event as Chargebee posts it, and the Authorization header of the webhook's basic auth. */
  static event(eventType: string, content: Record<string, unknown>, username: string, password: string, id = `ev_${rand(20)}`): { body: string; authorization: string; id: string } {
    const body = JSON.stringify({
      id, occurred_at: Math.floor(Date.now() / 1000), source: 'hosted_page', object: 'event', api_version: 'v2',
      event_type: eventType, webhook_status: 'scheduled', content,
    });
    return { body, authorization: `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`, id };
  }

  #send(res: http.ServerResponse, status: number, body: unknown) {
    res.writeHead(status, { 'content-type': 'application/json;charset=utf-8' });
    res.end(JSON.stringify(body));
  }

  #handle(req: http.IncomingMessage, raw: string, res: http.ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://fake');
    const m = /^\/([^/]+)\/api\/v2(\/.*)$/.exec(url.pathname);
    const form = new URLSearchParams(req.method === 'GET' ? url.search : raw);
    const site = m?.[1] ?? '';
    const path = m?.[2] ?? url.pathname;
    this.requests.push({ method: req.method ?? '', site, path, headers: req.headers, form, at: Date.now() });
    if (this.failing) return this.#send(res, 500, { message: 'Sorry, something went wrong', type: 'internal_error', api_error_code: 'internal_error', http_status_code: 500 });
    const auth = /^Basic (.+)$/.exec(req.headers.authorization ?? '');
    const key = auth ? Buffer.from(auth[1]!, 'base64').toString('utf8').replace(/:$/, '') : '';
    if (!m || !this.sites.has(site) || this.sites.get(site) !== key) {
      return this.#send(res, 401, {
        message: 'Sorry, authentication failed. Invalid api key', type: 'invalid_request', api_error_code: 'api_authentication_failed',
        error_code: 'api_authentication_invalid_key', http_status_code: 401,
      });
    }
    const idem = req.headers['chargebee-idempotency-key'];
    const idemKey = typeof idem === 'string' ? `${site}:${req.method} ${path}:${idem}` : undefined;
    if (idemKey && this.#idempotent.has(idemKey)) {
      const kept = this.#idempotent.get(idemKey)!;
      res.setHeader('chargebee-idempotency-replayed', 'true');
      return this.#send(res, kept.status, kept.body);
    }
    const answer = (status: number, body: unknown) => {
      if (idemKey) this.#idempotent.set(idemKey, { status, body });
      this.#send(res, status, body);
    };
    const notFound = (what: string) => answer(404, {
      message: `Sorry, we couldn't find that resource: ${what}`, type: 'invalid_request', api_error_code: 'resource_not_found',
      error_code: 'referenced_resource_not_found', http_status_code: 404,
    });
    if (req.method === 'GET' && path === '/item_prices') {
      return answer(200, { list: [...this.itemPrices].slice(0, 1).map((id) => ({ item_price: { id, object: 'item_price' } })) });
    }
    if (req.method === 'POST' && path === '/hosted_pages/checkout_new_for_items') {
      const itemPriceId = form.get('subscription_items[item_price_id][0]') ?? '';
      if (!this.itemPrices.has(itemPriceId)) return notFound(itemPriceId);
      const id = `hp_${rand(20)}`;
      this.pages.set(id, { id, site, subscriptionId: form.get('subscription[id]') ?? `cb_${rand()}`, itemPriceId });
      return answer(200, {
        hosted_page: {
          id, type: 'checkout_new', url: `https://${site}.chargebee.com/pages/v4/${id}/`, state: 'created', embed: false,
          created_at: Math.floor(Date.now() / 1000), expires_at: Math.floor(Date.now() / 1000) + 3600, object: 'hosted_page',
          pass_thru_content: form.get('pass_thru_content'),
        },
      });
    }
    const cancel = /^\/subscriptions\/([^/]+)\/cancel_for_items$/.exec(path);
    if (req.method === 'POST' && cancel) {
      const sub = this.subscriptions.get(decodeURIComponent(cancel[1]!));
      if (!sub) return notFound(cancel[1]!);
      if (sub.status === 'cancelled') {
        return answer(400, { message: 'The subscription is already cancelled', type: 'invalid_request', api_error_code: 'invalid_state_for_request', http_status_code: 400 });
      }
      sub.status = 'cancelled';
      return answer(200, { subscription: { id: sub.id, status: 'cancelled', customer_id: sub.customer_id, object: 'subscription' }, customer: { id: sub.customer_id } });
    }
    return notFound(path);
  }
}
