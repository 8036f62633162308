// What a plan includes is enforced (issue 26, docs/billing.md "Included amounts"), on both engines
// with real tasks: past an included amount with no overage sold the next call or text stays
// pending with its reason, until a plan change, a new billing period (set, or its time come) or an
// add-on releases it; with overage sold it runs and costs. Add-ons bought per organization
// (POST/DELETE /api/v2/addon/{addonId}), validated, listed, counted in usage and enforcement, and
// tenancy. The first suite runs the harness's own task worker (the cached entitlements of a
// process); the second claims with the task engine on a clock of its own, so that records can be
// written on an earlier day of a period.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { TaskRow } from '../../src/db/types.ts';
import { nextMonthStart } from '../../src/modules/billing/periods.ts';
import { usageRepo } from '../../src/modules/billing/repository.ts';
import { createTaskEngine } from '../../src/modules/tasks/queue-hooks.ts';
import { planAllowance, uncachedEntitlements } from '../../src/modules/billing/entitlements.ts';
import { uncachedSubscribers } from '../../src/modules/tasks/subscribers.ts';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness, Reply } from '../helpers/harness.ts';
import { waitFor } from '../queue/fixtures.ts';

const DAY = 86_400_000;
const phone = (n: number) => `+1500555${String(2000 + n).padStart(4, '0')}`;

function ok(res: Reply, label = ''): any {
  assert.equal(res.status, 200, `${label} ${JSON.stringify(res.body)}`);
  return res.body;
}
function status(res: Reply, code: number, label = ''): any {
  assert.equal(res.status, code, `${label} expected ${code}: ${JSON.stringify(res.body)}`);
  if (code >= 400) assert.equal(res.body.success, false);
  return res.body;
}

/** A plan including little of everything, nothing sold past it unless `overage` says. */
function tinyPlan(included: Record<string, number | null>, overage: Record<string, number | null> = {}) {
  return {
    name: 'Tiny', monthlyPrice: 5, yearlyPrice: 50, currency: 'USD',
    included: { callMinutes: null, texts: null, tasks: null, conversations: null, modelTokens: null, ...included },
    overage: { callMinute: null, text: null, task: null, conversation: null, modelTokensPer1k: null, ...overage },
    limits: { concurrencyPerRun: 5 },
  };
}

forEachEngine('included amounts, with the task worker', (h) => {
  const call = (method: string, url: string, opts?: Parameters<Harness['call']>[2]) => h().call(method, url, opts);

  it('the N+1th task stays pending with its reason; a plan that sells overage lets it run and costs it', async () => {
    const r = await h().reseller();
    ok(await call('PUT', '/api/v2/product/catalog/plan/pplan-two-tasks', { token: r.token, body: tinyPlan({ tasks: 2 }) }));
    ok(await call('PUT', '/api/v2/product/catalog/plan/pplan-two-plus', { token: r.token, body: tinyPlan({ tasks: 2 }, { task: 0.25 }) }));
    const o = await h().organization(r.id, { productPlanId: 'pplan-two-tasks' });
    const ids: string[] = [];
    // Three texts at once: the claim admits two (the second under the first's running slot) and holds the third.
    for (let i = 0; i < 3; i++) {
      const res = await call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'text', target: phone(i), content: `hello ${i}` } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      ids.push(res.body.task.id);
    }
    const db = h().database.db;
    const states = async () => (await db.selectFrom('tasks').select(['id', 'state', 'held_reason', 'run_at']).where('id', 'in', ids).orderBy('id').execute());
    const held = await waitFor('two texts sent and the third held for the period', async () => {
      const rows = await states();
      const done = rows.filter((t) => t.state === 'finished');
      const waiting = rows.filter((t) => t.state === 'pending' && t.held_reason?.startsWith('included amount used'));
      return done.length === 2 && waiting.length === 1 && waiting[0];
    }, 20_000);
    const view = ok(await call('GET', `/api/v2/tasks/${held.id}`, { token: o.token }));
    const task = view.task ?? view;
    assert.equal(task.state, 'pending');
    assert.match(task.heldReason, /included amount used: 2 of the 2 tasks its plan pplan-two-tasks includes/);
    assert.match(task.heldReason, /no overage is sold/);
    // Held until the period ends: the calendar month in the organization's zone (UTC here).
    assert.equal(Number(held.run_at), nextMonthStart(Date.now(), 'UTC'));
    // Still held a while later (the runner looks at due tasks every second).
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal((await states()).filter((t) => t.state === 'finished').length, 2);

    // A plan selling tasks past the included ones: the held text runs at once.
    ok(await call('POST', '/api/v2/product/subscribe', { token: o.token, body: { productPlanId: 'pplan-two-plus', term: 'month' } }));
    await waitFor('the held text to run', async () => (await states()).every((t) => t.state === 'finished'), 20_000);
    const u = ok(await call('GET', '/api/v2/stats/usage', { token: o.token, query: { combineCosts: true } }));
    assert.equal(u.usage.tasks, 3);
    assert.equal(u.usage['cost:tasks'], 0.25, 'one task past the two included, at 0.25');
    assert.equal(u.overIncluded.tasks, 1);
    assert.equal(u.usage['cost:total'], 5.25);
  });
}, { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, { worker: true, runtime: { carrierOptions: { simulated: { textSeconds: 0.02 } } } });

