import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import { forEachEngine } from '../helpers/engines.ts';
import { newId } from '../../src/lib/ids.ts';
import { ADMIT, QueueEngine, deferUntil, type QueueOptions } from '../../src/queue/engine.ts';
import { insertTasks, manualClock, secondDatabase, task, tenant } from './fixtures.ts';

type Tasks = QueueOptions<'tasks'>;

/** Admission through the org_semaphores row: take a slot if one is free, else look again soon. */
const semaphoreHooks = (limit: number): Pick<Tasks, 'admit' | 'onTransition'> => ({
  async admit(tx, row, now) {
    const r = await tx.updateTable('org_semaphores').set({ running: sql`running + 1` })
      .where('org_id', '=', row.org_id!).where('running', '<', limit).executeTakeFirst();
    return r.numUpdatedRows === 1n ? ADMIT : deferUntil(now + 15);
  },
  async onTransition(tx, row, from, to) {
    if (from === 'running' && to !== 'running') {
      await tx.updateTable('org_semaphores').set({ running: sql`running - 1` })
        .where('org_id', '=', row.org_id).where('running', '>', 0).execute();
    }
  },
});

forEachEngine('queue engine', (h) => {
  const engine = (opts: Partial<Tasks> = {}) =>
    new QueueEngine<'tasks'>({ table: 'tasks', workerId: 'w1', leaseMs: 1000, ...opts });

  it('claims due pending rows oldest run_at first (id breaking ties) and leaves future rows alone', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    const now = Date.now();
    const clock = manualClock(now);
    const [late, early, tie1, future] = await insertTasks(db, t, [
      { run_at: now - 1000 }, { run_at: now - 3000 }, { run_at: now - 1000 }, { run_at: now + 5000 },
    ]);
    // Only this tenant's rows: other tests in this file use their own organizations and settle their rows.
    const e = engine({ now: clock.now });
    const first = await e.claim(db, 2);
    assert.deepEqual(first.map((r) => r.id), [early, [late, tie1].sort()[0]]);
    const rest = await e.claim(db, 10);
    assert.deepEqual(rest.map((r) => r.id), [[late, tie1].sort()[1]]);
    for (const r of [...first, ...rest]) {
      assert.equal(r.state, 'running');
      assert.equal(r.attempt, 1);
      assert.equal(r.lease_owner, 'w1');
      assert.equal(r.lease_expires_at, now + 1000);
    }
    assert.equal((await task(db, future)).state, 'pending');
    assert.equal(await e.nextRunAt(db), now + 5000);
    clock.advance(5000);
    assert.deepEqual((await e.claim(db, 10)).map((r) => r.id), [future]);
    assert.equal(await e.nextRunAt(db), null);
    for (const r of [...first, ...rest]) await e.complete(db, r, { state: 'finished' });
    await e.complete(db, await task(db, future), { state: 'finished' });
  });

  it('moves the run_at of rows the admit hook defers and claims the others', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    const clock = manualClock();
    const [a, b, c] = await insertTasks(db, t, [{ run_at: clock.now() - 3 }, { run_at: clock.now() - 2 }, { run_at: clock.now() - 1 }]);
    const e = engine({ now: clock.now, admit: async (_tx, row, now) => (row.id === b ? deferUntil(now + 60_000) : ADMIT) });
    const claimed = await e.claim(db, 3);
    assert.deepEqual(claimed.map((r) => r.id), [a, c]);
    const deferred = await task(db, b);
    assert.equal(deferred.state, 'pending');
    assert.equal(deferred.attempt, 0);
    assert.equal(deferred.run_at, clock.now() + 60_000);
    for (const r of claimed) await e.complete(db, r, { state: 'finished' });
    clock.advance(60_000);
    const later = await e.claim(db, 3);
    assert.deepEqual(later.map((r) => r.id), []); // the hook defers b again, so it stays pending
    assert.equal((await task(db, b)).run_at, clock.now() + 60_000);
    await e.transition(db, b, ['pending'], 'canceled');
  });

  it('two workers claiming concurrently from 200 rows never claim the same row twice', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    const ids = await insertTasks(db, t, Array.from({ length: 200 }, (_, i) => ({ run_at: Date.now() - 1000 + i })));
    const second = secondDatabase(h());
    try {
      const workers = [
        { e: engine({ workerId: 'a', leaseMs: 60_000 }), db },
        { e: engine({ workerId: 'b', leaseMs: 60_000 }), db: second.database.db },
      ];
      const claims = await Promise.all(workers.map(async ({ e, db: wdb }) => {
        const got: string[] = [];
        for (;;) {
          const rows = await e.claim(wdb, 7);
          if (rows.length === 0) return got;
          got.push(...rows.map((r) => r.id));
        }
      }));
      const all = claims.flat();
      assert.equal(all.length, 200, `claimed ${claims[0].length} + ${claims[1].length}`);
      assert.equal(new Set(all).size, 200);
      assert.deepEqual([...all].sort(), [...ids].sort());
      const rows = await db.selectFrom('tasks').select(['lease_owner', 'attempt', 'state']).where('id', 'in', ids).execute();
      assert.ok(rows.every((r) => r.state === 'running' && r.attempt === 1));
      const byOwner = (w: string) => rows.filter((r) => r.lease_owner === w).length;
      assert.equal(byOwner('a'), claims[0].length);
      assert.equal(byOwner('b'), claims[1].length);
      for (const id of ids) await workers[0].e.transition(db, id, ['running'], 'canceled');
    } finally {
      await second.close();
    }
  });

  it('a semaphore admit hook never lets more than its limit run under concurrent claims', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    // The organization's plan wrote its semaphore when it was created (docs/billing.md): start it empty.
    await db.insertInto('org_semaphores').values({ org_id: t.orgId, running: 0 }).onConflict((oc) => oc.column('org_id').doUpdateSet({ running: 0 })).execute();
    await insertTasks(db, t, Array.from({ length: 40 }, () => ({})));
    const second = secondDatabase(h());
    try {
      const hooks = semaphoreHooks(3);
      const workers = [
        { e: engine({ workerId: 'a', ...hooks }), db },
        { e: engine({ workerId: 'b', ...hooks }), db: second.database.db },
      ];
      let active = 0;
      let peak = 0;
      let done = 0;
      await Promise.all(workers.map(async ({ e, db: wdb }) => {
        const deadline = Date.now() + 20_000;
        while (done < 40 && Date.now() < deadline) {
          const rows = await e.claim(wdb, 5);
          if (rows.length === 0) {
            await new Promise((r) => setTimeout(r, 5));
            continue;
          }
          active += rows.length;
          peak = Math.max(peak, active);
          await Promise.all(rows.map(async (row, i) => {
            await new Promise((r) => setTimeout(r, 3 + i));
            active--; // before the release commits, so `active` never lags behind the semaphore
            // Exercise every exit: finish most, fail a few, retry some at once.
            if (row.attempt === 1 && i === 1) await e.retry(wdb, row, { runAt: e.now() });
            else { await e.complete(wdb, row, { state: i === 2 ? 'failed' : 'finished' }); done++; }
          }));
        }
      }));
      assert.equal(done, 40);
      assert.ok(peak <= 3, `peak ${peak}`);
      assert.equal(peak, 3); // the limit was reached, so the bound was really exercised
      const sem = await db.selectFrom('org_semaphores').select('running').where('org_id', '=', t.orgId).executeTakeFirstOrThrow();
      assert.equal(sem.running, 0);
    } finally {
      await second.close();
    }
  });

  it('the semaphore slot is released on complete, retry and rescue', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    // The organization's plan wrote its semaphore when it was created (docs/billing.md): start it empty.
    await db.insertInto('org_semaphores').values({ org_id: t.orgId, running: 0 }).onConflict((oc) => oc.column('org_id').doUpdateSet({ running: 0 })).execute();
    const clock = manualClock();
    await insertTasks(db, t, [{ run_at: clock.now() - 4 }, { run_at: clock.now() - 3 }, { run_at: clock.now() - 2 }, { run_at: clock.now() - 1 }]);
    const e = engine({ now: clock.now, ...semaphoreHooks(3) });
    const running = async () => (await db.selectFrom('org_semaphores').select('running').where('org_id', '=', t.orgId).executeTakeFirstOrThrow()).running;
    const [a, b, c] = await e.claim(db, 4);
    assert.ok(c);
    assert.equal(await running(), 3);
    assert.deepEqual(await e.claim(db, 4), []);
    await e.complete(db, a, { state: 'finished' });
    assert.equal(await running(), 2);
    await e.retry(db, b, { runAt: clock.now() + 60_000 });
    assert.equal(await running(), 1);
    clock.advance(1001);
    const rescued = await e.rescue(db);
    assert.deepEqual(rescued.map((r) => r.id), [c.id]);
    assert.equal(await running(), 0);
    // Settle what is left so the next tests start clean.
    for (const r of await db.selectFrom('tasks').select('id').where('org_id', '=', t.orgId).where('state', '=', 'pending').execute()) {
      await e.transition(db, r.id, ['pending'], 'canceled');
    }
  });

  it("a stale worker's complete, retry and heartbeat change nothing after its row was rescued and reclaimed", async () => {
    const t = await tenant(h());
    const db = h().database.db;
    const clock = manualClock();
    const [id] = await insertTasks(db, t, [{ run_at: clock.now() - 1 }]);
    const stale = engine({ workerId: 'old', now: clock.now });
    const fresh = engine({ workerId: 'new', now: clock.now });
    const [lease] = await stale.claim(db, 1);
    clock.advance(1001);
    assert.deepEqual((await fresh.rescue(db)).map((r) => r.id), [id]);
    const [mine] = await fresh.claim(db, 1);
    assert.equal(mine.attempt, 2);
    assert.equal(await stale.complete(db, lease, { state: 'finished', set: { error: 'stale' } }), undefined);
    assert.equal(await stale.retry(db, lease), undefined);
    assert.deepEqual(await stale.heartbeat(db, [lease]), []);
    let row = await task(db, id);
    assert.equal(row.state, 'running');
    assert.equal(row.lease_owner, 'new');
    assert.equal(row.attempt, 2);
    assert.equal(row.lease_expires_at, clock.now() + 1000);
    assert.equal(row.error, null);
    // The same worker id holding a newer attempt does not accept the older attempt either.
    assert.equal(await fresh.complete(db, { id, attempt: 1 }, { state: 'failed' }), undefined);
    assert.equal((await task(db, id)).state, 'running');
    clock.advance(500);
    assert.equal((await fresh.heartbeat(db, [mine])).length, 1);
    assert.equal((await task(db, id)).lease_expires_at, clock.now() + 1000);
    row = (await fresh.complete(db, mine, { state: 'finished' }))!;
    assert.equal(row.state, 'finished');
    assert.equal(row.lease_owner, null);
  });

  it('rescue returns expired leases to pending and fails rows whose attempts are spent', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    const clock = manualClock();
    const [again, spent, alive] = await insertTasks(db, t, [
      { run_at: clock.now() - 3, max_attempts: 3 }, { run_at: clock.now() - 2, max_attempts: 1 }, { run_at: clock.now() - 1 },
    ]);
    const e = engine({ now: clock.now, leaseMs: 1000 });
    const claimed = await e.claim(db, 2);
    assert.deepEqual(claimed.map((r) => r.id), [again, spent]);
    clock.advance(500);
    const long = engine({ now: clock.now, leaseMs: 10_000, workerId: 'long' });
    await long.claim(db, 1);
    assert.deepEqual(await e.rescue(db), []); // nothing expired yet
    clock.advance(501);
    const rescued = await e.rescue(db);
    assert.deepEqual(rescued.map((r) => [r.id, r.state]).sort(), [[again, 'pending'], [spent, 'failed']].sort());
    const back = await task(db, again);
    assert.equal(back.lease_owner, null);
    assert.equal(back.lease_expires_at, null);
    assert.equal(back.run_at, clock.now());
    assert.equal(back.attempt, 1);
    assert.equal((await task(db, alive)).state, 'running');
    const [reclaimed] = await e.claim(db, 1);
    assert.equal(reclaimed.id, again);
    assert.equal(reclaimed.attempt, 2);
    await e.complete(db, reclaimed, { state: 'finished' });
    await long.complete(db, await task(db, alive), { state: 'finished' });
  });

  it('retry honours run_at, backs off by default, and fails the row when attempts are spent', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    const clock = manualClock();
    await insertTasks(db, t, [{ run_at: clock.now() - 1, max_attempts: 3 }]);
    const e = engine({ now: clock.now, backoff: (attempt) => attempt * 10_000 });
    const [first] = await e.claim(db, 1);
    const retried = await e.retry(db, first, { runAt: clock.now() + 500, set: { error: 'busy' } });
    assert.equal(retried?.state, 'pending');
    assert.equal(retried?.run_at, clock.now() + 500);
    assert.equal(retried?.error, 'busy');
    clock.advance(499);
    assert.deepEqual(await e.claim(db, 1), []);
    clock.advance(1);
    const [second] = await e.claim(db, 1);
    assert.equal(second.attempt, 2);
    const backedOff = await e.retry(db, second);
    assert.equal(backedOff?.run_at, clock.now() + 20_000); // the engine's backoff for attempt 2
    clock.advance(20_000);
    const [third] = await e.claim(db, 1);
    assert.equal(third.attempt, 3);
    const failed = await e.retry(db, third, { runAt: clock.now() });
    assert.equal(failed?.state, 'failed');
    assert.deepEqual(await e.claim(db, 1), []);
  });

  it('onTransition runs in the transaction of the state change, and a throwing hook rolls the change back', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    const clock = manualClock();
    const [id] = await insertTasks(db, t, [{ run_at: clock.now() - 1 }]);
    let failOn: string | undefined;
    const seen: string[] = [];
    const e = engine({
      now: clock.now,
      stamp: ({ to, now }) => (to === 'running' ? { started_at: now, updated_at: now } : { updated_at: now, finished_at: now }),
      async onTransition(tx, row, from, to, cause) {
        seen.push(`${from}>${to}:${cause}`);
        // The hook sees the row as written, through the same transaction.
        const inside = await tx.selectFrom('tasks').select('state').where('id', '=', row.id).executeTakeFirstOrThrow();
        assert.equal(inside.state, to);
        await tx.insertInto('task_events').values({
          id: newId('evt'), org_id: row.org_id, task_id: row.id, type: `task.${to}` as 'task.running',
          payload: JSON.stringify({ attempt: row.attempt }), created_at: clock.now(),
        }).execute();
        if (failOn === to) throw new Error('hook failed');
      },
    });
    const events = async () => (await db.selectFrom('task_events').select('type').where('task_id', '=', id).orderBy('id').execute()).map((r) => r.type);

    failOn = 'running';
    await assert.rejects(e.claim(db, 1), /hook failed/);
    let row = await task(db, id);
    assert.equal(row.state, 'pending');
    assert.equal(row.attempt, 0);
    assert.equal(row.started_at, null);
    assert.deepEqual(await events(), []);

    failOn = 'finished';
    const [claimed] = await e.claim(db, 1);
    assert.equal(claimed.started_at, clock.now());
    assert.deepEqual(await events(), ['task.running']);
    await assert.rejects(e.complete(db, claimed, { state: 'finished', set: { result: '{"ok":true}' } }), /hook failed/);
    row = await task(db, id);
    assert.equal(row.state, 'running');
    assert.equal(row.lease_owner, 'w1');
    assert.equal(row.result, null);
    assert.equal(row.finished_at, null);
    assert.deepEqual(await events(), ['task.running']);

    failOn = undefined;
    clock.advance(10);
    const done = await e.complete(db, claimed, { state: 'finished', set: { result: '{"ok":true}' } });
    assert.equal(done?.finished_at, clock.now());
    assert.deepEqual(await events(), ['task.running', 'task.finished']);
    assert.deepEqual(seen, ['pending>running:claim', 'pending>running:claim', 'running>finished:complete', 'running>finished:complete']);
  });

  it('transition moves a row from an allowed state with the hooks, and refuses any other state', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    const [id] = await insertTasks(db, t, [{ run_at: Date.now() + 60_000 }]);
    const moves: string[] = [];
    const e = engine({ onTransition: async (_tx, _row, from, to, cause) => void moves.push(`${from}>${to}:${cause}`) });
    assert.equal(await e.transition(db, id, ['running'], 'canceled'), undefined);
    const canceled = await e.transition(db, id, ['pending'], 'canceled', { error: 'canceled by user' });
    assert.equal(canceled?.state, 'canceled');
    assert.equal(canceled?.error, 'canceled by user');
    assert.equal(await e.transition(db, id, ['pending', 'running'], 'canceled'), undefined);
    assert.deepEqual(moves, ['pending>canceled:transition']);
  });
});
