// A call's conversation state (conversations.state, JSON): what a spoken conversation keeps beside
// its messages. One reader and one writer for every path: the voice session's start notes which
// transport and engines carried the call, a recorded call notes its recording when it stops, and
// Gather keeps the call policy's counters between its requests. Each writes only its own part;
// the rest of what is stored is kept.
import type { Executor } from '../../db/types.ts';
import type { SpeechToText, TextToSpeech } from '../../speech/types.ts';
import { conversationRepo } from '../conversations/repository.ts';
import { freshCounters, type CallCounters } from './call-policy.ts';

/** The engine hearing the caller changed mid-call (a streaming recogniser failed), and why. */
export interface SpeechChange {
  at: number;
  from: string;
  to: string;
  reason: string;
}

/**
 * Which engines heard and spoke (`offline` when both ran here), and the voice detector's; `stt` is
 * the engine hearing the caller now, `changes` how it came to be (none when it never changed).
 */
export interface SpeechNote { stt: string; tts: string; offline: boolean; vad?: string; changes?: SpeechChange[] }

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

/** The part of a state that says which transport and engines carried the call. */
export function speechNote(transport: string, speech: { stt: Pick<SpeechToText, 'name' | 'offline'>; tts: TextToSpeech; vad?: { status: { engine: string } } }): Pick<CallState, 'transport' | 'speech'> {
  return {
    transport,
    speech: { stt: speech.stt.name, tts: speech.tts.name, offline: speech.stt.offline && speech.tts.offline, ...(speech.vad ? { vad: speech.vad.status.engine } : {}) },
  };
}

/** Records that another engine hears the caller from now on (state.speech: its `stt`, whether both engines are now `offline`, and `changes`). */
export async function noteSpeechChange(db: Executor, conversationId: string, change: SpeechChange, offline: boolean, now: number): Promise<void> {
  const row = await conversationRepo.find(db, conversationId);
  if (!row) return;
  const state = readCallState(row.state);
  const was = state.speech;
  const speech: SpeechNote = {
    stt: change.to, tts: was?.tts ?? '', offline,
    ...(was?.vad ? { vad: was.vad } : {}), changes: [...(Array.isArray(was?.changes) ? was.changes : []), change].slice(-20),
  };
  await conversationRepo.setState(db, conversationId, JSON.stringify({ ...state, speech }), now);
}

/** Writes `change` into the conversation's state, beside what is there (in `db`, which may be the caller's transaction). */
export async function noteCallState(db: Executor, conversationId: string, change: Partial<CallState>, now: number): Promise<void> {
  const row = await conversationRepo.find(db, conversationId);
  if (!row) return;
  await conversationRepo.setState(db, conversationId, JSON.stringify({ ...readCallState(row.state), ...change }), now);
}
