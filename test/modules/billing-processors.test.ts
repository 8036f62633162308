// Billing through a payment processor (issue 26), end to end on both engines, with the official
// `stripe` and `chargebee` clients pointed at fakes on loopback (test/helpers/fake-stripe.ts,
// fake-chargebee.ts) that record every request: the billing system's configuration (required keys
// per type, the key checked with the processor, masked answers, the key bound to its site, who may
// configure it), subscribe answering the processor's checkout with the subscription pending, the
// processor's signed webhooks activating it (the plan's limits applied), replays and forgeries
// changing nothing, a payment failure's rule, and cancel cancelling at the processor once.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { FakeChargebee } from '../helpers/fake-chargebee.ts';
import { FakeStripe } from '../helpers/fake-stripe.ts';
import type { Harness, Reply } from '../helpers/harness.ts';

function assertStatus(res: Reply, status: number, label = ''): void {
  assert.equal(res.status, status, `${label} expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
  if (status >= 400) assert.equal(res.body.success, false, label);
}
function assertBad(res: Reply, field: string, label = ''): void {
  assertStatus(res, 400, label);
  assert.ok(String(res.body.message).includes(field), `${label} message '${res.body.message}' should name ${field}`);
}

const stripe = await FakeStripe.start();
const chargebee = await FakeChargebee.start();
after(async () => { await stripe.close(); await chargebee.close(); });

let n = 0;
/** A fresh set of Stripe keys the fake accepts. */
function stripeKeys() {
  const id = `${++n}x${Date.now()}`;
  const keys = { apiKey: `sk_test_${id}abcdef`, publishableKey: `pk_test_${id}abcdef`, webhookSigningKey: `whsec_${id}signing` };
  stripe.keys.add(keys.apiKey);
  return keys;
}
/** A fresh Chargebee site the fake knows, with its key. */
function chargebeeSite() {
  const site = `acme${++n}-test`;
  const keys = { site, apiKey: `test_cbkey_${n}_${Date.now()}`, publishableKey: `test_pub_${n}_abcdef`, webhookUsername: `hook${n}`, webhookPassword: `hookpass-${n}-secret` };
  chargebee.sites.set(site, keys.apiKey);
  return keys;
}

describe('processor API settings', () => {
  it('default to the real hosts and take an operator\'s URL; a bad one stops the start', () => {
    const base = { DATA_DIR: '/tmp/unused' };
    const d = loadConfig(base);
    assert.equal(d.stripeApiUrl, 'https://api.stripe.com');
    assert.equal(d.chargebeeApiUrl, 'https://{site}.chargebee.com');
    const set = loadConfig({ ...base, CALLPLANE_STRIPE_API_URL: 'http://127.0.0.1:9/', CALLPLANE_CHARGEBEE_API_URL: 'http://127.0.0.1:9/{site}' });
    assert.equal(set.stripeApiUrl, 'http://127.0.0.1:9');
    assert.equal(set.chargebeeApiUrl, 'http://127.0.0.1:9/{site}');
    assert.throws(() => loadConfig({ ...base, CALLPLANE_STRIPE_API_URL: 'ftp://x' }), (e) => e instanceof ConfigError && /CALLPLANE_STRIPE_API_URL/.test(e.message));
    assert.throws(() => loadConfig({ ...base, CALLPLANE_STRIPE_API_URL: 'https://x/v1' }), ConfigError);
    assert.throws(() => loadConfig({ ...base, CALLPLANE_STRIPE_API_URL: 'https://{site}.x' }), ConfigError);
    assert.throws(() => loadConfig({ ...base, CALLPLANE_CHARGEBEE_API_URL: 'not a url' }), ConfigError);
  });
});

forEachEngine('billing processors', (h) => {
  const call = (method: string, url: string, opts?: Parameters<Harness['call']>[2]) => h().call(method, url, opts);
  const configure = (token: string, body: Record<string, unknown>, targetAccountId?: number) =>
    call('POST', '/api/v2/billing/billingSystemConfig', { token, body, query: { targetAccountId } });
  const current = async (token: string) => {
    const r = await call('GET', '/api/v2/product/currentPlan', { token });
    assertStatus(r, 200);
    return r.body as { productPlanId: string; subscribed: boolean; subscription: { subscriptionId: string; state: string } | null; limits: { concurrencyPerRun: number } };
  };
  const postStripe = (accountId: number, ev: { body: string; signature: string }) =>
    call('POST', `/api/v2/billing/webhook/${accountId}/stripe`, { token: null, payload: ev.body, headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': ev.signature } });
  const postChargebee = (accountId: number, ev: { body: string; authorization: string }) =>
    call('POST', `/api/v2/billing/webhook/${accountId}/chargebee`, { token: null, payload: ev.body, headers: { 'content-type': 'application/json', authorization: ev.authorization } });

  /** A reseller with a Stripe billing system and one organization under it. */
  async function stripeReseller() {
    const r = await h().reseller();
    const keys = stripeKeys();
    assertStatus(await configure(r.token, { billingSystemType: 'stripe', ...keys }), 200, 'configure stripe');
    const o = await h().organization(r.id);
    return { r, o, keys };
  }
  const subscribe = (token: string, body: Record<string, unknown>) => call('POST', '/api/v2/product/subscribe', { token, body });

  describe('billingSystemConfig', () => {
    it('requires the keys of each type, naming the missing field', async () => {
      const r = await h().reseller();
      const keys = stripeKeys();
      assertBad(await configure(r.token, { billingSystemType: 'paypal', apiKey: keys.apiKey }), 'billingSystemType');
      assertBad(await configure(r.token, { apiKey: keys.apiKey }), 'billingSystemType');
      assertBad(await configure(r.token, { billingSystemType: 'stripe', apiKey: keys.apiKey, publishableKey: keys.publishableKey }), 'webhookSigningKey');
      assertBad(await configure(r.token, { billingSystemType: 'stripe', publishableKey: keys.publishableKey, webhookSigningKey: keys.webhookSigningKey }), 'apiKey');
      assertBad(await configure(r.token, { billingSystemType: 'stripe', ...keys, site: 'acme' }), 'site');
      assertBad(await configure(r.token, { billingSystemType: 'stripe', ...keys, publishableKey: 'sk_test_oops' }), 'publishableKey');
      const cb = chargebeeSite();
      for (const field of ['site', 'webhookUsername', 'webhookPassword', 'publishableKey', 'apiKey'] as const) {
        const body: Record<string, unknown> = { billingSystemType: 'chargebee', ...cb };
        delete body[field];
        assertBad(await configure(r.token, body), field, `chargebee without ${field}`);
      }
      assertBad(await configure(r.token, { billingSystemType: 'chargebee', ...cb, site: 'acme.chargebee.com' }), 'site');
      assertBad(await configure(r.token, { billingSystemType: 'chargebee', ...cb, webhookSigningKey: 'whsec_x' }), 'webhookSigningKey');
      // None of these reached a processor or was kept.
      const got = await call('GET', '/api/v2/billing/billingSystemSettings', { token: r.token });
      assertStatus(got, 200);
      assert.equal(got.body.billingSystem, null);
    });

    it('checks the key with the processor: refused is a 400 naming apiKey, unreachable or failing a 502, and nothing is kept', async () => {
      const r = await h().reseller();
      const keys = stripeKeys();
      const before = stripe.calls('GET /v1/balance').length;
      const bad = await configure(r.token, { billingSystemType: 'stripe', ...keys, apiKey: 'sk_test_notaccepted123' });
      assertBad(bad, 'apiKey');
      assert.match(bad.body.message, /Stripe \(HTTP 401\)/);
      const balance = stripe.calls('GET /v1/balance');
      assert.equal(balance.length, before + 1);
      assert.equal(balance.at(-1)!.headers.authorization, 'Bearer sk_test_notaccepted123');
      stripe.failing = true;
      try {
        const down = await configure(r.token, { billingSystemType: 'stripe', ...keys });
        assertStatus(down, 502);
        assert.match(down.body.message, /Stripe failed while checking the apiKey/);
      } finally { stripe.failing = false; }
      stripe.dropping = true;
      try {
        const gone = await configure(r.token, { billingSystemType: 'stripe', ...keys });
        assertStatus(gone, 502);
        assert.match(gone.body.message, /Stripe could not be reached/);
      } finally { stripe.dropping = false; }
      const cb = chargebeeSite();
      const cbBad = await configure(r.token, { billingSystemType: 'chargebee', ...cb, apiKey: 'wrong_key_12345' });
      assertBad(cbBad, 'apiKey');
      assert.match(cbBad.body.message, /Chargebee \(HTTP 401\)/);
      chargebee.failing = true;
      try { assertStatus(await configure(r.token, { billingSystemType: 'chargebee', ...cb }), 502); } finally { chargebee.failing = false; }
      assert.equal((await call('GET', '/api/v2/billing/billingSystemSettings', { token: r.token })).body.billingSystem, null);
      // The key that works is kept.
      assertStatus(await configure(r.token, { billingSystemType: 'stripe', ...keys }), 200);
    });

    it('answers every key masked, seals them at rest, and gives the webhook URL to configure', async () => {
      const r = await h().reseller();
      const keys = stripeKeys();
      const saved = await configure(r.token, { billingSystemType: 'stripe', ...keys });
      assertStatus(saved, 200);
      for (const res of [saved, await call('GET', '/api/v2/billing/billingSystemSettings', { token: r.token })]) {
        assertStatus(res, 200);
        const text = JSON.stringify(res.body);
        for (const secret of Object.values(keys)) assert.ok(!text.includes(secret), `answer carries ${secret}`);
        const b = res.body.billingSystem;
        assert.equal(b.billingSystemType, 'stripe');
        assert.equal(b.accountId, r.id);
        assert.equal(b.apiKey, `****${keys.apiKey.slice(-4)}`);
        assert.equal(b.webhookSigningKey, `****${keys.webhookSigningKey.slice(-4)}`);
        assert.ok(b.webhookUrl.endsWith(`/api/v2/billing/webhook/${r.id}/stripe`));
      }
      const row = await h().database.db.selectFrom('billing_systems').selectAll().where('owner_id', '=', r.id).executeTakeFirstOrThrow();
      for (const secret of Object.values(keys)) assert.ok(!row.secrets.includes(secret), 'a key is stored in the clear');
      assert.equal(h().box.openJson<{ apiKey: string }>(row.secrets).apiKey, keys.apiKey);
    });

    it('keeps keys not sent again, but a new Chargebee site needs the apiKey again (the key goes to the site)', async () => {
      const r = await h().reseller();
      const cb = chargebeeSite();
      assertStatus(await configure(r.token, { billingSystemType: 'chargebee', ...cb }), 200);
      // Only the user name changes: the keys are kept (and checked again at the same site).
      const kept = await configure(r.token, { billingSystemType: 'chargebee', webhookUsername: 'renamed' });
      assertStatus(kept, 200);
      assert.equal(kept.body.billingSystem.webhookUsername, 'renamed');
      assert.equal(kept.body.billingSystem.apiKey, `****${cb.apiKey.slice(-4)}`);
      assert.equal(chargebee.calls('GET', '/item_prices', cb.site).at(-1)!.headers.authorization, `Basic ${Buffer.from(`${cb.apiKey}:`).toString('base64')}`);
      const other = chargebeeSite();
      const moved = await configure(r.token, { billingSystemType: 'chargebee', site: other.site });
      assertBad(moved, 'apiKey');
      assert.match(moved.body.message, /site changes/);
      assert.equal(chargebee.calls('GET', '/item_prices', other.site).length, 0, 'the kept key went to the new site');
      const sent = await configure(r.token, { billingSystemType: 'chargebee', site: other.site, apiKey: other.apiKey });
      assertStatus(sent, 200);
      assert.equal(sent.body.billingSystem.site, other.site);
      // Another type starts from nothing: every key of it is required.
      assertBad(await configure(r.token, { billingSystemType: 'stripe', apiKey: stripeKeys().apiKey }), 'publishableKey');
    });

    it('is a reseller\'s or partner\'s: an organization cannot read or set one, another reseller\'s is a 404, a partner configures its resellers', async () => {
      const r1 = await h().reseller();
      const r2 = await h().reseller();
      const o1 = await h().organization(r1.id);
      const keys = stripeKeys();
      assertStatus(await configure(o1.token, { billingSystemType: 'stripe', ...keys }), 403);
      assertStatus(await call('GET', '/api/v2/billing/billingSystemSettings', { token: o1.token }), 403);
      assertStatus(await configure(o1.token, { billingSystemType: 'stripe', ...keys }, r1.id), 403);
      assertStatus(await configure(r2.token, { billingSystemType: 'stripe', ...keys }, r1.id), 404);
      assertStatus(await call('GET', '/api/v2/billing/billingSystemSettings', { token: r2.token, query: { targetAccountId: r1.id } }), 404);
      // The partner, for r1.
      const byPartner = await configure(h().adminToken, { billingSystemType: 'stripe', ...keys }, r1.id);
      assertStatus(byPartner, 200);
      assert.equal(byPartner.body.billingSystem.accountId, r1.id);
      const r1View = await call('GET', '/api/v2/billing/billingSystemSettings', { token: r1.token });
      assert.equal(r1View.body.billingSystem.accountId, r1.id);
      // r2 has none of its own: its organizations use the partner's, once the partner has one.
      const r2View = await call('GET', '/api/v2/billing/billingSystemSettings', { token: r2.token });
      assert.equal(r2View.body.billingSystem, null);
      const partnerHad = (await call('GET', '/api/v2/billing/billingSystemSettings')).body.billingSystem;
      assert.equal(r2View.body.inEffect?.accountId ?? null, partnerHad ? h().partnerId : null);
    });
  });

  describe('Stripe', () => {
    it('subscribe answers the checkout (URL or client secret) and stays pending; a retry reuses the checkout', async () => {
      const { o } = await stripeReseller();
      const before = await current(o.token);
      const res = await subscribe(o.token, { productPlanId: 'pplan-starter', term: 'month', checkoutType: 'redirect', successUrl: 'https://app.example.com/ok', cancelUrl: 'https://app.example.com/no' });
      assertStatus(res, 200);
      const sub = res.body.subscription;
      assert.equal(sub.state, 'pending');
      assert.equal(sub.billingSystem, 'stripe');
      assert.match(res.body.checkoutUrl, /^https:\/\/checkout\.stripe\.com\/c\/pay\/cs_test_/);
      assert.equal(res.body.clientSecret, null);
      const created = stripe.calls('POST /v1/checkout/sessions').filter((c) => c.form.get('client_reference_id') === sub.subscriptionId);
      assert.equal(created.length, 1);
      const form = created[0]!.form;
      assert.equal(created[0]!.headers['idempotency-key'], `callplane-checkout-${sub.subscriptionId}`);
      assert.equal(form.get('mode'), 'subscription');
      assert.equal(form.get('ui_mode'), 'hosted_page');
      assert.equal(form.get('line_items[0][price_data][unit_amount]'), '2900');
      assert.equal(form.get('line_items[0][price_data][currency]'), 'usd');
      assert.equal(form.get('line_items[0][price_data][recurring][interval]'), 'month');
      assert.equal(form.get('success_url'), 'https://app.example.com/ok');
      assert.equal(form.get('subscription_data[metadata][callplaneSubscriptionId]'), sub.subscriptionId);
      // Nothing in force yet.
      const now = await current(o.token);
      assert.equal(now.productPlanId, before.productPlanId);
      assert.equal(now.subscribed, false);
      // The same subscribe again (a client's retry): the same subscription, the same checkout.
      const again = await subscribe(o.token, { productPlanId: 'pplan-starter', term: 'month', successUrl: 'https://app.example.com/ok' });
      assertStatus(again, 200);
      assert.equal(again.body.subscription.subscriptionId, sub.subscriptionId);
      assert.equal(again.body.checkoutUrl, res.body.checkoutUrl);
      const sessions = [...stripe.sessions.values()].filter((s) => s.client_reference_id === sub.subscriptionId);
      assert.equal(sessions.length, 1, 'a retry made a second checkout');
      // Embedded: the client secret.
      const emb = await subscribe(o.token, { productPlanId: 'pplan-business', term: 'year', checkoutType: 'embedded', successUrl: 'https://app.example.com/done' });
      assertStatus(emb, 200);
      assert.equal(emb.body.checkoutUrl, null);
      assert.match(emb.body.clientSecret, /^cs_test_.+_secret_/);
      const embForm = stripe.calls('POST /v1/checkout/sessions').at(-1)!.form;
      assert.equal(embForm.get('ui_mode'), 'embedded_page');
      assert.equal(embForm.get('return_url'), 'https://app.example.com/done');
      assert.equal(embForm.get('line_items[0][price_data][unit_amount]'), '99000');
      assert.equal(embForm.get('line_items[0][price_data][recurring][interval]'), 'year');
      // successUrl is required with a processor.
      assertBad(await subscribe(o.token, { productPlanId: 'pplan-enterprise', term: 'month' }), 'successUrl');
    });

    it('the signed webhook activates the subscription and its plan\'s limits; a forged one is refused and changes nothing', async () => {
      const { r, o, keys } = await stripeReseller();
      const res = await subscribe(o.token, { productPlanId: 'pplan-business', term: 'month', successUrl: 'https://app.example.com/ok' });
      const subId = res.body.subscription.subscriptionId as string;
      const session = [...stripe.sessions.values()].find((s) => s.client_reference_id === subId)!;
      const { session: completed } = stripe.complete(session.id);
      // Forged: signed with another secret, unsigned, stale, or sent to another account's URL.
      const forged = stripe.event('checkout.session.completed', completed, 'whsec_notthesecret');
      const refused = await postStripe(r.id, forged);
      assertStatus(refused, 403);
      assert.equal(refused.body.message, 'Webhook verification failed');
      const good = stripe.event('checkout.session.completed', completed, keys.webhookSigningKey);
      const unsigned = await call('POST', `/api/v2/billing/webhook/${r.id}/stripe`, { token: null, payload: good.body, headers: { 'content-type': 'application/json' } });
      assertStatus(unsigned, 403);
      assert.equal(unsigned.body.message, refused.body.message);
      const stale = stripe.event('checkout.session.completed', completed, keys.webhookSigningKey, { t: Math.floor(Date.now() / 1000) - 3600 });
      assertStatus(await postStripe(r.id, stale), 403);
      const other = await h().reseller();
      const elsewhere = await postStripe(other.id, good);
      assertStatus(elsewhere, 403);
      assert.equal(elsewhere.body.message, refused.body.message);
      // Another reseller's own Stripe, correctly signed at its own URL, naming this subscription: not its subscription, ignored.
      const otherKeys = stripeKeys();
      assertStatus(await configure(other.token, { billingSystemType: 'stripe', ...otherKeys }), 200);
      assertStatus(await postStripe(other.id, stripe.event('checkout.session.completed', completed, otherKeys.webhookSigningKey)), 200);
      assert.equal((await current(o.token)).subscribed, false);
      // The real one.
      const ok = await postStripe(r.id, good);
      assertStatus(ok, 200);
      const now = await current(o.token);
      assert.equal(now.productPlanId, 'pplan-business');
      assert.equal(now.subscribed, true);
      assert.equal(now.subscription!.subscriptionId, subId);
      assert.equal(now.subscription!.state, 'active');
      assert.equal(now.limits.concurrencyPerRun, 20);
      // Unknown events: 200, ignored.
      assertStatus(await postStripe(r.id, stripe.event('customer.created', { id: 'cus_1', object: 'customer' }, keys.webhookSigningKey)), 200);
    });

    it('a priced add-on is bought through Stripe Checkout (issue 33): pending until the signed webhook confirms payment, once; removing it cancels it at Stripe; an expired checkout grants nothing; its reseller may still grant it', async () => {
      const { r, o, keys } = await stripeReseller();
      const res = await subscribe(o.token, { productPlanId: 'pplan-business', term: 'month', successUrl: 'https://app.example.com/ok' });
      const subId = res.body.subscription.subscriptionId as string;
      const session = [...stripe.sessions.values()].find((s) => s.client_reference_id === subId)!;
      const { session: completed } = stripe.complete(session.id);
      assertStatus(await postStripe(r.id, stripe.event('checkout.session.completed', completed, keys.webhookSigningKey)), 200);
      assert.equal((await current(o.token)).subscribed, true);
      const inForce = async () => ((await call('GET', '/api/v2/product/currentPlan', { token: o.token })).body.addons as { addonId: string }[]).map((a) => a.addonId);
      const rowsOf = () => h().database.db.selectFrom('org_addons').selectAll().where('org_id', '=', o.id).orderBy('added_at').execute();

      // The checkout returns to successUrl: required, named.
      assertBad(await call('POST', '/api/v2/addon/addon-minutes-1000', { token: o.token }), 'successUrl');
      const bought = await call('POST', '/api/v2/addon/addon-minutes-1000', { token: o.token, body: { successUrl: 'https://app.example.com/ok', cancelUrl: 'https://app.example.com/no' } });
      assertStatus(bought, 200);
      assert.equal(bought.body.addon.state, 'pending');
      assert.match(bought.body.checkoutUrl, /^https:\/\/checkout\.stripe\.com\/c\/pay\/cs_test_/);
      assert.equal(bought.body.clientSecret, null);
      const [row] = await rowsOf();
      assert.equal(row!.state, 'pending');
      const checkout = stripe.calls('POST /v1/checkout/sessions').at(-1)!;
      assert.equal(checkout.form.get('client_reference_id'), row!.id);
      assert.equal(checkout.form.get('line_items[0][price_data][unit_amount]'), '4000', 'the add-on\'s monthly price (the plan is by the month)');
      assert.equal(checkout.form.get('subscription_data[metadata][addonId]'), 'addon-minutes-1000');
      assert.deepEqual(await inForce(), [], 'nothing granted before the payment');
      assert.deepEqual((await call('GET', '/api/v2/stats/usage', { token: o.token })).body.addons, []);
      // Buying it again while the checkout is open answers the same checkout (same idempotency key), no second row.
      const again = await call('POST', '/api/v2/addon/addon-minutes-1000', { token: o.token, body: { successUrl: 'https://app.example.com/ok' } });
      assertStatus(again, 200);
      assert.equal(again.body.checkoutUrl, bought.body.checkoutUrl);
      assert.equal((await rowsOf()).length, 1);

      const addonSession = [...stripe.sessions.values()].find((s) => s.client_reference_id === row!.id)!;
      const paid = stripe.complete(addonSession.id);
      const event = stripe.event('checkout.session.completed', paid.session, keys.webhookSigningKey);
      // Not signed by the billing system's key: refused, nothing granted.
      assertStatus(await postStripe(r.id, { body: event.body, signature: FakeStripe.sign(event.body, 'whsec_forged') }), 403);
      assert.deepEqual(await inForce(), []);
      const ok = await postStripe(r.id, event);
      assertStatus(ok, 200);
      assert.deepEqual(await inForce(), ['addon-minutes-1000']);
      assert.deepEqual((await call('GET', '/api/v2/stats/usage', { token: o.token })).body.addons, ['addon-minutes-1000']);
      // Stripe delivers it again: answered, nothing more.
      const replay = await postStripe(r.id, { body: event.body, signature: FakeStripe.sign(event.body, keys.webhookSigningKey) });
      assertStatus(replay, 200);
      assert.equal(replay.body.duplicate, true);
      assert.equal((await rowsOf()).filter((a) => a.state === 'active').length, 1);
      assertStatus(await call('POST', '/api/v2/addon/addon-minutes-1000', { token: o.token, body: { successUrl: 'https://app.example.com/ok' } }), 409);

      // Removing it cancels its subscription at Stripe (once), then here.
      const cancels = stripe.calls('DELETE /v1/subscriptions/').length;
      assertStatus(await call('DELETE', '/api/v2/addon/addon-minutes-1000', { token: o.token }), 200);
      assert.equal(stripe.calls('DELETE /v1/subscriptions/').length, cancels + 1);
      assert.equal(stripe.subscriptions.get(paid.subscription.id)!.status, 'canceled');
      assert.deepEqual(await inForce(), []);
      // Stripe's own deletion event afterwards changes nothing more.
      assertStatus(await postStripe(r.id, stripe.event('customer.subscription.deleted', { ...paid.subscription, object: 'subscription', status: 'canceled' }, keys.webhookSigningKey)), 200);

      // A checkout that expires unpaid grants nothing and ends the purchase.
      const second = await call('POST', '/api/v2/addon/addon-minutes-1000', { token: o.token, body: { successUrl: 'https://app.example.com/ok' } });
      assertStatus(second, 200);
      const secondRow = (await rowsOf()).find((a) => a.state === 'pending')!;
      const secondSession = [...stripe.sessions.values()].find((s) => s.client_reference_id === secondRow.id)!;
      const expired = await postStripe(r.id, stripe.event('checkout.session.expired', { id: secondSession.id, object: 'checkout.session', mode: 'subscription', status: 'expired', client_reference_id: secondRow.id }, keys.webhookSigningKey));
      assertStatus(expired, 200);
      assert.equal((await h().database.db.selectFrom('org_addons').select('state').where('id', '=', secondRow.id).executeTakeFirstOrThrow()).state, 'abandoned');
      assert.deepEqual(await inForce(), []);

      // Its reseller, who runs the billing system, may grant it at once (a deliberate gift).
      const granted = await call('POST', '/api/v2/addon/addon-minutes-1000', { token: r.token, query: { targetAccountId: o.id } });
      assertStatus(granted, 200);
      assert.equal(granted.body.addon.state, 'active');
      assert.equal(granted.body.checkoutUrl, null);
      assert.deepEqual(await inForce(), ['addon-minutes-1000']);
    });

    it('a failed payment makes it past_due (limits kept); a replayed event changes nothing; unpaid falls back like cancel', async () => {
      const { r, o, keys } = await stripeReseller();
      const res = await subscribe(o.token, { productPlanId: 'pplan-business', term: 'month', successUrl: 'https://app.example.com/ok' });
      const subId = res.body.subscription.subscriptionId as string;
      const session = [...stripe.sessions.values()].find((s) => s.client_reference_id === subId)!;
      const { session: completed, subscription } = stripe.complete(session.id);
      assertStatus(await postStripe(r.id, stripe.event('checkout.session.completed', completed, keys.webhookSigningKey)), 200);
      const invoice = { id: 'in_1', object: 'invoice', parent: { type: 'subscription_details', subscription_details: { subscription: subscription.id, metadata: subscription.metadata } } };
      const failed = stripe.event('invoice.payment_failed', invoice, keys.webhookSigningKey);
      assertStatus(await postStripe(r.id, failed), 200);
      let now = await current(o.token);
      assert.equal(now.subscription!.state, 'past_due');
      assert.equal(now.productPlanId, 'pplan-business');
      assert.equal(now.subscribed, true);
      assert.equal(now.limits.concurrencyPerRun, 20, 'past_due keeps the plan\'s limits while the processor retries');
      // The processor collects the payment.
      assertStatus(await postStripe(r.id, stripe.event('invoice.paid', invoice, keys.webhookSigningKey)), 200);
      assert.equal((await current(o.token)).subscription!.state, 'active');
      // The failure event again (Stripe retries a delivery): answered, nothing changes.
      const replay = await postStripe(r.id, { body: failed.body, signature: FakeStripe.sign(failed.body, keys.webhookSigningKey) });
      assertStatus(replay, 200);
      assert.equal(replay.body.duplicate, true);
      assert.equal((await current(o.token)).subscription!.state, 'active');
      // Stripe gives up: unpaid. The organization falls back to the free plan and its limits.
      subscription.status = 'unpaid';
      assertStatus(await postStripe(r.id, stripe.event('customer.subscription.updated', { ...subscription, object: 'subscription' }, keys.webhookSigningKey)), 200);
      now = await current(o.token);
      assert.equal(now.subscribed, false);
      assert.equal(now.subscription, null);
      assert.equal(now.productPlanId, 'pplan-free');
      assert.equal(now.limits.concurrencyPerRun, 5);
      const row = await h().database.db.selectFrom('subscriptions').selectAll().where('id', '=', subId).executeTakeFirstOrThrow();
      assert.equal(row.state, 'unpaid');
    });

    it('cancel cancels at Stripe once, then here; the processor\'s own cancellation event changes nothing more', async () => {
      const { r, o, keys } = await stripeReseller();
      const res = await subscribe(o.token, { productPlanId: 'pplan-starter', term: 'year', successUrl: 'https://app.example.com/ok' });
      const subId = res.body.subscription.subscriptionId as string;
      const session = [...stripe.sessions.values()].find((s) => s.client_reference_id === subId)!;
      const { session: completed, subscription } = stripe.complete(session.id);
      assertStatus(await postStripe(r.id, stripe.event('checkout.session.completed', completed, keys.webhookSigningKey)), 200);
      stripe.failing = true;
      try {
        assertStatus(await call('DELETE', '/api/v2/product/cancel', { token: o.token, body: { reason: 'too dear' } }), 502);
      } finally { stripe.failing = false; }
      assert.equal((await current(o.token)).subscribed, true, 'a failure at Stripe cancelled here');
      const cancel = await call('DELETE', '/api/v2/product/cancel', { token: o.token, body: { reason: 'too dear' } });
      assertStatus(cancel, 200);
      assert.equal(cancel.body.subscription.state, 'canceled');
      assert.equal(cancel.body.productPlanId, 'pplan-free');
      // The failed attempts (the client retries a 500 once) and the one that worked, all under one key.
      const deletes = stripe.calls(`DELETE /v1/subscriptions/${subscription.id}`);
      assert.ok(deletes.length >= 2);
      for (const d of deletes) assert.equal(d.headers['idempotency-key'], `callplane-cancel-${subId}`);
      assert.equal(subscription.status, 'canceled');
      assertStatus(await postStripe(r.id, stripe.event('customer.subscription.deleted', { ...subscription, object: 'subscription' }, keys.webhookSigningKey)), 200);
      const row = await h().database.db.selectFrom('subscriptions').selectAll().where('id', '=', subId).executeTakeFirstOrThrow();
      assert.equal(row.state, 'canceled');
      assert.equal(row.cancel_reason, 'too dear');
      assertStatus(await call('DELETE', '/api/v2/product/cancel', { token: o.token }), 400);
      assert.equal(stripe.calls(`DELETE /v1/subscriptions/${subscription.id}`).length, deletes.length, 'cancelled at Stripe again');
    });

    it('a new plan through Stripe replaces the one in force when its checkout completes, and the old one is cancelled at Stripe', async () => {
      const { r, o, keys } = await stripeReseller();
      const activate = async (planId: string) => {
        const res = await subscribe(o.token, { productPlanId: planId, term: 'month', successUrl: 'https://app.example.com/ok' });
        assertStatus(res, 200);
        const subId = res.body.subscription.subscriptionId as string;
        const session = [...stripe.sessions.values()].find((s) => s.client_reference_id === subId)!;
        const { session: completed, subscription } = stripe.complete(session.id);
        assertStatus(await postStripe(r.id, stripe.event('checkout.session.completed', completed, keys.webhookSigningKey)), 200);
        return { subId, subscription };
      };
      const first = await activate('pplan-starter');
      assert.equal((await current(o.token)).productPlanId, 'pplan-starter');
      // The new checkout is pending: the starter plan stays in force meanwhile.
      const second = await activate('pplan-business');
      const now = await current(o.token);
      assert.equal(now.productPlanId, 'pplan-business');
      assert.equal(now.subscription!.subscriptionId, second.subId);
      assert.equal(now.limits.concurrencyPerRun, 20);
      const old = await h().database.db.selectFrom('subscriptions').selectAll().where('id', '=', first.subId).executeTakeFirstOrThrow();
      assert.equal(old.state, 'replaced');
      const deletes = stripe.calls(`DELETE /v1/subscriptions/${first.subscription.id}`);
      assert.equal(deletes.length, 1);
      assert.equal(deletes[0]!.headers['idempotency-key'], `callplane-cancel-${first.subId}`);
      assert.equal(first.subscription.status, 'canceled');
      assert.equal(second.subscription.status, 'active');
    });

    it('an organization with no billing system of its reseller\'s subscribes through the partner\'s', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const partnerKeys = stripeKeys();
      assertStatus(await configure(h().adminToken, { billingSystemType: 'stripe', ...partnerKeys }), 200);
      const res = await subscribe(o.token, { productPlanId: 'pplan-starter', term: 'month', successUrl: 'https://app.example.com/ok' });
      assertStatus(res, 200);
      assert.equal(res.body.subscription.state, 'pending');
      const req = stripe.calls('POST /v1/checkout/sessions').at(-1)!;
      assert.equal(req.headers.authorization, `Bearer ${partnerKeys.apiKey}`);
      const view = await call('GET', '/api/v2/billing/billingSystemSettings', { token: r.token });
      assert.deepEqual(view.body.inEffect, { accountId: h().partnerId, billingSystemType: 'stripe' });
      // The partner's billing system is not the reseller's: its webhook URL is the partner's.
      const session = [...stripe.sessions.values()].find((s) => s.client_reference_id === res.body.subscription.subscriptionId)!;
      const { session: completed } = stripe.complete(session.id);
      assertStatus(await postStripe(r.id, stripe.event('checkout.session.completed', completed, partnerKeys.webhookSigningKey)), 403);
      assertStatus(await postStripe(h().partnerId, stripe.event('checkout.session.completed', completed, partnerKeys.webhookSigningKey)), 200);
      assert.equal((await current(o.token)).productPlanId, 'pplan-starter');
      // Leave the partner without a billing system for the other tests: a reseller-level one is what they use.
      await h().database.db.deleteFrom('billing_systems').where('owner_id', '=', h().partnerId).execute();
    });
  });

  describe('Chargebee', () => {
    it('a priced add-on is bought through a Chargebee hosted page (issue 33): pending until the basic-auth webhook confirms it, once; removing it cancels it there', async () => {
      const r = await h().reseller();
      const cb = chargebeeSite();
      assertStatus(await configure(r.token, { billingSystemType: 'chargebee', ...cb }), 200);
      const o = await h().organization(r.id);
      chargebee.itemPrices.add('pplan-business-USD-Monthly');
      const res = await subscribe(o.token, { productPlanId: 'pplan-business', term: 'month', successUrl: 'https://app.example.com/ok' });
      const subId = res.body.subscription.subscriptionId as string;
      const planSub = chargebee.complete([...chargebee.pages.values()].find((p) => p.subscriptionId === subId)!.id);
      assertStatus(await postChargebee(r.id, FakeChargebee.event('subscription_created', { subscription: { ...planSub, object: 'subscription' } }, cb.webhookUsername, cb.webhookPassword)), 200);
      assert.equal((await current(o.token)).subscribed, true);
      const inForce = async () => ((await call('GET', '/api/v2/product/currentPlan', { token: o.token })).body.addons as { addonId: string }[]).map((a) => a.addonId);

      // No item price for the add-on at Chargebee: a 400 naming it, nothing granted.
      chargebee.itemPrices.delete('addon-texts-5000-USD-Monthly');
      assertBad(await call('POST', '/api/v2/addon/addon-texts-5000', { token: o.token, body: { successUrl: 'https://app.example.com/ok' } }), 'addon-texts-5000-USD-Monthly');
      assert.deepEqual(await inForce(), []);
      chargebee.itemPrices.add('addon-texts-5000-USD-Monthly');
      const bought = await call('POST', '/api/v2/addon/addon-texts-5000', { token: o.token, body: { successUrl: 'https://app.example.com/ok' } });
      assertStatus(bought, 200);
      assert.equal(bought.body.addon.state, 'pending');
      assert.match(bought.body.checkoutUrl, new RegExp(`^https://${cb.site}\\.chargebee\\.com/pages/v4/hp_`));
      const req = chargebee.calls('POST', '/hosted_pages/checkout_new_for_items', cb.site).at(-1)!;
      assert.equal(req.form.get('subscription_items[item_price_id][0]'), 'addon-texts-5000-USD-Monthly');
      const purchaseId = req.form.get('subscription[id]')!;
      assert.match(purchaseId, /^oad_/);
      assert.deepEqual(await inForce(), [], 'nothing granted before the payment');

      const sub = chargebee.complete([...chargebee.pages.values()].find((p) => p.subscriptionId === purchaseId)!.id);
      const created = FakeChargebee.event('subscription_created', { subscription: { ...sub, object: 'subscription' } }, cb.webhookUsername, cb.webhookPassword);
      assertStatus(await postChargebee(r.id, { body: created.body, authorization: `Basic ${Buffer.from(`${cb.webhookUsername}:nope`).toString('base64')}` }), 401);
      assert.deepEqual(await inForce(), []);
      assertStatus(await postChargebee(r.id, created), 200);
      assert.deepEqual(await inForce(), ['addon-texts-5000']);
      const replay = await postChargebee(r.id, created);
      assertStatus(replay, 200);
      assert.equal(replay.body.duplicate, true);
      const rows = await h().database.db.selectFrom('org_addons').selectAll().where('org_id', '=', o.id).execute();
      // The refused checkout's purchase ended abandoned; the paid one is the one active row.
      assert.deepEqual(rows.map((a) => a.state).sort(), ['abandoned', 'active']);

      assertStatus(await call('DELETE', '/api/v2/addon/addon-texts-5000', { token: o.token }), 200);
      assert.equal(chargebee.calls('POST', `/subscriptions/${purchaseId}/cancel_for_items`, cb.site).length, 1);
      assert.equal(chargebee.subscriptions.get(purchaseId)!.status, 'cancelled');
      assert.deepEqual(await inForce(), []);
      // Chargebee's cancellation event afterwards changes nothing more.
      const cancelled = await postChargebee(r.id, FakeChargebee.event('subscription_cancelled', { subscription: { ...sub, status: 'cancelled' } }, cb.webhookUsername, cb.webhookPassword));
      assertStatus(cancelled, 200);
      const outcomes = await h().database.db.selectFrom('billing_events').select('outcome').where('owner_id', '=', r.id).where('type', '=', 'subscription_cancelled').execute();
      assert.match(outcomes.at(-1)!.outcome, /no change: add-on/);
    });

    it('subscribe opens a hosted page for the plan\'s item price; basic-auth webhooks activate and end it; cancel cancels there once', async () => {
      const r = await h().reseller();
      const cb = chargebeeSite();
      assertStatus(await configure(r.token, { billingSystemType: 'chargebee', ...cb }), 200);
      const o = await h().organization(r.id);
      // No item price for the plan at Chargebee: a 400 naming it. (The fake is shared by both engines' runs.)
      chargebee.itemPrices.delete('pplan-business-USD-Monthly');
      const missing = await subscribe(o.token, { productPlanId: 'pplan-business', term: 'month', successUrl: 'https://app.example.com/ok' });
      assertBad(missing, 'pplan-business-USD-Monthly');
      // Refused: that subscription is over, and the next attempt is a new checkout (a new id and idempotency key).
      const refusedId = chargebee.calls('POST', '/hosted_pages/checkout_new_for_items', cb.site).at(-1)!.form.get('subscription[id]')!;
      const refusedRow = await h().database.db.selectFrom('subscriptions').selectAll().where('id', '=', refusedId).executeTakeFirstOrThrow();
      assert.equal(refusedRow.state, 'canceled');
      chargebee.itemPrices.add('pplan-business-USD-Monthly');
      const res = await subscribe(o.token, { productPlanId: 'pplan-business', term: 'month', successUrl: 'https://app.example.com/ok', cancelUrl: 'https://app.example.com/no' });
      assertStatus(res, 200);
      const subId = res.body.subscription.subscriptionId as string;
      assert.equal(res.body.subscription.state, 'pending');
      assert.equal(res.body.subscription.billingSystem, 'chargebee');
      assert.match(res.body.checkoutUrl, new RegExp(`^https://${cb.site}\\.chargebee\\.com/pages/v4/hp_`));
      const reqs = chargebee.calls('POST', '/hosted_pages/checkout_new_for_items', cb.site);
      const req = reqs.at(-1)!;
      assert.equal(req.form.get('subscription[id]'), subId);
      assert.equal(req.form.get('subscription_items[item_price_id][0]'), 'pplan-business-USD-Monthly');
      assert.equal(req.form.get('redirect_url'), 'https://app.example.com/ok');
      assert.equal(req.headers['chargebee-idempotency-key'], `callplane-checkout-${subId}`);
      assert.notEqual(subId, refusedId);
      const page = [...chargebee.pages.values()].find((p) => p.subscriptionId === subId)!;
      const sub = chargebee.complete(page.id);
      const created = FakeChargebee.event('subscription_created', { subscription: { ...sub, object: 'subscription' }, customer: { id: sub.customer_id } }, cb.webhookUsername, cb.webhookPassword);
      const wrong = await postChargebee(r.id, { body: created.body, authorization: `Basic ${Buffer.from(`${cb.webhookUsername}:nope`).toString('base64')}` });
      assertStatus(wrong, 401);
      assert.equal(wrong.body.message, 'Webhook verification failed');
      assertStatus(await postChargebee(r.id, { body: created.body, authorization: '' }), 401);
      assert.equal((await current(o.token)).subscribed, false);
      assertStatus(await postChargebee(r.id, created), 200);
      let now = await current(o.token);
      assert.equal(now.productPlanId, 'pplan-business');
      assert.equal(now.subscription!.state, 'active');
      assert.equal(now.limits.concurrencyPerRun, 20);
      const replay = await postChargebee(r.id, created);
      assertStatus(replay, 200);
      assert.equal(replay.body.duplicate, true);
      // A failed payment: past_due; Chargebee's dunning ends in a cancellation for non-payment: unpaid.
      const failed = FakeChargebee.event('payment_failed', { subscription: { ...sub, object: 'subscription' }, invoice: { id: 'inv_1', subscription_id: sub.id } }, cb.webhookUsername, cb.webhookPassword);
      assertStatus(await postChargebee(r.id, failed), 200);
      now = await current(o.token);
      assert.equal(now.subscription!.state, 'past_due');
      assert.equal(now.limits.concurrencyPerRun, 20);
      const ok = FakeChargebee.event('payment_succeeded', { subscription: { ...sub, object: 'subscription' }, invoice: { id: 'inv_1', subscription_id: sub.id } }, cb.webhookUsername, cb.webhookPassword);
      assertStatus(await postChargebee(r.id, ok), 200);
      assert.equal((await current(o.token)).subscription!.state, 'active');
      // Cancel: at Chargebee once, then here.
      const cancel = await call('DELETE', '/api/v2/product/cancel', { token: o.token });
      assertStatus(cancel, 200);
      const cancels = chargebee.calls('POST', `/subscriptions/${subId}/cancel_for_items`, cb.site);
      assert.equal(cancels.length, 1);
      assert.equal(cancels[0]!.form.get('end_of_term'), 'false');
      assert.equal(cancels[0]!.headers['chargebee-idempotency-key'], `callplane-cancel-${subId}`);
      now = await current(o.token);
      assert.equal(now.subscribed, false);
      assert.equal(now.productPlanId, 'pplan-free');
      assert.equal(now.limits.concurrencyPerRun, 5);
      // Chargebee's own event for that cancellation changes nothing more.
      const cancelled = FakeChargebee.event('subscription_cancelled', { subscription: { ...sub, status: 'cancelled', object: 'subscription' } }, cb.webhookUsername, cb.webhookPassword);
      assertStatus(await postChargebee(r.id, cancelled), 200);
      const row = await h().database.db.selectFrom('subscriptions').selectAll().where('id', '=', subId).executeTakeFirstOrThrow();
      assert.equal(row.state, 'canceled');
    });

    it('a cancellation for non-payment at Chargebee ends the subscription as unpaid', async () => {
      const r = await h().reseller();
      const cb = chargebeeSite();
      assertStatus(await configure(r.token, { billingSystemType: 'chargebee', ...cb }), 200);
      const o = await h().organization(r.id);
      chargebee.itemPrices.add('pplan-starter-USD-Yearly');
      const res = await subscribe(o.token, { productPlanId: 'pplan-starter', term: 'year', successUrl: 'https://app.example.com/ok' });
      assertStatus(res, 200);
      const page = [...chargebee.pages.values()].find((p) => p.subscriptionId === res.body.subscription.subscriptionId)!;
      const sub = chargebee.complete(page.id);
      assertStatus(await postChargebee(r.id, FakeChargebee.event('subscription_activated', { subscription: { ...sub } }, cb.webhookUsername, cb.webhookPassword)), 200);
      assert.equal((await current(o.token)).productPlanId, 'pplan-starter');
      assertStatus(await postChargebee(r.id, FakeChargebee.event('subscription_cancelled', { subscription: { ...sub, status: 'cancelled', cancel_reason: 'not_paid' } }, cb.webhookUsername, cb.webhookPassword)), 200);
      const now = await current(o.token);
      assert.equal(now.subscribed, false);
      assert.equal(now.productPlanId, 'pplan-free');
      const row = await h().database.db.selectFrom('subscriptions').selectAll().where('id', '=', res.body.subscription.subscriptionId).executeTakeFirstOrThrow();
      assert.equal(row.state, 'unpaid');
      // Unknown events are answered and ignored; a body that is not an event is a 400.
      assertStatus(await postChargebee(r.id, FakeChargebee.event('customer_changed', { customer: { id: 'c' } }, cb.webhookUsername, cb.webhookPassword)), 200);
      assertStatus(await postChargebee(r.id, { body: '[1,2', authorization: FakeChargebee.event('x', {}, cb.webhookUsername, cb.webhookPassword).authorization }), 400);
    });
  });
}, { CALLPLANE_STRIPE_API_URL: stripe.url, CALLPLANE_CHARGEBEE_API_URL: `${chargebee.url}/{site}` });
