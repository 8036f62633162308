// PCM16 sample-rate conversion between the telephone's 8 kHz and what speech engines use:
// 8 ↔ 16 kHz, 24 kHz → 8 kHz (many text-to-speech voices), and any other ratio of integer rates.
//
// How: a rational resampler. Conceptually the input is upsampled by L (zeros between samples),
// low-pass filtered at the high rate, and every M-th sample kept (L/M = to/from, reduced). Only
// the taps that meet a real input sample are computed (polyphase), so a 24 → 8 kHz conversion
// costs one FIR output per output sample. The filter is a windowed sinc (Kaiser window, ~70 dB
// stopband) cut at 0.46 × the lower rate (3.7 kHz for 8 kHz), with a transition band of
// 0.075 × the lower rate (600 Hz: the passband reaches the 3.4 kHz telephone band, the stopband
// starts at Nyquist), so downsampling removes what would alias and upsampling removes images.
// The delay is half the filter: about 4 ms at 8 kHz.
//
// Why not a package: the candidates are WebAssembly builds (libsamplerate, speex) or convert a
// whole buffer at once; calls need a small streaming converter that keeps its filter state across
// 20 ms frames, which is the few dozen lines below.

/** Kaiser window's zeroth-order modified Bessel function, by its power series. */
function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  const q = (x * x) / 4;
  for (let k = 1; k < 50; k++) {
    term *= q / (k * k);
    sum += term;
    if (term < sum * 1e-12) break;
  }
  return sum;
}

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

const STOPBAND_DB = 70;
const CUTOFF = 0.46;
const TRANSITION = 0.075;
/** The most taps a filter may have (a ratio such as 44100 → 8000 needs a long prototype). */
const MAX_TAPS = 1 << 16;

/** The low-pass prototype at the high rate `from × L`, scaled by L (the zeros upsampling adds). */
function designFilter(from: number, to: number, up: number): Float64Array {
  const high = from * up;
  const low = Math.min(from, to);
  const fc = (CUTOFF * low) / high; // cycles per high-rate sample
  const dw = (2 * Math.PI * TRANSITION * low) / high; // transition width, radians per sample
  let n = Math.ceil((STOPBAND_DB - 8) / (2.285 * dw)) + 1;
  n = Math.min(MAX_TAPS, n + (n % 2 === 0 ? 1 : 0)); // odd: a tap at the centre
  const beta = 0.1102 * (STOPBAND_DB - 8.7);
  const mid = (n - 1) / 2;
  const h = new Float64Array(n);
  let sum = 0;
  for (let k = 0; k < n; k++) {
    const t = k - mid;
    const sinc = t === 0 ? 2 * fc : Math.sin(2 * Math.PI * fc * t) / (Math.PI * t);
    const r = t / mid;
    h[k] = sinc * (besselI0(beta * Math.sqrt(Math.max(0, 1 - r * r))) / besselI0(beta));
    sum += h[k];
  }
  for (let k = 0; k < n; k++) h[k] *= up / sum; // unity gain at DC after the zero stuffing
  return h;
}

/**
 * A streaming resampler for one direction of one call: feed it chunks of any length, it returns
 * what is ready and keeps the filter's history for the next chunk. Chunks of 20 ms give 20 ms
 * (a 320-sample 16 kHz frame gives 160 samples at 8 kHz).
 */
export class Resampler {
  readonly from: number;
  readonly to: number;
  private readonly up: number;
  private readonly down: number;
  private readonly taps: Float64Array;
  /** Input samples kept from earlier chunks (the filter reaches this far back). */
  private readonly keep: number;
  private history: Float64Array;
  /** The next output's position at the high rate, counted from history[0]. */
  private pos: number;

  constructor(from: number, to: number) {
    for (const r of [from, to]) {
      if (!Number.isInteger(r) || r < 1000 || r > 192_000) throw new RangeError(`sample rate ${r} is not an integer between 1000 and 192000`);
    }
    this.from = from;
    this.to = to;
    const g = gcd(from, to);
    this.up = to / g;
    this.down = from / g;
    this.taps = from === to ? new Float64Array([1]) : designFilter(from, to, this.up);
    this.keep = Math.ceil(this.taps.length / this.up);
    this.history = new Float64Array(this.keep);
    this.pos = this.keep * this.up;
  }

  /** Resample a chunk; the output's length follows the ratio (±1 across chunk boundaries). */
  process(input: Int16Array): Int16Array {
    if (this.from === this.to) return input.slice();
    const { up, down, taps } = this;
    const buf = new Float64Array(this.history.length + input.length);
    buf.set(this.history);
    for (let i = 0; i < input.length; i++) buf[this.history.length + i] = input[i];
    const out: number[] = [];
    const last = buf.length - 1;
    const n = taps.length;
    let p = this.pos;
    // An output at high-rate position p needs the input samples j with 0 ≤ p − j·L < n.
    while (Math.floor(p / up) <= last) {
      let j = Math.floor(p / up);
      let k = p - j * up;
      let acc = 0;
      for (; k < n && j >= 0; k += up, j--) acc += taps[k] * buf[j];
      out.push(acc);
      p += down;
    }
    const drop = Math.max(0, buf.length - this.keep);
    this.history = buf.slice(drop);
    this.pos = p - drop * up;
    const result = new Int16Array(out.length);
    for (let i = 0; i < out.length; i++) result[i] = Math.max(-32768, Math.min(32767, Math.round(out[i])));
    return result;
  }

  /** Forget the history (a new utterance that must not carry the last one's tail). */
  reset(): void {
    this.history = new Float64Array(this.keep);
    this.pos = this.keep * this.up;
  }
}

/** Resample a whole buffer at once (tests, prerecorded prompts). */
export function resample(input: Int16Array, from: number, to: number): Int16Array {
  return new Resampler(from, to).process(input);
}
