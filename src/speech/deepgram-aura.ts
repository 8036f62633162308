// Text to speech with Deepgram Aura, through its official client, @deepgram/sdk 5:
// - Streamed replies: `speak.v1.connect` (WebSocket `/v1/speak?model&encoding&sample_rate`), one
//   socket per reply. Each piece of text goes as `{"type":"Speak"}`; a sentence's end and end()
//   send `{"type":"Flush"}` (Aura speaks what it holds on a flush); audio comes back as binary
//   frames (`mulaw` or `linear16` at the rate asked), and a `Flushed` answers each flush. The reply
//   is complete when every flush is answered after end(); then `{"type":"Close"}`. Cancelling
//   sends `{"type":"Clear"}` (Aura drops what it holds) and closes the socket.
// - One-shot synthesis: `speak.v1.audio.generate` (POST /v1/speak, linear16 at 16 kHz, no
//   container, read as it streams).
// - Voices: `manage.v1.models.list` (GET /v1/models), its `tts` models.
//
// The key goes as `Authorization: Token <key>` (the client's own scheme). The client's socket
// reconnects by default; a reply's socket must not (a reconnected socket has lost the text), so it
// is told not to, and its waits are bounded here.
import type { DeepgramClient } from '@deepgram/sdk';
import { synthesisText } from './input.ts';
import {
  chooseVoice, collectSpeech, pcmBody, providerError, ProviderStream, shortText, socketBase,
  streamFormat, type StreamBounds, StreamedVoiceEngine, type StreamedVoiceOptions, vendorFailure,
} from './tts-stream.ts';
import {
  SpeechError, type Speech, type SpeechChunk, type SynthesisEncoding, type StreamSampleRate, type SynthesisStream,
  type SynthesisStreamOptions, type SynthesizeOptions, type TextToSpeech, type VoiceInfo,
} from './types.ts';
import { vendorFetch } from './vendor-fetch.ts';

export const DEEPGRAM_AURA = 'deepgram';
export const DEEPGRAM_BASE = 'https://api.deepgram.com';
/**
 * What `en-US Female` and the like stand for: Aura-2 voices of Deepgram's documented catalog, by
 * language (each Aura voice speaks one). Other languages: name the voice (`aura-2-<name>-<lang>`).
 */
export const DEEPGRAM_AURA_DEFAULT_VOICES = {
  en: { female: 'aura-2-thalia-en', male: 'aura-2-apollo-en' },
  es: { female: 'aura-2-celeste-es', male: 'aura-2-alvaro-es' },
} as const;
/** The form of the provider's own voice ids (agentVoice with agentTtsEngine naming it). */
export const DEEPGRAM_AURA_VOICE_ID = /^aura(-2)?-[a-z]+-[a-z]{2}$/;
const ONE_SHOT_RATE = 16_000;

export type DeepgramAuraOptions = StreamedVoiceOptions;

type Sdk = typeof import('@deepgram/sdk');
let sdk: Promise<Sdk> | undefined;
const loadSdk = () => (sdk ??= import('@deepgram/sdk'));

type SpeakSocket = Awaited<ReturnType<DeepgramClient['speak']['v1']['connect']>>;

/** The HTTP status in a refused handshake's message ("Unexpected server response: 401"). */
function handshakeStatus(message: string): number | undefined {
  const m = /Unexpected server response: (\d{3})/.exec(message);
  return m ? Number(m[1]) : undefined;
}

export class DeepgramAuraEngine extends StreamedVoiceEngine implements TextToSpeech {
  readonly name = DEEPGRAM_AURA;
  private client: Promise<DeepgramClient> | undefined;

  constructor(opts: DeepgramAuraOptions) {
    super(opts, { baseUrl: DEEPGRAM_BASE, voices: DEEPGRAM_AURA_DEFAULT_VOICES });
  }

