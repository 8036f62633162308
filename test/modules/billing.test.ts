// Billing without a payment processor (issue 26), end to end on both engines: the catalog (the
// default one, a partner's items over it, a reseller's over those) and who may read and edit it;
// plans, add-ons and what an organization sees; productPlanId/sellPlanId/offeredProductPlanId
// naming real plans; subscribe and cancel recorded directly, their limits in force at once (read
// back through GET /api/v2/tasks/limits).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { maintenanceJobs } from '../../src/maintenance.ts';
import { createTaskEngine } from '../../src/modules/tasks/queue-hooks.ts';
import { planAllowance, uncachedEntitlements } from '../../src/modules/billing/entitlements.ts';
import { uncachedSubscribers } from '../../src/modules/tasks/subscribers.ts';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness, Reply } from '../helpers/harness.ts';

function assertStatus(res: Reply, status: number, label = ''): void {
  assert.equal(res.status, status, `${label} expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
  if (status >= 400) assert.equal(res.body.success, false, label);
}
function assertBad(res: Reply, field: string, label = ''): void {
  assertStatus(res, 400, label);
  assert.ok(String(res.body.message).includes(field), `${label} message '${res.body.message}' should name ${field}`);
}

/** A plan body for PUT /api/v2/product/productPlan/{id}. */
function planBody(name: string, concurrencyPerRun: number, daily: Record<string, number | null> = {}, extra: Record<string, unknown> = {}) {
  return {
    name, monthlyPrice: 10, yearlyPrice: 100, currency: 'eur',
    included: { callMinutes: 100, texts: 100, tasks: 100, conversations: 100, modelTokens: 1000 },
    overage: { callMinute: 0.1, text: 0.05, task: null, conversation: 0.01, modelTokensPer1k: 0.002 },
    limits: { concurrencyPerRun, daily }, ...extra,
  };
}

forEachEngine('billing', (h) => {
  const call = (method: string, url: string, opts?: Parameters<Harness['call']>[2]) => h().call(method, url, opts);
  const ids = (plans: { productPlanId: string }[]) => plans.map((p) => p.productPlanId).sort();
  const limitsOf = async (orgId: number) => {
    const r = await call('GET', '/api/v2/tasks/limits', { query: { targetAccountId: orgId } });
    assertStatus(r, 200);
    return r.body.limits as { concurrencyPerRun: number; daily: Record<string, number> };
  };

  describe('catalog', () => {
    it('ships a default catalog: a partner and a new reseller see it, with add-ons and the layer each comes from', async () => {
      const p = await call('GET', '/api/v2/product/productCatalog');
      assertStatus(p, 200);
      assert.deepEqual(ids(p.body.plans), ['pplan-business', 'pplan-enterprise', 'pplan-free', 'pplan-starter', 'pplan-unmetered']);
      assert.ok(p.body.plans.every((x: { source: string }) => x.source === 'default'));
      const free = p.body.plans.find((x: { productPlanId: string }) => x.productPlanId === 'pplan-free');
      assert.equal(free.monthlyPrice, 0);
      assert.equal(free.limits.concurrencyPerRun, 5);
      assert.ok(p.body.addons.length >= 1);
      const r = await h().reseller();
      const rc = await call('GET', '/api/v2/product/productCatalog', { token: r.token });
      assertStatus(rc, 200);
      assert.equal(rc.body.accountId, r.id);
      assert.deepEqual(ids(rc.body.plans), ids(p.body.plans));
    });

    it('only resellers and partners read catalogs; an organization reads its available plans instead', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      assertStatus(await call('GET', '/api/v2/product/productCatalog', { token: o.token }), 403);
      const agent = await h().agent(o.id);
      assertStatus(await call('GET', '/api/v2/product/productCatalog', { token: agent.token }), 403);
      const avail = await call('GET', '/api/v2/product/allAvailablePlans', { token: o.token });
      assertStatus(avail, 200);
      assert.ok(ids(avail.body.plans).includes('pplan-free'));
    });

    it("a reseller edits its own catalog over the partner's, which is its fallback; another reseller cannot edit or see it", async () => {
      const r1 = await h().reseller();
      const r2 = await h().reseller();
      // The partner's own plan: every reseller's catalog falls back to it.
      const pp = await call('PUT', '/api/v2/product/catalog/plan/pplan-partner-gold', { body: planBody('Partner Gold', 7) });
      assertStatus(pp, 200);
      assert.equal(pp.body.created, true);
      assert.equal(pp.body.plan.source, 'partner');
      assert.equal(pp.body.plan.currency, 'EUR');
      const mine = await call('PUT', '/api/v2/product/catalog/plan/pplan-r1-only', { token: r1.token, body: planBody('R1 only', 2) });
      assertStatus(mine, 200);
      assert.equal(mine.body.plan.source, 'reseller');
      const again = await call('PUT', '/api/v2/product/catalog/plan/pplan-r1-only', { token: r1.token, body: planBody('R1 only, renamed', 2) });
      assertStatus(again, 200);
      assert.equal(again.body.created, false);
      assert.equal(again.body.plan.name, 'R1 only, renamed');
      // Two PUTs of one new id at once: both succeed, one plan.
      const both = await Promise.all([1, 2].map((n) => call('PUT', '/api/v2/product/catalog/plan/pplan-r1-twice', { token: r1.token, body: planBody(`Twice ${n}`, 2) })));
      for (const res of both) assertStatus(res, 200);
      const twice = await h().database.db.selectFrom('catalog_items').select('item_id').where('owner_id', '=', r1.id).where('item_id', '=', 'pplan-r1-twice').execute();
      assert.equal(twice.length, 1);
      // An override of the partner's plan, for r1 and below only.
      const over = await call('PUT', '/api/v2/product/catalog/plan/pplan-partner-gold', { token: r1.token, body: planBody('R1 Gold', 3) });
      assertStatus(over, 200);
      assert.equal(over.body.plan.name, 'R1 Gold');

      const c1 = await call('GET', '/api/v2/product/productCatalog', { token: r1.token });
      const c2 = await call('GET', '/api/v2/product/productCatalog', { token: r2.token });
      assert.ok(ids(c1.body.plans).includes('pplan-r1-only'));
      assert.equal(c1.body.plans.find((x: { productPlanId: string }) => x.productPlanId === 'pplan-partner-gold').name, 'R1 Gold');
      assert.ok(!ids(c2.body.plans).includes('pplan-r1-only'));
      assert.equal(c2.body.plans.find((x: { productPlanId: string }) => x.productPlanId === 'pplan-partner-gold').name, 'Partner Gold');

      // r2 cannot edit r1's catalog (404: not in its subtree), nor read r1's plan.
      assertStatus(await call('PUT', '/api/v2/product/catalog/plan/pplan-x', { token: r2.token, query: { targetAccountId: r1.id }, body: planBody('X', 1) }), 404);
      assertStatus(await call('DELETE', '/api/v2/product/catalog/plan/pplan-r1-only', { token: r2.token }), 404);
      assertStatus(await call('GET', '/api/v2/product/productPlan/pplan-r1-only', { token: r2.token }), 404);
      // An organization cannot edit a catalog.
      const o = await h().organization(r1.id);
      assertStatus(await call('PUT', '/api/v2/product/catalog/plan/pplan-o', { token: o.token, body: planBody('O', 1) }), 403);
      // The partner edits its reseller's catalog with targetAccountId.
      assertStatus(await call('PUT', '/api/v2/product/catalog/plan/pplan-by-partner', { query: { targetAccountId: r1.id }, body: planBody('By partner', 1) }), 200);

      // Deleting r1's override reveals the partner's plan again; an inherited plan is not r1's to delete.
      assertStatus(await call('DELETE', '/api/v2/product/catalog/plan/pplan-partner-gold', { token: r1.token }), 200);
      const back = await call('GET', '/api/v2/product/productPlan/pplan-partner-gold', { token: r1.token });
      assert.equal(back.body.plan.name, 'Partner Gold');
      const inherited = await call('DELETE', '/api/v2/product/catalog/plan/pplan-partner-gold', { token: r1.token });
      assertStatus(inherited, 404);
      assert.match(inherited.body.message, /inherited/);
    });

    it('validates plans: the id, the currency, limits, and unknown keys, each named', async () => {
      const r = await h().reseller();
      assertBad(await call('PUT', '/api/v2/product/catalog/plan/gold', { token: r.token, body: planBody('G', 1) }), 'productPlanId');
      assertBad(await call('PUT', '/api/v2/product/catalog/plan/pplan-g', { token: r.token, body: planBody('G', 1, {}, { currency: 'dollars' }) }), 'currency');
      assertBad(await call('PUT', '/api/v2/product/catalog/plan/pplan-g', { token: r.token, body: planBody('G', 0) }), 'concurrencyPerRun');
      assertBad(await call('PUT', '/api/v2/product/catalog/plan/pplan-g', { token: r.token, body: planBody('G', 1, { call: 5 }) }), 'call');
      assertBad(await call('PUT', '/api/v2/product/catalog/plan/pplan-g', { token: r.token, body: planBody('  ', 1) }), 'name');
    });

    it('a plan some account names cannot be deleted while nothing else would resolve it', async () => {
      const r = await h().reseller();
      assertStatus(await call('PUT', '/api/v2/product/catalog/plan/pplan-used', { token: r.token, body: planBody('Used', 2) }), 200);
      const o = await h().organization(r.id, { productPlanId: 'pplan-used' });
      const del = await call('DELETE', '/api/v2/product/catalog/plan/pplan-used', { token: r.token });
      assertStatus(del, 409);
      assert.match(del.body.message, /pplan-used/);
      assertStatus(await call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body: { productPlanId: 'pplan-free' } }), 200);
      assertStatus(await call('DELETE', '/api/v2/product/catalog/plan/pplan-used', { token: r.token }), 200);
    });

    it('add-ons: a reseller adds one for a plan; an organization sees those for its current plan', async () => {
      const r = await h().reseller();
      const put = await call('PUT', '/api/v2/product/catalog/addon/addon-rush', {
        token: r.token,
        body: { name: 'Rush', monthlyPrice: 5, yearlyPrice: 50, adds: { callMinutes: 10, texts: 0, tasks: 0, conversations: 0, modelTokens: 0 }, plans: ['pplan-business'] },
      });
      assertStatus(put, 200);
      const o = await h().organization(r.id);
      const freeAddons = await call('GET', '/api/v2/addon/available', { token: o.token });
      assertStatus(freeAddons, 200);
      assert.equal(freeAddons.body.productPlanId, 'pplan-unmetered');
      assert.ok(!freeAddons.body.addons.some((a: { addonId: string }) => a.addonId === 'addon-rush'));
      assert.ok(!freeAddons.body.addons.some((a: { addonId: string }) => a.addonId === 'addon-minutes-1000'), 'not for the free plan');
      assertStatus(await call('POST', '/api/v2/product/subscribe', { token: o.token, body: { productPlanId: 'pplan-business', term: 'month' } }), 200);
      const bizAddons = await call('GET', '/api/v2/addon/available', { token: o.token });
      assert.ok(bizAddons.body.addons.some((a: { addonId: string }) => a.addonId === 'addon-rush'));
      assert.ok(bizAddons.body.addons.some((a: { addonId: string }) => a.addonId === 'addon-minutes-1000'));
      // Another reseller's organization never sees it.
      const r2 = await h().reseller();
      const o2 = await h().organization(r2.id, { productPlanId: 'pplan-business' });
      const other = await call('GET', '/api/v2/addon/available', { token: o2.token });
      assert.ok(!other.body.addons.some((a: { addonId: string }) => a.addonId === 'addon-rush'));
      assertStatus(await call('DELETE', '/api/v2/product/catalog/addon/addon-rush', { token: r.token }), 200);
      assertStatus(await call('DELETE', '/api/v2/product/catalog/addon/addon-rush', { token: r.token }), 404);
    });
  });

  describe('plan ids on the account ladder', () => {
    it('an unknown productPlanId, offeredProductPlanId or sellPlanId is a 400 naming the field', async () => {
      assertBad(await call('POST', '/api/v2/createReseller', { query: { targetPartnerId: h().partnerId }, body: { resellerName: 'Bad', sellPlanId: 'gold' } }), 'sellPlanId');
      assertBad(await call('POST', '/api/v2/createReseller', { query: { targetPartnerId: h().partnerId }, body: { resellerName: 'Bad', productPlanId: 'pplan-nope' } }), 'productPlanId');
      const r = await h().reseller();
      assertBad(await call('POST', '/api/v2/createOrganization', { query: { targetResellerId: r.id }, body: { orgName: 'Bad', productPlanId: 'pplan-nope' } }), 'productPlanId');
      assertBad(await call('POST', '/api/v2/createOrganization', { query: { targetResellerId: r.id }, body: { orgName: 'Bad', offeredProductPlanId: 'nope' } }), 'offeredProductPlanId');
      const o = await h().organization(r.id);
      const upd = await call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body: { productPlanId: 'pplan-nope' } });
      assertBad(upd, 'productPlanId');
      assert.deepEqual(upd.body.failedSettings, ['productPlanId']);
    });

    it("a new organization gets the reseller's sell plan, else pplan-unmetered, and that plan's limits", async () => {
      const res = await call('POST', '/api/v2/createReseller', { query: { targetPartnerId: h().partnerId }, body: { resellerName: 'Seller', sellPlanId: 'pplan-business' } });
      assertStatus(res, 201);
      const o = await h().organization(res.body.reseller.id);
      const cur = await call('GET', '/api/v2/product/currentPlan', { token: o.token });
      assertStatus(cur, 200);
      assert.equal(cur.body.productPlanId, 'pplan-business');
      assert.equal(cur.body.subscribed, false);
      assert.equal(cur.body.subscription, null);
      assert.equal((await limitsOf(o.id)).concurrencyPerRun, 20);
      const plain = await h().organization((await h().reseller()).id);
      const c2 = await call('GET', '/api/v2/product/currentPlan', { token: plain.token });
      assert.equal(c2.body.productPlanId, 'pplan-unmetered');
      assert.equal(c2.body.plan.name, 'Unmetered');
      assert.equal((await limitsOf(plain.id)).concurrencyPerRun, 5);
      // Not offered for subscription: it is assigned, never bought.
      const avail = await call('GET', '/api/v2/product/allAvailablePlans', { token: plain.token });
      assert.ok(!avail.body.plans.some((x: { productPlanId: string }) => x.productPlanId === 'pplan-unmetered'));
    });

    it('offeredPlan: what the reseller offers the organization, or null', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const none = await call('GET', '/api/v2/product/offeredPlan', { token: o.token });
      assertStatus(none, 200);
      assert.equal(none.body.plan, null);
      assertStatus(await call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body: { offeredProductPlanId: 'pplan-starter' } }), 200);
      const offered = await call('GET', '/api/v2/product/offeredPlan', { token: o.token });
      assert.equal(offered.body.productPlanId, 'pplan-starter');
      assert.equal(offered.body.plan.name, 'Starter');
      // The reseller reads it for the organization.
      const byReseller = await call('GET', '/api/v2/product/offeredPlan', { token: r.token, query: { targetAccountId: o.id } });
      assert.equal(byReseller.body.plan.productPlanId, 'pplan-starter');
    });

    it("an organization never sees another reseller's plan, nor a withdrawn one it is not on", async () => {
      const r1 = await h().reseller();
      const r2 = await h().reseller();
      assertStatus(await call('PUT', '/api/v2/product/catalog/plan/pplan-secret', { token: r1.token, body: planBody('Secret', 2) }), 200);
      const o1 = await h().organization(r1.id);
      const o2 = await h().organization(r2.id);
      assertStatus(await call('GET', '/api/v2/product/productPlan/pplan-secret', { token: o1.token }), 200);
      assertStatus(await call('GET', '/api/v2/product/productPlan/pplan-secret', { token: o2.token }), 404);
      assert.ok(!ids((await call('GET', '/api/v2/product/allAvailablePlans', { token: o2.token })).body.plans).includes('pplan-secret'));
      assertBad(await call('POST', '/api/v2/product/subscribe', { token: o2.token, body: { productPlanId: 'pplan-secret', term: 'month' } }), 'productPlanId');
      // Another organization's current plan is out of reach.
      assertStatus(await call('GET', '/api/v2/product/currentPlan', { token: o2.token, query: { targetAccountId: o1.id } }), 404);
      // Withdrawn: gone from the available plans and from subscribe, still readable by the reseller.
      assertStatus(await call('PUT', '/api/v2/product/catalog/plan/pplan-secret', { token: r1.token, body: planBody('Secret', 2, {}, { available: false }) }), 200);
      assert.ok(!ids((await call('GET', '/api/v2/product/allAvailablePlans', { token: o1.token })).body.plans).includes('pplan-secret'));
      assertStatus(await call('GET', '/api/v2/product/productPlan/pplan-secret', { token: o1.token }), 404);
      assertBad(await call('POST', '/api/v2/product/subscribe', { token: o1.token, body: { productPlanId: 'pplan-secret', term: 'month' } }), 'productPlanId');
      assertStatus(await call('GET', '/api/v2/product/productPlan/pplan-secret', { token: r1.token }), 200);
    });
  });

  describe('subscribe and cancel without a billing system', () => {
    it('records the subscription at once, applies its limits at once, and changes plan and term', async () => {
      const r = await h().reseller();
      assertStatus(await call('PUT', '/api/v2/product/catalog/plan/pplan-capped', { token: r.token, body: planBody('Capped', 2, { calls: 40, tasks: 100 }) }), 200);
      const o = await h().organization(r.id);
      assert.equal((await limitsOf(o.id)).concurrencyPerRun, 5);
      // An organization's own business hours survive plan changes.
      assertStatus(await call('POST', '/api/v2/tasks/limits', { token: o.token, body: { cooldowns: { calls: 60 } } }), 200);

      const sub = await call('POST', '/api/v2/product/subscribe', {
        token: o.token, body: { productPlanId: 'pplan-capped', term: 'month', checkoutType: 'redirect', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
      });
      assertStatus(sub, 200);
      assert.equal(sub.body.checkoutUrl, null);
      assert.equal(sub.body.clientSecret, null);
      const s = sub.body.subscription;
      assert.match(s.subscriptionId, /^sub_/);
      assert.equal(s.state, 'active');
      assert.equal(s.term, 'month');
      assert.equal(s.price, 10);
      assert.equal(s.currency, 'EUR');
      assert.equal(s.billingSystem, null);
      assert.ok(s.periodEnd > s.periodStart + 27 * 86400 && s.periodEnd <= s.periodStart + 31 * 86400, 'a month');
      const lim = await limitsOf(o.id);
      assert.equal(lim.concurrencyPerRun, 2);
      assert.deepEqual(lim.daily, { calls: 40, tasks: 100 });
      assert.equal((lim as unknown as { cooldowns: Record<string, number> }).cooldowns.calls, 60);

      const cur = await call('GET', '/api/v2/product/currentPlan', { token: o.token });
      assert.equal(cur.body.productPlanId, 'pplan-capped');
      assert.equal(cur.body.productPlanTerm, 'month');
      assert.equal(cur.body.subscribed, true);
      assert.equal(cur.body.subscription.subscriptionId, s.subscriptionId);
      const acct = await call('GET', '/api/v2/account', { query: { targetAccountId: o.id } });
      assert.equal(acct.body.details.subscribed, true);
      assert.equal(acct.body.details.productPlanId, 'pplan-capped');

      // The same plan and term again: nothing to change.
      assertStatus(await call('POST', '/api/v2/product/subscribe', { token: o.token, body: { productPlanId: 'pplan-capped', term: 'month' } }), 409);
      // While subscribed, updateOrganization does not move the plan behind the subscription's back.
      const moved = await call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body: { productPlanId: 'pplan-starter' } });
      assertStatus(moved, 400);
      assert.match(moved.body.message, /subscribe/);

      // A plan change by an ancestor acting for the organization: replaced, new limits at once.
      const up = await call('POST', '/api/v2/product/subscribe', { token: r.token, query: { targetAccountId: o.id }, body: { productPlanId: 'pplan-enterprise', term: 'year' } });
      assertStatus(up, 200);
      assert.notEqual(up.body.subscription.subscriptionId, s.subscriptionId);
      assert.equal(up.body.subscription.price, 4990);
      assert.ok(up.body.subscription.periodEnd >= up.body.subscription.periodStart + 365 * 86400);
      const lim2 = await limitsOf(o.id);
      assert.equal(lim2.concurrencyPerRun, 100);
      assert.deepEqual(lim2.daily, {});
      const old = await h().database.db.selectFrom('subscriptions').selectAll().where('id', '=', s.subscriptionId).executeTakeFirstOrThrow();
      assert.equal(old.state, 'replaced');
      assert.ok(old.ended_at !== null);
    });

    it('renews at the end of its period (issue 33): the period rolls over by whole terms, the plan continues, usage counts afresh; a cancelled one does not', async () => {
      const r = await h().reseller();
      assertStatus(await call('PUT', '/api/v2/product/catalog/plan/pplan-renewing', { token: r.token, body: planBody('Renewing', 2, { calls: 40 }) }), 200);
      const o = await h().organization(r.id);
      const sub = await call('POST', '/api/v2/product/subscribe', { token: o.token, body: { productPlanId: 'pplan-renewing', term: 'month' } });
      assertStatus(sub, 200);
      const id = sub.body.subscription.subscriptionId as string;
      // Its month began 40 days ago and ended 10 days ago (the test does not wait a month).
      const day = 86_400_000;
      const ended = Date.now() - 10 * day;
      const db = h().database.db;
      await db.updateTable('subscriptions').set({ period_start: ended - 30 * day, period_end: ended }).where('id', '=', id).execute();
      // A cancelled subscription of another organization, also past its end, stays ended.
      const o2 = await h().organization(r.id);
      const sub2 = await call('POST', '/api/v2/product/subscribe', { token: o2.token, body: { productPlanId: 'pplan-renewing', term: 'month' } });
      assertStatus(sub2, 200);
      assertStatus(await call('DELETE', '/api/v2/product/cancel', { token: o2.token }), 200);
      await db.updateTable('subscriptions').set({ period_end: ended }).where('id', '=', sub2.body.subscription.subscriptionId).execute();

      const job = maintenanceJobs(h().database, { taskRetentionDays: 30 }).find((j) => j.name === 'renew-subscriptions');
      assert.ok(job, 'a maintenance job renews subscriptions');
      assert.equal(await job.run(), 1);
      assert.equal(await job.run(), 0, 'renewed once');

      const cur = await call('GET', '/api/v2/product/currentPlan', { token: o.token });
      const s = cur.body.subscription;
      assert.equal(s.subscriptionId, id, 'the same subscription continues');
      assert.equal(s.state, 'active');
      assert.equal(cur.body.productPlanId, 'pplan-renewing');
      assert.equal(s.periodStart, Math.floor(ended / 1000), 'the next term starts where the last one ended');
      assert.ok(s.periodEnd * 1000 > Date.now() && s.periodEnd - s.periodStart >= 27 * 86400 && s.periodEnd - s.periodStart <= 31 * 86400, JSON.stringify(s));
      // The usage query's current period (where included amounts are counted) is the new term.
      const usage = await call('GET', '/api/v2/stats/usage', { token: o.token });
      assertStatus(usage, 200);
      assert.equal(usage.body.billingPeriod.startDateTimestamp, s.periodStart);
      assert.equal(usage.body.billingPeriod.endDateTimestamp, s.periodEnd);
      const other = await db.selectFrom('subscriptions').selectAll().where('id', '=', sub2.body.subscription.subscriptionId).executeTakeFirstOrThrow();
      assert.equal(other.state, 'canceled');
      assert.equal(Number(other.period_end), ended);
    });

    it('cancel ends the subscription and falls back to the reseller\'s sell plan and its limits; a second cancel is a 400', async () => {
      const res = await call('POST', '/api/v2/createReseller', { query: { targetPartnerId: h().partnerId }, body: { resellerName: 'Fallback', sellPlanId: 'pplan-starter' } });
      const r = { id: res.body.reseller.id as number, token: await h().tokenFor(res.body.reseller.id) };
      assertStatus(await call('PUT', '/api/v2/product/catalog/plan/pplan-tiny', { token: r.token, body: planBody('Tiny', 1, { texts: 3 }) }), 200);
      const o = await h().organization(r.id, { productPlanId: 'pplan-business' });
      assertBad(await call('DELETE', '/api/v2/product/cancel', { token: o.token }), 'no subscription');
      assertStatus(await call('POST', '/api/v2/product/subscribe', { token: o.token, body: { productPlanId: 'pplan-tiny', term: 'month' } }), 200);
      assert.equal((await limitsOf(o.id)).concurrencyPerRun, 1);

      const c = await call('DELETE', '/api/v2/product/cancel', { token: r.token, query: { targetAccountId: o.id }, body: { reason: 'too small', details: 'moving on' } });
      assertStatus(c, 200);
      assert.equal(c.body.subscription.state, 'canceled');
      assert.equal(c.body.subscription.cancelReason, 'too small');
      assert.equal(c.body.subscription.cancelDetails, 'moving on');
      assert.equal(c.body.productPlanId, 'pplan-starter');
      const lim = await limitsOf(o.id);
      assert.equal(lim.concurrencyPerRun, 5);
      assert.deepEqual(lim.daily, {});
      const cur = await call('GET', '/api/v2/product/currentPlan', { token: o.token });
      assert.equal(cur.body.subscribed, false);
      assert.equal(cur.body.subscription, null);
      assert.equal(cur.body.productPlanId, 'pplan-starter');
      const acct = await call('GET', '/api/v2/account', { query: { targetAccountId: o.id } });
      assert.equal(acct.body.details.subscribed, false);
      assert.ok(acct.body.details.canceledAt > 0);
      assertStatus(await call('DELETE', '/api/v2/product/cancel', { token: o.token }), 400);
    });

    it('an organization under another reseller cannot be subscribed or cancelled for; an agent cannot subscribe', async () => {
      const r1 = await h().reseller();
      const r2 = await h().reseller();
      const o1 = await h().organization(r1.id);
      assertStatus(await call('POST', '/api/v2/product/subscribe', { token: r2.token, query: { targetAccountId: o1.id }, body: { productPlanId: 'pplan-starter', term: 'month' } }), 404);
      assertStatus(await call('DELETE', '/api/v2/product/cancel', { token: r2.token, query: { targetAccountId: o1.id } }), 404);
      const agent = await h().agent(o1.id);
      assertStatus(await call('POST', '/api/v2/product/subscribe', { token: agent.token, body: { productPlanId: 'pplan-starter', term: 'month' } }), 403);
      // An agent reads its organization's plan.
      const cur = await call('GET', '/api/v2/product/currentPlan', { token: agent.token });
      assertStatus(cur, 200);
      assert.equal(cur.body.organizationId, o1.id);
    });

    it('validates subscribe: term, checkoutType, URLs and the plan, each named', async () => {
      const o = await h().organization((await h().reseller()).id);
      const sub = (body: Record<string, unknown>) => call('POST', '/api/v2/product/subscribe', { token: o.token, body: { productPlanId: 'pplan-starter', term: 'month', ...body } });
      assertBad(await sub({ term: 'week' }), 'term');
      assertBad(await sub({ checkoutType: 'popup' }), 'checkoutType');
      assertBad(await sub({ successUrl: 'not a url' }), 'successUrl');
      assertBad(await sub({ cancelUrl: 'ftp://x.example/' }), 'cancelUrl');
      assertBad(await sub({ productPlanId: 'pplan-nope' }), 'productPlanId');
      assertBad(await call('POST', '/api/v2/product/subscribe', { token: o.token, body: { term: 'month' } }), 'productPlanId');
    });

    it("a plan's concurrency holds a queued call back at once, and a bigger plan lets it start", async () => {
      // The task engine itself claims (no worker runs here): what it admits is what a worker would start.
      const engine = createTaskEngine({ workerId: 'billing-test', subscribers: uncachedSubscribers, allowance: planAllowance(uncachedEntitlements) });
      const db = h().database.db;
      const r = await h().reseller();
      assertStatus(await call('PUT', '/api/v2/product/catalog/plan/pplan-single', { token: r.token, body: planBody('Single', 1) }), 200);
      const o = await h().organization(r.id);
      assertStatus(await call('POST', '/api/v2/product/subscribe', { token: o.token, body: { productPlanId: 'pplan-single', term: 'month' } }), 200);
      for (const target of ['+14155550101', '+14155550102']) {
        assertStatus(await call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target } }), 201);
      }
      const first = await engine.claim(db, 10);
      assert.equal(first.length, 1, 'one call at a time under the plan');
      assert.deepEqual(await engine.claim(db, 10), [], 'the second waits');
      assertStatus(await call('POST', '/api/v2/product/subscribe', { token: o.token, body: { productPlanId: 'pplan-business', term: 'month' } }), 200);
      const second = await engine.claim(db, 10);
      assert.equal(second.length, 1, 'the bigger plan lets the waiting call start at once');
      assert.notEqual(second[0].id, first[0].id);
      for (const row of [...first, ...second]) await engine.complete(db, row, { state: 'finished' });
    });
  });
});
