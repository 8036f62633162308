// The staging test chat (docs/conversations.md, Testing the staging configuration): someone who
// may edit an agent talks with its STAGING configuration before publishing it, as the console's
// agent page does. Each message runs the agent's turn inline (the same turn runner as the web
// chat and queued turns) and the answer is the reply. The conversation is recorded like any other
// (channel `web`, counterpart `web:staging-<account>-<session>`), so the model sees the earlier
// turns of the same session, and the history shows what was tried.
import type { AccountRow, Db } from '../../db/types.ts';
import { BadGateway, Conflict, Invalid } from '../../http/errors.ts';
import type { Scope } from '../../http/auth.ts';
import type { AgentService } from '../agents/service.ts';
import type { ConversationService } from './service.ts';
import type { TurnRunner } from './turn.ts';

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
  now?: () => number;
}

export function stagingChatService(deps: StagingChatDeps) {
  const { db, agents, conversations } = deps;
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
        const welcome = typeof config.welcomeMessage === 'string' ? config.welcomeMessage.trim() : '';
        const now = clock();
        const { o, inbound, welcomed, queued } = await db.transaction().execute(async (tx) => {
          const o = await conversations.open(tx, { agent: account, channel: 'web', direction: 'inbound', counterpart, counterpartKind: 'web' }, now);
          const welcomed = o.opened && welcome !== '';
          if (welcomed) await conversations.recordOutbound(tx, o, welcome, now);
          const at = welcomed ? now + 1 : now;
          const r = await conversations.recordInbound(tx, o, { text: message }, at);
          return { o, inbound: { id: r.id, text: message, at }, welcomed, queued: r.queued };
        });
        if (queued) deps.wakeDeliveries();
        let result;
        try {
          result = await deps.turns.run({ conversation: o.conversation, room: o.room, config, inbound, allowAsync: false, replyStatus: 'success' });
        } catch (err) {
          deps.log?.warn({ conversation: o.conversation.id, err: err instanceof Error ? err.message : String(err) }, 'staging test turn failed');
          throw new BadGateway(`The agent could not answer: ${err instanceof Error ? err.message : String(err)}`);
        }
        if (result.kind !== 'reply') throw new BadGateway('The agent could not answer: it waited on an asynchronous action');
        const ended = result.effects.some((e) => e.kind === 'end');
        if (ended) await conversations.end(o.conversation.id, 'ended_by_agent', null);
        return {
          success: true as const, reply: result.text, ended, conversationUuid: o.conversation.id,
          engine: result.simulated ? 'simulated' : 'model', model: result.model,
          ...(welcomed ? { welcome } : {}),
          ...(result.simulated ? { simulated: true as const } : {}),
        };
      } finally {
        answering.delete(key);
      }
    },
  };
}

export type StagingChatService = ReturnType<typeof stagingChatService>;