  private sdkClient(): Promise<DeepgramClient> {
    const ws = socketBase(this.baseUrl);
    this.client ??= loadSdk().then(({ DeepgramClient: Client }) => new Client({
      apiKey: this.apiKey,
      environment: { base: this.baseUrl, production: ws, agent: ws, agentRest: this.baseUrl },
      timeoutInSeconds: this.timeoutMs / 1000, maxRetries: this.maxRetries, reconnect: false, fetch: vendorFetch,
    }));
    return this.client;
  }

  private async failure(err: unknown, what: string, signal?: AbortSignal): Promise<unknown> {
    const { DeepgramError, DeepgramTimeoutError } = await loadSdk();
    return vendorFailure(this.name, what, err, signal, {
      timedOut: (e) => e instanceof DeepgramTimeoutError, apiStatus: (e) => (e instanceof DeepgramError ? { status: e.statusCode as number | undefined } : undefined),
    });
  }

  openStream(opts: SynthesisStreamOptions): SynthesisStream {
    const format = streamFormat(this.name, opts);
    const voice = chooseVoice(this.name, opts, this.voiceDefaults, DEEPGRAM_AURA_VOICE_ID);
    return new AuraStream(this.name, format, this.bounds, async () => (await this.sdkClient()).speak.v1.connect({
      model: voice, encoding: format.encoding === 'mulaw' ? 'mulaw' : 'linear16', sample_rate: String(format.sampleRate),
      ...(opts.speed !== undefined ? { speed: opts.speed } : {}),
      reconnectAttempts: 0, shouldReconnect: () => false, connectionTimeoutInSeconds: this.bounds.openMs / 1000,
    }), opts.signal).begin();
  }

  async *synthesizeStream(text: string, opts: SynthesizeOptions): AsyncGenerator<SpeechChunk> {
    opts.signal?.throwIfAborted();
    const input = synthesisText(this.name, text);
    const voice = chooseVoice(this.name, opts, this.voiceDefaults, DEEPGRAM_AURA_VOICE_ID);
    if (input === '') return;
    const stopped = new AbortController();
    const signal = opts.signal ? AbortSignal.any([opts.signal, stopped.signal]) : stopped.signal;
    try {
      const res = await (await this.sdkClient()).speak.v1.audio.generate({
        text: input, model: voice, encoding: 'linear16', sample_rate: ONE_SHOT_RATE, container: 'none',
        ...(opts.speed !== undefined ? { speed: opts.speed } : {}),
      }, { abortSignal: signal });
      const body = res.stream();
      if (!body) throw new SpeechError(this.name, 'failed', 'speech: the answer has no body');
      yield* pcmBody(this.name, body as unknown as AsyncIterable<Uint8Array>, ONE_SHOT_RATE, this.timeoutMs, () => stopped.abort());
    } catch (err) {
      throw await this.failure(err, 'speech', opts.signal);
    } finally {
      stopped.abort();
    }
  }

  /** PCM16 at 16 kHz (POST /v1/speak). */
  async synthesize(text: string, opts: SynthesizeOptions): Promise<Speech> {
    return collectSpeech(this.name, this.synthesizeStream(text, opts), ONE_SHOT_RATE);
  }

  /** Aura's voices (the `tts` models of GET /v1/models); the id is the model's canonical name. */
  /** Loads the vendor's client (TextToSpeech.ready). */
  async ready(): Promise<void> {
    await this.sdkClient();
  }

  async listVoices(signal?: AbortSignal): Promise<VoiceInfo[]> {
    try {
      const r = await (await this.sdkClient()).manage.v1.models.list({}, { ...(signal ? { abortSignal: signal } : {}) });
      return (r.tts ?? []).filter((m) => m.canonical_name).map((m) => {
        const tags = (m.metadata?.tags ?? []).map((t) => t.toLowerCase());
        const gender = tags.includes('feminine') ? 'female' : tags.includes('masculine') ? 'male' : undefined;
        const language = m.languages?.find((l) => l.includes('-')) ?? m.languages?.[0];
        return {
          id: m.canonical_name!, name: m.name ?? m.canonical_name!, engine: this.name,
          ...(language ? { language } : {}),
          ...(gender ? { gender } : {}),
          ...(m.metadata?.sample ? { previewUrl: m.metadata.sample } : {}),
        };
      });
    } catch (err) {
      throw await this.failure(err, 'voices', signal);
    }
  }

