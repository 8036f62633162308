// Audio for judging voice activity detectors, made at run time at 8 kHz (the call's rate): speech
// from espeak-ng in several voices, and what a phone line carries when nobody speaks — line noise,
// babble (several espeak-ng voices talking at once, far away), music on hold (synthesized chords
// and a melody), clicks — mixed at a chosen signal-to-noise ratio. Deterministic: seeded noise,
// fixed texts and voices. Used by test/speech/silero-vad.test.ts and bench/vad.ts.
import { EspeakEngine } from '../../src/speech/espeak.ts';
import { resample } from '../../src/speech/resample.ts';

export const RATE = 8000;
const samples = (ms: number) => Math.round((ms * RATE) / 1000);

/** A seeded generator in [0, 1). */
export function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

export function rms(pcm: Int16Array | Float64Array, from = 0, to = pcm.length): number {
  let sum = 0;
  for (let i = from; i < to; i++) sum += pcm[i]! * pcm[i]!;
  return Math.sqrt(sum / Math.max(1, to - from));
}

export function silence(ms: number): Int16Array {
  return new Int16Array(samples(ms));
}

/** Telephone line noise: white noise through a gentle low-pass (a hiss with some body), `ms` long, unit RMS before scaling. */
export function lineNoise(ms: number, seed = 11): Float64Array {
  const r = rng(seed);
  const out = new Float64Array(samples(ms));
  let y = 0;
  for (let i = 0; i < out.length; i++) {
    y = 0.6 * y + 0.4 * (2 * r() - 1);
    out[i] = y;
  }
  return normalise(out);
}

/** Music on hold: a four-chord loop of triads (sines with harmonics, soft attacks) and a melody over it. */
export function musicOnHold(ms: number, seed = 5): Float64Array {
  const r = rng(seed);
  const out = new Float64Array(samples(ms));
  const chords = [[261.6, 329.6, 392.0], [220.0, 261.6, 329.6], [174.6, 220.0, 261.6], [196.0, 246.9, 293.7]];
  const melody = [523.3, 587.3, 659.3, 587.3, 523.3, 493.9, 440.0, 493.9];
  const chordLen = samples(2000);
  const noteLen = samples(500);
  const jitter = r() * 0.01;
  for (let i = 0; i < out.length; i++) {
    const chord = chords[Math.floor(i / chordLen) % chords.length]!;
    const inChord = (i % chordLen) / RATE;
    const env = Math.min(1, inChord / 0.05) * (0.7 + 0.3 * Math.exp(-inChord * 2));
    let v = 0;
    for (const f of chord) v += Math.sin(2 * Math.PI * f * (1 + jitter) * i / RATE) + 0.3 * Math.sin(4 * Math.PI * f * i / RATE);
    const note = melody[Math.floor(i / noteLen) % melody.length]!;
    const inNote = (i % noteLen) / RATE;
    v += 1.2 * Math.exp(-inNote * 4) * (Math.sin(2 * Math.PI * note * i / RATE) + 0.5 * Math.sin(6 * Math.PI * note * i / RATE));
    out[i] = v * env;
  }
  return normalise(out);
}

/** Clicks and pops: 2–6 ms impulses of decaying noise at random moments, about three a second, over near-silence. */
export function clicks(ms: number, seed = 3): Float64Array {
  const r = rng(seed);
  const out = new Float64Array(samples(ms));
  let i = Math.floor(r() * samples(300));
  while (i < out.length) {
    const len = samples(2 + r() * 4);
    for (let k = 0; k < len && i + k < out.length; k++) out[i + k] = (2 * r() - 1) * Math.exp(-k / (len / 3)) * 8;
    i += samples(100 + r() * 500);
  }
  for (let k = 0; k < out.length; k++) out[k]! += (2 * r() - 1) * 0.01;
  return normalise(out);
}

function normalise(x: Float64Array): Float64Array {
  const level = rms(x);
  if (level > 0) for (let i = 0; i < x.length; i++) x[i]! /= level;
  return x;
}

export const VOICES = ['en-us', 'en-us+f3', 'en-gb+m3', 'en-us+f2', 'en-gb+f4', 'en-us+m7'] as const;
export const SENTENCES = [
  'hello, I would like to book an appointment for tomorrow morning',
  'can you tell me what time you open on saturday',
  'yes, that works for me, thank you very much',
  'I am calling about the invoice you sent last week',
  'no, I said the second one, not the first',
  'could you please transfer me to someone in billing',
];

