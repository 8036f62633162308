// What every streamed synthesis engine (ElevenLabs, Cartesia, Deepgram Aura) does the same way,
// written once: the SynthesisStream a reply gets (text in while the socket opens, audio out in
// order, cancel at once), its three bounded waits, the audio's bytes turned into chunks, and the
// one-shot helpers over HTTP streaming. An engine supplies only its provider's protocol: a subclass
// of ProviderStream with connect / sendText / sendEnd / stop.
//
// Bounds (StreamBounds): the socket must open within `openMs`; the first audio must come within
// `firstAudioMs` of the first text that asks for audio (a sentence's end, or end()); the whole
// reply, from openStream() to the provider's last audio, within `replyMs`. A provider that closes
// its socket before its last audio is an error, never a wait.
import { performance } from 'node:perf_hooks';
import { decodeG711 } from '../media/g711.ts';
import { bytesToPcm16 } from './wav.ts';
import { languageTag, speedFactor } from './input.ts';
import {
  MAX_STREAM_CHARS, SpeechError, type Speech, type SpeechChunk, type SynthesisEncoding, type StreamSampleRate,
  type SynthesisChunk, type SynthesisStream, type SynthesisStreamOptions, type SynthesisTiming, type SynthesizeOptions,
} from './types.ts';

export interface StreamBounds {
  /** The provider's socket open (handshake and key check included). */
  openMs: number;
  /** From the first text that asks for audio to the first audio. */
  firstAudioMs: number;
  /** From openStream() to the provider's last audio. */
  replyMs: number;
}

export const DEFAULT_STREAM_BOUNDS: StreamBounds = { openMs: 5000, firstAudioMs: 5000, replyMs: 120_000 };

/** One reply is at most a few minutes of speech: 16 MB is past 30 min of 8 kHz PCM16. */
export const MAX_STREAM_BYTES = 16 * 1024 * 1024;

