// GET/POST/DELETE /api/v2/webhooks: the contract's shapes and messages, the signing secret shown
// once, validation naming the field, the SSRF check on url, tenancy. Deliveries are tested in
// webhook-deliveries.test.ts.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import type { Reply } from '../helpers/harness.ts';

const URL_A = 'https://hooks.example.com/callplane';

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  for (const w of words) assert.ok(String(res.body.message).includes(w), `"${res.body.message}" should name ${w}`);
}

forEachEngine('webhook subscriptions', (h) => {
  const add = (token: string, body: unknown, query?: Record<string, unknown>) => h().call('POST', '/api/v2/webhooks', { token, body, query });
  const list = (token: string, query?: Record<string, unknown>) => h().call('GET', '/api/v2/webhooks', { token, query });
  const remove = (token: string, body: unknown, query?: Record<string, unknown>) => h().call('DELETE', '/api/v2/webhooks', { token, body, query });
  const org = async () => {
    const r = await h().reseller();
    return { r, o: await h().organization(r.id) };
  };

  it('POST answers 201 with the new webhook in the contract\'s shape and its signing secret in full, once', async () => {
    const { o } = await org();
    const before = Math.floor(Date.now() / 1000);
    const res = await add(o.token, { url: URL_A, label: 'Zapier Hook', type: 'conversation' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.success, true);
    assert.equal(res.body.message, 'Webhook created successfully');
    assert.match(res.body.signingSecret, /^whsec_[A-Za-z0-9+/]{32}$/);
    assert.equal(res.body.webhooks.length, 1);
    const w = res.body.webhooks[0];
    assert.equal(w.userId, o.id);
    assert.equal(w.label, 'Zapier Hook');
    assert.equal(w.url, URL_A);
    assert.equal(w.type, 'conversation');
    assert.ok(w.timestamp >= before && w.timestamp <= before + 5);
    assert.equal(typeof w.id, 'number');
    assert.ok(!w.signingSecret.includes(res.body.signingSecret.slice(6, 20)), 'masked in the item');

    const listed = await list(o.token);
    assert.equal(listed.status, 200);
    assert.equal(listed.body.success, true);
    assert.deepEqual(listed.body.webhooks, [w]);
    assert.ok(!JSON.stringify(listed.body).includes(res.body.signingSecret), 'the secret is never shown again');
    assert.equal(listed.body.webhooks[0].signingSecret, `****${res.body.signingSecret.slice(-4)}`);
  });

  it('takes the contract\'s types plus task and registration; anything else is a 400 listing them', async () => {
    const { o } = await org();
    for (const type of ['conversation', 'incoming', 'contact', 'agent', 'onboarding', 'task', 'registration']) {
      const res = await add(o.token, { url: `${URL_A}/${type}`, label: type, type });
      assert.equal(res.status, 201, `${type}: ${JSON.stringify(res.body)}`);
    }
    expectError(await add(o.token, { url: URL_A, label: 'x', type: 'calls' }), 400, 'type must be one of', 'conversation', 'task', 'registration');
    assert.equal((await list(o.token)).body.webhooks.length, 7);
  });

  it('url, label and type are required, each named when missing or of the wrong kind', async () => {
    const { o } = await org();
    expectError(await add(o.token, { label: 'x', type: 'task' }), 400, 'url is required');
    expectError(await add(o.token, { url: URL_A, type: 'task' }), 400, 'label is required');
    expectError(await add(o.token, { url: URL_A, label: 'x' }), 400, 'type is required');
    expectError(await add(o.token, { url: 42, label: 'x', type: 'task' }), 400, 'url must be an absolute http or https URL');
    expectError(await add(o.token, { url: { href: URL_A }, label: 'x', type: 'task' }), 400, 'url must be a string');
    expectError(await add(o.token, { url: URL_A, label: 'x'.repeat(201), type: 'task' }), 400, 'label must be at most 200');
  });

  it('url must be absolute http(s) without credentials; private and loopback addresses are refused', async () => {
    const { o } = await org();
    expectError(await add(o.token, { url: 'hooks.example.com/x', label: 'x', type: 'task' }), 400, 'url', 'absolute');
    expectError(await add(o.token, { url: 'ftp://hooks.example.com/x', label: 'x', type: 'task' }), 400, 'url', 'http');
    expectError(await add(o.token, { url: 'https://u:p@hooks.example.com/x', label: 'x', type: 'task' }), 400, 'url', 'credentials');
    for (const url of ['http://127.0.0.1:8080/x', 'http://10.0.0.5/x', 'http://169.254.169.254/latest/meta-data', 'http://[::1]/x']) {
      expectError(await add(o.token, { url, label: 'x', type: 'task' }), 400, 'url', 'CALLPLANE_ALLOW_PRIVATE_TARGETS');
    }
    assert.equal((await list(o.token)).body.webhooks.length, 0);
  });

  it('the same url and type twice is a 200 with the existing subscription (the contract lists 200, not 409); the same url for another type is a second subscription', async () => {
    const { o } = await org();
    const first = await add(o.token, { url: URL_A, label: 'a', type: 'task' });
    assert.equal(first.status, 201);
    const again = await add(o.token, { url: URL_A, label: 'b', type: 'task' });
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.equal(again.body.success, true);
    assert.match(again.body.message, /already exists/);
    assert.equal(again.body.webhooks.length, 1);
    assert.equal(again.body.webhooks[0].id, first.body.webhooks[0].id);
    assert.equal(again.body.webhooks[0].label, 'a', 'the existing subscription is answered unchanged');
    // The secret was shown once, at creation: here it is masked, and it is the same secret.
    assert.equal(again.body.signingSecret, undefined);
    assert.equal(again.body.webhooks[0].signingSecret, first.body.webhooks[0].signingSecret);
    assert.notEqual(again.body.webhooks[0].signingSecret, first.body.signingSecret);
    assert.equal((await list(o.token)).body.webhooks.length, 1);
    assert.equal((await add(o.token, { url: URL_A, label: 'c', type: 'agent' })).status, 201);
    assert.equal((await list(o.token)).body.webhooks.length, 2);
  });

  it('DELETE by url removes every subscription to it (or one type with type); a url with none is a 404', async () => {
    const { o } = await org();
    await add(o.token, { url: URL_A, label: 'a', type: 'task' });
    await add(o.token, { url: URL_A, label: 'b', type: 'agent' });
    await add(o.token, { url: `${URL_A}/other`, label: 'c', type: 'task' });
    const one = await remove(o.token, { url: URL_A, type: 'agent' });
    assert.equal(one.status, 200, JSON.stringify(one.body));
    assert.equal(one.body.deleted, 1);
    const res = await remove(o.token, { url: URL_A });
    assert.equal(res.status, 200);
    assert.equal(res.body.success, true);
    assert.equal(res.body.message, 'Webhook deleted successfully');
    assert.deepEqual((await list(o.token)).body.webhooks.map((w: { url: string }) => w.url), [`${URL_A}/other`]);
    expectError(await remove(o.token, { url: URL_A }), 404, URL_A);
    expectError(await remove(o.token, {}), 400, 'url is required');
  });

  it('DELETE finds a url however it was spelled when added (host case, default port)', async () => {
    const { o } = await org();
    await add(o.token, { url: 'https://Hooks.Example.com:443/x', label: 'a', type: 'task' });
    assert.equal((await list(o.token)).body.webhooks[0].url, 'https://hooks.example.com/x');
    assert.equal((await remove(o.token, { url: 'https://HOOKS.example.com/x' })).status, 200);
  });

  it('subscriptions belong to an organization: resellers act with targetAccountId, agents are refused, other tenants are not found', async () => {
    const { r, o } = await org();
    const made = await add(r.token, { url: URL_A, label: 'by reseller', type: 'task' }, { targetAccountId: o.id });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.equal(made.body.webhooks[0].userId, o.id);
    assert.equal((await list(o.token)).body.webhooks.length, 1);
    expectError(await list(r.token), 403, 'organization');

    const agent = await h().agent(o.id);
    expectError(await list(agent.token), 403);
    expectError(await add(agent.token, { url: `${URL_A}/a`, label: 'x', type: 'task' }), 403);

    const stranger = await h().reseller();
    expectError(await list(stranger.token, { targetAccountId: o.id }), 404);
    expectError(await remove(stranger.token, { url: URL_A }, { targetAccountId: o.id }), 404);
    const other = await h().organization(stranger.id);
    expectError(await remove(other.token, { url: URL_A }), 404);
    assert.equal((await list(o.token)).body.webhooks.length, 1, 'another tenant removed nothing');
  });

  it('an organization may hold at most 100 subscriptions', async () => {
    const { o } = await org();
    for (let i = 0; i < 100; i++) {
      const res = await add(o.token, { url: `${URL_A}/${i}`, label: String(i), type: 'task' });
      assert.equal(res.status, 201);
    }
    expectError(await add(o.token, { url: `${URL_A}/100`, label: '100', type: 'task' }), 409, 'at most 100');
  });

  it('without a token every operation is a 401', async () => {
    for (const [method, body] of [['GET', undefined], ['POST', { url: URL_A, label: 'x', type: 'task' }], ['DELETE', { url: URL_A }]] as const) {
      const res = await h().call(method, '/api/v2/webhooks', { token: null, body });
      assert.equal(res.status, 401, method);
    }
  });
});
