// Speech over the OpenAI-compatible audio API through the `openai` client with a configurable
// base URL: OpenAI itself, and local servers that speak the same routes (speaches /
// faster-whisper-server and whisper.cpp's server for transcription; Kokoro-FastAPI, openedai-speech
// for speech). The client times requests out and retries 408/409/429/5xx with exponential backoff
// (honouring Retry-After); what still fails becomes a SpeechError that names the provider.
//
// - Transcription: POST /audio/transcriptions (multipart), the utterance as a WAV we build from the
//   PCM at its own rate (the server resamples), `language` as ISO-639-1, and a grammar's phrases
//   as the `prompt` (a vocabulary hint, not a constraint).
// - Speech: POST /audio/speech. `response_format: 'pcm'` is raw PCM16 at 24 kHz from OpenAI (no
//   header, so the rate is configuration: `pcmSampleRate`); `wav` carries its rate in its header,
//   which is why it is the portable choice for local servers (Kokoro writes 24 kHz, Piper-based
//   ones 22050 Hz). Both stream: the body is read as it arrives.
import { lazyClient, openaiSdk, type OpenAI } from '../lib/openai-sdk.ts';
import { languageTag, speedFactor, synthesisText, utteranceSamples } from './input.ts';
import { buildWav, bytesToPcm16, readWavHeader, WavError } from './wav.ts';
import {
  SpeechError, type Speech, type SpeechChunk, type SpeechToText, type SynthesizeOptions, type TextToSpeech,
  type Transcript, type TranscribeOptions,
} from './types.ts';

export interface OpenAISpeechOptions {
  /** Shown in errors and records (default `openai`). */
  name?: string;
  baseUrl: string;
  apiKey: string | undefined;
  /** How long one request may wait for its answer (and, for speech, then for the rest of the audio). */
  timeoutMs: number;
  maxRetries: number;
  model: string;
  /** How requests leave the process (tests, or the SSRF guard for an organization's own server). */
  fetch?: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
}

export type SpeechFormat = 'wav' | 'pcm';

export interface OpenAISynthesizerOptions extends OpenAISpeechOptions {
  /** `wav` (default: any server) or `pcm` (OpenAI: 24 kHz, no header). */
  format?: SpeechFormat;
  /** The rate of `pcm` answers (default 24000, OpenAI's). */
  pcmSampleRate?: number;
  /** The voices that stand for a gender when none is named (default nova and onyx). */
  voices?: { female: string; male: string };
}

/** The form of a voice name an OpenAI-compatible server takes (nova, onyx, a local server's own). */
export const OPENAI_VOICE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
export const OPENAI_DEFAULT_VOICES = { female: 'nova', male: 'onyx' } as const;
/** OpenAI's `pcm` rate. */
export const OPENAI_PCM_RATE = 24_000;
/** Whisper reads about 224 tokens of prompt; a grammar's phrases are cut to this. */
const MAX_PROMPT_CHARS = 800;
/** 2000 characters is two minutes of speech or so: 6 MB at 24 kHz. */
const MAX_SPEECH_BYTES = 16 * 1024 * 1024;

function client(o: OpenAISpeechOptions): () => Promise<OpenAI> {
  return lazyClient({
    baseURL: o.baseUrl,
    // Local servers take no key; the client insists on one.
    apiKey: o.apiKey ?? 'no-key',
    timeout: o.timeoutMs,
    maxRetries: o.maxRetries,
    ...(o.fetch ? { fetch: o.fetch } : {}),
  });
}

async function failure(name: string, err: unknown, signal: AbortSignal | undefined, what: string): Promise<unknown> {
  if (err instanceof SpeechError) return err;
  const { APIConnectionTimeoutError, APIError } = await openaiSdk();
  // The caller's own abort comes back as it is.
  if (signal?.aborted) return signal.reason ?? err;
  if (err instanceof APIConnectionTimeoutError) return new SpeechError(name, 'timeout', `${what}: the request timed out`);
  if (err instanceof APIError) return new SpeechError(name, 'failed', `${what}: ${err.status ?? 'no status'} ${err.message}`, err.status as number | undefined);
  return new SpeechError(name, 'failed', `${what}: ${(err as Error).message}`);
}

export class OpenAITranscriber implements SpeechToText {
  readonly offline = false;
  readonly name: string;
  readonly model: string;
  private readonly client: () => Promise<OpenAI>;

  constructor(opts: OpenAISpeechOptions) {
    this.name = opts.name ?? 'openai';
    this.model = opts.model;
    this.client = client(opts);
  }

  /** Takes any rate from 8 to 48 kHz, sent as it is (in a WAV). */
  async transcribe(audio: Int16Array | Buffer, sampleRate: number, opts: TranscribeOptions): Promise<Transcript> {
    opts.signal?.throwIfAborted();
    const pcm = utteranceSamples(this.name, audio, sampleRate);
    const tag = languageTag(this.name, opts.language);
    if (pcm.length === 0) return { text: '', engine: this.name, model: this.model };
    const prompt = opts.grammar?.kind === 'phrases' ? opts.grammar.phrases.join(', ').slice(0, MAX_PROMPT_CHARS) : undefined;
    try {
      const { toFile } = await openaiSdk();
      const file = await toFile(buildWav(pcm, sampleRate), 'utterance.wav', { type: 'audio/wav' });
      const r = await (await this.client()).audio.transcriptions.create({
        file, model: this.model, response_format: 'json',
        ...(tag.language.length === 2 ? { language: tag.language } : {}),
        ...(prompt ? { prompt } : {}),
      }, { signal: opts.signal });
      if (typeof r?.text !== 'string') throw new SpeechError(this.name, 'failed', 'transcription: the answer has no text');
      return { text: r.text.trim(), engine: this.name, model: this.model };
    } catch (err) {
      throw await failure(this.name, err, opts.signal, 'transcription');
    }
  }