const SENTENCE_END = /[.!?…。！？:;]["'”’)\]]*\s*$/u;

/** Whether a pushed piece ends a sentence (then the provider is asked to speak what it holds). */
export function endsSentence(text: string): boolean {
  return SENTENCE_END.test(text);
}

/** The encoding a stream gets: as asked, μ-law by default at 8 kHz, refused at any other rate. */
export function streamFormat(engine: string, opts: SynthesisStreamOptions): { encoding: SynthesisEncoding; sampleRate: StreamSampleRate } {
  const rate = opts.sampleRate;
  if (![8000, 16000, 22050, 24000].includes(rate)) {
    throw new SpeechError(engine, 'input', `sampleRate must be 8000, 16000, 22050 or 24000 (got ${String(rate)})`);
  }
  const encoding = opts.encoding ?? (rate === 8000 ? 'mulaw' : 'pcm');
  if (encoding !== 'mulaw' && encoding !== 'pcm') throw new SpeechError(engine, 'input', `encoding must be mulaw or pcm (got '${String(encoding)}')`);
  if (encoding === 'mulaw' && rate !== 8000) throw new SpeechError(engine, 'input', `μ-law is spoken at 8000 Hz only (asked for ${rate})`);
  return { encoding, sampleRate: rate };
}

/**
 * The voice for a request: the engine's own id when one is named (checked against `idPattern`),
 * else the engine's default for the language's primary subtag and the gender (female when none).
 */
export function chooseVoice(
  engine: string, opts: SynthesizeOptions, defaults: Readonly<Record<string, { female: string; male: string }>>, idPattern: RegExp,
): string {
  const tag = languageTag(engine, opts.language);
  speedFactor(engine, opts.speed);
  if (opts.voice !== undefined) {
    if (!idPattern.test(opts.voice)) throw new SpeechError(engine, 'input', `'${opts.voice}' is not a ${engine} voice id`);
    return opts.voice;
  }
  const pair = defaults[tag.language] ?? defaults['*'];
  if (!pair) {
    throw new SpeechError(engine, 'input', `no default ${engine} voice for '${opts.language}' (languages: ${Object.keys(defaults).join(', ')}); name the provider's voice id`);
  }
  return pair[opts.gender ?? 'female'];
}

/** A provider's error on a request: 401/403 said as a refused key (never echoing it), timeouts as such. */
export function providerError(engine: string, what: string, status: number | undefined, detail: string): SpeechError {
  if (status === 401 || status === 403) {
    return new SpeechError(engine, 'failed', `${what}: the API key was refused (${status})`, status);
  }
  return new SpeechError(engine, 'failed', `${what}: ${status ?? 'no status'} ${detail}`.trim(), status);
}

/** What every streamed voice is built with. */
export interface StreamedVoiceOptions {
  apiKey: string;
  /** The API's base (each vendor has its default); its ws(s):// form serves the socket. */
  baseUrl?: string;
  /** Voices standing for the genders, per primary language (`*`: any). */
  voices?: Readonly<Record<string, { female: string; male: string }>>;
  bounds?: Partial<StreamBounds>;
  /** One HTTP request's wait for its answer, and then for the rest of the audio (default 15 s). */
  timeoutMs?: number;
  maxRetries?: number;
}

/**
 * What every streamed voice holds: its key and base URL, the voices standing for the genders, its
 * stream bounds and its HTTP client's timeout and retries, each with the engine's defaults.
 */
export abstract class StreamedVoiceEngine {
  readonly offline = false;
  protected readonly apiKey: string;
  protected readonly baseUrl: string;
  protected readonly voiceDefaults: Readonly<Record<string, { female: string; male: string }>>;
  protected readonly bounds: StreamBounds;
  protected readonly timeoutMs: number;
  protected readonly maxRetries: number;

  constructor(opts: StreamedVoiceOptions, defaults: { baseUrl: string; voices: Readonly<Record<string, { female: string; male: string }>> }) {
    this.apiKey = opts.apiKey;
    this.baseUrl = (opts.baseUrl ?? defaults.baseUrl).replace(/\/+$/, '');
    this.voiceDefaults = opts.voices ?? defaults.voices;
    this.bounds = { ...DEFAULT_STREAM_BOUNDS, ...opts.bounds };
    this.timeoutMs = opts.timeoutMs ?? 15_000;
    this.maxRetries = opts.maxRetries ?? 1;
  }
}

/**
 * A vendor client's failure as a SpeechError naming the engine: ours pass through, an abort is the
 * abort's reason, the client's timeout a `timeout`, its API error by status (`apiStatus` answers
 * for the client's own error class: `{ status }`, else undefined), anything else `failed`.
 */
export function vendorFailure(
  engine: string, what: string, err: unknown, signal: AbortSignal | undefined,
  client: { timedOut(err: unknown): boolean; apiStatus(err: unknown): { status: number | undefined } | undefined },
): unknown {
  if (err instanceof SpeechError) return err;
  if (signal?.aborted) return signal.reason ?? err;
  if (client.timedOut(err)) return new SpeechError(engine, 'timeout', `${what}: the request timed out`);
  const api = client.apiStatus(err);
  if (api) return providerError(engine, what, api.status, shortText((err as Error).message));
  return new SpeechError(engine, 'failed', `${what}: ${shortText((err as Error).message)}`);
}

/** Cuts a provider's text (an error body, a close reason) to a line we may log. */
export function shortText(s: string | null | undefined, max = 200): string {
  const t = (s ?? '').replace(/\s+/g, ' ').trim();
  return t.length > max ? `${t.slice(0, max)}…` : t;
}

/** Bytes of one encoding to samples; `carry` holds an odd byte of PCM16 until the next piece. */
export class AudioDecoder {
  private carry: Buffer = Buffer.alloc(0);
  constructor(readonly encoding: SynthesisEncoding) {}

  /** Whole samples of `bytes` (with what was carried), or null when there is none yet. */
  decode(bytes: Uint8Array): { audio: Buffer; pcm16: Int16Array } | null {
    if (this.encoding === 'mulaw') {
      if (bytes.byteLength === 0) return null;
      const audio = Buffer.from(bytes);
      return { audio, pcm16: decodeG711('PCMU', audio) };
    }
    const all = this.carry.length ? Buffer.concat([this.carry, bytes]) : Buffer.from(bytes);
    const even = all.length & ~1;
    this.carry = all.subarray(even);
    if (even === 0) return null;
    const audio = all.subarray(0, even);
    return { audio, pcm16: bytesToPcm16(audio) };
  }
}

type State = 'opening' | 'open' | 'ending' | 'done' | 'failed' | 'cancelled';

/**
 * A SynthesisStream over one provider socket. The subclass opens the socket in connect(), sends
 * what push() and end() give it, and reports back with audio(), finished() and failed(); this class
 * keeps the text that arrives while the socket opens, the chunks until they are read, the bounds,
 * and what cancel() and a failure stop.
 */
export abstract class ProviderStream implements SynthesisStream {
  readonly encoding: SynthesisEncoding;
  readonly sampleRate: StreamSampleRate;
  readonly timing: SynthesisTiming = { startedAt: performance.now() };
  private state: State = 'opening';
  private readonly pending: { text: string; flush: boolean }[] = [];
  private endPending = false;
  private chars = 0;
  private bytes = 0;
  private readonly queue: SynthesisChunk[] = [];
  private wake: (() => void) | undefined;
  private error: unknown;
  private iterated = false;
  private readonly decoder: AudioDecoder;
  private readonly timers: NodeJS.Timeout[] = [];
  private firstAudioTimer: NodeJS.Timeout | undefined;
  private readonly signal: AbortSignal | undefined;
  private readonly onAbort = () => this.cancel();

  constructor(readonly engine: string, format: { encoding: SynthesisEncoding; sampleRate: StreamSampleRate }, protected readonly bounds: StreamBounds, signal?: AbortSignal) {
    this.encoding = format.encoding;
    this.sampleRate = format.sampleRate;
    this.decoder = new AudioDecoder(format.encoding);
    this.signal = signal;
  }

  /** Starts the socket; the engine calls it once, right after construction. */
  protected start(): this {
    if (this.signal?.aborted) {
      this.state = 'cancelled';
      this.timing.endedAt = performance.now();
      return this;
    }
    this.signal?.addEventListener('abort', this.onAbort, { once: true });
    this.timers.push(setTimeout(() => this.failed(new SpeechError(this.engine, 'timeout', `the reply's audio did not end within ${this.bounds.replyMs} ms`)), this.bounds.replyMs));
    const openTimer = setTimeout(() => this.failed(new SpeechError(this.engine, 'timeout', `the socket did not open within ${this.bounds.openMs} ms`)), this.bounds.openMs);
    this.timers.push(openTimer);
    this.connect().then(() => {
      clearTimeout(openTimer);
      if (this.state !== 'opening') return;
      this.timing.openedAt = performance.now();
      this.state = 'open';
      for (const p of this.pending.splice(0)) this.send(p.text, p.flush);
      if (this.endPending) this.sendEndNow();
    }, (err: unknown) => this.failed(err));
    return this;
  }

  /** Opens the provider's socket (resolves when it is open; rejects with what refused it). */
  protected abstract connect(): Promise<void>;
  /** Sends a piece of text; `flush` when it ends a sentence. */
  protected abstract sendText(text: string, flush: boolean): void;
  /** Says no more text comes: the provider speaks what it holds and then ends. */
  protected abstract sendEnd(): void;
  /**
   * Closes the socket, quietly; on `cancelled` and `failed` the provider is first told to stop
   * generating where its protocol has a message for it.
   */
  protected abstract stop(why: 'done' | 'cancelled' | 'failed'): void;

  get active(): boolean {
    return this.state === 'opening' || this.state === 'open' || this.state === 'ending';
  }

  push(text: string): void {
    if (this.state === 'ending' || this.endPending) throw new SpeechError(this.engine, 'input', 'text pushed after end()');
    if (!this.active) return;
    // eslint-disable-next-line no-control-regex
    const clean = text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, ' ');
    if (clean.trim() === '') return;
    this.chars += [...clean].length;
    if (this.chars > MAX_STREAM_CHARS) {
      const err = new SpeechError(this.engine, 'input', `the reply is longer than ${MAX_STREAM_CHARS} characters`);
      this.failed(err);
      throw err;
    }
    const flush = endsSentence(clean);
    if (this.state === 'opening') this.pending.push({ text: clean, flush });
    else this.send(clean, flush);
  }

  end(): void {
    if (this.state === 'opening') {
      this.endPending = true;
      return;
    }
    if (this.state === 'open') this.sendEndNow();
  }

  cancel(): void {
    if (!this.active) return;
    this.state = 'cancelled';
    this.queue.length = 0;
    this.close('cancelled');
  }

  get chunks(): AsyncIterable<SynthesisChunk> {
    return { [Symbol.asyncIterator]: () => this.iterate() };
  }

  private async *iterate(): AsyncGenerator<SynthesisChunk> {
    if (this.iterated) throw new Error('a SynthesisStream has one reader');
    this.iterated = true;
    try {
      for (;;) {
        if (this.state === 'cancelled') return;
        const c = this.queue.shift();
        if (c) {
          yield c;
          continue;
        }
        if (this.state === 'done') return;
        if (this.state === 'failed') throw this.error;
        await new Promise<void>((r) => (this.wake = r));
      }
    } finally {
      // A reader that stops early (break, a throw in its loop) wants no more of this reply.
      this.cancel();
    }
  }

  private send(text: string, flush: boolean): void {
    try {
      this.sendText(text, flush);
    } catch (err) {
      this.failed(err);
      return;
    }
    if (flush) this.startFirstAudioBound();
  }

  private sendEndNow(): void {
    this.state = 'ending';
    if (this.chars === 0) {
      // Nothing to say: the provider is not asked for silence.
      this.finished();
      return;
    }
    try {
      this.sendEnd();
    } catch (err) {
      this.failed(err);
      return;
    }
    this.startFirstAudioBound();
  }

  /** Text that asks for audio went out: the first-audio bound starts (once). */
  private startFirstAudioBound(): void {
    if (this.timing.firstFlushAt !== undefined || this.timing.firstAudioAt !== undefined) return;
    this.timing.firstFlushAt = performance.now();
    this.firstAudioTimer = setTimeout(() => {
      this.failed(new SpeechError(this.engine, 'timeout', `no audio within ${this.bounds.firstAudioMs} ms of the first sentence`));
    }, this.bounds.firstAudioMs);
  }

  /** The subclass hands over audio bytes as they arrive, in order. */
  protected audio(bytes: Uint8Array): void {
    if (!this.active) return;
    this.bytes += bytes.byteLength;
    if (this.bytes > MAX_STREAM_BYTES) {
      this.failed(new SpeechError(this.engine, 'failed', `the reply's audio grew past ${MAX_STREAM_BYTES} bytes`));
      return;
    }
    const d = this.decoder.decode(bytes);
    if (!d) return;
    if (this.timing.firstAudioAt === undefined) {
      this.timing.firstAudioAt = performance.now();
      clearTimeout(this.firstAudioTimer);
    }
    this.queue.push({ ...d, encoding: this.encoding, sampleRate: this.sampleRate });
    this.wakeReader();
  }

  /** The provider sent its last audio. Only after end(): before it, the provider has no reason to stop. */
  protected finished(): void {
    if (!this.active) return;
    if (this.state !== 'ending') {
      this.failed(new SpeechError(this.engine, 'failed', 'the provider ended the reply before it was told the text was complete'));
      return;
    }
    this.state = 'done';
    this.close('done');
  }

  /** Anything that ends the stream in error (a refusal, a bound, a dropped socket). */
  protected failed(err: unknown): void {
    if (!this.active) return;
    this.state = 'failed';
    this.error = err instanceof SpeechError ? err : new SpeechError(this.engine, 'failed', shortText((err as Error)?.message ?? String(err as string)));
    this.close('failed');
  }

  private close(why: 'done' | 'cancelled' | 'failed'): void {
    this.timing.endedAt = performance.now();
    for (const t of this.timers) clearTimeout(t);
    clearTimeout(this.firstAudioTimer);
    this.signal?.removeEventListener('abort', this.onAbort);
    try {
      this.stop(why);
    } catch {
      // The socket is going anyway.
    }
    this.wakeReader();
  }

  private wakeReader(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }
}

