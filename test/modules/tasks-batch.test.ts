// The agent queueing operations, POST /api/v2/agent/outboundCall and outboundSms: the contract's
// three request shapes (one target; targets as numbers with a stagger; targets as objects with
// per-item options), all-or-nothing batches whose refusals name the item, and the batch bound.
// No worker runs here: queued tasks stay pending, which is what these tests look at.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import type { Reply } from '../helpers/harness.ts';
import { keepTaskHistory } from '../helpers/task-events.ts';

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  assert.equal(typeof res.body.message, 'string');
  for (const w of words) assert.ok(res.body.message.includes(w), `"${res.body.message}" should name ${w}`);
}

const nowSec = () => Math.floor(Date.now() / 1000);
// The contract's examples use +1555123000x, which are not numbers in use (accepted with a warning,
// see docs/tasks.md); these are real-format numbers of the same shape.
const N1 = '+14155550101';
const N2 = '+14155550102';
const N3 = '+14155550103';

forEachEngine('agent outboundCall and outboundSms', (h) => {
  const outboundCall = (token: string, body: unknown, query?: Record<string, unknown>) =>
    h().call('POST', '/api/v2/agent/outboundCall', { token, body, query });
  const outboundSms = (token: string, body: unknown, query?: Record<string, unknown>) =>
    h().call('POST', '/api/v2/agent/outboundSms', { token, body, query });
  const rowsOf = (orgId: number) => h().database.db.selectFrom('tasks').selectAll().where('org_id', '=', orgId).orderBy('id').execute();
  const tenant = async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    await keepTaskHistory(h(), o);
    return { r, o };
  };
  /** A 200 batch answer: its shape, and every task as GET answers it. */
  async function accepted(res: Reply, token: string, message: string, n: number, warnings: string[] = []): Promise<any[]> {
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(Object.keys(res.body).sort(), ['inserted', 'message', 'success', 'tasks', ...(warnings.length ? ['warnings'] : [])]);
    if (warnings.length) assert.deepEqual(res.body.warnings, warnings);
    assert.equal(res.body.success, true);
    assert.equal(res.body.message, message);
    assert.equal(res.body.inserted, n);
    assert.equal(res.body.tasks.length, n);
    for (const t of res.body.tasks) {
      const again = await h().call('GET', `/api/v2/tasks/${t.id}`, { token });
      assert.equal(again.status, 200);
      assert.deepEqual(again.body.task, t, 'stored as answered');
    }
    return res.body.tasks;
  }

  // ── outboundCall ────────────────────────────────────────────────────────────

  it('outboundCall, one target (the old form): one pending call with the context', async () => {
    const { o } = await tenant();
    const res = await outboundCall(o.token, { target: N1, context: 'Call back about pricing' });
    const [t] = await accepted(res, o.token, 'Outbound call initiated.', 1);
    assert.equal(t.type, 'call');
    assert.equal(t.state, 'pending');
    assert.equal(t.target, N1);
    assert.equal(t.context, 'Call back about pricing');
    assert.equal(t.accountId, o.agentId);
    assert.equal(t.organizationId, o.id);
    assert.equal(t.scheduledFor, null);
    assert.ok(Math.abs(t.runAt - nowSec()) <= 2);
    assert.equal((await rowsOf(o.id)).length, 1);
    // Every single-task option is taken in this form too.
    const at = nowSec() + 600;
    const full = await outboundCall(o.token, {
      target: '+1 (415) 555-0102', context: 'c', taskContext: 'tc', greeting: 'Hi', waitToGreet: true,
      scheduledFor: at, meta: { lead: 7 }, externalTaskId: 'ext-1', type: 'text',
    });
    const [f] = await accepted(full, o.token, 'Outbound call initiated.', 1);
    assert.equal(f.type, 'call', 'the operation decides the type');
    assert.equal(f.target, N2);
    assert.deepEqual([f.context, f.taskContext, f.greeting, f.waitToGreet, f.scheduledFor, f.runAt, f.externalTaskId],
      ['c', 'tc', 'Hi', true, at, at, 'ext-1']);
    assert.deepEqual(f.meta, { lead: 7 });
  });

  it('outboundCall, targets as numbers with scheduleSpacingSec: shared options, item n staggered n × spacing', async () => {
    const { o } = await tenant();
    const res = await outboundCall(o.token, { targets: [N1, N2, N3], context: 'Follow up on demo request', scheduleSpacingSec: 15 });
    const tasks = await accepted(res, o.token, 'Outbound call initiated.', 3);
    assert.deepEqual(tasks.map((t) => t.target), [N1, N2, N3], 'in the order sent');
    for (const t of tasks) {
      assert.equal(t.type, 'call');
      assert.equal(t.context, 'Follow up on demo request');
      assert.equal(t.accountId, o.agentId);
    }
    const base = tasks[0].runAt;
    assert.ok(Math.abs(base - nowSec()) <= 2);
    assert.equal(tasks[0].scheduledFor, null, 'the first item is not held back');
    assert.deepEqual(tasks.map((t) => t.runAt), [base, base + 15, base + 30]);
    assert.deepEqual(tasks.slice(1).map((t) => t.scheduledFor), [base + 15, base + 30]);
    // Milliseconds are exact in the rows.
    const rows = await rowsOf(o.id);
    assert.equal(Number(rows[2].run_at) - Number(rows[0].run_at), 30_000);

    // A shared scheduledFor is staggered from.
    const at = nowSec() + 3600;
    const later = await outboundCall(o.token, { targets: [N1, N2, N3], scheduledFor: at, scheduleSpacingSec: '10' });
    const l = await accepted(later, o.token, 'Outbound call initiated.', 3);
    assert.deepEqual(l.map((t) => t.scheduledFor), [at, at + 10, at + 20]);
    assert.deepEqual(l.map((t) => t.runAt), [at, at + 10, at + 20]);
    // Without spacing, all share the time.
    const same = await accepted(await outboundCall(o.token, { targets: [N1, N2], scheduledFor: at }), o.token, 'Outbound call initiated.', 2);
    assert.deepEqual(same.map((t) => t.scheduledFor), [at, at]);
    // One number sent as targets is a one-item list.
    const one = await accepted(await outboundCall(o.token, { targets: N3 }), o.token, 'Outbound call initiated.', 1);
    assert.equal(one[0].target, N3);
  });

  it('outboundCall, targets as objects: per-item options override the shared ones; accountId and agentId choose the agent', async () => {
    const { o } = await tenant();
    const a2 = await h().agent(o.id);
    const a3 = await h().agent(o.id);
    const vip = nowSec() + 7200;
    const res = await outboundCall(o.token, {
      targets: [
        { target: N1, context: 'VIP', scheduledFor: vip },
        { target: N2 },
        { target: N3, agentId: a3.id, greeting: 'Hello', waitToGreet: true, meta: { own: 1 }, externalTaskId: 'mine' },
      ],
      accountId: a2.id, context: 'shared', meta: { shared: true }, externalTaskId: 'batch-7', scheduleSpacingSec: 60,
    });
    const [t1, t2, t3] = await accepted(res, o.token, 'Outbound call initiated.', 3);
    assert.deepEqual([t1.target, t1.context, t1.accountId, t1.scheduledFor, t1.runAt], [N1, 'VIP', a2.id, vip, vip],
      'its own scheduledFor is kept, not staggered');
    assert.deepEqual([t2.target, t2.context, t2.accountId, t2.externalTaskId], [N2, 'shared', a2.id, 'batch-7']);
    assert.deepEqual(t2.meta, { shared: true });
    assert.ok(Math.abs(t2.runAt - (nowSec() + 60)) <= 2, `item 1 is staggered by 60 s: runAt ${t2.runAt}`);
    assert.deepEqual([t3.accountId, t3.greeting, t3.waitToGreet, t3.externalTaskId, t3.context], [a3.id, 'Hello', true, 'mine', 'shared']);
    assert.deepEqual(t3.meta, { own: 1 });

    // agentId as the shared agent, as outboundSms's contract names it.
    const viaAgentId = await accepted(await outboundCall(o.token, { targets: [{ target: N1 }], agentId: a3.id }), o.token, 'Outbound call initiated.', 1);
    assert.equal(viaAgentId[0].accountId, a3.id);
    // A per-item accountId wins over its own agentId and the shared one.
    const both = await accepted(await outboundCall(o.token, { targets: [{ target: N1, accountId: a2.id, agentId: a3.id }], agentId: o.agentId }), o.token, 'Outbound call initiated.', 1);
    assert.equal(both[0].accountId, a2.id);
  });

  it('one bad item refuses the whole batch with a 400 naming it; nothing is inserted', async () => {
    const { r, o } = await tenant();
    const other = await h().organization(r.id);
    const cases: [unknown, string[]][] = [
      // Not even a possible number: one digit too few for +1 (the contract's +15551234567 is possible, and accepted).
      [{ targets: [N1, '+1234567890', N3] }, ['targets[1].target', '+1234567890']],
      [{ targets: [N1, N2, 'call me'] }, ['targets[2].target']],
      [{ targets: [{ target: N1 }, { context: 'no target' }] }, ['targets[1].target', 'required']],
      [{ targets: [{ target: N1 }, { target: N2, scheduledFor: Date.now() + 60_000 }] }, ['targets[1].scheduledFor', 'milliseconds']],
      [{ targets: [{ target: N1, scheduledFor: nowSec() - 86_400 }] }, ['targets[0].scheduledFor', 'past']],
      [{ targets: [{ target: N1 }, { target: N2, agentId: other.agentId }] }, ['targets[1].accountId']],
      [{ targets: [{ target: N1, waitToGreet: 'sometimes' }] }, ['targets[0].waitToGreet']],
      [{ targets: [{ target: N1, meta: [1] }] }, ['targets[0].meta']],
      [{ targets: [{ target: N1, context: 'x'.repeat(10_001) }] }, ['targets[0].context']],
      [{ targets: [N1, 42] }, ['targets[1]']],
      [{ targets: [N1, [N2]] }, ['targets[1]']],
      [{ targets: [N1, null] }, ['targets[1]']],
      // A shared option that fails fails on the first item, named there.
      [{ targets: [N1, N2], accountId: other.agentId }, ['targets[0].accountId']],
      [{ targets: [N1], scheduledFor: nowSec() - 86_400 }, ['targets[0].scheduledFor']],
      [{ target: '+1234567890' }, ['target', '+1234567890']],
      // A username is a target for pings only.
      [{ targets: [N1, 'jane@example.com'] }, ['targets[1].target', 'ping tasks only']],
      [{ target: N1, accountId: other.agentId }, ['accountId']],
      [{}, ['target']],
      [{ targets: [] }, ['targets', 'empty']],
      // A single value for targets is a one-item list (docs/api.md, type coercion).
      [{ targets: 'call me' }, ['targets[0].target']],
      [{ target: N1, targets: [N2] }, ['target', 'targets']],
      [{ targets: [N1, N2], scheduleSpacingSec: -1 }, ['scheduleSpacingSec']],
      [{ targets: [N1, N2], scheduleSpacingSec: 'often' }, ['scheduleSpacingSec']],
      [{ targets: [N1, N2], scheduleSpacingSec: 86_401 }, ['scheduleSpacingSec']],
    ];
    for (const [body, words] of cases) {
      expectError(await outboundCall(o.token, body), 400, ...words);
    }
    assert.equal((await rowsOf(o.id)).length, 0);
    const s = await h().call('GET', '/api/v2/tasks/stats', { token: o.token });
    assert.equal(s.body.total, 0);
  });

  it('at most 1000 targets per request; 1000 are taken in one go', async () => {
    const { o } = await tenant();
    const numbers = Array.from({ length: 1001 }, (_, i) => `+1415555${String(i).padStart(4, '0')}`);
    expectError(await outboundCall(o.token, { targets: numbers }), 400, 'targets', '1000');
    expectError(await outboundSms(o.token, { targets: numbers, content: 'hi' }), 400, 'targets', '1000');
    assert.equal((await rowsOf(o.id)).length, 0);
    const res = await outboundCall(o.token, { targets: numbers.slice(0, 1000), context: 'bulk' });
    assert.equal(res.status, 200, JSON.stringify(res.body).slice(0, 500));
    assert.equal(res.body.inserted, 1000);
    assert.equal(res.body.tasks.length, 1000);
    assert.deepEqual(res.body.tasks.map((t: any) => t.target), numbers.slice(0, 1000));
    assert.equal(new Set(res.body.tasks.map((t: any) => t.id)).size, 1000);
    assert.equal((await rowsOf(o.id)).length, 1000);
    const s = await h().call('GET', '/api/v2/tasks/stats', { token: o.token });
    assert.equal(s.body.byState.pending, 1000);
    const events = await h().database.db.selectFrom('task_events').select((eb) => eb.fn.countAll<number>().as('n'))
      .where('org_id', '=', o.id).where('type', '=', 'task.pending').executeTakeFirstOrThrow();
    assert.equal(Number(events.n), 1000, 'one task.pending event each');
  });

  // ── outboundSms ─────────────────────────────────────────────────────────────

  it('outboundSms, one target: a pending text with the content', async () => {
    const { o } = await tenant();
    const res = await outboundSms(o.token, { target: N1, content: 'Hi, quick reminder for tomorrow at 10am.', context: 'Reminder campaign' });
    const [t] = await accepted(res, o.token, 'Outbound SMS initiated.', 1);
    assert.deepEqual([t.type, t.state, t.target, t.content, t.context, t.accountId],
      ['text', 'pending', N1, 'Hi, quick reminder for tomorrow at 10am.', 'Reminder campaign', o.agentId]);
    const alias = await accepted(await outboundSms(o.token, { target: N2, message: 'via message' }), o.token, 'Outbound SMS initiated.', 1);
    assert.equal(alias[0].content, 'via message');
  });

  it('outboundSms, targets as numbers with shared content and scheduleSpacingSec', async () => {
    const { o } = await tenant();
    const res = await outboundSms(o.token, {
      targets: [N1, N2, N3], content: 'Thanks for signing up. Reply YES to confirm.', context: 'Onboarding nudge', scheduleSpacingSec: 10,
    });
    const tasks = await accepted(res, o.token, 'Outbound SMS initiated.', 3);
    assert.ok(tasks.every((t) => t.type === 'text' && t.content === 'Thanks for signing up. Reply YES to confirm.' && t.context === 'Onboarding nudge'));
    const base = tasks[0].runAt;
    assert.deepEqual(tasks.map((t) => t.runAt), [base, base + 10, base + 20]);
  });

  it('outboundSms, targets as objects with per-item content and agentId', async () => {
    const { o } = await tenant();
    const a2 = await h().agent(o.id);
    const vip = nowSec() + 3600;
    const res = await outboundSms(o.token, {
      targets: [
        { target: N1, content: 'VIP reminder 9am', context: 'VIP', scheduledFor: vip },
        { target: N2, content: 'Standard reminder 10am' },
        { target: N3 },
      ],
      agentId: a2.id, content: 'Fallback reminder',
    });
    const [t1, t2, t3] = await accepted(res, o.token, 'Outbound SMS initiated.', 3);
    assert.deepEqual([t1.content, t1.context, t1.scheduledFor, t1.accountId], ['VIP reminder 9am', 'VIP', vip, a2.id]);
    assert.deepEqual([t2.content, t2.context, t2.scheduledFor, t2.accountId], ['Standard reminder 10am', null, null, a2.id]);
    assert.equal(t3.content, 'Fallback reminder', 'the shared content for an item without its own');
  });

  it('outboundSms items without content are the agent\'s to write (the contract\'s text task); content is at most 1600 characters', async () => {
    const { o } = await tenant();
    expectError(await outboundSms(o.token, { targets: [{ target: N1, content: 'x'.repeat(1601) }] }), 400, 'targets[0].content', '1600');
    expectError(await outboundSms(o.token, { target: N1, content: 'x'.repeat(1601) }), 400, 'content', '1600');
    assert.equal((await rowsOf(o.id)).length, 0);
    // A greeting stands in for missing content, as on POST /tasks.
    const g = await accepted(await outboundSms(o.token, { target: N1, greeting: 'Hello there' }), o.token, 'Outbound SMS initiated.', 1,
      ['content was empty: the greeting is sent as the message']);
    assert.equal(g[0].content, 'Hello there');
    // No content and no greeting: accepted, the agent writes each text from the context when it runs.
    const written = await accepted(await outboundSms(o.token, { targets: [N1, { target: N2, context: 'Own context' }], context: 'Shared context' }), o.token, 'Outbound SMS initiated.', 2);
    assert.deepEqual(written.map((t) => [t.content, t.context]), [[null, 'Shared context'], [null, 'Own context']]);
  });

  // ── who may queue ───────────────────────────────────────────────────────────

  it('an agent queues as itself; a reseller names the organization or agent; others are refused', async () => {
    const { r, o } = await tenant();
    const b = await h().agent(o.id);
    const r2 = await h().reseller();
    const byAgent = await accepted(await outboundCall(b.token, { targets: [N1, N2] }), b.token, 'Outbound call initiated.', 2);
    assert.ok(byAgent.every((t) => t.accountId === b.id));
    expectError(await outboundCall(b.token, { targets: [N1, { target: N2, agentId: o.agentId }] }), 400, 'targets[1].accountId');
    expectError(await outboundSms(b.token, { target: N1, content: 'x', agentId: o.agentId }), 400, 'accountId');

    expectError(await outboundCall(r.token, { target: N1 }), 403, 'targetAccountId');
    expectError(await outboundSms(r.token, { target: N1, content: 'x' }), 403, 'targetAccountId');
    expectError(await outboundCall(r2.token, { target: N1 }, { targetAccountId: o.id }), 404);
    expectError(await outboundCall(r2.token, { target: N1 }, { targetAccountId: b.id }), 404);
    expectError(await outboundCall(o.token, { target: N1 }, { targetAccountId: r.id }), 404);
    expectError(await h().call('POST', '/api/v2/agent/outboundCall', { token: null, body: { target: N1 } }), 401);
    assert.equal((await rowsOf(o.id)).length, 2);

    const viaReseller = await accepted(await outboundCall(r.token, { target: N1 }, { targetAccountId: o.id }), o.token, 'Outbound call initiated.', 1);
    assert.equal(viaReseller[0].accountId, o.agentId);
    const asAgent = await accepted(await outboundSms(r.token, { target: N1, content: 'hi' }, { targetAccountId: b.id }), b.token, 'Outbound SMS initiated.', 1);
    assert.equal(asAgent[0].accountId, b.id);
  });
});
