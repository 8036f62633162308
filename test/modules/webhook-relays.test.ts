// Webhook relays: the contract's operations (types, create/update, get, list, delete) with their
// messages, validation, the premium gate and tenancy, secrets masked; the public ingress for each
// provider (signatures computed here independently of our code: Twilio with the fake's signer,
// Stripe and Chargebee with node:crypto), deduplication, what is stored, deliveries and replay.
// The delivery runner is not under test here (no worker): deliveries stay as the ingress made them.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, it } from 'node:test';
import { redactUrl } from '../../src/app.ts';
import { MAX_DELIVERY_ATTEMPTS } from '../../src/webhooks/deliver.ts';
import { forEachEngine } from '../helpers/engines.ts';
import type { Reply } from '../helpers/harness.ts';
import { twilioSignature } from '../helpers/fake-twilio.ts';

const PUBLIC_URL = 'https://relay.callplane.test';
const RECEIVER = 'https://hooks.example.com/inbound';

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  assert.equal(typeof res.body.message, 'string');
  for (const w of words) assert.ok(res.body.message.includes(w), `"${res.body.message}" should name ${w}`);
}

const sid = (prefix: string) => `${prefix}${crypto.randomBytes(16).toString('hex')}`;
const stripeHeader = (secret: string, body: string | Buffer, t = Math.floor(Date.now() / 1000)) =>
  `t=${t},v1=${crypto.createHmac('sha256', secret).update(`${t}.`).update(body).digest('hex')}`;
const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
const form = (params: Record<string, string>) => new URLSearchParams(params).toString();

it('request logs show no ingress id: it is the relay\'s credential', () => {
  const id = crypto.randomBytes(32).toString('base64url');
  assert.equal(redactUrl(`/hooks/relay/${id}`), '/hooks/relay/[redacted]');
  assert.equal(redactUrl(`/hooks/relay/${id}?bodySHA256=ab&token=t`), '/hooks/relay/[redacted]?bodySHA256=ab&token=[redacted]');
  assert.equal(redactUrl('/api/v2/webhookRelay/generic?token=t'), '/api/v2/webhookRelay/generic?token=[redacted]');
});

