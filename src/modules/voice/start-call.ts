// How every call whose audio we carry starts, once, whatever carries it (SIP's RTP in sip-calls.ts,
// Twilio's Media Stream in twilio/media-streams.ts): its conversation state notes the
// transport and engines, the call is recorded when the path can record and recording is on, an
// outbound call is screened for voicemail from its first frame when the path hears it itself
// (call-policy.ts CAPABILITIES), the opening is the policy's, and the voice session runs until the
// call ends, recording what is said through the conversations module's transcript of the call;
// then the recording is kept. The path itself only finds (or opens) the conversation and builds
// the transport.
import fs from 'node:fs';
import type { AnsweredBy, ConversationRow, Db, RoomRow } from '../../db/types.ts';
import { CallRecorder } from '../../media/call-recorder.ts';
import type { AudioBed, VoiceTransport } from '../../media/voice-transport.ts';
import type { SpeechEngines } from '../../speech/registry.ts';
import type { SpeechGrammar } from '../../speech/types.ts';
import type { AgentSettings } from '../agents/settings.ts';
import type { VoiceSettings } from '../agents/voice-settings.ts';
import { conversationRepo } from '../conversations/repository.ts';
import type { ConversationService } from '../conversations/service.ts';
import { callOpening, consentAnswer, type PathCapabilities, type VoicemailPlan } from './call-policy.ts';
import { complianceSettingsOf } from '../compliance/service.ts';
import { noteCallState, noteSpeechChange, noteVoiceChange, speechNote, type SpeechChange } from './call-state.ts';
import { recordingPath, type RecordingStore } from './recordings.ts';
import { startVoiceSession, type VoiceSession, type VoiceSessionDeps, type VoiceSessionInput } from './session.ts';
import { callRecogniser, orgCallSpeaker, type SpeechKeys } from './org-speech.ts';
import type { CallSpeaker } from './speaker.ts';
import { recordCallSpeech } from './speech-meter.ts';
import { screenCall, type VoicemailScreen } from './voicemail.ts';

type Log = { warn(obj: object, msg: string): void; info?(obj: object, msg: string): void };

/** Where recordings go, and for how long at most. */
export interface RecordingTarget { store: Pick<RecordingStore, 'fileOf' | 'relative'>; maxMs: number }

export interface StartCallDeps extends VoiceSessionDeps {
  db: Db;
  /** Where the call's transcript is written (ConversationService.callTranscript). */
  conversations: Pick<ConversationService, 'callTranscript'>;
  /** The streaming recognisers this process has (speech/registry.ts), for agents whose agentSttEngine names one. */
  streaming?: SpeechEngines['streaming'];
  /** The organization's own speech keys (the speech-providers service): they win over the process's (org-speech.ts). */
  speechKeys?: SpeechKeys;
  /** The voice activity detectors, with the engine they run (noted in the call's state). */
  vad?: VoiceSessionDeps['vad'] & { status: { engine: string } };
  log?: Log;
  /** Calls are recorded (CALLPLANE_CALL_RECORDING=on), on paths that can record. */
  recording?: RecordingTarget;
  /** Where a message left on a voicemail is recorded when the call itself is not: the recording then starts with the message. */
  messageRecording?: RecordingTarget;
}

export interface CallStart {
  conversation: ConversationRow;
  room: RoomRow;
  /** The agent's live configuration, for its turns. */
  config: AgentSettings;
  settings: VoiceSettings;
  /** What the path carrying the call can do. */
  capabilities: PathCapabilities;
  /** What the opening rule is given: the task's greeting and waitToGreet; `keysSent` when the path sent the keys on answer itself. */
  opening: { taskGreeting?: string | null; waitToGreet?: boolean; keysSent?: boolean };
  /** The greeting synthesized before the call was up. */
  greetingAudio?: Int16Array;
  background?: Promise<{ bed: AudioBed; afterGreeting: boolean } | null>;
  /** An outbound call's voicemail plan, and where else its verdict is kept. */
  voicemail?: { plan: VoicemailPlan; onVerdict?: (answeredBy: AnsweredBy) => Promise<unknown> };
  grammar?: SpeechGrammar;
  /** The call's voice, when the path chose it already (to synthesize the greeting before answering); chosen here otherwise. */
  speaker?: CallSpeaker;
  /** An agent test's call (voice mode): its turns' tools answered by the scenario's mocks. */
  test?: VoiceSessionInput['test'];
}

export interface StartedCall {
  readonly session: VoiceSession;
  /** Resolves once the call has ended and its recording is kept. */
  readonly done: Promise<void>;
  /** Who answered, when the call is screened and it is decided. */
  answeredBy(): AnsweredBy | undefined;
}

