// Speech to text with CMU PocketSphinx, offline: Debian's `pocketsphinx` package (0.8+5prealpha)
// ships the `pocketsphinx_continuous` program, and `pocketsphinx-en-us` the US English model in
// /usr/share/pocketsphinx/model/en-us (acoustic model en-us/, dictionary cmudict-en-us.dict,
// language model en-us.lm.bin). That model is wideband: it listens at 16 kHz.
//
// One utterance per run: the audio goes to the program as a file of raw 16 kHz PCM16 (`-infile`,
// in a private temporary directory), it prints what it heard on stdout, with `-time yes` a line per word
// with its posterior probability. Without a grammar it decodes with the language model (free
// speech, rough); with one (`-jsgf`) it can only hear the grammar's sentences, which makes
// menus, yes/no and the tests deterministic. (Its keyword spotting, `-kws`, prints nothing from a
// file in this version, so a list of phrases becomes a JSGF grammar instead.)
//
// Telephone audio is narrowband: nothing above 4 kHz. Upsampled to 16 kHz as it is, the model's
// upper filters see only digital silence and it recognises little; digital silence between words
// (synthesized speech) does the same. So before decoding we add a faint noise floor, 26 dB below
// the utterance's own level (a fixed seed: the same audio always gives the same text). Measured
// on espeak-ng's voices through 8 kHz μ-law, a six-phrase grammar goes from 8 of 30 right to 30 of 30.
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { errorLines, runTool } from './run-tool.ts';
import { languageTag, utteranceSamples } from './input.ts';
import { resample } from './resample.ts';
import { pcm16ToBytes } from './wav.ts';
import { SpeechError, type SpeechGrammar, type SpeechToText, type Transcript, type TranscribeOptions } from './types.ts';

export const POCKETSPHINX = 'pocketsphinx';
/** Where Debian's pocketsphinx-en-us puts the model. */
export const DEBIAN_MODEL_DIR = '/usr/share/pocketsphinx/model/en-us';
/** The rate the en-us model was trained at. */
export const POCKETSPHINX_RATE = 16_000;

/**
 * The search of free speech (the language model), narrower than the program's defaults: at most
 * 3,000 HMMs and 5 word exits per frame, and beams of 1e-40 (word 1e-30) instead of 1e-48 (1e-40).
 * Measured in issue 34 on ten espeak-ng sentences through 8 kHz μ-law (bench/voice.ts's method):
 * 17.6 s of CPU for the ten with the defaults, 7.7 s with these, and no more words wrong (43 of 62
 * against 50: free speech on this model is rough either way). A grammar's search is small already
 * and keeps the defaults.
 */
export const FREE_SPEECH_SEARCH = ['-maxhmmpf', '3000', '-maxwpf', '5', '-beam', '1e-40', '-wbeam', '1e-30', '-pbeam', '1e-40'] as const;

const MAX_PHRASES = 500;
const MAX_PHRASE_WORDS = 20;
const MAX_JSGF_BYTES = 64 * 1024;

export interface PocketsphinxOptions {
  /** The program (default `pocketsphinx_continuous` on the PATH). */
  command?: string;
  /** The model directory, laid out as Debian's pocketsphinx-en-us (default /usr/share/pocketsphinx/model/en-us). */
  modelDir?: string;
  /** Longest one transcription may run (default 30 s: without a grammar, 30 s of audio takes 5–15 s to decode). */
  timeoutMs?: number;
  /** The noise floor added before decoding, in dB relative to the utterance's RMS (default -26); null adds none. */
  noiseFloorDb?: number | null;
  /** Called with the program's process id when it starts (tests watch it exit). */
  onSpawn?: (pid: number) => void;
}

