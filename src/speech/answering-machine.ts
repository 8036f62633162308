// Answering-machine detection from a call's own audio (docs/voice.md, "Voicemail"): fed the
// answering side's 8 kHz frames from the moment the call is answered, it decides once whether a
// person or a machine answered, and — for a machine — when its greeting has ended (the beep, or the
// silence after the greeting), which is when a message can be left.
//
// Three signals, each cheap per 20 ms frame:
// - how long the answering side speaks without a pause before anyone else does: a person says
//   "hello?" (well under `machineSpeechMs`) and waits (`humanSilenceMs`). A long first utterance
//   alone decides nothing: a person at a front desk says a whole sentence ("Hello, this is Maria
//   from the front desk at Riverside Dental, how can I help you today?", 5–7 s) and then waits, as
//   a machine's greeting is followed by its beep. So after a long utterance the detector waits for
//   what follows: a beep (or a cue phrase) is a machine; silence with neither, `longHumanSilenceMs`
//   of it, is a person waiting for an answer. Speech that goes on to `maxSpeechMs` with no pause of
//   `humanSilenceMs` is a machine reading a message (bounded time, beep or not);
// - the tone that ends a greeting: Goertzel filters on 400–2100 Hz every 25 Hz; a frame is tonal
//   when one bin (or two bins far apart, a two-tone beep) holds most of its energy, and a beep is
//   `beepMinMs` of tonal frames on the same bins;
// - cue phrases in what was recognised ("leave a message", "after the tone"…): the caller of
//   `cue()` decides what a cue is (the call policy's phrases), this only records that one was heard.
//
// Deterministic and counted in samples: the same audio gives the same events however it is cut.
// Each frame costs about 70 Goertzel passes over 160 samples (tens of microseconds).

export type AnsweredBy = 'human' | 'machine' | 'unknown';

export interface AmdOptions {
  /** Hz of the frames (default 8000). */
  sampleRate?: number;
  /**
   * Speech without a pause this long, or longer, is a long greeting (default 2600 ms): a person
   * then needs `longHumanSilenceMs` of silence with no beep to be decided, not `humanSilenceMs`.
   */
  machineSpeechMs?: number;
  /** Silence after a shorter speech that makes it a person waiting for an answer (default 1000 ms). */
  humanSilenceMs?: number;
  /** Silence after a long greeting, with no beep in it, that makes it a person waiting (default 1500 ms). */
  longHumanSilenceMs?: number;
  /** Speech without a pause of `humanSilenceMs` this long is a machine, decided then (default 8000 ms). */
  maxSpeechMs?: number;
  /** Nothing heard this long after answer: `unknown` (default 5000 ms). */
  noSpeechMs?: number;
  /** After a machine's greeting, silence this long ends it when no beep came (default 1500 ms). */
  endSilenceMs?: number;
  /** The longest a machine's greeting is waited for once it is known to be one (default 30 s). */
  maxGreetingMs?: number;
  /** A steady tone this long is a beep (default 160 ms). */
  beepMinMs?: number;
}

export type AmdEvent =
  /** Who answered, once. `atMs` is from the first sample pushed. */
  | { type: 'verdict'; answeredBy: AnsweredBy; reason: 'greeting-length' | 'beep' | 'cue' | 'short-greeting' | 'long-greeting' | 'silence'; atMs: number }
  /** A machine's greeting is over (the beep has stopped, or silence followed it): a message can be left now. */
  | { type: 'greetingEnd'; reason: 'beep' | 'silence' | 'timeout'; atMs: number };

const LOW_HZ = 400;
const HIGH_HZ = 2100;
const STEP_HZ = 25;
/** Share of a frame's energy the tone's bins must hold. */
const PURITY = 0.65;
/** Below this a frame is not heard at all, dBFS. */
const MIN_DBFS = -42;
/** A voiced frame is this far above the quietest recent frame, dB. */
const ABOVE_FLOOR_DB = 9;
/** Voiced frames in a row that start speech (a click is one). */
const START_FRAMES = 3;

