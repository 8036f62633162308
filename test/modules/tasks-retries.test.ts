// Busy and no-answer are outcomes: they end the task unless the organization's limits ask for
// further attempts, which then happen `retries.delaySec` apart and end with the last outcome.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachEngine } from '../helpers/engines.ts';
import { keepTaskHistory } from '../helpers/task-events.ts';
import { waitFor as until } from '../helpers/wait.ts';

forEachEngine('busy and no-answer retries', (h) => {
  const finalTask = (token: string, id: string) => until(`task ${id} final`, async () => {
    const t = (await h().call('GET', `/api/v2/tasks/${id}`, { token })).body.task;
    return ['finished', 'failed', 'canceled'].includes(t.state) && t;
  });

  it('without retries a busy call finishes busy after one attempt', async () => {
    const r = await h().reseller();
    const org = await h().organization(r.id);
    const res = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'call', target: '+15005550002' } });
    const t = await finalTask(org.token, res.body.task.id);
    assert.deepEqual([t.state, t.result.outcome, t.attempts], ['finished', 'busy', 1]);
  });

  it('retries.busy = 3 makes four attempts a delay apart, past the default attempt budget, then the outcome stands', async () => {
    const r = await h().reseller();
    const org = await h().organization(r.id);
    await keepTaskHistory(h(), org);
    const set = await h().call('POST', '/api/v2/tasks/limits', { token: org.token, body: { retries: { busy: 3, delaySec: 1 } } });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    const res = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'call', target: '+15005550002' } });
    const id = res.body.task.id;
    const t = await finalTask(org.token, id);
    assert.deepEqual([t.state, t.result.outcome, t.attempts], ['finished', 'busy', 4]);
    assert.equal(t.maxAttempts, 4);
    const starts = await h().database.db.selectFrom('task_events').select(['type', 'created_at'])
      .where('task_id', '=', id).where('type', '=', 'task.running').orderBy('id').execute();
    assert.equal(starts.length, 4);
    for (let i = 1; i < starts.length; i++) {
      assert.ok(Number(starts[i].created_at) - Number(starts[i - 1].created_at) >= 1000, `attempt ${i + 1} came less than delaySec after the one before`);
    }
  });
}, { CALLPLANE_SIMULATED_CALL_SECONDS: '0.3' }, { worker: true });
