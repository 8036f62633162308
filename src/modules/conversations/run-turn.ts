// The job of a queued turn (API messages and SMS): run the agent's turn on its live configuration
// and send the reply where the message asked (a signed webhook through the delivery queue, or an
// SMS through the organization's carrier). A turn that waits on an automation request goes back
// to the queue until it is answered or its deadline passes; a model that keeps failing is retried
// on the queue's backoff, and after the last attempt the person's platform is told it failed.
import type { Transaction } from 'kysely';
import type { ConversationRow, DB, Db, TurnRow } from '../../db/types.ts';
import { newId } from '../../lib/ids.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import { CarrierError, TransientCarrierError, type Carrier } from '../../providers/index.ts';
import { exponentialBackoff } from '../../queue/engine.ts';
import type { HandlerContext, Outcome } from '../../queue/runner.ts';
import { accountRepo } from '../accounts/repository.ts';
import { agentIdOf } from '../agents/service.ts';
import { queueMessageDelivery } from '../webhooks/deliveries.ts';
import { roomIdOf } from './events.ts';
import { conversationRepo, messageRepo, roomRepo, turnRepo } from './repository.ts';
import { recordAgentLine, type ConversationService, type ReplyTarget } from './service.ts';
import { MAX_SMS_CHARS } from './sms.ts';
import type { TurnRunner } from './turn.ts';

export interface TurnHandlerDeps {
  db: Db;
  conversations: Pick<ConversationService, 'liveConfig' | 'end'>;
  turns: TurnRunner;
  /** The organization's carrier for texts (src/modules/numbering-providers/carriers.ts chooseCarrier). */
  textCarrier(orgId: number): Promise<Carrier>;
  wakeDeliveries: () => void;
  now(): number;
  log?: { warn(obj: object, msg: string): void };
}

type TurnOutcome = Outcome<TurnRow>;
type SmsTarget = Extract<ReplyTarget, { kind: 'sms' }>;

/**
 * An SMS reply the model has given and the carrier has not yet taken, kept in the turn's `resume`
 * until it is sent: a later attempt (the carrier was busy, the worker stopped) sends it again
 * instead of asking the model again, which would record a second reply and run its tools twice.
 */
interface UnsentSms { messageId: string; body: string }

function unsentSms(resume: string | null): UnsentSms | undefined {
  if (!resume) return undefined;
  const parsed = JSON.parse(resume) as { unsentSms?: UnsentSms };
  return parsed.unsentSms;
}

/** Twilio takes at most 1,600 characters in one message. */
const smsBody = (text: string) => (text.length > MAX_SMS_CHARS ? `${text.slice(0, MAX_SMS_CHARS - 1)}…` : text);

