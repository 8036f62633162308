// One typed turn answered inline, in the request that brought it: the web chat page's visitors and
// the staging test chat (docs/conversations.md). The conversation is opened (or continued) on the
// `web` channel (the staging test chat's on `test`), a new one's welcome message recorded first,
// the line recorded, the agent's turn run, and the conversation ended when the agent ended it. A model failure is logged here and
// answered as `failMessage` (a 502): the provider's own error never reaches the caller. Each
// organization's inline turns are limited in concurrency and rate (inline-limits.ts): 429 past them.
import type { AccountRow, Db } from '../../db/types.ts';
import { BadGateway } from '../../http/errors.ts';
import type { AgentSettings } from '../agents/settings.ts';
import type { ConversationService } from './service.ts';
import type { InlineTurnLimits } from './inline-limits.ts';
import type { TurnRunner } from './turn.ts';

export interface InlineTurnDeps {
  db: Db;
  conversations: Pick<ConversationService, 'open' | 'recordInbound' | 'recordOutbound' | 'end'>;
  turns: Pick<TurnRunner, 'run'>;
  wakeDeliveries: () => void;
  log?: { warn(obj: object, msg: string): void };
  /** The organization's limits on inline turns (inline-limits.ts); none: unlimited. */
  inlineLimits?: InlineTurnLimits;
}

export interface InlineTurnInput {
  account: AccountRow; config: AgentSettings; counterpart: string; message: string; now: number;
  /** `web` (the web chat page, the default) or `test` (the staging test chat: kept apart from customer views and billed usage). */
  channel?: 'web' | 'test';
  /** What the log calls this turn when it fails (`web chat turn failed`). */
  what: string;
  failMessage: string;
}

export async function runInlineTurn(deps: InlineTurnDeps, a: InlineTurnInput) {
  // Admitted before anything is recorded: a refused turn (429) leaves no trace and costs no model call.
  const release = deps.inlineLimits?.admit(a.account.org_id!, a.now);
  try {
    return await inlineTurn(deps, a);
  } finally {
    release?.();
  }
}

async function inlineTurn(deps: InlineTurnDeps, a: InlineTurnInput) {
  const { conversations } = deps;
  // The agent's aiDisclosure is what it writes first (docs/campaigns.md): before the welcome, in the same line.
  const welcome = [a.config.aiDisclosure.trim(), a.config.welcomeMessage.trim()].filter((t) => t !== '').join('\n\n');
  const { o, inbound, welcomed, queued } = await deps.db.transaction().execute(async (tx) => {
    const channel = a.channel ?? 'web';
    const o = await conversations.open(tx, { agent: a.account, channel, direction: 'inbound', counterpart: a.counterpart, counterpartKind: channel }, a.now);
    const welcomed = o.opened && welcome !== '';
    if (welcomed) await conversations.recordOutbound(tx, o, welcome, a.now);
    // One millisecond after the welcome, so the two keep their order everywhere.
    const at = welcomed ? a.now + 1 : a.now;
    const r = await conversations.recordInbound(tx, o, { text: a.message }, at);
    return { o, inbound: { id: r.id, text: a.message, at }, welcomed, queued: r.queued };
  });
  if (queued) deps.wakeDeliveries();
  let result;
  try {
    result = await deps.turns.run({ conversation: o.conversation, room: o.room, config: a.config, inbound, allowAsync: false, replyStatus: 'success' });
  } catch (err) {
    deps.log?.warn({ conversation: o.conversation.id, err: err instanceof Error ? err.message : String(err) }, `${a.what} failed`);
    throw new BadGateway(a.failMessage);
  }
  if (result.kind !== 'reply') throw new BadGateway(a.failMessage);
  const ended = result.effects.some((e) => e.kind === 'end');
  if (ended) await conversations.end(o.conversation.id, 'ended_by_agent', null);
  return { conversation: o.conversation, reply: result.text, ended, welcome: welcomed ? welcome : undefined, simulated: result.simulated, model: result.model };
}
