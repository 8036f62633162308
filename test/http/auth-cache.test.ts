// Authentication answers must not depend on whether the lookup was cached (SQLite caches it while
// nothing may have changed accounts or tokens; PostgreSQL never does). Each case uses the token
// first, so a cache holds it, then changes the database in some way and uses it again.
import assert from 'node:assert/strict';
import path from 'node:path';
import { it } from 'node:test';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { AuthCache } from '../../src/http/auth.ts';
import { hashToken } from '../../src/lib/crypto.ts';
import type { TokenWithAccount } from '../../src/modules/tokens/repository.ts';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness } from '../helpers/harness.ts';

const whoAmI = async (h: Harness, token: string) => {
  const r = await h.call('GET', '/api/v2/account', { token });
  return r.status === 200 ? { id: r.body.id as number, name: r.body.details.name as string } : r.status;
};

/** Runs `sql` on a connection of its own, as another process would. */
async function fromOutside(h: Harness, sql: string, params: unknown[]): Promise<void> {
  if (h.engine === 'sqlite') {
    const other = new SQLite(path.join(h.config.dataDir, 'callplane.db'));
    try {
      other.prepare(sql).run(...params);
    } finally {
      other.close();
    }
    return;
  }
  let n = 0;
  const client = new pg.Client({ connectionString: h.config.databaseUrl });
  await client.connect();
  try {
    await client.query(sql.replace(/\?/g, () => `$${++n}`), params);
  } finally {
    await client.end();
  }
}

forEachEngine('authentication cache', (h) => {
  it('is kept on SQLite only', () => {
    assert.equal(AuthCache.for(h().database.db) !== undefined, h().engine === 'sqlite');
  });

  it('a change of the account is seen by the next request with the same token', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    assert.equal((await whoAmI(h(), o.token) as { id: number }).id, o.id);
    const up = await h().call('POST', '/api/v2/account', { token: o.token, body: { orgName: 'Renamed org' } });
    assert.equal(up.status, 200, JSON.stringify(up.body));
    assert.equal((await whoAmI(h(), o.token) as { name: string }).name, 'Renamed org');
    // Through the application's own connection, outside any service.
    await h().database.db.updateTable('accounts').set({ name: 'Renamed again' }).where('id', '=', o.id).execute();
    assert.equal((await whoAmI(h(), o.token) as { name: string }).name, 'Renamed again');
  });

  it('deleting a token, or the account, or an ancestor (by cascade) ends its use at once', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const agent = await h().agent(o.id);
    const second = await h().tokenFor(o.id);
    for (const t of [o.token, second, agent.token]) assert.notEqual(await whoAmI(h(), t), 401);
    const del = await h().call('DELETE', '/api/v2/tokens', { token: o.token, body: { token: second } });
    assert.equal(del.status, 200, JSON.stringify(del.body));
    assert.equal(await whoAmI(h(), second), 401);
    assert.notEqual(await whoAmI(h(), o.token), 401);
    const gone = await h().call('DELETE', '/api/v2/deleteOrganization', { token: r.token, query: { targetResellerId: r.id }, body: { targetOrganizationId: o.id } });
    assert.equal(gone.status, 200, JSON.stringify(gone.body));
    assert.equal(await whoAmI(h(), o.token), 401);
    assert.equal(await whoAmI(h(), agent.token), 401, 'the agent\'s token went with its organization');
  });

  it('a write by another connection (another process, an operator\'s shell) is seen at once', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    assert.equal((await whoAmI(h(), o.token) as { id: number }).id, o.id);
    await fromOutside(h(), 'update accounts set name = ? where id = ?', ['Renamed outside', o.id]);
    assert.equal((await whoAmI(h(), o.token) as { name: string }).name, 'Renamed outside');
    await fromOutside(h(), 'delete from tokens where hash = ?', [hashToken(o.token)]);
    assert.equal(await whoAmI(h(), o.token), 401);
  });
});

it('AuthCache keeps nothing looked up while a write may have happened, and never a one-time token', () => {
  let stamp = 'a';
  const cache = new AuthCache(() => stamp);
  const found = (type: 'admin' | 'one-time'): TokenWithAccount => ({
    token: { id: 1, type, expires_at: null, used_at: null }, account: { id: 7 } as TokenWithAccount['account'], suspended: null,
  });
  assert.equal(cache.get('h1', 'a'), undefined);
  cache.set('h1', found('admin'), 'a');
  assert.equal(cache.get('h1', 'a')?.account.id, 7);
  cache.set('h2', found('one-time'), 'a');
  assert.equal(cache.get('h2', 'a'), undefined);
  // The lookup began at 'a'; a write moved the stamp to 'b' before it was stored.
  stamp = 'b';
  cache.set('h3', found('admin'), 'a');
  assert.equal(cache.get('h3', 'b'), undefined);
  assert.equal(cache.get('h1', 'b'), undefined, 'a new stamp drops every entry');
});
