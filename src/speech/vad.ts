// Energy-based voice activity detection: cuts a caller's audio into utterances for SpeechToText.
//
// The audio (PCM16 mono, 8 kHz by default: telephony) is read in 20 ms frames. A frame is voiced
// when its level is `thresholdDb` above the noise floor and above `minSpeechDbfs`; while speech
// goes on, `hysteresisDb` less is enough, so soft word endings stay in. The noise floor follows
// the line: it is the quietest frame of the last `floorWindowMs` (minimum statistics: speech has
// gaps between words, so the minimum finds the noise under it), so a louder line raises it within
// that window and a steady hum stops counting as speech.
//
// Speech starts after `startFrames` voiced frames in a row (a click is one frame); the utterance
// then includes `preRollMs` before the first of them. It ends after `speakingTimeoutMs` of unvoiced
// frames (the agent's speakingTimeout), or when it reaches `maxUtteranceMs`; its audio keeps
// `tailMs` of the silence after the last voiced frame. Everything is counted in samples, so the
// same input gives the same events: deterministic and testable with synthetic signals.
import { EventEmitter } from 'node:events';
import { MAX_UTTERANCE_SECONDS } from './types.ts';

export interface VadOptions {
  /** Hz (default 8000); frames are 20 ms of it. */
  sampleRate?: number;
  /** Silence that ends the utterance, ms (the agent's speakingTimeout; default 1200). */
  speakingTimeoutMs?: number;
  /** Voiced frames in a row that start speech (default 3: 60 ms). */
  startFrames?: number;
  /** How far above the noise floor a voiced frame is, dB (default 9). */
  thresholdDb?: number;
  /** How much less it takes to stay voiced once speech started, dB (default 3). */
  hysteresisDb?: number;
  /** Nothing quieter than this is speech, dBFS (default -45). */
  minSpeechDbfs?: number;
  /** Where the noise floor starts, dBFS (default -60). */
  initialFloorDbfs?: number;
  /** The window whose quietest frame is the noise floor, ms (default 2000). */
  floorWindowMs?: number;
  /** Audio kept before the first voiced frame, ms (default 200). */
  preRollMs?: number;
  /** Silence kept after the last voiced frame, ms (default 200, at most speakingTimeoutMs). */
  tailMs?: number;
  /** Longest utterance; it ends there (default MAX_UTTERANCE_SECONDS, what transcription accepts). */
  maxUtteranceMs?: number;
}

export interface SpeechStart {
  /** Where the first voiced frame begins, ms from the first sample pushed. */
  atMs: number;
}

export interface SpeechEnd {
  /** The utterance: pre-roll, speech, and up to tailMs of the silence after it. */
  pcm16: Int16Array;
  sampleRate: number;
  /** Its span in the pushed audio, ms. */
  startMs: number;
  endMs: number;
  /** Why it ended: silence for speakingTimeoutMs, the length limit, or flush() (the call ended). */
  reason: 'silence' | 'maxLength' | 'flush';
  /** Where the last voiced frame ends, ms: the end of the caller's speech (endMs less the tail kept). */
  speechEndMs: number;
}

export type VadEvent = ({ type: 'speechStart' } & SpeechStart) | ({ type: 'speechEnd' } & SpeechEnd);

export type VadEvents = { speechStart: [SpeechStart]; speechEnd: [SpeechEnd] };

/** Which detector decides: the energy detector below, or Silero (silero-vad.ts). */
export type VadEngine = 'energy' | 'silero';

/**
 * What a voice session asks of a detector, whichever it is: audio in (any length, 8 kHz for a
 * call), `speechStart` and `speechEnd` out as events. The energy detector decides as the audio is
 * pushed (its events are also returned by push()); a learned one decides a little later, once its
 * model has run, so a session listens to the events rather than reading push()'s answer.
 */
export interface VoiceActivity extends EventEmitter<VadEvents> {
  /** Which detector decides now (a Silero detector that fell behind says `energy` from then on). */
  readonly engine: VadEngine;
  readonly sampleRate: number;
  /** Whether an utterance is under way. */
  readonly inSpeech: boolean;
  /** Feeds audio; returns the events decided during this call (all of them for the energy detector). */
  push(pcm: Int16Array): VadEvent[];
  /** The call ended: an utterance under way ends (`reason: 'flush'`); nothing is decided after it. */
  flush(): VadEvent[];
}

/** The level of a frame in dBFS (digital silence is -96). */
export function frameDbfs(frame: Int16Array): number {
  let sum = 0;
  for (const v of frame) sum += v * v;
  const rms = Math.sqrt(sum / Math.max(1, frame.length));
  return 20 * Math.log10(Math.max(rms, 0.5) / 32768);
}

