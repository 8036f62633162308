// Numbering providers: the supported catalog, adding and updating an organization's carriers,
// and the carrier auth token sealed at rest and masked in every answer.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import type { Reply } from '../helpers/harness.ts';

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  assert.equal(typeof res.body.message, 'string');
  for (const w of words) assert.ok(res.body.message.includes(w), `"${res.body.message}" should name ${w}`);
}

const sid = () => `AC${crypto.randomBytes(16).toString('hex')}`;
/** 32 characters, like a Twilio auth token; the last four are what an answer may show. */
const authToken = () => crypto.randomBytes(16).toString('hex');
const masked = (secret: string) => `****${secret.slice(-4)}`;

forEachEngine('numbering providers', (h) => {
  async function tenant() {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    return { r, o };
  }

  const add = (token: string, orgId: unknown, body: unknown) =>
    h().call('POST', '/api/v2/numberingProvider', { token, query: { targetOrganizationId: orgId }, body });
  const put = (token: string, orgId: unknown, body: unknown) =>
    h().call('PUT', '/api/v2/numberingProvider', { token, query: { targetOrganizationId: orgId }, body });

  async function rows(orgId: number) {
    return h().database.db.selectFrom('numbering_providers').selectAll().where('org_id', '=', orgId).orderBy('id').execute();
  }

  async function providersOf(token: string, orgId: number): Promise<any[]> {
    const res = await h().call('GET', '/api/v2/account', { token, query: { targetAccountId: orgId } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.details.numberingProviders;
  }

  it('concurrent updates of one provider merge their settings; neither is lost', async () => {
    const { r, o } = await tenant();
    assert.equal((await add(r.token, o.id, { providerId: 'twilio', config: { accountSid: sid(), authToken: authToken() } })).status, 200);
    const mg = () => `MG${crypto.randomBytes(16).toString('hex')}`;
    for (let round = 0; round < 5; round++) {
      const phone = `+1415555${String(1000 + round)}`;
      const service = mg();
      const [a, b] = await Promise.all([
        put(r.token, o.id, { providerId: 'twilio', config: { phoneNumber: phone } }),
        put(r.token, o.id, { providerId: 'twilio', config: { messagingServiceSid: service } }),
      ]);
      assert.equal(a.status, 200, JSON.stringify(a.body));
      assert.equal(b.status, 200, JSON.stringify(b.body));
      const config = JSON.parse((await rows(o.id))[0].config);
      assert.equal(config.phoneNumber, phone);
      assert.equal(config.messagingServiceSid, service);
    }
  });

  // ── catalog ─────────────────────────────────────────────────────────────────

  it('a reseller and a partner list twilio and simulated with their required settings', async () => {
    const { r } = await tenant();
    for (const token of [r.token, h().adminToken]) {
      const res = await h().call('GET', '/api/v2/numberingProviders', { token });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.success, true);
      assert.equal(res.body.message, 'Numbering providers fetched successfully');
      const byId = Object.fromEntries(res.body.numberingProviders.map((p: any) => [p.providerId, p]));
      assert.deepEqual(Object.keys(byId).sort(), ['simulated', 'twilio']);
      assert.deepEqual(byId.twilio.requiredConfig, ['accountSid', 'authToken']);
      assert.ok(byId.twilio.secretConfig.includes('authToken'));
      assert.equal(byId.twilio.acceptedAliases.twilioAccountSid, 'accountSid');
      assert.equal(byId.twilio.acceptedAliases.twilioAuthToken, 'authToken');
      assert.deepEqual(byId.simulated.requiredConfig, []);
      assert.match(byId.simulated.description, /SIMULATED/);
    }
  });

  it('an organization or agent token cannot list numbering providers (403)', async () => {
    const { o } = await tenant();
    expectError(await h().call('GET', '/api/v2/numberingProviders', { token: o.token }), 403);
    expectError(await h().call('GET', '/api/v2/numberingProviders', { token: await h().tokenFor(o.agentId) }), 403);
    expectError(await h().call('GET', '/api/v2/numberingProviders', { token: null }), 401);
  });

  // ── add ─────────────────────────────────────────────────────────────────────

  it('adds twilio: the first provider is the default, the auth token sealed at rest and masked', async () => {
    const { r, o } = await tenant();
    const accountSid = sid();
    const secret = authToken();
    const res = await add(r.token, o.id, { providerId: 'twilio', config: { accountSid, authToken: secret, phoneNumber: '+15551230000' } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.success, true);
    assert.equal(res.body.message, 'Numbering provider added');
    const p = res.body.numberingProvider;
    assert.equal(p.providerId, 'twilio');
    assert.equal(p.default, true);
    assert.equal(p.enabled, true);
    assert.equal(p.config.accountSid, accountSid);
    assert.equal(p.config.phoneNumber, '+15551230000');
    assert.equal(p.config.authToken, masked(secret));
    assert.ok(!JSON.stringify(res.body).includes(secret));

    const [row] = await rows(o.id);
    assert.ok(row.secrets, 'secrets are stored');
    assert.ok(!row.secrets!.includes(secret), 'no plaintext auth token in numbering_providers.secrets');
    assert.ok(!row.config.includes(secret));
    assert.equal(JSON.parse(row.config).authToken, undefined, 'config holds no authToken');
    assert.equal(JSON.parse(row.config).accountSid, accountSid);
    // Sealed, not discarded: our key opens it.
    assert.equal(h().box.openJson<Record<string, string>>(row.secrets!).authToken, secret);
  });

  it('accepts the contract\'s twilioAccountSid / twilioAuthToken spellings and a capitalised providerId', async () => {
    const { r, o } = await tenant();
    const accountSid = sid();
    const secret = authToken();
    const res = await add(r.token, o.id, { providerId: 'Twilio', config: { twilioAccountSid: accountSid, twilioAuthToken: secret } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.numberingProvider.providerId, 'twilio');
    assert.deepEqual(res.body.numberingProvider.config, { accountSid, authToken: masked(secret) });
    const [row] = await rows(o.id);
    assert.deepEqual(JSON.parse(row.config), { accountSid });
    assert.deepEqual(h().box.openJson(row.secrets!), { authToken: secret });
  });

  it('refuses bad twilio settings with a 400 naming the setting, and stores nothing', async () => {
    const { r, o } = await tenant();
    const cases: [unknown, ...string[]][] = [
      [{ providerId: 'twilio', config: { accountSid: 'ACnothex', authToken: authToken() } }, 'config.accountSid'],
      [{ providerId: 'twilio', config: { accountSid: `AC${'A'.repeat(32)}`, authToken: authToken() } }, 'config.accountSid'],
      [{ providerId: 'twilio', config: { accountSid: `AC${'a'.repeat(33)}`, authToken: authToken() } }, 'config.accountSid'],
      [{ providerId: 'twilio', config: { accountSid: `XY${'a'.repeat(32)}`, authToken: authToken() } }, 'config.accountSid'],
      [{ providerId: 'twilio', config: { twilioAccountSid: 'bad', authToken: authToken() } }, 'config.twilioAccountSid'],
      [{ providerId: 'twilio', config: { accountSid: sid() } }, 'config.authToken', 'required'],
      [{ providerId: 'twilio', config: { authToken: authToken() } }, 'config.accountSid', 'required'],
      [{ providerId: 'twilio', config: { accountSid: sid(), authToken: '' } }, 'config.authToken'],
      [{ providerId: 'twilio', config: { accountSid: sid(), authToken: '   ' } }, 'config.authToken'],
      [{ providerId: 'twilio', config: { accountSid: sid(), authToken: authToken(), region: 'us1' } }, 'config.region'],
      [{ providerId: 'twilio', config: { accountSid: sid(), authToken: authToken(), constructor: 'x' } }, 'config.constructor'],
      [{ providerId: 'twilio', config: { accountSid: sid(), authToken: authToken(), toString: 'x' } }, 'config.toString'],
      [{ providerId: 'twilio', config: { accountSid: sid(), authToken: { nested: true } } }, 'config.authToken'],
      [{ providerId: 'twilio', config: { accountSid: sid(), authToken: 'x'.repeat(4001) } }, 'config.authToken'],
      [{ providerId: 'twilio', config: { accountSid: sid(), authToken: authToken(), apiBaseUrl: 'ftp://x' } }, 'config.apiBaseUrl'],
      [{ providerId: 'twilio', config: 'accountSid=AC…' }, 'config'],
      [{ providerId: 'twilio' }, 'config', 'required'],
      [{ config: {} }, 'providerId', 'required'],
      [{ providerId: '', config: {} }, 'providerId'],
      [{ providerId: 'vonage', config: {} }, 'providerId', 'vonage'],
      [{ providerId: 'constructor', config: {} }, 'providerId'],
      [{ providerId: '__proto__', config: {} }, 'providerId'],
      [{ providerId: 'simulated', config: { callSeconds: 'forever' } }, 'config.callSeconds'],
      [{ providerId: 'simulated', config: {}, default: 'sometimes' }, 'default'],
      [{ providerId: 'simulated', config: {}, enabled: 'maybe' }, 'enabled'],
    ];
    for (const [body, ...words] of cases) {
      expectError(await add(r.token, o.id, body), 400, ...words);
    }
    expectError(await h().call('POST', '/api/v2/numberingProvider', { token: r.token, query: { targetOrganizationId: o.id } }), 400, 'body');
    expectError(await h().call('POST', '/api/v2/numberingProvider', {
      token: r.token, query: { targetOrganizationId: o.id }, payload: '{"providerId":', headers: { 'content-type': 'application/json' },
    }), 400);
    assert.equal((await rows(o.id)).length, 0);
  });

  it('a provider already configured is a 400 and stays as it was', async () => {
    const { r, o } = await tenant();
    const first = authToken();
    assert.equal((await add(r.token, o.id, { providerId: 'twilio', config: { accountSid: sid(), authToken: first } })).status, 200);
    expectError(await add(r.token, o.id, { providerId: 'TWILIO', config: { accountSid: sid(), authToken: authToken() } }), 400, 'twilio');
    const all = await rows(o.id);
    assert.equal(all.length, 1);
    assert.equal(h().box.openJson<Record<string, string>>(all[0].secrets!).authToken, first);
  });

  it('setting default on a second provider clears the first; PUT default moves it back', async () => {
    const { r, o } = await tenant();
    assert.equal((await add(r.token, o.id, { providerId: 'twilio', config: { accountSid: sid(), authToken: authToken() } })).body.numberingProvider.default, true);
    const sim = await add(r.token, o.id, { providerId: 'simulated', config: {}, default: true });
    assert.equal(sim.status, 200, JSON.stringify(sim.body));
    assert.equal(sim.body.numberingProvider.default, true);
    let list = await providersOf(r.token, o.id);
    assert.deepEqual(list.map((p) => [p.providerId, p.default]), [['twilio', false], ['simulated', true]]);

    const back = await put(r.token, o.id, { providerId: 'twilio', default: true });
    assert.equal(back.status, 200, JSON.stringify(back.body));
    assert.equal(back.body.message, 'Numbering provider updated');
    assert.equal(back.body.numberingProvider.default, true);
    list = await providersOf(r.token, o.id);
    assert.deepEqual(list.map((p) => [p.providerId, p.default]), [['twilio', true], ['simulated', false]]);
    const defaults = (await rows(o.id)).filter((p) => p.is_default === 1);
    assert.equal(defaults.length, 1);
  });

  it('a second provider added without default leaves the first as the default', async () => {
    const { r, o } = await tenant();
    await add(r.token, o.id, { providerId: 'simulated', config: {} });
    const tw = await add(r.token, o.id, { providerId: 'twilio', config: { accountSid: sid(), authToken: authToken() }, enabled: false });
    assert.equal(tw.status, 200);
    assert.equal(tw.body.numberingProvider.default, false);
    assert.equal(tw.body.numberingProvider.enabled, false);
    const list = await providersOf(r.token, o.id);
    assert.deepEqual(list.map((p) => [p.providerId, p.default, p.enabled]), [['simulated', true, true], ['twilio', false, false]]);
  });

  // ── update ──────────────────────────────────────────────────────────────────

  it('PUT merges config, keeps the stored auth token unless a new one is sent, and toggles enabled', async () => {
    const { r, o } = await tenant();
    const accountSid = sid();
    const oldSecret = authToken();
    await add(r.token, o.id, { providerId: 'twilio', config: { accountSid, authToken: oldSecret } });

    const phone = await put(r.token, o.id, { providerId: 'twilio', config: { phoneNumber: '+15550001111' } });
    assert.equal(phone.status, 200, JSON.stringify(phone.body));
    assert.deepEqual(phone.body.numberingProvider.config, { accountSid, phoneNumber: '+15550001111', authToken: masked(oldSecret) });

    const newSecret = authToken();
    const rotated = await put(r.token, o.id, { providerId: 'twilio', config: { twilioAuthToken: newSecret } });
    assert.equal(rotated.status, 200);
    assert.equal(rotated.body.numberingProvider.config.authToken, masked(newSecret));
    assert.equal(rotated.body.numberingProvider.config.accountSid, accountSid);
    assert.ok(!JSON.stringify(rotated.body).includes(newSecret));
    const [row] = await rows(o.id);
    assert.equal(h().box.openJson<Record<string, string>>(row.secrets!).authToken, newSecret);
    assert.ok(!row.secrets!.includes(newSecret));
    assert.equal(JSON.parse(row.config).authToken, undefined);

    const off = await put(r.token, o.id, { providerId: 'twilio', enabled: false });
    assert.equal(off.status, 200);
    assert.equal(off.body.numberingProvider.enabled, false);
    assert.equal((await rows(o.id))[0].enabled, 0);
    const on = await put(r.token, o.id, { providerId: 'twilio', enabled: true });
    assert.equal(on.body.numberingProvider.enabled, true);
  });

  it('PUT of a provider not configured is 404; bad input is 400 and changes nothing', async () => {
    const { r, o } = await tenant();
    const accountSid = sid();
    await add(r.token, o.id, { providerId: 'simulated', config: {} });
    expectError(await put(r.token, o.id, { providerId: 'twilio', default: true }), 404, 'twilio');
    await add(r.token, o.id, { providerId: 'twilio', config: { accountSid, authToken: authToken() } });
    expectError(await put(r.token, o.id, { providerId: 'twilio' }), 400, 'nothing to update');
    expectError(await put(r.token, o.id, { providerId: 'twilio', config: { accountSid: 'AC123' } }), 400, 'config.accountSid');
    expectError(await put(r.token, o.id, { providerId: 'twilio', config: { colour: 'red' } }), 400, 'config.colour');
    expectError(await put(r.token, o.id, { providerId: 'twilio', config: { authToken: '' } }), 400, 'config.authToken');
    expectError(await put(r.token, o.id, { providerId: 'nexmo', default: true }), 400, 'providerId');
    expectError(await put(r.token, o.id, { providerId: 'hasOwnProperty', default: true }), 400, 'providerId');
    expectError(await put(r.token, o.id, { default: true }), 400, 'providerId is required');
    expectError(await put(r.token, o.id, { providerId: 'twilio', default: 'yes please' }), 400, 'default');
    expectError(await put(r.token, o.id, { providerId: 'twilio', config: { accountSid: 42.5e3 } }), 400, 'config.accountSid');
    const tw = (await rows(o.id)).find((p) => p.provider_id === 'twilio')!;
    assert.equal(JSON.parse(tw.config).accountSid, accountSid);
    assert.equal(tw.is_default, 0);
  });

  // ── who may ─────────────────────────────────────────────────────────────────

  it('an organization token cannot add or update its providers (403), and nothing changes', async () => {
    const { r, o } = await tenant();
    await add(r.token, o.id, { providerId: 'simulated', config: {} });
    expectError(await add(o.token, o.id, { providerId: 'twilio', config: { accountSid: sid(), authToken: authToken() } }), 403);
    expectError(await put(o.token, o.id, { providerId: 'simulated', enabled: false }), 403);
    expectError(await add(await h().tokenFor(o.agentId), o.id, { providerId: 'twilio', config: { accountSid: sid(), authToken: authToken() } }), 403);
    const all = await rows(o.id);
    assert.deepEqual(all.map((p) => [p.provider_id, p.enabled]), [['simulated', 1]]);
  });

  it('another reseller\'s organization, a non-organization and bad ids are refused', async () => {
    const mine = await tenant();
    const theirs = await tenant();
    await add(theirs.r.token, theirs.o.id, { providerId: 'simulated', config: {} });
    const body = { providerId: 'twilio', config: { accountSid: sid(), authToken: authToken() } };
    expectError(await add(mine.r.token, theirs.o.id, body), 404, 'targetOrganizationId');
    expectError(await put(mine.r.token, theirs.o.id, { providerId: 'simulated', enabled: false }), 404, 'targetOrganizationId');
    expectError(await add(mine.r.token, mine.o.agentId, body), 404, 'targetOrganizationId');
    expectError(await add(mine.r.token, mine.r.id, body), 404, 'targetOrganizationId');
    expectError(await add(mine.r.token, undefined, body), 400, 'targetOrganizationId');
    expectError(await add(mine.r.token, 'acme', body), 400, 'targetOrganizationId');
    expectError(await add(mine.r.token, 0, body), 400, 'targetOrganizationId');
    expectError(await add(mine.r.token, '99999999999', body), 400, 'targetOrganizationId');
    expectError(await put(mine.r.token, '99999999999', { providerId: 'twilio', enabled: true }), 400, 'targetOrganizationId');
    assert.deepEqual((await rows(theirs.o.id)).map((p) => [p.provider_id, p.enabled]), [['simulated', 1]]);
    assert.equal((await rows(mine.o.id)).length, 0);
  });

  it('a partner manages the providers of any organization below it', async () => {
    const { o } = await tenant();
    const res = await add(h().adminToken, o.id, { providerId: 'simulated', config: { callSeconds: '30' } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.numberingProvider.config, { callSeconds: '30' });
  });

  // ── masking everywhere ──────────────────────────────────────────────────────

  it('GET /api/v2/account masks the auth token for the reseller and the organization itself', async () => {
    const { r, o } = await tenant();
    const secret = authToken();
    await add(r.token, o.id, { providerId: 'twilio', config: { accountSid: sid(), authToken: secret } });
    for (const [token, query] of [[r.token, { targetAccountId: o.id }], [o.token, {}]] as const) {
      const res = await h().call('GET', '/api/v2/account', { token, query });
      assert.equal(res.status, 200);
      assert.ok(!JSON.stringify(res.body).includes(secret), 'the plaintext auth token never leaves');
      const [p] = res.body.details.numberingProviders;
      assert.equal(p.config.authToken, masked(secret));
    }
  });

  it('createOrganization stores providers sealed and answers with the token masked', async () => {
    const r = await h().reseller();
    const secret = authToken();
    const accountSid = sid();
    const res = await h().call('POST', '/api/v2/createOrganization', {
      token: r.token, query: { targetResellerId: r.id },
      body: { orgName: 'Carrier Co', numberingProviders: [
        { providerId: 'simulated', config: {} },
        { providerId: 'twilio', default: true, config: { twilioAccountSid: accountSid, twilioAuthToken: secret } },
      ] },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.ok(!JSON.stringify(res.body).includes(secret));
    const providers = res.body.organization.numberingProviders;
    assert.deepEqual(providers.map((p: any) => [p.providerId, p.default]), [['simulated', false], ['twilio', true]]);
    assert.deepEqual(providers[1].config, { accountSid, authToken: masked(secret) });
    const stored = await rows(res.body.organization.id);
    const tw = stored.find((p) => p.provider_id === 'twilio')!;
    assert.ok(!tw.secrets!.includes(secret));
    assert.equal(JSON.parse(tw.config).authToken, undefined);
    assert.equal(h().box.openJson<Record<string, string>>(tw.secrets!).authToken, secret);
  });

  it('createOrganization makes the first provider the default when none is marked', async () => {
    const r = await h().reseller();
    const res = await h().call('POST', '/api/v2/createOrganization', {
      token: r.token, query: { targetResellerId: r.id },
      body: { orgName: 'Two Carriers', numberingProviders: [
        { providerId: 'twilio', config: { accountSid: sid(), authToken: authToken() } },
        { providerId: 'simulated', config: {} },
      ] },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.deepEqual(res.body.organization.numberingProviders.map((p: any) => [p.providerId, p.default]), [['twilio', true], ['simulated', false]]);
  });

  it('createOrganization validates numberingProviders item by item and creates nothing on error', async () => {
    const r = await h().reseller();
    const good = { providerId: 'simulated', config: {} };
    const cases: [unknown[], ...string[]][] = [
      [[good, { providerId: 'twilio', config: { accountSid: 'ACbad', authToken: authToken() } }], 'numberingProviders[1].config.accountSid'],
      [[good, { providerId: 'twilio', config: { accountSid: sid() } }], 'numberingProviders[1].config.authToken'],
      [[{ providerId: 'twilio', config: { accountSid: sid(), authToken: authToken(), sipDomain: 'x' } }], 'numberingProviders[0].config.sipDomain'],
      [[good, { providerId: 'bandwidth', config: {} }], 'numberingProviders[1].providerId'],
      [[{ providerId: 'valueOf', config: {} }], 'numberingProviders[0].providerId'],
      [[{ providerId: 'twilio', default: true, config: { accountSid: sid(), authToken: authToken() } }, { ...good, default: true }], 'numberingProviders', 'default'],
      [[good, good], 'numberingProviders[1].providerId'],
      [[good, { providerId: 'twilio' }], 'numberingProviders[1].config'],
      [[{ config: {} }], 'numberingProviders[0].providerId'],
      [[good, { providerId: 'simulated', config: { callSeconds: { n: 1 } } }], 'numberingProviders[1].config.callSeconds'],
    ];
    for (const [numberingProviders, ...words] of cases) {
      const res = await h().call('POST', '/api/v2/createOrganization', {
        token: r.token, query: { targetResellerId: r.id }, body: { orgName: 'Should Not Exist', numberingProviders },
      });
      expectError(res, 400, ...words);
    }
    expectError(await h().call('POST', '/api/v2/createOrganization', {
      token: r.token, query: { targetResellerId: r.id }, body: { orgName: 'Should Not Exist', numberingProviders: { providerId: 'twilio' } },
    }), 400, 'numberingProviders');
    const orgs = await h().database.db.selectFrom('accounts').select('id').where('name', '=', 'Should Not Exist').execute();
    assert.equal(orgs.length, 0);
  });
});