/** The words of a phrase as the dictionary spells them: lowercase, punctuation gone. */
function grammarWords(phrase: string): string[] {
  const words = phrase.toLowerCase().replace(/[^\p{L}\p{N}']+/gu, ' ').trim().split(' ').filter((w) => w !== '' && w !== "'");
  for (const w of words) {
    if (!/^[a-z][a-z']*$/.test(w)) {
      throw new SpeechError(POCKETSPHINX, 'input', `'${w}' cannot be in a grammar: English letters only (spell numbers out)`);
    }
  }
  return words;
}

/** A JSGF grammar whose one public rule is any one of the phrases. */
export function phrasesToJsgf(phrases: readonly string[]): string {
  if (phrases.length === 0 || phrases.length > MAX_PHRASES) {
    throw new SpeechError(POCKETSPHINX, 'input', `a grammar takes 1 to ${MAX_PHRASES} phrases (got ${phrases.length})`);
  }
  const alternatives = new Set<string>();
  for (const p of phrases) {
    const words = grammarWords(p);
    if (words.length === 0) throw new SpeechError(POCKETSPHINX, 'input', `the phrase '${p}' has no words`);
    if (words.length > MAX_PHRASE_WORDS) throw new SpeechError(POCKETSPHINX, 'input', `the phrase '${p.slice(0, 60)}…' has more than ${MAX_PHRASE_WORDS} words`);
    alternatives.add(words.join(' '));
  }
  return `#JSGF V1.0;\ngrammar callplane;\npublic <utterance> = ${[...alternatives].join(' | ')} ;\n`;
}

function jsgfOf(grammar: SpeechGrammar): string {
  if (grammar.kind === 'phrases') return phrasesToJsgf(grammar.phrases);
  if (Buffer.byteLength(grammar.jsgf) > MAX_JSGF_BYTES) throw new SpeechError(POCKETSPHINX, 'input', `a JSGF grammar may be at most ${MAX_JSGF_BYTES} bytes`);
  // An import would read other grammar files from the disk.
  if (/^\s*import\b/m.test(grammar.jsgf)) throw new SpeechError(POCKETSPHINX, 'input', 'a JSGF grammar may not import other grammars');
  return grammar.jsgf;
}

/** Adds white noise at `db` relative to the audio's RMS, from a fixed seed (deterministic). */
function withNoiseFloor(pcm: Int16Array, db: number): Int16Array {
  let sum = 0;
  for (const v of pcm) sum += v * v;
  const rms = Math.sqrt(sum / Math.max(1, pcm.length));
  // Uniform noise of RMS r spans ±r·√3; at least a few steps so digital silence is never exact.
  const amplitude = Math.max(8, rms * 10 ** (db / 20)) * Math.sqrt(3);
  const out = new Int16Array(pcm.length);
  let seed = 0x2545f491;
  for (let i = 0; i < pcm.length; i++) {
    // xorshift32
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    const u = (seed >>> 0) / 0x1_0000_0000 - 0.5;
    const v = pcm[i]! + Math.round(u * 2 * amplitude);
    out[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
  }
  return out;
}

/** Words that mark silence, noise and the sentence's ends, not speech. */
const FILLER = /^(<s>|<\/s>|<sil>|\[[A-Z]+\]|\+\+.*\+\+)$/;
const WORD_LINE = /^(\S+) (\d+\.\d+) (\d+\.\d+) (\d+(?:\.\d+)?(?:e[-+]?\d+)?)$/;

/** What pocketsphinx_continuous -time yes printed: hypothesis lines, each followed by its words. */
export function parseOutput(stdout: string): { text: string; confidence?: number } {
  const hyps: string[] = [];
  const probs: number[] = [];
  for (const raw of stdout.split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    const w = WORD_LINE.exec(line);
    if (w) {
      if (!FILLER.test(w[1]!)) probs.push(Number(w[4]));
      continue;
    }
    hyps.push(line);
  }
  const text = hyps.join(' ').replace(/\s+/g, ' ').trim();
  if (probs.length === 0) return { text };
  const mean = probs.reduce((a, b) => a + b, 0) / probs.length;
  return { text, confidence: Math.min(1, Math.max(0, mean)) };
}

export class PocketsphinxEngine implements SpeechToText {
  readonly name = POCKETSPHINX;
  readonly offline = true;
  private readonly command: string;
  private readonly modelDir: string;
  private readonly timeoutMs: number;
  private readonly noiseFloorDb: number | null;
  private readonly onSpawn?: (pid: number) => void;

  constructor(opts: PocketsphinxOptions = {}) {
    this.command = opts.command ?? 'pocketsphinx_continuous';
    this.modelDir = opts.modelDir ?? DEBIAN_MODEL_DIR;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.noiseFloorDb = opts.noiseFloorDb === undefined ? -26 : opts.noiseFloorDb;
    this.onSpawn = opts.onSpawn;
  }

  private get files() {
    return {
      hmm: path.join(this.modelDir, 'en-us'),
      dict: path.join(this.modelDir, 'cmudict-en-us.dict'),
      lm: path.join(this.modelDir, 'en-us.lm.bin'),
    };
  }

  /** Takes any rate from 8 to 48 kHz (resampled to 16 kHz); English only. */
  async transcribe(audio: Int16Array | Buffer, sampleRate: number, opts: TranscribeOptions): Promise<Transcript> {
    opts.signal?.throwIfAborted();
    const pcm = utteranceSamples(this.name, audio, sampleRate);
    const tag = languageTag(this.name, opts.language);
    if (tag.language !== 'en') {
      throw new SpeechError(this.name, 'input', `there is no pocketsphinx model for '${opts.language}' here (Debian ships English only: pocketsphinx-en-us)`);
    }
    const jsgf = opts.grammar ? jsgfOf(opts.grammar) : undefined;
    if (pcm.length === 0) return { text: '', engine: this.name };
    let wide = resample(pcm, sampleRate, POCKETSPHINX_RATE);
    if (this.noiseFloorDb !== null) wide = withNoiseFloor(wide, this.noiseFloorDb);

    const f = this.files;
    // Node gives a child a socket, not a pipe, for stdin, and the program cannot open
    // /dev/stdin on a socket: the audio goes through a file (1 MB at most), removed afterwards.
    const dir = await mkdtemp(path.join(os.tmpdir(), 'callplane-sphinx-'));
    try {
      const raw = path.join(dir, 'utterance.raw');
      await writeFile(raw, pcm16ToBytes(wide));
      const args = ['-hmm', f.hmm, '-dict', f.dict, '-samprate', String(POCKETSPHINX_RATE), '-time', 'yes', '-infile', raw];
      if (jsgf !== undefined) {
        const file = path.join(dir, 'grammar.gram');
        await writeFile(file, jsgf);
        args.push('-jsgf', file);
      } else {
        args.push('-lm', f.lm, ...FREE_SPEECH_SEARCH);
      }
      const run = await runTool(this.command, args, {
        engine: this.name, debianPackage: 'pocketsphinx', timeoutMs: this.timeoutMs,
        maxStdoutBytes: 1024 * 1024, signal: opts.signal, onSpawn: this.onSpawn,
      });
      if (run.code !== 0) {
        const why = errorLines(run.stderr);
        if (/missing in the dictionary/.test(why)) throw new SpeechError(this.name, 'input', `the grammar has a word the dictionary lacks: ${why}`);
        if (/jsgf|grammar|syntax/i.test(why) && jsgf !== undefined) throw new SpeechError(this.name, 'input', `the grammar was refused: ${why}`);
        throw new SpeechError(this.name, 'failed', `${this.command} exited with ${run.code ?? run.signal}: ${why}`);
      }
      const parsed = parseOutput(run.stdout.toString('utf8'));
      // Under a grammar every word it allows comes out certain (1.0): not a confidence.
      return jsgf === undefined && parsed.confidence !== undefined
        ? { text: parsed.text, confidence: parsed.confidence, engine: this.name }
        : { text: parsed.text, engine: this.name };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  /** The program runs and the model's files are where they should be. */
  async check(signal?: AbortSignal): Promise<void> {
    for (const [what, file] of Object.entries(this.files)) {
      try {
        await stat(file);
      } catch {
        throw new SpeechError(this.name, 'unavailable', `the English model's ${what} is missing at ${file} (install the Debian package: apt-get install pocketsphinx-en-us)`);
      }
    }
    // Without arguments it prints its options and exits 1; only a missing program matters here.
    await runTool(this.command, [], { engine: this.name, debianPackage: 'pocketsphinx', timeoutMs: this.timeoutMs, maxStdoutBytes: 1024 * 1024, signal });
  }
}
