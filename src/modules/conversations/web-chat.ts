// The web chat (docs/conversations.md, Web chat): a person talks with an agent's LIVE
// configuration on the public page of its slug (GET /a/<slug>). Each browser is a visitor: an
// opaque id we issue, bound to the agent by a MAC, whose room with the agent is `web:<id>`. A
// message opens or continues the visitor's 'web' conversation and the agent's turn runs inline;
// the answer is the reply. Limits (per visitor, per address, new visitors per address) are kept
// in this process's memory.
import crypto from 'node:crypto';
import type { AccountRow, Db } from '../../db/types.ts';
import { Conflict, Invalid, NotFound, TooManyRequests, Unauthorized } from '../../http/errors.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { addressBucket, admitAll, FixedWindowLimiter } from '../../lib/rate-limit.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import type { AgentService } from '../agents/service.ts';
import { conversationRepo, messageRepo, roomRepo } from './repository.ts';
import type { ConversationService } from './service.ts';
import type { TurnRunner } from './turn.ts';
import type { InlineTurnLimits } from './inline-limits.ts';
import { runInlineTurn } from './inline-turn.ts';

export interface WebChatLimits {
  /** A message's length, in characters (code points), after trimming. */
  textChars: number;
  /** Messages one visitor may send an agent per minute. */
  visitorPerMinute: number;
  /** Messages one client address may send one agent per minute, whatever the visitor ids. */
  addressPerMinute: number;
  /** Visitor ids one client address may be issued per hour (over all agents). */
  newVisitorsPerHour: number;
  /** Page and transcript loads one client address may make per minute (over all agents). */
  readsPerMinute: number;
  /** Messages a transcript shows (the latest). */
  transcriptMessages: number;
  /** Keys each limiter tracks at most. */
  trackedKeys: number;
}

export const WEB_CHAT_LIMITS: Readonly<WebChatLimits> = Object.freeze({
  textChars: 2000,
  visitorPerMinute: 10,
  addressPerMinute: 30,
  newVisitorsPerHour: 60,
  readsPerMinute: 120,
  transcriptMessages: 100,
  trackedKeys: 10_000,
});

/** The JSON body POST /a/<slug>/messages takes at most. */
export const WEB_CHAT_BODY_BYTES = 8 * 1024;

export interface WebChatServiceDeps {
  db: Db;
  /** Signs visitor ids (a key derived for this purpose only). */
  box: Pick<SecretBox, 'mac'>;
  agents: Pick<AgentService, 'bySlug' | 'liveConfig'>;
  conversations: Pick<ConversationService, 'open' | 'recordInbound' | 'recordOutbound' | 'end'>;
  turns: Pick<TurnRunner, 'run'>;
  wakeDeliveries: () => void;
  limits?: Partial<WebChatLimits>;
  /** The organization's limits on inline model turns, shared with the staging test chat. */
  inlineLimits?: InlineTurnLimits;
  log?: { warn(obj: object, msg: string): void };
  now?: () => number;
}

/** Who is asking: the client's address and the visitor cookie it sent, if any. */
export interface WebClient {
  ip: string;
  visitor: string | undefined;
}

const MAC_PURPOSE = 'web-chat-visitor';
const VISITOR = /^v1\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/;
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const NOT_FOUND = 'This chat does not exist';

