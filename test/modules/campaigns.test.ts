// Outbound campaign rules (issue 37, part A; docs/campaigns.md) on the task queue of each engine,
// with a clock the test moves: the task engine (claims, admission) and the task handler (what runs
// a claimed task, on the SIMULATED carrier) are built here on the harness's database with that
// clock, as the platform builds them with the real one. Tasks come in through the API.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { TaskRow } from '../../src/db/types.ts';
import { planAllowance, uncachedEntitlements } from '../../src/modules/billing/entitlements.ts';
import { conversationRepo } from '../../src/modules/conversations/repository.ts';
import { createTaskEngine } from '../../src/modules/tasks/queue-hooks.ts';
import { createTaskHandler } from '../../src/modules/tasks/run-task.ts';
import { uncachedSubscribers } from '../../src/modules/tasks/subscribers.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { manualClock, task } from '../queue/fixtures.ts';
import { claimOnly, nextMonday15, runClaimed, wall } from '../helpers/campaign-time.ts';

const HOUR = 3_600_000;
const BUSY = '+15005550002';

forEachEngine('campaign rules: calling windows, retry rules, caller ID', (h) => {
  const start = nextMonday15();
  const clock = manualClock(start);
  const engine = () => createTaskEngine({ workerId: 'campaigns', subscribers: uncachedSubscribers, allowance: planAllowance(uncachedEntitlements), now: clock.now });
  const handler = () => createTaskHandler({
    db: h().database.db, box: h().box, config: h().config, now: clock.now,
    conversationOf: (taskId, since) => conversationRepo.latestOfTask(h().database.db, taskId, since),
  });

  async function tenant(timezone = 'America/New_York') {
    const r = await h().reseller();
    const org = await h().organization(r.id, { timezone });
    return { ...org, reseller: r };
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
  async function agentSettings(token: string, agentId: number, body: unknown) {
    const set = await h().call('POST', '/api/v2/agent', { token, query: { targetAccountId: agentId }, body });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    const pub = await h().call('POST', '/api/v2/agent/publish', { token, query: { targetAccountId: agentId } });
    assert.equal(pub.status, 200, JSON.stringify(pub.body));
  }
  const view = async (token: string, id: string) => (await h().call('GET', `/api/v2/tasks/${id}`, { token })).body.task;

  const claim = (ids: string[]): Promise<TaskRow[]> => claimOnly(engine(), h().database.db, ids);
  const run = (row: TaskRow): Promise<TaskRow> => runClaimed(engine(), handler(), h().database.db, row);

  it('a call to a number in another time zone is held until its window opens there, then runs; one where it is open runs now', async () => {
    clock.advance(start - clock.now());
    const org = await tenant('America/New_York');
    await limits(org.token, { callingWindow: { days: [1, 2, 3, 4, 5], start: '09:00', end: '17:00' } });
    const la = await submit(org.token, { target: '+14155550100' });
    const ny = await submit(org.token, { target: '+12125550100' });
    assert.match(wall(clock.now(), 'America/Los_Angeles'), /^Mon 0[78]:00$/);

    const first = await claim([la, ny]);
    assert.deepEqual(first.map((r) => r.id), [ny], 'New York is open at this hour; Los Angeles is not');
    const held = await task(h().database.db, la);
    assert.equal(held.state, 'pending');
    assert.equal(wall(held.run_at, 'America/Los_Angeles'), 'Mon 09:00', 'held until 09:00 in the recipient\'s time');
    assert.ok(held.run_at > clock.now());
    const v = await view(org.token, la);
    assert.match(v.heldReason, /outside the calling window \(Mon–Fri 09:00–17:00 \(the organization's\), America\/Los_Angeles, the recipient's time; opens /);
    assert.ok(v.heldReason.includes(new Date(held.run_at).toISOString()), v.heldReason);
    assert.equal(v.runAt, held.run_at / 1000);

    const ran = await run(first[0]);
    assert.equal(ran.state, 'finished');
    clock.advance(held.run_at - clock.now() - 60_000);
    assert.deepEqual(await claim([la]), [], 'not a minute early');
    clock.advance(60_000);
    const [opened] = await claim([la]);
    assert.equal(opened?.id, la, 'claimed when the window opens');
    const done = await run(opened);
    assert.equal(done.state, 'finished');
    const after = await view(org.token, la);
    assert.equal(after.attemptLog.length, 1);
    assert.equal(after.attemptLog[0].result, 'completed');
    assert.equal(after.attemptLog[0].at, Math.floor(held.run_at / 1000));
  });

  it('a task\'s own window (or null) and its agent\'s override the organization\'s', async () => {
    clock.advance(start - clock.now());
    const org = await tenant('America/New_York');
    await limits(org.token, { callingWindow: { days: [1, 2, 3, 4, 5], start: '09:00', end: '17:00' } });
    const none = await submit(org.token, { target: '+14155550101', callingWindow: null });
    const early = await submit(org.token, { target: '+14155550102', callingWindow: { days: [0, 1, 2, 3, 4, 5, 6], start: '06:00', end: '09:00' } });
    const inTokyo = await submit(org.token, { target: '+14155550103', callingWindow: { days: [1], start: '09:00', end: '17:00', timezone: 'Asia/Tokyo' } });
    const bad = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'call', target: '+14155550104', callingWindow: { days: [1], start: '18:00', end: '09:00' } } });
    assert.equal(bad.status, 400);
    assert.match(bad.body.message, /^callingWindow\.end must be after callingWindow\.start/);
    const claimed = await claim([none, early, inTokyo]);
    assert.deepEqual(claimed.map((r) => r.id).sort(), [none, early].sort(), 'no window, and a window open at 07:00 or 08:00 in Los Angeles');
    for (const r of claimed) await run(r);
    const tokyo = await task(h().database.db, inTokyo);
    assert.equal(wall(tokyo.run_at, 'Asia/Tokyo'), 'Mon 09:00', 'read in its own zone');
    assert.match((await view(org.token, inTokyo)).heldReason, /Asia\/Tokyo, the window's own zone/);
    assert.deepEqual((await view(org.token, none)).callingWindow, null);

    // The agent's window: open at this hour in Los Angeles; the organization's default is not.
    await agentSettings(org.token, org.agentId, { callingWindow: { days: [1], start: '07:00', end: '10:00' } });
    const byAgent = await submit(org.token, { target: '+14155550105' });
    assert.deepEqual((await claim([byAgent])).map((r) => r.id), [byAgent]);
  });

  it('retry rules: attempts at the configured delays, each recorded, stopping at the limit with the reason', async () => {
    clock.advance(start - clock.now());
    const org = await tenant('America/New_York');
    const id = await submit(org.token, { target: BUSY, retryRules: { on: ['busy'], delaysSec: [600, 3600], maxAttempts: 3 } });
    const times: number[] = [];
    let row: TaskRow | undefined;
    for (let n = 1; n <= 3; n++) {
      const [claimed] = await claim([id]);
      assert.equal(claimed?.id, id, `attempt ${n} claimed`);
      times.push(clock.now());
      row = await run(claimed);
      if (n < 3) {
        assert.equal(row.state, 'pending', `after attempt ${n}`);
        assert.equal(row.run_at - clock.now(), [600_000, 3_600_000][n - 1], `the delay after attempt ${n}`);
        assert.match(row.error ?? '', new RegExp(`^busy on attempt ${n} of 3; next attempt at `));
        clock.advance(row.run_at - clock.now() - 1000);
        assert.deepEqual(await claim([id]), [], 'not before its delay');
        clock.advance(1000);
      }
    }
    assert.equal(row!.state, 'finished');
    const v = await view(org.token, id);
    assert.equal(v.result.outcome, 'busy');
    assert.equal(v.result.stopReason, 'retries exhausted after 3 attempts: busy');
    assert.deepEqual(v.attemptLog.map((a: { attempt: number; at: number; result: string }) => [a.attempt, a.at, a.result]),
      times.map((t, i) => [i + 1, Math.floor(t / 1000), 'busy']));
    assert.deepEqual(v.retryRules, { on: ['busy'], delaysSec: [600, 3600], maxAttempts: 3 });

    // Rules that do not name the result: the outcome stands after one attempt.
    const other = await submit(org.token, { target: BUSY, retryRules: { on: ['no-answer'], delaysSec: [60], maxAttempts: 3 } });
    const [c] = await claim([other]);
    const once = await run(c);
    assert.deepEqual([once.state, JSON.parse(once.result!).outcome, JSON.parse(once.attempt_log!).length], ['finished', 'busy', 1]);
  });

  it('a retry that would land after the window closes moves to its next opening; the agent\'s rules apply when the task sets none', async () => {
    // 16:30 in New York on the Monday: the window closes at 17:00, the retry is due an hour later.
    const at1630 = start + (wall(start, 'America/New_York') === 'Mon 10:00' ? 6.5 : 5.5) * HOUR;
    clock.advance(at1630 - clock.now());
    assert.equal(wall(clock.now(), 'America/New_York'), 'Mon 16:30');
    const org = await tenant('America/New_York');
    await agentSettings(org.token, org.agentId, { retryRules: { on: ['busy'], delaysSec: [3600], maxAttempts: 2 } });
    const id = await submit(org.token, { target: BUSY, callingWindow: { days: [1, 2, 3, 4, 5], start: '09:00', end: '17:00', timezone: 'America/New_York' } });
    const [claimed] = await claim([id]);
    assert.equal(claimed?.id, id);
    const row = await run(claimed);
    assert.equal(row.state, 'pending');
    assert.equal(wall(row.run_at, 'America/New_York'), 'Tue 09:00', 'moved to the next opening');
    assert.ok(row.run_at - clock.now() > HOUR);
    assert.match(row.error ?? '', /moved to the calling window's opening \(Mon–Fri 09:00–17:00 \(the task's\), America\/New_York, the window's own zone\)/);
    clock.advance(row.run_at - clock.now());
    const [again] = await claim([id]);
    const last = await run(again);
    assert.equal(last.state, 'finished');
    assert.equal(JSON.parse(last.result!).stopReason, 'retries exhausted after 2 attempts: busy');
  });

  it('callerIdStrategy nearest: among three numbers, the same area code, else the same zone, else the same country, else the agent\'s own', async () => {
    clock.advance(start - clock.now());
    const org = await tenant('America/New_York');
    const now = Date.now();
    // Unique to this organization (a number has one holder): its last four digits from the org id.
    const held = ['+12125550000', '+14155550000', '+442071230000'].map((n) => n.slice(0, -4) + String(1000 + (org.id % 9000)));
    for (const number of held) {
      await h().database.db.insertInto('phone_numbers').values({
        number, org_id: org.id, agent_id: org.agentId, kind: 'bought', state: 'active',
        provider: 'simulated', simulated: 1, country: null, locality: null, region: null, capabilities: null, last_error: null, created_at: now, updated_at: now,
        provider_ref: null,
      }).execute();
    }
    await agentSettings(org.token, org.agentId, { callerIdStrategy: 'nearest' });
    const cases: [string, string, string][] = [
      ['+14155550199', held[1], 'area-code'],
      ['+13105550100', held[1], 'time-zone'], // Los Angeles: another area code, the same zone as 415
      ['+16175550100', held[0], 'time-zone'], // Boston: New York's zone
      ['+13125550100', held[0], 'country'], // Chicago: no number in its zone; the first in the US
      ['+442079460000', held[2], 'time-zone'], // London
      ['+4930123456', held[0], 'agent'], // Berlin: nothing near; the agent's own (oldest) number
    ];
    for (const [target, from, basis] of cases) {
      const id = await submit(org.token, { target });
      const [c] = await claim([id]);
      const done = await run(c);
      const log = JSON.parse(done.attempt_log!)[0];
      assert.deepEqual([log.callerId, log.callerIdBasis], [from, basis], target);
      assert.equal(JSON.parse(done.result!).from, from, 'the call went out from it');
    }
  });

  it('bulk submission carries the rules to every item; bad rules are refused naming the item', async () => {
    const org = await tenant('America/New_York');
    const res = await h().call('POST', '/api/v2/agent/outboundCall', { token: org.token, body: {
      targets: ['+14155550110', { target: '+14155550111', callingWindow: null }],
      callingWindow: { days: [1, 2, 3, 4, 5], start: '09:00', end: '20:00' }, retryRules: { on: ['no-answer', 'voicemail'], delaysSec: [600], maxAttempts: 2 },
    } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.tasks.map((t: { callingWindow: unknown }) => t.callingWindow), [{ days: [1, 2, 3, 4, 5], start: '09:00', end: '20:00' }, null]);
    assert.ok(res.body.tasks.every((t: { retryRules: { maxAttempts: number } }) => t.retryRules.maxAttempts === 2));
    const bad = await h().call('POST', '/api/v2/agent/outboundCall', { token: org.token, body: { targets: ['+14155550112', { target: '+14155550113', retryRules: { on: ['maybe'], delaysSec: [1], maxAttempts: 2 } }] } });
    assert.equal(bad.status, 400);
    assert.match(bad.body.message, /^targets\[1\]\.retryRules\.on\[0\] must be one of no-answer, busy, failed, voicemail/);
    const text = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'text', target: '+14155550114', content: 'hi', retryRules: { on: ['busy'], delaysSec: [1], maxAttempts: 2 } } });
    assert.equal(text.status, 400);
    assert.match(text.body.message, /^retryRules applies to call tasks only/);
    const agentBad = await h().call('POST', '/api/v2/agent', { token: org.token, query: { targetAccountId: org.agentId }, body: { callingWindow: { days: [7], start: '09:00', end: '17:00' } } });
    assert.equal(agentBad.status, 400);
    assert.match(agentBad.body.message, /callingWindow/);
    const orgBad = await h().call('POST', '/api/v2/tasks/limits', { token: org.token, body: { callingWindow: { days: [1], start: '9am', end: '17:00' } } });
    assert.equal(orgBad.status, 400);
    assert.match(orgBad.body.message, /^callingWindow\.start must be a time as HH:MM/);
    const read = await h().call('GET', '/api/v2/tasks/limits', { token: org.token });
    assert.equal(read.body.limits.callingWindow, undefined, 'absent while not set');
  });

  it('a CSV upload takes callingWindow and retryRules as JSON cells, refusing a bad one by its line', async () => {
    const org = await tenant('America/New_York');
    const q = (o: unknown) => `"${JSON.stringify(o).replaceAll('"', '""')}"`;
    const csv = [
      'type,target,callingWindow,retryRules',
      `call,+14155550120,${q({ days: [1, 2], start: '09:00', end: '17:00' })},${q({ on: ['busy'], delaysSec: [60], maxAttempts: 2 })}`,
      'call,+14155550121,null,',
      `call,+14155550122,${q({ days: [1], start: '09:00' })},`,
    ].join('\n') + '\n';
    const boundary = '----campaigns';
    const payload = `--${boundary}\r\nContent-Disposition: form-data; name="csv"; filename="t.csv"\r\nContent-Type: text/csv\r\n\r\n${csv}\r\n--${boundary}--\r\n`;
    const res = await h().call('POST', '/api/v2/tasks/csv', { token: org.token, payload, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual([res.body.inserted, res.body.invalid], [2, 1]);
    assert.equal(res.body.errors[0].line, 4);
    assert.match(res.body.errors[0].message, /callingWindow\.end is required/);
    const list = (await h().call('GET', '/api/v2/tasks', { token: org.token, query: { sort: 'createdAt', order: 'asc' } })).body.tasks;
    assert.deepEqual(list.map((t: { callingWindow?: unknown }) => t.callingWindow), [{ days: [1, 2], start: '09:00', end: '17:00' }, null]);
    assert.deepEqual(list[0].retryRules, { on: ['busy'], delaysSec: [60], maxAttempts: 2 });
  });
}, { CALLPLANE_SIMULATED_CALL_SECONDS: '0.2' });
