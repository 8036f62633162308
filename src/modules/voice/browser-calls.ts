// "Talk to this agent" from the browser (docs/voice.md, "Talking from the browser"): someone who
// may edit an agent calls its STAGING configuration from the console, through the same voice
// session, engines and call policy as a phone call (start-call.ts), over a WebSocket that carries
// PCM16 audio both ways (browser-transport.ts) and the live transcript.
//
// The socket cannot carry the console's header, and a long-lived token never goes in a URL: an
// authenticated POST mints a token for one call — a MAC binding the agent, the caller's account,
// the audio rate and an expiry a minute away, used once — and the socket opens with it. Each
// account has one test call at a time, of at most BROWSER_CALL_MAX_SECONDS. The conversation is
// recorded on the `test` channel (counterpart `web:talk-<account>`) as the staging chat's: kept out
// of customer views, no webhooks, no analysis, its usage test usage.
import crypto from 'node:crypto';
import type { WebSocket } from 'ws';
import { ANCESTOR_COLUMN, type Db } from '../../db/types.ts';
import type { Scope } from '../../http/auth.ts';
import { Conflict, Invalid } from '../../http/errors.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import type { SpeechEngines } from '../../speech/registry.ts';
import type { SpeechGrammar } from '../../speech/types.ts';
import { accountRepo } from '../accounts/repository.ts';
import type { AgentService } from '../agents/service.ts';
import { voiceSettings } from '../agents/voice-settings.ts';
import type { ConversationService } from '../conversations/service.ts';
import type { TurnRunner } from '../conversations/turn.ts';
import type { ModelsService } from '../models/service.ts';
import { BROWSER_RATES, BrowserVoiceTransport, type BrowserRate } from './browser-transport.ts';
import { CAPABILITIES } from './call-policy.ts';
import type { GreetingCache } from './greeting-cache.ts';
import type { TurnLatencies } from './latency.ts';
import type { SpeechKeys } from './org-speech.ts';
import { startCall } from './start-call.ts';

/** How long a minted token opens a call. */
export const BROWSER_TOKEN_TTL_SECONDS = 60;
/** The longest test call from the browser. */
export const BROWSER_CALL_MAX_SECONDS = 600;
/** WebSocket close code for a socket we refuse (RFC 6455: policy violation). */
const POLICY_VIOLATION = 1008;
const MAC_PURPOSE = 'browser-talk';
const TOKEN = /^v1\.(\d{1,15})\.(\d{1,15})\.(8000|16000)\.(\d{1,12})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/;

type Log = { warn(obj: object, msg: string): void; info?(obj: object, msg: string): void };

export interface BrowserCallDeps {
  db: Db;
  box: Pick<SecretBox, 'mac'>;
  agents: Pick<AgentService, 'staged' | 'testTarget'>;
  models: Pick<ModelsService, 'resolve'>;
  conversations: Pick<ConversationService, 'open' | 'callTranscript' | 'end'>;
  turns: Pick<TurnRunner, 'run'>;
  speech: SpeechEngines;
  greetings?: GreetingCache;
  speechKeys?: SpeechKeys;
  latency?: TurnLatencies;
  grammar?: SpeechGrammar;
  turnTimeoutMs?: number;
  /** The longest call, s (BROWSER_CALL_MAX_SECONDS unless a test shortens it). */
  maxSeconds?: number;
  now: () => number;
  log?: Log;
}

const macOf = (box: Pick<SecretBox, 'mac'>, agentId: number, actorId: number, rate: number, exp: number, nonce: string) =>
  box.mac(MAC_PURPOSE, `${agentId}|${actorId}|${rate}|${exp}|${nonce}`);

