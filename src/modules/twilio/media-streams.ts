// Spoken conversations over Twilio Media Streams (docs/voice.md, "Twilio Media Streams"). With
// CALLPLANE_TWILIO_VOICE=stream an answered task call is told to <Connect><Stream> to us
// (calls.ts asks twiml() here); Twilio then opens a WebSocket (routes.ts hands it to
// accept()). The stream's `start` must carry a token this deployment minted for that conversation
// and that CallSid (media-stream-token.ts), else the socket is closed (1008) and nothing is touched.
// Then the call starts as every call we carry does (voice/start-call.ts) over a TwilioMediaStream, on the
// process's speech engines and the agent's live configuration. Transfers, hang-ups and digits go
// through Twilio's Calls API with the organization's own Twilio account: sending digits redirects
// the call to <Play digits> and a new stream, which re-attaches to the running session. A task's
// call is screened for voicemail from its own audio (voice/voicemail.ts), as on SIP.
import type { WebSocket } from 'ws';
import type { Config } from '../../config.ts';
import { bool } from '../../db/flags.ts';
import type { Db } from '../../db/types.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { within } from '../../lib/time.ts';
import { readStreamStart, TwilioMediaStream } from '../../providers/twilio/media-stream.ts';
import type { CarrierOptions } from '../../providers/index.ts';
import { connectStream, dial, playDigits, twilioDials, twimlDocument } from '../../providers/twilio/twiml.ts';
import type { SpeechEngines } from '../../speech/registry.ts';
import type { TurnLatencies } from '../voice/latency.ts';
import type { GreetingCache } from '../voice/greeting-cache.ts';
import type { SpeechKeys } from '../voice/org-speech.ts';
import type { SpeechGrammar } from '../../speech/types.ts';
import { accountRepo } from '../accounts/repository.ts';
import { voiceSettings } from '../agents/voice-settings.ts';
import { twilioCarrierOf } from '../numbering-providers/carriers.ts';
import { taskRepo } from '../tasks/repository.ts';
import { CAPABILITIES } from '../voice/call-policy.ts';
import { streamToken, verifyStreamToken, type StreamPurpose } from './media-stream-token.ts';
import { conversationRepo, roomRepo } from '../conversations/repository.ts';
import type { ConversationService } from '../conversations/service.ts';
import type { TurnRunner } from '../conversations/turn.ts';
import type { VoiceSession } from '../voice/session.ts';
import { startCall } from '../voice/start-call.ts';
import { voicemailPlanFor } from '../voice/voicemail.ts';
import { TWILIO_STREAM_PATH, whisperUrl } from '../../providers/twilio/paths.ts';

/** How long a new stream may take to send its `start`. */
export const STREAM_START_TIMEOUT_MS = 5000;
/** WebSocket close code for a stream we refuse (RFC 6455: policy violation). */
export const POLICY_VIOLATION = 1008;

type Log = { warn(obj: object, msg: string): void; info?(obj: object, msg: string): void };

export interface MediaStreamDeps {
  db: Db;
  box: SecretBox;
  config: Pick<Config, 'publicUrl' | 'allowPrivateTargets' | 'simulatedCallSeconds' | 'sipRingSeconds' | 'callMaxSeconds'>;
  conversations: Pick<ConversationService, 'callTranscript' | 'end' | 'liveConfig'>;
  turns: Pick<TurnRunner, 'run'>;
  /** The process's speech engines (src/speech/registry.ts). */
  speech: SpeechEngines;
  /** The call lines already synthesized (voice/greeting-cache.ts), shared with SIP's calls. */
  greetings?: GreetingCache;
  /** The organizations' own speech keys (voice/org-speech.ts); without it, calls use the process's. */
  speechKeys?: SpeechKeys;
  /** Where each turn's latency goes (voice/latency.ts). */
  latency?: TurnLatencies;
  /** Twilio request settings (timeouts), as the task queue's. */
  carrierOptions?: CarrierOptions;
  /** Recognition restricted to these phrases (tests); free speech otherwise. */
  grammar?: SpeechGrammar;
  /** The turn time limit (the call policy's VOICE_TURN_TIMEOUT_MS; tests shorten it). */
  turnTimeoutMs?: number;
  startTimeoutMs?: number;
  now: () => number;
  log?: Log;
}

