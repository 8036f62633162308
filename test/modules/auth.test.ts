// Authentication (token in the query or a Bearer header), the tenant scope as seen through the
// API, and one-time auth tokens, on both engines.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness } from '../helpers/harness.ts';

const sha256 = (s: string) => crypto.createHash('sha256').update(s, 'utf8').digest('hex');
const ONE_TIME = '/api/v2/auth/account/oneTimeAuthToken';

/** The body of an error without its request id, for comparing two errors. */
const errorShape = (body: any) => ({ success: body.success, message: body.message, keys: Object.keys(body).sort() });

async function invite(h: Harness, token: string, accountId: number, email: string) {
  const r = await h.call('POST', '/api/v2/member', { token, query: { targetAccountId: accountId }, body: { email } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
}

async function members(h: Harness, accountId: number): Promise<string[]> {
  const r = await h.call('GET', '/api/v2/members', { query: { targetAccountId: accountId } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.members.map((m: any) => m.email);
}

let seq = 0;
const email = (name = 'user') => `${name}.${++seq}.${crypto.randomBytes(3).toString('hex')}@example.com`;

forEachEngine('authentication', (h) => {
  it('a request without a token is a 401 with {success:false, message}', async () => {
    for (const [method, url] of [['GET', '/api/v2/tokens'], ['POST', '/api/v2/tokens'], ['GET', '/api/v2/account'], ['GET', ONE_TIME]] as const) {
      const res = await h().call(method, url, { token: null, body: method === 'POST' ? { description: 'x' } : undefined });
      assert.equal(res.status, 401, `${method} ${url}`);
      assert.equal(res.body.success, false);
      assert.equal(typeof res.body.message, 'string');
      assert.match(res.body.message, /token/i);
    }
  });

  it('an empty token is the same as none (401)', async () => {
    const res = await h().call('GET', '/api/v2/account', { token: '' });
    assert.equal(res.status, 401);
    assert.equal(res.body.success, false);
  });

  it('an unknown token is a 401 that does not echo the token', async () => {
    const r = await h().reseller();
    const guesses = [`cpl_${'A'.repeat(43)}`, r.token.slice(0, -1), `${r.token}x`, r.token.toUpperCase(), 'not-a-token-at-all-but-long'];
    for (const token of guesses) {
      const res = await h().call('GET', '/api/v2/account', { token });
      assert.equal(res.status, 401, token);
      assert.equal(res.body.success, false);
      assert.equal(typeof res.body.message, 'string');
      assert.ok(!JSON.stringify(res.body).includes(token), 'the token is echoed');
      assert.ok(!JSON.stringify(res.headers).includes(token), 'the token is echoed in a header');
    }
  });

  it('the token is also accepted as an Authorization: Bearer header', async () => {
    const r = await h().reseller();
    for (const header of [`Bearer ${r.token}`, `bearer ${r.token}`, `Bearer   ${r.token}  `]) {
      const res = await h().call('GET', '/api/v2/account', { token: null, headers: { authorization: header } });
      assert.equal(res.status, 200, header);
      assert.equal(res.body.id, r.id);
    }
    const wrong = await h().call('GET', '/api/v2/account', { token: null, headers: { authorization: `Bearer ${r.token}z` } });
    assert.equal(wrong.status, 401);
    assert.ok(!JSON.stringify(wrong.body).includes(r.token));
    for (const header of [`Basic ${r.token}`, r.token, 'Bearer ', 'Bearer']) {
      const res = await h().call('GET', '/api/v2/account', { token: null, headers: { authorization: header } });
      assert.equal(res.status, 401, header);
    }
  });

  it('the query token takes precedence over the header', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const res = await h().call('GET', '/api/v2/account', { token: o.token, headers: { authorization: `Bearer ${r.token}` } });
    assert.equal(res.status, 200);
    assert.equal(res.body.id, o.id);
  });

  it('a valid token never appears in the error bodies of failing operations', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const failures = [
      await h().call('GET', '/api/v2/account', { token: o.token, query: { targetAccountId: r.id } }),
      await h().call('GET', '/api/v2/account', { token: o.token, query: { targetAccountId: 'abc' } }),
      await h().call('POST', '/api/v2/tokens', { token: o.token, body: { type: 'read', description: 'x' } }),
      await h().call('POST', '/api/v2/tokens', { token: o.token, payload: '{not json', headers: { 'content-type': 'application/json' } }),
      await h().call('DELETE', '/api/v2/tokens', { token: o.token, body: { token: 'cpl_' } }),
      await h().call('GET', ONE_TIME, { token: o.token, query: { email: 'a@example.com' } }),
      await h().call('GET', '/api/v2/noSuchOperation', { token: o.token }),
    ];
    for (const res of failures) {
      assert.ok(res.status >= 400 && res.status < 500, `${res.status} ${JSON.stringify(res.body)}`);
      assert.equal(res.body.success, false);
      assert.ok(!JSON.stringify(res.body).includes(o.token), `token echoed in ${JSON.stringify(res.body)}`);
      assert.ok(!JSON.stringify(res.body).includes(o.token.slice(4, 20)), 'part of the token echoed');
    }
  });

  it('a token of a deleted account stops working (401)', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const del = await h().call('DELETE', '/api/v2/deleteOrganization', { token: r.token, query: { targetResellerId: r.id }, body: { targetOrganizationId: o.id } });
    assert.equal(del.status, 200, JSON.stringify(del.body));
    const res = await h().call('GET', '/api/v2/account', { token: o.token });
    assert.equal(res.status, 401);
  });
});

forEachEngine('tenant scope through the API', (h) => {
  it('an id outside the subtree is a 404 indistinguishable from an id that does not exist', async () => {
    const r1 = await h().reseller();
    const r2 = await h().reseller();
    const o1 = await h().organization(r1.id);
    const o2 = await h().organization(r2.id);
    const missing = 2_000_000_000;
    const probes: [string, string, number][] = [
      ['organization → other reseller\'s org', o1.token, o2.id],
      ['organization → other reseller\'s agent', o1.token, o2.agentId],
      ['organization → its own reseller', o1.token, r1.id],
      ['reseller → other reseller', r1.token, r2.id],
      ['agent token → its organization', await h().tokenFor(o1.agentId), o1.id],
    ];
    for (const [what, token, id] of probes) {
      for (const [method, url] of [['GET', '/api/v2/account'], ['GET', '/api/v2/tokens']] as const) {
        const outside = await h().call(method, url, { token, query: { targetAccountId: id } });
        const absent = await h().call(method, url, { token, query: { targetAccountId: missing } });
        assert.equal(outside.status, 404, `${what} ${url}`);
        assert.equal(absent.status, 404, `${what} ${url} (missing)`);
        assert.deepEqual(
          errorShape({ ...outside.body, message: outside.body.message.replace(String(id), '<id>') }),
          errorShape({ ...absent.body, message: absent.body.message.replace(String(missing), '<id>') }),
          what,
        );
      }
    }
  });

  it('ids beyond the integer range are a 404 like any other unknown id, never a 5xx', async () => {
    const r = await h().reseller();
    for (const id of ['2147483648', '9007199254740991', '99999999999999999999']) {
      for (const [method, url, body] of [
        ['GET', '/api/v2/account', undefined],
        ['GET', '/api/v2/tokens', undefined],
        ['POST', '/api/v2/tokens', { type: 'admin', description: 'x' }],
        ['DELETE', '/api/v2/tokens', { token: 'cpl_abcdefgh…' }],
      ] as const) {
        const res = await h().call(method, url, { token: r.token, query: { targetAccountId: id }, body });
        assert.ok(res.status === 404 || res.status === 400, `${method} ${url} ${id}: ${res.status} ${JSON.stringify(res.body)}`);
        assert.equal(res.body.success, false);
      }
      const one = await h().call('GET', ONE_TIME, { token: r.token, query: { email: 'a@example.com', customerId: id } });
      assert.ok(one.status === 404 || one.status === 400, `oneTimeAuthToken customerId ${id}: ${one.status} ${JSON.stringify(one.body)}`);
    }
  });

  it('an id that is not a positive integer is a 400 naming targetAccountId', async () => {
    const r = await h().reseller();
    for (const id of ['abc', '0', '-1', '1.5']) {
      const res = await h().call('GET', '/api/v2/account', { token: r.token, query: { targetAccountId: id } });
      assert.equal(res.status, 400, id);
      assert.match(res.body.message, /^targetAccountId /);
    }
  });

  it('a token acts on its own account and everything below it', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const a = await h().agent(o.id);
    for (const [token, ids] of [[r.token, [r.id, o.id, o.agentId, a.id]], [o.token, [o.id, o.agentId, a.id]], [a.token, [a.id]]] as const) {
      for (const id of ids) {
        const res = await h().call('GET', '/api/v2/account', { token, query: { targetAccountId: id } });
        assert.equal(res.status, 200, `${id}`);
        assert.equal(res.body.id, id);
      }
    }
  });
});

