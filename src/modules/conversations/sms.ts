// Text messages (SMS): what a person texts to an organization's Twilio number (Twilio's messaging
// webhook, checked by the twilio module: src/modules/twilio/texts.ts) is recorded in their text
// conversation with the organization's agent and answered by a queued turn (run-turn.ts sends the
// reply through the organization's carrier); the texts of `text` tasks are recorded in the same
// conversation, so the person's answer continues it and the model sees what was sent.
// docs/conversations.md, "Text messages (SMS)".
import crypto from 'node:crypto';
import type { Config } from '../../config.ts';
import type { AccountRow, Db, Executor } from '../../db/types.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { Invalid } from '../../http/errors.ts';
import type { QueueProducer } from '../../queue/producer.ts';
import { SIMULATED_NUMBERS, TWILIO } from '../../providers/index.ts';
import { first, type TwilioParams } from '../../providers/twilio/form.ts';
import { accountRepo } from '../accounts/repository.ts';
import type { TextSent } from '../tasks/run-task.ts';
import { doNotCallRepo } from '../compliance/repository.ts';
import { complianceSettingsOf, listsOf } from '../compliance/service.ts';
import { conversationRepo, messageRepo, roomRepo, turnRepo } from './repository.ts';
import { normaliseAddress, recordAgentLine, type ConversationService } from './service.ts';

/** Twilio's own limit on a message body; a longer one is cut here. */
export const MAX_SMS_CHARS = 1600;
/** Twilio sends at most 10 media items with a message. */
export const MAX_SMS_MEDIA = 10;
const MAX_MEDIA_URL = 2000;

type Log = { warn(obj: object, msg: string): void };

export type InboundSmsResult =
  | { kind: 'queued'; orgId: number; messageId: string; conversationId: string }
  | { kind: 'duplicate'; orgId: number; messageId: string }
  /** Verified, but the organization has no agent to answer: nothing recorded. */
  | { kind: 'no-agent'; orgId: number }
  /** From a number on a do-not-call list, and no keyword: recorded, not answered (docs/campaigns.md). */
  | { kind: 'recorded'; orgId: number; messageId: string; conversationId: string };

/** The opt-out keywords by text (CTIA's), each the whole message, any case, surrounding spaces ignored. */
export const STOP_WORDS = ['STOP', 'STOPALL', 'UNSUBSCRIBE', 'CANCEL', 'END', 'QUIT'] as const;
export const START_WORDS = ['START', 'UNSTOP'] as const;
export type SmsKeyword = 'stop' | 'start' | 'help';

/** The keyword a text is, or null when it is anything else. */
export function smsKeyword(body: string): SmsKeyword | null {
  const word = body.trim().toUpperCase();
  if ((STOP_WORDS as readonly string[]).includes(word)) return 'stop';
  if ((START_WORDS as readonly string[]).includes(word)) return 'start';
  if (word === 'HELP') return 'help';
  return null;
}

export const STOP_CONFIRMATION = 'You have been unsubscribed and will receive no further messages from this number. Reply START to resubscribe.';
export const START_CONFIRMATION = 'You have been resubscribed and may receive messages from this number again. Reply STOP to unsubscribe.';

export interface SmsServiceDeps {
  db: Db;
  config: Pick<Config, 'conversationIdleMinutes'>;
  conversations: Pick<ConversationService, 'open' | 'recordInbound' | 'queueTurn'>;
  /** The turn queue's producer (turn-queue.ts): a text's turn is queued in its transaction, which wakes the runners. */
  turns: Pick<QueueProducer, 'enqueue'>;
  wakeDeliveries: () => void;
  now?: () => number;
}

/**
 * A UUID (version 8, RFC 9562) derived from `name`: the same carrier message always gets the same
 * message id, so the messages table's primary key makes recording it idempotent.
 */
