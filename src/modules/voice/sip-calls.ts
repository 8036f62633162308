// Calls whose audio we carry ourselves (SIP): which agent talks, its first words synthesized
// before the call is up, and the call's conversation and voice session once it is
// (session.ts). The SIP side knows this only as the VoiceCalls of src/media/voice-transport.ts.
//
// An inbound call is answered by the agent it is addressed to: a called user part `camp<id>` or
// `<id>` naming an agent of the organization, else the organization's first agent (numbers and
// registrations belong to the organization, not to one agent). docs/voice.md, "SIP calls".
import type { AccountRow, ConversationRow, Db } from '../../db/types.ts';
import { CallRecorder } from '../../media/call-recorder.ts';
import type { InboundRefusal, InboundVoiceCall, PreparedVoiceCall, VoiceCalls, VoiceTransport } from '../../media/voice-transport.ts';
import { normalizePhone } from '../../lib/phone.ts';
import { phoneNumberRepo } from '../numbers/repository.ts';
import type { SpeechToText, TextToSpeech } from '../../speech/types.ts';
import { accountRepo } from '../accounts/repository.ts';
import type { AgentConfig } from '../agents/validation.ts';
import { admissionSettings, voiceSettings, type VoiceSettings } from '../agents/voice-settings.ts';
import { bedFrom, type BackgroundAudio } from './background-audio.ts';
import { CAPABILITIES, callAdmission, callOpening } from './call-policy.ts';
import type { RecordingStore } from './recordings.ts';
import { conversationRepo } from '../conversations/repository.ts';
import { normaliseAddress, type ConversationService, type OpenRequest } from '../conversations/service.ts';
import type { TurnRunner } from '../conversations/turn.ts';
import { noteCallState, speechNote } from './call-state.ts';
import { startVoiceSession, synthesize8k, type VoiceSessionDeps } from './session.ts';
import { screenCall, type VoicemailScreen } from './voicemail.ts';
import type { VoicemailPlan } from './call-policy.ts';

type Log = { warn(obj: object, msg: string): void };

export interface VoiceCallsDeps {
  db: Db;
  conversations: Pick<ConversationService, 'open' | 'recordInbound' | 'end' | 'liveConfig'>;
  turns: Pick<TurnRunner, 'run'>;
  stt: SpeechToText;
  tts: TextToSpeech;
  now: () => number;
  /** Loads agents' backgroundAudio; without it, none plays. */
  background?: BackgroundAudio;
  log?: Log;
  /** Calls are recorded (CALLPLANE_CALL_RECORDING=on): where, and for how long at most. */
  recording?: { store: Pick<RecordingStore, 'fileOf' | 'relative'>; maxMs: number };
  /** The voice activity detectors (speech/detectors.ts); without them, energy. */
  vad?: VoiceSessionDeps['vad'] & { status: { engine: string } };
  /** Where each turn's latency goes (latency.ts). */
  latency?: VoiceSessionDeps['latency'];
  /** The turn time limit (the call policy's VOICE_TURN_TIMEOUT_MS; tests shorten it). */
  turnTimeoutMs?: number;
  /**
   * Where a message left on a voicemail is recorded when the call itself is not (the same store):
   * the recording then starts with the message.
   */
  messageRecording?: { store: Pick<RecordingStore, 'fileOf' | 'relative'>; maxMs: number };
}

/**
 * What the agent announces first, if anything (the call policy's opening rule): autoRecordingNotification
 * `always` announces on every call, `true` when this call is recorded (we cannot tell where the law
 * requires it), `false` never.
 */
export function recordingNotice(config: AgentConfig, recorded: boolean): string | undefined {
  return callOpening(voiceSettings(config), { recorded }).notice?.text;
}

/** The API path of a conversation's recording (GET /api/v2/conversation/{roomId}/{uuid}/recording): the contract's voicemailRecording. */
export function recordingPath(c: Pick<ConversationRow, 'id' | 'account_id' | 'room_id'>): string {
  return `/api/v2/conversation/${c.account_id}:${c.room_id}/${c.id}/recording`;
}

/** How long synthesizing the greeting may hold up answering; past it, the session speaks it itself. */
const GREETING_WAIT_MS = 3000;

