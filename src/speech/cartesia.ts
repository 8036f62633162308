// Text to speech with Cartesia (Sonic), through its official client, @cartesia/cartesia-js 4.2:
// - Streamed replies: `client.tts` WebSocket (`/tts/websocket`), one socket and one context per
//   reply; each piece of text goes as a continuation (`continue: true`, with `flush` at a
//   sentence's end), end() sends the empty final transcript (`continue: false`), and the context's
//   `chunk` events carry the audio (raw `pcm_mulaw` or `pcm_s16le` at the rate asked) until `done`.
//   Cancelling sends the context's `cancel` and closes the socket.
// - One-shot synthesis: `tts.generate` (POST /tts/bytes, raw pcm_s16le at 16 kHz, read as it streams).
// - Voices: `voices.list` (GET /voices, paged).
//
// The client is loaded as CommonJS (createRequire): that build opens the socket with `ws`, the key
// in the Authorization header; its ES-module build falls back to a global WebSocket where one
// exists, which puts the key in the URL. The client always asks for `wss:`; for a base URL in
// http: (a test double, a plain-HTTP proxy on loopback) the socket is given a plain TCP connection
// instead of TLS, so one base URL serves both APIs as it does for the other vendors. The client's
// socket neither reports a close to a context nor bounds its waits: both are done here.
import { createRequire } from 'node:module';
import net from 'node:net';
import type { Cartesia as CartesiaClient } from '@cartesia/cartesia-js';
import type { TTSWS, TTSWSContext } from '@cartesia/cartesia-js/resources/tts/index';
import { synthesisText } from './input.ts';
import {
  chooseVoice, collectSpeech, pcmBody, providerError, ProviderStream, shortText, streamFormat,
  type StreamBounds, StreamedVoiceEngine, type StreamedVoiceOptions, vendorFailure,
} from './tts-stream.ts';
import {
  SpeechError, type Speech, type SpeechChunk, type SynthesisEncoding, type StreamSampleRate, type SynthesisStream,
  type SynthesisStreamOptions, type SynthesizeOptions, type TextToSpeech, type VoiceInfo,
} from './types.ts';
import { vendorFetch } from './vendor-fetch.ts';

export const CARTESIA = 'cartesia';
export const CARTESIA_BASE = 'https://api.cartesia.ai';
export const CARTESIA_DEFAULT_MODEL = 'sonic-3';
/**
 * What `en-US Female` and `… Male` stand for: Katie (Cartesia's realtime quickstart voice, one it
 * recommends for voice agents) and Barbershop Man (the voice of its client libraries' examples).
 * Sonic voices speak every language the model does, so one pair serves all.
 */
export const CARTESIA_DEFAULT_VOICES = {
  '*': { female: 'f786b574-daa5-4673-aa0c-cbe3e8534c02', male: 'a0e99841-438c-4a64-b679-ae501e7d6091' },
} as const;
/** The form of the provider's own voice ids (agentVoice with agentTtsEngine naming it). */
export const CARTESIA_VOICE_ID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const ONE_SHOT_RATE = 16_000;
const MAX_VOICES = 1000;
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

export interface CartesiaOptions extends StreamedVoiceOptions {
  model?: string;
}

type Sdk = typeof import('@cartesia/cartesia-js') & { TTSWS: typeof TTSWS };
let sdk: Sdk | undefined;
function loadSdk(): Sdk {
  if (!sdk) {
    const require = createRequire(import.meta.url);
    const main = require('@cartesia/cartesia-js') as typeof import('@cartesia/cartesia-js');
    const tts = require('@cartesia/cartesia-js/resources/tts/index') as { TTSWS: typeof TTSWS };
    sdk = { ...main, TTSWS: tts.TTSWS };
  }
  return sdk;
}

/** The HTTP status in the `ws` client's message for a refused handshake ("Unexpected server response: 401"). */
function handshakeStatus(message: string): number | undefined {
  const m = /Unexpected server response: (\d{3})/.exec(message);
  return m ? Number(m[1]) : undefined;
}

export class CartesiaEngine extends StreamedVoiceEngine implements TextToSpeech {
  readonly name = CARTESIA;
  readonly model: string;
  private sdkClient: CartesiaClient | undefined;

