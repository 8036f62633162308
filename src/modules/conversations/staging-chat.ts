// The staging test chat (docs/conversations.md, Testing the staging configuration): someone who
// may edit an agent talks with its STAGING configuration before publishing it, as the console's
// agent page does. Each message runs the agent's turn inline (the same turn runner as the web
// chat and queued turns) and the answer is the reply. The conversation is recorded on its own
// channel `test` (counterpart `web:staging-<account>-<session>`), so the model sees the earlier
// turns of the same session; it is kept out of the inbox, logs and live feed unless asked for
// (includeTest), emits no webhooks, is not analysed, and its usage is test usage (testConversations,
// testTokens), not billed. A session idle for STAGING_IDLE_MINUTES ends.
import type { AccountRow, Db } from '../../db/types.ts';
import { Conflict, Invalid } from '../../http/errors.ts';
import type { Scope } from '../../http/auth.ts';
import type { AgentService } from '../agents/service.ts';
import type { ConversationService } from './service.ts';
import type { TurnRunner } from './turn.ts';
import type { InlineTurnLimits } from './inline-limits.ts';
import { runInlineTurn } from './inline-turn.ts';

/** A test message's length, in characters (code points), after trimming: as the web chat's. */
export const STAGING_CHAT_TEXT_CHARS = 2000;
const SESSION = /^[A-Za-z0-9_-]{1,40}$/;

export interface StagingChatDeps {
  db: Db;
  agents: Pick<AgentService, 'staged'>;
  conversations: Pick<ConversationService, 'open' | 'recordInbound' | 'recordOutbound' | 'end'>;
  turns: Pick<TurnRunner, 'run'>;
  wakeDeliveries: () => void;
  log?: { warn(obj: object, msg: string): void };
  /** The organization's limits on inline model turns, shared with the web chat. */
  inlineLimits?: InlineTurnLimits;
  now?: () => number;
}

export function stagingChatService(deps: StagingChatDeps) {
  const { agents } = deps;
  const clock = deps.now ?? Date.now;
  /** Sessions whose message is being answered: one at a time each. */
  const answering = new Set<string>();

  const counterpartOf = (actor: AccountRow, session: string) => `web:staging-${actor.id}-${session}`;

  return {
    /**
     * POST /api/v2/agent/{agentId}/testMessage: `text` to the agent's staging configuration, in the
     * caller's test session `session` (default `default`; another session starts afresh). Answers
     * the reply; a session's first message records the staging welcome message first, and says so.
     */
    async send(scope: Scope, agentId: string, body: { text: string; session?: string }) {
      const message = body.text.trim();
      const chars = [...message].length;
      if (chars < 1 || chars > STAGING_CHAT_TEXT_CHARS) throw new Invalid(`text must be 1–${STAGING_CHAT_TEXT_CHARS} characters long`);
      const session = body.session ?? 'default';
      if (!SESSION.test(session)) throw new Invalid('session must be 1–40 characters of letters, digits, _ and -');
      const { account, config } = await agents.staged(scope, agentId);
      const counterpart = counterpartOf(scope.actor, session);
      const key = `${account.id}|${counterpart}`;
      if (answering.has(key)) throw new Conflict('The agent is still answering your last message');
      answering.add(key);
      try {
        // The model's own error stays in the server's log (it may name a provider's address or
        // echo what it was sent), as on every other channel.
        const turn = await runInlineTurn(deps, {
          account, config, counterpart, message, now: clock(), what: 'staging test turn', channel: 'test',
          failMessage: 'The agent could not answer: its model request failed (the server log has the reason, under this requestId)',
        });
        return {
          success: true as const, reply: turn.reply, ended: turn.ended, conversationUuid: turn.conversation.id,
          engine: turn.simulated ? 'simulated' : 'model', model: turn.model,
          ...(turn.welcome !== undefined ? { welcome: turn.welcome } : {}),
          ...(turn.simulated ? { simulated: true as const } : {}),
        };
      } finally {
        answering.delete(key);
      }
    },
  };
}

export type StagingChatService = ReturnType<typeof stagingChatService>;
