// What a record counts in usage, where more than one writer needs the rule: the usage rollups
// (conversations' ends, src/modules/conversations/service.ts) and the activity records of the same
// conversations (src/modules/adr/csv.ts) count alike. docs/billing.md, "Usage".
import type { ConversationRow } from '../../db/types.ts';
import type { UsageMetric } from './repository.ts';

/**
 * What a conversation's end adds to the usage rollups (docs/billing.md, "Usage"): a conversation
 * (a staging test chat's: a test conversation);
 * a voice call (Twilio or SIP) that is not a call task's (those are counted when their task ends)
 * is also a call, with its seconds from answer to end, rounded up to the whole minute.
 */
export function endUsage(c: Pick<ConversationRow, 'channel' | 'task_id' | 'duration_ms'>): Partial<Record<UsageMetric, number>> {
  // A staging test chat session is test usage, shown apart and not billed.
  if (c.channel === 'test') return { testConversations: 1 };
  const u: Partial<Record<UsageMetric, number>> = { conversations: 1 };
  if ((c.channel === 'voice' || c.channel === 'sip') && c.task_id === null) {
    u.calls = 1;
    const seconds = Math.ceil(Math.max(0, Number(c.duration_ms ?? 0)) / 1000);
    if (seconds > 0) { u.callSeconds = seconds; u.callMinutes = Math.ceil(seconds / 60); }
  }
  return u;
}