forEachEngine('webhook relays', (h) => {
  const post = (token: string, type: string, body: unknown, query?: Record<string, unknown>) =>
    h().call('POST', `/api/v2/webhookRelay/${type}`, { token, body, query });
  const get = (token: string, type: string, query?: Record<string, unknown>) => h().call('GET', `/api/v2/webhookRelay/${type}`, { token, query });
  const del = (token: string, type: string, query?: Record<string, unknown>) => h().call('DELETE', `/api/v2/webhookRelay/${type}`, { token, query });
  const list = (token: string, query?: Record<string, unknown>) => h().call('GET', '/api/v2/webhookRelay', { token, query });
  const deliveries = (token: string, type: string, query?: Record<string, unknown>) =>
    h().call('GET', `/api/v2/webhookRelay/${type}/deliveries`, { token, query });

  async function premiumOrg() {
    const r = await h().reseller();
    const o = await h().organization(r.id, { vidaPremium: true });
    return { r, o };
  }

  /** Creates a relay that must be accepted; answers the whole body. */
  async function configured(token: string, type: string, body: Record<string, unknown> = {}) {
    const res = await post(token, type, { url: RECEIVER, ...body });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body;
  }

  /** Posts to an ingress URL as a provider would: no token, the body as given. */
  async function ingress(url: string, payload: string | Buffer, headers: Record<string, string> = {}): Promise<Reply> {
    assert.ok(url.startsWith(PUBLIC_URL), url);
    const res = await h().app.inject({ method: 'POST', url: url.slice(PUBLIC_URL.length), payload, headers });
    let body: any = res.body;
    try { body = res.json(); } catch { /* TwiML */ }
    return { status: res.statusCode, body, headers: res.headers };
  }

  const events = (orgId: number) =>
    h().database.db.selectFrom('relay_events').selectAll().where('org_id', '=', orgId).orderBy('received_at').orderBy('id').execute();
  const deliveryRows = (orgId: number) =>
    h().database.db.selectFrom('webhook_deliveries').selectAll().where('org_id', '=', orgId).orderBy('created_at').orderBy('id').execute();

  async function addTwilio(r: { token: string }, orgId: number) {
    const authToken = crypto.randomBytes(16).toString('hex');
    const res = await h().call('POST', '/api/v2/numberingProvider', {
      token: r.token, query: { targetOrganizationId: orgId }, body: { providerId: 'twilio', config: { accountSid: sid('AC'), authToken } },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return authToken;
  }

  describe('configuration', () => {
    it('lists the supported types, each with a name and a description', async () => {
      const { o } = await premiumOrg();
      const res = await h().call('GET', '/api/v2/webhookRelay/types', { token: o.token });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.success, true);
      assert.equal(res.body.message, 'Webhook Relay types fetched successfully');
      assert.deepEqual(res.body.types.map((t: any) => t.name), ['twilioSMS', 'twilioVoice', 'chargebee', 'stripe', 'generic']);
      for (const t of res.body.types) assert.ok(typeof t.description === 'string' && t.description.length > 20, JSON.stringify(t));
    });

    it('an unknown type is 404 with the contract\'s message on every operation', async () => {
      const { o } = await premiumOrg();
      const msg = "Webhook Relay type 'foo' is not supported.";
      for (const res of [await post(o.token, 'foo', { url: RECEIVER }), await get(o.token, 'foo'), await del(o.token, 'foo'), await deliveries(o.token, 'foo')]) {
        expectError(res, 404);
        assert.equal(res.body.message, msg);
      }
    });

    it('an organization that is not premium gets 403 and nothing is stored', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const res = await post(o.token, 'generic', { url: RECEIVER });
      expectError(res, 403);
      assert.equal(res.body.message, 'Webhook Relay is a premium feature. Please upgrade your account.');
      expectError(await get(o.token, 'generic'), 403, 'premium');
      expectError(await list(o.token), 403, 'premium');
      expectError(await del(o.token, 'generic'), 403, 'premium');
      const rows = await h().database.db.selectFrom('webhook_relays').selectAll().where('org_id', '=', o.id).execute();
      assert.equal(rows.length, 0);
    });

    it('creates with the defaults, shows the ingress URL and issues our signing secret once', async () => {
      const { o } = await premiumOrg();
      const body = await configured(o.token, 'twilioSMS');
      assert.equal(body.success, true);
      assert.equal(body.message, "Webhook Relay for type 'twilioSMS' configured successfully.");
      const c = body.config;
      assert.equal(c.type, 'twilioSMS');
      assert.equal(c.url, RECEIVER);
      assert.equal(c.timeout, 15000);
      assert.deepEqual(c.successStatusCodes, Array.from({ length: 100 }, (_, i) => 200 + i));
      assert.deepEqual(c.headers, []);
      assert.equal(c.enabled, true);
      assert.match(c.ingressUrl, /^https:\/\/relay\.callplane\.test\/hooks\/relay\/[A-Za-z0-9_-]{43}$/);
      assert.match(body.signingSecret, /^whsec_[A-Za-z0-9+/=]{20,}$/);
      assert.equal(c.signingSecret, `****${body.signingSecret.slice(-4)}`);
      // No twilio provider yet: the answer says the ingress cannot verify anything.
      assert.equal(c.verification.scheme, 'twilio-signature');
      assert.equal(c.verification.ready, false);

      const read = await get(o.token, 'twilioSMS');
      assert.equal(read.status, 200, JSON.stringify(read.body));
      assert.equal(read.body.message, 'Webhook Relay configuration fetched successfully.');
      assert.equal(read.body.config.ingressUrl, c.ingressUrl);
      assert.equal(read.body.signingSecret, undefined);
      assert.equal(read.body.config.signingSecret, c.signingSecret);
      assert.ok(!JSON.stringify(read.body).includes(body.signingSecret));
    });

    it('updates in place: the ingress URL and signing secret stay; fields left out keep their values', async () => {
      const { o } = await premiumOrg();
      const first = await configured(o.token, 'generic', {
        timeout: 5000, headers: [{ Authorization: 'Bearer first-secret-value' }, { 'X-Customer-ID': 'abc123' }], successStatusCodes: [202, 200],
      });
      assert.deepEqual(first.config.successStatusCodes, [200, 202]);
      // Another path on the same origin (another origin needs the headers again: secret-targets.test.ts).
      const second = await configured(o.token, 'generic', { url: 'https://hooks.example.com/other-hook' });
      assert.equal(second.message, "Webhook Relay for type 'generic' configured successfully.");
      assert.equal(second.signingSecret, undefined, 'an update does not issue a new secret');
      assert.equal(second.config.url, 'https://hooks.example.com/other-hook');
      assert.equal(second.config.ingressUrl, first.config.ingressUrl);
      assert.equal(second.config.signingSecret, first.config.signingSecret);
      assert.equal(second.config.timeout, 5000);
      assert.deepEqual(second.config.successStatusCodes, [200, 202]);
      assert.deepEqual(second.config.headers, [{ Authorization: '****alue' }, { 'X-Customer-ID': '****' }]);
      const third = await configured(o.token, 'generic', { headers: [], timeout: 30000 });
      assert.deepEqual(third.config.headers, []);
      assert.equal(third.config.timeout, 30000);
      const rows = await h().database.db.selectFrom('webhook_relays').selectAll().where('org_id', '=', o.id).execute();
      assert.equal(rows.length, 1);

      const rotated = await configured(o.token, 'generic', { rotateSigningSecret: true });
      assert.match(rotated.signingSecret, /^whsec_/);
      assert.notEqual(rotated.signingSecret, first.signingSecret);
      assert.equal(rotated.config.signingSecret, `****${rotated.signingSecret.slice(-4)}`);
      assert.equal(h().box.open(rows[0].signing_secret), first.signingSecret);
    });

    it('concurrent creations of one type make one relay and issue one signing secret', async () => {
      const { o } = await premiumOrg();
      const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => post(o.token, 'generic', { url: `${RECEIVER}/${i}` })));
      for (const res of answers) assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(answers.filter((res) => res.body.signingSecret !== undefined).length, 1);
      assert.equal(new Set(answers.map((res) => res.body.config.ingressUrl)).size, 1);
      const rows = await h().database.db.selectFrom('webhook_relays').selectAll().where('org_id', '=', o.id).execute();
      assert.equal(rows.length, 1);
    });

    it('lists every relay of the organization; 404 when there is none; deletes with the contract\'s messages', async () => {
      const { o } = await premiumOrg();
      const none = await list(o.token);
      expectError(none, 404);
      assert.equal(none.body.message, 'No webhook relay configurations found.');
      await configured(o.token, 'generic');
      await configured(o.token, 'chargebee', { username: 'cb-user', password: 'cb-password-123' });
      const all = await list(o.token);
      assert.equal(all.status, 200, JSON.stringify(all.body));
      assert.equal(all.body.message, 'Webhook Relay configurations fetched successfully.');
      assert.deepEqual(all.body.configs.map((c: any) => c.type).sort(), ['chargebee', 'generic']);

      const gone = await del(o.token, 'generic');
      assert.equal(gone.status, 200, JSON.stringify(gone.body));
      assert.equal(gone.body.message, "Webhook Relay type 'generic' removed successfully.");
      const again = await del(o.token, 'generic');
      expectError(again, 404);
      assert.equal(again.body.message, "Webhook Relay type 'generic' was not configured.");
      const read = await get(o.token, 'generic');
      expectError(read, 404);
      assert.equal(read.body.message, "Webhook Relay type 'generic' not configured.");
      assert.deepEqual((await list(o.token)).body.configs.map((c: any) => c.type), ['chargebee']);
    });

    it('refuses bad input with a message naming the field, and stores nothing', async () => {
      const { o } = await premiumOrg();
      const bad = async (body: unknown, ...words: string[]) => {
        const res = await post(o.token, 'generic', body);
        expectError(res, 400, ...words);
        return res.body.message as string;
      };
      assert.match(await bad({ url: RECEIVER, headers: { Authorization: 'x' } }), /^headers must be an array of single-key objects/);
      assert.equal(await bad({ url: RECEIVER, headers: [{ A: '1', B: '2' }] }).then((m) => m.includes('single-key')), true);
      assert.equal(await bad({ url: RECEIVER, headers: ['Authorization: x'] }).then((m) => m.includes('headers')), true);
      await bad({ url: RECEIVER, headers: [{ Host: 'evil.example.com' }] }, 'Host');
      await bad({ url: RECEIVER, headers: [{ 'Content-Length': '5' }] }, 'Content-Length');
      await bad({ url: RECEIVER, headers: [{ 'webhook-signature': 'v1,x' }] }, 'webhook-signature');
      await bad({ url: RECEIVER, headers: [{ 'X-Evil': 'a\r\nInjected: yes' }] }, 'X-Evil');
      await bad({}, 'url');
      await bad({ url: '/relative/path' }, 'url');
      await bad({ url: 'ftp://files.example.com/x' }, 'url');
      await bad({ url: 'https://user:pass@hooks.example.com/x' }, 'url');
      for (const ip of ['http://127.0.0.1:8080/x', 'http://10.1.2.3/x', 'http://169.254.169.254/latest/meta-data', 'http://[::1]/x', 'http://192.168.0.10/x']) {
        await bad({ url: ip }, 'url');
      }
      await bad({ url: RECEIVER, timeout: 0 }, 'timeout');
      await bad({ url: RECEIVER, timeout: -5 }, 'timeout');
      await bad({ url: RECEIVER, timeout: 30001 }, 'timeout', '30000');
      await bad({ url: RECEIVER, timeout: 1.5 }, 'timeout');
      await bad({ url: RECEIVER, successStatusCodes: [99] }, 'successStatusCodes');
      await bad({ url: RECEIVER, successStatusCodes: [200, 600] }, 'successStatusCodes');
      await bad({ url: RECEIVER, successStatusCodes: [] }, 'successStatusCodes');
      await bad({ url: RECEIVER, successStatusCodes: [200.5] }, 'successStatusCodes');
      await bad({ url: RECEIVER, stripeSigningSecret: 'whsec_abc' }, 'stripeSigningSecret', 'stripe');
      expectError(await post(o.token, 'chargebee', { url: RECEIVER, username: 'a:b', password: 'p' }), 400, 'username');
      expectError(await post(o.token, 'stripe', { url: RECEIVER, stripeSigningSecret: 'sk_live_not_a_signing_secret' }), 400, 'stripeSigningSecret');
      const rows = await h().database.db.selectFrom('webhook_relays').selectAll().where('org_id', '=', o.id).execute();
      assert.equal(rows.length, 0);
      // The limits themselves are accepted.
      const edge = await configured(o.token, 'generic', { timeout: 1, successStatusCodes: [100, 599] });
      assert.equal(edge.config.timeout, 1);
      assert.deepEqual(edge.config.successStatusCodes, [100, 599]);
    });

    it('never answers a secret in full, and stores them sealed', async () => {
      const { o } = await premiumOrg();
      const header = `Bearer ${crypto.randomBytes(16).toString('hex')}`;
      const stripeSecret = `whsec_${crypto.randomBytes(24).toString('base64')}`;
      const password = crypto.randomBytes(12).toString('hex');
      const issued = [
        (await configured(o.token, 'generic', { headers: [{ Authorization: header }] })).signingSecret,
        (await configured(o.token, 'stripe', { stripeSigningSecret: stripeSecret })).signingSecret,
        (await configured(o.token, 'chargebee', { username: 'billing', password })).signingSecret,
      ];
      const secrets = [header, stripeSecret, password, ...issued];
      const answers = [
        await get(o.token, 'generic'), await get(o.token, 'stripe'), await get(o.token, 'chargebee'), await list(o.token),
        await post(o.token, 'chargebee', { url: RECEIVER }),
      ];
      for (const res of answers) {
        assert.equal(res.status, 200, JSON.stringify(res.body));
        const text = JSON.stringify(res.body);
        for (const s of secrets) assert.ok(!text.includes(s), `answer shows a secret: ${text}`);
      }
      const stripe = (await get(o.token, 'stripe')).body.config;
      assert.equal(stripe.stripeSigningSecret, `****${stripeSecret.slice(-4)}`);
      assert.equal(stripe.verification.ready, true);
      const chargebee = (await get(o.token, 'chargebee')).body.config;
      assert.equal(chargebee.username, 'billing');
      assert.equal(chargebee.password, `****${password.slice(-4)}`);
      const rows = await h().database.db.selectFrom('webhook_relays').selectAll().where('org_id', '=', o.id).execute();
      const stored = JSON.stringify(rows);
      for (const s of secrets) assert.ok(!stored.includes(s), 'a secret is stored in clear');
    });

    it('acts on the token\'s own organization; resellers name theirs with targetAccountId; others see nothing', async () => {
      const { r, o } = await premiumOrg();
      const { r: r2, o: o2 } = await premiumOrg();
      await configured(o.token, 'generic');
      // Another organization: its own (absent) relay, never o's.
      expectError(await get(o2.token, 'generic'), 404, 'not configured');
      expectError(await del(o2.token, 'generic'), 404);
      // The reseller above o acts on it by id; another reseller cannot reach it.
      const viaReseller = await get(r.token, 'generic', { targetAccountId: o.id });
      assert.equal(viaReseller.status, 200, JSON.stringify(viaReseller.body));
      expectError(await get(r2.token, 'generic', { targetAccountId: o.id }), 404, String(o.id));
      expectError(await post(r2.token, 'generic', { url: RECEIVER }, { targetAccountId: o.id }), 404);
      // A reseller acting on itself, and an agent token, are refused.
      expectError(await get(r.token, 'generic'), 403, 'organization');
      const agent = await h().agent(o.id);
      expectError(await get(agent.token, 'generic'), 403, 'organization');
      // A reseller configures its organization's relay.
      const made = await post(r.token, 'stripe', { url: RECEIVER }, { targetAccountId: o.id });
      assert.equal(made.status, 200, JSON.stringify(made.body));
      assert.deepEqual((await list(o.token)).body.configs.map((c: any) => c.type).sort(), ['generic', 'stripe']);
      expectError(await list(o2.token), 404);
      expectError(await list(r2.token, { targetAccountId: o.id }), 404);
    });
  });

  describe('ingress', () => {
    it('an unknown ingress id is 404 and stores nothing', async () => {
      const res = await ingress(`${PUBLIC_URL}/hooks/relay/${crypto.randomBytes(32).toString('base64url')}`, '{}', { 'content-type': 'application/json' });
      expectError(res, 404);
      const short = await ingress(`${PUBLIC_URL}/hooks/relay/x`, '{}', { 'content-type': 'application/json' });
      expectError(short, 404);
    });

    it('generic: stores the exact bytes of any content type with a delivery due now, and answers 200', async () => {
      const { o } = await premiumOrg();
      const { config } = await configured(o.token, 'generic');
      const before = Date.now();
      const bodies: Array<[string | undefined, Buffer]> = [
        ['application/json', Buffer.from('{"b": 1,  "a":"é"}')],
        ['application/x-www-form-urlencoded', Buffer.from('a=1&b=two+words&b=%E2%9C%93')],
        ['text/plain; charset=utf-8', Buffer.from('plain text\n')],
        ['application/octet-stream', Buffer.from([0, 255, 1, 128, 10])],
        [undefined, Buffer.from('no content type')],
      ];
      for (const [ct, body] of bodies) {
        const res = await ingress(config.ingressUrl, body, { ...(ct ? { 'content-type': ct } : {}), 'user-agent': 'ProviderBot/1.0', authorization: 'Bearer not-kept' });
        assert.equal(res.status, 200, `${ct}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.success, true);
      }
      const stored = await events(o.id);
      assert.equal(stored.length, bodies.length);
      for (const [i, [ct, body]] of bodies.entries()) {
        assert.deepEqual(Buffer.from(stored[i].body, 'base64'), body, `body ${i}`);
        assert.equal(stored[i].content_type, ct ?? null);
        const headers = JSON.parse(stored[i].headers);
        assert.equal(headers['user-agent'], 'ProviderBot/1.0');
        assert.equal(headers.authorization, undefined);
        assert.equal(stored[i].provider_event_id, null);
      }
      const rows = await deliveryRows(o.id);
      assert.equal(rows.length, bodies.length);
      const relay = (await h().database.db.selectFrom('webhook_relays').select('id').where('org_id', '=', o.id).executeTakeFirstOrThrow()).id;
      for (const [i, d] of rows.entries()) {
        assert.equal(d.kind, 'relay');
        assert.equal(d.relay_id, relay);
        assert.equal(d.relay_event_id, stored[i].id);
        assert.equal(d.event_id, stored[i].id);
        assert.equal(d.event_type, 'generic');
        assert.equal(d.state, 'pending');
        assert.equal(d.attempt, 0);
        assert.equal(d.max_attempts, MAX_DELIVERY_ATTEMPTS, 'the whole retry schedule, no more');
        assert.ok(d.run_at >= before && d.run_at <= Date.now(), 'due now');
      }
    });

    it('generic: a repeated Idempotency-Key or webhook-id is answered 200 and not stored again', async () => {
      const { o } = await premiumOrg();
      const { config } = await configured(o.token, 'generic');
      const headers = { 'content-type': 'application/json', 'idempotency-key': 'order-42' };
      assert.equal((await ingress(config.ingressUrl, '{"n":1}', headers)).status, 200);
      const dup = await ingress(config.ingressUrl, '{"n":1}', headers);
      assert.equal(dup.status, 200);
      assert.equal(dup.body.duplicate, true);
      assert.equal((await ingress(config.ingressUrl, '{"n":2}', { 'content-type': 'application/json', 'webhook-id': 'msg_1' })).status, 200);
      assert.equal((await ingress(config.ingressUrl, '{"n":2}', { 'content-type': 'application/json', 'webhook-id': 'msg_1' })).body.duplicate, true);
      // Without a key every request is its own event.
      await ingress(config.ingressUrl, '{"n":3}', { 'content-type': 'application/json' });
      await ingress(config.ingressUrl, '{"n":3}', { 'content-type': 'application/json' });
      assert.equal((await events(o.id)).length, 4);
      assert.equal((await deliveryRows(o.id)).length, 4);
      assert.deepEqual((await events(o.id)).map((e) => e.provider_event_id), ['order-42', 'msg_1', null, null]);
    });

    it('twilioSMS: a form signed with the organization\'s auth token is stored and answered with empty TwiML; forged ones are refused', async () => {
      const { r, o } = await premiumOrg();
      const { config } = await configured(o.token, 'twilioSMS');
      const params = { AccountSid: sid('AC'), MessageSid: sid('SM'), SmsStatus: 'received', From: '+14155550100', To: '+14155550101', Body: 'Hello & welcome' };
      const payload = form(params);
      const formHeaders = (sig: string) => ({ 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': sig });

      // No twilio provider: nothing can be verified.
      expectError(await ingress(config.ingressUrl, payload, formHeaders('anything')), 403, 'twilio');
      const authToken = await addTwilio(r, o.id);
      assert.equal((await get(o.token, 'twilioSMS')).body.config.verification.ready, true);

      expectError(await ingress(config.ingressUrl, payload, { 'content-type': 'application/x-www-form-urlencoded' }), 403, 'X-Twilio-Signature');
      const forged = twilioSignature(crypto.randomBytes(16).toString('hex'), config.ingressUrl, params);
      expectError(await ingress(config.ingressUrl, payload, formHeaders(forged)), 403, 'X-Twilio-Signature');
      // Signed for other parameters than those sent.
      const tampered = twilioSignature(authToken, config.ingressUrl, { ...params, Body: 'something else' });
      expectError(await ingress(config.ingressUrl, payload, formHeaders(tampered)), 403);
      assert.equal((await events(o.id)).length, 0);
      assert.equal((await deliveryRows(o.id)).length, 0);

      const good = twilioSignature(authToken, config.ingressUrl, params);
      const res = await ingress(config.ingressUrl, payload, formHeaders(good));
      assert.equal(res.status, 200, String(res.body));
      assert.match(String(res.headers['content-type']), /^text\/xml/);
      assert.equal(res.body, '<?xml version="1.0" encoding="UTF-8"?><Response/>');
      const stored = await events(o.id);
      assert.equal(stored.length, 1);
      assert.equal(Buffer.from(stored[0].body, 'base64').toString(), payload);
      assert.equal(JSON.parse(stored[0].headers)['x-twilio-signature'], good);
      assert.equal((await deliveryRows(o.id)).length, 1);

      // Twilio retrying the same webhook: answered the same, not stored again.
      const retry = await ingress(config.ingressUrl, payload, formHeaders(good));
      assert.equal(retry.status, 200);
      assert.equal((await events(o.id)).length, 1);
      assert.equal((await deliveryRows(o.id)).length, 1);
      // A status callback of the same message is another event.
      const status = { AccountSid: params.AccountSid, MessageSid: params.MessageSid, MessageStatus: 'delivered' };
      assert.equal((await ingress(config.ingressUrl, form(status), formHeaders(twilioSignature(authToken, config.ingressUrl, status)))).status, 200);
      assert.equal((await events(o.id)).length, 2);
    });

    it('twilioSMS: the I-Twilio-Idempotency-Token header dedupes retries', async () => {
      const { r, o } = await premiumOrg();
      const authToken = await addTwilio(r, o.id);
      const { config } = await configured(o.token, 'twilioSMS');
      const token = crypto.randomUUID();
      for (const n of [1, 2]) {
        // Same token, different body (e.g. a field Twilio adds on a retry): one event.
        const params = { MessageSid: sid('SM'), SmsStatus: 'received', Body: `attempt ${n}` };
        const res = await ingress(config.ingressUrl, form(params), {
          'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(authToken, config.ingressUrl, params),
          'i-twilio-idempotency-token': token,
        });
        assert.equal(res.status, 200);
      }
      const stored = await events(o.id);
      assert.equal(stored.length, 1);
      assert.equal(JSON.parse(stored[0].headers)['i-twilio-idempotency-token'], token);
    });

    it('twilioVoice: a JSON body signed through bodySHA256 in the URL is accepted; a changed body is refused', async () => {
      const { r, o } = await premiumOrg();
      const authToken = await addTwilio(r, o.id);
      const { config } = await configured(o.token, 'twilioVoice');
      const body = JSON.stringify({ CallSid: sid('CA'), CallStatus: 'completed', Duration: '12' });
      const url = `${config.ingressUrl}?bodySHA256=${crypto.createHash('sha256').update(body).digest('hex')}`;
      const headers = { 'content-type': 'application/json', 'x-twilio-signature': twilioSignature(authToken, url, {}) };
      const changed = body.replace('12', '13');
      expectError(await ingress(url, changed, headers), 403, 'X-Twilio-Signature');
      assert.equal((await events(o.id)).length, 0);
      const ok = await ingress(url, body, headers);
      assert.equal(ok.status, 200, String(ok.body));
      assert.match(String(ok.headers['content-type']), /^text\/xml/);
      const stored = await events(o.id);
      assert.equal(stored.length, 1);
      assert.equal(Buffer.from(stored[0].body, 'base64').toString(), body);
      assert.equal((await deliveryRows(o.id))[0].event_type, 'twilioVoice');
      assert.equal((await ingress(url, body, headers)).status, 200);
      assert.equal((await events(o.id)).length, 1, 'the retry is not stored again');
    });

    it('stripe: Stripe-Signature with the endpoint secret is verified (timestamp within 5 minutes); the event id dedupes', async () => {
      const { o } = await premiumOrg();
      const { config } = await configured(o.token, 'stripe');
      const secret = `whsec_${crypto.randomBytes(24).toString('base64')}`;
      const event = JSON.stringify({ id: 'evt_1NqZ', type: 'invoice.paid', data: { object: { id: 'in_1' } } });
      const json = (sig: string) => ({ 'content-type': 'application/json; charset=utf-8', 'stripe-signature': sig });
      // Not configured with the endpoint secret yet: refused.
      expectError(await ingress(config.ingressUrl, event, json(stripeHeader(secret, event))), 403, 'stripeSigningSecret');
      await configured(o.token, 'stripe', { stripeSigningSecret: secret });

      expectError(await ingress(config.ingressUrl, event, { 'content-type': 'application/json' }), 403, 'Stripe-Signature');
      expectError(await ingress(config.ingressUrl, event, json(stripeHeader(`whsec_${crypto.randomBytes(24).toString('base64')}`, event))), 403, 'Stripe-Signature');
      expectError(await ingress(config.ingressUrl, event.replace('in_1', 'in_2'), json(stripeHeader(secret, event))), 403);
      expectError(await ingress(config.ingressUrl, event, json(stripeHeader(secret, event, Math.floor(Date.now() / 1000) - 600))), 403, 'timestamp');
      expectError(await ingress(config.ingressUrl, event, json('garbage')), 403);
      assert.equal((await events(o.id)).length, 0);

      // A rolled secret: several v1 signatures, one of them valid.
      const t = Math.floor(Date.now() / 1000);
      const other = crypto.createHmac('sha256', 'whsec_old').update(`${t}.${event}`).digest('hex');
      const header = `t=${t},v1=${other},${stripeHeader(secret, event, t).split(',')[1]},v0=abc`;
      const res = await ingress(config.ingressUrl, event, json(header));
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(res.body, { success: true });
      const dup = await ingress(config.ingressUrl, event, json(stripeHeader(secret, event)));
      assert.equal(dup.status, 200);
      assert.equal(dup.body.duplicate, true);
      const stored = await events(o.id);
      assert.equal(stored.length, 1);
      assert.equal(stored[0].provider_event_id, 'evt_1NqZ');
      assert.equal(JSON.parse(stored[0].headers)['stripe-signature'], header);
      assert.equal((await deliveryRows(o.id)).length, 1);
    });

    it('chargebee with only url (the contract\'s body): basic-auth credentials are generated, shown once, stored sealed, and checked', async () => {
      const { o } = await premiumOrg();
      const created = await post(o.token, 'chargebee', { url: RECEIVER });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const { username, password, config } = created.body;
      assert.equal(typeof username, 'string');
      assert.equal(typeof password, 'string');
      assert.ok(!username.includes(':') && username.length >= 8, username);
      assert.ok(password.length >= 24, 'a generated password is long');
      assert.equal(config.username, username);
      assert.equal(config.password, `****${password.slice(-4)}`);
      assert.equal(config.verification.ready, true);
      // Shown once: neither a read nor an update answers the password again.
      for (const res of [await get(o.token, 'chargebee'), await list(o.token), await post(o.token, 'chargebee', { url: `${RECEIVER}/2` })]) {
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.ok(!JSON.stringify(res.body).includes(password), 'the generated password is answered again');
        assert.equal(res.body.password, undefined);
      }
      const rows = await h().database.db.selectFrom('webhook_relays').selectAll().where('org_id', '=', o.id).execute();
      assert.ok(!JSON.stringify(rows).includes(password), 'the generated password is stored in clear');
      // The ingress accepts exactly the generated credentials.
      const json = { 'content-type': 'application/json' };
      expectError(await ingress(config.ingressUrl, '{"id":"ev_1"}', { ...json, authorization: basic(username, 'wrong') }), 401);
      assert.equal((await ingress(config.ingressUrl, '{"id":"ev_1"}', { ...json, authorization: basic(username, password) })).status, 200);
      // A username sent without a password: only the password is generated (and answered).
      const { o: o2 } = await premiumOrg();
      const half = await post(o2.token, 'chargebee', { url: RECEIVER, username: 'billing' });
      assert.equal(half.status, 200, JSON.stringify(half.body));
      assert.equal(half.body.username, undefined);
      assert.equal(typeof half.body.password, 'string');
      assert.equal(half.body.config.username, 'billing');
      assert.equal((await ingress(half.body.config.ingressUrl, '{"id":"ev_1"}', { ...json, authorization: basic('billing', half.body.password) })).status, 200);
    });

    it('chargebee: HTTP basic auth must match the configured credentials; the event id dedupes', async () => {
      const { o } = await premiumOrg();
      const password = crypto.randomBytes(12).toString('hex');
      const { config } = await configured(o.token, 'chargebee', { username: 'billing', password });
      const event = JSON.stringify({ id: 'ev_16BHbhF4s42tO2lK', event_type: 'subscription_created', content: {} });
      const json = { 'content-type': 'application/json' };
      const none = await ingress(config.ingressUrl, event, json);
      expectError(none, 401);
      assert.match(String(none.headers['www-authenticate']), /^Basic /);
      expectError(await ingress(config.ingressUrl, event, { ...json, authorization: basic('billing', 'wrong') }), 401);
      expectError(await ingress(config.ingressUrl, event, { ...json, authorization: basic('other', password) }), 401);
      expectError(await ingress(config.ingressUrl, event, { ...json, authorization: `Bearer ${password}` }), 401);
      assert.equal((await events(o.id)).length, 0);
      assert.equal((await ingress(config.ingressUrl, event, { ...json, authorization: basic('billing', password) })).status, 200);
      assert.equal((await ingress(config.ingressUrl, event, { ...json, authorization: basic('billing', password) })).body.duplicate, true);
      const stored = await events(o.id);
      assert.equal(stored.length, 1);
      assert.equal(stored[0].provider_event_id, 'ev_16BHbhF4s42tO2lK');
      assert.ok(!stored[0].headers.includes(password), 'credentials are not kept with the event');
      // New credentials: the old ones stop working.
      await configured(o.token, 'chargebee', { password: 'rotated-password-1' });
      expectError(await ingress(config.ingressUrl, '{"id":"ev_2"}', { ...json, authorization: basic('billing', password) }), 401);
      assert.equal((await ingress(config.ingressUrl, '{"id":"ev_2"}', { ...json, authorization: basic('billing', 'rotated-password-1') })).status, 200);
    });

    it('refuses when the organization is no longer premium, after the relay is deleted, and beyond the body limit', async () => {
      const { r, o } = await premiumOrg();
      const { config } = await configured(o.token, 'generic');
      assert.equal((await ingress(config.ingressUrl, 'x', { 'content-type': 'text/plain' })).status, 200);
      const big = await ingress(config.ingressUrl, Buffer.alloc(h().config.bodyLimitBytes + 1, 97), { 'content-type': 'text/plain' });
      expectError(big, 413);
      const down = await h().call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body: { vidaPremium: false } });
      assert.equal(down.status, 200, JSON.stringify(down.body));
      expectError(await ingress(config.ingressUrl, 'x', { 'content-type': 'text/plain' }), 403, 'premium');
      await h().call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body: { vidaPremium: true } });
      assert.equal((await del(o.token, 'generic')).status, 200);
      expectError(await ingress(config.ingressUrl, 'x', { 'content-type': 'text/plain' }), 404);
      assert.equal((await events(o.id)).length, 0, 'events go with their relay');
    });
  });

  describe('deliveries and replay', () => {
    it('lists each delivery with its attempts, and a replay is a new delivery of the same event, due now', async () => {
      const { r, o } = await premiumOrg();
      const { config } = await configured(o.token, 'generic');
      await ingress(config.ingressUrl, '{"first":true}', { 'content-type': 'application/json', 'idempotency-key': 'k1' });
      await ingress(config.ingressUrl, '{"second":true}', { 'content-type': 'application/json' });
      const listed = await deliveries(o.token, 'generic');
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
      assert.equal(listed.body.total, 2);
      const [second, first] = listed.body.deliveries;
      assert.equal(first.providerEventId, 'k1');
      assert.equal(second.providerEventId, null);
      assert.equal(first.state, 'pending');
      assert.deepEqual(first.attempts, []);
      assert.equal(typeof first.nextAttemptAt, 'number');

      // What the delivery runner records after two attempts that failed (written here directly:
      // the runner is not part of this suite).
      const db = h().database.db;
      const t0 = Date.now() - 10_000;
      await db.insertInto('delivery_attempts').values([
        { delivery_id: first.id, attempt: 1, started_at: t0, duration_ms: 31, status_code: 500, error: null, response_excerpt: 'oops', next_attempt_at: t0 + 5000 },
        { delivery_id: first.id, attempt: 2, started_at: t0 + 5000, duration_ms: 15000, status_code: null, error: 'timeout after 15000 ms', response_excerpt: null, next_attempt_at: null },
      ]).execute();
      await db.updateTable('webhook_deliveries').set({ state: 'failed', attempt: 2, last_status: null, last_error: 'timeout after 15000 ms', finished_at: t0 + 20_000 })
        .where('id', '=', first.id).execute();

      const page = await deliveries(o.token, 'generic', { limit: 1, offset: 1 });
      assert.equal(page.body.total, 2);
      assert.equal(page.body.deliveries.length, 1);
      const failed = page.body.deliveries[0];
      assert.equal(failed.id, first.id);
      assert.equal(failed.state, 'failed');
      assert.equal(failed.nextAttemptAt, null);
      assert.equal(failed.lastError, 'timeout after 15000 ms');
      assert.deepEqual(failed.attempts, [
        { attempt: 1, at: Math.floor(t0 / 1000), statusCode: 500, error: null, durationMs: 31, responseExcerpt: 'oops', nextAttemptAt: Math.floor((t0 + 5000) / 1000) },
        { attempt: 2, at: Math.floor((t0 + 5000) / 1000), statusCode: null, error: 'timeout after 15000 ms', durationMs: 15000, responseExcerpt: null, nextAttemptAt: null },
      ]);

      // Still pending: nothing to replay yet.
      expectError(await h().call('POST', `/api/v2/webhookRelay/generic/deliveries/${second.id}/replay`, { token: o.token }), 409, 'pending');
      expectError(await h().call('POST', '/api/v2/webhookRelay/generic/deliveries/dlv_nope/replay', { token: o.token }), 404);
      // Another organization cannot replay it, even naming the id.
      const { o: o2 } = await premiumOrg();
      await configured(o2.token, 'generic');
      expectError(await h().call('POST', `/api/v2/webhookRelay/generic/deliveries/${first.id}/replay`, { token: o2.token }), 404);

      const before = Date.now();
      const replay = await h().call('POST', `/api/v2/webhookRelay/generic/deliveries/${first.id}/replay`, { token: r.token, query: { targetAccountId: o.id } });
      assert.equal(replay.status, 200, JSON.stringify(replay.body));
      const again = replay.body.delivery;
      assert.notEqual(again.id, first.id);
      assert.equal(again.eventId, first.eventId);
      assert.equal(again.relayEventId, first.relayEventId);
      assert.equal(again.state, 'pending');
      const row = await db.selectFrom('webhook_deliveries').selectAll().where('id', '=', again.id).executeTakeFirstOrThrow();
      assert.equal(row.kind, 'relay');
      assert.equal(row.event_id, first.eventId);
      assert.equal(row.attempt, 0);
      assert.ok(row.run_at >= before && row.run_at <= Date.now(), 'due now');
      assert.equal((await deliveries(o.token, 'generic')).body.total, 3);
      assert.equal((await events(o.id)).length, 2, 'a replay stores no new event');
    });
  });
}, { CALLPLANE_PUBLIC_URL: PUBLIC_URL });
