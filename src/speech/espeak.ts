// Text to speech with espeak-ng (Debian package espeak-ng), offline: the text goes to the
// program's stdin (never its command line, where text starting with '-' would be an option), and
// it writes a WAV to stdout (`--stdout`) at 22050 Hz, whose header we read. Formant synthesis: robotic,
// but immediate (about a thousand times faster than real time) and in a hundred languages.
//
// The voice is `<language>+<variant>`: the language from the BCP-47 tag (en-US → en-us, es-MX →
// es-419, de-DE → de), the variant from `voice` or else the gender (female → f3, male → m3).
import { errorLines, runTool } from './run-tool.ts';
import { languageTag, speedFactor, synthesisText } from './input.ts';
import { parseWav, WavError } from './wav.ts';
import { SpeechError, type Speech, type SynthesizeOptions, type TextToSpeech } from './types.ts';

export const ESPEAK = 'espeak-ng';

/** espeak-ng's voice for a language and region where it is not simply `<language>-<region>` lowercased. */
const REGIONAL: Record<string, string> = {
  'en-US': 'en-us', 'en-GB': 'en-gb', 'en-UK': 'en-gb', 'en-029': 'en-029',
  'es-ES': 'es', 'es-419': 'es-419', 'es-US': 'es-419', 'es-MX': 'es-419', 'es-AR': 'es-419', 'es-CO': 'es-419', 'es-CL': 'es-419',
  'fr-FR': 'fr-fr', 'fr-BE': 'fr-be', 'fr-CH': 'fr-ch', 'fr-CA': 'fr-fr',
  'de-DE': 'de', 'de-AT': 'de', 'de-CH': 'de',
  'pt-BR': 'pt-br', 'pt-PT': 'pt',
};
/** A language given without a region (or with one espeak-ng has no voice for). */
const BY_LANGUAGE: Record<string, string> = { en: 'en-us', es: 'es', fr: 'fr-fr', de: 'de', pt: 'pt' };

/** The variants that stand for a gender when no voice is named (espeak-ng's !v/f3 and !v/m3). */
export const ESPEAK_GENDER_VARIANTS = { female: 'f3', male: 'm3' } as const;

/** The form of an espeak-ng voice variant (f3, m3, klatt). */
export const ESPEAK_VARIANT = /^[A-Za-z][A-Za-z0-9_-]{0,31}$/;

/** espeak-ng's voice name for a BCP-47 tag and an optional variant: `en-US`, female → `en-us+f3`. */
export function espeakVoice(language: string, opts: { gender?: 'female' | 'male'; voice?: string } = {}): string {
  const tag = languageTag(ESPEAK, language);
  const base = (tag.region && REGIONAL[`${tag.language}-${tag.region}`]) ?? BY_LANGUAGE[tag.language] ?? tag.language;
  const variant = opts.voice ?? (opts.gender ? ESPEAK_GENDER_VARIANTS[opts.gender] : undefined);
  if (variant === undefined) return base;
  if (!ESPEAK_VARIANT.test(variant)) {
    throw new SpeechError(ESPEAK, 'input', `'${variant}' is not an espeak-ng voice variant (such as f3, m3, klatt)`);
  }
  return `${base}+${variant}`;
}

export interface EspeakOptions {
  /** The program (default `espeak-ng` on the PATH). */
  command?: string;
  /** Longest one synthesis may run (default 10 s; espeak-ng speaks 2000 characters in well under one). */
  timeoutMs?: number;
  /** Words per minute at speed 1 (default 175, espeak-ng's own). */
  wordsPerMinute?: number;
}

/** 2000 characters is about 100 s of speech, 4.4 MB at 22050 Hz; stop well past that. */
const MAX_WAV_BYTES = 16 * 1024 * 1024;

export class EspeakEngine implements TextToSpeech {
  readonly name = ESPEAK;
  readonly offline = true;
  private readonly command: string;
  private readonly timeoutMs: number;
  private readonly wpm: number;

  constructor(opts: EspeakOptions = {}) {
    this.command = opts.command ?? 'espeak-ng';
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.wpm = opts.wordsPerMinute ?? 175;
  }

  /** Returns PCM16 mono at the rate espeak-ng wrote (22050 Hz). */
  async synthesize(text: string, opts: SynthesizeOptions): Promise<Speech> {
    opts.signal?.throwIfAborted();
    const clean = synthesisText(this.name, text);
    const voice = espeakVoice(opts.language, opts);
    // espeak-ng takes 80–450 words per minute.
    const wpm = Math.min(450, Math.max(80, Math.round(this.wpm * speedFactor(this.name, opts.speed))));
    if (clean === '') return { pcm16: new Int16Array(0), sampleRate: 22050, engine: this.name };
    // -b 1: the input is UTF-8. -v and -s never carry caller text (checked above).
    const run = await runTool(this.command, ['--stdout', '-b', '1', '-v', voice, '-s', String(wpm)], {
      engine: this.name, debianPackage: 'espeak-ng', stdin: clean, timeoutMs: this.timeoutMs,
      maxStdoutBytes: MAX_WAV_BYTES, signal: opts.signal,
    });
    if (run.code !== 0) {
      const why = errorLines(run.stderr);
      const kind = /voice does not exist/i.test(why) ? 'input' : 'failed';
      throw new SpeechError(this.name, kind, `${this.command} -v ${voice} exited with ${run.code ?? run.signal}: ${why}`);
    }
    try {
      const { pcm16, sampleRate } = parseWav(run.stdout);
      return { pcm16, sampleRate, engine: this.name };
    } catch (err) {
      if (err instanceof WavError) throw new SpeechError(this.name, 'failed', `${this.command} wrote no usable WAV: ${err.message}`);
      throw err;
    }
  }

  async check(signal?: AbortSignal): Promise<void> {
    const run = await runTool(this.command, ['--version'], {
      engine: this.name, debianPackage: 'espeak-ng', timeoutMs: this.timeoutMs, maxStdoutBytes: 64 * 1024, signal,
    });
    if (run.code !== 0) throw new SpeechError(this.name, 'unavailable', `${this.command} --version exited with ${run.code ?? run.signal}: ${errorLines(run.stderr)}`);
  }
}
