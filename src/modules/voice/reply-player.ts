// The agent's side of a spoken call, for the voice session (session.ts): `CallVoice` queues audio
// on the transport with marks and knows when a mark has been heard; `playReply` speaks one reply
// as the model streams it — its text handed to a `ReplySynthesis`, each piece of audio played with
// a mark, the sentences heard to their end kept in order, the first audio's time, and a barge-in
// that stops it within a frame (its state is the `ReplyHandle`); `answerTurn` is one reply to the
// caller: what they said recorded, the agent's turn run under the turn limit (turn-limit.ts) and
// spoken as it streams, its latency recorded, and the event the call policy decides on next;
// `askEarly` is the same turn asked before the caller's turn has surely ended (Flux's eager end of
// turn): the reply made but held, and nothing recorded, until it is committed or withdrawn.
//
// Synthesis is a seam with two sides: `bySentence` cuts the streamed text into sentences and
// synthesizes each in turn (TextToSpeech, resampled to 8 kHz; a voice that streams one synthesis,
// OpenAI-compatible speech, plays each sentence's audio as it arrives); `byStream`, for a call whose voice
// is a streamed engine (speaker.ts), hands each sentence to the provider's stream as soon as the
// model has written it and plays the audio chunks as they arrive (a mark on each), falling back to
// `bySentence`'s way, in the configured voice, when the provider fails. Both run under the same
// marks, played sentences and interruption. docs/voice.md, "Voice sessions" and "Streamed voices".
import { setMaxListeners } from 'node:events';
import type { ConversationRow, RoomRow } from '../../db/types.ts';
import type { VoiceTurnLabels } from '../../http/metrics.ts';
import type { VoiceTransport } from '../../media/voice-transport.ts';
import { resample } from '../../speech/resample.ts';
import type { SynthesisStream, SynthesizeOptions, TextToSpeech } from '../../speech/types.ts';
import type { AgentSettings } from '../agents/settings.ts';
import type { VoiceSettings } from '../agents/voice-settings.ts';
import type { TestTurn, TurnInput, TurnResult, TurnRunner } from '../conversations/turn.ts';
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

/** Text to the call's 8 kHz audio, in the agent's voice; `line`: one of the call's own lines (kept by the greeting cache), not a reply's sentence. */
export type Synthesize = (text: string, signal?: AbortSignal, line?: boolean) => Promise<Int16Array>;

/** A call's voice that can speak a reply as it streams (speaker.ts CallSpeaker). */
export interface StreamingVoice {
  /** Whether replies are streamed now (false once the call fell back to the configured voice). */
  readonly streaming: boolean;
  /** A stream for one sentence of a reply (8 kHz PCM16 chunks), or undefined when replies are not streamed now. */
  openStream(signal: AbortSignal): SynthesisStream | undefined;
  /** A stream failed: the configured voice speaks from now on. */
  streamFailed(err: unknown): void;
  /** One sentence's audio as its pieces arrive (a voice that streams one synthesis), or undefined: synthesize it whole. */
  piecesOf?(text: string, signal: AbortSignal): AsyncIterable<Int16Array> | undefined;
}

/** The agent's voice on one call: audio queued with marks, lines synthesized, marks heard. */
export class CallVoice {
  private markSeq = 0;
  constructor(
    readonly transport: VoiceTransport,
    readonly synthesize: Synthesize,
    /** The call is over: nothing more is queued. */
    private readonly over: () => boolean,
    /** The call's voice when it may stream replies. */
    readonly streamed?: StreamingVoice,
  ) {}

  /** The call is over. */
  get isOver(): boolean { return this.over(); }

  /** A fresh mark, for audio queued now or later. */
  newMark(): string {
    return `m${++this.markSeq}`;
  }

  /** Queues audio with `mark` (a fresh one by default). */
  play(pcm: Int16Array, mark = this.newMark()): string {
    this.transport.play(pcm, mark);
    return mark;
  }

