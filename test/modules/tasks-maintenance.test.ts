// The workers' housekeeping of the task tables: finished tasks leave after the retention period
// (in batches, with the per-state counts kept right), old daily counters go, live tasks stay.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachEngine } from '../helpers/engines.ts';
import { maintenanceJobs } from '../../src/maintenance.ts';
import { keepTaskHistory } from '../helpers/task-events.ts';

const DAY = 86_400_000;

forEachEngine('task maintenance', (h) => {
  it('prunes tasks that ended before the retention period, and only those', async () => {
    const r = await h().reseller();
    const org = await h().organization(r.id);
    await keepTaskHistory(h(), org);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'ping' } });
      assert.equal(res.status, 201);
      ids.push(res.body.task.id);
    }
    // Three canceled (two of them long ago), two still pending.
    for (const id of ids.slice(0, 3)) {
      assert.equal((await h().call('POST', `/api/v2/tasks/${id}`, { token: org.token, body: { state: 'canceled' } })).status, 200);
    }
    const db = h().database.db;
    await db.updateTable('tasks').set({ finished_at: Date.now() - 31 * DAY }).where('id', 'in', ids.slice(0, 2)).execute();
    await db.insertInto('org_daily_counters').values([
      { org_id: org.id, day: '2000-01-01', kind: 'calls', n: 4 },
      { org_id: org.id, day: new Date().toISOString().slice(0, 10), kind: 'texts', n: 2 },
    ]).execute();

    const eventsOf = async (taskIds: string[]) => (await db.selectFrom('task_events').select('id').where('task_id', 'in', taskIds).execute()).length;
    assert.equal(await eventsOf(ids.slice(0, 2)), 4, 'pending and canceled of each');

    const jobs = maintenanceJobs(h().database, { taskRetentionDays: 30 });
    assert.equal(await jobs.find((j) => j.name === 'prune-finished-tasks')!.run(), 2);
    assert.equal(await jobs.find((j) => j.name === 'prune-daily-counters')!.run(), 1);

    const left = (await db.selectFrom('tasks').select('id').where('org_id', '=', org.id).execute()).map((t) => t.id).sort();
    assert.deepEqual(left, ids.slice(2).sort());
    assert.equal(await eventsOf(ids.slice(0, 2)), 0);
    const stats = await h().call('GET', '/api/v2/tasks/stats', { token: org.token });
    assert.deepEqual({ total: stats.body.total, canceled: stats.body.byState.canceled, pending: stats.body.byState.pending },
      { total: 3, canceled: 1, pending: 2 });
    const counters = await db.selectFrom('org_daily_counters').select('day').where('org_id', '=', org.id).execute();
    assert.deepEqual(counters.map((c) => c.day), [new Date().toISOString().slice(0, 10)]);
  });
});
