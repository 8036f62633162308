// Which organizations get task events (src/modules/tasks/subscribers.ts), asked by every transaction
// that changes tasks and cached while subscriptions are unchanged: a subscription saved through the
// API is seen by the very next submission, one removed stops the events, and on PostgreSQL one saved
// by another process is seen once its change notification arrives. The cache is really used: a
// subscription written behind its back (PostgreSQL with the triggers off) stays unseen until
// something moves the stamp.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import pg from 'pg';
import { taskSubscribers } from '../../src/modules/tasks/subscribers.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { waitFor } from '../helpers/wait.ts';

forEachEngine('task subscribers', (h) => {
  const among = (subs: ReturnType<typeof taskSubscribers>, orgId: number) =>
    h().database.db.transaction().execute(async (tx) => subs.among(tx, [orgId]));
  const events = async (taskId: string) =>
    (await h().database.db.selectFrom('task_events').select('type').where('task_id', '=', taskId).execute()).map((e) => e.type);
  const submit = async (token: string) => {
    const res = await h().call('POST', '/api/v2/tasks', { token, body: { type: 'ping', scheduledFor: Math.floor(Date.now() / 1000) + 3600 } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return (res.body as { task: { id: string } }).task.id;
  };

  it('a subscription saved or removed through the API is seen by the next submission', async () => {
    const r = await h().reseller();
    const org = await h().organization(r.id);
    assert.deepEqual(await events(await submit(org.token)), [], 'no subscription: no event');
    assert.deepEqual(await events(await submit(org.token)), [], 'still none (answered from the cache)');
    const made = await h().call('POST', '/api/v2/webhooks', { token: org.token, body: { url: 'https://subs.example/a', label: 'subs', type: 'task' } });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.deepEqual(await events(await submit(org.token)), ['task.pending']);
    const removed = await h().call('DELETE', '/api/v2/webhooks', { token: org.token, body: { url: 'https://subs.example/a' } });
    assert.ok(removed.status < 300, JSON.stringify(removed.body));
    assert.deepEqual(await events(await submit(org.token)), []);
  });

  it('PostgreSQL: another process\'s subscription is seen once its notification arrives; one written without it is not', async (t) => {
    if (h().engine !== 'postgres') return t.skip('SQLite: one process per DATA_DIR sees every write itself');
    const r = await h().reseller();
    const org = await h().organization(r.id);
    const subs = taskSubscribers(h().database.db);
    // The stamp is live once the change listener is up: until then nothing is cached.
    await waitFor('a cached answer', async () => {
      await among(subs, org.id);
      return (await among(subs, org.id)).size === 0 ? true : undefined;
    }, 5000, 20);
    const other = new pg.Client({ connectionString: h().config.databaseUrl });
    await other.connect();
    try {
      const insert = (url: string) => other.query(`insert into webhooks (org_id, url, label, type, signing_secret, created_at) values ($1, $2, 'x', 'task', 'not-a-secret', 0)`, [org.id, url]);
      // Triggers off (a replica's apply, or someone bypassing them): no notification, so the cached "no" stands.
      await other.query(`set session_replication_role = replica`);
      await insert('https://subs.example/silent');
      await other.query(`set session_replication_role = origin`);
      assert.equal((await among(subs, org.id)).size, 0, 'the cache answered, not the database');
      // An ordinary write notifies every process: seen within moments, without this process writing anything.
      await insert('https://subs.example/loud');
      await waitFor('the other process\'s subscription', async () => ((await among(subs, org.id)).has(org.id) ? true : undefined), 5000, 20);
    } finally {
      await other.end();
    }
  });
});
