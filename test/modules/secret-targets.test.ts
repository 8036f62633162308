// A stored secret is sent only to the origin it was given for (docs/api.md, "Secrets and their
// targets"): a change that moves its target to another scheme, host or port must carry the secret
// again (400 naming the secret otherwise, nothing changed); a change that keeps the origin (a path,
// another setting) keeps the secret; removing the secret is always allowed. Each place that keeps a
// secret beside a target: organizations' model providers (apiKey, baseUrl), numbering providers
// (config.authToken, config.apiBaseUrl), relays (headers, url), integrations (appData secrets, appData
// URLs) and SIP registrations (password, the registrar) — on both engines.
// @engines sqlite
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { secretTargetRefusal, sipOrigin, urlOrigin } from '../../src/lib/secret-target.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { startFakeRegistrar, type FakeRegistrar } from '../helpers/fake-registrar.ts';
import type { Reply } from '../helpers/harness.ts';

function expectRefused(res: Reply, secret: string, target: string): void {
  assert.equal(res.status, 400, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  assert.ok(String(res.body.message).startsWith(`${secret} is required when ${target}`), res.body.message);
  assert.ok(String(res.body.message).includes(' changes its origin ('), res.body.message);
}
const ok = (res: Reply, status = 200) => assert.equal(res.status, status, JSON.stringify(res.body));

describe('the rule', () => {
  it('origins: scheme, host and port, normalised; paths, queries and default ports do not count', () => {
    assert.equal(urlOrigin('https://API.Example.com:443/v1?x=1#f'), 'https://api.example.com');
    assert.equal(urlOrigin('http://example.com:80/a'), 'http://example.com');
    assert.equal(urlOrigin('http://example.com:8080/a'), 'http://example.com:8080');
    assert.equal(urlOrigin('http://[::1]:9/'), 'http://[::1]:9');
    assert.equal(urlOrigin(undefined), null);
    assert.equal(urlOrigin('not a url'), null);
    assert.equal(sipOrigin({ transport: 'UDP', host: 'PBX.example.com', port: 5060 }), 'udp:pbx.example.com:5060');
    const rule = { secret: 'apiKey', target: 'baseUrl', before: 'https://a.example', after: 'https://b.example' };
    assert.match(secretTargetRefusal({ ...rule, keeps: true })!, /^apiKey is required when baseUrl changes its origin \(https:\/\/a\.example to https:\/\/b\.example\)/);
    assert.equal(secretTargetRefusal({ ...rule, keeps: false }), null, 'sent again or removed');
    assert.equal(secretTargetRefusal({ ...rule, after: rule.before, keeps: true }), null, 'same origin');
  });
});

let registrar: FakeRegistrar;
let second: FakeRegistrar;
before(async () => {
  registrar = await startFakeRegistrar('127.0.0.5');
  second = await startFakeRegistrar('127.0.0.6');
});
after(async () => {
  await registrar?.close();
  await second?.close();
});

forEachEngine('secrets and their targets', (h) => {
  async function tenant(body: Record<string, unknown> = {}) {
    const r = await h().reseller();
    const o = await h().organization(r.id, body);
    return { r, o };
  }

  it('model providers: a baseUrl of another origin needs apiKey again; a path change, a new key or removing it do not', async () => {
    const { o } = await tenant();
    const put = (body: unknown) => h().call('PUT', '/api/v2/llm/providers/mine', { token: o.token, body });
    const key = 'sk-original-0123456789';
    ok(await put({ baseUrl: 'https://llm.example.com/v1', apiKey: key, models: ['m'] }), 201);
    const stored = async () => (await h().database.db.selectFrom('llm_providers').selectAll().where('org_id', '=', o.id).executeTakeFirstOrThrow());

    for (const baseUrl of ['https://attacker.example.net/v1', 'http://llm.example.com/v1', 'https://llm.example.com:8443/v1']) {
      expectRefused(await put({ baseUrl, models: ['m'] }), 'apiKey', 'baseUrl');
    }
    assert.equal((await stored()).base_url, 'https://llm.example.com/v1', 'nothing changed');
    // The same origin, written differently, or another path: the key stays.
    ok(await put({ baseUrl: 'https://LLM.example.com:443/openai/v1', models: ['m', 'n'] }));
    assert.equal(h().box.open((await stored()).api_key!), key);
    // The key sent again goes with the new origin.
    ok(await put({ baseUrl: 'https://other.example.org/v1', apiKey: 'sk-second-0123456789', models: ['m'] }));
    assert.equal(h().box.open((await stored()).api_key!), 'sk-second-0123456789');
    // Removing the key is always allowed, and then any origin is.
    ok(await put({ baseUrl: 'https://third.example.org/v1', apiKey: null, models: ['m'] }));
    ok(await put({ baseUrl: 'https://fourth.example.org/v1', models: ['m'] }));
    assert.equal((await stored()).api_key, null);
  });

  it('numbering providers: config.apiBaseUrl of another origin (set for the first time too) needs config.authToken again', async () => {
    const { r, o } = await tenant();
    const call = (method: string, body: unknown) => h().call(method, '/api/v2/numberingProvider', { token: r.token, query: { targetOrganizationId: o.id }, body });
    const token = 'a'.repeat(32);
    const config = { accountSid: `AC${'1'.repeat(32)}`, authToken: token };
    ok(await call('POST', { providerId: 'twilio', config }));
    const settings = async () => {
      const row = await h().database.db.selectFrom('numbering_providers').selectAll().where('org_id', '=', o.id).executeTakeFirstOrThrow();
      return { config: JSON.parse(row.config) as Record<string, string>, secrets: h().box.openJson<Record<string, string>>(row.secrets!) };
    };
    // Unset, the API base is Twilio's own: pointing it elsewhere moves the token.
    expectRefused(await call('PUT', { providerId: 'twilio', config: { apiBaseUrl: 'https://collector.example.net' } }), 'config.authToken', 'config.apiBaseUrl');
    // Twilio's own address written out is the same origin.
    ok(await call('PUT', { providerId: 'twilio', config: { apiBaseUrl: 'https://api.twilio.com/' } }));
    expectRefused(await call('PUT', { providerId: 'twilio', config: { apiBaseUrl: 'http://api.twilio.com' } }), 'config.authToken', 'config.apiBaseUrl');
    expectRefused(await call('PUT', { providerId: 'twilio', config: { apiBaseUrl: 'https://collector.example.net', phoneNumber: '+14155550100' } }), 'config.authToken', 'config.apiBaseUrl');
    assert.equal((await settings()).config.apiBaseUrl, 'https://api.twilio.com/', 'nothing changed');
    assert.equal((await settings()).config.phoneNumber, undefined);
    // Other settings keep the token; the token sent again (its alias too) goes with the new origin.
    ok(await call('PUT', { providerId: 'twilio', config: { phoneNumber: '+14155550100' } }));
    ok(await call('PUT', { providerId: 'twilio', config: { apiBaseUrl: 'https://mirror.example.net/2010', twilioAuthToken: 'b'.repeat(32) } }));
    assert.deepEqual((await settings()).secrets, { authToken: 'b'.repeat(32) });
    ok(await call('PUT', { providerId: 'twilio', config: { apiBaseUrl: 'https://mirror.example.net/other' } }), 200);
  });

  it('relays: a url of another origin needs headers again (or [] / null to send none); a path change keeps them', async () => {
    const { o } = await tenant({ vidaPremium: true });
    const post = (body: unknown) => h().call('POST', '/api/v2/webhookRelay/generic', { token: o.token, body });
    const headers = [{ Authorization: 'Bearer receiver-credential-0123' }];
    ok(await post({ url: 'https://hooks.example.com/in', headers }));
    const stored = async () => {
      const row = await h().database.db.selectFrom('webhook_relays').selectAll().where('org_id', '=', o.id).executeTakeFirstOrThrow();
      return { url: row.url, headers: h().box.openJson(row.headers) };
    };
    expectRefused(await post({ url: 'https://collector.example.net/in' }), 'headers', 'url');
    expectRefused(await post({ url: 'https://hooks.example.com:8443/in', timeout: 5000 }), 'headers', 'url');
    assert.deepEqual(await stored(), { url: 'https://hooks.example.com/in', headers });
    ok(await post({ url: 'https://hooks.example.com/v2/in' }));
    assert.deepEqual(await stored(), { url: 'https://hooks.example.com/v2/in', headers });
    ok(await post({ url: 'https://new-receiver.example.org/in', headers: [{ Authorization: 'Bearer new-credential-4567' }] }));
    ok(await post({ url: 'https://third.example.org/in', headers: [] }));
    assert.deepEqual(await stored(), { url: 'https://third.example.org/in', headers: [] });
    // No headers stored: nothing to carry.
    ok(await post({ url: 'https://fourth.example.org/in' }));
  });

  it('integrations: a URL in appData changing origin needs the appData secrets again; a masked echo does not count as sending one', async () => {
    const { o } = await tenant({ integrations: [{ appId: 'crm', appVersion: 'v1', appData: { baseUrl: 'https://crm.example.com/api', apiKey: 'crm-key-0123456789', region: 'eu' } }] });
    const put = (appData: unknown) => h().call('PUT', '/api/v2/integration/crm/v1', { token: o.token, body: { appData } });
    const stored = async () => {
      const row = await h().database.db.selectFrom('integrations').selectAll().where('account_id', '=', o.id).executeTakeFirstOrThrow();
      return h().box.openJson<Record<string, unknown>>(row.app_data);
    };
    expectRefused(await put({ baseUrl: 'https://collector.example.net/api' }), 'appData.apiKey', 'appData.baseUrl');
    // What GET showed, with the URL changed: the masked key is not the key.
    const shown = (await h().call('GET', '/api/v2/integration/crm/v1', { token: o.token })).body.appData;
    expectRefused(await put({ ...shown, baseUrl: 'https://collector.example.net/api' }), 'appData.apiKey', 'appData.baseUrl');
    // Removing the URL, or adding another one, moves the key too.
    expectRefused(await put({ baseUrl: null }), 'appData.apiKey', 'appData.baseUrl');
    expectRefused(await put({ webhookUrl: 'https://collector.example.net/hook' }), 'appData.apiKey', 'appData.webhookUrl');
    assert.deepEqual(await stored(), { baseUrl: 'https://crm.example.com/api', apiKey: 'crm-key-0123456789', region: 'eu' });
    // Same origin, other settings, the key sent again, the key removed: all fine.
    ok(await put({ baseUrl: 'https://crm.example.com/v2', region: 'us' }));
    ok(await put({ ...shown, region: 'ap' }));
    ok(await put({ baseUrl: 'https://crm2.example.org/api', apiKey: 'crm-key-second-0123' }));
    assert.deepEqual(await stored(), { baseUrl: 'https://crm2.example.org/api', apiKey: 'crm-key-second-0123', region: 'ap' });
    ok(await put({ baseUrl: 'https://crm3.example.org/api', apiKey: null }));
    assert.deepEqual(await stored(), { baseUrl: 'https://crm3.example.org/api', region: 'ap' });
  });

  it('SIP registrations: a registrar of another host, port or transport needs the password again; REGISTERs go nowhere new without it', async () => {
    const { o } = await tenant();
    const post = (body: unknown) => h().call('POST', '/api/v2/sip/registration', { token: o.token, body });
    const aor = `sip:${h().engine}-secret@${registrar.host}:${registrar.port}`;
    ok(await post({ aor, password: 'pw-original' }), 201);
    const password = async () => h().box.open((await h().database.db.selectFrom('sip_registrations').select('password').where('org_id', '=', o.id).executeTakeFirstOrThrow()).password);
    const before = second.received.length;
    expectRefused(await post({ aor, proxy: `${second.host}:${second.port}` }), 'password', 'the registrar');
    expectRefused(await post({ aor: `sip:${h().engine}-secret@${second.host}:${second.port}` }), 'password', 'the registrar');
    expectRefused(await post({ aor, transport: 'TCP' }), 'password', 'the registrar');
    expectRefused(await post({ aor, port: registrar.port + 1 }), 'password', 'the registrar');
    assert.equal(second.received.length, before, 'nothing was sent to the other registrar');
    // The same registrar (named as the proxy, its port the AOR's) keeps the password.
    ok(await post({ aor, proxy: `${registrar.host}:${registrar.port}`, authUsername: 'auth-1' }));
    assert.equal(await password(), 'pw-original');
    // Sent again, the password goes to the new registrar.
    ok(await post({ aor, proxy: `${second.host}:${second.port}`, password: 'pw-second' }));
    assert.equal(await password(), 'pw-second');
    assert.ok(second.received.length > before);
    ok(await h().call('DELETE', '/api/v2/sip/registration', { token: o.token }));
  });
}, { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, { sip: {} }); // the registrars under test listen on loopback