forEachEngine('included amounts, periods and add-ons', (h) => {
  const call = (method: string, url: string, opts?: Parameters<Harness['call']>[2]) => h().call(method, url, opts);
  const db = () => h().database.db;

  /** A task engine claiming at `clock.t` (no worker runs in this harness). */
  function engineAt(clock: { t: number }) {
    return createTaskEngine({ workerId: 'enforce-test', subscribers: uncachedSubscribers, allowance: planAllowance(uncachedEntitlements), now: () => clock.t });
  }
  async function submit(token: string, body: Record<string, unknown>): Promise<string> {
    const res = await call('POST', '/api/v2/tasks', { token, body });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.task.id as string;
  }
  async function row(id: string): Promise<TaskRow> {
    return db().selectFrom('tasks').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  }
  /** Starts one task now and ends it at `endAt` (a call lasting `seconds`): what it used counts on endAt's day. */
  async function runEndingAt(endAt: number, id: string, seconds = 30): Promise<void> {
    const clock = { t: Date.now() };
    const engine = engineAt(clock);
    const [claimed] = await engine.claim(db(), 10);
    assert.equal(claimed?.id, id, 'the task starts');
    clock.t = endAt;
    await engine.complete(db(), claimed, { state: 'finished', set: { result: JSON.stringify({ durationSeconds: seconds }) } });
  }
  const period = (token: string, orgId: number, startMs: number, endMs: number) => call('POST', '/api/v2/billing/billingPeriod', {
    token, query: { targetAccountId: orgId }, body: { startDateTimestamp: Math.floor(startMs / 1000), endDateTimestamp: Math.floor(endMs / 1000) },
  });

  it('a call past the included call minutes waits; a new billing period releases it at once', async () => {
    const now = Date.now();
    const r = await h().reseller();
    ok(await call('PUT', '/api/v2/product/catalog/plan/pplan-one-minute', { token: r.token, body: tinyPlan({ callMinutes: 1 }) }));
    const o = await h().organization(r.id, { productPlanId: 'pplan-one-minute' });
    ok(await period(r.token, o.id, now - 5 * DAY, now + 30 * DAY));
    const clock = { t: now };
    const first = await submit(o.token, { type: 'call', target: phone(10) });
    await runEndingAt(now - DAY, first, 30); // one minute, yesterday

    const second = await submit(o.token, { type: 'call', target: phone(11) });
    clock.t = Date.now();
    assert.deepEqual(await engineAt(clock).claim(db(), 10), [], 'the second call waits');
    const held = await row(second);
    assert.equal(held.state, 'pending');
    assert.match(held.held_reason ?? '', /included amount used: 1 of the 1 call minutes/);
    assert.equal(Number(held.run_at), now + 30 * DAY - (now + 30 * DAY) % 1000, 'until the period ends');

    // The reseller starts the next period now: yesterday's minute is the old period's.
    ok(await period(r.token, o.id, now, now + 30 * DAY));
    const released = await row(second);
    assert.equal(released.held_reason, null);
    assert.ok(Number(released.run_at) <= Date.now(), 'due again at once');
    clock.t = Date.now();
    const [started] = await engineAt(clock).claim(db(), 10);
    assert.equal(started?.id, second);
    await engineAt(clock).complete(db(), started, { state: 'finished' });
  });

  it('held until the period ends, a text runs when its time comes and the next period begins', async () => {
    const now = Date.now();
    const rollover = now + 3_600_000;
    const r = await h().reseller();
    ok(await call('PUT', '/api/v2/product/catalog/plan/pplan-one-text', { token: r.token, body: tinyPlan({ texts: 1 }) }));
    const o = await h().organization(r.id, { productPlanId: 'pplan-one-text', timezone: 'America/New_York' });
    ok(await period(r.token, o.id, now - 5 * DAY, rollover));
    ok(await period(r.token, o.id, rollover, rollover + 30 * DAY)); // set ahead: it begins at the rollover
    const clock = { t: now };
    await runEndingAt(now - DAY, await submit(o.token, { type: 'text', target: phone(20), content: 'one' }));
    const second = await submit(o.token, { type: 'text', target: phone(21), content: 'two' });
    clock.t = Date.now();
    assert.deepEqual(await engineAt(clock).claim(db(), 10), []);
    const held = await row(second);
    assert.equal(Number(held.run_at), Math.floor(rollover / 1000) * 1000, 'held until the rollover');
    assert.match(held.held_reason ?? '', /1 of the 1 texts/);
    clock.t = Number(held.run_at) - 1;
    assert.deepEqual(await engineAt(clock).claim(db(), 10), [], 'not before');
    clock.t = Number(held.run_at);
    const [started] = await engineAt(clock).claim(db(), 10);
    assert.equal(started?.id, second, 'the new period lets it start');
    await engineAt(clock).complete(db(), started, { state: 'finished' });
  });

  it('add-ons: bought for the organization or by an ancestor, validated, listed, counted in costs and in what tasks may use', async () => {
    const now = Date.now();
    const r = await h().reseller();
    ok(await call('PUT', '/api/v2/product/catalog/plan/pplan-one-text', { token: r.token, body: tinyPlan({ texts: 1 }, { task: 0.01 }) }));
    const addon = (adds: Record<string, number>, plans: string[], extra: Record<string, unknown> = {}) => ({
      name: 'More', monthlyPrice: 3, yearlyPrice: 30, adds: { callMinutes: 0, texts: 0, tasks: 0, conversations: 0, modelTokens: 0, ...adds }, plans, ...extra,
    });
    ok(await call('PUT', '/api/v2/product/catalog/addon/addon-two-texts', { token: r.token, body: addon({ texts: 2 }, ['pplan-one-text']) }));
    ok(await call('PUT', '/api/v2/product/catalog/addon/addon-business-only', { token: r.token, body: addon({ texts: 5 }, ['pplan-business']) }));
    ok(await call('PUT', '/api/v2/product/catalog/addon/addon-euros', { token: r.token, body: addon({ texts: 5 }, [], { currency: 'EUR' }) }));
    const o = await h().organization(r.id, { productPlanId: 'pplan-one-text' });
    const clock = { t: now };
    await runEndingAt(now, await submit(o.token, { type: 'text', target: phone(30), content: 'one' }));
    const second = await submit(o.token, { type: 'text', target: phone(31), content: 'two' });
    clock.t = Date.now();
    assert.deepEqual(await engineAt(clock).claim(db(), 10), [], 'past the one included text');

    // Validation: not in the catalog, not for this plan, another currency, a malformed id.
    status(await call('POST', '/api/v2/addon/addon-nope', { token: o.token }), 404);
    assert.match(status(await call('POST', '/api/v2/addon/addon-business-only', { token: o.token }), 400).message, /does not fit.*pplan-one-text/);
    assert.match(status(await call('POST', '/api/v2/addon/addon-euros', { token: o.token }), 400).message, /EUR/);
    assert.match(status(await call('POST', '/api/v2/addon/Not_An_Id', { token: o.token }), 400).message, /addonId/);

    // Tenancy: another organization (even naming this one), another reseller, an agent.
    const stranger = await h().organization(r.id);
    const otherReseller = await h().reseller();
    status(await call('POST', '/api/v2/addon/addon-two-texts', { token: stranger.token, query: { targetAccountId: o.id } }), 404);
    status(await call('POST', '/api/v2/addon/addon-two-texts', { token: otherReseller.token, query: { targetAccountId: o.id } }), 404);
    const agent = await h().agent(o.id);
    status(await call('POST', '/api/v2/addon/addon-two-texts', { token: agent.token }), 403);
    assert.equal((ok(await call('GET', '/api/v2/product/currentPlan', { token: stranger.token }))).addons.length, 0);

    // The organization buys it: the held text is released at once and may start.
    const bought = ok(await call('POST', '/api/v2/addon/addon-two-texts', { token: o.token })).addon;
    assert.equal(bought.addonId, 'addon-two-texts');
    assert.equal(bought.appliesToPlan, true);
    status(await call('POST', '/api/v2/addon/addon-two-texts', { token: o.token }), 409);
    assert.equal((await row(second)).held_reason, null);
    clock.t = Date.now();
    const [started] = await engineAt(clock).claim(db(), 10);
    assert.equal(started?.id, second, 'the add-on\'s texts let it start');
    await engineAt(clock).complete(db(), started, { state: 'finished' });

    const plan = ok(await call('GET', '/api/v2/product/currentPlan', { token: o.token }));
    assert.deepEqual(plan.addons.map((a: { addonId: string }) => a.addonId), ['addon-two-texts']);
    const u = ok(await call('GET', '/api/v2/stats/usage', { token: o.token, query: { combineCosts: true } }));
    assert.equal(u.included.texts, 3, 'one included, two added');
    assert.deepEqual(u.addons, ['addon-two-texts']);
    assert.equal(u.usage.texts, 2);
    assert.equal(u.usage['cost:addons'], 3);
    assert.equal(u.usage['cost:total'], 8, 'the plan (5) and the add-on (3)');

    // The reseller removes it for the organization; again: 404. The range it was in keeps counting it.
    const removed = ok(await call('DELETE', '/api/v2/addon/addon-two-texts', { token: r.token, query: { targetAccountId: o.id } })).addon;
    assert.ok(removed.removedAt !== null);
    status(await call('DELETE', '/api/v2/addon/addon-two-texts', { token: r.token, query: { targetAccountId: o.id } }), 404);
    assert.equal(ok(await call('GET', '/api/v2/product/currentPlan', { token: o.token })).addons.length, 0);
    assert.equal(ok(await call('GET', '/api/v2/stats/usage', { token: o.token })).included.texts, 3);
    // With it gone, a third text waits again (2 used, 1 included from now on).
    await submit(o.token, { type: 'text', target: phone(32), content: 'three' });
    clock.t = Date.now();
    assert.deepEqual(await engineAt(clock).claim(db(), 10), []);
  });

  it('usage over whole months reads usage_monthly and agrees with the days', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id, { timezone: 'Asia/Tokyo' });
    const at = (iso: string) => Date.parse(iso);
    // Local days in Tokyo: 31 Jan, 1 Feb, 15 Feb, 28 Feb, 1 Mar, 2 Apr.
    const writes: [string, number][] = [
      ['2026-01-31T10:00:00+09:00', 1], ['2026-02-01T00:30:00+09:00', 2], ['2026-02-15T12:00:00+09:00', 4],
      ['2026-02-28T23:59:00+09:00', 8], ['2026-03-01T00:01:00+09:00', 16], ['2026-04-02T09:00:00+09:00', 32],
    ];
    for (const [when, n] of writes) await db().transaction().execute((tx) => usageRepo.add(tx, o.id, at(when), { texts: n }));
    const texts = async (query: Record<string, unknown>) => ok(await call('GET', '/api/v2/stats/usage', { token: o.token, query })).usage.texts as number;
    const byDay = async (from: string, to: string) => {
      const u = ok(await call('GET', '/api/v2/stats/usage', { token: o.token, query: { timeseries: true, startDate: from, endDate: to } }));
      return (u.timeseries as { texts: number }[]).reduce((n, p) => n + p.texts, 0);
    };
    for (const [from, to, expected] of [
      ['2026-01-31T00:00:00+09:00', '2026-04-30T00:00:00+09:00', 63], // part of Jan, Feb and Mar whole, part of Apr
      ['2026-02-01T00:00:00+09:00', '2026-02-28T00:00:00+09:00', 14], // February whole
      ['2026-02-02T00:00:00+09:00', '2026-03-01T00:00:00+09:00', 28], // parts only
      ['2026-01-01T00:00:00+09:00', '2026-12-31T00:00:00+09:00', 63], // a year
    ] as const) {
      assert.equal(await texts({ startDate: from, endDate: to }), expected, `${from} to ${to}`);
      assert.equal(await byDay(from, to), expected, `${from} to ${to} by day`);
      const months = ok(await call('GET', '/api/v2/stats/usage', { token: o.token, query: { timeseries: true, frequency: 'month', startDate: from, endDate: to } }));
      assert.equal((months.timeseries as { texts: number }[]).reduce((n, p) => n + p.texts, 0), expected, `${from} to ${to} by month`);
    }
    const rows = await db().selectFrom('usage_monthly').select(['month', 'n']).where('org_id', '=', o.id).orderBy('month').execute();
    assert.deepEqual(rows.map((x) => [x.month, Number(x.n)]), [['2026-01', 1], ['2026-02', 14], ['2026-03', 16], ['2026-04', 32]]);
  });
}, { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' });
