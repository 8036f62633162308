// The workers' retention job for deliveries: what ended long enough ago goes (with its attempt
// log), what is still pending or running, or ended recently, stays.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { it } from 'node:test';
import type { QueueState } from '../../src/db/types.ts';
import { newId } from '../../src/lib/ids.ts';
import { maintenanceJobs } from '../../src/maintenance.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { tenant } from '../queue/fixtures.ts';

const DAY = 86_400_000;

forEachEngine('webhook delivery retention', (h) => {
  it('deletes ended subscription deliveries and fully ended relay events older than the retention, and keeps everything else', async () => {
    const db = h().database.db;
    const t = await tenant(h());
    const now = Date.now();
    const old = now - 40 * DAY;
    const recent = now - 2 * DAY;
    const hook = await db.insertInto('webhooks').values({
      org_id: t.orgId, url: 'https://hooks.example.com/', label: 'x', type: 'task', signing_secret: h().box.seal('whsec_x'), created_at: old,
    }).returning('id').executeTakeFirstOrThrow();
    const relay = await db.insertInto('webhook_relays').values({
      org_id: t.orgId, type: 'generic', ingress_id: crypto.randomBytes(32).toString('base64url'), url: 'https://hooks.example.com/r',
      timeout_ms: 15_000, headers: h().box.sealJson([]), success_status_codes: '[200]', signing_secret: h().box.seal('whsec_x'),
      provider_secret: null, enabled: 1, created_at: old, updated_at: old,
    }).returning('id').executeTakeFirstOrThrow();

    const delivery = async (kind: 'webhook' | 'relay', state: QueueState, finishedAt: number | null, eventId?: string) => {
      const id = newId('dlv', old);
      await db.insertInto('webhook_deliveries').values({
        id, org_id: t.orgId, kind, relay_id: kind === 'relay' ? relay.id : null, relay_event_id: kind === 'relay' ? eventId! : null,
        webhook_id: kind === 'webhook' ? hook.id : null, event_id: eventId ?? newId('evt', old), event_type: 'x', payload: '{}',
        state, run_at: old, attempt: 1, max_attempts: 8, created_at: old, updated_at: finishedAt ?? old, finished_at: finishedAt,
      }).execute();
      await db.insertInto('delivery_attempts').values({ delivery_id: id, attempt: 1, started_at: old, duration_ms: 5, status_code: 200 }).execute();
      return id;
    };
    const event = async (receivedAt: number) => {
      const id = newId('rev', receivedAt);
      await db.insertInto('relay_events').values({
        id, relay_id: relay.id, org_id: t.orgId, provider_event_id: null, content_type: 'application/json', headers: '{}', body: 'e30=', received_at: receivedAt,
      }).execute();
      return id;
    };

    const gone = [
      await delivery('webhook', 'finished', old),
      await delivery('webhook', 'failed', old),
      await delivery('webhook', 'canceled', old),
    ];
    const kept = [
      await delivery('webhook', 'finished', recent),
      await delivery('webhook', 'pending', null),
    ];
    const oldEvent = await event(old);
    gone.push(await delivery('relay', 'failed', old, oldEvent));
    // Received long ago but replayed recently: kept with all its deliveries.
    const replayed = await event(old);
    kept.push(await delivery('relay', 'failed', old, replayed), await delivery('relay', 'finished', recent, replayed));
    // Still being retried.
    const retrying = await event(old);
    kept.push(await delivery('relay', 'pending', null, retrying));
    const fresh = await event(recent);
    kept.push(await delivery('relay', 'finished', recent, fresh));

    const job = maintenanceJobs(h().database, { taskRetentionDays: 30, deliveryRetentionDays: 30 }).find((j) => j.name === 'prune-webhook-deliveries')!;
    assert.equal(await job.run(), 3 + 1, 'three subscription deliveries and one relay event');

    const left = new Set((await db.selectFrom('webhook_deliveries').select('id').where('org_id', '=', t.orgId).execute()).map((r) => r.id));
    for (const id of gone) assert.ok(!left.has(id), `${id} should be gone`);
    for (const id of kept) assert.ok(left.has(id), `${id} should be kept`);
    const events = new Set((await db.selectFrom('relay_events').select('id').where('org_id', '=', t.orgId).execute()).map((r) => r.id));
    assert.deepEqual(events, new Set([replayed, retrying, fresh]));
    const attempts = await db.selectFrom('delivery_attempts').select('delivery_id').where('delivery_id', 'in', [...gone, ...kept]).execute();
    assert.deepEqual(new Set(attempts.map((a) => a.delivery_id)), new Set(kept), 'the attempt log goes with its delivery');
    assert.equal(await job.run(), 0);
  });
});
