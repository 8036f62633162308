// The Accounts operations end to end (app.inject on a real database): the tenancy ladder and
// delegation, cross-tenant refusal, deletion cascades, listing filters and pagination, partial
// updates, search, integrations at rest, and a 400 naming the field for every kind of bad input.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness, Reply } from '../helpers/harness.ts';

const SECRET = 'sk_live_0123456789abcdefWXYZ';

/** A 400 whose message names the field (the error body shape, never a 5xx). */
function assertBad(res: Reply, field: string | RegExp, label = ''): void {
  assert.equal(res.status, 400, `${label} expected 400, got ${res.status} ${JSON.stringify(res.body)}`);
  assert.equal(res.body.success, false, label);
  if (typeof field === 'string') assert.ok(String(res.body.message).includes(field), `${label} message '${res.body.message}' should name ${field}`);
  else assert.match(res.body.message, field, label);
}

function assertStatus(res: Reply, status: number, label = ''): void {
  assert.equal(res.status, status, `${label} expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
  if (status >= 400) assert.equal(res.body.success, false, label);
}

/** The 404 message with every number replaced, so a foreign id and a missing one can be compared. */
const shape = (message: string) => message.replace(/\d+/g, 'N');

forEachEngine('accounts', (h) => {
  const call = (method: string, url: string, opts?: Parameters<Harness['call']>[2]) => h().call(method, url, opts);
  const ids = (list: { id: number }[]) => list.map((a) => a.id);
  const accountIn = async (id: number) => h().database.db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();

  describe('createReseller and listResellers', () => {
    it('a partner token creates a reseller (201) that is enabled by default', async () => {
      const res = await call('POST', '/api/v2/createReseller', {
        query: { targetPartnerId: h().partnerId },
        body: { resellerName: '  Acme Resale ', email: 'Boss@Acme.example', sellPlanId: 'pplan-business', hipaaEnabledDefault: true },
      });
      assertStatus(res, 201);
      assert.equal(res.body.success, true);
      assert.equal(res.body.message, 'Reseller created');
      const r = res.body.reseller;
      assert.equal(r.accountType, 'reseller');
      assert.equal(r.resellerName, 'Acme Resale');
      assert.equal(r.email, 'boss@acme.example');
      assert.equal(r.partnerId, h().partnerId);
      assert.equal(r.sellPlanId, 'pplan-business');
      assert.equal(r.hipaaEnabledDefault, true);
      assert.equal(r.active, true);
      assert.equal(r.resellerStatus, 'enabled');
      // The contract types `organization` as a string: the new reseller's id; the object is `reseller`.
      assert.equal(res.body.organization, String(r.id));
      const member = await h().database.db.selectFrom('users').selectAll().where('account_id', '=', r.id).execute();
      assert.deepEqual(member.map((m) => m.email), ['boss@acme.example']);
    });

    it('a reseller created with resellerStatus disabled is inactive', async () => {
      const res = await call('POST', '/api/v2/createReseller', {
        query: { targetPartnerId: h().partnerId }, body: { resellerName: 'Dormant', resellerStatus: 'disabled' },
      });
      assertStatus(res, 201);
      assert.equal(res.body.reseller.active, false);
      assert.equal(res.body.reseller.resellerStatus, 'disabled');
    });

    it('reseller, organization and agent tokens cannot create resellers (403)', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const a = await h().agent(o.id);
      for (const token of [r.token, o.token, a.token]) {
        const res = await call('POST', '/api/v2/createReseller', { token, query: { targetPartnerId: h().partnerId }, body: { resellerName: 'Nope' } });
        assertStatus(res, 403);
        assert.match(res.body.message, /Partner account required/);
      }
      const count = await h().database.db.selectFrom('accounts').select((eb) => eb.fn.countAll<number>().as('n'))
        .where('name', '=', 'Nope').executeTakeFirstOrThrow();
      assert.equal(Number(count.n), 0);
    });

    it('a reseller token cannot list resellers (403)', async () => {
      const r = await h().reseller();
      const res = await call('GET', '/api/v2/listResellers', { token: r.token, query: { targetPartnerId: h().partnerId } });
      assertStatus(res, 403);
    });

    it('listResellers returns every reseller of the partner and honours active', async () => {
      const on = await h().reseller('Lister On');
      const off = await call('POST', '/api/v2/createReseller', {
        query: { targetPartnerId: h().partnerId }, body: { resellerName: 'Lister Off', resellerStatus: 'disabled' },
      });
      const all = await call('GET', '/api/v2/listResellers', { query: { targetPartnerId: h().partnerId } });
      assertStatus(all, 200);
      assert.equal(all.body.success, true);
      const inDb = await h().database.db.selectFrom('accounts').select('id').where('kind', '=', 'reseller').orderBy('id').execute();
      assert.deepEqual(ids(all.body.resellers), inDb.map((r) => r.id));
      assert.equal(all.body.total, inDb.length);
      assert.ok(all.body.resellers.every((r: any) => r.accountType === 'reseller'));

      const inactive = await call('GET', '/api/v2/listResellers', { query: { targetPartnerId: h().partnerId, active: false } });
      assert.ok(ids(inactive.body.resellers).includes(off.body.reseller.id));
      assert.ok(!ids(inactive.body.resellers).includes(on.id));
      assert.ok(inactive.body.resellers.every((r: any) => r.active === false));
      assert.equal(inactive.body.total, inactive.body.resellers.length);

      const active = await call('GET', '/api/v2/listResellers', { query: { targetPartnerId: h().partnerId, active: 'true' } });
      assert.ok(ids(active.body.resellers).includes(on.id));
      assert.ok(active.body.resellers.every((r: any) => r.active === true));
      assert.equal(active.body.total + inactive.body.total, all.body.total);
    });

    it('listResellers pages 0-based with pageSize and reports the total', async () => {
      await h().reseller();
      await h().reseller();
      const all = await call('GET', '/api/v2/listResellers', { query: { targetPartnerId: h().partnerId } });
      const total = all.body.total as number;
      assert.ok(total >= 3);
      const p0 = await call('GET', '/api/v2/listResellers', { query: { targetPartnerId: h().partnerId, pagination: true, page: 0, pageSize: 2 } });
      const p1 = await call('GET', '/api/v2/listResellers', { query: { targetPartnerId: h().partnerId, pagination: true, page: 1, pageSize: 2 } });
      assertStatus(p0, 200);
      assert.deepEqual(ids(p0.body.resellers), ids(all.body.resellers).slice(0, 2));
      assert.deepEqual(ids(p1.body.resellers), ids(all.body.resellers).slice(2, 4));
      assert.equal(p0.body.total, total);
      assert.deepEqual(p1.body.pagination, { page: 1, pageSize: 2, total });
    });

    it('rejects bad createReseller and listResellers input with a 400 naming the field', async () => {
      const q = { targetPartnerId: h().partnerId };
      assertBad(await call('POST', '/api/v2/createReseller', { query: q, body: {} }), 'resellerName is required');
      assertBad(await call('POST', '/api/v2/createReseller', { query: q, body: { resellerName: '' } }), 'resellerName');
      assertBad(await call('POST', '/api/v2/createReseller', { query: q, body: { resellerName: '   ' } }), 'resellerName must not be empty');
      assertBad(await call('POST', '/api/v2/createReseller', { query: q, body: { resellerName: { a: 1 } } }), 'resellerName must be a string');
      assertBad(await call('POST', '/api/v2/createReseller', { query: q, body: { resellerName: 'X', email: 'nope' } }), 'email must be a valid email address');
      assertBad(await call('POST', '/api/v2/createReseller', { query: q, body: { resellerName: 'X', resellerStatus: 'paused' } }), 'resellerStatus must be one of: enabled, disabled');
      assertBad(await call('POST', '/api/v2/createReseller', { query: q, body: { resellerName: 'X', hipaaEnabledDefault: 'maybe' } }), 'hipaaEnabledDefault must be a boolean');
      assertBad(await call('POST', '/api/v2/createReseller', { body: { resellerName: 'X' } }), 'targetPartnerId is required');
      assertBad(await call('POST', '/api/v2/createReseller', { query: { targetPartnerId: 'abc' }, body: { resellerName: 'X' } }), 'targetPartnerId must be an integer');
      assertBad(await call('POST', '/api/v2/createReseller', { query: q }), 'body');
      assertBad(await call('POST', '/api/v2/createReseller', { query: q, payload: '{"resellerName":', headers: { 'content-type': 'application/json' } }), 'not valid JSON');
      assertBad(await call('GET', '/api/v2/listResellers', {}), 'targetPartnerId is required');
      assertBad(await call('GET', '/api/v2/listResellers', { query: { ...q, active: 'maybe' } }), 'active must be a boolean');
      assertBad(await call('GET', '/api/v2/listResellers', { query: { ...q, pageSize: 0 } }), 'pageSize');
      assertBad(await call('GET', '/api/v2/listResellers', { query: { ...q, page: -1 } }), 'page');
      assertBad(await call('GET', '/api/v2/listResellers', { query: { ...q, pagination: 'sometimes' } }), 'pagination must be a boolean');
      const r = await h().reseller();
      const wrongKind = await call('POST', '/api/v2/createReseller', { query: { targetPartnerId: r.id }, body: { resellerName: 'X' } });
      assertStatus(wrongKind, 404);
    });
  });

  describe('createOrganization', () => {
    it('a reseller token creates an organization: 201 {success, message, organization} with a default agent', async () => {
      const r = await h().reseller();
      const res = await call('POST', '/api/v2/createOrganization', {
        token: r.token, query: { targetResellerId: r.id },
        body: { orgName: ' Acme Solar ', accountName: 'Acme Support', email: 'Admin@AcmeSolar.example', externalAccountId: 'crm-acme', smsEnabled: true },
      });
      assertStatus(res, 201);
      assert.deepEqual(Object.keys(res.body).filter((k) => ['success', 'message', 'organization'].includes(k)).sort(), ['message', 'organization', 'success']);
      assert.equal(res.body.success, true);
      assert.equal(res.body.message, 'Organization created');
      const org = res.body.organization;
      assert.equal(typeof org, 'object');
      assert.equal(org.accountType, 'organization');
      assert.equal(org.orgName, 'Acme Solar');
      assert.equal(org.resellerId, r.id);
      assert.equal(org.partnerId, h().partnerId);
      assert.equal(org.email, 'admin@acmesolar.example');
      assert.equal(org.externalAccountId, 'crm-acme');
      assert.equal(org.smsEnabled, true);
      assert.equal(org.hipaaSetting, 'inherit');
      assert.equal(org.orgAccountType, 'customer');
      assert.equal(org.active, true);

      const agents = await call('GET', '/api/v2/listAccounts', { token: r.token, query: { targetOrganizationId: org.id } });
      assertStatus(agents, 200);
      assert.equal(agents.body.accounts.length, 1);
      assert.equal(agents.body.accounts[0].id, org.defaultAccountId);
      assert.equal(agents.body.accounts[0].accountName, 'Acme Support');
      assert.equal(agents.body.accounts[0].organizationId, org.id);
      const members = await h().database.db.selectFrom('users').selectAll().where('account_id', '=', org.id).execute();
      assert.deepEqual(members.map((m) => m.email), ['admin@acmesolar.example']);
    });

    it('the default agent is named after the organization when accountName is omitted', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id, { orgName: 'Bay Dental' });
      const agent = await call('GET', '/api/v2/account', { token: r.token, query: { targetAccountId: o.agentId } });
      assertStatus(agent, 200);
      assert.equal(agent.body.details.name, 'Bay Dental Agent');
    });

    it("productPlanId defaults to the reseller's sellPlanId, else to the configured default plan", async () => {
      const withPlan = await call('POST', '/api/v2/createReseller', { query: { targetPartnerId: h().partnerId }, body: { resellerName: 'Planner', sellPlanId: 'pplan-starter' } });
      const rp = withPlan.body.reseller.id;
      const a = await call('POST', '/api/v2/createOrganization', { query: { targetResellerId: rp }, body: { orgName: 'Inherits' } });
      assert.equal(a.body.organization.productPlanId, 'pplan-starter');
      const b = await call('POST', '/api/v2/createOrganization', { query: { targetResellerId: rp }, body: { orgName: 'Chooses', productPlanId: 'pplan-enterprise' } });
      assert.equal(b.body.organization.productPlanId, 'pplan-enterprise');
      const plain = await h().reseller();
      const c = await call('POST', '/api/v2/createOrganization', { query: { targetResellerId: plain.id }, body: { orgName: 'Defaults' } });
      assert.equal(h().config.defaultPlanId, 'pplan-unmetered');
      assert.equal(c.body.organization.productPlanId, 'pplan-unmetered');
      const blank = await call('POST', '/api/v2/createOrganization', { query: { targetResellerId: rp }, body: { orgName: 'Blank Plan', productPlanId: ' ' } });
      assert.equal(blank.body.organization.productPlanId, 'pplan-starter');
    });

    it("a partner token acts on a reseller's organizations (create, list, update, delete)", async () => {
      const r = await h().reseller();
      const created = await call('POST', '/api/v2/createOrganization', { query: { targetResellerId: r.id }, body: { orgName: 'Delegated' } });
      assertStatus(created, 201);
      const orgId = created.body.organization.id;
      const listed = await call('GET', '/api/v2/listOrganizations', { query: { targetResellerId: r.id } });
      assert.deepEqual(ids(listed.body.organizations), [orgId]);
      const upd = await call('POST', '/api/v2/updateOrganization', { query: { targetOrganizationId: orgId }, body: { orgName: 'Delegated 2' } });
      assertStatus(upd, 200);
      const seen = await call('GET', '/api/v2/account', { token: r.token, query: { targetAccountId: orgId } });
      assert.equal(seen.body.details.orgName, 'Delegated 2');
      const del = await call('DELETE', '/api/v2/deleteOrganization', { query: { targetResellerId: r.id }, body: { targetOrganizationId: orgId } });
      assertStatus(del, 200);
      const after = await call('GET', '/api/v2/listOrganizations', { token: r.token, query: { targetResellerId: r.id } });
      assert.deepEqual(after.body.organizations, []);
    });

    it('organization and agent tokens cannot create organizations (403)', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const a = await h().agent(o.id);
      for (const token of [o.token, a.token]) {
        const res = await call('POST', '/api/v2/createOrganization', { token, query: { targetResellerId: r.id }, body: { orgName: 'Sneaky' } });
        assertStatus(res, 403);
      }
      const list = await call('GET', '/api/v2/listOrganizations', { token: r.token, query: { targetResellerId: r.id } });
      assert.deepEqual(ids(list.body.organizations), [o.id]);
    });

    it('stores the time zone given at creation', async () => {
      const r = await h().reseller();
      const res = await call('POST', '/api/v2/createOrganization', { query: { targetResellerId: r.id }, body: { orgName: 'Zoned', timezone: 'America/Chicago' } });
      assertStatus(res, 201);
      assert.equal(res.body.organization.timezone, 'America/Chicago');
    });

    it('stores numbering providers with the organization', async () => {
      const r = await h().reseller();
      const res = await call('POST', '/api/v2/createOrganization', {
        query: { targetResellerId: r.id }, body: { orgName: 'Carrier', numberingProviders: [{ providerId: 'simulated', config: { callSeconds: '5' } }] },
      });
      assertStatus(res, 201);
      assert.equal(res.body.organization.numberingProviders.length, 1);
      assert.equal(res.body.organization.numberingProviders[0].providerId, 'simulated');
      assert.equal(res.body.organization.numberingProviders[0].default, true);
    });

    it('rejects bad createOrganization input with a 400 naming the field and creates nothing', async () => {
      const r = await h().reseller();
      const q = { targetResellerId: r.id };
      const post = (body: unknown, query: Record<string, unknown> = q) => call('POST', '/api/v2/createOrganization', { query, body });
      assertBad(await post({}), 'orgName is required');
      assertBad(await post({ orgName: '' }), 'orgName');
      assertBad(await post({ orgName: '  ' }), 'orgName must not be empty');
      assertBad(await post({ orgName: { text: 'a' } }), 'orgName must be a string');
      assertBad(await post({ orgName: 'X', email: 'not-an-email' }), 'email');
      assertBad(await post({ orgName: 'X', hipaaSetting: 'maybe' }), 'hipaaSetting must be one of: on, off, inherit');
      assertBad(await post({ orgName: 'X', orgAccountType: 'vip' }), 'orgAccountType must be one of: internal, customer');
      assertBad(await post({ orgName: 'X', vidaPremium: 'yes' }), 'vidaPremium must be a boolean');
      assertBad(await post({ orgName: 'X', timezone: 'Mars/Olympus' }), "timezone 'Mars/Olympus' is not an IANA time zone");
      assertBad(await post({ orgName: 'X', timezone: { zone: 'UTC' } }), 'timezone must be a string');
      assertBad(await post({ orgName: 'X', smsEnabled: {} }), 'smsEnabled must be a boolean');
      assertBad(await post({ orgName: 'X', numberingProviders: { providerId: 'twilio' } }), 'numberingProviders must be an array');
      assertBad(await post({ orgName: 'X', numberingProviders: [{ config: {} }] }), 'numberingProviders[0].providerId is required');
      assertBad(await post({ orgName: 'X', numberingProviders: [{ providerId: 'acme-tel', config: {} }] }), 'numberingProviders[0].providerId');
      assertBad(await post({ orgName: 'X', numberingProviders: [{ providerId: 'twilio', config: { accountSid: 'nope', authToken: 'x' } }] }), 'numberingProviders[0].config.accountSid');
      assertBad(await post({ orgName: 'X', numberingProviders: [{ providerId: 'simulated' }] }), 'numberingProviders[0].config is required');
      assertBad(await post({ orgName: 'X' }, {}), 'targetResellerId is required');
      assertBad(await post({ orgName: 'X' }, { targetResellerId: 'abc' }), 'targetResellerId must be an integer');
      assertBad(await post({ orgName: 'X' }, { targetResellerId: '0' }), 'targetResellerId');
      assertBad(await post({ orgName: 'X' }, { targetResellerId: '1.5' }), 'targetResellerId must be an integer');
      assertBad(await call('POST', '/api/v2/createOrganization', { query: q }), 'body');
      assertBad(await call('POST', '/api/v2/createOrganization', { query: q, payload: 'orgName=X', headers: { 'content-type': 'application/json' } }), 'not valid JSON');
      const list = await call('GET', '/api/v2/listOrganizations', { query: q });
      assert.equal(list.body.total, 0);
    });

    it('a targetResellerId that is not a reseller is 404', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const res = await call('POST', '/api/v2/createOrganization', { query: { targetResellerId: o.id }, body: { orgName: 'X' } });
      assertStatus(res, 404);
      assert.match(res.body.message, /targetResellerId/);
    });
  });

  describe('integrations', () => {
    const integration = (over: Record<string, unknown> = {}) => ({
      appId: 'crm-sync', appVersion: 'v1', appData: { apiToken: SECRET, apiUrl: 'https://crm.example/api' }, ...over,
    });

    it('integrations given to createOrganization are stored encrypted and masked in answers', async () => {
      const r = await h().reseller();
      const res = await call('POST', '/api/v2/createOrganization', { query: { targetResellerId: r.id }, body: { orgName: 'Integrated', integrations: [integration()] } });
      assertStatus(res, 201);
      const [shown] = res.body.organization.integrations;
      assert.equal(shown.appId, 'crm-sync');
      assert.equal(shown.appVersion, 'v1');
      assert.equal(shown.appData.apiToken, `****${SECRET.slice(-4)}`);
      assert.equal(shown.appData.apiUrl, 'https://crm.example/api');
      assert.ok(!JSON.stringify(res.body).includes(SECRET));

      const rows = await h().database.db.selectFrom('integrations').selectAll().where('account_id', '=', res.body.organization.id).execute();
      assert.equal(rows.length, 1);
      assert.ok(!rows[0].app_data.includes(SECRET), 'app_data must not hold the plaintext token');
      assert.ok(!rows[0].app_data.includes('crm.example'), 'app_data is sealed as a whole');
      assert.equal(h().box.openJson<Record<string, string>>(rows[0].app_data).apiToken, SECRET);

      const read = await call('GET', '/api/v2/account', { token: r.token, query: { targetAccountId: res.body.organization.id } });
      assert.equal(read.body.details.integrations[0].appData.apiToken, `****${SECRET.slice(-4)}`);
      assert.ok(!JSON.stringify(read.body).includes(SECRET));
    });

    it('integrations given to createAccount are stored encrypted and masked in answers', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const res = await call('POST', '/api/v2/createAccount', {
        token: o.token, query: { targetOrganizationId: o.id },
        body: { accountName: 'With App', integrations: [integration({ appData: { accountSid: 'AC123', accountToken: SECRET } })] },
      });
      assertStatus(res, 201);
      assert.equal(res.body.details.integrations[0].appData.accountToken, `****${SECRET.slice(-4)}`);
      assert.equal(res.body.details.integrations[0].appData.accountSid, 'AC123');
      assert.ok(!JSON.stringify(res.body).includes(SECRET));
      const rows = await h().database.db.selectFrom('integrations').selectAll().where('account_id', '=', res.body.accountId).execute();
      assert.equal(rows.length, 1);
      assert.equal(rows[0].org_id, o.id);
      assert.ok(!rows[0].app_data.includes(SECRET));
      const read = await call('GET', '/api/v2/account', { token: o.token, query: { targetAccountId: res.body.accountId } });
      assert.equal(read.body.details.integrations[0].appData.accountToken, `****${SECRET.slice(-4)}`);
    });

    it('validates integrations item by item, naming the item, and stores nothing on failure', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const org = (integrations: unknown) => call('POST', '/api/v2/createOrganization', { query: { targetResellerId: r.id }, body: { orgName: 'Bad Apps', integrations } });
      const acct = (integrations: unknown) => call('POST', '/api/v2/createAccount', { query: { targetOrganizationId: o.id }, body: { integrations } });
      const { appId: _drop, ...noAppId } = integration();
      for (const send of [org, acct]) {
        assertBad(await send([noAppId]), 'integrations[0].appId is required');
        assertBad(await send([integration(), { ...noAppId, appId: 'second' }, noAppId]), 'integrations[2].appId is required');
        assertBad(await send([integration({ appVersion: undefined })]), 'integrations[0].appVersion is required');
        assertBad(await send([integration({ appData: undefined })]), 'integrations[0].appData is required');
        assertBad(await send([integration({ appId: '' })]), 'integrations[0].appId');
        assertBad(await send([integration({ appId: '   ' })]), 'integrations[0].appId must not be empty');
        assertBad(await send([integration({ appData: { apiToken: { nested: true } } })]), 'integrations[0].appData.apiToken must be a string');
        assertBad(await send([integration({ appData: 'token' })]), 'integrations[0].appData must be an object');
        assertBad(await send([integration(), integration()]), 'integrations[1].appId');
        assertBad(await send({ appId: 'crm', appVersion: 'v1', appData: {} }), 'integrations must be an array');
        assertBad(await send(['crm']), 'integrations[0] must be an object');
      }
      const list = await call('GET', '/api/v2/listOrganizations', { query: { targetResellerId: r.id } });
      assert.deepEqual(ids(list.body.organizations), [o.id]);
      const agents = await call('GET', '/api/v2/listAccounts', { query: { targetOrganizationId: o.id } });
      assert.deepEqual(ids(agents.body.accounts), [o.agentId]);
    });
  });

  describe('createAccount, listAccounts and deleteAccount', () => {
    it('an organization token creates an agent: 201 with account = the new id as a string', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const res = await call('POST', '/api/v2/createAccount', {
        token: o.token, query: { targetOrganizationId: o.id }, body: { accountName: 'Night Shift', externalAccountId: 'ag-1', externalBillingId: 'bill-1' },
      });
      assertStatus(res, 201);
      assert.equal(res.body.success, true);
      assert.equal(res.body.message, 'Account created');
      assert.equal(typeof res.body.account, 'string');
      assert.match(res.body.account, /^\d+$/);
      assert.equal(Number(res.body.account), res.body.accountId);
      const row = await accountIn(res.body.accountId);
      assert.equal(row?.kind, 'agent');
      assert.equal(row?.org_id, o.id);
      assert.equal(row?.reseller_id, r.id);
      assert.equal(row?.name, 'Night Shift');
      assert.equal(row?.external_account_id, 'ag-1');
      assert.equal(row?.external_billing_id, 'bill-1');
    });

    it('createAccount with an empty body names the agent after the organization', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id, { orgName: 'Hollow' });
      const res = await call('POST', '/api/v2/createAccount', { token: o.token, query: { targetOrganizationId: o.id }, body: {} });
      assertStatus(res, 201);
      assert.equal(res.body.details.accountName, 'Hollow Agent');
    });

    it('an organization token deletes its own agent, whose token stops working at once', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const a = await h().agent(o.id);
      assertStatus(await call('GET', '/api/v2/account', { token: a.token }), 200);
      const res = await call('DELETE', '/api/v2/deleteAccount', { token: o.token, query: { targetOrganizationId: o.id }, body: { targetAccountId: String(a.id) } });
      assertStatus(res, 200);
      assert.deepEqual({ success: res.body.success, message: res.body.message }, { success: true, message: 'Account deleted' });
      assertStatus(await call('GET', '/api/v2/account', { token: a.token }), 401);
      const list = await call('GET', '/api/v2/listAccounts', { token: o.token, query: { targetOrganizationId: o.id } });
      assert.deepEqual(ids(list.body.accounts), [o.agentId]);
      const tokens = await h().database.db.selectFrom('tokens').select('id').where('account_id', '=', a.id).execute();
      assert.deepEqual(tokens, []);
      const again = await call('DELETE', '/api/v2/deleteAccount', { token: o.token, query: { targetOrganizationId: o.id }, body: { targetAccountId: a.id } });
      assertStatus(again, 404);
    });

    it("an agent token cannot list, create or delete its organization's agents (404)", async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const a = await h().agent(o.id);
      const list = await call('GET', '/api/v2/listAccounts', { token: a.token, query: { targetOrganizationId: o.id } });
      assertStatus(list, 404);
      assertStatus(await call('POST', '/api/v2/createAccount', { token: a.token, query: { targetOrganizationId: o.id }, body: {} }), 404);
      assertStatus(await call('DELETE', '/api/v2/deleteAccount', { token: a.token, query: { targetOrganizationId: o.id }, body: { targetAccountId: o.agentId } }), 404);
      const still = await call('GET', '/api/v2/listAccounts', { token: o.token, query: { targetOrganizationId: o.id } });
      assert.deepEqual(ids(still.body.accounts), [o.agentId, a.id]);
    });

    it('deleteAccount acts only within the given organization', async () => {
      const r = await h().reseller();
      const o1 = await h().organization(r.id);
      const o2 = await h().organization(r.id);
      const res = await call('DELETE', '/api/v2/deleteAccount', { token: r.token, query: { targetOrganizationId: o1.id }, body: { targetAccountId: o2.agentId } });
      assertStatus(res, 404);
      assert.ok(await accountIn(o2.agentId), 'the agent of the other organization is untouched');
      // An organization is not an agent account, even the one named in the query.
      assertStatus(await call('DELETE', '/api/v2/deleteAccount', { token: r.token, query: { targetOrganizationId: o1.id }, body: { targetAccountId: o1.id } }), 404);
      assert.ok(await accountIn(o1.id));
      // One organization's token cannot reach its sibling.
      assertStatus(await call('DELETE', '/api/v2/deleteAccount', { token: o1.token, query: { targetOrganizationId: o2.id }, body: { targetAccountId: o2.agentId } }), 404);
      assertStatus(await call('POST', '/api/v2/createAccount', { token: o1.token, query: { targetOrganizationId: o2.id }, body: {} }), 404);
      assertStatus(await call('GET', '/api/v2/listAccounts', { token: o1.token, query: { targetOrganizationId: o2.id } }), 404);
      assert.ok(await accountIn(o2.agentId));
      const ok = await call('DELETE', '/api/v2/deleteAccount', { token: r.token, query: { targetOrganizationId: o2.id }, body: { targetAccountId: o2.agentId } });
      assertStatus(ok, 200);
      assert.equal(await accountIn(o2.agentId), undefined);
    });

    it('listAccounts honours active and pagination', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const agents = [o.agentId];
      for (let i = 0; i < 4; i++) agents.push((await h().agent(o.id, { accountName: `A${i}` })).id);
      for (const id of [agents[1], agents[3]]) {
        assertStatus(await call('POST', '/api/v2/updateAccount', { token: r.token, query: { targetAccountId: id }, body: { active: false } }), 200);
      }
      const q = { targetOrganizationId: o.id };
      const all = await call('GET', '/api/v2/listAccounts', { token: o.token, query: q });
      assert.deepEqual(ids(all.body.accounts), agents);
      assert.equal(all.body.total, 5);
      assert.equal(all.body.pagination, undefined);
      const off = await call('GET', '/api/v2/listAccounts', { token: o.token, query: { ...q, active: false } });
      assert.deepEqual(ids(off.body.accounts), [agents[1], agents[3]]);
      assert.equal(off.body.total, 2);
      const on = await call('GET', '/api/v2/listAccounts', { token: o.token, query: { ...q, active: true } });
      assert.deepEqual(ids(on.body.accounts), [agents[0], agents[2], agents[4]]);
      const pages = [];
      for (const page of [0, 1, 2, 3]) {
        const res = await call('GET', '/api/v2/listAccounts', { token: o.token, query: { ...q, pagination: true, page, pageSize: 2 } });
        assertStatus(res, 200);
        assert.equal(res.body.total, 5);
        assert.deepEqual(res.body.pagination, { page, pageSize: 2, total: 5 });
        pages.push(ids(res.body.accounts));
      }
      assert.deepEqual(pages, [agents.slice(0, 2), agents.slice(2, 4), agents.slice(4), []]);
      const activePage = await call('GET', '/api/v2/listAccounts', { token: o.token, query: { ...q, pagination: true, page: 1, pageSize: 2, active: true } });
      assert.deepEqual(ids(activePage.body.accounts), [agents[4]]);
      assert.equal(activePage.body.total, 3);
      const defaultSize = await call('GET', '/api/v2/listAccounts', { token: o.token, query: { ...q, pagination: true } });
      assert.deepEqual(defaultSize.body.pagination, { page: 0, pageSize: 20, total: 5 });
    });

    it('rejects bad createAccount, listAccounts and deleteAccount input with a 400 naming the field', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const q = { targetOrganizationId: o.id };
      assertBad(await call('POST', '/api/v2/createAccount', { body: {} }), 'targetOrganizationId is required');
      assertBad(await call('POST', '/api/v2/createAccount', { query: { targetOrganizationId: 'org-1' }, body: {} }), 'targetOrganizationId must be an integer');
      assertBad(await call('POST', '/api/v2/createAccount', { query: q, body: { accountName: { x: 1 } } }), 'accountName must be a string');
      assertBad(await call('POST', '/api/v2/createAccount', { query: q, body: { externalAccountId: ['x', 'y'] } }), 'externalAccountId must be a string');
      assertBad(await call('POST', '/api/v2/createAccount', { query: q, body: { externalBillingId: { id: 1 } } }), 'externalBillingId must be a string');
      assertBad(await call('POST', '/api/v2/createAccount', { query: q, body: { accountName: 'x'.repeat(501) } }), 'accountName');
      assertBad(await call('POST', '/api/v2/createAccount', { query: q, payload: '[1,2', headers: { 'content-type': 'application/json' } }), 'not valid JSON');
      assertBad(await call('GET', '/api/v2/listAccounts', {}), 'targetOrganizationId is required');
      assertBad(await call('GET', '/api/v2/listAccounts', { query: { targetOrganizationId: '-3' } }), 'targetOrganizationId');
      assertBad(await call('GET', '/api/v2/listAccounts', { query: { ...q, active: 'no-idea' } }), 'active must be a boolean');
      assertBad(await call('GET', '/api/v2/listAccounts', { query: { ...q, pageSize: 'ten' } }), 'pageSize must be an integer');
      assertBad(await call('GET', '/api/v2/listAccounts', { query: { ...q, pageSize: 100000 } }), 'pageSize');
      assertBad(await call('DELETE', '/api/v2/deleteAccount', { query: q }), 'body');
      assertBad(await call('DELETE', '/api/v2/deleteAccount', { query: q, body: {} }), 'targetAccountId is required');
      assertBad(await call('DELETE', '/api/v2/deleteAccount', { query: q, body: { targetAccountId: 'agent-7' } }), 'targetAccountId must be an integer');
      assertBad(await call('DELETE', '/api/v2/deleteAccount', { body: { targetAccountId: o.agentId } }), 'targetOrganizationId is required');
      assert.ok(await accountIn(o.agentId));
    });
  });

  describe('GET and POST /api/v2/account', () => {
    it('every token reads its own account, and targetAccountId reads a descendant', async () => {
      const r = await h().reseller('Reader');
      const o = await h().organization(r.id, { orgName: 'Read Org' });
      const a = await h().agent(o.id, { accountName: 'Read Agent' });
      const own = await call('GET', '/api/v2/account', { token: o.token });
      assertStatus(own, 200);
      assert.equal(own.body.success, true);
      assert.equal(own.body.id, o.id);
      assert.equal(typeof own.body.username, 'string');
      assert.equal(own.body.accountType, 'organization');
      assert.equal(own.body.details.orgName, 'Read Org');
      assert.equal(own.body.details.defaultAccountId, o.agentId);

      const down = await call('GET', '/api/v2/account', { token: r.token, query: { targetAccountId: a.id } });
      assertStatus(down, 200);
      assert.equal(down.body.id, a.id);
      assert.equal(down.body.accountType, 'account');
      assert.equal(down.body.details.accountName, 'Read Agent');
      assert.equal(down.body.details.organizationId, o.id);

      const partner = await call('GET', '/api/v2/account', { query: { targetAccountId: r.id } });
      assert.equal(partner.body.details.resellerName, 'Reader');
      const me = await call('GET', '/api/v2/account', {});
      assert.equal(me.body.id, h().partnerId);
      assert.equal(me.body.accountType, 'partner');
    });

    it('targetAccountId above or beside the caller is 404', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const a = await h().agent(o.id);
      for (const [token, target] of [[a.token, o.id], [a.token, o.agentId], [o.token, r.id], [r.token, h().partnerId]] as const) {
        const res = await call('GET', '/api/v2/account', { token, query: { targetAccountId: target } });
        assertStatus(res, 404);
        const upd = await call('POST', '/api/v2/account', { token, query: { targetAccountId: target }, body: { firstName: 'Mallory' } });
        assertStatus(upd, 404);
      }
      const row = await accountIn(o.id);
      assert.equal(JSON.parse(row!.details).firstName, undefined);
    });

    it('updates profile details of the caller or of a descendant', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const a = await h().agent(o.id);
      const res = await call('POST', '/api/v2/account', {
        token: r.token, query: { targetAccountId: o.id },
        body: { orgName: 'Renamed Org', firstName: 'Ada', lastName: 'Lovelace', businessName: 'Engines Ltd', email: 'Ada@Engines.example' },
      });
      assertStatus(res, 200);
      assert.equal(res.body.success, true);
      assert.equal(res.body.account.id, o.id);
      assert.equal(res.body.account.name, 'Renamed Org');
      assert.equal(res.body.account.email, 'ada@engines.example');
      assert.equal(res.body.account.profile.firstName, 'Ada');
      const read = await call('GET', '/api/v2/account', { token: o.token });
      assert.equal(read.body.details.orgName, 'Renamed Org');
      assert.equal(read.body.details.profile.businessName, 'Engines Ltd');

      const self = await call('POST', '/api/v2/account', { token: a.token, body: { accountName: 'Self Named', description: 'hello' } });
      assertStatus(self, 200);
      assert.equal(self.body.account.accountName, 'Self Named');
      assert.equal((await accountIn(a.id))?.name, 'Self Named');
    });

    it('rejects bad account details with a 400 naming the field and changes nothing', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id, { orgName: 'Steady' });
      const upd = (body: unknown, query: Record<string, unknown> = {}) => call('POST', '/api/v2/account', { token: o.token, query, body });
      assertBad(await upd({}), /at least one field/);
      assertBad(await upd({ resellerName: 'Wrong level' }), 'resellerName');
      assertBad(await upd({ accountName: 'Wrong level' }), 'accountName');
      assertBad(await upd({ orgName: '   ' }), 'orgName must not be empty');
      assertBad(await upd({ email: 'nope' }), 'email must be a valid email address');
      assertBad(await upd({ firstName: { a: 1 } }), 'firstName must be a string');
      assertBad(await upd({ description: 'x'.repeat(5001) }), 'description');
      assertBad(await upd({ firstName: 'A' }, { targetAccountId: 'me' }), 'targetAccountId must be an integer');
      assertBad(await call('GET', '/api/v2/account', { token: o.token, query: { targetAccountId: 'me' } }), 'targetAccountId must be an integer');
      assertBad(await call('GET', '/api/v2/account', { token: o.token, query: { targetAccountId: '0' } }), 'targetAccountId');
      assertBad(await call('POST', '/api/v2/account', { token: o.token }), 'body');
      const row = await accountIn(o.id);
      assert.equal(row?.name, 'Steady');
      assert.equal(row?.details, '{}');
    });
  });

  describe('updateOrganization and updateAccount', () => {
    it('applies the valid settings and reports the invalid ones (partial success)', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id, { orgName: 'Before', email: 'keep@org.example' });
      const res = await call('POST', '/api/v2/updateOrganization', {
        token: r.token, query: { targetOrganizationId: o.id }, body: { orgName: 'After', email: 'not-an-email', vidaPremium: true },
      });
      assertStatus(res, 200);
      assert.equal(res.body.success, true);
      assert.equal(res.body.message, 'Organization settings updated');
      assert.deepEqual([...res.body.updatedSettings].sort(), ['orgName', 'vidaPremium']);
      assert.deepEqual(res.body.failedSettings, ['email']);
      const read = await call('GET', '/api/v2/account', { token: o.token });
      assert.equal(read.body.details.orgName, 'After');
      assert.equal(read.body.details.vidaPremium, true);
      assert.equal(read.body.details.email, 'keep@org.example');
    });

    it('answers 400 when nothing valid was given, with the failing field or "No settings updated"', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id, { orgName: 'Unmoved' });
      const onlyBad = await call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body: { email: 'nope' } });
      assertStatus(onlyBad, 400);
      assert.equal(onlyBad.body.message, "Invalid email provided. Doesn't look like a valid email address.");
      assert.deepEqual(onlyBad.body.failedSettings, ['email']);
      const empty = await call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body: {} });
      assertStatus(empty, 400);
      assert.equal(empty.body.message, 'No settings updated');
      const unknown = await call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body: { favouriteColour: 'teal' } });
      assertStatus(unknown, 400);
      assert.equal(unknown.body.message, 'No settings updated');
      const blankName = await call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body: { orgName: '  ' } });
      assertBad(blankName, 'orgName must not be empty');
      const tz = await call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body: { timezone: 'Mars/Olympus' } });
      assertBad(tz, 'timezone');
      const plan = await call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body: { productPlanId: '' } });
      assertBad(plan, 'productPlanId must not be empty');
      assert.deepEqual(plan.body.failedSettings, ['productPlanId']);
      assert.equal((await accountIn(o.id))?.product_plan_id, 'pplan-unmetered');
      assert.equal((await accountIn(o.id))?.name, 'Unmoved');
    });

    it('sets every documented organization setting', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const body = {
        active: false, productPlanId: 'pplan-business', offeredProductPlanId: 'pplan-enterprise', smsEnabled: true, smsBrandId: 'B1', smsCampaignId: 'C1',
        vidaPremium: true, externalAccountId: 'ext-all', externalBillingId: 'bill-all', hipaaSetting: 'on', orgAccountType: 'internal',
        timezone: 'Europe/Berlin', email: 'ops@all.example', orgName: 'Everything',
      };
      const res = await call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body });
      assertStatus(res, 200);
      assert.deepEqual([...res.body.updatedSettings].sort(), Object.keys(body).sort());
      assert.equal(res.body.failedSettings, undefined);
      const d = (await call('GET', '/api/v2/account', { token: r.token, query: { targetAccountId: o.id } })).body.details;
      assert.deepEqual(
        [d.active, d.productPlanId, d.offeredProductPlanId, d.smsEnabled, d.smsBrandId, d.smsCampaignId, d.vidaPremium, d.externalAccountId,
          d.externalBillingId, d.hipaaSetting, d.orgAccountType, d.timezone, d.email, d.orgName],
        [false, 'pplan-business', 'pplan-enterprise', true, 'B1', 'C1', true, 'ext-all', 'bill-all', 'on', 'internal', 'Europe/Berlin', 'ops@all.example', 'Everything'],
      );
    });

    it('null clears externalAccountId (and the other nullable settings)', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id, { externalAccountId: 'to-clear', externalBillingId: 'bill-x', offeredProductPlanId: 'pplan-starter' });
      const found = await call('GET', '/api/v2/getAccountByExternalId', { token: r.token, query: { externalAccountId: 'to-clear' } });
      assert.equal(found.body.account.id, o.id);
      const res = await call('POST', '/api/v2/updateOrganization', {
        token: r.token, query: { targetOrganizationId: o.id }, body: { externalAccountId: null, externalBillingId: null, offeredProductPlanId: null },
      });
      assertStatus(res, 200);
      assert.deepEqual([...res.body.updatedSettings].sort(), ['externalAccountId', 'externalBillingId', 'offeredProductPlanId']);
      const row = await accountIn(o.id);
      assert.equal(row?.external_account_id, null);
      assert.equal(row?.external_billing_id, null);
      assert.equal(row?.offered_product_plan_id, null);
      assertStatus(await call('GET', '/api/v2/getAccountByExternalId', { token: r.token, query: { externalAccountId: 'to-clear' } }), 404);
      // Once cleared, the id is free for another organization of the same reseller.
      const again = await call('POST', '/api/v2/createOrganization', { token: r.token, query: { targetResellerId: r.id }, body: { orgName: 'Reuse', externalAccountId: 'to-clear' } });
      assertStatus(again, 201);
    });

    it('a blank externalAccountId means none, so any number of organizations may send one', async () => {
      const r = await h().reseller();
      const a = await h().organization(r.id, { externalAccountId: '' });
      const b = await h().organization(r.id, { externalAccountId: '  ' });
      const c = await h().organization(r.id, { externalAccountId: 'set' });
      const d = await h().agent(c.id, { externalAccountId: '' });
      assertStatus(await call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: c.id }, body: { externalAccountId: '' } }), 200);
      assertStatus(await call('POST', '/api/v2/updateAccount', { token: r.token, query: { targetAccountId: c.agentId }, body: { externalAccountId: ' ' } }), 200);
      for (const id of [a.id, b.id, c.id, d.id, c.agentId]) assert.equal((await accountIn(id))?.external_account_id, null, `account ${id}`);
    });

    it('a duplicate externalAccountId within one reseller is 409; under two resellers it is allowed', async () => {
      const r1 = await h().reseller();
      const r2 = await h().reseller();
      const a = await h().organization(r1.id, { externalAccountId: 'cust-42' });
      const b = await h().organization(r1.id);
      const dupCreate = await call('POST', '/api/v2/createOrganization', { token: r1.token, query: { targetResellerId: r1.id }, body: { orgName: 'Dup', externalAccountId: 'cust-42' } });
      assertStatus(dupCreate, 409);
      assert.match(dupCreate.body.message, /cust-42/);
      const dupUpdate = await call('POST', '/api/v2/updateOrganization', { token: r1.token, query: { targetOrganizationId: b.id }, body: { externalAccountId: 'cust-42' } });
      assertStatus(dupUpdate, 409);
      assert.equal((await accountIn(b.id))?.external_account_id, null);
      const dupAgent = await call('POST', '/api/v2/createAccount', { token: r1.token, query: { targetOrganizationId: b.id }, body: { externalAccountId: 'cust-42' } });
      assertStatus(dupAgent, 409);
      const dupAgentUpdate = await call('POST', '/api/v2/updateAccount', { token: r1.token, query: { targetAccountId: b.agentId }, body: { externalAccountId: 'cust-42' } });
      assertStatus(dupAgentUpdate, 409);
      // Re-sending an organization's own externalAccountId is not a conflict.
      assertStatus(await call('POST', '/api/v2/updateOrganization', { token: r1.token, query: { targetOrganizationId: a.id }, body: { externalAccountId: 'cust-42' } }), 200);

      const other = await call('POST', '/api/v2/createOrganization', { token: r2.token, query: { targetResellerId: r2.id }, body: { orgName: 'Other Book', externalAccountId: 'cust-42' } });
      assertStatus(other, 201);
      const c = await h().organization(r2.id);
      assertStatus(await call('POST', '/api/v2/updateOrganization', { token: r2.token, query: { targetOrganizationId: c.id }, body: { externalAccountId: 'cust-43' } }), 200);
      const viaR2 = await call('GET', '/api/v2/getAccountByExternalId', { token: r2.token, query: { externalAccountId: 'cust-42' } });
      assert.equal(viaR2.body.account.id, other.body.organization.id);
      const viaR1 = await call('GET', '/api/v2/getAccountByExternalId', { token: r1.token, query: { externalAccountId: 'cust-42' } });
      assert.equal(viaR1.body.account.id, a.id);
    });

    it('organization and agent tokens cannot update organization or account settings (403)', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id, { orgName: 'Locked' });
      const a = await h().agent(o.id, { accountName: 'Locked Agent' });
      for (const token of [o.token, a.token]) {
        assertStatus(await call('POST', '/api/v2/updateOrganization', { token, query: { targetOrganizationId: o.id }, body: { orgName: 'Hijack' } }), 403);
        assertStatus(await call('POST', '/api/v2/updateAccount', { token, query: { targetAccountId: a.id }, body: { accountName: 'Hijack' } }), 403);
      }
      assert.equal((await accountIn(o.id))?.name, 'Locked');
      assert.equal((await accountIn(a.id))?.name, 'Locked Agent');
    });

    it('updateAccount changes an agent and reports partial failures', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const a = await h().agent(o.id, { accountName: 'Old', externalAccountId: 'agent-ext' });
      const res = await call('POST', '/api/v2/updateAccount', {
        token: r.token, query: { targetAccountId: a.id }, body: { accountName: 'New', active: false, externalAccountId: null, externalBillingId: 'b-9' },
      });
      assertStatus(res, 200);
      assert.equal(res.body.message, 'Account settings updated');
      assert.deepEqual([...res.body.updatedSettings].sort(), ['accountName', 'active', 'externalAccountId', 'externalBillingId']);
      const row = await accountIn(a.id);
      assert.deepEqual([row?.name, row?.active, row?.external_account_id, row?.external_billing_id], ['New', 0, null, 'b-9']);

      const partial = await call('POST', '/api/v2/updateAccount', { token: r.token, query: { targetAccountId: a.id }, body: { accountName: ' ', active: true } });
      assertStatus(partial, 200);
      assert.deepEqual(partial.body.updatedSettings, ['active']);
      assert.deepEqual(partial.body.failedSettings, ['accountName']);
      assertBad(await call('POST', '/api/v2/updateAccount', { token: r.token, query: { targetAccountId: a.id }, body: { accountName: '' } }), 'accountName');
      const empty = await call('POST', '/api/v2/updateAccount', { token: r.token, query: { targetAccountId: a.id }, body: {} });
      assertStatus(empty, 400);
      assert.equal(empty.body.message, 'No settings updated');
      assertStatus(await call('POST', '/api/v2/updateAccount', { token: r.token, query: { targetAccountId: o.id }, body: { active: false } }), 404);
      assert.equal((await accountIn(o.id))?.active, 1);
    });

    it('rejects bad updateOrganization and updateAccount input with a 400 naming the field', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const q = { targetOrganizationId: o.id };
      const org = (body: unknown, query: Record<string, unknown> = q) => call('POST', '/api/v2/updateOrganization', { token: r.token, query, body });
      assertBad(await org({ active: 'yes' }), 'active must be a boolean');
      assertBad(await org({ vidaPremium: 'sure' }), 'vidaPremium must be a boolean');
      assertBad(await org({ hipaaSetting: 'sometimes' }), 'hipaaSetting must be one of: on, off, inherit');
      assertBad(await org({ orgAccountType: 'vip' }), 'orgAccountType must be one of: internal, customer');
      assertBad(await org({ externalAccountId: { id: 1 } }), 'externalAccountId');
      assertBad(await org({ orgName: 'x'.repeat(501) }), 'orgName');
      assertBad(await org({ orgName: 'X' }, {}), 'targetOrganizationId is required');
      assertBad(await org({ orgName: 'X' }, { targetOrganizationId: 'acme' }), 'targetOrganizationId must be an integer');
      assertBad(await call('POST', '/api/v2/updateOrganization', { token: r.token, query: q }), 'body');
      assertStatus(await org({ orgName: 'X' }, { targetOrganizationId: o.agentId }), 404);
      const acct = (body: unknown, query: Record<string, unknown> = { targetAccountId: o.agentId }) => call('POST', '/api/v2/updateAccount', { token: r.token, query, body });
      assertBad(await acct({ active: 'off' }), 'active must be a boolean');
      assertBad(await acct({ accountName: { text: 'a' } }), 'accountName must be a string');
      assertBad(await acct({ externalBillingId: 7.5 }, {}), 'targetAccountId is required');
      assertBad(await acct({ active: true }, { targetAccountId: 'x1' }), 'targetAccountId must be an integer');
      assertBad(await call('POST', '/api/v2/updateAccount', { token: r.token, query: { targetAccountId: o.agentId } }), 'body');
    });
  });

  describe('listOrganizations: active and pagination', () => {
    it('honours active (set through updateOrganization) and pages 0-based', async () => {
      const r = await h().reseller();
      const orgs: number[] = [];
      for (let i = 0; i < 5; i++) orgs.push((await h().organization(r.id)).id);
      for (const id of [orgs[0], orgs[3]]) {
        assertStatus(await call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: id }, body: { active: false } }), 200);
      }
      const q = { targetResellerId: r.id };
      const all = await call('GET', '/api/v2/listOrganizations', { token: r.token, query: q });
      assertStatus(all, 200);
      assert.equal(all.body.success, true);
      assert.deepEqual(ids(all.body.organizations), orgs);
      assert.equal(all.body.total, 5);
      const off = await call('GET', '/api/v2/listOrganizations', { token: r.token, query: { ...q, active: 'false' } });
      assert.deepEqual(ids(off.body.organizations), [orgs[0], orgs[3]]);
      assert.ok(off.body.organizations.every((o: any) => o.active === false));
      assert.equal(off.body.total, 2);
      const on = await call('GET', '/api/v2/listOrganizations', { token: r.token, query: { ...q, active: true } });
      assert.deepEqual(ids(on.body.organizations), [orgs[1], orgs[2], orgs[4]]);
      assert.equal(on.body.total, 3);

      const seen: number[] = [];
      for (const page of [0, 1, 2]) {
        const res = await call('GET', '/api/v2/listOrganizations', { token: r.token, query: { ...q, pagination: true, page, pageSize: 2 } });
        assert.equal(res.body.total, 5);
        assert.deepEqual(res.body.pagination, { page, pageSize: 2, total: 5 });
        assert.equal(res.body.organizations.length, page < 2 ? 2 : 1);
        seen.push(...ids(res.body.organizations));
      }
      assert.deepEqual(seen, orgs);
      const beyond = await call('GET', '/api/v2/listOrganizations', { token: r.token, query: { ...q, pagination: true, page: 9, pageSize: 2 } });
      assert.deepEqual(beyond.body.organizations, []);
      assert.equal(beyond.body.total, 5);
      const activePaged = await call('GET', '/api/v2/listOrganizations', { token: r.token, query: { ...q, pagination: true, page: 0, pageSize: 2, active: false } });
      assert.deepEqual(ids(activePaged.body.organizations), [orgs[0], orgs[3]]);
      const unpaged = await call('GET', '/api/v2/listOrganizations', { token: r.token, query: { ...q, pagination: false } });
      assert.equal(unpaged.body.organizations.length, 5);
    });

    it('organization and agent tokens cannot list organizations (403)', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const a = await h().agent(o.id);
      for (const token of [o.token, a.token]) {
        assertStatus(await call('GET', '/api/v2/listOrganizations', { token, query: { targetResellerId: r.id } }), 403);
      }
    });

    it('rejects bad listOrganizations input with a 400 naming the field', async () => {
      const r = await h().reseller();
      assertBad(await call('GET', '/api/v2/listOrganizations', { token: r.token }), 'targetResellerId is required');
      assertBad(await call('GET', '/api/v2/listOrganizations', { token: r.token, query: { targetResellerId: 'r-1' } }), 'targetResellerId must be an integer');
      assertBad(await call('GET', '/api/v2/listOrganizations', { token: r.token, query: { targetResellerId: r.id, page: 'first' } }), 'page must be an integer');
      assertBad(await call('GET', '/api/v2/listOrganizations', { token: r.token, query: { targetResellerId: r.id, active: 'perhaps' } }), 'active must be a boolean');
    });
  });

  describe('deleteOrganization', () => {
    it('removes the organization with its agents, tokens, members, numbering providers and integrations in one go', async () => {
      const r = await h().reseller();
      const created = await call('POST', '/api/v2/createOrganization', {
        token: r.token, query: { targetResellerId: r.id },
        body: {
          orgName: 'Doomed', email: 'owner@doomed.example',
          numberingProviders: [{ providerId: 'simulated', config: {} }],
          integrations: [{ appId: 'crm', appVersion: 'v1', appData: { apiToken: SECRET } }],
        },
      });
      assertStatus(created, 201);
      const orgId = created.body.organization.id as number;
      const defaultAgent = created.body.organization.defaultAccountId as number;
      const orgToken = await h().tokenFor(orgId);
      const agent = await h().agent(orgId, { integrations: [{ appId: 'helpdesk', appVersion: '2', appData: { apiKey: SECRET } }] });
      const invited = await call('POST', '/api/v2/member', { token: orgToken, body: { email: 'second@doomed.example' } });
      assert.ok(invited.status < 300, JSON.stringify(invited.body));
      const keep = await h().organization(r.id, { integrations: [{ appId: 'crm', appVersion: 'v1', appData: { apiToken: SECRET } }] });
      const keepAgent = await h().agent(keep.id);

      const db = h().database.db;
      const gone = [orgId, defaultAgent, agent.id];
      const count = async (table: 'accounts' | 'tokens' | 'users' | 'numbering_providers' | 'integrations', col: 'id' | 'account_id' | 'org_id', list: number[]) =>
        Number((await db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).where(col as any, 'in', list).executeTakeFirstOrThrow()).n);
      assert.equal(await count('accounts', 'id', gone), 3);
      assert.ok(await count('tokens', 'account_id', gone) >= 2);
      assert.equal(await count('users', 'account_id', [orgId]), 2);
      assert.equal(await count('numbering_providers', 'org_id', [orgId]), 1);
      assert.equal(await count('integrations', 'account_id', gone), 2);

      const res = await call('DELETE', '/api/v2/deleteOrganization', { token: r.token, query: { targetResellerId: r.id }, body: { targetOrganizationId: orgId } });
      assertStatus(res, 200);
      assert.equal(res.body.success, true);
      assert.equal(res.body.message, 'Organization deleted');

      assertStatus(await call('GET', '/api/v2/account', { token: orgToken }), 401);
      assertStatus(await call('GET', '/api/v2/account', { token: agent.token }), 401);
      assert.equal(await count('accounts', 'id', gone), 0);
      assert.equal(await count('accounts', 'org_id', [orgId]), 0);
      assert.equal(await count('tokens', 'account_id', gone), 0);
      assert.equal(await count('users', 'account_id', gone), 0);
      assert.equal(await count('numbering_providers', 'org_id', [orgId]), 0);
      assert.equal(await count('integrations', 'account_id', gone), 0);
      assert.equal(await count('integrations', 'org_id', [orgId]), 0);

      // The sibling organization and the reseller are untouched.
      assertStatus(await call('GET', '/api/v2/account', { token: keep.token }), 200);
      assertStatus(await call('GET', '/api/v2/account', { token: keepAgent.token }), 200);
      assertStatus(await call('GET', '/api/v2/account', { token: r.token }), 200);
      assert.equal(await count('integrations', 'account_id', [keep.id]), 1);
      const list = await call('GET', '/api/v2/listOrganizations', { token: r.token, query: { targetResellerId: r.id } });
      assert.deepEqual(ids(list.body.organizations), [keep.id]);

      const again = await call('DELETE', '/api/v2/deleteOrganization', { token: r.token, query: { targetResellerId: r.id }, body: { targetOrganizationId: orgId } });
      assertStatus(again, 404);
    });

    it('organization and agent tokens cannot delete organizations (403)', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const a = await h().agent(o.id);
      for (const token of [o.token, a.token]) {
        assertStatus(await call('DELETE', '/api/v2/deleteOrganization', { token, query: { targetResellerId: r.id }, body: { targetOrganizationId: o.id } }), 403);
      }
      assert.ok(await accountIn(o.id));
    });

    it('deletes only an organization of the named reseller', async () => {
      const r1 = await h().reseller();
      const r2 = await h().reseller();
      const o2 = await h().organization(r2.id);
      // The partner owns both resellers, but the organization must belong to the one named.
      assertStatus(await call('DELETE', '/api/v2/deleteOrganization', { query: { targetResellerId: r1.id }, body: { targetOrganizationId: o2.id } }), 404);
      // An agent id is not an organization.
      assertStatus(await call('DELETE', '/api/v2/deleteOrganization', { query: { targetResellerId: r2.id }, body: { targetOrganizationId: o2.agentId } }), 404);
      assert.ok(await accountIn(o2.id));
      assert.ok(await accountIn(o2.agentId));
    });

    it('rejects bad deleteOrganization input with a 400 naming the field', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      assertBad(await call('DELETE', '/api/v2/deleteOrganization', { token: r.token, query: { targetResellerId: r.id } }), 'body');
      assertBad(await call('DELETE', '/api/v2/deleteOrganization', { token: r.token, query: { targetResellerId: r.id }, body: {} }), 'targetOrganizationId is required');
      assertBad(await call('DELETE', '/api/v2/deleteOrganization', { token: r.token, query: { targetResellerId: r.id }, body: { targetOrganizationId: 'XXXXXXX' } }), 'targetOrganizationId must be an integer');
      assertBad(await call('DELETE', '/api/v2/deleteOrganization', { token: r.token, body: { targetOrganizationId: o.id } }), 'targetResellerId is required');
      assertBad(await call('DELETE', '/api/v2/deleteOrganization', { token: r.token, query: { targetResellerId: 'me' }, body: { targetOrganizationId: o.id } }), 'targetResellerId must be an integer');
      assert.ok(await accountIn(o.id));
    });
  });

  describe('cross-tenant refusal', () => {
    it("reseller A can neither read, list, change nor delete anything of reseller B, and B's data is unchanged", async () => {
      const A = await h().reseller('Tenant A');
      const B = await h().reseller('Tenant B');
      const aOrg = await h().organization(A.id, { externalAccountId: 'a-ext' });
      const bOrg = await h().organization(B.id, { orgName: 'B Secret Org', externalAccountId: 'b-ext' });
      const bAgent = await h().agent(bOrg.id, { accountName: 'B Secret Agent', externalAccountId: 'b-agent-ext' });
      const snapshot = async () => ({
        orgs: (await call('GET', '/api/v2/listOrganizations', { token: B.token, query: { targetResellerId: B.id } })).body,
        agents: (await call('GET', '/api/v2/listAccounts', { token: B.token, query: { targetOrganizationId: bOrg.id } })).body,
        org: (await call('GET', '/api/v2/account', { token: B.token, query: { targetAccountId: bOrg.id } })).body,
        agent: (await call('GET', '/api/v2/account', { token: B.token, query: { targetAccountId: bAgent.id } })).body,
        reseller: (await call('GET', '/api/v2/account', { token: B.token })).body,
      });
      const before = await snapshot();
      const MISSING = 987654;
      const t = A.token;
      // Each attempt against B, beside the same attempt against an id that does not exist.
      const attempts: [string, (id: number) => Promise<Reply>][] = [
        ['read B', (id) => call('GET', '/api/v2/account', { token: t, query: { targetAccountId: id } })],
        ['update details of B', (id) => call('POST', '/api/v2/account', { token: t, query: { targetAccountId: id }, body: { firstName: 'Eve' } })],
        ['list B organizations', (id) => call('GET', '/api/v2/listOrganizations', { token: t, query: { targetResellerId: id } })],
        ['create in B', (id) => call('POST', '/api/v2/createOrganization', { token: t, query: { targetResellerId: id }, body: { orgName: 'Planted' } })],
        ['list B agents', (id) => call('GET', '/api/v2/listAccounts', { token: t, query: { targetOrganizationId: id } })],
        ['create agent in B', (id) => call('POST', '/api/v2/createAccount', { token: t, query: { targetOrganizationId: id }, body: {} })],
        ['update B org', (id) => call('POST', '/api/v2/updateOrganization', { token: t, query: { targetOrganizationId: id }, body: { orgName: 'Owned', active: false } })],
        ['update B agent', (id) => call('POST', '/api/v2/updateAccount', { token: t, query: { targetAccountId: id }, body: { accountName: 'Owned', active: false } })],
        ['delete B org under B', (id) => call('DELETE', '/api/v2/deleteOrganization', { token: t, query: { targetResellerId: id }, body: { targetOrganizationId: bOrg.id } })],
        ['delete B org under A', (id) => call('DELETE', '/api/v2/deleteOrganization', { token: t, query: { targetResellerId: A.id }, body: { targetOrganizationId: id } })],
        ['delete B agent', (id) => call('DELETE', '/api/v2/deleteAccount', { token: t, query: { targetOrganizationId: id }, body: { targetAccountId: bAgent.id } })],
        ['delete B agent via A org', (id) => call('DELETE', '/api/v2/deleteAccount', { token: t, query: { targetOrganizationId: aOrg.id }, body: { targetAccountId: id } })],
      ];
      const targets: Record<string, number> = {
        'read B': bOrg.id, 'update details of B': bAgent.id, 'list B organizations': B.id, 'create in B': B.id,
        'list B agents': bOrg.id, 'create agent in B': bOrg.id, 'update B org': bOrg.id, 'update B agent': bAgent.id,
        'delete B org under B': B.id, 'delete B org under A': bOrg.id, 'delete B agent': bOrg.id, 'delete B agent via A org': bAgent.id,
      };
      for (const [label, attempt] of attempts) {
        const foreign = await attempt(targets[label]);
        const missing = await attempt(MISSING);
        assertStatus(foreign, 404, label);
        assertStatus(missing, 404, `${label} (missing id)`);
        assert.equal(shape(foreign.body.message), shape(missing.body.message), `${label}: a foreign id must look like a missing one`);
        assert.ok(!/B Secret/.test(JSON.stringify(foreign.body)), label);
      }

      const byExt = await call('GET', '/api/v2/getAccountByExternalId', { token: t, query: { externalAccountId: 'b-ext' } });
      const byMissingExt = await call('GET', '/api/v2/getAccountByExternalId', { token: t, query: { externalAccountId: 'zz-ext' } });
      assertStatus(byExt, 404);
      assertStatus(byMissingExt, 404);
      assert.equal(byExt.body.message.replace('b-ext', 'X'), byMissingExt.body.message.replace('zz-ext', 'X'));
      assertStatus(await call('GET', '/api/v2/getAccountByExternalId', { token: t, query: { externalAccountId: 'b-agent-ext' } }), 404);

      for (const accountType of ['organization', 'account', 'reseller']) {
        const found = await call('GET', '/api/v2/searchAccounts', { token: t, query: { accountType, queryText: 'B', pagination: false } });
        assertStatus(found, 200);
        assert.ok(!ids(found.body.accounts).some((id) => [B.id, bOrg.id, bAgent.id, bOrg.agentId].includes(id)), accountType);
        const ext = await call('GET', '/api/v2/searchAccounts', { token: t, query: { accountType, externalAccountId: 'b-ext' } });
        assert.equal(ext.body.totalAccounts, 0);
      }

      assert.deepEqual(await snapshot(), before);
      assertStatus(await call('GET', '/api/v2/account', { token: bAgent.token }), 200);
    });

    it("an organization token cannot reach a sibling organization's accounts", async () => {
      const r = await h().reseller();
      const o1 = await h().organization(r.id);
      const o2 = await h().organization(r.id, { orgName: 'Sibling' });
      assertStatus(await call('GET', '/api/v2/account', { token: o1.token, query: { targetAccountId: o2.id } }), 404);
      assertStatus(await call('GET', '/api/v2/account', { token: o1.token, query: { targetAccountId: o2.agentId } }), 404);
      const search = await call('GET', '/api/v2/searchAccounts', { token: o1.token, query: { accountType: 'account' } });
      assert.deepEqual(ids(search.body.accounts), [o1.agentId]);
      const orgs = await call('GET', '/api/v2/searchAccounts', { token: o1.token, query: { accountType: 'organization' } });
      assert.deepEqual(ids(orgs.body.accounts), [o1.id]);
    });
  });

  describe('searchAccounts', () => {
    it('filters by accountType, queryText, active, externalAccountId, productPlanId, created time and usage within the subtree', async () => {
      const r = await h().reseller('Searcher');
      const db = h().database.db;
      const alpha = await h().organization(r.id, { orgName: 'Alpha Dental', email: 'front@alpha.example', externalAccountId: 'crm-1', productPlanId: 'pplan-business' });
      const beta = await h().organization(r.id, { orgName: 'Beta Plumbing', externalAccountId: 'crm-2' });
      const gamma = await h().organization(r.id, { orgName: 'Gamma_Dental 100%' });
      const agent = await h().agent(alpha.id, { accountName: 'Alpha Night Desk' });
      assertStatus(await call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: beta.id }, body: { active: false } }), 200);
      // Creation times and usage counters have no write API; set them directly for a deterministic range.
      await db.updateTable('accounts').set({ created_at: 1_700_000_000_500, voice_minutes_current: 5, messages_all_time: 40 }).where('id', '=', alpha.id).execute();
      await db.updateTable('accounts').set({ created_at: 1_705_000_000_000, voice_minutes_current: 50, messages_all_time: 400 }).where('id', '=', beta.id).execute();
      await db.updateTable('accounts').set({ created_at: 1_710_000_000_999, voice_minutes_current: 12.5, messages_all_time: 0 }).where('id', '=', gamma.id).execute();
      // Another reseller's look-alike must never appear.
      const other = await h().reseller();
      await h().organization(other.id, { orgName: 'Alpha Dental Clone', externalAccountId: 'crm-1', productPlanId: 'pplan-business' });

      const search = async (query: Record<string, unknown>) => {
        const res = await call('GET', '/api/v2/searchAccounts', { token: r.token, query: { accountType: 'organization', ...query } });
        assertStatus(res, 200, JSON.stringify(query));
        return res;
      };
      const found = async (query: Record<string, unknown>) => ids((await search(query)).body.accounts);

      const all = await search({});
      assert.deepEqual(ids(all.body.accounts), [alpha.id, beta.id, gamma.id]);
      assert.equal(all.body.success, true);
      assert.equal(all.body.totalAccounts, 3);
      assert.equal(all.body.pageNumber, 0);
      assert.equal(typeof all.body.pageSize, 'number');
      assert.ok(all.body.accounts.every((a: any) => a.accountType === 'organization' && a.resellerId === r.id));

      assert.deepEqual(await found({ queryText: 'dental' }), [alpha.id, gamma.id]);
      assert.deepEqual(await found({ queryText: 'DENTAL' }), [alpha.id, gamma.id]);
      assert.deepEqual(await found({ queryText: 'alpha.example' }), [alpha.id]);
      assert.deepEqual(await found({ queryText: 'crm-2' }), [beta.id]);
      assert.deepEqual(await found({ queryText: '_' }), [gamma.id], 'an underscore is matched literally');
      assert.deepEqual(await found({ queryText: '100%' }), [gamma.id], 'a percent sign is matched literally');
      assert.deepEqual(await found({ queryText: 'a_d' }), [gamma.id], 'an underscore is not a wildcard');
      assert.deepEqual(await found({ queryText: 'nothing like this' }), []);
      assert.deepEqual(await found({ active: false }), [beta.id]);
      assert.deepEqual(await found({ active: true }), [alpha.id, gamma.id]);
      assert.deepEqual(await found({ externalAccountId: 'crm-1' }), [alpha.id]);
      assert.deepEqual(await found({ productPlanId: 'pplan-business' }), [alpha.id]);
      assert.deepEqual(await found({ productPlanId: 'pplan-unmetered' }), [beta.id, gamma.id]);

      assert.deepEqual(await found({ createdStart: 1_705_000_000 }), [beta.id, gamma.id]);
      assert.deepEqual(await found({ createdEnd: 1_705_000_000 }), [alpha.id, beta.id]);
      // Bounds are inclusive at the second the answers show as createdAt.
      assert.equal(all.body.accounts[0].createdAt, 1_700_000_000);
      assert.deepEqual(await found({ createdStart: 1_700_000_000, createdEnd: 1_700_000_000 }), [alpha.id]);
      assert.deepEqual(await found({ createdStart: 1_710_000_000, createdEnd: 1_710_000_000 }), [gamma.id]);
      assert.deepEqual(await found({ createdStart: 1_700_000_001, createdEnd: 1_709_999_999 }), [beta.id]);

      assert.deepEqual(await found({ currentBillingPeriodVoiceMinutesMin: 10 }), [beta.id, gamma.id]);
      assert.deepEqual(await found({ currentBillingPeriodVoiceMinutesMax: 12.5 }), [alpha.id, gamma.id]);
      assert.deepEqual(await found({ currentBillingPeriodVoiceMinutesMin: 5, currentBillingPeriodVoiceMinutesMax: 5 }), [alpha.id]);
      assert.deepEqual(await found({ allTimeMessagesMin: 1, allTimeMessagesMax: 100 }), [alpha.id]);
      assert.deepEqual(await found({ queryText: 'dental', active: true, currentBillingPeriodVoiceMinutesMin: 10 }), [gamma.id]);

      const agents = await call('GET', '/api/v2/searchAccounts', { token: r.token, query: { accountType: 'account' } });
      assert.deepEqual(ids(agents.body.accounts), [alpha.agentId, beta.agentId, gamma.agentId, agent.id]);
      assert.ok(agents.body.accounts.every((a: any) => a.accountType === 'account'));
      const agentText = await call('GET', '/api/v2/searchAccounts', { token: r.token, query: { accountType: 'account', queryText: 'night desk' } });
      assert.deepEqual(ids(agentText.body.accounts), [agent.id]);
      const self = await call('GET', '/api/v2/searchAccounts', { token: r.token, query: { accountType: 'reseller' } });
      assert.deepEqual(ids(self.body.accounts), [r.id]);
      const none = await call('GET', '/api/v2/searchAccounts', { token: r.token, query: { accountType: 'partner' } });
      assert.deepEqual(none.body.accounts, []);
      assert.equal(none.body.totalAccounts, 0);
      const byAgent = await call('GET', '/api/v2/searchAccounts', { token: agent.token, query: { accountType: 'account' } });
      assert.deepEqual(ids(byAgent.body.accounts), [agent.id]);
    });

    it('pages with pagination, page and pageSize and reports totalAccounts, pageSize and pageNumber', async () => {
      const r = await h().reseller();
      const orgs: number[] = [];
      for (let i = 0; i < 5; i++) orgs.push((await h().organization(r.id, { orgName: `Paged ${i}` })).id);
      const page = async (query: Record<string, unknown>) =>
        (await call('GET', '/api/v2/searchAccounts', { token: r.token, query: { accountType: 'organization', ...query } })).body;
      const p1 = await page({ pagination: true, page: 1, pageSize: 2 });
      assert.deepEqual(
        { totalAccounts: p1.totalAccounts, pageSize: p1.pageSize, pageNumber: p1.pageNumber, ids: ids(p1.accounts) },
        { totalAccounts: 5, pageSize: 2, pageNumber: 1, ids: orgs.slice(2, 4) },
      );
      const p2 = await page({ pagination: true, page: 2, pageSize: 2 });
      assert.deepEqual(ids(p2.accounts), orgs.slice(4));
      const first = await page({ pagination: true });
      assert.deepEqual([first.pageNumber, first.pageSize, first.accounts.length], [0, 20, 5]);
      const unpaged = await page({ pagination: false });
      assert.deepEqual([unpaged.totalAccounts, unpaged.accounts.length], [5, 5]);
      const filtered = await page({ pagination: true, pageSize: 1, queryText: 'paged 3' });
      assert.deepEqual([filtered.totalAccounts, ids(filtered.accounts)], [1, [orgs[3]]]);
    });

    it('requires and validates accountType and rejects bad filters with a 400 naming the field', async () => {
      const r = await h().reseller();
      const s = (query: Record<string, unknown>) => call('GET', '/api/v2/searchAccounts', { token: r.token, query });
      assertBad(await s({}), 'accountType is required');
      assertBad(await s({ accountType: '' }), 'accountType');
      assertBad(await s({ accountType: 'planet' }), 'accountType must be one of');
      assertStatus(await s({ accountType: 'Organization' }), 200);
      assertBad(await s({ accountType: 'organization', createdStart: 'yesterday' }), 'createdStart must be a number');
      assertBad(await s({ accountType: 'organization', createdEnd: '' }), 'createdEnd');
      assertBad(await s({ accountType: 'organization', active: 'maybe' }), 'active must be a boolean');
      assertBad(await s({ accountType: 'organization', subscribed: 'maybe' }), 'subscribed must be a boolean');
      assertBad(await s({ accountType: 'organization', page: -1 }), 'page');
      assertBad(await s({ accountType: 'organization', pageSize: 0 }), 'pageSize');
      assertBad(await s({ accountType: 'organization', allTimeMessagesMin: 'lots' }), 'allTimeMessagesMin must be a number');
      assertBad(await s({ accountType: 'organization', queryText: 'q'.repeat(201) }), 'queryText');
    });
  });

  describe('getAccountByExternalId', () => {
    it('finds an organization or an agent of the caller by externalAccountId', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id, { externalAccountId: 'acct_123abc' });
      const a = await h().agent(o.id, { externalAccountId: 'agent_456' });
      const org = await call('GET', '/api/v2/getAccountByExternalId', { token: r.token, query: { externalAccountId: 'acct_123abc' } });
      assertStatus(org, 200);
      assert.equal(org.body.success, true);
      assert.equal(org.body.message, 'Success');
      assert.equal(org.body.account.id, o.id);
      assert.equal(org.body.account.organizationId, o.id);
      assert.equal(typeof org.body.account.username, 'string');
      const agent = await call('GET', '/api/v2/getAccountByExternalId', { token: r.token, query: { externalAccountId: 'agent_456' } });
      assert.equal(agent.body.account.id, a.id);
      assert.equal(agent.body.account.organizationId, o.id);
      const byPartner = await call('GET', '/api/v2/getAccountByExternalId', { query: { externalAccountId: 'agent_456' } });
      assert.equal(byPartner.body.account.id, a.id);
    });

    it('organization and agent tokens cannot use it (403) and bad input is a 400', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id, { externalAccountId: 'own-ext' });
      const a = await h().agent(o.id);
      for (const token of [o.token, a.token]) {
        assertStatus(await call('GET', '/api/v2/getAccountByExternalId', { token, query: { externalAccountId: 'own-ext' } }), 403);
      }
      assertBad(await call('GET', '/api/v2/getAccountByExternalId', { token: r.token }), 'externalAccountId is required');
      assertBad(await call('GET', '/api/v2/getAccountByExternalId', { token: r.token, query: { externalAccountId: '  ' } }), 'externalAccountId must not be empty');
      assertBad(await call('GET', '/api/v2/getAccountByExternalId', { token: r.token, query: { externalAccountId: 'x'.repeat(501) } }), 'externalAccountId');
      const missing = await call('GET', '/api/v2/getAccountByExternalId', { token: r.token, query: { externalAccountId: 'nobody' } });
      assertStatus(missing, 404);
      assert.match(missing.body.message, /nobody/);
    });
  });

  describe('no input produces a 5xx', () => {
    it('answers every odd id, number and string with a 4xx', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const odd = ['99999999999', '1e20', '9007199254740993', '-0', '0x10', ' 7', '1,2', 'NaN', 'Infinity', '%00', '\u0000', '١٢'];
      const results: [string, number][] = [];
      for (const v of odd) {
        const tries: [string, Promise<Reply>][] = [
          ['getAccount', call('GET', '/api/v2/account', { query: { targetAccountId: v } })],
          ['updateDetails', call('POST', '/api/v2/account', { query: { targetAccountId: v }, body: { firstName: 'x' } })],
          ['listResellers', call('GET', '/api/v2/listResellers', { query: { targetPartnerId: v } })],
          ['createReseller', call('POST', '/api/v2/createReseller', { query: { targetPartnerId: v }, body: { resellerName: 'x' } })],
          ['listOrganizations', call('GET', '/api/v2/listOrganizations', { query: { targetResellerId: v } })],
          ['createOrganization', call('POST', '/api/v2/createOrganization', { query: { targetResellerId: v }, body: { orgName: 'x' } })],
          ['deleteOrganization', call('DELETE', '/api/v2/deleteOrganization', { query: { targetResellerId: r.id }, body: { targetOrganizationId: v } })],
          ['listAccounts', call('GET', '/api/v2/listAccounts', { query: { targetOrganizationId: v } })],
          ['listAccounts page', call('GET', '/api/v2/listAccounts', { query: { targetOrganizationId: o.id, page: v, pageSize: 5 } })],
          ['createAccount', call('POST', '/api/v2/createAccount', { query: { targetOrganizationId: v }, body: {} })],
          ['deleteAccount', call('DELETE', '/api/v2/deleteAccount', { query: { targetOrganizationId: o.id }, body: { targetAccountId: v } })],
          ['updateOrganization', call('POST', '/api/v2/updateOrganization', { query: { targetOrganizationId: v }, body: { active: true } })],
          ['updateAccount', call('POST', '/api/v2/updateAccount', { query: { targetAccountId: v }, body: { active: true } })],
          ['search created', call('GET', '/api/v2/searchAccounts', { query: { accountType: 'organization', createdStart: v, createdEnd: v } })],
          ['search canceled', call('GET', '/api/v2/searchAccounts', { query: { accountType: 'organization', canceledStart: v, canceledEnd: v } })],
          ['search usage', call('GET', '/api/v2/searchAccounts', { query: { accountType: 'organization', allTimeVoiceMinutesMin: v, allTimeVoiceMinutesMax: v } })],
          ['search page', call('GET', '/api/v2/searchAccounts', { query: { accountType: 'organization', page: v, pageSize: 1000 } })],
          ['byExternalId', call('GET', '/api/v2/getAccountByExternalId', { query: { externalAccountId: v } })],
        ];
        for (const [label, p] of tries) {
          const res = await p;
          results.push([`${label} ${JSON.stringify(v)}`, res.status]);
          assert.ok(res.status < 500, `${label} with ${JSON.stringify(v)} gave ${res.status} ${JSON.stringify(res.body)}`);
          if (res.status >= 400) assert.equal(res.body.success, false);
        }
      }
      assert.ok(results.length > 100);
      assert.ok(await accountIn(o.id), 'nothing odd deleted the organization');
    });

    it('answers fractional and huge search bounds without a 5xx', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      for (const v of [1.0000001, 1e17, 1e300, -1e300, 1700000000.25]) {
        const res = await call('GET', '/api/v2/searchAccounts', { token: r.token, query: { accountType: 'organization', createdStart: v, canceledEnd: v, currentBillingPeriodMessagesMin: v } });
        assert.ok(res.status < 500, `${v}: ${res.status} ${JSON.stringify(res.body)}`);
      }
      const hit = await call('GET', '/api/v2/searchAccounts', { token: r.token, query: { accountType: 'organization', createdStart: 0.5, createdEnd: 4e12 } });
      assert.deepEqual(ids(hit.body.accounts), [o.id]);
    });

    it('rejects an unauthenticated call to every Accounts route with 401', async () => {
      const routes: [string, string][] = [
        ['POST', '/api/v2/createReseller'], ['GET', '/api/v2/listResellers'], ['POST', '/api/v2/createOrganization'],
        ['DELETE', '/api/v2/deleteOrganization'], ['GET', '/api/v2/listOrganizations'], ['GET', '/api/v2/account'],
        ['POST', '/api/v2/account'], ['GET', '/api/v2/listAccounts'], ['POST', '/api/v2/createAccount'],
        ['DELETE', '/api/v2/deleteAccount'], ['POST', '/api/v2/updateOrganization'], ['POST', '/api/v2/updateAccount'],
        ['GET', '/api/v2/searchAccounts'], ['GET', '/api/v2/getAccountByExternalId'],
      ];
      for (const [method, url] of routes) {
        assertStatus(await call(method, url, { token: null, body: method === 'GET' ? undefined : {} }), 401, `${method} ${url}`);
        assertStatus(await call(method, url, { token: 'cpl_not-a-real-token', body: method === 'GET' ? undefined : {} }), 401, `${method} ${url}`);
      }
    });
  });
});
