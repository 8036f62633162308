// Authentication answers must not depend on whether the lookup was cached (kept while nothing may
// have changed accounts or tokens: on SQLite this process sees every write; on PostgreSQL every
// process hears every commit through a trigger's NOTIFY). Each case uses the token first, so a
// cache holds it, then changes the database in some way and uses it again.
import assert from 'node:assert/strict';
import path from 'node:path';
import { it } from 'node:test';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { openDatabase } from '../../src/db/index.ts';
import { AuthCache } from '../../src/http/auth.ts';
import { hashToken } from '../../src/lib/crypto.ts';
import type { TokenWithAccount } from '../../src/db/types.ts';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness } from '../helpers/harness.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

const whoAmI = async (h: Harness, token: string) => {
  const r = await h.call('GET', '/api/v2/account', { token });
  return r.status === 200 ? { id: r.body.id as number, name: r.body.details.name as string } : r.status;
};

/**
 * Runs `sql` on a connection of its own, as an operator's shell would. `quietly` (PostgreSQL): with
 * triggers off (session_replication_role replica), so no process hears of it.
 */
async function fromOutside(h: Harness, sql: string, params: unknown[], quietly = false): Promise<void> {
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
    if (quietly) await client.query('set session_replication_role = replica');
    await client.query(sql.replace(/\?/g, () => `$${++n}`), params);
  } finally {
    await client.end();
  }
}

forEachEngine('authentication cache', (h) => {
  it('is kept on both engines', () => {
    assert.ok(AuthCache.for(h().database.db));
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
    // SQLite sees it from the next turn of the event loop (data_version is read once a turn);
    // PostgreSQL when the trigger's NOTIFY arrives, which an operator's shell does not wait for
    // (callplane's own writes do: below).
    const seen = async <T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean) => h().engine === 'sqlite'
      ? new Promise((r) => setImmediate(r)).then(read) : waitFor(what, async () => { const v = await read(); return ok(v) ? v : undefined; }, 1000, 5);
    assert.equal((await seen('the new name', () => whoAmI(h(), o.token), (v) => (v as { name: string }).name === 'Renamed outside') as { name: string }).name, 'Renamed outside');
    await fromOutside(h(), 'delete from tokens where hash = ?', [hashToken(o.token)]);
    assert.equal(await seen('the token refused', () => whoAmI(h(), o.token), (v) => v === 401), 401);
  });

  it('a token deleted by another callplane process fails here on the very next request', async (t) => {
    if (h().engine === 'sqlite') return t.skip('one process per DATA_DIR: another connection\'s write is the case above');
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const second = await h().tokenFor(o.id);
    assert.notEqual(await whoAmI(h(), second), 401);
    // Another process: a database handle of its own (its own pool and its own listener).
    const other = openDatabase({ databaseUrl: h().config.databaseUrl });
    try {
      const stamp = AuthCache.for(other.db)!.stamp; // starts its listener: its writes then wait until every process was sent them
      await waitFor('the other process to listen', async () => (stamp().startsWith('off') ? undefined : true), 5000, 20);
      await other.db.deleteFrom('tokens').where('hash', '=', hashToken(second)).execute();
      assert.equal(await whoAmI(h(), second), 401, 'refused at once, without waiting');
    } finally {
      await other.close();
    }
  });

  it('really is a cache: a change nobody announces is not seen until one is announced', async (t) => {
    if (h().engine === 'sqlite') return t.skip('SQLite announces nothing: data_version sees every commit');
    const r = await h().reseller();
    const o = await h().organization(r.id);
    assert.equal((await whoAmI(h(), o.token) as { id: number }).id, o.id);
    await fromOutside(h(), 'update accounts set name = ? where id = ?', ['Renamed unannounced', o.id], true);
    await sleep(100);
    assert.notEqual((await whoAmI(h(), o.token) as { name: string }).name, 'Renamed unannounced', 'served from the cache');
    await fromOutside(h(), "select pg_notify('callplane_changed', 'accounts')", []);
    await waitFor('the announced change', async () => ((await whoAmI(h(), o.token) as { name: string }).name === 'Renamed unannounced' ? true : undefined), 1000, 5);
  });

  it('caches nothing while it cannot hear changes (its listener lost), and again once it hears', async (t) => {
    if (h().engine === 'sqlite') return t.skip('no listener on SQLite');
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const name = async () => (await whoAmI(h(), o.token) as { name: string }).name;
    await name();
    // End the harness's listening connection(s) on the change channel, as a network cut would.
    await fromOutside(h(), `select pg_terminate_backend(pid) from pg_stat_activity
      where datname = current_database() and pid <> pg_backend_pid() and query ilike '%listen "callplane_changed"%'`, []);
    await fromOutside(h(), 'update accounts set name = ? where id = ?', ['Renamed while deaf', o.id], true);
    await waitFor('the lost listener to be noticed', async () => ((await name()) === 'Renamed while deaf' ? true : undefined), 1000, 5);
    await fromOutside(h(), 'update accounts set name = ? where id = ?', ['Renamed while deaf again', o.id], true);
    assert.equal(await name(), 'Renamed while deaf again', 'not cached while deaf');
    // Reconnected (within a second or so): cached again, so an unannounced change goes unseen.
    await waitFor('the listener back', async () => (AuthCache.for(h().database.db)!.stamp().startsWith('off') ? undefined : true), 5000, 20);
    await name();
    await fromOutside(h(), 'update accounts set name = ? where id = ?', ['Unannounced after', o.id], true);
    assert.equal(await name(), 'Renamed while deaf again');
    await fromOutside(h(), "select pg_notify('callplane_changed', 'accounts')", []);
    await waitFor('the announced change', async () => ((await name()) === 'Unannounced after' ? true : undefined), 1000, 5);
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