export function webChatService(deps: WebChatServiceDeps) {
  const { db, box, agents } = deps;
  const clock = deps.now ?? Date.now;
  const limits: WebChatLimits = { ...WEB_CHAT_LIMITS, ...deps.limits };
  const byVisitor = new FixedWindowLimiter(limits.visitorPerMinute, MINUTE, limits.trackedKeys);
  const byAddress = new FixedWindowLimiter(limits.addressPerMinute, MINUTE, limits.trackedKeys);
  const newVisitors = new FixedWindowLimiter(limits.newVisitorsPerHour, HOUR, limits.trackedKeys);
  const reads = new FixedWindowLimiter(limits.readsPerMinute, MINUTE, limits.trackedKeys);
  /** Visitors whose message is being answered: one at a time each. */
  const answering = new Set<string>();

  const signature = (agentId: number, id: string) => box.mac(MAC_PURPOSE, `${agentId}:${id}`);

  /** The visitor id a cookie carries, when we issued it for this agent. */
  function visitorOf(agent: AccountRow, cookie: string | undefined): string | undefined {
    const m = cookie ? VISITOR.exec(cookie) : null;
    if (!m) return undefined;
    const expected = Buffer.from(signature(agent.id, m[1]!));
    const given = Buffer.from(m[2]!);
    return expected.length === given.length && crypto.timingSafeEqual(expected, given) ? m[1] : undefined;
  }

  /** A new visitor id (128 random bits) for this agent, as its cookie value; limited per address. */
  function issue(agent: AccountRow, client: WebClient, now: number): string {
    const admitted = newVisitors.take(addressBucket(client.ip), now);
    if (!admitted.ok) throw new TooManyRequests('Too many new chats from your network: try again later', admitted.retryAfterMs);
    const id = crypto.randomBytes(16).toString('base64url');
    return `v1.${id}.${signature(agent.id, id)}`;
  }

  function read(client: WebClient, now: number): void {
    const admitted = reads.take(addressBucket(client.ip), now);
    if (!admitted.ok) throw new TooManyRequests('Too many requests: try again later', admitted.retryAfterMs);
  }

  async function agentOf(rawSlug: string): Promise<{ account: AccountRow; slug: string }> {
    const found = await agents.bySlug(rawSlug);
    if (!found) throw new NotFound(NOT_FOUND);
    return found;
  }

  const counterpartOf = (visitor: string) => `web:${visitor}`;

  return {
    /**
     * What the page of a slug shows: the live configuration's title and welcome message, nothing
     * else. A visitor id is issued when the request carries none of this agent's, unless it is a
     * cross-site navigation (which SameSite=Strict sends without the cookie the browser may hold):
     * the transcript request the page makes then issues one if it is really missing.
     */
    async page(rawSlug: string, client: WebClient, crossSite: boolean) {
      const now = clock();
      read(client, now);
      const { account, slug } = await agentOf(rawSlug);
      const config = await agents.liveConfig(account);
      const issued = crossSite || visitorOf(account, client.visitor) ? undefined : issue(account, client, now);
      // The aiDisclosure first, as the conversation records it (inline-turn.ts).
      return { slug, title: config.title.trim() || 'Chat', welcome: [config.aiDisclosure.trim(), config.welcomeMessage.trim()].filter((t) => t !== '').join('\n\n'), issued };
    },

    /**
     * The visitor's own transcript with the agent (their room only, latest messages, oldest
     * first) and whether their last conversation has ended. Without a visitor id, one is issued
     * and the transcript is empty.
     */
    async transcript(rawSlug: string, client: WebClient) {
      const now = clock();
      read(client, now);
      const { account, slug } = await agentOf(rawSlug);
      const visitor = visitorOf(account, client.visitor);
      if (!visitor) return { slug, issued: issue(account, client, now), body: { success: true as const, messages: [], ended: false } };
      const room = await roomRepo.byCounterpart(db, account.id, counterpartOf(visitor));
      if (!room) return { slug, body: { success: true as const, messages: [], ended: false } };
      const messages = await messageRepo.spokenInRoom(db, room.id, limits.transcriptMessages);
      const latest = await conversationRepo.latestInRoom(db, room.id, 'web');
      return {
        slug,
        body: {
          success: true as const,
          messages: messages.map((m) => ({ from: m.direction === 'inbound' ? 'visitor' as const : 'agent' as const, text: m.text, at: toUnixSeconds(m.at) })),
          ended: latest?.ended_at != null,
        },
      };
    },

    /**
     * A message from the visitor: opens (or continues) their 'web' conversation, records it, runs
     * the agent's turn inline on the live configuration and answers the reply. A conversation
     * that opens records the welcome message first (it is what the visitor saw), and says so.
     */
    async send(rawSlug: string, client: WebClient, rawText: unknown) {
      if (typeof rawText !== 'string') throw new Invalid('text must be a string');
      const message = rawText.trim();
      const chars = [...message].length;
      if (chars < 1 || chars > limits.textChars) throw new Invalid(`text must be 1–${limits.textChars} characters long`);
      // Refused attempts (no such chat, no visitor id of ours) count as reads of the address,
      // so a flood of them is limited before it costs more than a lookup.
      const bucket = addressBucket(client.ip);
      const wait = reads.wait(bucket, clock());
      if (wait > 0) throw new TooManyRequests('Too many requests: try again later', wait);
      const found = await agents.bySlug(rawSlug);
      const visitor = found && visitorOf(found.account, client.visitor);
      if (!found || !visitor) {
        reads.take(bucket, clock());
        throw found ? new Unauthorized('This chat session is not known: reload the page') : new NotFound(NOT_FOUND);
      }
      const { account } = found;
      const key = `${account.id}|${visitor}`;
      const admitted = admitAll(clock(), [byVisitor, key], [byAddress, `${account.id}|${bucket}`]);
      if (!admitted.ok) throw new TooManyRequests('Too many messages: wait a little before writing again', admitted.retryAfterMs);
      if (answering.has(key)) throw new Conflict('The agent is still answering your last message');
      answering.add(key);
      try {
        const config = await agents.liveConfig(account);
        const turn = await runInlineTurn(deps, {
          account, config, counterpart: counterpartOf(visitor), message, now: clock(),
          what: 'web chat turn', failMessage: 'The agent could not answer just now. Please try again.',
        });
        return {
          success: true as const, reply: turn.reply, ended: turn.ended,
          ...(turn.welcome !== undefined ? { welcome: turn.welcome } : {}),
          ...(turn.simulated ? { simulated: true as const } : {}),
        };
      } finally {
        answering.delete(key);
      }
    },
  };
}

export type WebChatService = ReturnType<typeof webChatService>;