export function stableUuid(name: string): string {
  const b = crypto.createHash('sha256').update(name, 'utf8').digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x80;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** The media Twilio lists with a message (MediaUrl0…, MediaContentType0…), http(s) only, at most MAX_SMS_MEDIA. */
function mediaOf(form: TwilioParams): Array<{ type: string; url: string }> {
  const n = Math.min(Math.max(Number.parseInt(first(form, 'NumMedia') ?? '0', 10) || 0, 0), MAX_SMS_MEDIA);
  const out: Array<{ type: string; url: string }> = [];
  for (let i = 0; i < n; i++) {
    const url = first(form, `MediaUrl${i}`);
    if (!url || url.length > MAX_MEDIA_URL || !/^https?:\/\//i.test(url)) continue;
    const type = first(form, `MediaContentType${i}`);
    out.push({ type: type && type.length <= 100 ? type : 'file', url });
  }
  return out;
}

export function smsService(deps: SmsServiceDeps) {
  const { db, config, conversations } = deps;
  const clock = deps.now ?? Date.now;
  const idleMs = config.conversationIdleMinutes * 60_000;

  /**
   * Who answers: the agent holding the texted number (phone_numbers, docs/numbers.md); for a
   * number configured by hand (or whose agent is gone, logged), the agent of the person's open
   * text conversation in this organization (a text task's agent, while that session lasts), else
   * the organization's default agent (its first agent account).
   */
  async function answeringAgent(orgId: number, holder: number | null, counterpart: string, now: number, log: Log): Promise<AccountRow | undefined> {
    if (holder !== null) {
      const held = await accountRepo.findById(db, holder);
      if (held && held.org_id === orgId && held.kind === 'agent') return held;
      log.warn({ orgId, agentId: holder }, 'the agent holding the texted number is gone: the organization\'s default agent answers');
    }
    const open = await conversationRepo.openWithCounterpart(db, orgId, 'sms', counterpart, now - idleMs);
    const id = open?.account_id ?? await accountRepo.firstAgentId(db, orgId);
    const agent = id === null ? undefined : await accountRepo.findById(db, id);
    return agent && agent.org_id === orgId && agent.kind === 'agent' ? agent : undefined;
  }

  async function record(orgId: number, holder: number | null, form: TwilioParams, log: Log, provider: string = TWILIO): Promise<InboundSmsResult> {
    const from = first(form, 'From');
    const to = first(form, 'To')!;
    const sid = first(form, 'MessageSid') ?? first(form, 'SmsSid');
    if (!from || from.length > 256) throw new Invalid('From is required (at most 256 characters)');
    if (!sid || sid.length > 64) throw new Invalid('MessageSid is required');
    const body = first(form, 'Body') ?? '';
    const attachments = mediaOf(form);
    const text = body !== '' || attachments.length === 0 ? body.slice(0, MAX_SMS_CHARS)
      : `(sent ${attachments.length} attachment${attachments.length > 1 ? 's' : ''}: ${attachments.map((a) => a.type).join(', ')})`;
    const { address, kind } = normaliseAddress(from);
    const now = clock();
    const agent = await answeringAgent(orgId, holder, address, now, log);
    if (!agent) {
      log.warn({ orgId, messageSid: sid }, 'text message not answered: the organization has no agent');
      return { kind: 'no-agent', orgId };
    }
    // The message id is derived from the organization and the MessageSid: a retry of the webhook
    // finds it (or, racing the first, hits the primary key) and records nothing.
    const messageId = stableUuid(`${provider}-sms:${orgId}:${sid}`);
    const data = {
      provider, ...(provider === SIMULATED_NUMBERS ? { simulated: true } : {}), messageSid: sid, accountSid: first(form, 'AccountSid') ?? null, from, to,
      ...(body.length > MAX_SMS_CHARS ? { truncated: true, length: body.length } : {}),
    };
    const keyword = smsKeyword(body);
    let done: { conversationId: string; incoming: boolean; answered: boolean } | null;
    try {
      done = await deps.turns.enqueue(db, async (tx) => {
        if (await messageRepo.find(tx, messageId)) return null;
        const o = await conversations.open(tx, { agent, channel: 'sms', direction: 'inbound', counterpart: address, counterpartKind: kind }, now);
        // TODO(junk): when src/modules/conversations/junk.ts lands, judge a room that was just
        // opened here (o.room, the first text) with its rules.
        const r = await conversations.recordInbound(tx, o, { id: messageId, text, attachments, data: keyword ? { ...data, keyword } : data }, now);
        const replyTo = { kind: 'sms' as const, to: from, from: to, inReplyTo: messageId };
        if (keyword) {
          // STOP, START and HELP are answered by the platform, once, never by the agent: the
          // answer is recorded and its turn queued already holding it, so the turn only sends it.
          const answer = await keywordAnswer(tx, orgId, keyword, address, o.conversation.id, now);
          const answerId = await recordAgentLine(tx, o.conversation, { text: answer, status: 'pending', kind: `sms_${keyword}` }, now);
          const turnId = await conversations.queueTurn(tx, o.conversation, messageId, replyTo, now);
          await turnRepo.setResume(tx, turnId, JSON.stringify({ unsentSms: { messageId: answerId, body: answer } }), now);
          return { conversationId: o.conversation.id, incoming: r.queued, answered: true };
        }
        // A person who opted out is not answered until they text START (docs/campaigns.md).
        const org = await accountRepo.findById(tx, orgId);
        const listed = org && kind === 'phone' ? (await doNotCallRepo.blocked(tx, listsOf(org), [address])).size > 0 : false;
        if (!listed) await conversations.queueTurn(tx, o.conversation, messageId, replyTo, now);
        return { conversationId: o.conversation.id, incoming: r.queued, answered: !listed };
      });
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      done = null;
    }
    if (!done) return { kind: 'duplicate', orgId, messageId };
    if (done.incoming) deps.wakeDeliveries();
    if (!done.answered) return { kind: 'recorded', orgId, messageId, conversationId: done.conversationId };
    return { kind: 'queued', orgId, messageId, conversationId: done.conversationId };
  }

  /**
   * What a keyword does, in the transaction that records it, and the answer: STOP puts the number
   * on the organization's own list (source sms-stop, this conversation as evidence), START takes it
   * off that list (a reseller's or partner's entry stays), HELP answers the organization's help text.
   */
  async function keywordAnswer(tx: Executor, orgId: number, keyword: SmsKeyword, address: string, conversationId: string, now: number): Promise<string> {
    if (keyword === 'help') return (await complianceSettingsOf(tx, orgId)).smsHelpText;
    if (keyword === 'stop') {
      await doNotCallRepo.add(tx, [{ owner_id: orgId, number: address, source: 'sms-stop', evidence: conversationId, note: null, created_at: now }]);
      return STOP_CONFIRMATION;
    }
    await doNotCallRepo.remove(tx, orgId, address);
    return START_CONFIRMATION;
  }

  return {
    /**
     * A text Twilio posted to a number of organization `orgId` (its signature checked by the twilio
     * module; `holder` is the number's agent, null for the organization's default): recorded in
     * the sender's text conversation and the agent's turn queued, in one transaction. The same
     * MessageSid again (Twilio retries a webhook that timed out) records and queues nothing.
     */
    async receive(orgId: number, holder: number | null, form: TwilioParams, log: Log): Promise<InboundSmsResult> {
      return record(orgId, holder, form, log);
    },

    /**
     * A text to a SIMULATED number the organization holds (docs/numbers.md, "The simulated
     * inventory"): no network delivers it, so the organization's own request stands in for the
     * provider's webhook (the caller checked the number: `holder` is its agent). Recorded and
     * answered as a Twilio text is; the reply goes out through the organization's carrier (the
     * SIMULATED one when it has no provider: recorded, never sent).
     */
    async receiveSimulated(orgId: number, holder: number | null, text: { from: string; to: string; body: string }, log: Log): Promise<InboundSmsResult> {
      const form = new URLSearchParams({ From: text.from, To: text.to, Body: text.body, MessageSid: `SMsim${crypto.randomBytes(14).toString('hex')}` });
      return record(orgId, holder, form, log, SIMULATED_NUMBERS);
    },

    /** A text task's text as its carrier took it: an outbound message of the agent's text conversation with the person. */
    async recordTextTask(t: TextSent): Promise<void> {
      const agent = await accountRepo.findById(db, t.accountId);
      if (!agent || agent.org_id !== t.orgId) return;
      const { address, kind } = normaliseAddress(t.to);
      const id = stableUuid(`text-task:${t.orgId}:${t.taskId}:${t.providerRef}`);
      const now = clock();
      try {
        await db.transaction().execute(async (tx) => {
          if (await messageRepo.find(tx, id)) return;
          const o = await conversations.open(tx, {
            agent, channel: 'sms', direction: 'outbound', counterpart: address, counterpartKind: kind, taskId: t.taskId, carrierRef: t.providerRef,
          }, now);
          const stored = await messageRepo.insert(tx, {
            id, conversation_id: o.conversation.id, room_id: o.room.id, org_id: o.room.org_id, direction: 'outbound', text: t.body,
            source: 'sms', status: t.failed ? 'failed' : 'success', attachments: '[]',
            data: JSON.stringify({ taskId: t.taskId, provider: t.provider, carrierRef: t.providerRef, ...(t.simulated ? { simulated: true } : {}) }),
            at: now,
          });
          await conversationRepo.count(tx, o.conversation.id, now, { out: 1 });
          await roomRepo.touch(tx, o.room.id, stored, now, false);
        });
      } catch (err) {
        if (!isUniqueViolation(err)) throw err; // recorded by a concurrent attempt
      }
    },
  };
}

export type SmsService = ReturnType<typeof smsService>;