export class AnsweringMachineDetector {
  readonly #rate: number;
  readonly #frame: number;
  readonly #machineSpeech: number;
  readonly #humanSilence: number;
  readonly #longHumanSilence: number;
  readonly #maxSpeech: number;
  readonly #noSpeech: number;
  readonly #endSilence: number;
  readonly #maxGreeting: number;
  readonly #beepFrames: number;
  readonly #coeffs: Float64Array;
  #pending: Int16Array = new Int16Array(0);
  /** Samples pushed so far (whole frames). */
  #pos = 0;
  #floorDb = -60;
  readonly #recent: number[] = [];
  #run = 0;
  /** Where the current stretch of speech started (sample), and where its last voiced frame ended. */
  #speechStart: number | undefined;
  #lastVoiced: number | undefined;
  #tone: { bins: number[]; frames: number } | undefined;
  #verdict: AnsweredBy | undefined;
  /** When the machine was known (sample): the greeting is waited for from there. */
  #machineAt = 0;
  /** Where a beep was recognised (sample); its end is the greeting's. */
  #beepAt: number | undefined;
  #ended = false;

  constructor(opts: AmdOptions = {}) {
    this.#rate = opts.sampleRate ?? 8000;
    this.#frame = Math.round(this.#rate / 50);
    const s = (ms: number) => Math.round((ms / 1000) * this.#rate);
    this.#machineSpeech = s(opts.machineSpeechMs ?? 2600);
    this.#humanSilence = s(opts.humanSilenceMs ?? 1000);
    this.#longHumanSilence = s(opts.longHumanSilenceMs ?? 1500);
    this.#maxSpeech = s(opts.maxSpeechMs ?? 8000);
    this.#noSpeech = s(opts.noSpeechMs ?? 5000);
    this.#endSilence = s(opts.endSilenceMs ?? 1500);
    this.#maxGreeting = s(opts.maxGreetingMs ?? 30_000);
    this.#beepFrames = Math.max(1, Math.ceil((opts.beepMinMs ?? 160) / 20));
    const bins: number[] = [];
    for (let f = LOW_HZ; f <= HIGH_HZ; f += STEP_HZ) bins.push(2 * Math.cos((2 * Math.PI * f) / this.#rate));
    this.#coeffs = Float64Array.from(bins);
  }

  /** Who answered, once decided. */
  get verdict(): AnsweredBy | undefined { return this.#verdict; }
  /** How long the answering side has spoken so far in its current stretch of speech, ms (0 before it speaks). */
  get speakingMs(): number {
    return this.#speechStart === undefined || this.#lastVoiced === undefined ? 0 : this.#ms(this.#lastVoiced - this.#speechStart);
  }
  /** Whether a machine's greeting has ended (or nothing more is to be decided). */
  get done(): boolean { return this.#ended; }

  #ms(sample: number): number { return Math.round((sample / this.#rate) * 1000); }

  /** Feeds audio (any length); returns what was decided in it. */
  push(pcm: Int16Array): AmdEvent[] {
    const out: AmdEvent[] = [];
    if (this.#ended) return out;
    let data = pcm;
    if (this.#pending.length > 0) {
      data = new Int16Array(this.#pending.length + pcm.length);
      data.set(this.#pending);
      data.set(pcm, this.#pending.length);
    }
    let i = 0;
    for (; i + this.#frame <= data.length && !this.#ended; i += this.#frame) this.#step(data.subarray(i, i + this.#frame), out);
    this.#pending = this.#ended ? new Int16Array(0) : data.slice(i);
    return out;
  }

  /** A cue phrase was recognised in what the answering side said: a machine. */
  cue(): AmdEvent[] {
    const out: AmdEvent[] = [];
    if (this.#verdict === undefined) this.#decide('machine', 'cue', out);
    return out;
  }

  #decide(answeredBy: AnsweredBy, reason: Extract<AmdEvent, { type: 'verdict' }>['reason'], out: AmdEvent[]): void {
    this.#verdict = answeredBy;
    this.#machineAt = this.#pos;
    out.push({ type: 'verdict', answeredBy, reason, atMs: this.#ms(this.#pos) });
    if (answeredBy !== 'machine') this.#ended = true;
  }

  #end(reason: Extract<AmdEvent, { type: 'greetingEnd' }>['reason'], out: AmdEvent[]): void {
    this.#ended = true;
    out.push({ type: 'greetingEnd', reason, atMs: this.#ms(this.#pos) });
  }

  #step(frame: Int16Array, out: AmdEvent[]): void {
    let energy = 0;
    for (let k = 0; k < frame.length; k++) energy += frame[k]! * frame[k]!;
    const db = 10 * Math.log10(energy / frame.length / (32768 * 32768) + 1e-12);
    this.#recent.push(db);
    if (this.#recent.length > 100) this.#recent.shift();
    this.#floorDb = Math.min(...this.#recent, -30);
    const loud = db > MIN_DBFS && db > this.#floorDb + ABOVE_FLOOR_DB;
    const beep = loud && this.#tonal(frame, energy);
    this.#pos += frame.length;
    const end = this.#pos;

    // A beep ends the greeting where it stops (a message starts after it, as the machine records then).
    if (beep) {
      if (this.#verdict === undefined) this.#decide('machine', 'beep', out);
      this.#beepAt ??= end;
      if (end - this.#beepAt >= this.#rate * 3) this.#end('beep', out);
      return;
    }
    if (this.#beepAt !== undefined) return this.#end('beep', out);
    if (loud) {
      this.#run++;
      if (this.#run >= START_FRAMES && this.#speechStart === undefined) this.#speechStart = end - this.#run * this.#frame;
      if (this.#speechStart !== undefined) this.#lastVoiced = end;
    } else this.#run = 0;

    if (this.#verdict === undefined) {
      if (this.#speechStart === undefined) {
        if (end >= this.#noSpeech) this.#decide('unknown', 'silence', out);
        return;
      }
      const spoken = this.#lastVoiced! - this.#speechStart;
      const quiet = end - this.#lastVoiced!;
      // A long utterance waits for what follows it (a beep, above; a cue, from outside); only speech
      // that never pauses is decided by its length, at the hard maximum.
      if (spoken >= this.#maxSpeech) this.#decide('machine', 'greeting-length', out);
      else if (spoken < this.#machineSpeech && quiet >= this.#humanSilence) this.#decide('human', 'short-greeting', out);
      else if (spoken >= this.#machineSpeech && quiet >= this.#longHumanSilence) this.#decide('human', 'long-greeting', out);
      return;
    }
    // A machine: its greeting ends with a beep (above), a long silence, or at the limit.
    if (this.#verdict === 'machine') {
      const quietSince = this.#lastVoiced ?? this.#machineAt;
      if (end - Math.max(quietSince, this.#machineAt) >= this.#endSilence) this.#end('silence', out);
      else if (end - this.#machineAt >= this.#maxGreeting) this.#end('timeout', out);
    }
  }

  /** Whether this frame is a steady pure tone continuing the last ones long enough to be a beep. */
  #tonal(frame: Int16Array, energy: number): boolean {
    const n = frame.length;
    const powers = new Float64Array(this.#coeffs.length);
    let best = 0;
    for (let b = 0; b < this.#coeffs.length; b++) {
      const c = this.#coeffs[b]!;
      let s1 = 0;
      let s2 = 0;
      for (let k = 0; k < n; k++) {
        const s0 = frame[k]! + c * s1 - s2;
        s2 = s1;
        s1 = s0;
      }
      powers[b] = s1 * s1 + s2 * s2 - c * s1 * s2;
      if (powers[b]! > powers[best]!) best = b;
    }
    // A second tone at least 100 Hz away (two-tone beeps); the bins beside the first are its own leakage.
    let second = -1;
    for (let b = 0; b < powers.length; b++) if (Math.abs(b - best) >= 4 && (second < 0 || powers[b]! > powers[second]!)) second = b;
    // |X|² of a pure tone on a bin is (N·A/2)², its energy N·A²/2: the share is 2|X|²/(N·E).
    const share = (b: number) => (2 * powers[b]!) / (n * energy);
    const one = share(best);
    const bins = one >= PURITY ? [best] : second >= 0 && one + share(second) >= PURITY && share(second) >= 0.2 ? [best, second].sort((a, b) => a - b) : undefined;
    if (!bins) {
      this.#tone = undefined;
      return false;
    }
    const same = this.#tone && this.#tone.bins.length === bins.length && bins.every((b, k) => Math.abs(b - this.#tone!.bins[k]!) <= 1);
    this.#tone = same ? { bins, frames: this.#tone!.frames + 1 } : { bins, frames: 1 };
    return this.#tone.frames >= this.#beepFrames;
  }
}
