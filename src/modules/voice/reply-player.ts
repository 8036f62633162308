// The agent's side of a spoken call, for the voice session (session.ts): `CallVoice` queues audio
// on the transport with marks and knows when a mark has been heard; `playReply` speaks one reply
// as the model streams it — its text handed to a `ReplySynthesis`, each piece of audio played with
// a mark, the sentences heard to their end kept in order, the first audio's time, and a barge-in
// that stops it within a frame (its state is the `ReplyHandle`); `answerTurn` is one reply to the
// caller: what they said recorded, the agent's turn run under the turn limit (turn-limit.ts) and
// spoken as it streams, its latency recorded, and the event the call policy decides on next.
//
// Synthesis is a seam: today's (`bySentence`) cuts the streamed text into sentences and synthesizes
// each in turn (TextToSpeech, resampled to 8 kHz); a provider that takes the text itself as it
// streams and sends audio back in chunks (a WebSocket) is another `ReplySynthesis`, under the same
// marks, played sentences and interruption. docs/voice.md, "Voice sessions".
import { setMaxListeners } from 'node:events';
import type { ConversationRow, RoomRow } from '../../db/types.ts';
import type { VoiceTurnLabels } from '../../http/metrics.ts';
import type { VoiceTransport } from '../../media/voice-transport.ts';
import { resample } from '../../speech/resample.ts';
import type { SynthesizeOptions, TextToSpeech } from '../../speech/types.ts';
import type { AgentSettings } from '../agents/settings.ts';
import type { VoiceSettings } from '../agents/voice-settings.ts';
import type { TurnRunner } from '../conversations/turn.ts';
import type { CallEvent } from './call-policy.ts';
import type { TurnLatencies, TurnStamps, VoicePath } from './latency.ts';
import { boundedTurn, turnFailure } from './turn-limit.ts';

const RATE = 8000;
/** How long one spoken word lasts, roughly: interruptionWordCount words of the caller make a barge-in. */
const MS_PER_WORD = 300;

/** Splits streamed text at sentence ends: returns the complete sentences and what is left. */
export function splitSentences(buffer: string): { sentences: string[]; rest: string } {
  const sentences: string[] = [];
  let rest = buffer;
  for (;;) {
    const m = /^(.*?[.!?…])(\s+)/s.exec(rest);
    if (!m) break;
    if (m[1]!.trim()) sentences.push(m[1]!.trim());
    rest = rest.slice(m[0].length);
  }
  return { sentences, rest };
}

/** `text` spoken by `tts`, as the 8 kHz PCM16 calls carry. */
export async function synthesize8k(tts: TextToSpeech, text: string, opts: SynthesizeOptions): Promise<Int16Array> {
  const speech = await tts.synthesize(text, opts);
  return resample(speech.pcm16, speech.sampleRate, RATE);
}

/** Text to the call's 8 kHz audio, in the agent's voice. */
export type Synthesize = (text: string, signal?: AbortSignal) => Promise<Int16Array>;

/** The agent's voice on one call: audio queued with marks, lines synthesized, marks heard. */
export class CallVoice {
  private markSeq = 0;
  constructor(
    readonly transport: VoiceTransport,
    readonly synthesize: Synthesize,
    /** The call is over: nothing more is queued. */
    private readonly over: () => boolean,
  ) {}

  /** Queues audio with a fresh mark. */
  play(pcm: Int16Array): string {
    const mark = `m${++this.markSeq}`;
    this.transport.play(pcm, mark);
    return mark;
  }

  /** `text`'s audio, or undefined when the call ended or `signal` aborted before it was ready. */
  async audioOf(text: string, signal?: AbortSignal): Promise<Int16Array | undefined> {
    if (this.over() || signal?.aborted) return undefined;
    const pcm = await this.synthesize(text, signal);
    return this.over() || signal?.aborted ? undefined : pcm;
  }

  /** Synthesizes `text` and queues it; its mark, or undefined when the call ended meanwhile. */
  async say(text: string): Promise<string | undefined> {
    const pcm = await this.audioOf(text);
    return pcm && this.play(pcm);
  }

