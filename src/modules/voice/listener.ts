// The caller's side of a spoken call: the transport's audio turned into the caller's turns for the
// voice session (session.ts). The session sees only `Listener` and reports to it through
// `CallerTurns`, so what recognises can change: today's listener (`utteranceListener`) cuts
// utterances with the VAD — a turn ends after the agent's speakingTimeout of silence — and
// transcribes each with the batch SpeechToText. The streaming one (streaming-listener.ts: Deepgram
// live or Flux) implements the same interfaces with the recogniser's end of turn, over the same
// VAD (callerVad), and falls back to this listener's way (transcribeInTurn) when it fails.
// docs/voice.md, "Voice sessions".
import type { SpeechGrammar, SpeechToText } from '../../speech/types.ts';
import { EnergyLevels, vadOptions, VoiceActivityDetector, type SpeechEnd, type VadOptions, type VoiceActivity } from '../../speech/vad.ts';
import type { TurnStamps } from './latency.ts';

const RATE = 8000;

/** A turn of the caller's, recognised. */
export interface HeardTurn {
  text: string;
  /** The turn's latency stamps so far (latency.ts): the caller stopped speaking, the turn was taken as ended, the transcript was ready. */
  stamps: Required<Pick<TurnStamps, 'speechEndedAt' | 'turnEndedAt' | 'transcriptAt'>>;
  /** What ended the turn and what recognised it (the turn's latency record names them): the engines that really heard this turn. */
  engines: { vad: string; stt: string };
}

/** What a listener reports, in order. */
export interface CallerTurns {
  /** The caller started speaking (a barge-in counts from here; a pending silence is not one). */
  speechStart(): void;
  /**
   * The turn seems to have ended with these words (Flux's EagerEndOfTurn; no other recogniser says
   * it): the reply may be prepared, not played. `withdrawn` or the final `heard` follows.
   */
  tentative?(turn: { text: string }): void;
  /** The caller went on speaking after a `tentative` turn (Flux's TurnResumed): that turn is not one. */
  withdrawn?(): void;
  /** The caller's turn, recognised; the listener's next turn waits until this promise settles. */
  heard(turn: HeardTurn): Promise<void>;
  /** A turn with nothing intelligible in it (a cough, the line): not a silence either. */
  unheard(): void;
}

export interface Listener {
  /** Which engines end and recognise the caller's turns now, for each turn's latency record. */
  readonly engines: { vad: string; stt: string };
  /** One frame of the caller's audio (8 kHz). */
  hear(frame: Int16Array): void;
  /** How long the caller has been speaking in the utterance under way, ms of audio; undefined when not speaking. */
  speakingMs(): number | undefined;
  /** The call ended: nothing is heard or reported from now on. */
  stop(): void;
}

export interface ListenerDeps {
  stt: SpeechToText;
  /** The process's voice activity detectors (speech/detectors.ts: Silero, or energy); without it, energy. */
  vad?: { create(opts: VadOptions & { onFallback?: (reason: string) => void }): VoiceActivity };
  now: () => number;
}

export interface UtteranceListenerOptions {
  language: string;
  /** Recognition restricted to these (menus, tests); free speech otherwise. */
  grammar?: SpeechGrammar;
  /** Silence that ends a turn (the agent's speakingTimeout), ms. */
  speakingTimeoutMs: number;
  to: CallerTurns;
  /**
   * Runs a step after the session's step under way: recognition waits its turn there, so a turn's
   * transcript is taken in order with what the session does (its sttMs includes that wait).
   */
  inTurn(step: () => Promise<void>): void;
  /** The Silero detector fell back to the energy detector for this call. */
  onFallback: (reason: string) => void;
  warn(err: unknown, msg: string): void;
}

/** The caller's VAD in step with the frames: speech starts and ends, and how long the caller has been speaking. */
export interface CallerVad {
  readonly engine: string;
  /** Caller audio heard so far, ms (the clock every position here is on). */
  readonly heardMs: number;
  hear(frame: Int16Array): void;
  /** How long the caller has been speaking in the utterance under way, ms of audio; undefined when not speaking. */
  speakingMs(): number | undefined;
  stop(): void;
}

