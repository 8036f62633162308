// Task execution end to end: submitted through the API, run by the real worker (TaskQueue with
// the task engine's limit hooks and the carrier handler, SIMULATED carrier), observed in the
// database. On PostgreSQL, extra TaskQueue workers on their own connection pools share the
// database, as worker processes would.
import { listenForWakeups, Wakeups } from '../../src/queue/waker.ts';
import type { Listener } from '../../src/db/index.ts';
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { openDatabase, type Database } from '../../src/db/index.ts';
import type { TaskRow } from '../../src/db/types.ts';
import { taskQueue, taskWorker, type TaskQueue, type TaskQueueDeps } from '../../src/modules/tasks/task-queue.ts';
import { cachedEntitlements, planAllowance } from '../../src/modules/billing/entitlements.ts';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness } from '../helpers/harness.ts';
import { attemptIntervals, eventsByTask, historyProblems, keepTaskHistory } from '../helpers/task-events.ts';
import { sleep, waitFor } from '../queue/fixtures.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const FINAL = ['finished', 'failed', 'canceled'];
const BUSY = '+15005550002';
const NO_ANSWER = '+15005550003';
const UNAVAILABLE = '+15005550009';
/** Numbers the SIMULATED carrier answers and completes. */
const phone = (n: number) => `+1500555${String(1000 + n).padStart(4, '0')}`;

type Org = { id: number; agentId: number; token: string };

