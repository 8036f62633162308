// What relay deliveries and subscription deliveries share: the delivery as the API shows it with
// its attempt log (read with attemptRepo.byDelivery), a replay (a new delivery of the same event,
// due now, with the same webhook-id), and queueing one of our events to the subscriptions of its type.
import type { Db, DeliveryAttemptRow, Executor, WebhookDeliveryRow } from '../../db/types.ts';
import { Conflict } from '../../http/errors.ts';
import { newId } from '../../lib/ids.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import { notifyQueue } from '../../queue/waker.ts';
import { MAX_DELIVERY_ATTEMPTS } from '../../webhooks/deliver.ts';
import { DELIVERIES } from './dispatcher.ts';
import { deliveryRepo } from './repository.ts';
import { subscriptionRepo } from './subscriptions/repository.ts';

function parsedPayload(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

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
    // A subscription's event as sent (the JSON body, issue 38); a relay's raw body is not shown here.
    ...(d.payload !== null && d.payload !== undefined ? { payload: parsedPayload(d.payload) } : {}),
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

/**
 * Queues one delivery of an event of ours (`eventId`, `eventType`, its JSON `payload`) per
 * subscription of `subscriptionType` the organization has, in the caller's transaction, and tells
 * other processes' delivery workers. True when any was queued (the caller wakes this process's
 * delivery worker after commit).
 */
export async function queueSubscriptionEvent(tx: Executor, e: {
  orgId: number; subscriptionType: string; eventId: string; eventType: string; payload: string; now: number;
}): Promise<boolean> {
  const hooks = await subscriptionRepo.ofType(tx, [e.orgId], e.subscriptionType);
  if (hooks.length === 0) return false;
  const { now } = e;
  await deliveryRepo.insertMany(tx, hooks.map((hook) => ({
    id: newId('dlv', now), org_id: e.orgId, kind: 'webhook' as const, relay_id: null, relay_event_id: null, webhook_id: hook.id,
    event_id: e.eventId, event_type: e.eventType, payload: e.payload, state: 'pending' as const, run_at: now, attempt: 0,
    max_attempts: MAX_DELIVERY_ATTEMPTS, lease_owner: null, lease_expires_at: null, last_status: null, last_error: null,
    created_at: now, updated_at: now, finished_at: null,
  })));
  await notifyQueue(tx, DELIVERIES);
  return true;
}

/** The event type of a test delivery (POST /api/v2/webhooks/{id}/test). */
export const TEST_EVENT_TYPE = 'webhook.test';

/**
 * Queues one test event to one subscription (signed and retried like every delivery), in the
 * caller's transaction: `{type: 'webhook.test', timestamp, data: {webhookId, subscriptionType, message}}`.
 */
export async function queueTestDelivery(tx: Executor, hook: { id: number; org_id: number; type: string }, now: number): Promise<WebhookDeliveryRow> {
  const eventId = newId('evt', now);
  const payload = JSON.stringify({
    type: TEST_EVENT_TYPE, timestamp: new Date(now).toISOString(),
    data: { webhookId: hook.id, subscriptionType: hook.type, message: 'A test event from callplane: your endpoint is reached and can check our signature.' },
  });
  const row: WebhookDeliveryRow = {
    id: newId('dlv', now), org_id: hook.org_id, kind: 'webhook', relay_id: null, relay_event_id: null, webhook_id: hook.id,
    event_id: eventId, event_type: TEST_EVENT_TYPE, payload, state: 'pending', run_at: now, attempt: 0,
    max_attempts: MAX_DELIVERY_ATTEMPTS, lease_owner: null, lease_expires_at: null, last_status: null, last_error: null,
    created_at: now, updated_at: now, finished_at: null, target_url: null,
  };
  await deliveryRepo.insertMany(tx, [row]);
  await notifyQueue(tx, DELIVERIES);
  return row;
}

/**
 * Queues an agent's reply to receiveMessage for `url` (signed with the organization's message
 * secret, retried on the schedule like every delivery), in the caller's transaction.
 */
export async function queueMessageDelivery(tx: Executor, e: { orgId: number; url: string; eventId: string; eventType: string; payload: string; now: number }): Promise<void> {
  const { now } = e;
  await deliveryRepo.insert(tx, {
    id: newId('dlv', now), org_id: e.orgId, kind: 'message', relay_id: null, relay_event_id: null, webhook_id: null,
    event_id: e.eventId, event_type: e.eventType, payload: e.payload, state: 'pending', run_at: now, attempt: 0,
    max_attempts: MAX_DELIVERY_ATTEMPTS, created_at: now, updated_at: now, target_url: e.url,
  });
  await notifyQueue(tx, DELIVERIES);
}
