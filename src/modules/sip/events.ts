// Registration lifecycle events (and presence changes of registrations with `subscribe`): kept in sip_events and, in the same transaction, queued as
// webhook deliveries to the organization's `registration` subscriptions (POST /api/v2/webhooks),
// signed and retried by the delivery runtime like task events.
import type { Insertable } from 'kysely';
import type { Executor, SipEventsTable, WebhookDeliveriesTable } from '../../db/types.ts';
import { newId } from '../../lib/ids.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import type { RegistrationStatus } from '../../sip/register.ts';
import { notifyQueue } from '../../queue/waker.ts';
import { DELIVERIES } from '../webhooks/dispatcher.ts';
import { deliveryRepo } from '../webhooks/repository.ts';
import { subscriptionRepo } from '../webhooks/subscriptions/repository.ts';
import { MAX_DELIVERY_ATTEMPTS } from '../../webhooks/deliver.ts';
import { sipRepo } from './repository.ts';

export type RegistrationEventType = SipEventsTable['type'];

/** What a `registration` subscription receives in `data`. */
export interface RegistrationEventData {
  aor: string;
  registered: boolean;
  /** The last final SIP status and reason of the registrar (absent when it never answered). */
  code: number | null;
  reason: string | null;
  error: string | null;
  /** Unix seconds. */
  expiresAt: number | null;
  lastAttemptAt: number | null;
  /** `registration.presence` only: the AOR's presence as GET shows it. */
  presence?: PresenceData | null;
}

/** A registration's presence (its `subscribe`): the SUBSCRIBE dialog's state and what the last NOTIFY said. */
export interface PresenceData {
  subscription: 'active' | 'pending' | 'terminated' | 'failed' | null;
  state: 'open' | 'closed' | null;
  /** The last SUBSCRIBE's final SIP status; reason: why the subscription ended, else that status's phrase. */
  code: number | null;
  reason: string | null;
  /** Unix seconds. */
  updatedAt: number | null;
}

/** The payload of a registration event: the registration's status (`s`, at `now`) as GET shows it. */
export function eventData(aor: string, s: RegistrationStatus | undefined, now: number): RegistrationEventData {
  return {
    aor, registered: !!s?.ok && s.expiresAt !== null && s.expiresAt.getTime() > now, code: s?.code ?? null,
    reason: s?.reason ?? null, error: s && !s.ok ? (s.error ?? null) : null,
    expiresAt: toUnixSeconds(s?.expiresAt?.getTime()), lastAttemptAt: toUnixSeconds(s?.lastAttemptAt?.getTime()),
  };
}

/**
 * Stores the event and queues one delivery per `registration` subscription of the organization.
 * Answers whether deliveries were queued (the caller wakes the delivery worker after commit).
 */
export async function recordRegistrationEvent(
  tx: Executor, orgId: number, type: RegistrationEventType, data: RegistrationEventData, now = Date.now(),
): Promise<boolean> {
  const id = newId('sev', now);
  const payload = JSON.stringify({ type, timestamp: new Date(now).toISOString(), data });
  await sipRepo.insertEvent(tx, { id, org_id: orgId, aor: data.aor, type, payload, created_at: now });
  const hooks = await subscriptionRepo.ofType(tx, [orgId], 'registration');
  if (hooks.length === 0) return false;
  const rows: Insertable<WebhookDeliveriesTable>[] = hooks.map((hook) => ({
    id: newId('dlv', now), org_id: orgId, kind: 'webhook', relay_id: null, relay_event_id: null, webhook_id: hook.id,
    event_id: id, event_type: type, payload, state: 'pending', run_at: now, attempt: 0, max_attempts: MAX_DELIVERY_ATTEMPTS,
    lease_owner: null, lease_expires_at: null, last_status: null, last_error: null, created_at: now, updated_at: now, finished_at: null,
  }));
  await deliveryRepo.insertMany(tx, rows);
  await notifyQueue(tx, DELIVERIES);
  return true;
}