/** The level test of the energy detector: a frame's level against the noise floor of the line. */
export class EnergyLevels {
  private readonly levels: Float64Array;
  private n = 0;

  constructor(private readonly o: Pick<Required<VadOptions>, 'thresholdDb' | 'hysteresisDb' | 'minSpeechDbfs' | 'initialFloorDbfs' | 'floorWindowMs'>) {
    this.levels = new Float64Array(Math.max(1, Math.round(o.floorWindowMs / 20))).fill(o.initialFloorDbfs);
  }

  get noiseFloorDbfs(): number {
    let min = Infinity;
    for (const l of this.levels) if (l < min) min = l;
    return min;
  }

  /**
   * Takes the next frame into the noise floor and returns how far above its threshold it is, dB
   * (positive: voiced; while speech goes on, above −hysteresisDb is enough: see voiced()).
   */
  observe(frame: Int16Array): number {
    const level = frameDbfs(frame);
    const floor = this.noiseFloorDbfs;
    this.levels[this.n++ % this.levels.length] = level;
    return level - Math.max(floor + this.o.thresholdDb, this.o.minSpeechDbfs);
  }

  /** Whether a frame `margin` dB above the threshold is voiced, given whether speech is under way. */
  voiced(margin: number, speaking: boolean): boolean {
    return margin > -(speaking ? this.o.hysteresisDb : 0);
  }
}

/**
 * Utterances from voiced and unvoiced 20 ms frames, whoever decides which is which: the start
 * after startFrames voiced frames with preRollMs before them, the end after speakingTimeoutMs of
 * unvoiced frames (keeping tailMs) or at maxUtteranceMs.
 */
export class Utterances {
  readonly frameSamples: number;
  /** Frames seen so far (the clock). */
  private frameNo = 0;
  /** Recent frames, for the pre-roll. */
  private readonly recent: Int16Array[] = [];
  private readonly preRollFrames: number;
  private voicedRun = 0;
  private speaking = false;
  private utterance: Int16Array[] = [];
  /** Frame number where the utterance's audio begins, and where its first voiced frame is. */
  private uttStartFrame = 0;
  private firstVoicedFrame = 0;
  private silentRun = 0;

  constructor(
    readonly sampleRate: number,
    private readonly o: Pick<Required<VadOptions>, 'speakingTimeoutMs' | 'startFrames' | 'preRollMs' | 'tailMs' | 'maxUtteranceMs'>,
    private readonly emit: (ev: VadEvent) => void,
  ) {
    this.frameSamples = sampleRate / 50;
    this.preRollFrames = Math.round(o.preRollMs / 20);
  }

  get inSpeech(): boolean {
    return this.speaking;
  }

  private ms(frames: number): number {
    return frames * 20;
  }

  /** The next frame, voiced or not; the events it caused are pushed onto `events` and emitted. */
  frame(frame: Int16Array, voiced: boolean, events: VadEvent[]): void {
    const n = this.frameNo++;
    if (!this.speaking) {
      this.recent.push(frame);
      if (this.recent.length > this.preRollFrames + this.o.startFrames) this.recent.shift();
      this.voicedRun = voiced ? this.voicedRun + 1 : 0;
      if (this.voicedRun >= this.o.startFrames) {
        this.speaking = true;
        this.silentRun = 0;
        this.firstVoicedFrame = n - this.o.startFrames + 1;
        this.utterance = this.recent.splice(0);
        this.uttStartFrame = n - this.utterance.length + 1;
        const ev: VadEvent = { type: 'speechStart', atMs: this.ms(this.firstVoicedFrame) };
        events.push(ev);
        this.emit(ev);
      }
      return;
    }
    this.utterance.push(frame);
    this.silentRun = voiced ? 0 : this.silentRun + 1;
    if (this.ms(this.silentRun) >= this.o.speakingTimeoutMs) this.end('silence', events);
    else if (this.ms(this.utterance.length) >= this.o.maxUtteranceMs) this.end('maxLength', events);
  }

  /** Ends an utterance under way. */
  flush(events: VadEvent[]): void {
    if (this.speaking) this.end('flush', events);
  }

  private end(reason: SpeechEnd['reason'], events: VadEvent[]) {
    // Keep tailMs of the silence that ended it.
    const drop = Math.max(0, this.silentRun - Math.round(this.o.tailMs / 20));
    const frames = this.utterance.slice(0, this.utterance.length - drop);
    const pcm16 = new Int16Array(frames.length * this.frameSamples);
    frames.forEach((f, k) => pcm16.set(f, k * this.frameSamples));
    const ev: VadEvent = {
      type: 'speechEnd', pcm16, sampleRate: this.sampleRate,
      startMs: this.ms(this.uttStartFrame), endMs: this.ms(this.uttStartFrame + frames.length), reason,
      speechEndMs: this.ms(this.uttStartFrame + this.utterance.length - this.silentRun),
    };
    this.speaking = false;
    this.utterance = [];
    this.voicedRun = 0;
    this.silentRun = 0;
    events.push(ev);
    this.emit(ev);
  }
}

