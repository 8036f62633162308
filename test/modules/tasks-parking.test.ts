// Calls waiting for their organization's concurrency are parked (src/modules/tasks/queue-hooks.ts,
// migration 0020): taken out of the due range, so a claim does not walk past them again, and brought
// back by the release of a slot, as many as it frees, oldest first. Through the task engine on a
// real database of each engine, with another tenant's pings claimed meanwhile.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { DEFAULT_LIMITS } from '../../src/modules/limits/task-limits.ts';
import { createTaskEngine, PARK_MS } from '../../src/modules/tasks/queue-hooks.ts';
import { planAllowance, uncachedEntitlements } from '../../src/modules/billing/entitlements.ts';
import { limitRepo, taskRepo } from '../../src/modules/tasks/repository.ts';
import { uncachedSubscribers } from '../../src/modules/tasks/subscribers.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { insertTasks, manualClock, task, tenant } from '../queue/fixtures.ts';

forEachEngine('tasks parked for concurrency', (h) => {
  it('a full organization\'s due calls are parked by one claim, left alone by the next, and come back one per freed slot', async () => {
    const db = h().database.db;
    const now = Date.now();
    const clock = manualClock(now);
    const engine = createTaskEngine({ workerId: 'park', subscribers: uncachedSubscribers, allowance: planAllowance(uncachedEntitlements), now: clock.now });
    const a = await tenant(h());
    const b = await tenant(h());
    await db.transaction().execute((tx) => limitRepo.save(tx, a.orgId, { ...DEFAULT_LIMITS, concurrencyPerRun: 1 }, now));
    const [first] = await insertTasks(db, a, [{ type: 'call', target: '+14155550100', run_at: now - 10_000 }]);
    const [running] = await engine.claim(db, 1);
    assert.equal(running.id, first, 'the first call takes the only slot');

    const waiting = await insertTasks(db, a, Array.from({ length: 120 }, (_, i) => ({ type: 'call' as const, target: `+1415555${String(1000 + i)}`, run_at: now - 5000 + i })));
    const pings = await insertTasks(db, b, [{ run_at: now - 1 }, { run_at: now - 1 }, { run_at: now }]);
    const claimed = await engine.claim(db, 50);
    assert.deepEqual(claimed.map((r) => r.id).sort(), [...pings].sort(), 'the other tenant\'s pings, behind 120 waiting calls');
    for (const id of waiting) {
      const row = await task(db, id);
      assert.equal(row.state, 'pending');
      assert.equal(row.parked, 1, `${id} parked`);
      assert.equal(row.run_at, now + PARK_MS);
    }
    // Nothing is due: the next claim finds no row and writes nothing.
    assert.deepEqual(await engine.claim(db, 50), []);
    assert.equal((await task(db, waiting[0])).run_at, now + PARK_MS);
    for (const p of claimed) await engine.complete(db, p, { state: 'finished' });

    // The running call ends: its slot frees and brings back the longest-waiting call, and only it.
    clock.advance(1000);
    await engine.complete(db, running, { state: 'finished' });
    const back = await task(db, waiting[0]);
    assert.deepEqual([back.parked, back.run_at], [0, now + 1000]);
    assert.equal((await task(db, waiting[1])).parked, 1);
    const next = await engine.claim(db, 50);
    assert.deepEqual(next.map((r) => r.id), [waiting[0]], 'it starts; the rest stay parked');
    assert.equal(next[0].parked, 0);

    // A parked task canceled leaves the parked set; raising the limit brings every parked one back.
    const canceled = await engine.transition(db, waiting[1], ['pending'], 'canceled', {});
    assert.equal(canceled?.parked, 0);
    await db.transaction().execute((tx) => taskRepo.undeferPending(tx, a.orgId, clock.now()));
    const rest = await db.selectFrom('tasks').select(['parked', 'run_at']).where('id', 'in', waiting.slice(2)).execute();
    assert.ok(rest.every((r) => r.parked === 0 && r.run_at === clock.now()), JSON.stringify(rest.slice(0, 3)));
    // Settle what this test started, so other tests' claims see none of it.
    await engine.complete(db, next[0], { state: 'finished' });
    await db.updateTable('tasks').set({ state: 'canceled' }).where('id', 'in', waiting.slice(2)).execute();
  });
});
