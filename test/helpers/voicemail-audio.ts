// The generated voicemail set (docs/voice.md, "Voicemail"; docs/performance.md): machine greetings
// spoken by espeak-ng in several voices, pitches and speeds, followed by a synthesized beep, and
// people answering the phone ("hello?", "yes, speaking", a long hello with a pause), built at run
// time as the 8 kHz audio of a call. Used by bench/voicemail.ts and the voicemail tests. Nothing
// here is recorded from real calls: the figures it gives are for synthesized speech.
import { spawn } from 'node:child_process';
import { resample } from '../../src/speech/resample.ts';
import { parseWav } from '../../src/speech/wav.ts';

const RATE = 8000;

export interface Clip {
  name: string;
  truth: 'machine' | 'human';
  /** The call's audio from answer, 8 kHz PCM16. */
  pcm: Int16Array;
  /** Where the greeting's (or the person's first) speech ends, ms from answer. */
  speechEndMs: number;
  /** Where the beep ends, ms (machines only). */
  beepEndMs?: number;
}

/** espeak-ng speaking `text` as 8 kHz PCM16. */
export async function espeak(text: string, voice: string, opts: { pitch?: number; speed?: number } = {}): Promise<Int16Array> {
  const args = ['--stdout', '-v', voice, '-p', String(opts.pitch ?? 50), '-s', String(opts.speed ?? 160)];
  const child = spawn('espeak-ng', args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const chunks: Buffer[] = [];
  child.stdout.on('data', (c: Buffer) => chunks.push(c));
  child.stdin.end(text);
  const code = await new Promise<number | null>((resolve, reject) => { child.on('error', reject); child.on('close', resolve); });
  if (code !== 0) throw new Error(`espeak-ng exited ${code}`);
  const wav = parseWav(Buffer.concat(chunks));
  return resample(wav.pcm16, wav.sampleRate, RATE);
}

/** A tone (one or two frequencies) of `ms` at `dbfs`, with 5 ms ramps. */
export function beep(freqs: number[], ms: number, dbfs = -12): Int16Array {
  const n = Math.round((ms / 1000) * RATE);
  const amp = 32767 * 10 ** (dbfs / 20) / freqs.length;
  const ramp = RATE / 200;
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) {
    const g = Math.min(1, i / ramp, (n - 1 - i) / ramp);
    let v = 0;
    for (const f of freqs) v += Math.sin((2 * Math.PI * f * i) / RATE);
    out[i] = Math.round(amp * g * v);
  }
  return out;
}

export const silence = (ms: number) => new Int16Array(Math.round((ms / 1000) * RATE));

/** Parts joined, with a faint line noise (seeded) under everything. */
export function join(parts: Int16Array[], noiseDbfs = -62, seed = 1): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  let s = seed >>> 0 || 1;
  const amp = 32767 * 10 ** (noiseDbfs / 20);
  for (let i = 0; i < out.length; i++) {
    s = (s * 1664525 + 1013904223) >>> 0;
    out[i] = Math.max(-32768, Math.min(32767, out[i]! + Math.round(((s / 2 ** 32) * 2 - 1) * amp)));
  }
  return out;
}

const ms = (pcm: Int16Array) => Math.round((pcm.length / RATE) * 1000);

/** Trims espeak-ng's leading and trailing silence (so "speech end" is the speech's end). */
function trim(pcm: Int16Array): Int16Array {
  let a = 0;
  let b = pcm.length;
  while (a < b && Math.abs(pcm[a]!) < 200) a++;
  while (b > a && Math.abs(pcm[b - 1]!) < 200) b--;
  return pcm.slice(a, b);
}

export const GREETINGS = [
  'Hi, you have reached Jordan. I can\'t take your call right now. Please leave a message after the tone.',
  'The person you are calling is not available. Please leave your name and number after the beep.',
  'Hello, this is Maria. Leave me a message and I will call you back.',
  'You have reached the voicemail of five five five, zero one two three. Please record your message after the tone. When you are finished, hang up.',
  'Thank you for calling Acme Dental. Our office is currently closed. Please leave a message and we will return your call on the next business day.',
  'Sorry I missed your call. Leave a message.',
  'Leave a message.',
  'Hi, it\'s Chris. Talk to me.',
];

