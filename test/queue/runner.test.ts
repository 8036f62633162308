import assert from 'node:assert/strict';
import { it } from 'node:test';
import { QueueEngine, type QueueOptions } from '../../src/queue/engine.ts';
import { QueueAbortError, QueueRunner, type RunnerOptions } from '../../src/queue/runner.ts';
import { Wakeups, listenForWakeups, notifyQueue } from '../../src/queue/waker.ts';
import type { TaskRow } from '../../src/db/types.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { insertTasks, secondDatabase, sleep, task, tenant, waitFor } from './fixtures.ts';

forEachEngine('queue runner', (h) => {
  const runners: QueueRunner<'tasks'>[] = [];
  const engine = (opts: Partial<QueueOptions<'tasks'>> = {}) =>
    new QueueEngine<'tasks'>({ table: 'tasks', workerId: `w${runners.length}`, leaseMs: 2000, ...opts });
  /** A started runner; stopped at the end of its test. A long poll unless a test says otherwise,
   *  so only the wakeup under test can explain a fast start. */
  const runner = (opts: Partial<RunnerOptions<'tasks'>> & Pick<RunnerOptions<'tasks'>, 'handler'>) => {
    const r = new QueueRunner<'tasks'>({ engine: engine(), db: h().database.db, pollMs: 5000, ...opts });
    runners.push(r);
    r.start();
    return r;
  };
  const stopAll = async () => {
    await Promise.all(runners.map((r) => r.stop({ timeoutMs: 2000 })));
    runners.length = 0;
  };
  const finished = (id: string) => waitFor(`${id} to settle`, async () => {
    const row = await task(h().database.db, id);
    return row.state !== 'pending' && row.state !== 'running' ? row : undefined;
  });

  it('a row scheduled 300 ms ahead is not run before its run_at and is run within a second after (run_at timer)', async () => {
    try {
      const t = await tenant(h());
      const started = new Map<string, number>();
      const r = runner({ handler: async (row) => void started.set(row.id, Date.now()) });
      await sleep(50); // idle: the runner has looked, found nothing, and sleeps on its 5 s poll
      const runAt = Date.now() + 300;
      const [id] = await insertTasks(h().database.db, t, [{ run_at: runAt }]);
      r.notify(); // as a producer does after inserting: the runner learns the earliest run_at
      await finished(id);
      const at = started.get(id)!;
      assert.ok(at >= runAt, `started ${runAt - at} ms before run_at`);
      assert.ok(at - runAt <= 1000, `started ${at - runAt} ms after run_at`);
      assert.equal((await task(h().database.db, id)).state, 'finished');
    } finally {
      await stopAll();
    }
  });

  it('an idle runner starts a due row within 250 ms of an in-process wakeup', async () => {
    try {
      const t = await tenant(h());
      const wakeups = new Wakeups();
      let startedAt = 0;
      runner({ wakeups, handler: async () => void (startedAt = Date.now()) });
      await sleep(100);
      const [id] = await insertTasks(h().database.db, t, [{}]);
      const woke = Date.now();
      wakeups.emit('tasks');
      await finished(id);
      assert.ok(startedAt > 0);
      assert.ok(startedAt - woke < 250, `took ${startedAt - woke} ms`);
    } finally {
      await stopAll();
    }
  });

  it('on PostgreSQL, a NOTIFY committed by another connection wakes an idle runner within 250 ms', async (ctx) => {
    if (h().engine !== 'postgres') return ctx.skip('LISTEN/NOTIFY is PostgreSQL only; SQLite runs in one process');
    const wakeups = new Wakeups();
    const listener = await listenForWakeups(h().database, wakeups);
    const other = secondDatabase(h());
    try {
      const t = await tenant(h());
      let startedAt = 0;
      runner({ wakeups, handler: async () => void (startedAt = Date.now()) });
      await sleep(100);
      let committed = 0;
      const [id] = await other.database.db.transaction().execute(async (tx) => {
        const now = Date.now();
        await tx.insertInto('tasks').values({ id: `tsk_notify_${now}`, org_id: t.orgId, account_id: t.agentId, type: 'ping', run_at: now, created_at: now, updated_at: now }).execute();
        await notifyQueue(tx, 'tasks');
        return [`tsk_notify_${now}`];
      });
      committed = Date.now();
      await finished(id);
      assert.ok(startedAt - committed < 250, `took ${startedAt - committed} ms`);
    } finally {
      await stopAll();
      await listener.close();
      await other.close();
    }
  });

  it('heartbeats keep the lease of a long handler, so a rescuer does not take the row', async () => {
    try {
      const t = await tenant(h());
      const [id] = await insertTasks(h().database.db, t, [{}]);
      const rescuer = engine({ workerId: 'rescuer' });
      let rescued = 0;
      const r = new QueueRunner<'tasks'>({
        engine: engine({ leaseMs: 200 }), db: h().database.db, heartbeatMs: 50, pollMs: 5000,
        handler: async () => {
          for (let i = 0; i < 8; i++) {
            await sleep(100);
            rescued += (await rescuer.rescue(h().database.db)).length;
          }
        },
      });
      runners.push(r);
      r.start();
      const row = await finished(id);
      assert.equal(rescued, 0);
      assert.equal(row.state, 'finished');
      assert.equal(row.attempt, 1);
    } finally {
      await stopAll();
    }
  });

  it('without heartbeats the same handler loses its row to the rescuer and its late result changes nothing', async () => {
    try {
      const t = await tenant(h());
      const db = h().database.db;
      const [id] = await insertTasks(db, t, [{ max_attempts: 1 }]);
      const rescuer = engine({ workerId: 'rescuer' });
      let rescued = 0;
      let signalReason: unknown;
      const r = runner({
        engine: engine({ leaseMs: 200 }), heartbeatMs: 60_000,
        handler: async (_row, { signal }) => {
          await sleep(300);
          rescued += (await rescuer.rescue(db)).length;
          signalReason = signal.reason;
          return { kind: 'complete', state: 'finished', set: { result: '"late"' } };
        },
      });
      const row = await finished(id);
      await waitFor('the runner to let go', async () => r.running === 0);
      assert.equal(rescued, 1);
      assert.equal(signalReason, undefined); // nobody told it: it relied on the engine's guard
      const after = await task(db, id);
      assert.equal(row.state, 'failed'); // its only attempt was spent
      assert.equal(after.state, 'failed');
      assert.equal(after.result, null);
    } finally {
      await stopAll();
    }
  });

  it('a heartbeat that finds the lease taken aborts the handler as lease-lost and its outcome is ignored', async () => {
    try {
      const t = await tenant(h());
      const db = h().database.db;
      const [id] = await insertTasks(db, t, [{}]);
      let reason: unknown;
      runner({
        heartbeatMs: 30,
        handler: async (row, { signal }) => {
          // Another worker takes the row over (as after a rescue and a reclaim).
          await db.updateTable('tasks').set({ lease_owner: 'thief', attempt: row.attempt + 1 }).where('id', '=', row.id).execute();
          await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
          reason = signal.reason;
          return { kind: 'complete', state: 'finished' };
        },
      });
      await waitFor('the abort', async () => reason !== undefined);
      await stopAll();
      assert.ok(reason instanceof QueueAbortError);
      assert.equal(reason.kind, 'lease-lost');
      const row = await task(db, id);
      assert.equal(row.state, 'running');
      assert.equal(row.lease_owner, 'thief');
      await engine({ workerId: 'thief' }).complete(db, row, { state: 'finished' });
    } finally {
      await stopAll();
    }
  });

  it('cancel() and a cancel request seen by the heartbeat abort the handler and the row ends canceled', async () => {
    try {
      const t = await tenant(h());
      const db = h().database.db;
      const [direct, requested] = await insertTasks(db, t, [{}, {}]);
      const reasons = new Map<string, string>();
      const started = new Set<string>();
      const r = runner({
        heartbeatMs: 30,
        isCancelRequested: (row: TaskRow) => row.cancel_requested_at !== null,
        errorPatch: (err) => ({ error: err instanceof Error ? err.message : String(err) }),
        handler: async (row, { signal }) => {
          started.add(row.id);
          await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
          reasons.set(row.id, (signal.reason as QueueAbortError).kind);
          throw signal.reason;
        },
      });
      r.notify();
      await waitFor('both handlers', async () => started.size === 2);
      assert.equal(r.cancel(direct), true);
      assert.equal(r.cancel('tsk_not_running_here'), false);
      await db.updateTable('tasks').set({ cancel_requested_at: Date.now() }).where('id', '=', requested).execute();
      const [a, b] = [await finished(direct), await finished(requested)];
      assert.equal(a.state, 'canceled');
      assert.equal(b.state, 'canceled');
      assert.equal(a.error, 'queue: canceled');
      assert.deepEqual([reasons.get(direct), reasons.get(requested)], ['canceled', 'canceled']);
    } finally {
      await stopAll();
    }
  });

  it('release() stops a handler whose row was settled elsewhere at once, without waiting for a heartbeat', async () => {
    try {
      const t = await tenant(h());
      const db = h().database.db;
      const [id] = await insertTasks(db, t, [{}]);
      let reason: string | undefined;
      let started = false;
      const r = runner({
        heartbeatMs: 60_000, // no heartbeat in this test: only release() can end the handler
        handler: async (_row, { signal }) => {
          started = true;
          await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
          reason = (signal.reason as QueueAbortError).kind;
          throw signal.reason;
        },
      });
      r.notify();
      await waitFor('the handler', async () => started);
      // A carrier callback settles the row from outside the worker.
      await engine({ workerId: 'callback' }).transition(db, id, ['running'], 'finished');
      assert.equal(r.release('tsk_not_running_here'), false);
      assert.equal(r.release(id), true);
      await waitFor('the slot to free', async () => r.running === 0, 1000);
      assert.equal(reason, 'lease-lost');
      assert.equal((await task(db, id)).state, 'finished', 'the late outcome of the released handler changes nothing');
    } finally {
      await stopAll();
    }
  });

  it('a handler that throws is retried after its backoff with the error recorded, then finishes', async () => {
    try {
      const t = await tenant(h());
      const db = h().database.db;
      const [id] = await insertTasks(db, t, [{}]);
      const starts: number[] = [];
      let errorSeen: string | null = null;
      runner({
        backoff: () => 200,
        errorPatch: (err) => ({ error: (err as Error).message }),
        handler: async (row) => {
          starts.push(Date.now());
          if (row.attempt === 1) throw new Error('carrier busy');
          errorSeen = row.error;
        },
      }).notify();
      const row = await finished(id);
      assert.equal(row.state, 'finished');
      assert.equal(row.attempt, 2);
      assert.equal(errorSeen, 'carrier busy');
      assert.equal(starts.length, 2);
      assert.ok(starts[1] - starts[0] >= 195, `retried after ${starts[1] - starts[0]} ms`);
    } finally {
      await stopAll();
    }
  });

  it('a handler outcome can retry at a chosen time or fail the row', async () => {
    try {
      const t = await tenant(h());
      const db = h().database.db;
      const [later, failed] = await insertTasks(db, t, [{}, {}]);
      const runAt = Date.now() + 60_000;
      runner({
        handler: async (row) => row.id === later
          ? { kind: 'retry', runAt, set: { error: 'outside business hours' } }
          : { kind: 'complete', state: 'failed', set: { error: 'invalid number' } },
      }).notify();
      const f = await finished(failed);
      assert.equal(f.error, 'invalid number');
      const l = await waitFor('the retry', async () => {
        const row = await task(db, later);
        return row.state === 'pending' && row.attempt === 1 ? row : undefined;
      });
      assert.equal(l.run_at, runAt);
      assert.equal(l.lease_owner, null);
      await engine().transition(db, later, ['pending'], 'canceled');
    } finally {
      await stopAll();
    }
  });

  it('never runs more rows at once than its concurrency', async () => {
    try {
      const t = await tenant(h());
      const ids = await insertTasks(h().database.db, t, Array.from({ length: 12 }, () => ({})));
      let active = 0;
      let peak = 0;
      runner({
        concurrency: 3,
        handler: async () => {
          peak = Math.max(peak, ++active);
          await sleep(20);
          active--;
        },
      }).notify();
      for (const id of ids) await finished(id);
      assert.equal(peak, 3);
    } finally {
      await stopAll();
    }
  });

  it('stop() waits for running handlers to finish and their rows to be settled', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    const [id] = await insertTasks(db, t, [{}]);
    let started = false;
    const r = runner({ handler: async () => { started = true; await sleep(200); } });
    r.notify();
    await waitFor('the handler', async () => started);
    const before = Date.now();
    await r.stop();
    runners.length = 0;
    assert.ok(Date.now() - before >= 150);
    assert.equal(r.running, 0);
    assert.equal((await task(db, id)).state, 'finished');
  });

  it('stop() aborts handlers that outlast its timeout and returns their rows to pending', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    const [id] = await insertTasks(db, t, [{}]);
    let reason: unknown;
    const r = runner({
      handler: async (_row, { signal }) => {
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        reason = signal.reason;
        throw signal.reason;
      },
    });
    r.notify();
    await waitFor('the claim', async () => r.running === 1);
    await r.stop({ timeoutMs: 100 });
    runners.length = 0;
    assert.equal((reason as QueueAbortError).kind, 'shutdown');
    const row = await task(db, id);
    assert.equal(row.state, 'pending');
    assert.equal(row.lease_owner, null);
    await engine().transition(db, id, ['pending'], 'canceled');
  });

  it("an outcome's after() commits in the settle's transaction, and a throw from it rolls the settle back", async () => {
    try {
      const t = await tenant(h());
      const db = h().database.db;
      const [ok, bad] = await insertTasks(db, t, [{}, { run_at: Date.now() + 60_000 }]);
      const r = runner({
        rescueEveryMs: 0,
        handler: async (row) => ({
          kind: 'complete', state: 'finished',
          after: async (tx, written) => {
            // Sees the row as the settle wrote it, inside the same transaction.
            await tx.updateTable('tasks').set({ result: `after saw ${written.state}` }).where('id', '=', written.id).execute();
            if (row.id === bad) throw new Error('after failed');
          },
        }),
      });
      r.notify();
      await finished(ok);
      assert.equal((await task(db, ok)).result, 'after saw finished');
      await db.updateTable('tasks').set({ run_at: Date.now() }).where('id', '=', bad).execute();
      r.notify();
      await waitFor('the second handler to end', async () => (await task(db, bad)).attempt === 1 && r.running === 0);
      const row = await task(db, bad);
      assert.equal(row.state, 'running', 'the settle must roll back with its after()');
      assert.equal(row.result, null);
    } finally {
      await stopAll();
    }
  });

  it('after() does not run when the worker lost the row before settling it', async () => {
    try {
      const t = await tenant(h());
      const db = h().database.db;
      const [id] = await insertTasks(db, t, [{}]);
      let release!: () => void;
      const gate = new Promise<void>((r) => { release = r; });
      let ran = false;
      const r = runner({
        heartbeatMs: 60_000,
        handler: async () => {
          await gate;
          return { kind: 'complete', state: 'finished', after: async () => { ran = true; } };
        },
      });
      r.notify();
      await waitFor('the claim', async () => r.running === 1);
      await db.updateTable('tasks').set({ lease_owner: 'someone-else' }).where('id', '=', id).execute();
      release();
      await waitFor('the handler to end', async () => r.running === 0);
      assert.equal(ran, false);
      assert.equal((await task(db, id)).lease_owner, 'someone-else');
      await engine().transition(db, id, ['running'], 'canceled');
    } finally {
      await stopAll();
    }
  });
});