  /** Resolves true once the mark's audio has been played; false when the call ends or `signal` aborts first. */
  heard(mark: string, signal?: AbortSignal): Promise<boolean> {
    const { transport } = this;
    return new Promise<boolean>((resolve) => {
      const settle = (played: boolean) => {
        transport.off('played', onPlayed);
        transport.off('ended', onEnded);
        signal?.removeEventListener('abort', onEnded);
        resolve(played);
      };
      const onPlayed = (m: string) => { if (m === mark) settle(true); };
      const onEnded = () => settle(false);
      transport.on('played', onPlayed);
      transport.on('ended', onEnded);
      signal?.addEventListener('abort', onEnded);
    });
  }
}

/** How a reply's text becomes audio while the model streams it. */
export interface ReplySynthesis {
  /** More of the reply's text. */
  write(text: string): void;
  /** The text is complete: what is left of it is spoken too. */
  end(): void;
  /** Settles once everything written so far has been handed out as audio (or dropped: aborted, or its synthesis failed). */
  readonly done: Promise<void>;
}

/** Where a synthesis hands each piece of audio, with the text it speaks. */
export type PieceOut = (text: string, pcm: Int16Array) => void;

/** Today's synthesis: the text cut into sentences, each synthesized after the one before; a sentence that fails is skipped. */
export function bySentence(voice: CallVoice, signal: AbortSignal, out: PieceOut): ReplySynthesis {
  let buffer = '';
  let queue: Promise<void> = Promise.resolve();
  const speak = (sentence: string) => {
    queue = queue.then(async () => {
      const pcm = await voice.audioOf(sentence, signal);
      if (pcm) out(sentence, pcm);
    }).catch(() => {});
  };
  return {
    write(text) {
      const split = splitSentences(buffer + text);
      buffer = split.rest;
      split.sentences.forEach(speak);
    },
    end() {
      if (buffer.trim()) speak(buffer.trim());
      buffer = '';
    },
    get done() { return queue; },
  };
}

/** One reply of the agent as it is spoken. */
export interface ReplyHandle {
  /** Sentences queued, by their mark. */
  readonly sentences: Map<string, string>;
  /** Sentences the caller has heard to their end, in order. */
  readonly played: string[];
  /** When its first audio went out to the transport (the session's clock); undefined while nothing has. */
  firstAudioAt?: number;
  state: 'speaking' | 'done' | 'interrupted';
  /** The recorded reply (set once the turn has recorded it). */
  messageId?: string;
  readonly abort: AbortController;
}

/** A reply being spoken: its text in as the model streams it, its audio out, and how it ends. */
export interface PlayedReply extends ReplySynthesis {
  readonly handle: ReplyHandle;
  /** Resolves once the caller has heard the last of what was queued, or the reply was cut short. */
  heard(): Promise<void>;
  /**
   * Barge-in, when the caller has been talking (`callerMs` of the utterance under way; undefined:
   * not talking) for interruptionWordCount words over this reply heard for
   * interruptionMinimumSpeakingTime — counted from its first audio, not from when the turn started
   * (model time is not speaking): what is queued is cleared (output stops within a frame) and what
   * is still being made is aborted.
   */
  bargeIn(callerMs: number | undefined, rule: Pick<VoiceSettings, 'interruptionWords' | 'interruptionMinimumSpeakingMs'>): void;
  /** The turn failed: what is queued is dropped at once (the apology follows). */
  drop(): void;
}

/** Starts speaking one reply; `firstAudio` is told when its first audio goes out. */
export function playReply(voice: CallVoice, now: () => number, firstAudio: () => void): PlayedReply {
  const abort = new AbortController();
  // One listener per sentence queued (their marks), which a long reply can exceed ten of.
  setMaxListeners(200, abort.signal);
  const handle: ReplyHandle = { sentences: new Map(), played: [], state: 'speaking', abort };
  /** Resolves once the last piece queued so far has been played (listened for as it is queued, so no mark is missed). */
  let lastHeard: Promise<boolean> | undefined;
  const synthesis = bySentence(voice, abort.signal, (text, pcm) => {
    const mark = voice.play(pcm);
    if (handle.firstAudioAt === undefined) {
      handle.firstAudioAt = now();
      firstAudio();
    }
    handle.sentences.set(mark, text);
    const heard = voice.heard(mark, abort.signal);
    lastHeard = heard;
    void heard.then((played) => { if (played && handle.state !== 'interrupted') handle.played.push(text); });
  });
  return {
    handle,
    write: (text) => synthesis.write(text),
    end: () => synthesis.end(),
    get done() { return synthesis.done; },
    async heard() {
      if (lastHeard && handle.state !== 'interrupted') await lastHeard;
    },
    bargeIn(callerMs, rule) {
      if (handle.state !== 'speaking' || callerMs === undefined || handle.firstAudioAt === undefined) return;
      if (callerMs < rule.interruptionWords * MS_PER_WORD || now() - handle.firstAudioAt < rule.interruptionMinimumSpeakingMs) return;
      handle.state = 'interrupted';
      voice.transport.clear();
      abort.abort();
    },
    drop() {
      abort.abort();
      voice.transport.clear();
    },
  };
}

