// What relay deliveries and subscription deliveries share in the API: the delivery as shown with its
// attempt log (read with attemptRepo.byDelivery), and a replay (a new delivery of the same event,
// due now, with the same webhook-id).
import type { Db, DeliveryAttemptRow, WebhookDeliveryRow } from '../../db/types.ts';
import { Conflict } from '../../http/errors.ts';
import { newId } from '../../lib/ids.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import { notifyQueue } from '../../queue/waker.ts';
import { MAX_DELIVERY_ATTEMPTS } from '../../webhooks/deliver.ts';
import { DELIVERIES } from './dispatcher.ts';
import { deliveryRepo } from './repository.ts';

/** A delivery as the API shows it (times in unix seconds), with every attempt it made. */
export function presentDelivery(d: WebhookDeliveryRow, attempts: readonly DeliveryAttemptRow[]) {
  return {
    id: d.id,
    eventId: d.event_id,
    eventType: d.event_type,
    state: d.state,
    attempt: d.attempt,
    maxAttempts: d.max_attempts,
    nextAttemptAt: d.state === 'pending' ? toUnixSeconds(d.run_at) : null,
    lastStatusCode: d.last_status,
    lastError: d.last_error,
    attempts: attempts.map((a) => ({
      attempt: a.attempt,
      at: toUnixSeconds(a.started_at),
      statusCode: a.status_code,
      error: a.error,
      durationMs: a.duration_ms,
      responseExcerpt: a.response_excerpt,
      nextAttemptAt: toUnixSeconds(a.next_attempt_at),
    })),
    createdAt: toUnixSeconds(d.created_at),
    updatedAt: toUnixSeconds(d.updated_at),
    finishedAt: toUnixSeconds(d.finished_at),
  };
}

/**
 * A new delivery of the original's event to the same relay or subscription, due now, with the same
 * event id (the receiver's webhook-id) and the whole retry schedule. The original is left as it
 * was; 409 while it is still pending or running.
 */
export async function replayDelivery(db: Db, original: WebhookDeliveryRow, now: number): Promise<WebhookDeliveryRow> {
  if (original.state === 'pending' || original.state === 'running') {
    throw new Conflict(`Delivery ${original.id} is still ${original.state}: replay it once it has finished or failed`);
  }
  return db.transaction().execute(async (tx) => {
    const row = await deliveryRepo.insert(tx, {
      id: newId('dlv', now), org_id: original.org_id, kind: original.kind,
      relay_id: original.relay_id, relay_event_id: original.relay_event_id, webhook_id: original.webhook_id,
      event_id: original.event_id, event_type: original.event_type, payload: original.payload,
      state: 'pending', run_at: now, attempt: 0, max_attempts: MAX_DELIVERY_ATTEMPTS, created_at: now, updated_at: now,
    });
    await notifyQueue(tx, DELIVERIES);
    return row;
  });
}
