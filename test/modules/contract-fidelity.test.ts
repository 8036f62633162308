// Answers typed as the contract types them (test/fixtures/vida-api-v2.openapi.json): what a strict
// decoder (Go, Jackson, Codable) reads without failing. createReseller's `organization` is a
// string; limits and the SIP registration leave out what is unset instead of sending null into a
// field typed number, object or string.
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import { startFakeRegistrar, type FakeRegistrar } from '../helpers/fake-registrar.ts';

/** Every path in `value` whose value is null, as `.a.b[0].c`. */
function nullsIn(value: unknown, at = ''): string[] {
  if (value === null) return [at];
  if (Array.isArray(value)) return value.flatMap((v, i) => nullsIn(v, `${at}[${i}]`));
  if (typeof value === 'object') return Object.entries(value as object).flatMap(([k, v]) => nullsIn(v, `${at}.${k}`));
  return [];
}

let registrar: FakeRegistrar;
before(async () => { registrar = await startFakeRegistrar(); });
after(async () => { await registrar?.close(); });

forEachEngine('contract fidelity', (h) => {
  it('POST /createReseller answers organization as a string (the new reseller\'s id) and the object as reseller', async () => {
    const res = await h().call('POST', '/api/v2/createReseller', { query: { targetPartnerId: h().partnerId }, body: { resellerName: 'Typed' } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(typeof res.body.organization, 'string');
    assert.equal(res.body.organization, String(res.body.reseller.id));
    assert.equal(res.body.reseller.accountType, 'reseller');
    assert.equal(res.body.reseller.resellerName, 'Typed');
    // The id works wherever a reseller id is expected.
    const org = await h().call('POST', '/api/v2/createOrganization', { query: { targetResellerId: res.body.organization }, body: { orgName: 'Under it' } });
    assert.equal(org.status, 201, JSON.stringify(org.body));
  });

  it('GET /tasks/limits sends no null: unset caps, cooldowns and business hours are left out; null in a POST still removes', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const fresh = await h().call('GET', '/api/v2/tasks/limits', { token: o.token });
    assert.equal(fresh.status, 200);
    assert.deepEqual(nullsIn(fresh.body), []);
    assert.deepEqual(fresh.body.limits, { daily: {}, concurrencyPerRun: 5, cooldowns: {}, retries: {} });

    const hours = { timezone: 'America/Chicago', days: [1, 2, 3, 4, 5], start: '09:00', end: '17:00' };
    const set = await h().call('POST', '/api/v2/tasks/limits', {
      token: r.token, query: { targetAccountId: o.id }, body: { businessHours: hours, daily: { calls: 100 }, cooldowns: { texts: 300 } },
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.deepEqual(nullsIn(set.body), []);
    const got = await h().call('GET', '/api/v2/tasks/limits', { token: o.token });
    assert.deepEqual(got.body.limits, { businessHours: hours, daily: { calls: 100 }, concurrencyPerRun: 5, cooldowns: { texts: 300 }, retries: {} });
    assert.deepEqual(nullsIn(got.body), []);
    const counts = await h().call('GET', '/api/v2/tasks/dailyCounts', { token: o.token });
    assert.deepEqual(counts.body.limits, { calls: 100 });

    const cleared = await h().call('POST', '/api/v2/tasks/limits', {
      token: r.token, query: { targetAccountId: o.id }, body: { businessHours: null, daily: { calls: null }, cooldowns: null },
    });
    assert.equal(cleared.status, 200, JSON.stringify(cleared.body));
    assert.deepEqual(cleared.body.limits, { daily: {}, concurrencyPerRun: 5, cooldowns: {}, retries: {} });
    assert.deepEqual((await h().call('GET', '/api/v2/tasks/limits', { token: o.token })).body.limits, cleared.body.limits);
  });

  it('a ping without a target has no target field, rather than target: null', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const res = await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'ping' } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.ok(!('target' in res.body.task));
    const got = await h().call('GET', `/api/v2/tasks/${res.body.task.id}`, { token: o.token });
    assert.ok(!('target' in got.body.task));
    // Every field presentTask returns still comes through the (now complete) response schema.
    for (const field of ['id', 'type', 'state', 'context', 'taskContext', 'content', 'greeting', 'waitToGreet', 'accountId', 'organizationId',
      'externalTaskId', 'meta', 'scheduledFor', 'runAt', 'createdAt', 'updatedAt', 'startedAt', 'finishedAt', 'attempts', 'maxAttempts',
      'cancelRequestedAt', 'provider', 'providerRef', 'result', 'error']) {
      assert.ok(field in got.body.task, `task.${field} is answered`);
    }
  });

  it('GET /sip/registration without a proxy leaves proxy out (the contract types it as a string); with one, it is the string', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const aor = `sip:${h().engine}-noproxy@${registrar.host}:${registrar.port}`;
    const created = await h().call('POST', '/api/v2/sip/registration', { token: o.token, body: { aor, password: 'secret-1' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.ok(!('proxy' in created.body.registration), JSON.stringify(created.body.registration));
    const got = await h().call('GET', '/api/v2/sip/registration', { token: o.token });
    assert.equal(got.status, 200);
    assert.ok(!('proxy' in got.body.registration), JSON.stringify(got.body.registration));
    assert.deepEqual([got.body.registration.aor, got.body.registration.username, got.body.registration.transport], [aor, `${h().engine}-noproxy`, 'UDP']);
    assert.equal(got.body.registration.status, 'registered');

    const o2 = await h().organization(r.id);
    const aor2 = `sip:${h().engine}-proxy@pbx.example.com`;
    const proxied = await h().call('POST', '/api/v2/sip/registration', {
      token: o2.token, body: { aor: aor2, password: 'secret-2', proxy: `${registrar.host}:${registrar.port}` },
    });
    assert.equal(proxied.status, 201, JSON.stringify(proxied.body));
    const got2 = await h().call('GET', '/api/v2/sip/registration', { token: o2.token });
    assert.equal(got2.body.registration.proxy, `${registrar.host}:${registrar.port}`);
  });
}, {}, { sip: {} });