/** What a reply records (the session's CallTranscript). */
export interface ReplyRecord {
  /** The caller's words, as the person's message at `at`. */
  heard(text: string, at: number): Promise<{ id: string }>;
  /** A reply cut short: only `heard` stays, marked interrupted. */
  interrupted(messageId: string, heard: string): Promise<void>;
}

/** One call's replies: who answers, where it is recorded, and its limits. */
export interface ReplyTurns {
  voice: CallVoice;
  turns: Pick<TurnRunner, 'run'>;
  record: ReplyRecord;
  conversation: ConversationRow;
  room: RoomRow;
  /** The agent's live configuration, for its turns. */
  config: AgentSettings;
  /** The turn limit (the call policy's VOICE_TURN_TIMEOUT_MS). */
  limitMs: number;
  now: () => number;
  warn(err: unknown, msg: string): void;
  /** Where each turn's latency goes; without it, nowhere. */
  latency?: Pick<TurnLatencies, 'record'>;
  /** The path and the engines a turn's latency is labelled with (the model's is the turn's own). */
  labels(): Omit<VoiceTurnLabels, 'llm'> & { path: VoicePath };
}

/**
 * The agent's reply to `text` (a heard turn's `stamps` get the first token and first audio):
 * recorded as said, the turn run under the limit and spoken as it streams, heard to its end or cut
 * short; resolves with the event the policy decides on (a failed turn's queued audio is dropped at
 * once, so the apology follows). `playing` is told the reply when it starts, `firstAudio` when its
 * first audio goes out.
 */
export async function answerTurn(t: ReplyTurns, text: string, stamps: TurnStamps | undefined, playing: (reply: PlayedReply) => void, firstAudio: () => void): Promise<CallEvent> {
  const at = t.now();
  const inbound = await t.record.heard(text, at);
  const reply = playReply(t.voice, t.now, firstAudio);
  playing(reply);
  const { handle } = reply;
  let llm: string | null = null;
  let effects: Extract<CallEvent, { kind: 'replied' }>['effects'];
  try {
    const result = await boundedTurn(t.turns, {
      conversation: t.conversation, room: t.room, config: t.config, inbound: { id: inbound.id, text, at }, allowAsync: false, replyStatus: 'success',
      onText: (delta) => {
        if (stamps && stamps.firstTokenAt === undefined && delta !== '') stamps.firstTokenAt = t.now();
        reply.write(delta);
      },
      // The last words go to synthesis as the stream ends, not after the reply is recorded.
      onTextEnd: () => reply.end(),
    }, t.limitMs, handle.abort);
    if (result.kind !== 'reply') throw new Error('the turn waits for an automation answer, which a call cannot');
    handle.messageId = result.messageId;
    llm = result.simulated ? 'simulated' : result.engine;
    reply.end();
    effects = result.effects;
  } catch (err) {
    if (handle.state !== 'interrupted') {
      const failure = turnFailure(err);
      t.warn(err, failure.kind === 'turnTooSlow' ? 'voice session: the turn took too long' : 'voice session: the turn failed');
      reply.drop();
      return failure;
    }
    effects = [];
  }
  await reply.done;
  // The first audio is out (or none will be): the turn's latency, recorded while the reply plays.
  if (stamps && handle.messageId && t.latency) {
    await t.latency.record(t.conversation, handle.messageId, { ...t.labels(), llm }, { ...stamps, firstAudioAt: handle.firstAudioAt });
  }
  // Until the reply has been heard to its end, or the caller cut it short (barge-in aborts).
  await reply.heard();
  if (handle.state !== 'interrupted') {
    handle.state = 'done';
    return { kind: 'replied', effects };
  }
  // Only what the caller heard stays in the transcript (and in the model's history); its effects
  // (an end, a transfer) are dropped: the caller is talking.
  if (handle.messageId) await t.record.interrupted(handle.messageId, handle.played.join(' ') || '…');
  return { kind: 'replied', effects: [] };
}
