// The workers' retention of two queues' finished rows (src/maintenance.ts): releases of deleted
// holders' numbers that ended (released, or nothing left to release) leave after the retention
// period, failed ones stay for an operator, pending ones stay; activity-record export windows that
// ended leave with their shipment log, recent and pending ones (and their log) stay. In batches.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { QueueState } from '../../src/db/types.ts';
import { newId } from '../../src/lib/ids.ts';
import { maintenanceJobs } from '../../src/maintenance.ts';
import { forEachEngine } from '../helpers/engines.ts';

const DAY = 86_400_000;

forEachEngine('numbers and ADR retention', (h) => {
  const db = () => h().database.db;
  const job = (name: string) => {
    const found = maintenanceJobs(h().database, { taskRetentionDays: 30 }).find((j) => j.name === name);
    assert.ok(found, `a maintenance job ${name}`);
    return found;
  };

  it('prunes releases of numbers that ended before the retention period; failed and pending ones stay', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const now = Date.now();
    const old = now - 31 * DAY;
    const release = async (state: QueueState, finishedAt: number | null) => {
      const id = newId('nrl', old);
      await db().insertInto('number_releases').values({
        id, number: `+1500555${String(Math.floor(Math.random() * 9000) + 1000)}`, org_id: o.id, agent_id: null, reason: 'organization deleted',
        provider: 'simulated', provider_ref: null, provider_config: null, provider_secrets: null, state, run_at: old, attempt: 1, max_attempts: 10,
        lease_owner: null, lease_expires_at: null, last_error: state === 'failed' ? 'twilio failed' : null, released_at: state === 'finished' ? finishedAt : null,
        created_at: old, updated_at: finishedAt ?? old, finished_at: finishedAt,
      }).execute();
      return id;
    };
    const gone = [await release('finished', old), await release('finished', old - DAY), await release('canceled', old)];
    const kept = [await release('finished', now - DAY), await release('failed', old), await release('pending', null)];
    assert.equal(await job('prune-number-releases').run(), 3);
    const left = (await db().selectFrom('number_releases').select('id').where('org_id', '=', o.id).execute()).map((x) => x.id).sort();
    assert.deepEqual(left, kept.sort());
    assert.ok(gone.every((id) => !left.includes(id)));
    assert.equal(await job('prune-number-releases').run(), 0);
  });

  it('prunes export windows that ended before the retention period with their shipment log, in batches; recent and pending ones stay', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const now = Date.now();
    const old = now - 40 * DAY;
    let start = Math.floor(old / 3_600_000) * 3_600_000;
    const window = async (state: QueueState, finishedAt: number | null) => {
      const id = newId('adrw', old);
      start += 3_600_000;
      await db().insertInto('adr_windows').values({
        id, account_id: o.id, window_start: start, window_end: start + 3_600_000, file_name: `adr-${id}.csv`, state, run_at: old, attempt: 1,
        max_attempts: 10, lease_owner: null, lease_expires_at: null, records: 1, bytes: 10, checksum: null,
        shipped_at: state === 'finished' ? finishedAt : null, last_error: null, created_at: old, updated_at: finishedAt ?? old, finished_at: finishedAt,
      }).execute();
      for (const [attempt, outcome] of [[1, 'failed'], [2, state === 'finished' ? 'shipped' : 'failed']] as const) {
        await db().insertInto('adr_shipments').values({
          id: newId('adrs', old), account_id: o.id, window_id: id, attempt, outcome, message: outcome, bytes: 10, duration_ms: 5, next_attempt_at: null, at: old,
        }).execute();
      }
      return id;
    };
    const gone: string[] = [];
    for (let i = 0; i < 1003; i++) gone.push(await window(i % 3 === 0 ? 'failed' : 'finished', old));
    const kept = [await window('finished', now - DAY), await window('pending', null)];
    assert.equal(await job('prune-adr-windows').run(), 1003, 'past one batch of 1000');
    const windows = (await db().selectFrom('adr_windows').select('id').where('account_id', '=', o.id).execute()).map((x) => x.id).sort();
    assert.deepEqual(windows, kept.sort());
    const log = await db().selectFrom('adr_shipments').select('window_id').where('account_id', '=', o.id).execute();
    assert.equal(log.length, 4, 'the kept windows\' log stays, the pruned ones\' went');
    assert.ok(log.every((s) => kept.includes(s.window_id)));
  });
});