export function createTurnHandler(deps: TurnHandlerDeps) {
  const { db } = deps;

  /** The reply (or the failure) for a webhook target, queued with the settle. */
  function webhookAfter(row: TurnRow, target: Extract<ReplyTarget, { kind: 'webhook' }>, payload: Record<string, unknown>, eventType: string) {
    return async (tx: Transaction<DB>) => {
      const now = deps.now();
      await queueMessageDelivery(tx, {
        orgId: row.org_id, url: target.url, eventId: newId('msg', now), eventType,
        payload: JSON.stringify({ ...payload, inReplyTo: target.inReplyTo, sourceAddress: target.sourceAddress, context: target.context ?? null, metadata: target.metadata ?? null, timestamp: toUnixSeconds(now) }),
        now,
      });
    };
  }

  /**
   * Sends an SMS reply through the organization's text carrier. A carrier that refused it before
   * it could have gone out (429, connection refused) is tried again later with the same reply;
   * any other carrier error fails the turn and marks the reply failed, since trying again could
   * text the person twice.
   */
  async function sendSms(row: TurnRow, target: SmsTarget, reply: UnsentSms, signal: AbortSignal): Promise<TurnOutcome> {
    try {
      const carrier = await deps.textCarrier(row.org_id);
      const sent = await carrier.sendText({ taskId: row.id, to: target.to, ...(target.from ? { from: target.from } : {}), body: reply.body }, signal);
      const failed = sent.final !== null && sent.final.state !== 'finished';
      await messageRepo.setStatus(db, reply.messageId, failed ? 'failed' : 'success');
      return {
        kind: 'complete', state: 'finished',
        set: { resume: null, last_error: failed ? `${carrier.name}: the reply was ${String(sent.final?.result.status)}` : null },
      };
    } catch (err) {
      if (signal.aborted || !(err instanceof CarrierError)) throw err;
      if (err instanceof TransientCarrierError && !err.maybeApplied && row.attempt < row.max_attempts) {
        return { kind: 'retry', runAt: deps.now() + (err.retryAfterMs ?? exponentialBackoff(row.attempt)), set: { last_error: err.message.slice(0, 1000) } };
      }
      deps.log?.warn({ turn: row.id, err: err.message }, 'the SMS reply could not be sent');
      await messageRepo.setStatus(db, reply.messageId, 'failed');
      return { kind: 'complete', state: 'failed', set: { resume: null, last_error: err.message.slice(0, 1000) } };
    }
  }

  /**
   * The disclosure to put before this reply: when the agent has one and has written nothing in
   * this conversation yet but the disclosure itself (recorded here once, as the thread's first
   * agent line, so a retried turn finds it and still sends it first), else ''.
   */
  async function disclosed(conversation: ConversationRow, text: string, after: number): Promise<string> {
    if (!text) return '';
    const said = (await messageRepo.ofConversation(db, conversation.id)).filter((m) => m.direction === 'outbound');
    const kind = (m: { data: string | null }) => (m.data ? (JSON.parse(m.data) as { kind?: string }).kind : undefined);
    if (said.some((m) => kind(m) !== 'ai_disclosure')) return '';
    // A millisecond before the reply it precedes (and not before the message that started the turn), so transcripts list it first.
    if (said.length === 0) await db.transaction().execute((tx) => recordAgentLine(tx, conversation, { text, kind: 'ai_disclosure' }, Math.max(after, deps.now() - 1)));
    return text;
  }

  return async (row: TurnRow, ctx: HandlerContext): Promise<TurnOutcome> => {
    // Independent reads side by side (PostgreSQL runs them on several pooled connections).
    const [conversation, inbound] = await Promise.all([conversationRepo.find(db, row.conversation_id), messageRepo.find(db, row.message_id)]);
    const [room, agent] = conversation
      ? await Promise.all([roomRepo.find(db, conversation.room_id), accountRepo.findById(db, conversation.account_id)])
      : [undefined, undefined];
    if (!conversation || !room || !agent) return { kind: 'complete', state: 'canceled', set: { last_error: 'the conversation or its agent was deleted' } };
    const target = JSON.parse(row.reply_to) as ReplyTarget;
    const unsent = target.kind === 'sms' ? unsentSms(row.resume) : undefined;
    if (target.kind === 'sms' && unsent) return sendSms(row, target, unsent, ctx.signal);
    const config = await deps.conversations.liveConfig(agent);
    // The agent's aiDisclosure is what it writes first in a text thread (docs/campaigns.md).
    const disclosure = target.kind === 'sms' || target.kind === 'webhook' ? await disclosed(conversation, config.aiDisclosure.trim(), inbound?.at ?? 0) : '';
    let result;
    try {
      result = await deps.turns.run({
        conversation, room, config, turnId: row.id, allowAsync: true, replyStatus: target.kind === 'none' ? 'success' : 'pending',
        inbound: inbound ? { id: inbound.id, text: inbound.text, at: inbound.at } : undefined,
        resume: row.resume ? JSON.parse(row.resume) as never : undefined,
        signal: ctx.signal,
      });
    } catch (err) {
      if (ctx.signal.aborted || row.attempt < row.max_attempts) throw err;
      // The last attempt failed: say so to the person's platform instead of leaving it waiting.
      const message = err instanceof Error ? err.message : String(err);
      deps.log?.warn({ turn: row.id, err: message }, 'conversation turn failed for good');
      return {
        kind: 'complete', state: 'failed', set: { last_error: message.slice(0, 1000) }, settled: deps.wakeDeliveries,
        ...(target.kind === 'webhook' ? {
          after: webhookAfter(row, target, { type: 'message.failed', success: false, error: message.slice(0, 500), agentId: agentIdOf(agent.id), roomId: roomIdOf(conversation), conversationUuid: conversation.id }, 'message.failed'),
        } : {}),
      };
    }
    if (result.kind === 'waiting') {
      return { kind: 'retry', runAt: result.expiresAt, uncounted: true, set: { resume: JSON.stringify(result.resume) } };
    }
    if (result.effects.some((e) => e.kind === 'end')) await deps.conversations.end(conversation.id, 'ended_by_agent', null);
    if (target.kind === 'sms') {
      const reply = { messageId: result.messageId, body: smsBody(disclosure ? `${disclosure}\n\n${result.text}` : result.text) };
      await turnRepo.setResume(db, row.id, JSON.stringify({ unsentSms: reply }), deps.now());
      return sendSms(row, target, reply, ctx.signal);
    }
    if (target.kind !== 'webhook') return { kind: 'complete', state: 'finished', set: { resume: null } };
    await messageRepo.setStatus(db, result.messageId, 'success');
    // The reply as stored (redacted when the organization has redaction on), never more.
    const stored = (await messageRepo.find(db, result.messageId))?.text ?? result.text;
    return {
      kind: 'complete', state: 'finished', set: { resume: null }, settled: deps.wakeDeliveries,
      after: webhookAfter(row, target, {
        type: 'message', success: true, messageUuid: result.messageId, message: disclosure ? `${disclosure}\n\n${stored}` : stored,
        agentId: agentIdOf(agent.id), roomId: roomIdOf(conversation), conversationUuid: conversation.id,
        engine: result.simulated ? 'simulated' : 'model', provider: result.engine, model: result.model,
        ...(result.simulated ? { simulated: true } : {}),
      }, 'message'),
    };
  };
}
