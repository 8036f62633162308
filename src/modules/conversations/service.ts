// Conversations: opening or continuing a person's conversation with an agent on a channel,
// recording what they say, queueing the agent's turn, ending conversations (with the contract's
// `incoming` and `conversation` events), the API channel (POST /api/v2/agent/receiveMessage) and
// answers to asynchronous automation actions (POST /api/v2/agent/zapier/response).
import crypto from 'node:crypto';
import { usageRepo } from '../billing/repository.ts';
import { endUsage } from '../billing/usage-rules.ts';
import type { Config } from '../../config.ts';
import type {
  AccountRow, ConversationChannel, ConversationOutcome, ConversationRow, Db, Executor, MessageRow, RoomRow,
} from '../../db/types.ts';
import type { Scope } from '../../http/auth.ts';
import { Conflict, Invalid, NotFound } from '../../http/errors.ts';
import { normalizePhone } from '../../lib/phone.ts';
import type { QueueProducer } from '../../queue/producer.ts';
import { checkTargetUrl, type TargetPolicy } from '../../webhooks/ssrf.ts';
import { accountRepo } from '../accounts/repository.ts';
import type { AgentService } from '../agents/service.ts';
import type { AgentSettings } from '../agents/settings.ts';
import { recordConversationEvent, recordIncomingEvent, roomIdOf } from './events.ts';
import { analysisWanted, SKIPPED_ANALYSIS } from './analysis.ts';
import { decideJunk } from './junk.ts';
import { analysisRepo, automationRepo, conversationRepo, messageRepo, roomRepo, turnRepo } from './repository.ts';

export const MAX_MESSAGE_CHARS = 4000;
export const MAX_ATTACHMENTS = 10;
export const MAX_CONTEXT_JSON = 8 * 1024;
/** Message channels: a session continues until it has been idle for CALLPLANE_CONVERSATION_IDLE_MINUTES. */
export const MESSAGE_CHANNELS: readonly ConversationChannel[] = ['api', 'sms', 'web'];
/** A staging test chat session (channel `test`) ends once idle this long: it is not shown in progress for the whole idle window. */
export const STAGING_IDLE_MINUTES = 5;

/** Where a queued turn's reply goes. */
export type ReplyTarget =
  | { kind: 'webhook'; url: string; inReplyTo: string; sourceAddress: string; context?: unknown; metadata?: unknown }
  | { kind: 'sms'; to: string; from: string | null; inReplyTo: string }
  | { kind: 'none' };

export interface ConversationServiceDeps {
  db: Db;
  config: Pick<Config, 'conversationIdleMinutes'>;
  policy: TargetPolicy;
  agents: Pick<AgentService, 'named' | 'liveConfig'>;
  /** The turn queue's producer (turn-queue.ts): turns are queued in its transactions, which wake the runners. */
  turns: Pick<QueueProducer, 'enqueue'>;
  /** The analysis queue's producer (analysis-queue.ts): a conversation's end queues its analysis with it. */
  analyses: Pick<QueueProducer, 'enqueue'>;
  wakeDeliveries: () => void;
  now?: () => number;
}

export interface OpenRequest {
  agent: AccountRow;
  channel: ConversationChannel;
  direction: 'inbound' | 'outbound';
  counterpart: string;
  counterpartKind: RoomRow['counterpart_kind'];
  displayName?: string | null;
  taskId?: string | null;
  carrierRef?: string | null;
  /** A call is always a conversation of its own; messages continue an open session. */
  fresh?: boolean;
  /**
   * An inbound call: whether its caller ID was vouched for (Twilio's full STIR/SHAKEN attestation,
   * a SIP trunk the organization whitelisted). Left out where there is no caller to verify.
   */
  callerVerified?: boolean;
}

export interface Opened {
  room: RoomRow;
  conversation: ConversationRow;
  opened: boolean;
}

/** A JSON value of bounded size, or 400 naming the field. */
function boundedJson(v: unknown, field: string): unknown {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw new Invalid(`${field} must be an object`);
  const text = JSON.stringify(v);
  if (text.length > MAX_CONTEXT_JSON) throw new Invalid(`${field} must be at most ${MAX_CONTEXT_JSON} bytes of JSON`);
  return v;
}