/** Where an utterance of the VAD's ended, as latency stamps: the end of the caller's speech and the VAD's decision. */
export type UtteranceStamps = Pick<HeardTurn['stamps'], 'speechEndedAt' | 'turnEndedAt'>;

/** Runs the process's detector (Silero or energy) over the caller's frames, reporting each start and each utterance. */
export function callerVad(
  deps: ListenerDeps,
  o: Pick<UtteranceListenerOptions, 'speakingTimeoutMs' | 'onFallback'>,
  on: { start(atMs: number): void; end(ev: SpeechEnd, stamps: UtteranceStamps): void },
): CallerVad {
  const vadOpts = { sampleRate: RATE, speakingTimeoutMs: o.speakingTimeoutMs, onFallback: o.onFallback };
  const vad: VoiceActivity = deps.vad ? deps.vad.create(vadOpts) : new VoiceActivityDetector(vadOpts);
  let stopped = false;
  let heardMs = 0; // caller audio pushed so far, ms
  let speechStartMs: number | undefined;
  // Where the last voiced frame (by its energy) ended: how long the caller has spoken counts to
  // there, not through the silence the detector waits for before it ends the utterance, or a short
  // "uh-huh" over the agent would count as 400 ms and the whole speakingTimeout (a false barge-in).
  const levels = new EnergyLevels(vadOptions({ sampleRate: RATE }));
  let lastVoicedMs = 0;

  // The detector's events (the energy detector's as the audio is pushed; Silero's once its model has answered).
  vad.on('speechStart', (ev) => {
    if (stopped) return;
    speechStartMs = ev.atMs;
    on.start(ev.atMs);
  });
  vad.on('speechEnd', (ev) => {
    if (stopped) return;
    speechStartMs = undefined;
    // The caller stopped speaking where the last voiced frame ends: that far behind the audio heard so far.
    const turnEndedAt = deps.now();
    on.end(ev, { speechEndedAt: turnEndedAt - Math.max(0, heardMs - ev.speechEndMs), turnEndedAt });
  });
  return {
    get engine() { return vad.engine; },
    get heardMs() { return heardMs; },
    hear(frame) {
      if (stopped) return;
      heardMs += (frame.length / RATE) * 1000;
      if (levels.voiced(levels.observe(frame), speechStartMs !== undefined)) lastVoicedMs = heardMs;
      vad.push(frame);
    },
    // A detector that hears speech the energy does not (a quiet caller, Silero) counts as before: to now.
    speakingMs: () => (speechStartMs === undefined ? undefined : (lastVoicedMs > speechStartMs ? lastVoicedMs : heardMs) - speechStartMs),
    stop() {
      if (stopped) return;
      stopped = true;
      // The detector stops (a Silero one drops the windows still waiting for the model).
      vad.flush();
    },
  };
}

/** One utterance transcribed by the batch recogniser in turn with the session's steps, and reported (`heard`, or `unheard` when empty). */
export function transcribeInTurn(deps: ListenerDeps, o: UtteranceListenerOptions, vad: string, pcm: Int16Array, stamps: UtteranceStamps, stopped: () => boolean): void {
  o.inTurn(async () => {
    if (stopped()) return;
    const heard = await deps.stt.transcribe(pcm, RATE, { language: o.language, grammar: o.grammar }).catch((err: Error) => {
      o.warn(err, 'voice session: recognition failed');
      return { text: '' };
    });
    if (stopped()) return;
    const text = heard.text.trim();
    if (text) await o.to.heard({ text, stamps: { ...stamps, transcriptAt: deps.now() }, engines: { vad, stt: deps.stt.name } });
    else o.to.unheard();
  });
}

/** Today's listener: the VAD cuts utterances (end of turn after speakingTimeout of silence), the batch recogniser transcribes each. */
export function utteranceListener(deps: ListenerDeps, o: UtteranceListenerOptions): Listener {
  let stopped = false;
  const vad = callerVad(deps, o, {
    start: () => o.to.speechStart(),
    end: (ev, stamps) => transcribeInTurn(deps, o, vad.engine, ev.pcm16, stamps, () => stopped),
  });
  return {
    get engines() { return { vad: vad.engine, stt: deps.stt.name }; },
    hear: (frame) => vad.hear(frame),
    speakingMs: () => vad.speakingMs(),
    stop() {
      stopped = true;
      vad.stop();
    },
  };
}
