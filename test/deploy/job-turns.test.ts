// No singletons (issue 39): every worker schedules every periodic job, and each job's turn is taken
// by one process per period (src/db/job-leases.ts). Two Maintenance schedulers on one database —
// two workers — do the work of one; a worker's metrics listener reports not-ready while draining.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { takeJobTurn, jobTurns } from '../../src/db/job-leases.ts';
import { databaseJobTurns, Maintenance, type PeriodicJob } from '../../src/maintenance.ts';
import { createMetrics } from '../../src/http/metrics.ts';
import { startOpsServer } from '../../src/modules/ops/server.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { sleep } from '../helpers/wait.ts';

const quiet = { info() {}, error() {} };

forEachEngine('periodic jobs across workers', (h) => {
  it('of many holders asking for the same due turn at once, exactly one gets it; nobody until it is due again', async () => {
    const db = h().database.db;
    const now = 1_000_000;
    const takes = await Promise.all(Array.from({ length: 8 }, (_, i) => takeJobTurn(db, 'race', `w${i}`, now, 60_000)));
    assert.equal(takes.filter(Boolean).length, 1);
    const holder = `w${takes.indexOf(true)}`;
    assert.deepEqual((await jobTurns(db)).filter((t) => t.name === 'race'), [{ name: 'race', holder, dueAt: now + 60_000 }]);
    // Before it is due nobody runs it; once due, one does again.
    assert.equal(await takeJobTurn(db, 'race', 'w9', now + 59_999, 60_000), false);
    const later = await Promise.all(Array.from({ length: 8 }, (_, i) => takeJobTurn(db, 'race', `v${i}`, now + 60_000, 60_000)));
    assert.equal(later.filter(Boolean).length, 1);
  });

  it('two workers\' schedulers run each job once per period between them (one alone would run it as often)', async () => {
    const database = h().database;
    const everyMs = 250;
    const runs: { worker: string; at: number }[] = [];
    const job = (worker: string): PeriodicJob => ({ name: 'count-runs', everyMs, run: async () => { runs.push({ worker, at: Date.now() }); } });
    const a = new Maintenance([job('a')], quiet, databaseJobTurns(database, 'worker-a'));
    const b = new Maintenance([job('b')], quiet, databaseJobTurns(database, 'worker-b'));
    const started = Date.now();
    a.start();
    b.start();
    await sleep(1600);
    await Promise.all([a.stop(), b.stop()]);
    const elapsed = Date.now() - started;
    // Each scheduler ticks about elapsed/everyMs + 1 times: twice that without turns.
    const perScheduler = Math.floor(elapsed / everyMs) + 1;
    assert.ok(runs.length >= 3, `ran ${runs.length} times`);
    assert.ok(runs.length <= perScheduler, `ran ${runs.length} times in ${elapsed} ms: more than once per ${everyMs} ms period`);
    const at = runs.map((r) => r.at).sort((x, y) => x - y);
    for (let i = 1; i < at.length; i++) assert.ok(at[i] - at[i - 1] >= everyMs - 30, `two runs ${at[i] - at[i - 1]} ms apart`);
  });

  it('a worker\'s metrics listener: /metrics with the call histograms, /readyz ready and then draining (503)', async () => {
    const metrics = createMetrics();
    let draining = false;
    const ops = await startOpsServer({ database: h().database, metrics, draining: () => draining }, { host: '127.0.0.1', port: 0 });
    try {
      metrics.callStarted('inbound');
      metrics.callEnded('inbound', 'hung_up', 42);
      const text = await (await fetch(`http://127.0.0.1:${ops.port}/metrics`)).text();
      assert.match(text, /callplane_call_duration_seconds_count\{direction="inbound",outcome="hung_up"\} 1/);
      assert.match(text, /callplane_calls_active\{direction="inbound"\} 0/);
      assert.match(text, /# TYPE callplane_voice_turn_seconds histogram/);
      assert.equal((await fetch(`http://127.0.0.1:${ops.port}/healthz`)).status, 200);
      const ready = await fetch(`http://127.0.0.1:${ops.port}/readyz`);
      assert.equal(ready.status, 200);
      draining = true;
      const drainingReply = await fetch(`http://127.0.0.1:${ops.port}/readyz`);
      assert.equal(drainingReply.status, 503);
      assert.deepEqual(await drainingReply.json(), { status: 'draining', reason: 'shutting down' });
    } finally {
      await ops.close();
    }
  });
});
