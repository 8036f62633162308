// `agent` events: a change of an agent's live configuration (publish, restore of a version to
// live) queued, in the same transaction, as webhook deliveries to the organization's `agent`
// subscriptions (POST /api/v2/webhooks), signed and retried like task and registration events.
import type { Executor } from '../../db/types.ts';
import { newId } from '../../lib/ids.ts';
import { queueSubscriptionEvent } from '../webhooks/deliveries.ts';

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
  const payload = JSON.stringify({ type, timestamp: new Date(now).toISOString(), data });
  return queueSubscriptionEvent(tx, { orgId, subscriptionType: 'agent', eventId: newId('aev', now), eventType: type, payload, now });
}
