// G.711: a tone through μ-law and A-law keeps its shape, silence and the extremes encode as they
// should. (Resampling is src/speech/resample.ts, tested in test/speech/audio-format.test.ts.)
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeG711, encodeG711, g711Codec, g711Silence } from '../../src/media/g711.ts';
import { FRAME_SAMPLES, pcm16FromBytes, pcm16ToBytes } from '../../src/media/pcm.ts';

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
const db = (ratio: number) => 20 * Math.log10(ratio);

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