/** Reason phrases of the final responses a CNAM rejection may use (RFC 3261 §21, RFC 8197); others say Rejected. */
const SIP_REASONS: Record<number, string> = {
  403: 'Forbidden', 404: 'Not Found', 480: 'Temporarily Unavailable', 486: 'Busy Here', 488: 'Not Acceptable Here',
  600: 'Busy Everywhere', 603: 'Decline', 607: 'Unwanted',
};

export function voiceCalls(deps: VoiceCallsDeps): VoiceCalls {
  const { db } = deps;

  /** The greeting as 8 kHz audio, or undefined when it could not be made in time (the session retries). */
  async function synthesize(text: string | undefined, settings: VoiceSettings): Promise<Int16Array | undefined> {
    if (!text) return undefined;
    const signal = AbortSignal.timeout(GREETING_WAIT_MS);
    try {
      return await synthesize8k(deps.tts, text, { language: settings.language, gender: settings.gender, signal });
    } catch (err) {
      deps.log?.warn({ err: (err as Error).message }, 'voice call: the greeting could not be synthesized ahead');
      return undefined;
    }
  }

  /** Starts recording the call when recording is on; undefined otherwise (or when it cannot start). */
  function record(transport: VoiceTransport, orgId: number, conversationId: string, where = deps.recording): CallRecorder | undefined {
    const file = where?.store.fileOf(orgId, conversationId);
    if (!where || !file) return undefined;
    try {
      return new CallRecorder(transport, { file, maxMs: where.maxMs, log: deps.log });
    } catch (err) {
      deps.log?.warn({ conversation: conversationId, err: (err as Error).message }, 'voice call: the recording could not start');
      return undefined;
    }
  }

  /** Finishes the recording and notes it in the conversation's state, beside what is there. */
  async function keepRecording(conversationId: string, recorder: CallRecorder, where = deps.recording): Promise<void> {
    const r = await recorder.stop();
    if (!r || !where) return;
    await noteCallState(db, conversationId, {
      recording: {
        file: where.store.relative(r.file), durationMs: r.durationMs, bytes: r.bytes,
        channels: { left: 'caller', right: 'agent' }, agentChannel: r.agentChannel, stoppedBy: r.reason,
      },
    }, deps.now());
  }

  async function prepare(agent: AccountRow, call: Omit<OpenRequest, 'agent' | 'channel' | 'fresh' | 'carrierRef'>, opts: { greeting?: string; waitToGreet?: boolean; voicemail?: VoicemailPlan }): Promise<PreparedVoiceCall> {
    const config = await deps.conversations.liveConfig(agent);
    const settings = voiceSettings(config);
    const greeting = callOpening(settings, { taskGreeting: opts.greeting, recorded: false }).greeting?.text;
    const spec = settings.backgroundAudio;
    const background = spec && deps.background
      ? deps.background.load(spec.url).then((pcm) => ({ bed: bedFrom(pcm, spec), afterGreeting: spec.startAfterGreeting }), (err: Error) => {
        deps.log?.warn({ agent: agent.id, err: err.message }, 'voice call: the background audio could not be loaded');
        return null;
      })
      : undefined;
    const greetingAudio = await synthesize(greeting, settings);
    return {
      start(transport: VoiceTransport, { callId }) {
        let screen: VoicemailScreen | undefined;
        const done = (async () => {
          const now = deps.now();
          const opened = await db.transaction().execute((tx) => deps.conversations.open(tx, { ...call, agent, channel: 'sip', fresh: true, carrierRef: callId }, now));
          const c = opened.conversation;
          // Which engines heard and spoke, for the record (offline ones are labelled so).
          await noteCallState(db, c.id, speechNote(transport.kind, deps), now);
          let recorder = record(transport, c.org_id, c.id);
          let where = deps.recording;
          // An outbound call is screened for voicemail from its first frame (docs/voice.md, Voicemail).
          if (opts.voicemail && CAPABILITIES.sip.voicemailDetection === 'audio') {
            screen = screenCall(deps, {
              conversationId: c.id, plan: opts.voicemail, language: settings.language,
              // The message left is recorded: by the call's own recording, else from here.
              onMessage: () => { if (!recorder) { where = deps.messageRecording; recorder = record(transport, c.org_id, c.id, where); } },
            });
          }
          try {
            const opening = callOpening(settings, { taskGreeting: opts.greeting, waitToGreet: opts.waitToGreet, recorded: recorder !== undefined });
            const session = startVoiceSession(deps, {
              transport, conversation: c, room: opened.room, config, settings, opening, capabilities: CAPABILITIES.sip,
              greetingAudio, background, voicemail: screen,
            });
            await session.done;
          } finally {
            if (recorder) {
              await keepRecording(c.id, recorder, where);
              if (screen?.messageLeft) await conversationRepo.setVoicemailRecording(db, c.id, recordingPath(c), deps.now());
            }
          }
        })();
        // The call's end is the session's business; a failure to open is logged and the call hung up.
        const guarded = done.catch(async (err: Error) => {
          deps.log?.warn({ callId, err: err.message }, 'voice call: the session could not start');
          await transport.hangup('failed').catch(() => {});
        });
        return { done: guarded, answeredBy: () => screen?.answeredBy };
      },
    };
  }

  return {
    async inbound(call: InboundVoiceCall): Promise<PreparedVoiceCall | InboundRefusal | null> {
      // A callee that is a held number (docs/numbers.md, Arriving): its agent, if the organization
      // that admitted the call holds it; another organization's number, or one not active, is a 404.
      const number = /^\+?\d{8,15}$/.test(call.callee) ? normalizePhone(call.callee.startsWith('+') ? call.callee : `+${call.callee}`) : undefined;
      const held = number?.ok ? await phoneNumberRepo.findByNumber(db, number.e164) : undefined;
      if (held && (held.org_id !== call.orgId || held.state !== 'active')) {
        return { refuse: { status: 404, reason: 'Not Found', why: held.org_id !== call.orgId ? 'the callee is a number another organization holds' : `the callee is a number in state ${held.state}` } };
      }
      let agent = held?.agent_id != null ? await accountRepo.findById(db, held.agent_id) : undefined;
      if (held && (!agent || agent.kind !== 'agent' || agent.org_id !== call.orgId)) {
        deps.log?.warn({ orgId: call.orgId, number: held.number }, 'inbound SIP call: the agent holding the called number is gone: the organization\'s first agent answers');
        agent = undefined;
      }
      const named = held ? undefined : /^(?:camp)?(\d{1,10})$/i.exec(call.callee)?.[1];
      if (named) agent = await accountRepo.findById(db, Number(named));
      if (!agent || agent.kind !== 'agent' || agent.org_id !== call.orgId) {
        const id = await accountRepo.firstAgentId(db, call.orgId);
        agent = id === null ? undefined : await accountRepo.findById(db, id);
      }
      if (!agent) return null;
      const admission = callAdmission(admissionSettings(await deps.conversations.liveConfig(agent)), { callerName: call.callerName, callerNumber: call.caller });
      if (admission.action === 'reject') {
        return { refuse: { status: admission.code, reason: SIP_REASONS[admission.code] ?? 'Rejected', why: `the caller matched ${admission.rule}` } };
      }
      if (admission.action === 'transfer') {
        // No transfer before answering on SIP here: the call is answered and handed on at once (REFER), without the agent.
        const destination = admission.destination;
        return {
          start(transport, { callId }) {
            const done = transport.transfer(destination).catch(async (err: Error) => {
              deps.log?.warn({ callId, destination, err: err.message }, 'inbound SIP call: the cnamAutoTransferRegex transfer failed');
              await transport.hangup('failed').catch(() => {});
            });
            deps.log?.warn({ callId, destination }, 'inbound SIP call transferred before the agent answered (cnamAutoTransferRegex)');
            return { done };
          },
        };
      }
      const { address, kind } = normaliseAddress(call.caller);
      const prepared = await prepare(agent, { direction: 'inbound', counterpart: address, counterpartKind: kind, displayName: call.callerName ?? null, callerVerified: call.callerVerified === true }, {});
      return admission.ringMs > 0 ? { ...prepared, ringMs: admission.ringMs } : prepared;
    },

    async outbound(call) {
      const agent = await accountRepo.findById(db, call.agentId);
      if (!agent || agent.kind !== 'agent' || agent.org_id !== call.orgId) return null;
      const { address, kind } = normaliseAddress(call.to);
      return prepare(agent, { direction: 'outbound', counterpart: address, counterpartKind: kind, taskId: call.taskId }, {
        greeting: call.greeting, waitToGreet: call.waitToGreet, voicemail: call.voicemail,
      });
    },
  };
}
