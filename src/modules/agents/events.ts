// `agent` events: a change of an agent's live configuration (publish, restore of a version to
// live) queued, in the same transaction, as webhook deliveries to the organization's `agent`
// subscriptions (POST /api/v2/webhooks), signed and retried like task and registration events.
import type { Insertable } from 'kysely';
import type { Executor, WebhookDeliveriesTable } from '../../db/types.ts';
import { newId } from '../../lib/ids.ts';
import { notifyQueue } from '../../queue/waker.ts';
import { MAX_DELIVERY_ATTEMPTS } from '../../webhooks/deliver.ts';
import { DELIVERIES } from '../webhooks/dispatcher.ts';
import { deliveryRepo } from '../webhooks/repository.ts';
import { subscriptionRepo } from '../webhooks/subscriptions/repository.ts';

export type AgentEventType = 'agent.published' | 'agent.restored';

export interface AgentEventData {
  agentId: string;
  accountId: number;
  /** Where the new live configuration came from: `staging`, or the versionId restored. */
  source: 'staging' | number;
  /** The automatic version that keeps the live configuration it replaced. */
  previousVersionId: number;
}

/** Queues one delivery per `agent` subscription of the organization; true when any was queued. */
export async function recordAgentEvent(tx: Executor, orgId: number, type: AgentEventType, data: AgentEventData, now = Date.now()): Promise<boolean> {
  const hooks = await subscriptionRepo.ofType(tx, [orgId], 'agent');
  if (hooks.length === 0) return false;
  const id = newId('aev', now);
  const payload = JSON.stringify({ type, timestamp: new Date(now).toISOString(), data });
  const rows: Insertable<WebhookDeliveriesTable>[] = hooks.map((hook) => ({
    id: newId('dlv', now), org_id: orgId, kind: 'webhook', relay_id: null, relay_event_id: null, webhook_id: hook.id,
    event_id: id, event_type: type, payload, state: 'pending', run_at: now, attempt: 0, max_attempts: MAX_DELIVERY_ATTEMPTS,
    lease_owner: null, lease_expires_at: null, last_status: null, last_error: null, created_at: now, updated_at: now, finished_at: null,
  }));
  await deliveryRepo.insertMany(tx, rows);
  await notifyQueue(tx, DELIVERIES);
  return true;
}