  /** Nothing to check without spending a request; a wrong URL or key shows on the first one. */
  check(): Promise<void> {
    return Promise.resolve();
  }
}

export class OpenAISynthesizer implements TextToSpeech {
  readonly offline = false;
  readonly name: string;
  readonly model: string;
  readonly format: SpeechFormat;
  private readonly pcmRate: number;
  private readonly voices: { female: string; male: string };
  private readonly timeoutMs: number;
  private readonly client: () => Promise<OpenAI>;

  constructor(opts: OpenAISynthesizerOptions) {
    this.name = opts.name ?? 'openai';
    this.model = opts.model;
    this.format = opts.format ?? 'wav';
    this.pcmRate = opts.pcmSampleRate ?? OPENAI_PCM_RATE;
    this.voices = opts.voices ?? OPENAI_DEFAULT_VOICES;
    this.timeoutMs = opts.timeoutMs;
    this.client = client(opts);
  }

  /** Returns PCM16 mono at the server's rate: 24 kHz from OpenAI, what the WAV header says otherwise. */
  async synthesize(text: string, opts: SynthesizeOptions): Promise<Speech> {
    const pieces: Int16Array[] = [];
    let sampleRate = this.format === 'pcm' ? this.pcmRate : 0;
    let n = 0;
    for await (const c of this.synthesizeStream(text, opts)) {
      pieces.push(c.pcm16);
      sampleRate = c.sampleRate;
      n += c.pcm16.length;
    }
    const pcm16 = new Int16Array(n);
    let at = 0;
    for (const p of pieces) {
      pcm16.set(p, at);
      at += p.length;
    }
    return { pcm16, sampleRate: sampleRate || OPENAI_PCM_RATE, engine: this.name, model: this.model };
  }

  /** The speech as the server sends it: the first chunk comes before the last is made. */
  async *synthesizeStream(text: string, opts: SynthesizeOptions): AsyncGenerator<SpeechChunk> {
    opts.signal?.throwIfAborted();
    const input = synthesisText(this.name, text);
    languageTag(this.name, opts.language);
    const speed = speedFactor(this.name, opts.speed);
    const voice = opts.voice ?? this.voices[opts.gender ?? 'female'];
    if (!OPENAI_VOICE_NAME.test(voice)) throw new SpeechError(this.name, 'input', `'${voice}' is not a voice name`);
    if (input === '') return;

    // The client's timeout (and its retries) end at the answer's headers; the body gets as long
    // again. Ending early (the consumer stops reading, an error) cancels the request.
    const stopped = new AbortController();
    const signal = opts.signal ? AbortSignal.any([opts.signal, stopped.signal]) : stopped.signal;
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    let carry: Buffer = Buffer.alloc(0);
    let rate = this.format === 'pcm' ? this.pcmRate : 0;
    let bytes = 0;
    try {
      const res = await (await this.client()).audio.speech.create({
        model: this.model, voice, input, response_format: this.format, ...(speed !== 1 ? { speed } : {}),
      }, { signal });
      if (!res.body) throw new SpeechError(this.name, 'failed', 'speech: the answer has no body');
      timer = setTimeout(() => {
        timedOut = true;
        stopped.abort();
      }, this.timeoutMs);
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        bytes += chunk.byteLength;
        if (bytes > MAX_SPEECH_BYTES) throw new SpeechError(this.name, 'failed', `speech: the answer grew past ${MAX_SPEECH_BYTES} bytes`);
        carry = carry.length ? Buffer.concat([carry, chunk]) : Buffer.from(chunk);
        if (rate === 0) {
          const h = readWavHeader(carry);
          if (!h) continue;
          rate = h.sampleRate;
          carry = carry.subarray(h.dataOffset);
        }
        // Whole samples out; an odd byte waits for the next chunk.
        const even = carry.length & ~1;
        if (even === 0) continue;
        const pcm16 = bytesToPcm16(carry.subarray(0, even));
        carry = carry.subarray(even);
        yield { pcm16, sampleRate: rate };
      }
      if (rate === 0) throw new SpeechError(this.name, 'failed', 'speech: the answer ended before its WAV header did');
    } catch (err) {
      if (err instanceof WavError) throw new SpeechError(this.name, 'failed', `speech: the answer is not a PCM16 mono WAV: ${err.message}`);
      if (timedOut && !opts.signal?.aborted) throw new SpeechError(this.name, 'timeout', `speech: the audio did not end within ${this.timeoutMs} ms of the answer`);
      throw await failure(this.name, err, opts.signal, 'speech');
    } finally {
      clearTimeout(timer);
      stopped.abort();
    }
  }

  check(): Promise<void> {
    return Promise.resolve();
  }
}
