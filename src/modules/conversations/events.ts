// The contract's `incoming` and `conversation` webhook events: an inbound conversation opened (a
// call answered, a first message in a session), and a conversation ended with its outcome, usage
// and transcript (`analysisStatus: "pending"`); then, to the same `conversation` subscriptions,
// `conversation.analyzed` once its analysis is done or has failed (docs/conversations.md, "After
// the conversation"). Queued in the caller's transaction to the organization's subscriptions of
// that type (POST /api/v2/webhooks), signed and retried like every event of ours.
import type { AnalysisRow, ConversationRow, Executor, MessageRow } from '../../db/types.ts';
import { newId } from '../../lib/ids.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import { agentIdOf } from '../agents/service.ts';
import { queueSubscriptionEvent } from '../webhooks/deliveries.ts';
import { missedCall } from './analysis.ts';
import { analysisView, presentAnalysis } from './present.ts';

/** Transcript lines a `conversation` event carries at most (GET /api/v2/conversation/… has all). */
export const EVENT_TRANSCRIPT_MESSAGES = 200;

export const roomIdOf = (c: Pick<ConversationRow, 'account_id' | 'room_id'>) => `${c.account_id}:${c.room_id}`;

function ended(c: ConversationRow) {
  return {
    endedAt: toUnixSeconds(c.ended_at), outcome: c.outcome, outcomeDetail: c.outcome_detail, durationMs: c.duration_ms,
    duration: c.duration_ms === null ? null : Math.round(c.duration_ms / 1000), missedCall: missedCall(c),
    usage: { modelCalls: c.model_calls, tokensIn: c.tokens_in, tokensOut: c.tokens_out, messagesIn: c.messages_in, messagesOut: c.messages_out },
  };
}

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

export async function recordConversationEvent(tx: Executor, c: ConversationRow, transcript: readonly MessageRow[], now: number, analysis: 'pending' | 'skipped' = 'pending'): Promise<boolean> {
  const payload = JSON.stringify({
    type: 'conversation', timestamp: new Date(now).toISOString(),
    data: {
      ...summary(c), ...ended(c),
      // Its analysis follows in a `conversation.analyzed` event, unless the agent's postCallAnalysis skipped it.
      analysisStatus: analysis,
      transcript: transcript.filter((m) => m.direction !== 'tool').slice(0, EVENT_TRANSCRIPT_MESSAGES)
        .map((m) => ({ uuid: m.id, direction: m.direction, message: m.text, timestamp: toUnixSeconds(m.at) })),
    },
  });
  return queueSubscriptionEvent(tx, { orgId: c.org_id, subscriptionType: 'conversation', eventId: newId('cev', now), eventType: 'conversation', payload, now });
}

/**
 * `conversation.analyzed`: the analysis of an ended conversation is done (summary, agentOutcome,
 * aiLeadRating, aiLeadRatingReason, extracted, analysisEngine) or failed (analysisError), sent to
 * the organization's `conversation` subscriptions.
 */
export async function recordAnalysisEvent(tx: Executor, c: ConversationRow, a: AnalysisRow, now: number): Promise<boolean> {
  const payload = JSON.stringify({
    type: 'conversation.analyzed', timestamp: new Date(now).toISOString(),
    data: {
      ...summary(c), ...ended(c), ...presentAnalysis(analysisView(a), c),
      analysisUsage: { modelCalls: a.model_calls, tokensIn: a.tokens_in, tokensOut: a.tokens_out },
    },
  });
  return queueSubscriptionEvent(tx, { orgId: c.org_id, subscriptionType: 'conversation', eventId: newId('cev', now), eventType: 'conversation.analyzed', payload, now });
}
