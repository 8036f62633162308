// G.711 and resampling: a tone through μ-law and A-law keeps its shape, resampling keeps a tone's
// frequency, and downsampling removes what would alias.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeG711, encodeG711, g711Codec, g711Silence } from '../../src/media/g711.ts';
import { FRAME_SAMPLES, pcm16FromBytes, pcm16ToBytes } from '../../src/media/pcm.ts';
import { resample, Resampler } from '../../src/media/resample.ts';

function tone(freq: number, rate: number, seconds: number, amplitude = 10_000): Int16Array {
  const out = new Int16Array(Math.round(rate * seconds));
  for (let i = 0; i < out.length; i++) out[i] = Math.round(amplitude * Math.sin((2 * Math.PI * freq * i) / rate));
  return out;
}
function rms(a: ArrayLike<number>, from = 0, to = a.length): number {
  let s = 0;
  for (let i = from; i < to; i++) s += a[i] * a[i];
  return Math.sqrt(s / Math.max(1, to - from));
}
/** Sign changes per second, between `skip` samples at each end (the filter's start and end). */
function crossingsPerSecond(a: Int16Array, rate: number, skip: number): number {
  let n = 0;
  for (let i = skip + 1; i < a.length - skip; i++) if ((a[i - 1] < 0) !== (a[i] < 0)) n++;
  return n / ((a.length - 2 * skip - 1) / rate);
}
const db = (ratio: number) => 20 * Math.log10(ratio);
/** The amplitude of one frequency in a signal (Goertzel). */
function level(a: ArrayLike<number>, freq: number, rate: number): number {
  const w = (2 * Math.PI * freq) / rate;
  let s1 = 0;
  let s2 = 0;
  for (let i = 0; i < a.length; i++) [s1, s2] = [a[i] + 2 * Math.cos(w) * s1 - s2, s1];
  return (2 * Math.sqrt(Math.max(0, s1 * s1 + s2 * s2 - 2 * Math.cos(w) * s1 * s2))) / a.length;
}

describe('G.711', () => {
  for (const codec of ['PCMU', 'PCMA'] as const) {
    it(`${codec}: a 440 Hz tone round-trips with a small error, one byte per sample`, () => {
      const x = tone(440, 8000, 1);
      const bytes = encodeG711(codec, x);
      assert.equal(bytes.length, x.length);
      const y = decodeG711(codec, bytes);
      const err = new Float64Array(x.length).map((_, i) => x[i] - y[i]);
      // Companding keeps about 38 dB signal-to-noise on a loud tone.
      const snr = db(rms(x) / rms(err));
      assert.ok(snr > 30, `${codec} SNR ${snr.toFixed(1)} dB`);
      assert.ok(Math.abs(rms(y) / rms(x) - 1) < 0.02);
      // Quiet signals keep their shape too (a logarithmic code's point).
      const quiet = tone(440, 8000, 0.5, 200);
      const qOut = decodeG711(codec, encodeG711(codec, quiet));
      const qErr = new Float64Array(quiet.length).map((_, i) => quiet[i] - qOut[i]);
      assert.ok(db(rms(quiet) / rms(qErr)) > 20);
    });

    it(`${codec}: silence encodes to the silence code, and every byte decodes`, () => {
      assert.ok(encodeG711(codec, new Int16Array(FRAME_SAMPLES)).every((b) => b === g711Silence(codec)));
      const all = decodeG711(codec, Uint8Array.from({ length: 256 }, (_, i) => i));
      assert.equal(all.length, 256);
      assert.ok(all.every((s) => s >= -32768 && s <= 32767));
      // Extremes clip instead of wrapping.
      const ends = decodeG711(codec, encodeG711(codec, Int16Array.from([32767, -32768])));
      assert.ok(ends[0] > 30_000 && ends[1] < -30_000);
    });
  }

  it('knows the codecs by SDP name, in any case', () => {
    assert.deepEqual(['pcmu', 'PCMA', 'G722', ''].map(g711Codec), ['PCMU', 'PCMA', null, null]);
  });

  it('converts s16le bytes at any offset', () => {
    const x = Int16Array.from([0, 1, -1, 32767, -32768]);
    const bytes = pcm16ToBytes(x);
    const shifted = Buffer.concat([Buffer.from([9]), bytes]).subarray(1);
    assert.deepEqual([...pcm16FromBytes(shifted)], [...x]);
    assert.equal(pcm16FromBytes(Buffer.from([1, 2, 3])).length, 1);
  });
});

