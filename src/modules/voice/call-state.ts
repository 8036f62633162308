// A call's conversation state (conversations.state, JSON): what a spoken conversation keeps beside
// its messages. One reader and one writer for every path: the voice session's start notes which
// transport and engines carried the call, a recorded call notes its recording when it stops, and
// Gather keeps the call policy's counters between its requests. Each writes only its own part;
// the rest of what is stored is kept.
import type { Executor } from '../../db/types.ts';
import type { SpeechToText } from '../../speech/types.ts';
import { conversationRepo } from '../conversations/repository.ts';
import { freshCounters, type CallCounters } from './call-policy.ts';
import type { SpeakerNote, VoiceChange } from './speaker.ts';

/**
 * Which engines heard and spoke (`offline` when both ran here), the voice detector's, and the voice
 * that speaks: `voice` (the engine's own id, or `default <gender> <language>`), `streamed` (replies
 * spoken as the model streams them); with agentTtsEngine, `ttsRequested`, and `ttsSubstituted` when
 * the process could not start with it; `ttsChanges` when the voice changed during the call (a
 * provider that failed: from, to, why).
 */
export interface SpeechNote {
  stt: string;
  tts: string;
  offline: boolean;
  vad?: string;
  voice?: string;
  streamed?: boolean;
  ttsRequested?: string;
  ttsSubstituted?: string;
  ttsChanges?: VoiceChange[];
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

export interface CallState {
  /** The voice transport that carried the call (`rtp`, `twilio-media-stream`). */
  transport?: string;
  speech?: SpeechNote;
  recording?: RecordingNote;
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
export function speechNote(transport: string, speech: { stt: SpeechToText; vad?: { status: { engine: string } } }, voice: SpeakerNote): Pick<CallState, 'transport' | 'speech'> {
  return {
    transport,
    speech: {
      stt: speech.stt.name, tts: voice.tts, offline: speech.stt.offline && voice.offline, ...(speech.vad ? { vad: speech.vad.status.engine } : {}),
      voice: voice.voice, streamed: voice.streamed,
      ...(voice.requested ? { ttsRequested: voice.requested } : {}),
      ...(voice.substituted ? { ttsSubstituted: voice.substituted } : {}),
      ...(voice.changes ? { ttsChanges: voice.changes } : {}),
    },
  };
}

/** Writes `change` into the conversation's state, beside what is there (in `db`, which may be the caller's transaction). */
export async function noteCallState(db: Executor, conversationId: string, change: Partial<CallState>, now: number): Promise<void> {
  const row = await conversationRepo.find(db, conversationId);
  if (!row) return;
  await conversationRepo.setState(db, conversationId, JSON.stringify({ ...readCallState(row.state), ...change }), now);
}
