// Sample-rate conversion of PCM16 mono, whole buffers at a time: espeak-ng speaks at 22050 Hz,
// pocketsphinx listens at 16 kHz, OpenAI's speech comes at 24 kHz and telephony runs at 8 kHz.
//
// Band-limited interpolation (a Hann-windowed sinc): each output sample is a weighted sum of the
// input samples around its position, with the filter's cutoff at the lower of the two Nyquist
// frequencies, so going down (22050 → 8000) filters out what the lower rate cannot carry instead
// of folding it back as aliasing, and going up (8000 → 16000) adds nothing above 4 kHz. The kernel
// is tabulated once and read with linear interpolation (no trigonometry per tap).
//
// It is the platform's one resampler. Most callers convert a whole piece of audio at once (a
// synthesized sentence, an utterance for the recogniser, a decoded file) and rely on its length
// and timing being exact. `StreamResampler` is the same filter over audio that arrives in pieces
// (a synthesizer's answer read as it streams): it keeps the input the kernel still reaches and
// gives each output sample once every input sample it needs has come, so the pieces it returns,
// joined, are sample for sample what resample() makes of the whole.

/** Zero crossings of the sinc on each side of the centre: 16 keeps the passband flat to about 90% of Nyquist. */
const HALF_ZEROS = 16;
/** Table entries per unit of the kernel's argument (per zero crossing). */
const TABLE_STEPS = 512;
/** Cut a little below Nyquist so the transition band's leftovers fall outside the target's band. */
const ROLLOFF = 0.92;

const KERNEL: Float64Array = (() => {
  const n = HALF_ZEROS * TABLE_STEPS + 2;
  const k = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const x = i / TABLE_STEPS;
    const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
    const w = x >= HALF_ZEROS ? 0 : 0.5 + 0.5 * Math.cos((Math.PI * x) / HALF_ZEROS);
    k[i] = sinc * w;
  }
  return k;
})();

function kernelAt(x: number): number {
  const a = Math.abs(x) * TABLE_STEPS;
  const i = Math.floor(a);
  if (i >= KERNEL.length - 1) return 0;
  const f = a - i;
  return KERNEL[i]! * (1 - f) + KERNEL[i + 1]! * f;
}

/** Rates this code accepts (telephony's 8 kHz up to 48 kHz studio audio). */
export const MIN_RATE = 8000;
export const MAX_RATE = 48_000;

function checkRate(name: string, rate: number) {
  if (!Number.isInteger(rate) || rate < MIN_RATE || rate > MAX_RATE) {
    throw new RangeError(`${name} must be an integer number of Hz between ${MIN_RATE} and ${MAX_RATE} (got ${rate})`);
  }
}

/**
 * PCM16 mono at `fromRate` Hz → PCM16 mono at `toRate` Hz (the same duration; length rounded to
 * the nearest sample). Returns the input itself when the rates are equal.
 */
export function resample(pcm: Int16Array, fromRate: number, toRate: number): Int16Array {
  checkRate('fromRate', fromRate);
  checkRate('toRate', toRate);
  if (fromRate === toRate || pcm.length === 0) return pcm;
  const outLen = Math.round((pcm.length * toRate) / fromRate);
  const out = new Int16Array(outLen);
  const f = new Filter(fromRate, toRate);
  for (let n = 0; n < outLen; n++) out[n] = f.sample(pcm, 0, n, pcm.length - 1);
  return out;
}

/** The kernel for one pair of rates: output sample `n` from the input samples around it. */
class Filter {
  /** Input samples per output sample. */
  readonly step: number;
  /** The cutoff relative to the input rate: 1 going up, toRate/fromRate going down. */
  private readonly scale: number;
  /** Input samples on each side that the kernel touches. */
  readonly reach: number;

  constructor(fromRate: number, toRate: number) {
    this.step = fromRate / toRate;
    this.scale = Math.min(1, toRate / fromRate) * ROLLOFF;
    this.reach = HALF_ZEROS / this.scale;
  }

  /** Output sample `n`, from `pcm` holding input samples from absolute index `base`, the last input sample being `last` (absolute). */
  sample(pcm: Int16Array, base: number, n: number, last: number): number {
    const t = n * this.step;
    const lo = Math.max(0, Math.ceil(t - this.reach));
    const hi = Math.min(last, Math.floor(t + this.reach));
    let acc = 0;
    let wsum = 0;
    for (let k = lo; k <= hi; k++) {
      const w = kernelAt((t - k) * this.scale);
      acc += w * pcm[k - base]!;
      wsum += w;
    }
    // Dividing by the weights' sum keeps the gain at 1 (it also steadies the edges, where the
    // kernel runs off the buffer).
    const v = wsum !== 0 ? acc / wsum : 0;
    return v > 32767 ? 32767 : v < -32768 ? -32768 : Math.round(v);
  }
}

/**
 * resample() over audio that arrives in pieces: push() each piece as it comes and play what it
 * returns; end() returns the rest. Joined, the output is exactly resample() of the joined input.
 */
export class StreamResampler {
  private readonly filter: Filter | undefined;
  /** Input kept: absolute samples from `base` on. */
  private held = new Int16Array(0);
  private base = 0;
  /** Input samples received so far. */
  private received = 0;
  /** The next output sample to give. */
  private next = 0;

  constructor(readonly fromRate: number, readonly toRate: number) {
    checkRate('fromRate', fromRate);
    checkRate('toRate', toRate);
    this.filter = fromRate === toRate ? undefined : new Filter(fromRate, toRate);
  }

  /** The output samples that `pcm` completes (none yet, possibly: the kernel waits for what follows). */
  push(pcm: Int16Array): Int16Array {
    if (!this.filter) return pcm;
    if (pcm.length === 0) return pcm;
    const joined = new Int16Array(this.held.length + pcm.length);
    joined.set(this.held);
    joined.set(pcm, this.held.length);
    this.held = joined;
    this.received += pcm.length;
    const f = this.filter;
    const out: number[] = [];
    // Sample n is complete once the last input sample the kernel touches has come.
    while (Math.floor(this.next * f.step + f.reach) <= this.received - 1) {
      out.push(f.sample(this.held, this.base, this.next, this.received - 1));
      this.next++;
    }
    this.forget();
    return Int16Array.from(out);
  }

  /** The input has ended: the output samples left (the whole output is round(input × toRate / fromRate) long). */
  end(): Int16Array {
    if (!this.filter) return new Int16Array(0);
    const total = Math.round((this.received * this.toRate) / this.fromRate);
    const out = new Int16Array(Math.max(0, total - this.next));
    for (let i = 0; i < out.length; i++) out[i] = this.filter.sample(this.held, this.base, this.next + i, this.received - 1);
    this.next = Math.max(this.next, total);
    return out;
  }

  /** Drops the input no output sample still to come can reach. */
  private forget(): void {
    const f = this.filter!;
    const keepFrom = Math.max(0, Math.ceil(this.next * f.step - f.reach));
    if (keepFrom <= this.base) return;
    const drop = Math.min(keepFrom - this.base, this.held.length);
    this.held = this.held.slice(drop);
    this.base += drop;
  }
}
