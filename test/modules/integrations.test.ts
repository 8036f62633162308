// An organization's integration data: GET and PUT /api/v2/integration/{slug}/{version}, appData
// sealed at rest and masked in answers, merged key by key, bounded, and 404 for an integration
// the organization does not have (or another organization's).
// @engines sqlite
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import type { Reply } from '../helpers/harness.ts';

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  for (const w of words) assert.ok(res.body.message.includes(w), `"${res.body.message}" should name ${w}`);
}
const secret = () => crypto.randomBytes(16).toString('hex');
const masked = (s: string) => `****${s.slice(-4)}`;

forEachEngine('integration data', (h) => {
  async function tenant(apiToken = secret()) {
    const r = await h().reseller();
    const o = await h().organization(r.id, {
      integrations: [{ appId: 'acme', appVersion: 'v1', appData: { apiToken, region: 'eu' } }],
    });
    return { r, o, apiToken };
  }
  const url = (slug: string, version: string) => `/api/v2/integration/${slug}/${version}`;
  const get = (token: string, slug = 'acme', version = 'v1', query: Record<string, unknown> = {}) =>
    h().call('GET', url(slug, version), { token, query });
  const put = (token: string, body: unknown, slug = 'acme', version = 'v1', query: Record<string, unknown> = {}) =>
    h().call('PUT', url(slug, version), { token, body, query });
  const storedRow = async (orgId: number) =>
    (await h().database.db.selectFrom('integrations').selectAll().where('account_id', '=', orgId).executeTakeFirstOrThrow());

  it('GET answers the appData with secrets masked', async () => {
    const { o, apiToken } = await tenant();
    const res = await get(o.token);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.success, true);
    assert.equal(res.body.appId, 'acme');
    assert.equal(res.body.appVersion, 'v1');
    assert.deepEqual(res.body.appData, { apiToken: masked(apiToken), region: 'eu' });
    assert.ok(!JSON.stringify(res.body).includes(apiToken));
  });

  it('PUT merges key by key, null removes, a masked value sent back keeps the secret; sealed at rest', async () => {
    const { o, apiToken } = await tenant();
    const newSecret = secret();
    const res = await put(o.token, { appData: { accountToken: newSecret, nested: { password: 'p4ssw0rd-long-one', url: 'https://x.example' }, region: null } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.message, 'Integration data updated successfully');
    assert.deepEqual(res.body.appData, {
      apiToken: masked(apiToken), accountToken: masked(newSecret), nested: { password: masked('p4ssw0rd-long-one'), url: 'https://x.example' },
    });
    // GET → PUT of what it showed changes nothing secret.
    const shown = (await get(o.token)).body.appData;
    assert.equal((await put(o.token, { appData: shown })).status, 200);
    const row = await storedRow(o.id);
    for (const plain of [apiToken, newSecret, 'p4ssw0rd-long-one', 'x.example']) assert.ok(!row.app_data.includes(plain), 'stored row holds plaintext');
    assert.deepEqual(h().box.openJson(row.app_data), {
      apiToken, accountToken: newSecret, nested: { password: 'p4ssw0rd-long-one', url: 'https://x.example' },
    });
    // The organization's own view (GET /api/v2/account) masks it the same way.
    const account = await h().call('GET', '/api/v2/account', { token: o.token });
    assert.deepEqual(account.body.details.integrations[0].appData, res.body.appData);
  });

  it('refuses appData that is not a bounded object, naming the field', async () => {
    const { o } = await tenant();
    expectError(await put(o.token, {}), 400, 'appData');
    for (const appData of [null, 'x', 3, ['a']]) expectError(await put(o.token, { appData }), 400, 'appData');
    expectError(await put(o.token, { appData: { a: { b: { c: { d: { e: {} } } } } } }), 400, 'appData.a.b.c.d.e', 'nested');
    assert.equal((await put(o.token, { appData: { a: { b: { c: { d: { e: 1 } } } } } })).status, 200);
    expectError(await put(o.token, { appData: { big: 'x'.repeat(4001) } }), 400, 'appData.big');
    expectError(await put(o.token, { appData: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, 1])) }), 400, 'appData', 'keys');
    expectError(await put(o.token, { appData: { ['k'.repeat(101)]: 1 } }), 400, 'appData', 'key');
    expectError(await put(o.token, { appData: Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`k${i}`, 'x'.repeat(4000)])) }), 400, 'appData', 'too large');
    // The stored data is unchanged by refused PUTs.
    assert.equal((await get(o.token)).body.appData.region, 'eu');
  });

  it('404 for an integration the organization does not have, or another version of it', async () => {
    const { o } = await tenant();
    expectError(await get(o.token, 'other', 'v1'), 404, 'Integration data not found');
    expectError(await get(o.token, 'acme', 'v2'), 404, 'acme v2');
    expectError(await put(o.token, { appData: { a: 1 } }, 'other', 'v1'), 404);
    expectError(await put(o.token, { appData: { a: 1 } }, 'acme', 'v2'), 404);
  });

  it("tenancy: resellers name the organization; another organization's integration is 404; agents are refused", async () => {
    const a = await tenant();
    const b = await tenant();
    const got = await get(a.r.token, 'acme', 'v1', { targetAccountId: a.o.id });
    assert.equal(got.status, 200, JSON.stringify(got.body));
    assert.equal((await put(h().adminToken, { appData: { region: 'us' } }, 'acme', 'v1', { targetAccountId: a.o.id })).body.appData.region, 'us');
    expectError(await get(a.r.token), 403);
    expectError(await get(b.o.token, 'acme', 'v1', { targetAccountId: a.o.id }), 404, 'targetAccountId');
    expectError(await get(b.r.token, 'acme', 'v1', { targetAccountId: a.o.id }), 404, 'targetAccountId');
    expectError(await put(b.r.token, { appData: { region: 'x' } }, 'acme', 'v1', { targetAccountId: a.o.id }), 404, 'targetAccountId');
    const agent = await h().agent(a.o.id);
    expectError(await get(agent.token), 403);
    expectError(await put(agent.token, { appData: { region: 'x' } }), 403);
    assert.equal((await get(a.o.token)).body.appData.region, 'us');
    assert.equal((await get(b.o.token)).body.appData.region, 'eu');
  });

  it('concurrent PUTs of different keys both keep theirs', async () => {
    const { o } = await tenant();
    const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => put(o.token, { appData: { [`k${i}`]: i } })));
    for (const r of replies) assert.equal(r.status, 200, JSON.stringify(r.body));
    const data = h().box.openJson<Record<string, unknown>>((await storedRow(o.id)).app_data);
    for (let i = 0; i < 10; i++) assert.equal(data[`k${i}`], i);
  });
});
