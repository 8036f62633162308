// The audio plumbing under the engines: WAV files as espeak-ng writes them to a pipe (placeholder
// sizes), with extra chunks or the extensible format, read whole or as a stream's first bytes;
// and the resampler: lengths, gain, pitch kept, and what a lower rate cannot carry filtered out
// instead of aliased.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resample, StreamResampler } from '../../src/speech/resample.ts';
import { asPcm16, buildWav, parseWav, pcm16ToBytes, readWavHeader, WavError } from '../../src/speech/wav.ts';

const sine = (n: number, rate: number, hz: number, a = 10_000) => Int16Array.from({ length: n }, (_, i) => Math.round(a * Math.sin((2 * Math.PI * hz * i) / rate)));
const rms = (p: Int16Array) => Math.sqrt(p.reduce((s, v) => s + v * v, 0) / Math.max(1, p.length));
/** Zero crossings per second, over the middle (away from the edges). */
function frequency(p: Int16Array, rate: number): number {
  const mid = p.subarray(Math.floor(p.length * 0.1), Math.floor(p.length * 0.9));
  let n = 0;
  for (let i = 1; i < mid.length; i++) if ((mid[i]! >= 0) !== (mid[i - 1]! >= 0)) n++;
  return (n / 2) * (rate / mid.length);
}

describe('WAV', () => {
  it('writes a 44-byte header and reads it back', () => {
    const pcm = Int16Array.from([0, 1, -1, 32767, -32768, 1234]);
    const wav = buildWav(pcm, 8000);
    assert.equal(wav.length, 44 + 12);
    assert.equal(wav.toString('latin1', 0, 4), 'RIFF');
    assert.deepEqual(parseWav(wav), { pcm16: pcm, sampleRate: 8000 });
    assert.deepEqual(readWavHeader(wav), { sampleRate: 8000, dataOffset: 44, dataBytes: 12 });
  });

  it('reads a WAV written to a pipe, whose sizes are placeholders, and skips chunks it does not need', () => {
    const pcm = Int16Array.from([5, -5, 300, -300]);
    const streamed = buildWav(pcm, 22050);
    streamed.writeUInt32LE(0x7ffff024, 4);
    streamed.writeUInt32LE(0x7ffff000, 40);
    assert.deepEqual(parseWav(streamed), { pcm16: pcm, sampleRate: 22050 });
    // A LIST chunk (odd size, padded) between fmt and data, and WAVE_FORMAT_EXTENSIBLE.
    const fmt = Buffer.alloc(8 + 40);
    fmt.write('fmt ', 0, 'latin1');
    fmt.writeUInt32LE(40, 4);
    fmt.writeUInt16LE(0xfffe, 8);
    fmt.writeUInt16LE(1, 10);
    fmt.writeUInt32LE(24000, 12);
    fmt.writeUInt32LE(48000, 16);
    fmt.writeUInt16LE(2, 20);
    fmt.writeUInt16LE(16, 22);
    fmt.writeUInt16LE(22, 24);
    fmt.writeUInt16LE(16, 26);
    fmt.writeUInt16LE(1, 32); // sub-format: PCM
    const list = Buffer.concat([Buffer.from('LIST'), Buffer.from([3, 0, 0, 0]), Buffer.from('abc'), Buffer.from([0])]);
    const data = Buffer.concat([Buffer.from('data'), Buffer.from([8, 0, 0, 0]), pcm16ToBytes(pcm)]);
    const riff = Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WAVE'), fmt, list, data]);
    assert.deepEqual(parseWav(riff), { pcm16: pcm, sampleRate: 24000 });
    // A stream's first bytes: not enough yet, then enough.
    assert.equal(readWavHeader(riff.subarray(0, 3)), null);
    assert.equal(readWavHeader(riff.subarray(0, 30)), null);
    assert.equal(readWavHeader(riff.subarray(0, 12 + fmt.length + list.length + 8))?.dataOffset, 12 + fmt.length + list.length + 8);
  });

  it('refuses what is not PCM16 mono', () => {
    assert.throws(() => parseWav(Buffer.from('RIFX....WAVE')), WavError);
    assert.throws(() => readWavHeader(Buffer.from('ID3')), WavError);
    const stereo = buildWav(new Int16Array(4), 8000);
    stereo.writeUInt16LE(2, 22);
    assert.throws(() => parseWav(stereo), /2 channels/);
    const float = buildWav(new Int16Array(4), 8000);
    float.writeUInt16LE(3, 20);
    assert.throws(() => parseWav(float), /format 3/);
    assert.throws(() => parseWav(buildWav(new Int16Array(4), 8000).subarray(0, 36)), /ends before its data/);
  });

  it('takes samples as an Int16Array or as little-endian bytes', () => {
    const pcm = Int16Array.from([1, -2, 300]);
    assert.deepEqual(asPcm16(pcm16ToBytes(pcm)), pcm);
    assert.equal(asPcm16(pcm), pcm);
    // An odd offset into a larger buffer (as Buffer slices often are).
    const big = Buffer.concat([Buffer.from([9]), pcm16ToBytes(pcm)]);
    assert.deepEqual(asPcm16(big.subarray(1)), pcm);
    assert.throws(() => asPcm16(Buffer.alloc(5)), /odd number of bytes/);
  });
});