  constructor(opts: CartesiaOptions) {
    super(opts, { baseUrl: CARTESIA_BASE, voices: CARTESIA_DEFAULT_VOICES });
    this.model = opts.model ?? CARTESIA_DEFAULT_MODEL;
  }

  private client(): CartesiaClient {
    this.sdkClient ??= new (loadSdk().Cartesia)({ apiKey: this.apiKey, baseURL: this.baseUrl, timeout: this.timeoutMs, maxRetries: this.maxRetries, fetch: vendorFetch });
    return this.sdkClient;
  }

  private failure(err: unknown, what: string, signal?: AbortSignal): unknown {
    const { APIError, APIConnectionTimeoutError } = loadSdk();
    return vendorFailure(this.name, what, err, signal, {
      timedOut: (e) => e instanceof APIConnectionTimeoutError, apiStatus: (e) => (e instanceof APIError ? { status: e.status as number | undefined } : undefined),
    });
  }

  openStream(opts: SynthesisStreamOptions): SynthesisStream {
    const format = streamFormat(this.name, opts);
    const voice = chooseVoice(this.name, opts, this.voiceDefaults, CARTESIA_VOICE_ID);
    const language = opts.language.split(/[-_]/)[0]!.toLowerCase();
    const plain = this.baseUrl.startsWith('http:');
    return new CartesiaStream(this.name, format, this.bounds, () => {
      const { TTSWS: Socket } = loadSdk();
      return new Socket(this.client(), {
        handshakeTimeout: this.bounds.openMs, maxPayload: MAX_MESSAGE_BYTES, perMessageDeflate: false,
        ...(plain ? { createConnection: net.createConnection } : {}),
      });
    }, {
      model_id: this.model,
      voice: { mode: 'id', id: voice },
      output_format: { container: 'raw', encoding: format.encoding === 'mulaw' ? 'pcm_mulaw' : 'pcm_s16le', sample_rate: format.sampleRate },
      language,
    }, opts.speed !== undefined ? { speed: Math.min(1.5, Math.max(0.6, opts.speed)) } : undefined, opts.signal).begin();
  }

  async *synthesizeStream(text: string, opts: SynthesizeOptions): AsyncGenerator<SpeechChunk> {
    opts.signal?.throwIfAborted();
    const input = synthesisText(this.name, text);
    const voice = chooseVoice(this.name, opts, this.voiceDefaults, CARTESIA_VOICE_ID);
    if (input === '') return;
    const stopped = new AbortController();
    const signal = opts.signal ? AbortSignal.any([opts.signal, stopped.signal]) : stopped.signal;
    try {
      const res = await this.client().tts.generate({
        model_id: this.model, transcript: input, voice: { mode: 'id', id: voice } as unknown as string,
        output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: ONE_SHOT_RATE },
        language: opts.language.split(/[-_]/)[0]!.toLowerCase() as 'en',
        ...(opts.speed !== undefined ? { generation_config: { speed: Math.min(1.5, Math.max(0.6, opts.speed)) } } : {}),
      }, { signal });
      if (!res.body) throw new SpeechError(this.name, 'failed', 'speech: the answer has no body');
      yield* pcmBody(this.name, res.body as unknown as AsyncIterable<Uint8Array>, ONE_SHOT_RATE, this.timeoutMs, () => stopped.abort());
    } catch (err) {
      throw this.failure(err, 'speech', opts.signal);
    } finally {
      stopped.abort();
    }
  }

  /** PCM16 at 16 kHz (POST /tts/bytes). */
  async synthesize(text: string, opts: SynthesizeOptions): Promise<Speech> {
    return collectSpeech(this.name, this.synthesizeStream(text, opts), ONE_SHOT_RATE, this.model);
  }

  /** The voices the key can use (GET /voices, every page up to a thousand voices). */
  /** Loads the vendor's client (TextToSpeech.ready). */
  ready(): Promise<void> {
    this.client();
    return Promise.resolve();
  }

  async listVoices(signal?: AbortSignal): Promise<VoiceInfo[]> {
    const out: VoiceInfo[] = [];
    try {
      for await (const v of this.client().voices.list({ limit: 100, expand: ['preview_file_url'] }, { ...(signal ? { signal } : {}) })) {
        const gender = v.gender === 'feminine' ? 'female' : v.gender === 'masculine' ? 'male' : undefined;
        out.push({
          id: v.id, name: v.name, engine: this.name,
          ...(v.language ? { language: v.language } : {}),
          ...(gender ? { gender } : {}),
          ...(v.preview_file_url ? { previewUrl: v.preview_file_url } : {}),
        });
        if (out.length >= MAX_VOICES) break;
      }
    } catch (err) {
      throw this.failure(err, 'voices', signal);
    }
    return out;
  }

  async check(signal?: AbortSignal): Promise<void> {
    await this.listVoices(signal);
  }
}