  /** `text`'s audio, or undefined when the call ended or `signal` aborted before it was ready. */
  async audioOf(text: string, signal?: AbortSignal, line = false): Promise<Int16Array | undefined> {
    if (this.over() || signal?.aborted) return undefined;
    const pcm = await this.synthesize(text, signal, line);
    return this.over() || signal?.aborted ? undefined : pcm;
  }

  /** Synthesizes the call's line `text` and queues it; its mark, or undefined when the call ended meanwhile. */
  async say(text: string): Promise<string | undefined> {
    const pcm = await this.audioOf(text, undefined, true);
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

/** Where a synthesis hands its audio: each piece is played (its mark returned), then each sentence names the mark of its last piece. */
export interface PieceOut {
  audio(pcm: Int16Array): string;
  sentence(text: string, lastMark: string): void;
}

/** A reply's text cut into sentences, each spoken by `speak` after the one before; `finish` after the last. */
function sentences(speak: (sentence: string) => Promise<void>, finish?: () => void): ReplySynthesis {
  let buffer = '';
  let queue: Promise<void> = Promise.resolve();
  const add = (sentence: string) => { queue = queue.then(() => speak(sentence)).catch(() => {}); };
  return {
    write(text) {
      const split = splitSentences(buffer + text);
      buffer = split.rest;
      split.sentences.forEach(add);
    },
    end() {
      if (buffer.trim()) add(buffer.trim());
      buffer = '';
      if (finish) queue = queue.then(finish);
    },
    get done() { return queue; },
  };
}

/**
 * One sentence spoken: played piece by piece as its audio arrives where the voice streams one
 * synthesis (the sentence counts as heard with its last piece), else synthesized whole and played;
 * nothing plays once the call ended or `signal` aborted.
 */
async function wholeSentence(voice: CallVoice, sentence: string, signal: AbortSignal, out: PieceOut): Promise<void> {
  if (voice.isOver || signal.aborted) return;
  const pieces = voice.streamed?.piecesOf?.(sentence, signal);
  if (pieces) {
    let last: string | undefined;
    for await (const pcm of pieces) {
      if (signal.aborted || voice.isOver) break;
      last = out.audio(pcm);
    }
    if (last !== undefined && !signal.aborted) out.sentence(sentence, last);
    return;
  }
  const pcm = await voice.audioOf(sentence, signal);
  if (pcm) out.sentence(sentence, out.audio(pcm));
}

/** Today's synthesis: the text cut into sentences, each synthesized after the one before; a sentence that fails is skipped. */
export function bySentence(voice: CallVoice, signal: AbortSignal, out: PieceOut): ReplySynthesis {
  return sentences((sentence) => wholeSentence(voice, sentence, signal, out));
}

/**
 * A streamed voice's synthesis: each sentence, as soon as the model has written it, goes to a
 * provider stream of its own (the first one opened at once, while the model thinks; each next one
 * once the one before has sent its last audio, so a call holds one or two sockets), and its audio
 * chunks are played as they arrive, each with a mark; the sentence counts as heard with its last
 * chunk. Aborting (barge-in, a failed turn) cancels the provider's stream and drops its queued
 * chunks at once. A stream that fails (refused, too slow, dropped mid-sentence) switches the call
 * to the configured voice, which speaks that sentence again and the rest of the reply.
 */
export function byStream(voice: CallVoice, streaming: StreamingVoice, signal: AbortSignal, out: PieceOut): ReplySynthesis {
  let ahead: SynthesisStream | undefined = streaming.openStream(signal);
  const streamed = async (sentence: string): Promise<void> => {
    if (signal.aborted) return;
    const stream = ahead ?? streaming.openStream(signal);
    ahead = undefined;
    if (!stream) return wholeSentence(voice, sentence, signal, out);
    let last: string | undefined;
    try {
      stream.push(sentence);
      stream.end();
      for await (const chunk of stream.chunks) {
        if (signal.aborted || voice.isOver) break;
        last = out.audio(chunk.pcm16);
      }
    } catch (err) {
      if (signal.aborted) return;
      streaming.streamFailed(err);
      return wholeSentence(voice, sentence, signal, out);
    }
    if (last !== undefined && !signal.aborted) out.sentence(sentence, last);
  };
  // A reply without text leaves the stream opened ahead unused.
  return sentences(streamed, () => {
    ahead?.cancel();
    ahead = undefined;
  });
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
  /** A held reply (`held`) goes out: what it made so far is queued now, the rest as it comes. */
  release(): void;
  /** A held reply is not wanted: what is being made is aborted and what it made dropped, before any of it was played. */
  withdraw(): void;
}

/**
 * Starts speaking one reply; `firstAudio` is told when its first audio goes out. A `held` reply is
 * made (synthesized as the model streams) but kept until `release`: nothing of it is played before.
 */
export function playReply(voice: CallVoice, now: () => number, firstAudio: () => void, held = false): PlayedReply {
  const abort = new AbortController();
  // One listener per sentence queued (their marks), which a long reply can exceed ten of.
  setMaxListeners(200, abort.signal);
  const handle: ReplyHandle = { sentences: new Map(), played: [], state: 'speaking', abort };
  /** Resolves once the last sentence queued so far has been played. */
  let lastHeard: Promise<boolean> | undefined;
  // The marks played since the reply began: a sentence's last mark may be played before the
  // sentence is known to have ended (a streamed sentence's last chunk), and still count.
  const playedMarks = new Set<string>();
  const onPlayed = (mark: string) => { playedMarks.add(mark); };
  voice.transport.on('played', onPlayed);
  const stopListening = () => { voice.transport.off('played', onPlayed); };
  /** A held reply's audio, in order, until it is released (then undefined). */
  let kept: Array<{ pcm: Int16Array; mark: string }> | undefined = held ? [] : undefined;
  const send = (pcm: Int16Array, mark: string) => {
    voice.play(pcm, mark);
    if (handle.firstAudioAt === undefined) {
      handle.firstAudioAt = now();
      firstAudio();
    }
  };
  const out: PieceOut = {
    audio(pcm) {
      const mark = voice.newMark();
      if (kept) kept.push({ pcm, mark });
      else send(pcm, mark);
      return mark;
    },
    sentence(text, mark) {
      handle.sentences.set(mark, text);
      const heard = playedMarks.has(mark) ? Promise.resolve(true) : voice.heard(mark, abort.signal);
      lastHeard = heard;
      void heard.then((played) => { if (played && handle.state !== 'interrupted') handle.played.push(text); });
    },
  };
  // The call's voice decides: streamed while it is a streamed engine, sentence by sentence otherwise.
  const synthesis = voice.streamed?.streaming ? byStream(voice, voice.streamed, abort.signal, out) : bySentence(voice, abort.signal, out);
  return {
    handle,
    write: (text) => synthesis.write(text),
    end: () => synthesis.end(),
    get done() { return synthesis.done; },
    async heard() {
      if (lastHeard && handle.state !== 'interrupted') await lastHeard;
      stopListening();
    },
    bargeIn(callerMs, rule) {
      if (handle.state !== 'speaking' || callerMs === undefined || handle.firstAudioAt === undefined) return;
      if (callerMs < rule.interruptionWords * MS_PER_WORD || now() - handle.firstAudioAt < rule.interruptionMinimumSpeakingMs) return;
      handle.state = 'interrupted';
      voice.transport.clear();
      abort.abort();
      stopListening();
    },
    drop() {
      abort.abort();
      voice.transport.clear();
      stopListening();
    },
    release() {
      const pieces = kept ?? [];
      kept = undefined;
      if (abort.signal.aborted || voice.isOver) return;
      for (const p of pieces) send(p.pcm, p.mark);
    },
    withdraw() {
      if (!kept) return;
      kept = [];
      abort.abort();
      stopListening();
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
  /** An agent test's call: tools answered by the scenario's mocks (TestTurn). */
  test?: TestTurn;
}

/** An agent's turn under way: its reply, and the model's run that writes it. */
interface StartedTurn {
  reply: PlayedReply;
  run: Promise<TurnResult>;
  /** When the model's first token came, if it has. */
  firstTokenAt(): number | undefined;
}

/** The agent's turn on what the caller said, run under the limit, its reply spoken (or held) as the model streams it. */
function startTurn(t: ReplyTurns, inbound: NonNullable<TurnInput['inbound']>, firstAudio: () => void, gate?: () => Promise<void>): StartedTurn {
  const reply = playReply(t.voice, t.now, firstAudio, gate !== undefined);
  let firstTokenAt: number | undefined;
  const run = boundedTurn(t.turns, {
    conversation: t.conversation, room: t.room, config: t.config, inbound, allowAsync: false, replyStatus: 'success', gate,
    ...(t.test ? { test: t.test } : {}),
    onText: (delta) => {
      if (firstTokenAt === undefined && delta !== '') firstTokenAt = t.now();
      reply.write(delta);
    },
    // The last words go to synthesis as the stream ends, not after the reply is recorded.
    onTextEnd: () => reply.end(),
  }, t.limitMs, reply.handle.abort);
  run.catch(() => undefined);
  return { reply, run, firstTokenAt: () => firstTokenAt };
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
  const turn = startTurn(t, { id: inbound.id, text, at }, firstAudio);
  playing(turn.reply);
  return finishTurn(t, turn, stamps);
}

/** A reply asked for before the caller's turn has surely ended (Flux's EagerEndOfTurn): see `askEarly`. */
export interface EarlyTurn {
  /** What the caller said, as far as the reply was asked for. */
  readonly text: string;
  /** The turn ended with these very words: recorded as said, the held reply plays at once; then as answerTurn. */
  commit(stamps: TurnStamps | undefined, playing: (reply: PlayedReply) => void): Promise<CallEvent>;
  /** The caller went on (or said something else): the model is aborted and the held reply dropped; nothing was played or recorded. */
  withdraw(): void;
}

/**
 * The agent's turn on `text` asked early: the model runs and its reply is synthesized as it
 * streams, but nothing is played and nothing kept in the conversation (the caller's words, a tool's
 * run, the reply: the turn's `gate`) until `commit`; `withdraw` aborts it all. Its turn limit runs
 * from now. A committed turn's latency stamps are the heard turn's: its first token counts as ready
 * when the transcript was (it came before), its first audio when the held reply went out.
 */
export function askEarly(t: ReplyTurns, text: string, firstAudio: () => void): EarlyTurn {
  let open!: () => void;
  let shut!: (err: Error) => void;
  const committed = new Promise<void>((resolve, reject) => { open = resolve; shut = reject; });
  committed.catch(() => undefined);
  const turn = startTurn(t, { text, at: t.now() }, firstAudio, () => committed);
  return {
    text,
    async commit(stamps, playing) {
      try {
        await t.record.heard(text, t.now());
      } catch (err) {
        this.withdraw();
        throw err;
      }
      open();
      turn.reply.release();
      playing(turn.reply);
      return finishTurn(t, turn, stamps);
    },
    withdraw() {
      shut(new Error('the caller went on speaking'));
      turn.reply.withdraw();
    },
  };
}

/** The rest of a turn the caller is answered with: its result, its latency, the reply heard to its end or cut short. */
async function finishTurn(t: ReplyTurns, turn: StartedTurn, stamps: TurnStamps | undefined): Promise<CallEvent> {
  const { reply } = turn;
  const { handle } = reply;
  let llm: string | null = null;
  let effects: Extract<CallEvent, { kind: 'replied' }>['effects'];
  try {
    const result = await turn.run;
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
  const firstTokenAt = turn.firstTokenAt();
  if (stamps && firstTokenAt !== undefined) stamps.firstTokenAt = Math.max(firstTokenAt, stamps.transcriptAt ?? firstTokenAt);
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