  async check(signal?: AbortSignal): Promise<void> {
    await this.listVoices(signal);
  }
}

class AuraStream extends ProviderStream {
  private sock: SpeakSocket | undefined;
  private flushesSent = 0;
  private flushesAnswered = 0;
  private ending = false;
  /** Binary frames arrive as Blobs, read asynchronously: in order, through this chain. */
  private reading: Promise<void> = Promise.resolve();

  constructor(engine: string, format: { encoding: SynthesisEncoding; sampleRate: StreamSampleRate }, bounds: StreamBounds,
    private readonly open: () => Promise<SpeakSocket>, signal?: AbortSignal) {
    super(engine, format, bounds, signal);
  }

  begin(): this {
    return this.start();
  }

  protected async connect(): Promise<void> {
    const sock = await this.open();
    this.sock = sock;
    await new Promise<void>((resolve, reject) => {
      let opened = false;
      const fail = (e: SpeechError) => {
        if (opened) this.failed(e);
        else reject(e);
      };
      sock.on('open', () => {
        opened = true;
        resolve();
      });
      sock.on('error', (err: Error | { message?: string }) => {
        const message = err?.message ?? 'WebSocket error';
        const status = handshakeStatus(message);
        fail(status !== undefined
          ? providerError(this.engine, 'speak', status, 'the WebSocket handshake was refused')
          : new SpeechError(this.engine, 'failed', `speak: ${shortText(message)}`));
      });
      sock.on('close', (ev: { code?: number; reason?: string }) => {
        const closed = () => fail(new SpeechError(this.engine, 'failed', `speak: the socket closed before the reply's last audio (${ev?.code ?? 'no code'}${ev?.reason ? ` ${shortText(ev.reason)}` : ''})`));
        // A refused handshake is reported as a close, then as the error that says why: the
        // error, when it follows, is the cause given.
        if (opened) closed();
        else setImmediate(closed);
      });
      sock.on('message', (m: unknown) => this.message(m));
      sock.connect();
    });
  }

  private message(m: unknown): void {
    if (m instanceof Blob) {
      this.reading = this.reading.then(async () => this.audio(new Uint8Array(await m.arrayBuffer())));
      return;
    }
    const msg = m as { type?: string; description?: string; code?: string; err_msg?: string };
    this.reading = this.reading.then(() => {
      if (msg.type === 'Flushed') {
        this.flushesAnswered++;
        if (this.ending && this.flushesAnswered >= this.flushesSent) this.finished();
      } else if (msg.type === 'Warning' || msg.type === 'Error') {
        this.failed(new SpeechError(this.engine, 'failed', `speak: ${shortText(msg.code)} ${shortText(msg.description ?? msg.err_msg)}`));
      }
    });
  }

  protected sendText(text: string, flush: boolean): void {
    this.sock!.sendText({ type: 'Speak', text });
    if (flush) {
      this.flushesSent++;
      this.sock!.sendFlush({ type: 'Flush' });
    }
  }

  protected sendEnd(): void {
    this.ending = true;
    this.flushesSent++;
    this.sock!.sendFlush({ type: 'Flush' });
  }

  protected stop(why: 'done' | 'cancelled' | 'failed'): void {
    const sock = this.sock;
    if (!sock) return;
    try {
      if (sock.readyState === 1) {
        // Clear drops what Aura holds; Close ends the session.
        if (why !== 'done') sock.sendClear({ type: 'Clear' });
        sock.sendClose({ type: 'Close' });
      }
    } finally {
      sock.close();
    }
  }
}