type ContextOptions = Parameters<TTSWS['context']>[0];

class CartesiaStream extends ProviderStream {
  private ws: TTSWS | undefined;
  private ctx: TTSWSContext | undefined;
  /** Sends in order: the client's sends are async (each waits for the socket). */
  private sending: Promise<void> = Promise.resolve();

  constructor(engine: string, format: { encoding: SynthesisEncoding; sampleRate: StreamSampleRate }, bounds: StreamBounds,
    private readonly socket: () => TTSWS, private readonly context: ContextOptions,
    private readonly generation: { speed: number } | undefined, signal?: AbortSignal) {
    super(engine, format, bounds, signal);
  }

  begin(): this {
    return this.start();
  }

  protected async connect(): Promise<void> {
    const ws = this.socket();
    this.ws = ws;
    let opened = false;
    // After the open, a socket error or close fails the reply. Without a listener the client turns every socket error into an unhandled rejection.
    ws.on('error', (err) => {
      const status = handshakeStatus(err.message);
      const e = status !== undefined
        ? providerError(this.engine, 'websocket', status, 'the WebSocket handshake was refused')
        : new SpeechError(this.engine, 'failed', `websocket: ${shortText(err.message)}`);
      if (opened) this.failed(e);
    });
    ws.socket.addEventListener('close', (ev: { code: number; reason: string }) => {
      // Before the open, connect() rejects with the handshake's own cause.
      if (opened) this.failed(new SpeechError(this.engine, 'failed', `websocket: the socket closed before the reply's last audio (${ev.code}${ev.reason ? ` ${shortText(ev.reason)}` : ''})`));
    });
    try {
      await ws.connect();
    } catch (err) {
      const message = (err as { message?: string }).message ?? String(err);
      const status = handshakeStatus(message);
      throw status !== undefined
        ? providerError(this.engine, 'websocket', status, 'the WebSocket handshake was refused')
        : new SpeechError(this.engine, 'failed', `websocket: ${shortText(message)}`);
    }
    opened = true;
    this.ctx = ws.context(this.context);
    void this.receive(this.ctx);
  }

  private async receive(ctx: TTSWSContext): Promise<void> {
    try {
      for await (const ev of ctx.receive()) {
        if (!this.active) return;
        if (ev.type === 'chunk' && ev.audio) this.audio(ev.audio);
        else if (ev.type === 'done') this.finished();
      }
    } catch (err) {
      this.failed(new SpeechError(this.engine, 'failed', `websocket: ${shortText((err as Error).message)}`));
    }
  }

  private later(send: (ctx: TTSWSContext) => Promise<void>): void {
    const ctx = this.ctx!;
    this.sending = this.sending.then(() => (this.active ? send(ctx) : undefined)).catch((err: unknown) => this.failed(err));
  }

  protected sendText(text: string, flush: boolean): void {
    this.later((ctx) => ctx.push({ transcript: text, flush, ...(this.generation ? { generation_config: this.generation } : {}) }));
  }

  protected sendEnd(): void {
    this.later((ctx) => ctx.no_more_inputs());
  }

  protected stop(why: 'done' | 'cancelled' | 'failed'): void {
    const ws = this.ws;
    if (!ws) return;
    const ctx = this.ctx;
    // The context's cancel goes out (the socket still open) before the close frame.
    const open = ws.socket.readyState === 1;
    if (ctx && open && why !== 'done') void ctx.cancel().finally(() => ws.close());
    else if (open) ws.close();
    else {
      try {
        ws.close();
      } catch {
        // not open yet: the handshake is dropped with it
      }
    }
  }
}