/**
 * PCM16 little-endian bytes of an HTTP answer as chunks at `sampleRate`, read within `timeoutMs`
 * of the answer and at most MAX_STREAM_BYTES; `cancel` stops the body (a timeout, or a reader that
 * stopped).
 */
export async function* pcmBody(
  engine: string, body: AsyncIterable<Uint8Array>, sampleRate: number, timeoutMs: number, cancel: () => void,
): AsyncGenerator<SpeechChunk> {
  const decoder = new AudioDecoder('pcm');
  let timedOut = false;
  let bytes = 0;
  const timer = setTimeout(() => {
    timedOut = true;
    cancel();
  }, timeoutMs);
  try {
    for await (const piece of body) {
      bytes += piece.byteLength;
      if (bytes > MAX_STREAM_BYTES) throw new SpeechError(engine, 'failed', `speech: the answer grew past ${MAX_STREAM_BYTES} bytes`);
      const d = decoder.decode(piece);
      if (d) yield { pcm16: d.pcm16, sampleRate };
    }
  } catch (err) {
    if (timedOut) throw new SpeechError(engine, 'timeout', `speech: the audio did not end within ${timeoutMs} ms of the answer`);
    throw err;
  } finally {
    clearTimeout(timer);
    cancel();
  }
  if (timedOut) throw new SpeechError(engine, 'timeout', `speech: the audio did not end within ${timeoutMs} ms of the answer`);
}

/** A whole synthesis from its chunks. */
export async function collectSpeech(engine: string, chunks: AsyncIterable<SpeechChunk>, sampleRate: number, model?: string): Promise<Speech> {
  const pieces: Int16Array[] = [];
  let n = 0;
  for await (const c of chunks) {
    pieces.push(c.pcm16);
    n += c.pcm16.length;
  }
  const pcm16 = new Int16Array(n);
  let at = 0;
  for (const p of pieces) {
    pcm16.set(p, at);
    at += p.length;
  }
  return { pcm16, sampleRate, engine, ...(model ? { model } : {}) };
}

/** `ws://` or `wss://` for an http(s) base URL (one base serves a vendor's HTTP and WebSocket APIs). */
export function socketBase(httpBase: string): string {
  return httpBase.replace(/^http(s?):/, 'ws$1:').replace(/\/+$/, '');
}
