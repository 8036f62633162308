// A call's conversation state (conversations.state, JSON): what a spoken conversation keeps beside
// its messages. One reader and one writer for every path: the voice session's start notes which
// transport and engines carried the call, a recorded call notes its recording when it stops, and
// Gather keeps the call policy's counters between its requests. Each writes only its own part;
// the rest of what is stored is kept.
import type { Executor } from '../../db/types.ts';
import type { SpeechToText } from '../../speech/types.ts';
import { conversationRepo } from '../conversations/repository.ts';
import type { SpeechKeySource } from '../speech-providers/service.ts';
import { freshCounters, type CallCounters } from './call-policy.ts';

/** The engine hearing the caller, or the voice speaking, changed mid-call (a provider failed), and why. */
export interface SpeechChange {
  at: number;
  from: string;
  to: string;
  reason: string;
}

/**
 * The voice speaking a call (voice/speaker.ts): the engine, its voice (the engine's own id, or
 * `default <gender> <language>`), whether replies are streamed and whether it runs here; with
 * agentTtsEngine, what was asked for, why the call could not start with it, and each change since.
 */
export interface VoiceNote {
  tts: string;
  voice: string;
  streamed: boolean;
  offline: boolean;
  requested?: string;
  substituted?: string;
  changes?: SpeechChange[];
  /** Whose key a remote voice uses (the organization's or the process's). */
  keySource?: SpeechKeySource;
}

/**
 * Which engines heard and spoke (`offline` when both run here), and the voice detector's; `stt` is
 * the engine hearing the caller now, `changes` how it came to be (none when it never changed). The
 * voice: `tts` (the engine speaking now), `voice`, `streamed`; with agentTtsEngine `ttsRequested`,
 * `ttsSubstituted` when the call could not start with it, `ttsChanges` when it changed mid-call.
 */
export interface SpeechNote {
  stt: string;
  tts: string;
  offline: boolean;
  vad?: string;
  changes?: SpeechChange[];
  voice?: string;
  streamed?: boolean;
  ttsRequested?: string;
  ttsSubstituted?: string;
  ttsChanges?: SpeechChange[];
  /** Whose key the remote recogniser the call started with uses: the organization's own or the process's (never the key). */
  sttKeySource?: SpeechKeySource;
  /** The agent's agentSttEngine, and why the call is not heard by it when it is not (no key for it here). */
  sttRequested?: string;
  sttSubstituted?: string;
  /** Whose key the remote voice the call started with uses. */
  ttsKeySource?: SpeechKeySource;
}

/** A call's recording on disk (voice/recordings.ts), as it stopped. */
export interface RecordingNote {
  /** Relative to the recordings folder. */
  file: string;
  durationMs: number;
  bytes: number;
  channels: { left: 'caller'; right: 'agent' };
  agentChannel: unknown;
  stoppedBy: unknown;
}

/** What a call used of remote speech providers, `vendor:unit` → amount (audio seconds, characters), noted when it was recorded for billing (speech-meter.ts). */
export type SpeechUsageNote = Record<string, number>;

export interface CallState {
  /** The voice transport that carried the call (`rtp`, `twilio-media-stream`). */
  transport?: string;
  speech?: SpeechNote;
  recording?: RecordingNote;
  /** Set once the call's speech use has been counted into the usage rollups (never counted twice). */
  speechUsage?: SpeechUsageNote;
  /** recordingConsent `ask`: how the caller answered (consentAnswer) and whether the recording was stopped and discarded. */
  recordingConsent?: { answer: 'yes' | 'no' | 'unclear'; at: number; recordingStopped: boolean };
  /** The call policy's counters, on Gather (kept between its requests). */
  noResponse?: number;
  failures?: number;
}

/** A stored state; anything that is not a JSON object reads as an empty one. */
export function readCallState(json: string | null | undefined): CallState {
  try {
    const parsed: unknown = JSON.parse(json || '{}');
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as CallState;
  } catch { /* a state that is not JSON is replaced */ }
  return {};
}

