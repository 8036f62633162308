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

  it('the contract\'s example number +15551234567 is accepted (possible, not assigned) with a warning saying so', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const res = await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: '+1 555 123 4567' } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.task.target, '+15551234567');
    assert.equal(res.body.warnings.length, 1, JSON.stringify(res.body.warnings));
    assert.match(res.body.warnings[0], /^target \+15551234567 is a possible number but not one assigned/);
    // An assigned number carries no warning.
    const real = await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'text', target: '+14155552671', content: 'hi' } });
    assert.equal(real.status, 201, JSON.stringify(real.body));
    assert.equal(real.body.warnings, undefined);
    // The agent queueing operations say it per item.
    const batch = await h().call('POST', '/api/v2/agent/outboundSms', { token: o.token, body: { targets: ['+14155552671', '+15551230001'], content: 'hi' } });
    assert.equal(batch.status, 200, JSON.stringify(batch.body));
    assert.equal(batch.body.inserted, 2);
    assert.deepEqual(batch.body.warnings.map((w: string) => w.split(' ').slice(0, 2).join(' ')), ['targets[1].target +15551230001']);
    // Not even possible (one digit short for +1): still refused, naming the field.
    const short = await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: '+1234567890' } });
    assert.equal(short.status, 400);
    assert.match(short.body.message, /^target '\+1234567890' is not a valid phone number/);
  });

  it('a username target: a ping to an agent of the organization runs as that agent; calls and texts refuse it, saying so', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const a2 = await h().agent(o.id);
    const other = await h().organization(r.id);
    const account = await h().call('GET', '/api/v2/account', { token: a2.token });
    const name = account.body.username as string;
    assert.equal(name, `account-${a2.id}`);

    const ping = await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'ping', target: name } });
    assert.equal(ping.status, 201, JSON.stringify(ping.body));
    assert.deepEqual([ping.body.task.target, ping.body.task.accountId], [name, a2.id]);
    // An agent with an email is named by it, in any case; accountId still wins when given.
    await h().database.db.updateTable('accounts').set({ email: 'jane@example.com' }).where('id', '=', o.agentId).execute();
    const byEmail = await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'ping', target: 'Jane@Example.com', accountId: a2.id } });
    assert.equal(byEmail.status, 201, JSON.stringify(byEmail.body));
    assert.deepEqual([byEmail.body.task.target, byEmail.body.task.accountId], ['jane@example.com', a2.id]);

    for (const [body, words] of [
      [{ type: 'call', target: name }, ['target', name, 'call tasks need a phone number', 'ping tasks only']],
      [{ type: 'text', target: name, content: 'hi' }, ['target', 'text tasks need a phone number', 'ping tasks only']],
      [{ type: 'ping', target: 'nobody@example.com' }, ['target', 'nobody@example.com', 'not the username of an agent of this organization']],
      [{ type: 'ping', target: `account-${other.agentId}` }, ['target', 'not the username of an agent of this organization']],
      [{ type: 'ping', target: `account-${o.id}` }, ['target', 'not the username of an agent']],
    ] as const) {
      const res = await h().call('POST', '/api/v2/tasks', { token: o.token, body });
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.equal(res.body.success, false);
      for (const w of words) assert.ok(res.body.message.includes(w), `"${res.body.message}" should say ${w}`);
    }
    // An agent's token names only itself.
    const own = await h().call('POST', '/api/v2/tasks', { token: a2.token, body: { type: 'ping', target: name } });
    assert.equal(own.status, 201, JSON.stringify(own.body));
    const foreign = await h().call('POST', '/api/v2/tasks', { token: a2.token, body: { type: 'ping', target: 'jane@example.com' } });
    assert.equal(foreign.status, 400, JSON.stringify(foreign.body));
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
}, { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, { sip: {} }); // the registrar under test listens on loopback
