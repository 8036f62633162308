// The checks every speech engine applies to what it is given, so the bounds and the messages are
// the same whichever engine runs: audio length and rate, text length, language tags, speed.
import { MAX_RATE, MIN_RATE } from './resample.ts';
import { asPcm16, WavError } from './wav.ts';
import { MAX_STREAM_KEYWORDS, MAX_SYNTHESIS_CHARS, MAX_UTTERANCE_SECONDS, SpeechError, type RecognitionStream, type StreamOptions } from './types.ts';

/** The utterance as samples, refused when its rate is outside 8–48 kHz or it is longer than MAX_UTTERANCE_SECONDS. */
export function utteranceSamples(engine: string, audio: Int16Array | Buffer, sampleRate: number): Int16Array {
  if (!Number.isInteger(sampleRate) || sampleRate < MIN_RATE || sampleRate > MAX_RATE) {
    throw new SpeechError(engine, 'input', `sample rate must be an integer between ${MIN_RATE} and ${MAX_RATE} Hz (got ${sampleRate})`);
  }
  let pcm: Int16Array;
  try {
    pcm = asPcm16(audio);
  } catch (err) {
    if (err instanceof WavError) throw new SpeechError(engine, 'input', err.message);
    throw err;
  }
  const seconds = pcm.length / sampleRate;
  if (seconds > MAX_UTTERANCE_SECONDS) {
    throw new SpeechError(engine, 'input', `the utterance is ${seconds.toFixed(1)} s long; at most ${MAX_UTTERANCE_SECONDS} s is transcribed at once`);
  }
  return pcm;
}

/**
 * The text to speak, with control characters turned into spaces; refused past MAX_SYNTHESIS_CHARS
 * (counted in code points). '' when there is nothing to say.
 */
export function synthesisText(engine: string, text: string): string {
  // eslint-disable-next-line no-control-regex
  const clean = text.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ').trim();
  const length = [...clean].length;
  if (length > MAX_SYNTHESIS_CHARS) {
    throw new SpeechError(engine, 'input', `the text is ${length} characters long; at most ${MAX_SYNTHESIS_CHARS} are spoken at once (split it into sentences)`);
  }
  return clean;
}

export interface LanguageTag {
  /** Lowercase primary language subtag: `en`. */
  language: string;
  /** Uppercase region subtag when there is one (`US`), or a UN M.49 number (`419`). */
  region?: string;
}

/** Reads a BCP-47 tag such as en-US, es-419 or de (script and other subtags are ignored). */
export function languageTag(engine: string, tag: string): LanguageTag {
  const parts = tag.trim().split(/[-_]/);
  const language = (parts[0] ?? '').toLowerCase();
  if (!/^[a-z]{2,3}$/.test(language)) {
    throw new SpeechError(engine, 'input', `'${tag}' is not a BCP-47 language tag such as en-US`);
  }
  const region = parts.slice(1).find((p) => /^([a-zA-Z]{2}|\d{3})$/.test(p));
  return region ? { language, region: region.toUpperCase() } : { language };
}

/** The speed factor, refused outside 0.5–2 (1 when not given). */
export function speedFactor(engine: string, speed: number | undefined): number {
  if (speed === undefined) return 1;
  if (!Number.isFinite(speed) || speed < 0.5 || speed > 2) {
    throw new SpeechError(engine, 'input', `speed must be between 0.5 and 2 (got ${speed})`);
  }
  return speed;
}

/** A stream's audio format checked (mulaw or linear16, 8–48 kHz): how many bytes a second of it is. */
export function streamFormat(engine: string, o: StreamOptions): { bytesPerSecond: number } {
  if (o.encoding !== 'mulaw' && o.encoding !== 'linear16') throw new SpeechError(engine, 'input', `encoding must be mulaw or linear16 (got ${String(o.encoding)})`);
  if (!Number.isInteger(o.sampleRate) || o.sampleRate < 8000 || o.sampleRate > 48_000) {
    throw new SpeechError(engine, 'input', `sample rate must be an integer between 8000 and 48000 Hz (got ${o.sampleRate})`);
  }
  return { bytesPerSecond: o.sampleRate * (o.encoding === 'mulaw' ? 1 : 2) };
}

/** The words a stream favours: trimmed, at most 100 characters each and MAX_STREAM_KEYWORDS in all; undefined when none. */
export function streamKeywords(keywords: readonly string[] | undefined): string[] | undefined {
  const list = (keywords ?? []).map((k) => k.trim().slice(0, 100)).filter((k) => k !== '').slice(0, MAX_STREAM_KEYWORDS);
  return list.length ? list : undefined;
}

/** Ends a stream (`abort`) when `signal` aborts, and lets go of the signal once the stream closed. */
export function abortOn(signal: AbortSignal | undefined, stream: Pick<RecognitionStream, 'on'>, abort: () => void): void {
  if (!signal) return;
  if (signal.aborted) return abort();
  signal.addEventListener('abort', abort, { once: true });
  stream.on((e) => {
    if (e.type === 'closed') signal.removeEventListener('abort', abort);
  });
}