describe('resampling', () => {
  it('keeps a 1 kHz tone at 1 kHz and at its level: 8 → 16, 16 → 8, 24 → 8 kHz', () => {
    for (const [from, to] of [[8000, 16000], [16000, 8000], [24000, 8000], [8000, 24000], [24000, 16000]]) {
      const x = tone(1000, from, 1);
      const y = resample(x, from, to);
      assert.ok(Math.abs(y.length - to) <= 1, `${from} → ${to}: ${y.length} samples for one second`);
      const skip = to / 50; // the filter's delay at each end
      const f = crossingsPerSecond(y, to, skip) / 2;
      assert.ok(Math.abs(f - 1000) < 5, `${from} → ${to}: ${f} Hz`);
      assert.ok(Math.abs(db(rms(y, skip, y.length - skip) / rms(x)) ) < 0.2, `${from} → ${to}: level`);
    }
  });

  it('keeps the telephone band (300–3400 Hz) flat going down to 8 kHz', () => {
    for (const f of [300, 2000, 3400]) {
      const x = tone(f, 16000, 0.5);
      const y = resample(x, 16000, 8000);
      assert.ok(Math.abs(db(rms(y, 100, y.length - 100) / rms(x))) < 0.5, `${f} Hz`);
    }
  });

  it('attenuates a 3.9 kHz tone going to 8 kHz, and removes what would alias', () => {
    for (const from of [16000, 24000]) {
      const near = resample(tone(3900, from, 0.5), from, 8000);
      assert.ok(db(rms(near, 100, near.length - 100) / rms(tone(3900, from, 0.5))) < -20, `3.9 kHz from ${from}`);
      // 5 kHz would fold to 3 kHz, 6.5 kHz to 1.5 kHz: both must be gone.
      for (const f of [5000, 6500]) {
        const y = resample(tone(f, from, 0.5), from, 8000);
        assert.ok(db(rms(y, 100, y.length - 100) / 10_000) < -60, `${f} Hz from ${from}`);
      }
    }
    // Upsampling leaves no image above the old Nyquist: 3 kHz at 8 kHz mirrors to 5 kHz at 16 kHz.
    const up = resample(tone(3000, 8000, 0.5), 8000, 16000);
    const body = up.subarray(200, up.length - 200);
    assert.ok(db(level(body, 5000, 16000) / level(body, 3000, 16000)) < -60);
  });

  it('streams: 20 ms chunks give the same samples as one buffer, and 20 ms out per 20 ms in', () => {
    for (const [from, to] of [[8000, 16000], [16000, 8000], [24000, 8000]]) {
      const x = tone(700, from, 0.4);
      const whole = resample(x, from, to);
      const r = new Resampler(from, to);
      const chunk = from / 50;
      const parts: Int16Array[] = [];
      for (let i = 0; i < x.length; i += chunk) {
        const out = r.process(x.subarray(i, i + chunk));
        assert.equal(out.length, to / 50, `${from} → ${to}`);
        parts.push(out);
      }
      assert.deepEqual(Int16Array.from(parts.flatMap((p) => [...p])), whole);
    }
    // Odd chunk sizes still add up.
    const r = new Resampler(24000, 8000);
    let n = 0;
    for (const size of [1, 2, 479, 7, 31, 1000]) n += r.process(new Int16Array(size)).length;
    assert.ok(Math.abs(n - 1520 / 3) <= 1);
    assert.throws(() => new Resampler(8000, 0), RangeError);
  });
});
