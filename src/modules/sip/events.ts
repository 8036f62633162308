// Registration lifecycle events (and presence changes of registrations with `subscribe`): kept in sip_events and, in the same transaction, queued as
// webhook deliveries to the organization's `registration` subscriptions (POST /api/v2/webhooks),
// signed and retried by the delivery runtime like task events.
import type { Executor, SipEventsTable } from '../../db/types.ts';
import { newId } from '../../lib/ids.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import type { RegistrationStatus } from '../../sip/register.ts';
import { queueSubscriptionEvent } from '../webhooks/deliveries.ts';
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
  return queueSubscriptionEvent(tx, { orgId, subscriptionType: 'registration', eventId: id, eventType: type, payload, now });
}