export function browserCalls(deps: BrowserCallDeps) {
  const { db } = deps;
  const maxSeconds = deps.maxSeconds ?? BROWSER_CALL_MAX_SECONDS;
  /** Accounts with a test call running in this process (one each). */
  const calling = new Map<number, BrowserVoiceTransport | null>();
  /** Tokens used, until they expire: each opens one call. */
  const used = new Map<string, number>();

  function spend(nonce: string, exp: number): boolean {
    const now = deps.now();
    for (const [n, e] of used) if (e * 1000 < now) used.delete(n);
    if (used.has(nonce)) return false;
    used.set(nonce, exp);
    return true;
  }

  return {
    /**
     * POST /api/v2/agent/{agentId}/talk: a token for one test call with the agent's staging
     * configuration, and whether its replies will be SIMULATED (no model configured).
     */
    async mint(scope: Scope, agentId: string, body: { sampleRate?: number }) {
      const rate = body.sampleRate ?? 16000;
      if (!(BROWSER_RATES as readonly number[]).includes(rate)) throw new Invalid(`sampleRate must be one of ${BROWSER_RATES.join(', ')}`);
      const { account, config } = await deps.agents.staged(scope, agentId);
      if (calling.has(scope.actor.id)) throw new Conflict('You already have a test call running: hang it up first');
      const choice = await deps.models.resolve(account.org_id!, config.agentModel);
      const exp = Math.floor(deps.now() / 1000) + BROWSER_TOKEN_TTL_SECONDS;
      const nonce = crypto.randomBytes(16).toString('base64url');
      const token = `v1.${account.id}.${scope.actor.id}.${rate}.${exp}.${nonce}.${macOf(deps.box, account.id, scope.actor.id, rate, exp, nonce)}`;
      const simulated = choice.provider === 'simulated';
      return {
        success: true as const, message: 'Success', token, path: `/api/v2/agent/${account.id}/talk?token=${encodeURIComponent(token)}`,
        expiresAt: exp, sampleRate: rate, maxSeconds, engine: simulated ? 'simulated' : 'model', model: choice.model, simulated,
      };
    },

    /**
     * GET /api/v2/agent/{agentId}/talk?token=…, upgraded: checks the token (once), opens the conversation and
     * runs the voice session until either side hangs up or the time limit passes. A socket without
     * a valid token is closed with 1008 before anything is read or written.
     */
    async accept(socket: WebSocket, token: unknown, pathAgentId: string, log: Log): Promise<void> {
      const refuse = (why: string) => {
        log.warn({ why }, 'browser call refused');
        if (socket.readyState === socket.OPEN || socket.readyState === socket.CONNECTING) socket.close(POLICY_VIOLATION, why);
      };
      const m = typeof token === 'string' && token.length <= 300 ? TOKEN.exec(token) : null;
      if (!m) return refuse('no valid token');
      if (pathAgentId.replace(/^camp/, '') !== m[1]) return refuse('the token is for another agent');
      const [agentId, actorId, rate, exp] = [Number(m[1]), Number(m[2]), Number(m[3]) as BrowserRate, Number(m[4])];
      const expected = Buffer.from(macOf(deps.box, agentId, actorId, rate, exp, m[5]!));
      const given = Buffer.from(m[6]!);
      if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) return refuse('no valid token');
      if (exp * 1000 < deps.now()) return refuse('the token has expired');
      if (!spend(m[5]!, exp)) return refuse('the token has been used');
      if (calling.has(actorId)) return refuse('a test call of this account is running');
      calling.set(actorId, null);
      let transport: BrowserVoiceTransport | undefined;
      try {
        const [actor, agent] = await Promise.all([accountRepo.findById(db, actorId), accountRepo.findById(db, agentId)]);
        if (!actor || !agent || agent.org_id === null) { calling.delete(actorId); return refuse('the agent or your account is gone'); }
        // Still the caller's agent (an account moved or deleted since the mint is refused), and its
        // staging configuration as it is now.
        if (agent.id !== actorId && agent[ANCESTOR_COLUMN[actor.kind]] !== actorId) { calling.delete(actorId); return refuse('the agent is no longer yours to call'); }
        const config = await deps.agents.testTarget(agent, 'staging');
        const settings = voiceSettings(config);
        transport = new BrowserVoiceTransport(socket, rate, deps.now);
        calling.set(actorId, transport);
        const t = transport;
        const at = deps.now();
        const opened = await db.transaction().execute((tx) => deps.conversations.open(tx, {
          agent, channel: 'test', direction: 'inbound', counterpart: `web:talk-${actorId}`, counterpartKind: 'test', fresh: true,
        }, at));
        const choice = await deps.models.resolve(agent.org_id, config.agentModel);
        t.notify({
          type: 'ready', conversationUuid: opened.conversation.id, sampleRate: rate, frameMs: 20, maxSeconds,
          simulated: choice.provider === 'simulated', model: choice.model,
        });
        // What is said is written to the transcript as on any call, and shown to the browser as it is.
        const transcripts = {
          callTranscript: (o: Parameters<ConversationService['callTranscript']>[0]) => {
            const inner = deps.conversations.callTranscript(o);
            return {
              ...inner,
              heard: async (text: string, when: number) => {
                const r = await inner.heard(text, when);
                t.notify({ type: 'transcript', role: 'caller', text, at: when });
                return r;
              },
              interrupted: async (messageId: string, heard: string) => {
                await inner.interrupted(messageId, heard);
                t.notify({ type: 'interrupted', messageId, heard });
              },
              said: async (line: { text: string; kind?: string }, when: number) => {
                await inner.said(line, when);
                t.notify({ type: 'transcript', role: 'agent', text: line.text, at: when, ...(line.kind ? { kind: line.kind } : {}) });
              },
            };
          },
        };
        // The model's replies are recorded by the turn itself: shown once the model has written them
        // (a reply cut short is then shown as what was heard of it).
        const turns: Pick<TurnRunner, 'run'> = {
          run: async (input) => {
            const result = await deps.turns.run(input);
            if (result.kind === 'reply' && result.text.trim() !== '') {
              t.notify({ type: 'transcript', role: 'agent', text: result.text, at: deps.now(), messageId: result.messageId, ...(result.simulated ? { simulated: true } : {}) });
            }
            return result;
          },
        };
        const started = await startCall({
          db, conversations: transcripts, turns, stt: deps.speech.stt, tts: deps.speech.tts, voices: deps.speech.voices, greetings: deps.greetings,
          speechKeys: deps.speechKeys, now: deps.now, log, vad: deps.speech.vad, streaming: deps.speech.streaming, latency: deps.latency, turnTimeoutMs: deps.turnTimeoutMs,
        }, t, {
          conversation: opened.conversation, room: opened.room, config, settings, capabilities: CAPABILITIES.browser, opening: {}, grammar: deps.grammar,
        });
        // The time limit: the agent's closing line, then the hang-up (a call still up a little later is cut).
        const limit = setTimeout(() => {
          void started.session.wrapUp();
          setTimeout(() => t.end('the test call reached its time limit'), 15_000).unref();
        }, maxSeconds * 1000);
        log.info?.({ conversation: opened.conversation.id, agent: agent.id }, 'browser call started');
        void started.done.finally(() => {
          clearTimeout(limit);
          calling.delete(actorId);
        });
      } catch (err) {
        calling.delete(actorId);
        log.warn({ err: (err as Error).message }, 'browser call: starting the session failed');
        if (transport) transport.end('the call could not start');
        else if (socket.readyState === socket.OPEN) socket.close(1011, 'internal error');
      }
    },

    /** Test calls running in this process. */
    get running(): number {
      return calling.size;
    },

    /** Ends every test call (shutdown). */
    close(): void {
      for (const t of calling.values()) t?.end('the server is shutting down');
    },
  };
}

export type BrowserCalls = ReturnType<typeof browserCalls>;