export async function startCall(deps: StartCallDeps, transport: VoiceTransport, call: CallStart): Promise<StartedCall> {
  const c = call.conversation;
  const caps = call.capabilities;
  // Who hears the caller: the agent's agentSttEngine streamed when the organization's key or the
  // process's gives it (Deepgram live or Flux, Google), else our VAD and the configured recogniser
  // (docs/voice.md, Deepgram). Who speaks: the call's voice (speaker.ts, the agent's agentTtsEngine).
  const heard = await callRecogniser(deps, c.org_id, call.config.agentSttEngine);
  const speaker = call.speaker ?? await orgCallSpeaker(deps, call.settings, deps.now, c.org_id);
  // What remote engines hear and say is counted, and recorded for the organization when the call ends.
  const meter = speaker.meter;
  const streaming = heard.streaming && meter.recognising(heard.streaming);
  const stt = meter.transcribing(deps.stt);
  let sttOffline = (streaming ?? stt).offline;
  // Which engines heard and spoke, and whose keys they use, for the record (offline ones are labelled so).
  const refused = heard.refused ? [{ at: deps.now(), from: String(call.config.agentSttEngine), to: stt.name, reason: heard.refused }] : undefined;
  // An agent whose agentSttEngine no key here gives (the contract's default is deepgram) is heard by
  // the configured recogniser: said, as the voice's substitution is.
  const requested = call.config.agentSttEngine ?? undefined;
  const sttSubstituted = requested && !streaming && !heard.refused && requested !== stt.name
    ? `no ${requested} key on this process nor of the organization: ${stt.name} hears the call`
    : undefined;
  await noteCallState(deps.db, c.id, speechNote(transport.kind, {
    ...deps, stt: streaming ?? stt, sttKeySource: heard.source, changes: refused, sttRequested: requested, sttSubstituted,
  }, speaker.note()), deps.now());
  // A streaming recogniser or a provider's voice that fails hands the call to the configured one:
  // each change is recorded, one write after the other.
  let changes = Promise.resolve();
  const noted = (what: string, write: () => Promise<void>) => {
    changes = changes.then(write).catch((err: Error) => deps.log?.warn({ conversation: c.id, err: err.message }, `voice call: the change of ${what} could not be recorded`));
  };
  const onChange = (change: SpeechChange) => {
    sttOffline = deps.stt.offline;
    noted('recogniser', () => noteSpeechChange(deps.db, c.id, change, sttOffline && speaker.note().offline, deps.now()));
  };
  speaker.onChange = (note) => noted('voice', () => noteVoiceChange(deps.db, c.id, note, sttOffline, deps.now()));
  // An organization may have no call recorded at all (keepRecordings; docs/campaigns.md, "Redaction").
  const keep = (await complianceSettingsOf(deps.db, c.org_id)).keepRecordings;
  let where = caps.recording && keep ? deps.recording : undefined;
  let recorder = record(deps, transport, c, where);
  let screen: VoicemailScreen | undefined;
  // An outbound call is screened for voicemail from its first frame (docs/voice.md, Voicemail).
  if (call.voicemail && caps.voicemailDetection === 'audio') {
    screen = screenCall(deps, {
      conversationId: c.id, plan: call.voicemail.plan, language: call.settings.language, onVerdict: call.voicemail.onVerdict,
      // The message left is recorded: by the call's own recording, else from here.
      onMessage: () => {
        if (recorder || !caps.recording || !keep) return;
        where = deps.messageRecording;
        recorder = record(deps, transport, c, where);
      },
    });
  }
  let session: VoiceSession;
  try {
    const opening = callOpening(call.settings, { taskGreeting: call.opening.taskGreeting, waitToGreet: call.opening.waitToGreet, recorded: recorder !== undefined });
    let transcript = deps.conversations.callTranscript({ room: call.room, conversation: c });
    if (opening.consentQuestion) {
      // recordingConsent `ask`: the caller's first words answer the question; a "no" stops the
      // recording and discards what it held, and the answer is recorded on the conversation.
      const plain = transcript;
      let answered = false;
      transcript = {
        ...plain,
        heard: async (text, at) => {
          const r = await plain.heard(text, at);
          if (!answered) {
            answered = true;
            const answer = consentAnswer(text);
            const stopped = answer === 'no' && recorder !== undefined;
            if (stopped) {
              const r0 = await recorder!.stop();
              recorder = undefined;
              if (r0) await fs.promises.unlink(r0.file).catch(() => {});
            }
            await noteCallState(deps.db, c.id, { recordingConsent: { answer, at, recordingStopped: stopped } }, deps.now());
          }
          return r;
        },
      };
    }
    session = startVoiceSession({ ...deps, stt }, {
      transport, transcript, conversation: c, room: call.room, config: call.config, settings: call.settings,
      opening: call.opening.keysSent ? { ...opening, digits: '' } : opening,
      capabilities: caps, grammar: call.grammar, greetingAudio: call.greetingAudio, background: call.background, voicemail: screen, speaker,
      streaming: streaming && { engine: streaming, onChange },
      ...(call.test ? { test: call.test } : {}),
    });
  } catch (err) {
    await recorder?.stop();
    throw err;
  }
  const done = session.done.finally(async () => {
    await changes;
    await recordCallSpeech(deps.db, c.id, meter, deps.now())
      .catch((err: Error) => deps.log?.warn({ conversation: c.id, err: err.message }, 'voice call: its speech use could not be recorded'));
    if (!recorder || !where) return;
    const r = await recorder.stop();
    if (r) {
      await noteCallState(deps.db, c.id, {
        recording: {
          file: where.store.relative(r.file), durationMs: r.durationMs, bytes: r.bytes,
          channels: { left: 'caller', right: 'agent' }, agentChannel: r.agentChannel, stoppedBy: r.reason,
        },
      }, deps.now());
    }
    if (screen?.messageLeft) await conversationRepo.setVoicemailRecording(deps.db, c.id, recordingPath(c), deps.now());
  });
  return { session, done, answeredBy: () => screen?.answeredBy };
}

/** Starts recording the call when `where` is given; undefined otherwise (or when it cannot start). */
function record(deps: StartCallDeps, transport: VoiceTransport, c: ConversationRow, where: RecordingTarget | undefined): CallRecorder | undefined {
  const file = where?.store.fileOf(c.org_id, c.id);
  if (!where || !file) return undefined;
  try {
    return new CallRecorder(transport, { file, maxMs: where.maxMs, log: deps.log });
  } catch (err) {
    deps.log?.warn({ conversation: c.id, err: (err as Error).message }, 'voice call: the recording could not start');
    return undefined;
  }
}