export const PEOPLE: { words: string[]; pauseMs?: number }[] = [
  { words: ['Hello?'] },
  { words: ['Yes, speaking.'] },
  { words: ['Hi, this is Sam.'] },
  { words: ['Hello?', 'Hello, who is this?'], pauseMs: 1400 },
  { words: ['Yeah?'] },
  { words: ['Sam speaking.'] },
  { words: ['Hello, Sam speaking, who is this?'] },
  { words: ['Good morning, Acme Dental.'] },
  // People at a front desk answer with a whole sentence (3–7 s without a pause) and then wait.
  { words: ['Hello, this is Maria from the front desk at Riverside Dental, how can I help you today?'] },
  { words: ['Good afternoon, thank you for calling Northside Auto Repair, this is Dave speaking, how can I help you?'] },
  { words: ['Hi there, you are speaking with Priya at the Greenfield Library information desk, what can I do for you?'] },
];

export const VOICES: { voice: string; pitch: number; speed: number }[] = [
  { voice: 'en-us', pitch: 50, speed: 165 },
  { voice: 'en-gb', pitch: 40, speed: 150 },
  { voice: 'en-us+f3', pitch: 65, speed: 175 },
  { voice: 'en-gb+m3', pitch: 30, speed: 140 },
];

export const BEEPS: number[][] = [[1000], [440], [850], [1400], [440, 850]];

/**
 * The set: every greeting in every voice, each with a beep (cycling frequency, 250–600 ms, after a
 * gap of 200–700 ms) then silence; every person's answer in every voice, then the silence of
 * someone waiting for an answer (and, for the long hello, a second phrase after the pause).
 */
export async function voicemailSet(opts: { limit?: number; /** Machines whose greeting has no beep after it (silence instead). */ noBeep?: boolean } = {}): Promise<Clip[]> {
  const clips: Clip[] = [];
  let k = 0;
  for (const [g, text] of GREETINGS.entries()) {
    for (const voice of VOICES) {
      const speech = trim(await espeak(text, voice.voice, voice));
      const tone = beep(BEEPS[k % BEEPS.length]!, 250 + (k % 4) * 120);
      const gap = 200 + ((k * 7) % 6) * 100;
      const lead = 300 + (k % 3) * 200;
      const pcm = join([silence(lead), speech, silence(gap), opts.noBeep ? silence(ms(tone)) : tone, silence(4000)], k % 3 === 2 ? -48 : -62, k + 1);
      clips.push({ name: `greeting ${g + 1} ${voice.voice} p${voice.pitch} s${voice.speed}`, truth: 'machine', pcm, speechEndMs: lead + ms(speech), ...opts.noBeep ? {} : { beepEndMs: lead + ms(speech) + gap + ms(tone) } });
      k++;
    }
  }
  for (const [p, person] of PEOPLE.entries()) {
    for (const [v, voice] of VOICES.entries()) {
      const parts: Int16Array[] = [];
      const lead = 300 + ((p + v) % 3) * 250;
      parts.push(silence(lead));
      const first = trim(await espeak(person.words[0]!, voice.voice, voice));
      parts.push(first);
      for (const more of person.words.slice(1)) {
        parts.push(silence(person.pauseMs ?? 1000));
        parts.push(trim(await espeak(more, voice.voice, voice)));
      }
      parts.push(silence(5000));
      clips.push({ name: `person "${person.words.join(' … ')}" ${voice.voice} p${voice.pitch} s${voice.speed}`, truth: 'human', pcm: join(parts, k % 3 === 2 ? -48 : -62, 100 + k++), speechEndMs: lead + ms(first) });
    }
  }
  return opts.limit ? clips.slice(0, opts.limit) : clips;
}