/** An address as a room keeps it: E.164 when it is a phone number, else trimmed and lowercased. */
export function normaliseAddress(raw: string): { address: string; kind: RoomRow['counterpart_kind'] } {
  const text = raw.trim();
  if (/^[+(]?\d[\d\s().-]{5,}$/.test(text)) {
    const p = normalizePhone(text);
    if (p.ok) return { address: p.e164, kind: 'phone' };
  }
  return { address: text.toLowerCase(), kind: 'address' };
}

/** A line the agent says: a reply (no kind), or one the call itself says (its kind: welcome, still_there, apology…). */
export interface AgentLineRecord {
  text: string;
  /** messages.data.kind; none for the model's replies. */
  kind?: string;
  /** 'success' unless a channel has yet to deliver it ('pending'). */
  status?: MessageRow['status'];
}

/**
 * The one writer of what the agent says, on every channel and path (a turn's reply, a call's
 * greeting, prompts and apologies, a web chat's welcome): the message, the conversation's
 * outbound count and activity, and the room's last message, in the caller's transaction.
 */
export async function recordAgentLine(tx: Executor, c: Pick<ConversationRow, 'id' | 'room_id' | 'org_id' | 'channel'>, line: AgentLineRecord, at: number): Promise<string> {
  const id = crypto.randomUUID();
  const stored = await messageRepo.insert(tx, {
    id, conversation_id: c.id, room_id: c.room_id, org_id: c.org_id, direction: 'outbound', text: line.text,
    source: c.channel, status: line.status ?? 'success', data: line.kind ? JSON.stringify({ kind: line.kind }) : null, at,
  });
  await conversationRepo.count(tx, c.id, at, { out: 1 });
  await roomRepo.touch(tx, c.room_id, stored, at, false);
  return id;
}

export function conversationService(deps: ConversationServiceDeps) {
  const { db, agents } = deps;
  const clock = deps.now ?? Date.now;
  const idleMs = deps.config.conversationIdleMinutes * 60_000;

  /** The person's room with the agent (created on first contact) and the conversation to record in. */
  async function open(tx: Executor, r: OpenRequest, now: number): Promise<Opened> {
    const room = await roomRepo.findOrCreate(tx, {
      org_id: r.agent.org_id!, account_id: r.agent.id, counterpart: r.counterpart, counterpart_kind: r.counterpartKind,
      display_name: r.displayName ?? null, junk: 0, junk_reason: null,
    }, now);
    if (!r.fresh) {
      const current = await conversationRepo.openInRoom(tx, room.id, r.channel, now - (r.channel === 'test' ? STAGING_IDLE_MINUTES * 60_000 : idleMs));
      if (current) return { room, conversation: current, opened: false };
    }
    const conversation = await conversationRepo.insert(tx, {
      id: crypto.randomUUID(), room_id: room.id, org_id: room.org_id, account_id: r.agent.id, channel: r.channel, direction: r.direction,
      counterpart: r.counterpart, agent_version: null, engine: 'simulated', provider: null, model: null, task_id: r.taskId ?? null,
      carrier_ref: r.carrierRef ?? null, started_at: now, last_activity_at: now, state: '{}', created_at: now, updated_at: now,
      caller_verified: r.callerVerified === undefined ? null : r.callerVerified ? 1 : 0,
    });
    return { room, conversation, opened: true };
  }

  /** Records what the person said (the room counts it unread); an inbound conversation just opened emits `incoming`. */
  async function recordInbound(tx: Executor, o: Opened, m: { id?: string; text: string; attachments?: unknown[]; data?: unknown }, now: number): Promise<{ id: string; queued: boolean }> {
    const id = m.id ?? crypto.randomUUID();
    const stored = await messageRepo.insert(tx, {
      id, conversation_id: o.conversation.id, room_id: o.room.id, org_id: o.room.org_id, direction: 'inbound', text: m.text,
      source: o.conversation.channel, status: 'received', attachments: JSON.stringify(m.attachments ?? []),
      data: m.data === undefined ? null : JSON.stringify(m.data), at: now,
    });
    await conversationRepo.count(tx, o.conversation.id, now, { in: 1 });
    await roomRepo.touch(tx, o.room.id, stored, now, true);
    // The junk rules, with the agent's live configuration (its cnamAutoRejectRegex may have changed since the room opened).
    const agent = await accountRepo.findById(tx, o.room.account_id);
    if (agent) {
      const decided = decideJunk({ counterpart: o.room.counterpart, displayName: o.room.display_name, channel: o.conversation.channel, override: o.room.junk_override }, await agents.liveConfig(agent, tx));
      if (decided.junk !== o.room.junk || decided.reason !== o.room.junk_reason) await roomRepo.setJunk(tx, o.room.id, decided.junk, decided.reason, now);
    }
    const queued = o.opened && o.conversation.direction === 'inbound' && o.conversation.channel !== 'test' ? await recordIncomingEvent(tx, o.conversation, stored, now) : false;
    return { id, queued };
  }

  /** Records what the agent said outside a turn (a web chat's welcome message) as delivered. */
  async function recordOutbound(tx: Executor, o: Opened, text: string, now: number): Promise<string> {
    return recordAgentLine(tx, o.conversation, { text }, now);
  }

  /**
   * Ends a conversation once (the first outcome stands), emits `conversation` and queues its
   * analysis (run-analysis.ts), every channel alike; true when this call ended it.
   */
  async function end(conversationId: string, outcome: ConversationOutcome, detail: string | null): Promise<boolean> {
    const now = clock();
    // The analysis's runners are told (NOTIFY, then this process's) only when one is due to run.
    const ended = await deps.analyses.enqueue(db, async (tx) => {
      if (!(await conversationRepo.end(tx, conversationId, outcome, detail, now))) return null;
      const c = await conversationRepo.find(tx, conversationId);
      if (!c) return null;
      // Counted once, when it ends (docs/billing.md, "Usage"), on the local day of its end.
      await usageRepo.add(tx, c.org_id, now, endUsage(c));
      // A staging test chat session is the agent's editor trying it: no analysis (a model cost) and no webhook.
      if (c.channel === 'test') return { analysis: false, event: false };
      // The agent's postCallAnalysis decides whether the analysis (a model's cost) runs at all.
      const agent = await accountRepo.findById(tx, c.account_id);
      const wanted = !agent || analysisWanted(await agents.liveConfig(agent, tx), c.id);
      const analysis = await analysisRepo.queue(tx, c.id, c.org_id, now, wanted ? undefined : SKIPPED_ANALYSIS) && wanted;
      return { analysis, event: await recordConversationEvent(tx, c, await messageRepo.ofConversation(tx, c.id), now, wanted ? 'pending' : 'skipped') };
    }, (r) => r?.analysis === true);
    if (ended?.event) deps.wakeDeliveries();
    return ended !== null;
  }

  /**
   * What a call records as it goes, for its voice session (the session's CallTranscript,
   * voice/session.ts): the caller's words as the person's messages, the lines the call itself
   * says (by the one writer, recordAgentLine), a reply the caller cut short (only what was heard
   * stays), and the end. Times are the session's clock, so lines keep the order it said them in.
   */
  function callTranscript(o: Pick<Opened, 'room' | 'conversation'>) {
    const opened: Opened = { ...o, opened: false };
    return {
      heard: (text: string, at: number): Promise<{ id: string }> => db.transaction().execute((tx) => recordInbound(tx, opened, { text }, at)),
      said: async (line: AgentLineRecord, at: number): Promise<void> => {
        await db.transaction().execute((tx) => recordAgentLine(tx, o.conversation, line, at));
      },
      interrupted: (messageId: string, heard: string): Promise<void> => messageRepo.interrupt(db, o.conversation.org_id, messageId, heard),
      end: async (outcome: ConversationOutcome, detail: string | null): Promise<void> => {
        await end(o.conversation.id, outcome, detail);
      },
    };
  }

  /**
   * Queues the agent's turn after an inbound message, in the caller's transaction: one of the turn
   * producer's `enqueue`, which tells the runners once it commits (a turn written in another
   * transaction waits for a runner's next poll).
   */
  async function queueTurn(tx: Executor, c: ConversationRow, messageId: string, replyTo: ReplyTarget, now: number): Promise<string> {
    const id = crypto.randomUUID();
    await turnRepo.insert(tx, { id, org_id: c.org_id, conversation_id: c.id, message_id: messageId, reply_to: JSON.stringify(replyTo), run_at: now, created_at: now, updated_at: now });
    return id;
  }

  return {
    open,
    recordInbound,
    recordOutbound,
    end,
    callTranscript,
    queueTurn,

    /** The agent's live configuration (conversations never see staging). */
    liveConfig: (agent: AccountRow, ex?: Executor): Promise<AgentSettings> => agents.liveConfig(agent, ex),

    /**
     * POST /api/v2/agent/receiveMessage: a message from the caller's own platform to one of its
     * agents. Answers at once with the message's uuid; the agent's reply goes, signed, to
     * outboundMessageWebhookUrl (or the organization's), through the delivery queue.
     */
    async receiveMessage(scope: Scope, body: {
      targetAgent: string; sourceAddress: string; message: string; attachments?: unknown; context?: unknown; metadata?: unknown; outboundMessageWebhookUrl?: string;
    }) {
      scope.requireActor(['partner', 'reseller'], 'send messages to an agent');
      const text = body.message;
      if (text.trim() === '') throw new Invalid('message must not be empty');
      if (text.length > MAX_MESSAGE_CHARS) throw new Invalid(`message must be at most ${MAX_MESSAGE_CHARS} characters`);
      if (body.sourceAddress.trim() === '') throw new Invalid('sourceAddress must not be empty');
      if (body.sourceAddress.length > 256) throw new Invalid('sourceAddress must be at most 256 characters');
      const attachments = body.attachments ?? [];
      if (!Array.isArray(attachments)) throw new Invalid('attachments must be an array');
      if (attachments.length > MAX_ATTACHMENTS) throw new Invalid(`attachments may hold at most ${MAX_ATTACHMENTS} items`);
      const cleanAttachments = attachments.map((a: unknown, i) => {
        if (!a || typeof a !== 'object' || Array.isArray(a)) throw new Invalid(`attachments[${i}] must be an object with type and url`);
        const { type, url } = a as Record<string, unknown>;
        if (typeof url !== 'string' || !/^https?:\/\//i.test(url) || url.length > 2000) throw new Invalid(`attachments[${i}].url must be an http(s) URL`);
        if (type !== undefined && (typeof type !== 'string' || type.length > 50)) throw new Invalid(`attachments[${i}].type must be a short string`);
        return { type: typeof type === 'string' ? type : 'file', url };
      });
      const context = boundedJson(body.context, 'context');
      const metadata = boundedJson(body.metadata, 'metadata');
      const agent = await agents.named(scope, body.targetAgent, 'targetAgent');
      const org = await accountRepo.findById(db, agent.org_id!);
      const url = body.outboundMessageWebhookUrl ?? org?.message_webhook_url ?? undefined;
      if (!url) {
        throw new Invalid('outboundMessageWebhookUrl is required: pass it, or set the organization\'s default with POST /api/v2/updateOrganization');
      }
      const checked = checkTargetUrl(url, deps.policy);
      if (!checked.ok) throw new Invalid(`outboundMessageWebhookUrl ${checked.message}`);
      const { address, kind } = normaliseAddress(body.sourceAddress);
      const now = clock();
      const messageUuid = crypto.randomUUID();
      const { queued } = await deps.turns.enqueue(db, async (tx) => {
        const o = await open(tx, { agent, channel: 'api', direction: 'inbound', counterpart: address, counterpartKind: kind }, now);
        const r = await recordInbound(tx, o, { id: messageUuid, text, attachments: cleanAttachments, data: { context, metadata } }, now);
        await queueTurn(tx, o.conversation, messageUuid, { kind: 'webhook', url, inReplyTo: messageUuid, sourceAddress: address, context, metadata }, now);
        return r;
      });
      if (queued) deps.wakeDeliveries();
      return { success: true as const, messageUuid };
    },

    /**
     * POST /api/v2/agent/zapier/response: the answer to an asynchronous automation action. The
     * turn waiting on it runs again now. 404 for an unknown (or another organization's) request,
     * 409 for one answered already or past its deadline.
     */
    async answerAutomation(scope: Scope, body: { requestId?: unknown; responseData?: unknown }) {
      if (typeof body.requestId !== 'string' || body.requestId === '') throw new Invalid('requestId is required');
      const req = await automationRepo.find(db, body.requestId);
      const notFound = () => new NotFound(`requestId ${body.requestId as string} was not found`);
      if (!req) throw notFound();
      const org = await accountRepo.findById(db, req.org_id);
      if (!org || !scope.contains(org)) throw notFound();
      const response = JSON.stringify(body.responseData ?? null);
      if (response.length > 64 * 1024) throw new Invalid('responseData must be at most 64 KB of JSON');
      const now = clock();
      if (req.state === 'waiting' && req.expires_at < now) await automationRepo.expire(db, req.id);
      const answered = await deps.turns.enqueue(db, async (tx) => {
        if (!(await automationRepo.answer(tx, req.id, response, now))) return false;
        await turnRepo.wake(tx, req.turn_id, now);
        return true;
      });
      if (!answered) {
        const fresh = await automationRepo.find(db, req.id);
        throw new Conflict(`requestId ${req.id} was ${fresh?.state === 'answered' ? 'already answered' : 'not answered in time: the agent went on without it'}`);
      }
      return { success: true as const, message: 'Response received', requestId: req.id };
    },

    /** Ends message sessions idle longer than the idle window (maintenance); how many ended. */
    async closeIdle(limit = 500): Promise<number> {
      const idle = [
        ...await conversationRepo.idle(db, clock() - idleMs, MESSAGE_CHANNELS, limit),
        ...await conversationRepo.idle(db, clock() - STAGING_IDLE_MINUTES * 60_000, ['test'], limit),
      ];
      let n = 0;
      for (const c of idle) if (await end(c.id, 'completed', 'idle')) n++;
      return n;
    },

    roomIdOf,
  };
}

export type ConversationService = ReturnType<typeof conversationService>;
