// Campaign rules changed after submission (issue 37, part C; docs/campaigns.md): a task's own
// callingWindow and retryRules through the contract's update (POST /api/v2/tasks/{taskId}), an
// agent's window published while tasks are held by it, and one number walked through a whole day
// (held, dialled at the opening, no answer, retried inside the window, listed meanwhile: the retry
// canceled, nothing dialled). On each engine, with a clock the test moves: the task engine and
// handler are built on the harness's database with that clock, as the platform builds them.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { TaskRow } from '../../src/db/types.ts';
import { planAllowance, uncachedEntitlements } from '../../src/modules/billing/entitlements.ts';
import { conversationRepo } from '../../src/modules/conversations/repository.ts';
import { createTaskEngine } from '../../src/modules/tasks/queue-hooks.ts';
import { createTaskHandler } from '../../src/modules/tasks/run-task.ts';
import { uncachedSubscribers } from '../../src/modules/tasks/subscribers.ts';
import { SIMULATED_TEST_NUMBERS } from '../../src/providers/simulated.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { manualClock, task } from '../queue/fixtures.ts';
import { claimOnly, nextMonday15, runClaimed, wall } from '../helpers/campaign-time.ts';

const HOUR = 3_600_000;
const WEEKDAYS = { days: [1, 2, 3, 4, 5], start: '09:00', end: '17:00' };