forEachEngine('one-time auth tokens', (h) => {
  it('only a reseller or partner token may generate one (organization and agent → 403)', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const a = await h().agent(o.id);
    const user = email();
    await invite(h(), r.token, o.id, user);
    for (const token of [o.token, a.token]) {
      const res = await h().call('GET', ONE_TIME, { token, query: { email: user, customerId: o.id } });
      assert.equal(res.status, 403);
      assert.equal(res.body.success, false);
      assert.match(res.body.message, /Reseller|Partner/);
    }
    const byPartner = await h().call('GET', ONE_TIME, { query: { email: user, customerId: o.id } });
    assert.equal(byPartner.status, 200);
    assert.equal(byPartner.body.accountId, o.id);
  });

  it('email is required and must be a valid address (400 naming email)', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const missing = await h().call('GET', ONE_TIME, { token: r.token, query: { customerId: o.id } });
    assert.equal(missing.status, 400);
    assert.deepEqual([missing.body.success, missing.body.message], [false, 'email is required']);
    for (const bad of ['', 'not-an-email', 'a@b', 'two words@example.com', '@example.com']) {
      const res = await h().call('GET', ONE_TIME, { token: r.token, query: { email: bad, customerId: o.id } });
      assert.equal(res.status, 400, bad);
      assert.match(res.body.message, /^email /, bad);
    }
  });

  it('customerId must be an account id (400 naming customerId)', async () => {
    const r = await h().reseller();
    for (const bad of ['acct_123', '12a', '-4', '']) {
      const res = await h().call('GET', ONE_TIME, { token: r.token, query: { email: 'a@example.com', customerId: bad } });
      assert.equal(res.status, 400, bad);
      assert.match(res.body.message, /customerId/, bad);
    }
  });

  it('by customerId: the token works exactly once and acts as that organization', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const user = email();
    await invite(h(), r.token, o.id, user);
    const res = await h().call('GET', ONE_TIME, { token: r.token, query: { email: user.toUpperCase(), customerId: String(o.id) } });
    assert.equal(res.status, 200);
    assert.equal(res.body.success, true);
    assert.equal(typeof res.body.message, 'string');
    const authToken = res.body.authToken as string;
    assert.equal(typeof authToken, 'string');
    assert.ok(authToken.length >= 40);
    assert.notEqual(authToken, r.token);

    const first = await h().call('GET', '/api/v2/account', { token: authToken });
    assert.equal(first.status, 200);
    assert.equal(first.body.id, o.id);
    const second = await h().call('GET', '/api/v2/account', { token: authToken });
    assert.equal(second.status, 401);
    assert.equal(second.body.success, false);
    assert.ok(!JSON.stringify(second.body).includes(authToken));
    // The issuing reseller's own token is untouched.
    assert.equal((await h().call('GET', '/api/v2/account', { token: r.token })).status, 200);
  });

  it('a one-time token is single-use even when sent as a Bearer header, and even under concurrent use', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const user = email();
    await invite(h(), r.token, o.id, user);
    const issue = async () => (await h().call('GET', ONE_TIME, { token: r.token, query: { email: user, customerId: o.id } })).body.authToken as string;

    const viaHeader = await issue();
    const headers = { authorization: `Bearer ${viaHeader}` };
    assert.equal((await h().call('GET', '/api/v2/account', { token: null, headers })).status, 200);
    assert.equal((await h().call('GET', '/api/v2/account', { token: null, headers })).status, 401);

    const raced = await issue();
    const results = await Promise.all([1, 2, 3, 4, 5].map(() => h().call('GET', '/api/v2/account', { token: raced })));
    assert.deepEqual(results.map((x) => x.status).sort(), [200, 401, 401, 401, 401]);
  });

  it('a one-time token is scoped to its account: it cannot reach the reseller or its other organizations', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const other = await h().organization(r.id);
    const user = email();
    await invite(h(), r.token, o.id, user);
    const attempts: [string, Record<string, unknown>][] = [
      ['/api/v2/account', { targetAccountId: other.id }],
      ['/api/v2/account', { targetAccountId: other.agentId }],
      ['/api/v2/account', { targetAccountId: r.id }],
      ['/api/v2/tokens', { targetAccountId: other.id }],
    ];
    for (const [url, query] of attempts) {
      const authToken = (await h().call('GET', ONE_TIME, { token: r.token, query: { email: user, customerId: o.id } })).body.authToken;
      const res = await h().call('GET', url, { token: authToken, query });
      assert.equal(res.status, 404, `${url} ${JSON.stringify(query)}`);
    }
    // Nor can it mint further one-time tokens: it acts as an organization.
    const authToken = (await h().call('GET', ONE_TIME, { token: r.token, query: { email: user, customerId: o.id } })).body.authToken;
    const res = await h().call('GET', ONE_TIME, { token: authToken, query: { email: user, customerId: other.id } });
    assert.equal(res.status, 403);
  });

  it('an expired one-time token is refused with 401, even unused', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const user = email();
    await invite(h(), r.token, o.id, user);
    const before = Date.now();
    const res = await h().call('GET', ONE_TIME, { token: r.token, query: { email: user, customerId: o.id } });
    const authToken = res.body.authToken as string;
    const row = await h().database.db.selectFrom('tokens').selectAll().where('hash', '=', sha256(authToken)).executeTakeFirstOrThrow();
    assert.equal(row.type, 'one-time');
    assert.equal(row.account_id, o.id);
    assert.equal(row.used_at, null);
    const ttl = h().config.oneTimeTokenTtlSeconds * 1000;
    assert.ok(row.expires_at! >= before + ttl && row.expires_at! <= Date.now() + ttl, 'expires after the configured lifetime');
    assert.ok(ttl <= 3600_000, 'one-time tokens live minutes, not longer');
    assert.equal(res.body.expiresAt, Math.floor(row.expires_at! / 1000));

    await h().database.db.updateTable('tokens').set({ expires_at: Date.now() - 1000 }).where('id', '=', row.id).execute();
    const refused = await h().call('GET', '/api/v2/account', { token: authToken });
    assert.equal(refused.status, 401);
    assert.equal(refused.body.success, false);
    assert.match(refused.body.message, /expired/);
    assert.ok(!JSON.stringify(refused.body).includes(authToken));
  });

  it('one-time tokens are stored only as hashes and are not listed among the account\'s tokens', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const user = email();
    await invite(h(), r.token, o.id, user);
    const authToken = (await h().call('GET', ONE_TIME, { token: r.token, query: { email: user, customerId: o.id } })).body.authToken as string;
    const rows = await h().database.db.selectFrom('tokens').selectAll().where('account_id', '=', o.id).execute();
    assert.equal(rows.length, 2);
    for (const row of rows) for (const v of Object.values(row)) assert.ok(!String(v).includes(authToken));
    const listed = await h().call('GET', '/api/v2/tokens', { token: o.token });
    assert.equal(listed.body.tokens.length, 1);
    assert.equal(listed.body.tokens[0].type, 'admin');
  });

  it('by customerId an email that is not a member of the account is a 404 and adds no member', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const stranger = email('stranger');
    const res = await h().call('GET', ONE_TIME, { token: r.token, query: { email: stranger, customerId: o.id } });
    assert.equal(res.status, 404);
    assert.equal(res.body.success, false);
    assert.ok(!(await members(h(), o.id)).includes(stranger));
  });

  it('by customerId for an agent account the membership of its organization counts, and the token acts as the agent', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const a = await h().agent(o.id);
    const user = email();
    await invite(h(), r.token, o.id, user);
    const res = await h().call('GET', ONE_TIME, { token: r.token, query: { email: user, customerId: a.id } });
    assert.equal(res.status, 200);
    const me = await h().call('GET', '/api/v2/account', { token: res.body.authToken });
    assert.equal(me.body.id, a.id);
  });

  it('by externalAccountId the email is added as a member when absent, once', async () => {
    const r = await h().reseller();
    const ext = `acct_${crypto.randomBytes(4).toString('hex')}`;
    const o = await h().organization(r.id, { externalAccountId: ext });
    const user = email('new');
    assert.ok(!(await members(h(), o.id)).includes(user));
    const res = await h().call('GET', ONE_TIME, { token: r.token, query: { email: user, externalAccountId: ext } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.success, true);
    assert.deepEqual((await members(h(), o.id)).filter((m) => m === user), [user]);
    const me = await h().call('GET', '/api/v2/account', { token: res.body.authToken });
    assert.equal(me.status, 200);
    assert.equal(me.body.id, o.id);

    const again = await h().call('GET', ONE_TIME, { token: r.token, query: { email: user.toUpperCase(), externalAccountId: ext } });
    assert.equal(again.status, 200);
    assert.notEqual(again.body.authToken, res.body.authToken);
    assert.deepEqual((await members(h(), o.id)).filter((m) => m === user), [user]);
  });

  it('an unknown externalAccountId is a 404 and adds nobody anywhere', async () => {
    const r = await h().reseller();
    const user = email();
    const res = await h().call('GET', ONE_TIME, { token: r.token, query: { email: user, externalAccountId: 'acct_does_not_exist' } });
    assert.equal(res.status, 404);
    assert.equal(res.body.success, false);
    const rows = await h().database.db.selectFrom('users').select('id').where('email', '=', user).execute();
    assert.equal(rows.length, 0);
  });

  it('by email alone it finds the organization the email is a member of within the caller\'s subtree', async () => {
    const r = await h().reseller();
    await h().organization(r.id);
    const o = await h().organization(r.id);
    const user = email();
    await invite(h(), r.token, o.id, user);
    const res = await h().call('GET', ONE_TIME, { token: r.token, query: { email: user } });
    assert.equal(res.status, 200);
    const me = await h().call('GET', '/api/v2/account', { token: res.body.authToken });
    assert.equal(me.body.id, o.id);
    // The partner above finds it too.
    const byPartner = await h().call('GET', ONE_TIME, { query: { email: user } });
    assert.equal(byPartner.status, 200);
    assert.equal(byPartner.body.accountId, o.id);
  });

  it('by email alone an email that is a member nowhere in the subtree is a 404', async () => {
    const r = await h().reseller();
    const res = await h().call('GET', ONE_TIME, { token: r.token, query: { email: email('nobody') } });
    assert.equal(res.status, 404);
    assert.equal(res.body.success, false);
    assert.equal(typeof res.body.message, 'string');
  });

  it("a reseller cannot issue one for another reseller's organization, by any key (404 as if absent)", async () => {
    const r1 = await h().reseller();
    const r2 = await h().reseller();
    const ext = `acct_${crypto.randomBytes(4).toString('hex')}`;
    const theirs = await h().organization(r2.id, { externalAccountId: ext });
    const user = email('theirs');
    await invite(h(), r2.token, theirs.id, user);
    const before = await h().database.db.selectFrom('tokens').select('id').execute();

    const byId = await h().call('GET', ONE_TIME, { token: r1.token, query: { email: user, customerId: theirs.id } });
    const byMissingId = await h().call('GET', ONE_TIME, { token: r1.token, query: { email: user, customerId: 2_000_000_000 } });
    assert.equal(byId.status, 404);
    assert.equal(byMissingId.status, 404);
    assert.equal(byId.body.message.replace(String(theirs.id), '<id>'), byMissingId.body.message.replace('2000000000', '<id>'));

    const byExt = await h().call('GET', ONE_TIME, { token: r1.token, query: { email: user, externalAccountId: ext } });
    const byMissingExt = await h().call('GET', ONE_TIME, { token: r1.token, query: { email: user, externalAccountId: `${ext}x` } });
    assert.equal(byExt.status, 404);
    assert.equal(byMissingExt.status, 404);
    assert.equal(byExt.body.message.replace(ext, '<ext>'), byMissingExt.body.message.replace(`${ext}x`, '<ext>'));

    const byEmail = await h().call('GET', ONE_TIME, { token: r1.token, query: { email: user } });
    assert.equal(byEmail.status, 404);

    const after = await h().database.db.selectFrom('tokens').select('id').execute();
    assert.equal(after.length, before.length, 'a token was issued');
    assert.deepEqual((await members(h(), theirs.id)).filter((m) => m === user), [user]);
  });

  it('a reseller cannot issue one for its partner or for itself being reached through another reseller', async () => {
    const r1 = await h().reseller();
    const r2 = await h().reseller();
    const user = email();
    await invite(h(), h().adminToken, h().partnerId, user);
    const toPartner = await h().call('GET', ONE_TIME, { token: r1.token, query: { email: user, customerId: h().partnerId } });
    assert.equal(toPartner.status, 404);
    const toSibling = await h().call('GET', ONE_TIME, { token: r1.token, query: { email: user, customerId: r2.id } });
    assert.equal(toSibling.status, 404);
  });
});