/** The policy's counters kept in a state (fresh ones when there are none, or they are not counts). */
export function countersOf(state: CallState): CallCounters {
  const n = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : 0);
  return { ...freshCounters(), noResponse: n(state.noResponse), failures: n(state.failures) };
}

/** The part of a state that says which transport and engines carried the call; `voice` is the call's speaker's note. */
export function speechNote(
  transport: string,
  speech: {
    stt: Pick<SpeechToText, 'name' | 'offline'>; vad?: { status: { engine: string } }; sttKeySource?: SpeechKeySource; changes?: SpeechChange[];
    sttRequested?: string; sttSubstituted?: string;
  },
  voice: VoiceNote,
): Pick<CallState, 'transport' | 'speech'> {
  return {
    transport,
    speech: {
      stt: speech.stt.name, offline: speech.stt.offline && voice.offline, ...(speech.vad ? { vad: speech.vad.status.engine } : {}),
      ...(speech.changes?.length ? { changes: speech.changes } : {}),
      ...(speech.sttKeySource ? { sttKeySource: speech.sttKeySource } : {}),
      ...(speech.sttRequested ? { sttRequested: speech.sttRequested } : {}),
      ...(speech.sttSubstituted ? { sttSubstituted: speech.sttSubstituted } : {}),
      ...voiceFields(voice),
    },
  };
}

/** The voice's part of state.speech. */
function voiceFields(voice: VoiceNote): Pick<SpeechNote, 'tts' | 'voice' | 'streamed' | 'ttsRequested' | 'ttsSubstituted' | 'ttsChanges' | 'ttsKeySource'> {
  return {
    tts: voice.tts, voice: voice.voice, streamed: voice.streamed,
    ...(voice.keySource ? { ttsKeySource: voice.keySource } : {}),
    ...(voice.requested ? { ttsRequested: voice.requested } : {}),
    ...(voice.substituted ? { ttsSubstituted: voice.substituted } : {}),
    ...(voice.changes ? { ttsChanges: voice.changes.slice(-20) } : {}),
  };
}

/** Records the voice speaking from now on (state.speech: its fields, and whether both engines now run here), beside who hears. */
export async function noteVoiceChange(db: Executor, conversationId: string, voice: VoiceNote, sttOffline: boolean, now: number): Promise<void> {
  const row = await conversationRepo.find(db, conversationId);
  if (!row) return;
  const state = readCallState(row.state);
  const speech: SpeechNote = { stt: state.speech?.stt ?? '', ...state.speech, ...voiceFields(voice), offline: sttOffline && voice.offline };
  await conversationRepo.setState(db, conversationId, JSON.stringify({ ...state, speech }), now);
}

/** Records that another engine hears the caller from now on (state.speech: its `stt`, whether both engines are now `offline`, and `changes`). */
export async function noteSpeechChange(db: Executor, conversationId: string, change: SpeechChange, offline: boolean, now: number): Promise<void> {
  const row = await conversationRepo.find(db, conversationId);
  if (!row) return;
  const state = readCallState(row.state);
  const was = state.speech;
  const speech: SpeechNote = {
    ...was, stt: change.to, tts: was?.tts ?? '', offline,
    changes: [...(Array.isArray(was?.changes) ? was.changes : []), change].slice(-20),
  };
  await conversationRepo.setState(db, conversationId, JSON.stringify({ ...state, speech }), now);
}

/** Writes `change` into the conversation's state, beside what is there (in `db`, which may be the caller's transaction). */
export async function noteCallState(db: Executor, conversationId: string, change: Partial<CallState>, now: number): Promise<void> {
  const row = await conversationRepo.find(db, conversationId);
  if (!row) return;
  await conversationRepo.setState(db, conversationId, JSON.stringify({ ...readCallState(row.state), ...change }), now);
}