/** The options with their defaults, checked (shared by every detector). */
export function vadOptions(opts: VadOptions = {}): Required<VadOptions> {
  const sampleRate = opts.sampleRate ?? 8000;
  if (!Number.isInteger(sampleRate) || sampleRate < 8000 || sampleRate > 48_000 || sampleRate % 50 !== 0) {
    throw new RangeError(`sampleRate must be 8000–48000 Hz in whole 20 ms frames (got ${sampleRate})`);
  }
  const speakingTimeoutMs = opts.speakingTimeoutMs ?? 1200;
  if (!(speakingTimeoutMs >= 20)) throw new RangeError(`speakingTimeoutMs must be at least 20 (got ${speakingTimeoutMs})`);
  return {
    sampleRate,
    speakingTimeoutMs,
    startFrames: Math.max(1, opts.startFrames ?? 3),
    thresholdDb: opts.thresholdDb ?? 9,
    hysteresisDb: opts.hysteresisDb ?? 3,
    minSpeechDbfs: opts.minSpeechDbfs ?? -45,
    initialFloorDbfs: opts.initialFloorDbfs ?? -60,
    floorWindowMs: opts.floorWindowMs ?? 2000,
    preRollMs: opts.preRollMs ?? 200,
    tailMs: Math.min(opts.tailMs ?? 200, speakingTimeoutMs),
    maxUtteranceMs: opts.maxUtteranceMs ?? MAX_UTTERANCE_SECONDS * 1000,
  };
}

/** Cuts `pcm` (any length) into whole frames, keeping the rest for the next call. */
export class Framer {
  private pending: Int16Array;
  private pendingLen = 0;

  constructor(readonly frameSamples: number) {
    this.pending = new Int16Array(frameSamples);
  }

  push(pcm: Int16Array, onFrame: (frame: Int16Array) => void): void {
    let i = 0;
    while (i < pcm.length) {
      const take = Math.min(this.frameSamples - this.pendingLen, pcm.length - i);
      this.pending.set(pcm.subarray(i, i + take), this.pendingLen);
      this.pendingLen += take;
      i += take;
      if (this.pendingLen === this.frameSamples) {
        const frame = this.pending;
        this.pending = new Int16Array(this.frameSamples);
        this.pendingLen = 0;
        onFrame(frame);
      }
    }
  }

  /** Drops a partial frame. */
  reset(): void {
    this.pendingLen = 0;
  }
}

/** The energy detector: every frame is voiced or not by its level alone, decided as it is pushed. */
export class VoiceActivityDetector extends EventEmitter<VadEvents> implements VoiceActivity {
  readonly engine = 'energy' as const;
  readonly sampleRate: number;
  readonly frameSamples: number;
  private readonly energy: EnergyLevels;
  private readonly utterances: Utterances;
  private readonly framer: Framer;

  constructor(opts: VadOptions = {}) {
    super();
    const o = vadOptions(opts);
    this.sampleRate = o.sampleRate;
    this.energy = new EnergyLevels(o);
    this.utterances = new Utterances(o.sampleRate, o, (ev) => this.emitEvent(ev));
    this.frameSamples = this.utterances.frameSamples;
    this.framer = new Framer(this.frameSamples);
  }

  private emitEvent(ev: VadEvent): void {
    if (ev.type === 'speechStart') this.emit('speechStart', { atMs: ev.atMs });
    else {
      const { type: _type, ...end } = ev;
      this.emit('speechEnd', end);
    }
  }

  /** The noise floor now, dBFS. */
  get noiseFloorDbfs(): number {
    return this.energy.noiseFloorDbfs;
  }

  /** Whether an utterance is under way. */
  get inSpeech(): boolean {
    return this.utterances.inSpeech;
  }

  /** Feeds audio of any length; returns the events it caused (also emitted). */
  push(pcm: Int16Array): VadEvent[] {
    const events: VadEvent[] = [];
    this.framer.push(pcm, (frame) => {
      const margin = this.energy.observe(frame);
      this.utterances.frame(frame, this.energy.voiced(margin, this.utterances.inSpeech), events);
    });
    return events;
  }

  /** Ends an utterance under way (the call ended); a partial frame is dropped. */
  flush(): VadEvent[] {
    const events: VadEvent[] = [];
    this.utterances.flush(events);
    this.framer.reset();
    return events;
  }
}