export function mediaStreams(deps: MediaStreamDeps) {
  const { db } = deps;
  /** The sessions this process runs, by conversation id; a conversation claimed here is not started twice. */
  const live = new Map<string, { transport?: TwilioMediaStream; session?: VoiceSession }>();

  /** wss:// (or ws:// for an http publicUrl) of the stream route. */
  function streamUrl(): string {
    const u = new URL(`${deps.config.publicUrl}${TWILIO_STREAM_PATH}`);
    u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    return u.toString();
  }

  /** The <Connect><Stream> verb of a call's conversation, with a fresh token. */
  function twiml(purpose: StreamPurpose, conversationId: string, callSid: string): string {
    return connectStream(streamUrl(), { token: streamToken(deps.box, purpose, conversationId, callSid, deps.now()) });
  }

  async function carrier(orgId: number) {
    const c = await twilioCarrierOf({ db, box: deps.box, config: deps.config, carrierOptions: deps.carrierOptions }, orgId);
    if (!c) throw new Error('the organization has no twilio provider');
    return c;
  }

  return {
    twiml,

    /**
     * A new Media Stream socket: its `start` is awaited and checked; a call's first stream starts
     * its voice session, the stream after a redirect re-attaches to it. Anything else is closed
     * with 1008 before any conversation is read or written.
     */
    async accept(socket: WebSocket, log: Log): Promise<void> {
      const pending = await readStreamStart(socket, deps.startTimeoutMs ?? STREAM_START_TIMEOUT_MS);
      const start = pending?.start;
      const refuse = (why: string, about: Record<string, unknown> = {}) => {
        pending?.take();
        log.warn({ ...about, why }, 'twilio media stream refused');
        if (socket.readyState === socket.OPEN || socket.readyState === socket.CONNECTING) socket.close(POLICY_VIOLATION, 'policy violation');
      };
      if (!pending || !start) return refuse('no valid start message');
      const grant = verifyStreamToken(deps.box, start.customParameters.token, start.callSid, deps.now());
      if (!grant) return refuse('token missing, expired or not for this call', { callSid: start.callSid });
      const about = { conversation: grant.conversationId, callSid: start.callSid };

      if (grant.purpose === 'resume') {
        const running = live.get(grant.conversationId)?.transport;
        if (!running?.awaitingStream || !running.adopt(socket, start, pending.take())) return refuse('no redirected call of this conversation runs here', about);
        log.info?.(about, 'twilio media stream resumed');
        return;
      }
      if (live.has(grant.conversationId)) return refuse('the call already has a stream', about);
      const entry: { transport?: TwilioMediaStream; session?: VoiceSession } = {};
      live.set(grant.conversationId, entry);
      try {
        const c = await conversationRepo.find(db, grant.conversationId);
        if (!c || c.channel !== 'voice' || c.carrier_ref !== start.callSid || c.ended_at !== null) {
          live.delete(grant.conversationId);
          return refuse('the conversation is not this call\'s, or has ended', about);
        }
        const agent = await accountRepo.findById(db, c.account_id);
        const room = await roomRepo.find(db, c.room_id);
        if (!agent || !room) {
          live.delete(c.id);
          pending.take();
          await deps.conversations.end(c.id, 'failed', 'the agent was deleted');
          socket.close(1011, 'the agent was deleted');
          return;
        }
        const config = await deps.conversations.liveConfig(agent);
        const settings = voiceSettings(config);
        const task = c.task_id ? await taskRepo.findAnyOrg(db, c.task_id) : undefined;
        const callSid = start.callSid;
        const transport = new TwilioMediaStream(socket, start, {
          hangup: async () => { await (await carrier(c.org_id)).endCall(callSid); },
          transfer: async (destination, opts) => {
            // A Twilio call dials phone numbers only (the policy's capabilities refuse the others first).
            if (!twilioDials(destination)) throw new Error('a Twilio call can be transferred to an E.164 number only');
            // Attended: Twilio says the announcement to the destination once it answers, then joins the calls.
            const whisper = opts.announce ? whisperUrl(deps.config.publicUrl, c.id, opts.name) : undefined;
            await (await carrier(c.org_id)).redirectCall(callSid, twimlDocument(dial(destination, whisper)));
          },
          sendDigits: async (digits) => {
            const play = playDigits(digits);
            if (!play) return;
            await (await carrier(c.org_id)).redirectCall(callSid, twimlDocument(play, twiml('resume', c.id, callSid)));
          },
        }, pending.take());
        entry.transport = transport;
        // A task's call is screened for voicemail from its first frame (docs/voice.md, Voicemail):
        // the verdict is kept on the conversation and on the task (its final status then says
        // `voicemail`), before the session acts on it.
        const started = await startCall({
          db, conversations: deps.conversations, turns: deps.turns, stt: deps.speech.stt, tts: deps.speech.tts, voices: deps.speech.voices, greetings: deps.greetings, speechKeys: deps.speechKeys, now: deps.now, log,
          vad: deps.speech.vad, streaming: deps.speech.streaming, latency: deps.latency, turnTimeoutMs: deps.turnTimeoutMs,
        }, transport, {
          conversation: c, room, config, settings, capabilities: CAPABILITIES['media-stream'], grammar: deps.grammar,
          // The keys on answer were in the answer's TwiML already.
          opening: { taskGreeting: task?.greeting, waitToGreet: task ? bool(task.wait_to_greet) : false, keysSent: true },
          voicemail: task && c.direction === 'outbound'
            ? { plan: await voicemailPlanFor(deps, task), onVerdict: (answeredBy) => taskRepo.noteAnsweredBy(db, task.id, answeredBy, deps.now()) }
            : undefined,
        });
        entry.session = started.session;
        log.info?.(about, 'twilio media stream started');
        void started.done.finally(() => live.delete(c.id));
      } catch (err) {
        live.delete(grant.conversationId);
        pending.take();
        entry.transport?.end('the session failed to start');
        log.warn({ ...about, err: (err as Error).message }, 'twilio media stream: starting the session failed');
        if (socket.readyState === socket.OPEN) socket.close(1011, 'internal error');
      }
    },

    /** The transport of a call whose session runs in this process (tests, operations). */
    transportOf(conversationId: string): TwilioMediaStream | undefined {
      return live.get(conversationId)?.transport;
    },

    /** Calls running here (for tests and shutdown). */
    get running(): number {
      return live.size;
    },

    /** Calls running here, as the drain on SIGTERM counts them (src/main.ts, docs/deploy.md). */
    get active(): number {
      return live.size;
    },

    /** The drain time has passed: every streamed call still up hears the agent's closing line and ends. */
    async wrapUpAll(): Promise<void> {
      const sessions = [...live.values()];
      const running = sessions.flatMap((e) => (e.session ? [e.session] : []));
      await Promise.allSettled(running.map((s) => s.wrapUp()));
      await Promise.allSettled(running.map((s) => s.done));
    },

    /** Ends every call this process streams and waits (a few seconds at most) until they are recorded. */
    async close(): Promise<void> {
      const sessions = [...live.values()];
      for (const e of sessions) e.transport?.end('the server is shutting down');
      const all = Promise.all(sessions.map((e) => e.session?.done ?? Promise.resolve()));
      await within(all, 5000, () => undefined);
    },
  };
}

export type MediaStreams = ReturnType<typeof mediaStreams>;