describe('resample', () => {
  it('keeps the duration, the level and the pitch going up and down', () => {
    for (const [from, to] of [[22050, 16000], [22050, 8000], [8000, 16000], [24000, 8000], [16000, 8000], [8000, 48000]] as const) {
      const src = sine(from, from, 300); // one second of 300 Hz
      const out = resample(src, from, to);
      assert.equal(out.length, to, `${from} → ${to}`);
      assert.ok(Math.abs(rms(out) / rms(src) - 1) < 0.02, `${from} → ${to}: gain ${rms(out) / rms(src)}`);
      assert.ok(Math.abs(frequency(out, to) - 300) < 3, `${from} → ${to}: ${frequency(out, to)} Hz`);
    }
    const same = sine(100, 8000, 300);
    assert.equal(resample(same, 8000, 8000), same);
    assert.equal(resample(new Int16Array(0), 8000, 16000).length, 0);
  });

  it('filters out what the lower rate cannot carry instead of folding it back', () => {
    // 6 kHz is above 8 kHz audio's 4 kHz Nyquist: it would alias to 2 kHz at full strength.
    const out = resample(sine(22050, 22050, 6000), 22050, 8000);
    const ratio = rms(out) / rms(sine(22050, 22050, 6000));
    assert.ok(ratio < 0.01, `6 kHz leaks through at ${(20 * Math.log10(ratio)).toFixed(1)} dB`);
    // 3 kHz is inside the band and passes.
    const inBand = resample(sine(22050, 22050, 3000), 22050, 8000);
    assert.ok(rms(inBand) / rms(sine(22050, 22050, 3000)) > 0.9);
    // A loud square wave overshoots when band-limited (Gibbs): the samples clip, they do not wrap.
    const square = Int16Array.from({ length: 8000 }, (_, i) => (Math.floor(i / 4) % 2 ? 32_000 : -32_000));
    const up = resample(square, 8000, 16000);
    // Every second output sample falls on an input sample: a wrapped one would have flipped sign.
    for (let k = 0; k < square.length; k++) assert.equal(Math.sign(up[2 * k]!), Math.sign(square[k]!), `sample ${k}`);
    assert.ok(up.some((v) => v === 32767) && up.some((v) => v === -32768), 'clipped at the limits');
  });

  it('refuses rates outside 8–48 kHz', () => {
    assert.throws(() => resample(new Int16Array(4), 4000, 8000), RangeError);
    assert.throws(() => resample(new Int16Array(4), 8000, 96_000), RangeError);
    assert.throws(() => resample(new Int16Array(4), 8000.5, 16000), RangeError);
    assert.throws(() => new StreamResampler(8000, 4000), RangeError);
  });

  it('over audio in pieces of any size gives, joined, exactly what the whole gives, each sample as soon as the input it needs has come', () => {
    const n = 9001;
    const src = new Int16Array(n);
    for (let i = 0; i < n; i++) src[i] = Math.round(9000 * Math.sin(i * 0.05) + 4000 * Math.sin(i * 0.37));
    for (const [from, to] of [[24_000, 8000], [22_050, 8000], [8000, 16_000], [44_100, 8000], [8000, 8000]] as const) {
      const r = new StreamResampler(from, to);
      const parts: Int16Array[] = [];
      let given = 0;
      for (let at = 0, k = 1; at < n; k++) {
        const piece = src.subarray(at, at + ((k * 37) % 481) + 1);
        const out = r.push(piece);
        at += piece.length;
        given += out.length;
        // Held back: only the samples the kernel still needs input beyond `at` for (about 16 zero crossings' worth).
        if (from !== to && at < n) assert.ok(Math.round((at * to) / from) - given <= Math.ceil((16 / 0.92) * Math.max(1, to / from)) + 1, `${from}→${to}: ${given} of ${at} given`);
        parts.push(out);
      }
      parts.push(r.end());
      const joined = new Int16Array(parts.reduce((a, p) => a + p.length, 0));
      let o = 0;
      for (const p of parts) {
        joined.set(p, o);
        o += p.length;
      }
      assert.deepEqual(joined, resample(src, from, to), `${from}→${to}`);
    }
  });
});
