// The contract's `incoming` and `conversation` webhook events: an inbound conversation opened (a
// call answered, a first message in a session), and a conversation ended with its outcome, usage
// and transcript. Queued in the caller's transaction to the organization's subscriptions of that
// type (POST /api/v2/webhooks), signed and retried like every event of ours.
import type { ConversationRow, Executor, MessageRow } from '../../db/types.ts';
import { newId } from '../../lib/ids.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import { agentIdOf } from '../agents/service.ts';
import { queueSubscriptionEvent } from '../webhooks/deliveries.ts';

/** Transcript lines a `conversation` event carries at most (GET /api/v2/conversation/… has all). */
export const EVENT_TRANSCRIPT_MESSAGES = 200;

export const roomIdOf = (c: Pick<ConversationRow, 'account_id' | 'room_id'>) => `${c.account_id}:${c.room_id}`;

function summary(c: ConversationRow) {
  return {
    uuid: c.id, roomId: roomIdOf(c), agentId: agentIdOf(c.account_id), accountId: c.account_id,
    channel: c.channel, direction: c.direction, counterpart: c.counterpart, engine: c.engine, provider: c.provider, model: c.model,
    taskId: c.task_id, startedAt: toUnixSeconds(c.started_at),
  };
}

export async function recordIncomingEvent(tx: Executor, c: ConversationRow, firstMessage: string | null, now: number): Promise<boolean> {
  const payload = JSON.stringify({ type: 'incoming', timestamp: new Date(now).toISOString(), data: { ...summary(c), message: firstMessage } });
  return queueSubscriptionEvent(tx, { orgId: c.org_id, subscriptionType: 'incoming', eventId: newId('cev', now), eventType: 'incoming', payload, now });
}

export async function recordConversationEvent(tx: Executor, c: ConversationRow, transcript: readonly MessageRow[], now: number): Promise<boolean> {
  const payload = JSON.stringify({
    type: 'conversation', timestamp: new Date(now).toISOString(),
    data: {
      ...summary(c), endedAt: toUnixSeconds(c.ended_at), outcome: c.outcome, outcomeDetail: c.outcome_detail, durationMs: c.duration_ms,
      usage: { modelCalls: c.model_calls, tokensIn: c.tokens_in, tokensOut: c.tokens_out, messagesIn: c.messages_in, messagesOut: c.messages_out },
      transcript: transcript.filter((m) => m.direction !== 'tool').slice(0, EVENT_TRANSCRIPT_MESSAGES)
        .map((m) => ({ uuid: m.id, direction: m.direction, message: m.text, timestamp: toUnixSeconds(m.at) })),
    },
  });
  return queueSubscriptionEvent(tx, { orgId: c.org_id, subscriptionType: 'conversation', eventId: newId('cev', now), eventType: 'conversation', payload, now });
}