function kit(h: () => Harness) {
  const db = () => h().database.db;
  const api = {
    async tenant(orgBody: Record<string, unknown> = {}) {
      const r = await h().reseller();
      const o = await h().organization(r.id, orgBody);
      // These tests read each task's history from its events.
      await keepTaskHistory(h(), o);
      return { reseller: r, org: o };
    },
    async submit(org: Org, body: Record<string, unknown>): Promise<string> {
      const res = await h().call('POST', '/api/v2/tasks', { token: org.token, body });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return res.body.task.id;
    },
    async calls(org: Org, targets: string[], extra: Record<string, unknown> = {}): Promise<string[]> {
      const res = await h().call('POST', '/api/v2/agent/outboundCall', { token: org.token, body: { targets, ...extra } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.tasks.map((t: { id: string }) => t.id);
    },
    /** Limits set by `token` for the organization (a reseller's token for daily and concurrencyPerRun). */
    async limits(token: string, orgId: number, body: Record<string, unknown>) {
      const res = await h().call('POST', '/api/v2/tasks/limits', { token, query: { targetAccountId: orgId }, body });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.limits;
    },
    async view(org: Org, id: string) {
      const res = await h().call('GET', `/api/v2/tasks/${id}`, { token: org.token });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.task;
    },
    row: (id: string): Promise<TaskRow> => db().selectFrom('tasks').selectAll().where('id', '=', id).executeTakeFirstOrThrow(),
    rows: (ids: string[]): Promise<TaskRow[]> => db().selectFrom('tasks').selectAll().where('id', 'in', ids).orderBy('id').execute(),
    /** Waits until every task has ended; returns the rows. */
    async settled(ids: string[], timeoutMs = 15_000): Promise<TaskRow[]> {
      return waitFor(`${ids.length} task(s) to end`, async () => {
        const rows = await api.rows(ids);
        return rows.every((r) => FINAL.includes(r.state)) && rows;
      }, timeoutMs);
    },
    async semaphore(orgId: number): Promise<number> {
      const s = await db().selectFrom('org_semaphores').select('running').where('org_id', '=', orgId).executeTakeFirst();
      return Number(s?.running ?? 0);
    },
    /** The task's event types in order, each with the attempt it records. */
    async history(id: string): Promise<string[]> {
      const events = (await eventsByTask(db(), [id])).get(id) ?? [];
      return events.map((e) => `${e.type.slice(5)}#${e.attempt}`);
    },
  };
  return api;
}

/** Extra workers on their own connection pools (PostgreSQL), stopped and closed by `close()`. */
function extraWorkers(h: Harness) {
  const started: { runtime: TaskQueue; database: Database; listener: Listener }[] = [];
  return {
    async start(overrides: Partial<Omit<TaskQueueDeps, 'database' | 'wakeups'>> = {}): Promise<TaskQueue> {
      const database = h.engine === 'postgres' ? openDatabase({ databaseUrl: h.config.databaseUrl, poolSize: 3 }) : h.database;
      // Another process: its own wake-up bus, fed by its own LISTEN connection (PostgreSQL).
      const wakeups = new Wakeups();
      const listener = await listenForWakeups(database, wakeups);
      const config = overrides.config ?? h.config;
      const runtime = taskQueue({ database, config: h.config, wakeups, allowance: planAllowance(cachedEntitlements(database.db)), ...overrides }).join(taskWorker({ db: database.db, config, box: h.box }));
      started.push({ runtime, database, listener });
      runtime.startWorker();
      return runtime;
    },
    async close() {
      for (const { runtime, database, listener } of started.splice(0)) {
        await runtime.stop();
        await listener.close();
        if (database !== h.database) await database.close();
      }
    },
  };
}

/** The wall clock of `ms` in a zone with a fixed offset, as a UTC timestamp of the same digits. */
const wallAt = (ms: number, offsetMs: number) => ms + offsetMs;
const pad = (n: number) => String(n).padStart(2, '0');

/** Every task of the database: its history is valid and org_task_counts equals a count of the table. */
async function checkOutboxAndCounts(h: Harness) {
  const db = h.database.db;
  const tasks = await db.selectFrom('tasks').select(['id', 'state', 'attempt', 'org_id']).execute();
  assert.ok(tasks.length > 0);
  const events = await eventsByTask(db);
  const problems = tasks.flatMap((t) => historyProblems(t, events.get(t.id) ?? []));
  assert.deepEqual(problems, []);
  const counted = await db.selectFrom('tasks').select(['org_id', 'state', (eb) => eb.fn.countAll<number>().as('n')])
    .groupBy(['org_id', 'state']).execute();
  const expected = new Map<number, Record<string, number>>();
  for (const c of counted) {
    const m = expected.get(c.org_id) ?? { pending: 0, running: 0, finished: 0, failed: 0, canceled: 0 };
    m[c.state] = Number(c.n);
    expected.set(c.org_id, m);
  }
  const kept = await db.selectFrom('org_task_counts').selectAll().execute();
  for (const k of kept) {
    const want = expected.get(k.org_id) ?? { pending: 0, running: 0, finished: 0, failed: 0, canceled: 0 };
    const have = { pending: Number(k.pending), running: Number(k.running), finished: Number(k.finished), failed: Number(k.failed), canceled: Number(k.canceled) };
    assert.deepEqual(have, want, `org_task_counts of organization ${k.org_id}`);
    expected.delete(k.org_id);
  }
  assert.deepEqual([...expected.keys()], [], 'organizations with tasks but no org_task_counts row');
  return { tasks: tasks.length, states: new Set(tasks.map((t) => t.state)) };
}

forEachEngine('task execution', (h) => {
  const k = kit(h);

  it('scheduled tasks start in order, never before their scheduledFor and within 1 s after it', async () => {
    const { org } = await k.tenant();
    const base = Math.ceil(Date.now() / 1000) + 2;
    // Submitted latest first, so creation order is not what orders the runs.
    const plan = [
      { at: base + 3, body: { type: 'call', target: phone(1) } },
      { at: base + 2, body: { type: 'ping' } },
      { at: base + 1, body: { type: 'text', target: phone(2), content: 'hi' } },
      { at: base, body: { type: 'ping' } },
    ];
    const ids: string[] = [];
    for (const p of plan) ids.push(await k.submit(org, { ...p.body, scheduledFor: p.at }));
    const view = await k.view(org, ids[0]);
    assert.equal(view.state, 'pending');
    assert.equal(view.runAt, base + 3);
    const rows = await k.settled(ids, 15_000);
    for (const [i, row] of rows.map((r) => r).sort((a, b) => ids.indexOf(a.id) - ids.indexOf(b.id)).entries()) {
      const due = plan[i].at * 1000;
      assert.equal(row.state, 'finished', `${plan[i].body.type}: ${row.error}`);
      assert.ok(row.started_at! >= due, `${plan[i].body.type} started ${due - row.started_at!} ms before scheduledFor`);
      assert.ok(row.started_at! - due <= 1000, `${plan[i].body.type} started ${row.started_at! - due} ms after scheduledFor`);
    }
    const order = rows.slice().sort((a, b) => a.started_at! - b.started_at!).map((r) => r.id);
    assert.deepEqual(order, ids.slice().reverse());
  });

  it('changing scheduledFor of a pending task moves it: earlier runs earlier, later runs no sooner', async () => {
    const { org } = await k.tenant();
    const now = Math.ceil(Date.now() / 1000);
    const early = await k.submit(org, { type: 'ping', scheduledFor: now + 60 });
    const late = await k.submit(org, { type: 'ping', scheduledFor: now + 2 });
    await sleep(200); // the runner has looked and set its timer for now + 2
    const moved = await h().call('POST', `/api/v2/tasks/${early}`, { token: org.token, body: { scheduledFor: now + 2 } });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    assert.equal(moved.body.task.runAt, now + 2);
    const put = await h().call('POST', `/api/v2/tasks/${late}`, { token: org.token, body: { scheduledFor: now + 4 } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    const [a, b] = await Promise.all([k.settled([early]), k.settled([late])]).then((r) => r.map((x) => x[0]));
    assert.ok(a.started_at! >= (now + 2) * 1000 && a.started_at! - (now + 2) * 1000 <= 1000, `moved-earlier task started at ${a.started_at! - now * 1000} ms`);
    assert.ok(b.started_at! >= (now + 4) * 1000 && b.started_at! - (now + 4) * 1000 <= 1000, `moved-later task started at ${b.started_at! - now * 1000} ms`);
  });

  it('concurrencyPerRun 2 (set by the reseller) is never exceeded under load, across workers sharing the database', async () => {
    const { reseller, org } = await k.tenant();
    await k.limits(reseller.token, org.id, { concurrencyPerRun: 2 });
    const extras = extraWorkers(h());
    const db = h().database.db;
    const owners = new Set<string>();
    let maxSem = 0, maxRunning = 0, samples = 0, sampling = true;
    try {
      if (h().engine === 'postgres') {
        // Three workers that may each run one task: two can only run at once if the semaphore
        // lets two different workers in, and a third never may.
        await h().tasks.stop();
        const one = { ...h().config, workerConcurrency: 1 };
        for (let i = 0; i < 3; i++) await extras.start({ config: one });
      }
      const sampler = (async () => {
        while (sampling) {
          const [sem, running] = await Promise.all([
            k.semaphore(org.id),
            db.selectFrom('tasks').select(['lease_owner']).where('org_id', '=', org.id).where('state', '=', 'running').execute(),
          ]);
          maxSem = Math.max(maxSem, sem);
          maxRunning = Math.max(maxRunning, running.length);
          for (const r of running) owners.add(r.lease_owner!);
          samples++;
          await sleep(3);
        }
      })();
      const ids = await k.calls(org, Array.from({ length: 20 }, (_, i) => phone(100 + i)));
      const rows = await k.settled(ids, 60_000);
      sampling = false;
      await sampler;
      assert.ok(rows.every((r) => r.state === 'finished'), rows.map((r) => `${r.state} ${r.error}`).join('\n'));
      assert.ok(maxSem <= 2, `semaphore reached ${maxSem}`);
      assert.ok(maxRunning <= 2, `${maxRunning} tasks were running at once`);
      assert.ok(samples > 50, `only ${samples} samples`);
      assert.equal(maxRunning, 2, 'the limit was never reached: the test did not load the organization');
      // Afterwards, from the outbox: at no call's start were two others still running. The
      // running event is stamped after the claim holds the semaphore and the exit event before the
      // release, so a start that waited for a free slot is never earlier than that slot's end.
      // (started_at is the claim transaction's clock, taken before it waits for the semaphore lock.)
      const events = await eventsByTask(db, ids);
      const spans = ids.map((id) => {
        const { intervals } = attemptIntervals(events.get(id)!);
        assert.equal(intervals.length, 1);
        return intervals[0];
      });
      let peak = 0;
      for (const s of spans) peak = Math.max(peak, spans.filter((o) => o.start <= s.start && o.end! > s.start).length);
      assert.ok(peak <= 2, `${peak} calls overlapped:\n${spans.map((o) => `${o.start - spans[0].start} ${o.end! - spans[0].start}`).join('\n')}`);
      assert.equal(await k.semaphore(org.id), 0, 'the semaphore was released by every exit');
      if (h().engine === 'postgres') assert.ok(owners.size >= 2, `one worker ran everything: ${[...owners].join(', ')}`);
    } finally {
      sampling = false;
      await extras.close();
      h().tasks.startWorker();
    }
  });

  it('a call waiting for a concurrency slot starts when a slot frees, not at a later recheck', async () => {
    const { reseller, org } = await k.tenant();
    await k.limits(reseller.token, org.id, { concurrencyPerRun: 1 });
    const ids = await k.calls(org, [phone(150), phone(151), phone(152), phone(153)]);
    const rows = await k.settled(ids, 20_000);
    assert.ok(rows.every((r) => r.state === 'finished'));
    const events = await eventsByTask(h().database.db, ids);
    const spans = ids.map((id) => attemptIntervals(events.get(id)!).intervals[0]).sort((a, b) => a.start - b.start);
    const gaps = spans.slice(1).map((s, i) => s.start - spans[i].end!);
    assert.ok(gaps.every((g) => g >= 0), `overlap: ${gaps.join(', ')}`);
    // The release wakes the workers; a call must not sit out a fixed recheck delay with the slot free.
    assert.ok(gaps.every((g) => g <= 250), `idle slot between calls: ${gaps.join(', ')} ms`);
  });

  it('outside business hours (in their time zone) calls stay pending until the next opening; pings still run; removing the window releases them', async () => {
    const { org } = await k.tenant();
    const ZONE = 'Asia/Kolkata';
    const OFFSET = 5.5 * HOUR; // no DST
    const wall = wallAt(Date.now(), OFFSET);
    const hour = new Date(wall).getUTCHours();
    const opens = (hour + 2) % 24; // a one-hour window two hours from now: closed now
    const hours = { timezone: ZONE, days: [0, 1, 2, 3, 4, 5, 6], start: `${pad(opens)}:00`, end: opens === 23 ? '24:00' : `${pad(opens + 1)}:00` };
    await k.limits(org.token, org.id, { businessHours: hours });
    let openWall = Math.floor(wall / DAY) * DAY + opens * HOUR;
    if (openWall <= wall) openWall += DAY;
    const expected = openWall - OFFSET;

    const call = await k.submit(org, { type: 'call', target: phone(200) });
    const ping = await k.submit(org, { type: 'ping' });
    const [pinged] = await k.settled([ping]);
    assert.equal(pinged.state, 'finished');
    const deferred = await waitFor('the call to be deferred', async () => {
      const r = await k.row(call);
      return r.run_at > Date.now() + 60_000 && r;
    });
    assert.equal(deferred.state, 'pending');
    assert.equal(deferred.attempt, 0);
    assert.equal(deferred.run_at, expected, `runAt ${new Date(deferred.run_at).toISOString()}, expected ${new Date(expected).toISOString()}`);
    assert.equal((await k.view(org, call)).runAt, expected / 1000);
    assert.equal(await k.semaphore(org.id), 0);

    await k.limits(org.token, org.id, { businessHours: null });
    const [ran] = await k.settled([call], 10_000);
    assert.equal(ran.state, 'finished');
    assert.equal(ran.attempt, 1);
  });

  it('a daily cap of 2 calls defers the 3rd to the next local midnight of the organization; raising the cap releases it', async () => {
    // UTC+14 all year: its day differs from UTC's for most of each day, so a midnight computed in
    // the wrong zone would show.
    const ZONE = 'Pacific/Kiritimati';
    const OFFSET = 14 * HOUR;
    const { reseller, org } = await k.tenant({ timezone: ZONE });
    await k.limits(reseller.token, org.id, { daily: { calls: 2 } });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await k.submit(org, { type: 'call', target: phone(300 + i) }));
    const ping = await k.submit(org, { type: 'ping' });
    const done = await k.settled([ids[0], ids[1], ping]);
    assert.ok(done.every((r) => r.state === 'finished'));
    const third = await waitFor('the 3rd call to be deferred', async () => {
      const r = await k.row(ids[2]);
      return r.run_at > Date.now() + 1000 && r;
    });
    const wall = wallAt(Date.now(), OFFSET);
    const midnight = Math.floor(wall / DAY) * DAY + DAY - OFFSET;
    assert.equal(third.state, 'pending');
    assert.equal(third.run_at, midnight, `runAt ${new Date(third.run_at).toISOString()}, expected ${new Date(midnight).toISOString()}`);
    const day = new Date(wall).toISOString().slice(0, 10);
    const counts = await h().call('GET', '/api/v2/tasks/dailyCounts', { token: org.token });
    assert.equal(counts.status, 200);
    assert.deepEqual(counts.body.counts, { calls: 2, texts: 0, tasks: 2, date: day, timezone: ZONE });

    await k.limits(reseller.token, org.id, { daily: { calls: 3 } });
    const [ran] = await k.settled([ids[2]], 10_000);
    assert.equal(ran.state, 'finished');
  });

  it('a cooldown of 2 s between calls to one number: the second call starts at least 2 s after the first', async () => {
    const { org } = await k.tenant();
    await k.limits(org.token, org.id, { cooldowns: { calls: 2 } });
    const number = phone(400);
    const ids = await k.calls(org, [number, number]);
    const other = await k.submit(org, { type: 'call', target: phone(401) });
    const rows = await k.settled([...ids, other], 15_000);
    const [first, second] = rows.filter((r) => r.target === number).sort((a, b) => a.started_at! - b.started_at!);
    assert.ok(rows.every((r) => r.state === 'finished'));
    const gap = second.started_at! - first.started_at!;
    assert.ok(gap >= 2000, `the second call started ${gap} ms after the first`);
    assert.ok(gap <= 3500, `the second call waited ${gap} ms`);
    // Another number is not held back by that cooldown.
    const otherRow = rows.find((r) => r.id === other)!;
    assert.ok(otherRow.started_at! < first.started_at! + 1500, 'a call to another number waited for the cooldown');
  });

  it('a transient carrier error is retried with backoff until maxAttempts, then the task fails with attempts = 3', async () => {
    const { org } = await k.tenant();
    const id = await k.submit(org, { type: 'call', target: UNAVAILABLE });
    const [row] = await k.settled([id], 20_000);
    assert.equal(row.state, 'failed');
    assert.equal(row.attempt, 3);
    assert.match(row.error ?? '', /unavailable.*after 3 attempts/);
    const events = (await eventsByTask(h().database.db, [id])).get(id)!;
    assert.deepEqual(events.map((e) => `${e.type.slice(5)}#${e.attempt}`),
      ['pending#0', 'running#1', 'retrying#1', 'running#2', 'retrying#2', 'running#3', 'failed#3']);
    // The backoff between attempts: about 1 s, then about 2 s (±20 %).
    const at = (type: string, attempt: number) => events.find((e) => e.type === type && e.attempt === attempt)!.at;
    const waits = [at('task.running', 2) - at('task.retrying', 1), at('task.running', 3) - at('task.retrying', 2)];
    assert.ok(waits[0] >= 750 && waits[0] <= 1700, `first backoff ${waits[0]} ms`);
    assert.ok(waits[1] >= 1550 && waits[1] <= 2900, `second backoff ${waits[1]} ms`);
    assert.equal(await k.semaphore(org.id), 0);
  });

  it('busy and no-answer end finished with that outcome and are not retried', async () => {
    const { org } = await k.tenant();
    const [busy, noAnswer] = await k.calls(org, [BUSY, NO_ANSWER]);
    const rows = await k.settled([busy, noAnswer]);
    for (const [id, outcome] of [[busy, 'busy'], [noAnswer, 'no-answer']]) {
      const row = rows.find((r) => r.id === id)!;
      assert.equal(row.state, 'finished', `${outcome}: ${row.error}`);
      assert.equal(row.attempt, 1);
      assert.equal(JSON.parse(row.result!).outcome, outcome);
      assert.equal((await k.view(org, id)).result.outcome, outcome);
      assert.deepEqual(await k.history(id), ['pending#0', 'running#1', 'finished#1']);
    }
  });

  it('every state change left its outbox event in order, and org_task_counts equals a count of the tasks table', async () => {
    // A mixed run of its own (a canceled pending task, a failed one, a deleted one), checked with
    // whatever the tests before it left in the database.
    const { org } = await k.tenant();
    const later = await k.submit(org, { type: 'call', target: phone(500), scheduledFor: Math.ceil(Date.now() / 1000) + 600 });
    const cancel = await h().call('POST', `/api/v2/tasks/${later}`, { token: org.token, body: { state: 'canceled' } });
    assert.equal(cancel.status, 200, JSON.stringify(cancel.body));
    const gone = await k.submit(org, { type: 'ping', scheduledFor: Math.ceil(Date.now() / 1000) + 600 });
    assert.equal((await h().call('DELETE', `/api/v2/tasks/${gone}`, { token: org.token })).status, 200);
    const failed = await k.submit(org, { type: 'text', target: '+15005550004', content: 'x' });
    const pinged = await k.submit(org, { type: 'ping' });
    const waiting = await k.submit(org, { type: 'ping', scheduledFor: Math.ceil(Date.now() / 1000) + 600 });
    const rows = await k.settled([later, failed, pinged]);
    assert.deepEqual(rows.map((r) => r.state).sort(), ['canceled', 'failed', 'finished']);
    assert.deepEqual(await k.history(later), ['pending#0', 'canceled#0']);
    assert.deepEqual(await k.history(pinged), ['pending#0', 'running#1', 'finished#1']);
    const summary = await checkOutboxAndCounts(h());
    for (const s of ['pending', 'finished', 'failed', 'canceled'] as const) assert.ok(summary.states.has(s), `no ${s} task in the run`);
    const stats = await h().call('GET', '/api/v2/tasks/stats', { token: org.token });
    assert.deepEqual(stats.body.byState, { pending: 1, running: 0, finished: 1, failed: 1, canceled: 1, errored: 1 });
    assert.deepEqual(await k.history(waiting), ['pending#0']);
  });
}, { CALLPLANE_SIMULATED_CALL_SECONDS: '0.2' }, { worker: true });

forEachEngine('task wakeups', (h) => {
  const k = kit(h);

  it('a ping submitted to an idle worker starts at once: the insert wakes the runner, which would otherwise sleep a minute', async () => {
    const { org } = await k.tenant();
    const delays: number[] = [];
    for (let i = 0; i < 6; i++) {
      // Idle a different time each round, so the runner is asleep at a different point of its poll.
      await sleep(150 + i * 130);
      const id = await k.submit(org, { type: 'ping' });
      const [row] = await k.settled([id]);
      assert.equal(row.state, 'finished');
      delays.push(row.started_at! - row.created_at);
    }
    // The runner polls once a minute here: only a wakeup can start a ping within seconds. How soon
    // is the benchmark's to measure (bench/tasks lateness), not a unit test's on a loaded machine.
    assert.ok(delays.every((d) => d < 5000), `start delays ${delays.join(', ')} ms`);
  });
}, { CALLPLANE_SIMULATED_CALL_SECONDS: '0.2' }, { worker: true, runtime: { pollMs: 60_000 } });

forEachEngine('task cancel while running', (h) => {
  const k = kit(h);

  it('canceling a running call ends it at once in the process running it, and releases the semaphore', async () => {
    const { org } = await k.tenant();
    const id = await k.submit(org, { type: 'call', target: phone(600) });
    await waitFor('the call to be running', async () => (await k.row(id)).state === 'running');
    assert.equal(await k.semaphore(org.id), 1);
    const t0 = Date.now();
    const res = await h().call('POST', `/api/v2/tasks/${id}`, { token: org.token, body: { state: 'canceled' } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const [row] = await k.settled([id], 5000);
    // The lease here is 30 s (heartbeat 10 s): only the in-process abort explains a quick end.
    assert.ok(Date.now() - t0 < 2000, `took ${Date.now() - t0} ms`);
    assert.equal(row.state, 'canceled');
    assert.equal(JSON.parse(row.result!).outcome, 'canceled');
    assert.ok(row.cancel_requested_at !== null);
    assert.equal(await k.semaphore(org.id), 0);
    assert.deepEqual(await k.history(id), ['pending#0', 'running#1', 'canceled#1']);
    // After the cancel every history is valid and the per-state counts match the table.
    await checkOutboxAndCounts(h());
  });

  it('a call running in another worker is canceled at that worker\'s next heartbeat', async () => {
    const { org } = await k.tenant();
    const extras = extraWorkers(h());
    await h().tasks.stop(); // the API's own worker must not take the task
    try {
      const other = await extras.start({ leaseMs: 3000 }); // heartbeat every second
      const id = await k.submit(org, { type: 'call', target: phone(601) });
      other.notify(); // SQLite has no NOTIFY between workers; on PostgreSQL the insert's NOTIFY already woke it
      await waitFor('the call to be running', async () => (await k.row(id)).state === 'running', 5000);
      assert.equal((await k.row(id)).lease_owner, other.workerId);
      const t0 = Date.now();
      const res = await h().call('POST', `/api/v2/tasks/${id}`, { token: org.token, body: { state: 'canceled' } });
      assert.equal(res.status, 200);
      assert.match(res.body.message, /Cancel requested/);
      const [row] = await k.settled([id], 5000);
      assert.ok(Date.now() - t0 < 2500, `took ${Date.now() - t0} ms`);
      assert.equal(row.state, 'canceled');
      assert.equal(await k.semaphore(org.id), 0);
      assert.deepEqual(await k.history(id), ['pending#0', 'running#1', 'canceled#1']);
      // After the cancel every history is valid and the per-state counts match the table.
      await checkOutboxAndCounts(h());
    } finally {
      await extras.close();
      h().tasks.startWorker();
    }
  });
}, { CALLPLANE_SIMULATED_CALL_SECONDS: '30' }, { worker: true });

forEachEngine('task daily rollover', (h) => {
  const k = kit(h);

  it('the call deferred by a daily cap runs after the local midnight, counted on the new day; the old day\'s count stays', async () => {
    const ZONE = 'Pacific/Kiritimati';
    const OFFSET = 14 * HOUR;
    // The worker runs on a queue clock of this test's own, moved past the local midnight below;
    // the API's worker is stopped meanwhile so that it does not take the tasks.
    let clockOffset = 0;
    const extras = extraWorkers(h());
    await h().tasks.stop();
    try {
      const worker = await extras.start({ now: () => Date.now() + clockOffset });
      const { reseller, org } = await k.tenant({ timezone: ZONE });
      await k.limits(reseller.token, org.id, { daily: { calls: 2 } });
      const ids = await k.calls(org, [phone(700), phone(701), phone(702)]);
      worker.notify(); // SQLite has no NOTIFY between workers; on PostgreSQL the insert's NOTIFY already woke it
      const deferred = await waitFor('the 3rd call to be deferred', async () => {
        const rows = await k.rows(ids);
        return rows.filter((r) => r.state === 'finished').length === 2 && rows.find((r) => r.state === 'pending' && r.run_at > Date.now() + 1000);
      }, 10_000);
      const today = new Date(wallAt(Date.now(), OFFSET)).toISOString().slice(0, 10);
      const midnight = deferred.run_at;
      assert.equal(midnight, Math.floor(wallAt(Date.now(), OFFSET) / DAY) * DAY + DAY - OFFSET);
      await sleep(300);
      assert.equal((await k.row(deferred.id)).state, 'pending', 'the capped call ran before midnight');

      clockOffset = midnight + 200 - Date.now(); // 200 ms after the local midnight
      worker.notify();
      const [ran] = await k.settled([deferred.id], 10_000);
      assert.equal(ran.state, 'finished');
      assert.ok(ran.started_at! >= midnight, 'started before midnight on the queue clock');
      const tomorrow = new Date(wallAt(midnight, OFFSET)).toISOString().slice(0, 10);
      assert.notEqual(tomorrow, today);
      const counters = await h().database.db.selectFrom('org_daily_counters').select(['day', 'kind', 'n'])
        .where('org_id', '=', org.id).where('kind', '=', 'calls').orderBy('day').execute();
      assert.deepEqual(counters.map((c) => [c.day, Number(c.n)]), [[today, 2], [tomorrow, 1]]);
    } finally {
      await extras.close();
      h().tasks.startWorker();
    }
  });
}, { CALLPLANE_SIMULATED_CALL_SECONDS: '0.2' }, { worker: true });
