// The outbox dispatcher on both engines: task events become one delivery per task subscription of
// their organization, every event is marked (subscribers or not), batches drain a backlog, and on
// PostgreSQL concurrent dispatchers never turn one event into two deliveries for a subscription.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { newId } from '../../src/lib/ids.ts';
import { dispatchTaskEvents, taskEventPayload } from '../../src/modules/webhooks/dispatcher.ts';
import { taskRepo } from '../../src/modules/tasks/repository.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { insertTasks, secondDatabase, tenant } from '../queue/fixtures.ts';

forEachEngine('webhook outbox dispatcher', (h) => {
  /** `n` events for one task of the organization, oldest first. */
  async function events(t: { orgId: number; agentId: number }, n: number): Promise<string[]> {
    const db = h().database.db;
    const [taskId] = await insertTasks(db, t, [{}]);
    const ids: string[] = [];
    const now = Date.now();
    await db.transaction().execute(async (tx) => {
      for (let i = 0; i < n; i++) {
        const id = newId('evt', now);
        await tx.insertInto('task_events').values({
          id, org_id: t.orgId, task_id: taskId, type: 'task.running',
          payload: JSON.stringify({ type: 'task.running', task: { id: taskId, state: 'running', n: i } }), created_at: now,
        }).execute();
        ids.push(id);
      }
    });
    return ids;
  }

  async function subscribe(orgId: number, type: string, url: string): Promise<number> {
    const row = await h().database.db.insertInto('webhooks').values({
      org_id: orgId, url, label: type, type, signing_secret: h().box.seal('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'), created_at: Date.now(),
    }).returning('id').executeTakeFirstOrThrow();
    return row.id;
  }

  const undispatched = async () => (await h().database.db.selectFrom('task_events').select('id').where('dispatched', '=', 0).execute()).length;
  const deliveriesOf = (orgId: number) => h().database.db.selectFrom('webhook_deliveries').selectAll().where('org_id', '=', orgId).execute();

  it('drains a backlog larger than a batch: one delivery per event and task subscription, every event marked', async () => {
    const busy = await tenant(h());
    const quiet = await tenant(h());
    const a = await subscribe(busy.orgId, 'task', 'https://a.example.com/');
    const b = await subscribe(busy.orgId, 'task', 'https://b.example.com/');
    await subscribe(busy.orgId, 'conversation', 'https://c.example.com/');
    const busyEvents = await events(busy, 260);
    await events(quiet, 250);
    let total = 0;
    for (let round = 0; round < 10; round++) {
      const r = await dispatchTaskEvents(h().database.db, taskRepo, { batch: 100, maxAttempts: 8 });
      total += r.events;
      if (r.events === 0) break;
    }
    assert.equal(total, 510);
    assert.equal(await undispatched(), 0, 'every event is marked, subscribed or not');
    const made = await deliveriesOf(busy.orgId);
    assert.equal(made.length, 260 * 2);
    for (const hook of [a, b]) {
      assert.deepEqual(made.filter((d) => d.webhook_id === hook).map((d) => d.event_id).sort(), [...busyEvents].sort());
    }
    const one = made[0];
    assert.equal(one.kind, 'webhook');
    assert.equal(one.state, 'pending');
    assert.equal(one.max_attempts, 8);
    assert.equal(one.event_type, 'task.running');
    const payload = JSON.parse(one.payload!);
    assert.deepEqual(Object.keys(payload).sort(), ['data', 'timestamp', 'type']);
    assert.equal(payload.type, 'task.running');
    assert.equal(payload.data.state, 'running');
    assert.equal((await deliveriesOf(quiet.orgId)).length, 0);
    // Nothing left: a further pass makes nothing.
    assert.deepEqual(await dispatchTaskEvents(h().database.db, taskRepo, { maxAttempts: 8 }), { events: 0, deliveries: 0 });
  });

  it('a batch after a cursor starts past it, and the next look from the oldest finds an event that committed late with an older id', async () => {
    const t = await tenant(h());
    await subscribe(t.orgId, 'task', 'https://cursor.example.com/');
    const ids = await events(t, 6);
    const db = h().database.db;
    const first = await dispatchTaskEvents(db, taskRepo, { batch: 2, maxAttempts: 8 });
    assert.equal(first.last, ids[1]);
    // Committed now, but with an id older than the cursor (its id was taken before the others committed).
    const late = newId('evt', Date.now() - 60_000);
    const [taskId] = await insertTasks(db, t, [{}]);
    await db.insertInto('task_events').values({ id: late, org_id: t.orgId, task_id: taskId, type: 'task.running', payload: '{}', created_at: Date.now() }).execute();
    const seen: string[] = [];
    for (let after: string | undefined = first.last; ;) {
      const r = await dispatchTaskEvents(db, taskRepo, { batch: 2, maxAttempts: 8, after });
      if (r.events === 0) break;
      after = r.last;
      seen.push(...(await deliveriesOf(t.orgId)).map((d) => d.event_id).filter((id) => !seen.includes(id) && id !== ids[0] && id !== ids[1]));
    }
    assert.deepEqual(seen.sort(), ids.slice(2).sort(), 'after the cursor: only the newer events');
    const fromOldest = await dispatchTaskEvents(db, taskRepo, { batch: 2, maxAttempts: 8 });
    assert.equal(fromOldest.events, 1);
    assert.equal(fromOldest.last, late);
    assert.equal(await undispatched(), 0);
  });

  it('the payload is {type, timestamp, data} with the task as the event stored it', () => {
    const body = taskEventPayload({ type: 'task.finished', created_at: Date.UTC(2026, 10, 22, 4, 45, 55, 123), payload: JSON.stringify({ type: 'task.finished', task: { id: 'tsk_1', state: 'finished' } }) });
    assert.equal(body, '{"type":"task.finished","timestamp":"2026-11-22T04:45:55.123Z","data":{"id":"tsk_1","state":"finished"}}');
  });

  it('dispatchers running at once (several workers) never make two deliveries of one event for one subscription', async () => {
    const t = await tenant(h());
    await subscribe(t.orgId, 'task', 'https://a.example.com/');
    const ids = await events(t, 400);
    const other = secondDatabase(h());
    try {
      const pools = [h().database, other.database, h().database, other.database];
      const runOne = async (database: typeof pools[number]) => {
        let n = 0;
        for (;;) {
          const r = await dispatchTaskEvents(database.db, taskRepo, { batch: 25, maxAttempts: 8 });
          n += r.events;
          if (r.events === 0) return n;
        }
      };
      const counts = await Promise.all(pools.map(runOne));
      assert.equal(counts.reduce((x, y) => x + y, 0), 400, `each event taken once (${counts.join(' + ')})`);
      const made = await deliveriesOf(t.orgId);
      assert.equal(made.length, 400);
      assert.equal(new Set(made.map((d) => d.event_id)).size, 400);
      assert.deepEqual(made.map((d) => d.event_id).sort(), [...ids].sort());
      if (h().engine === 'postgres') assert.ok(counts.filter((c) => c > 0).length > 1, `the work was shared: ${counts.join(', ')}`);
    } finally {
      await other.close();
    }
  });
});