forEachEngine('campaign rules changed after submission', (h) => {
  const start = nextMonday15();
  const clock = manualClock(start);
  const engine = () => createTaskEngine({ workerId: 'campaign-changes', subscribers: uncachedSubscribers, allowance: planAllowance(uncachedEntitlements), now: clock.now });
  // A short SIMULATED call: the no-answer number rings for the whole call time.
  const handler = () => createTaskHandler({
    db: h().database.db, box: h().box, config: { ...h().config, simulatedCallSeconds: 0.2 }, now: clock.now,
    conversationOf: (taskId, since) => conversationRepo.latestOfTask(h().database.db, taskId, since),
  });

  async function tenant(timezone: string) {
    const r = await h().reseller();
    return h().organization(r.id, { timezone });
  }
  async function submit(token: string, body: Record<string, unknown>): Promise<string> {
    const res = await h().call('POST', '/api/v2/tasks', { token, body: { type: 'call', ...body } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.task.id as string;
  }
  async function limits(token: string, body: unknown) {
    const res = await h().call('POST', '/api/v2/tasks/limits', { token, body });
    assert.equal(res.status, 200, JSON.stringify(res.body));
  }
  async function publishAgent(token: string, agentId: number, body: unknown) {
    const set = await h().call('POST', '/api/v2/agent', { token, query: { targetAccountId: agentId }, body });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    const pub = await h().call('POST', '/api/v2/agent/publish', { token, query: { targetAccountId: agentId } });
    assert.equal(pub.status, 200, JSON.stringify(pub.body));
  }
  const update = (token: string, id: string, body: unknown) => h().call('POST', `/api/v2/tasks/${id}`, { token, body });
  const view = async (token: string, id: string) => (await h().call('GET', `/api/v2/tasks/${id}`, { token })).body.task;

  const claim = (ids: string[]): Promise<TaskRow[]> => claimOnly(engine(), h().database.db, ids);
  const run = (row: TaskRow): Promise<TaskRow> => runClaimed(engine(), handler(), h().database.db, row);
  /** Holds `id` by its window: claimed while outside it, admission moves it on. */
  async function held(id: string): Promise<TaskRow> {
    assert.deepEqual(await claim([id]), [], 'held, not claimed');
    const row = await task(h().database.db, id);
    assert.equal(row.state, 'pending');
    assert.ok(row.run_at > clock.now() && row.held_reason, `held: ${JSON.stringify(row)}`);
    return row;
  }

  it('a held task\'s own callingWindow changed by the update is checked again at once; bad rules are refused naming the field', async () => {
    clock.advance(start - clock.now());
    const org = await tenant('America/New_York');
    await limits(org.token, { callingWindow: WEEKDAYS });
    const id = await submit(org.token, { target: '+14155550120' });
    const before = await held(id);
    assert.equal(wall(before.run_at, 'America/Los_Angeles'), 'Mon 09:00');

    // Refusals name the field, and change nothing.
    for (const [body, pattern] of [
      [{ callingWindow: { days: [1], start: '18:00', end: '09:00' } }, /^callingWindow\.end must be after callingWindow\.start/],
      [{ callingWindow: 'soon' }, /^callingWindow must be an object/],
      [{ retryRules: { on: ['maybe'], delaysSec: [60], maxAttempts: 2 } }, /^retryRules\.on\[0\] must be one of/],
      [{ retryRules: { on: ['busy'], delaysSec: [60], maxAttempts: 11 } }, /^retryRules\.maxAttempts must be an integer from 1 to 10/],
    ] as const) {
      const res = await update(org.token, id, body);
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.equal(res.body.success, false);
      assert.match(res.body.message, pattern);
    }
    assert.equal((await task(h().database.db, id)).run_at, before.run_at, 'a refused update moves nothing');

    // A window still closed now: looked at again at once, and held anew by the task's own window.
    const later = await update(org.token, id, { callingWindow: { days: [1], start: '12:00', end: '14:00' } });
    assert.equal(later.status, 200, JSON.stringify(later.body));
    assert.deepEqual(later.body.task.callingWindow, { days: [1], start: '12:00', end: '14:00' });
    assert.ok(later.body.task.runAt * 1000 <= clock.now(), 'due again at once');
    const again = await held(id);
    assert.equal(wall(again.run_at, 'America/Los_Angeles'), 'Mon 12:00', 'held by its new window');
    assert.match((await view(org.token, id)).heldReason, /Mon 12:00–14:00 \(the task's\), America\/Los_Angeles/);

    // A window open now: it runs now, not at either window's opening.
    const open = await update(org.token, id, { callingWindow: { days: [1], start: '06:00', end: '10:00' } });
    assert.equal(open.status, 200);
    const [claimed] = await claim([id]);
    assert.equal(claimed?.id, id, 'claimed at once');
    assert.equal((await run(claimed)).state, 'finished');
    // Only a pending task can be changed.
    const done = await update(org.token, id, { callingWindow: null });
    assert.equal(done.status, 409);

    // null: no window at all, over the organization's.
    const other = await submit(org.token, { target: '+14155550121' });
    await held(other);
    const none = await update(org.token, other, { callingWindow: null });
    assert.equal(none.status, 200);
    assert.equal(none.body.task.callingWindow, null);
    assert.deepEqual((await claim([other])).map((r) => r.id), [other]);
    // A text takes no retry rules.
    const text = await submit(org.token, { type: 'text', target: '+14155550122', content: 'hi', callingWindow: null });
    const refused = await update(org.token, text, { retryRules: { on: ['busy'], delaysSec: [60], maxAttempts: 2 } });
    assert.equal(refused.status, 400);
    assert.match(refused.body.message, /^retryRules applies to call tasks only/);
  });

  it('retryRules changed by the update are the ones its attempts follow; other fields keep its rules', async () => {
    clock.advance(start - clock.now());
    const org = await tenant('America/New_York');
    const id = await submit(org.token, { target: SIMULATED_TEST_NUMBERS.busy, retryRules: { on: ['no-answer'], delaysSec: [60], maxAttempts: 2 } });
    const res = await update(org.token, id, { retryRules: { on: ['busy'], delaysSec: [300], maxAttempts: 2 } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    // Another field alone leaves the rules as they are.
    const kept = await update(org.token, id, { context: 'ask about the invoice', callingWindow: { days: [0, 1, 2, 3, 4, 5, 6], start: '00:00', end: '24:00' } });
    assert.equal(kept.status, 200);
    assert.deepEqual(kept.body.task.retryRules, { on: ['busy'], delaysSec: [300], maxAttempts: 2 });
    const [c] = await claim([id]);
    const row = await run(c);
    assert.equal(row.state, 'pending', 'busy now retries');
    assert.equal(row.run_at - clock.now(), 300_000);
    const cleared = await update(org.token, id, { retryRules: null });
    assert.equal(cleared.status, 200);
    assert.equal(cleared.body.task.retryRules, null);
    assert.ok(cleared.body.task.runAt * 1000 > clock.now(), 'a retry waiting out its delay is not held: it keeps its time');
  });

  it('an agent\'s window published reaches the tasks it holds at once', async () => {
    clock.advance(start - clock.now());
    const org = await tenant('America/New_York');
    await publishAgent(org.token, org.agentId, { callingWindow: { days: [1], start: '10:00', end: '12:00' } });
    const id = await submit(org.token, { target: '+14155550130' });
    const ownWindow = await submit(org.token, { target: '+14155550131', callingWindow: { days: [1], start: '11:00', end: '12:00' } });
    const row = await held(id);
    assert.equal(wall(row.run_at, 'America/Los_Angeles'), 'Mon 10:00');
    await held(ownWindow);
    await publishAgent(org.token, org.agentId, { callingWindow: { days: [1], start: '06:00', end: '12:00' } });
    assert.ok((await task(h().database.db, id)).run_at <= clock.now(), 'due at once after the publish');
    const claimed = await claim([id, ownWindow]);
    assert.deepEqual(claimed.map((r) => r.id), [id], 'the agent\'s task runs; the one with its own window stays held by it');
    assert.equal(wall((await task(h().database.db, ownWindow)).run_at, 'America/Los_Angeles'), 'Mon 11:00');
    await run(claimed[0]);
  });

  it('one number through the day: held outside its window, dialled once at the opening, no answer, retried inside the window, listed meanwhile: the retry canceled, nothing dialled', async () => {
    clock.advance(start - clock.now());
    // The SIMULATED no-answer number is a +1 500 number, spread over 42 zones: read in the
    // organization's zone, Los Angeles, where it is 07:00 or 08:00.
    const org = await tenant('America/Los_Angeles');
    await limits(org.token, { callingWindow: WEEKDAYS });
    const number = SIMULATED_TEST_NUMBERS.noAnswer;
    const id = await submit(org.token, { target: number, retryRules: { on: ['no-answer'], delaysSec: [3600], maxAttempts: 3 } });

    const first = await held(id);
    assert.equal(wall(first.run_at, 'America/Los_Angeles'), 'Mon 09:00');
    const v = await view(org.token, id);
    assert.match(v.heldReason, /^outside the calling window \(Mon–Fri 09:00–17:00 \(the organization's\), America\/Los_Angeles, the organization's time: the number spans \d+ time zones/);
    assert.ok(v.heldReason.includes(`opens ${new Date(first.run_at).toISOString()}`), v.heldReason);
    assert.equal(v.attempts, 0, 'not started');

    clock.advance(first.run_at - clock.now());
    const [opened] = await claim([id]);
    assert.equal(opened?.id, id, 'dialled when the window opens');
    const after1 = await run(opened);
    assert.equal(after1.state, 'pending', 'no answer: a retry');
    assert.equal(after1.run_at - clock.now(), HOUR, 'after its delay');
    assert.equal(wall(after1.run_at, 'America/Los_Angeles'), 'Mon 10:00', 'inside the window');
    assert.match(after1.error ?? '', /^no-answer on attempt 1 of 3; next attempt at /);
    const log1 = JSON.parse(after1.attempt_log!) as { result: string; providerRef: string }[];
    assert.deepEqual(log1.map((e) => e.result), ['no-answer']);

    // Meanwhile the number goes on the organization's list.
    const listed = await h().call('POST', '/api/v2/do-not-call', { token: org.token, body: { number } });
    assert.equal(listed.status, 200, JSON.stringify(listed.body));

    clock.advance(after1.run_at - clock.now());
    const [retry] = await claim([id]);
    assert.equal(retry?.id, id, 'the retry comes due');
    const end = await run(retry);
    assert.equal(end.state, 'canceled');
    assert.match(end.error ?? '', /^canceled: on the do-not-call list \(the organization's own; added by api\); nothing was dialled$/);
    const log = JSON.parse(end.attempt_log!) as { result: string }[];
    assert.deepEqual(log.map((e) => e.result), ['no-answer'], 'the one attempt dialled; none after the listing');
    const final = await view(org.token, id);
    assert.equal(final.attempts, 2, 'claimed twice, dialled once');
    assert.equal(final.state, 'canceled');
  });
});
