// Sample-rate conversion of PCM16 mono, whole buffers at a time: espeak-ng speaks at 22050 Hz,
// pocketsphinx listens at 16 kHz, OpenAI's speech comes at 24 kHz and telephony runs at 8 kHz.
//
// Band-limited interpolation (a Hann-windowed sinc): each output sample is a weighted sum of the
// input samples around its position, with the filter's cutoff at the lower of the two Nyquist
// frequencies, so going down (22050 → 8000) filters out what the lower rate cannot carry instead
// of folding it back as aliasing, and going up (8000 → 16000) adds nothing above 4 kHz. The kernel
// is tabulated once and read with linear interpolation (no trigonometry per tap).
//
// It is the platform's one resampler. Every caller converts a whole piece of audio at once (a
// synthesized sentence, an utterance for the recogniser, a decoded file) and relies on its length
// and timing being exact. A polyphase streaming resampler that kept its filter state across 20 ms
// frames stood unused in src/media/resample.ts until issue 34 deleted it; a streaming caller
// (a synthesizer's pieces resampled as they arrive) would want one back, from git history.

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
  const step = fromRate / toRate; // input samples per output sample
  // The cutoff relative to the input rate: 1 going up, toRate/fromRate going down.
  const scale = Math.min(1, toRate / fromRate) * ROLLOFF;
  const reach = HALF_ZEROS / scale; // input samples on each side that the kernel touches
  const last = pcm.length - 1;
  for (let n = 0; n < outLen; n++) {
    const t = n * step;
    const lo = Math.max(0, Math.ceil(t - reach));
    const hi = Math.min(last, Math.floor(t + reach));
    let acc = 0;
    let wsum = 0;
    for (let k = lo; k <= hi; k++) {
      const w = kernelAt((t - k) * scale);
      acc += w * pcm[k]!;
      wsum += w;
    }
    // Dividing by the weights' sum keeps the gain at 1 (it also steadies the edges, where the
    // kernel runs off the buffer).
    const v = wsum !== 0 ? acc / wsum : 0;
    out[n] = v > 32767 ? 32767 : v < -32768 ? -32768 : Math.round(v);
  }
  return out;
}