const espeak = new EspeakEngine();

/** `text` in espeak-ng's `voice` (a variant), at 8 kHz, trimmed to its voiced part. */
export async function speak(text: string, voice: string): Promise<Int16Array> {
  const [lang, variant] = voice.split('+');
  const s = await espeak.synthesize(text, { language: lang === 'en-gb' ? 'en-GB' : 'en-US', ...(variant ? { voice: variant } : {}) });
  const pcm = resample(s.pcm16, s.sampleRate, RATE);
  // Trim digital silence at both ends (20 ms frames under −50 dBFS).
  const frame = RATE / 50;
  const loud = (k: number) => rms(pcm, k * frame, Math.min(pcm.length, (k + 1) * frame)) > 32768 * 10 ** (-50 / 20);
  const frames = Math.floor(pcm.length / frame);
  let a = 0;
  let b = frames;
  while (a < b && !loud(a)) a++;
  while (b > a && !loud(b - 1)) b--;
  return pcm.slice(a * frame, b * frame);
}

/** Babble: three other voices saying other things at once, each at its own offset, unit RMS. */
export async function babble(ms: number): Promise<Float64Array> {
  const out = new Float64Array(samples(ms));
  const talkers = [['en-us+m3', 2], ['en-gb+f3', 4], ['en-us+f4', 5]] as const;
  for (const [k, [voice, sentence]] of talkers.entries()) {
    const s = await speak(`${SENTENCES[sentence]}, ${SENTENCES[(sentence + 1) % SENTENCES.length]}`, voice);
    let at = samples(137 * k);
    while (at < out.length) {
      for (let i = 0; i < s.length && at + i < out.length; i++) out[at + i]! += s[i]!;
      at += s.length + samples(150 + 80 * k);
    }
  }
  return normalise(out);
}

export type NoiseKind = 'line' | 'babble' | 'music' | 'clicks' | 'none';

export async function noiseOf(kind: NoiseKind, ms: number): Promise<Float64Array> {
  switch (kind) {
    case 'line': return lineNoise(ms);
    case 'babble': return babble(ms);
    case 'music': return musicOnHold(ms);
    case 'clicks': return clicks(ms);
    case 'none': return new Float64Array(samples(ms));
  }
}

/** Where the speech is in a scene, ms. */
export interface Segment { startMs: number; endMs: number }

export interface Scene {
  pcm: Int16Array;
  /** The utterances, where their voiced audio is. */
  speech: Segment[];
  /** The stretches with no speech at all (noise only). */
  gaps: Segment[];
}

/**
 * A call's audio: `gapMs` of noise, then each utterance followed by `gapMs` of noise; the noise
 * runs under everything at `snrDb` below the speech (RMS of the speech against RMS of the noise;
 * `speechDbfs` sets the speech's level). No noise with kind `none`.
 */
export async function scene(utterances: Int16Array[], kind: NoiseKind, snrDb: number, opts: { gapMs?: number; speechDbfs?: number } = {}): Promise<Scene> {
  const gap = samples(opts.gapMs ?? 3000);
  const total = gap + utterances.reduce((n, u) => n + u.length + gap, 0);
  const speechLevel = 32768 * 10 ** ((opts.speechDbfs ?? -20) / 20);
  const mix = new Float64Array(total);
  const speech: Segment[] = [];
  const gaps: Segment[] = [];
  const ms = (n: number) => (n / RATE) * 1000;
  let at = gap;
  gaps.push({ startMs: 0, endMs: ms(gap) });
  for (const u of utterances) {
    const g = speechLevel / Math.max(1, rms(u));
    for (let i = 0; i < u.length; i++) mix[at + i] = u[i]! * g;
    speech.push({ startMs: ms(at), endMs: ms(at + u.length) });
    gaps.push({ startMs: ms(at + u.length), endMs: ms(at + u.length + gap) });
    at += u.length + gap;
  }
  if (kind !== 'none') {
    const noise = await noiseOf(kind, ms(total));
    const n = speechLevel / 10 ** (snrDb / 20);
    for (let i = 0; i < total; i++) mix[i]! += noise[i]! * n;
  }
  const pcm = new Int16Array(total);
  for (let i = 0; i < total; i++) pcm[i] = Math.max(-32768, Math.min(32767, Math.round(mix[i]!)));
  return { pcm, speech, gaps };
}
