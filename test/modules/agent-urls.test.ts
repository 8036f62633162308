// Agent URLs: a public slug per agent, normalised, checked, unique across the deployment and
// race-free, and tenancy — on both engines.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import type { Reply } from '../helpers/harness.ts';

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  for (const w of words) assert.ok(String(res.body.message).includes(w), `"${res.body.message}" should name ${w}`);
}

let n = 0;
const run = `${process.pid}${Date.now().toString(36)}`;
const unique = (base: string) => `${base}-${run}-${++n}`;

forEachEngine('agent URLs', (h) => {
  async function tenant() {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    return { r, o, agentToken: await h().tokenFor(o.agentId) };
  }
  const post = (token: string, url: string, body?: unknown) => h().call('POST', url, { token, body });
  const get = (token: string, url: string, query?: Record<string, unknown>) => h().call('GET', url, { token, query });

  it('normalises a slug to lower case; set, read back, check; changing it frees the old one', async () => {
    const { o, agentToken } = await tenant();
    const name = unique('WeLoveVida');
    const slug = name.toLowerCase();
    const none = await get(agentToken, '/api/v2/agentUrl');
    expectError(none, 404, `camp${o.agentId}`);
    const c0 = await get(agentToken, '/api/v2/checkAgentUrl', { targetUsername: `camp${o.agentId}`, slug: name });
    assert.equal(c0.status, 200, JSON.stringify(c0.body));
    assert.deepEqual(c0.body, { success: true, available: true, slug });
    const set = await post(o.token, '/api/v2/agentUrl', { targetUsername: `account-${o.agentId}`, slug: `  ${name} ` });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.deepEqual(set.body, { success: true, slug });
    for (const targetUsername of [undefined, `camp${o.agentId}`, String(o.agentId), `ACCOUNT-${o.agentId}`]) {
      const g = await get(o.token, '/api/v2/agentUrl', targetUsername === undefined ? {} : { targetUsername });
      assert.equal(g.status, 200, JSON.stringify(g.body));
      assert.equal(g.body.slug, slug);
    }
    // Its own slug is available to it; setting it again is a no-op.
    assert.equal((await get(agentToken, '/api/v2/checkAgentUrl', { slug: name.toUpperCase() })).body.available, true);
    assert.equal((await post(agentToken, '/api/v2/agentUrl', { targetUsername: `camp${o.agentId}`, slug })).status, 200);
    // Another organization sees it taken, in any case.
    const other = await tenant();
    const c1 = await get(other.agentToken, '/api/v2/checkAgentUrl', { targetUsername: `camp${other.o.agentId}`, slug: name.toUpperCase() });
    assert.deepEqual(c1.body, { success: true, available: false, slug });
    expectError(await post(other.agentToken, '/api/v2/agentUrl', { slug: name }), 409, slug);
    // Changing the slug frees the old one.
    const next = unique('second');
    assert.equal((await post(agentToken, '/api/v2/agentUrl', { slug: next })).body.slug, next);
    assert.equal((await get(agentToken, '/api/v2/agentUrl')).body.slug, next);
    assert.equal((await get(other.agentToken, '/api/v2/checkAgentUrl', { slug })).body.available, true);
    assert.equal((await post(other.agentToken, '/api/v2/agentUrl', { slug })).status, 200);
  });

  it('refuses bad lengths, characters and reserved words with a 400 naming slug', async () => {
    const { agentToken } = await tenant();
    for (const bad of ['ab', 'a'.repeat(41), 'we love', 'we_love', 'we--love', '-we', 'we-', 'wé', 'we.love', 'API', 'docs', 'healthz', 'Chat', 'admin', 'hooks']) {
      expectError(await get(agentToken, '/api/v2/checkAgentUrl', { slug: bad }), 400, 'slug');
      expectError(await post(agentToken, '/api/v2/agentUrl', { slug: bad }), 400, 'slug');
    }
    expectError(await post(agentToken, '/api/v2/agentUrl', {}), 400, 'slug');
    assert.equal((await post(agentToken, '/api/v2/agentUrl', { slug: unique('a-b-c1') })).status, 200);
  });

  it('two organizations racing for one slug: exactly one wins, the other is 409', async () => {
    const a = await tenant();
    const b = await tenant();
    for (let round = 0; round < 3; round++) {
      const slug = unique('race');
      const [ra, rb] = await Promise.all([
        post(a.agentToken, '/api/v2/agentUrl', { slug }),
        post(b.agentToken, '/api/v2/agentUrl', { slug }),
      ]);
      const statuses = [ra.status, rb.status].sort();
      assert.deepEqual(statuses, [200, 409], `${JSON.stringify(ra.body)} ${JSON.stringify(rb.body)}`);
      const winner = ra.status === 200 ? a : b;
      assert.equal((await get(winner.agentToken, '/api/v2/agentUrl')).body.slug, slug);
    }
  });

  it('tenancy: another organization\'s agent is 404 and a check never says whose a slug is', async () => {
    const a = await tenant();
    const b = await tenant();
    const slug = unique('mine');
    assert.equal((await post(a.agentToken, '/api/v2/agentUrl', { slug })).status, 200);
    expectError(await get(b.o.token, '/api/v2/agentUrl', { targetUsername: `camp${a.o.agentId}` }), 404, 'targetUsername');
    expectError(await post(b.o.token, '/api/v2/agentUrl', { targetUsername: `camp${a.o.agentId}`, slug: unique('steal') }), 404, 'targetUsername');
    expectError(await get(b.o.token, '/api/v2/checkAgentUrl', { targetUsername: String(a.o.agentId), slug }), 404, 'targetUsername');
    const c = await get(b.o.token, '/api/v2/checkAgentUrl', { slug });
    assert.deepEqual(Object.keys(c.body).sort(), ['available', 'slug', 'success']);
    // A sibling agent, seen with an agent token, is 404 too; a username that is nobody's is 404.
    const sibling = await h().agent(a.o.id);
    expectError(await get(a.agentToken, '/api/v2/agentUrl', { targetUsername: `camp${sibling.id}` }), 404, 'targetUsername');
    expectError(await get(a.o.token, '/api/v2/agentUrl', { targetUsername: 'nobody@example.com' }), 404, 'targetUsername');
    // The organization names its second agent.
    assert.equal((await post(a.o.token, '/api/v2/agentUrl', { targetUsername: `camp${sibling.id}`, slug: unique('sib') })).status, 200);
  });

  it('an agent created with an email is named by it, in any case', async () => {
    const { o } = await tenant();
    const email = `${unique('agent')}@example.com`;
    const ag = await h().agent(o.id);
    const upd = await h().call('POST', '/api/v2/account', { token: o.token, query: { targetAccountId: ag.id }, body: { email } });
    assert.equal(upd.status, 200, JSON.stringify(upd.body));
    assert.equal((await get(o.token, '/api/v2/account', { targetAccountId: ag.id })).body.username, email);
    const slug = unique('by-email');
    const set = await post(o.token, '/api/v2/agentUrl', { targetUsername: email.toUpperCase(), slug });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.equal((await get(o.token, '/api/v2/agentUrl', { targetUsername: `camp${ag.id}` })).body.slug, slug);
  });
});
