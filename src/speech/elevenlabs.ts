// Text to speech with ElevenLabs.
//
// - Streamed replies: ElevenLabs' documented WebSocket input streaming,
//   `/v1/text-to-speech/{voice_id}/stream-input`, spoken with `ws`: the official client
//   (@elevenlabs/elevenlabs-js 2.73) ships this protocol's message types (InitializeConnection,
//   SendText, CloseConnection, AudioOutput, FinalOutput), which this file follows, but no method
//   that opens the socket. One socket per reply: `{"text":" "}` opens it (voice settings, the
//   chunk schedule), each piece of text follows (ending at a word's end, with `flush` at a
//   sentence's end), `{"text":""}` says the reply is complete; audio comes back as base64 in
//   `{"audio": …}` messages, in the `output_format` asked for (`ulaw_8000`, `pcm_8000`,
//   `pcm_16000`, `pcm_22050`, `pcm_24000`), and `{"isFinal": true}` ends it. Cancelling closes the
//   socket: the provider stops generating, and nothing queued is read.
// - One-shot synthesis (`synthesize`, `synthesizeStream`) and the voices list go through the
//   official client: `textToSpeech.stream` (HTTP streaming, `pcm_16000`) and `voices.getAll`.
//
// The key goes in the `xi-api-key` header (never in a URL, a log line or an error); a refused one
// (401 on the handshake or the request, or the socket closed for an invalid key) is said as such.
import WebSocket from 'ws';
import type { ElevenLabsClient } from '@elevenlabs/elevenlabs-js';
import { synthesisText } from './input.ts';
import {
  chooseVoice, collectSpeech, pcmBody, providerError, ProviderStream, shortText, socketBase,
  streamFormat, type StreamBounds, StreamedVoiceEngine, type StreamedVoiceOptions, vendorFailure,
} from './tts-stream.ts';
import {
  SpeechError, type Speech, type SpeechChunk, type SynthesisEncoding, type SynthesisStream, type SynthesisStreamOptions,
  type SynthesizeOptions, type TextToSpeech, type VoiceInfo,
} from './types.ts';
import { vendorFetch } from './vendor-fetch.ts';

export const ELEVENLABS = 'elevenlabs';
export const ELEVENLABS_BASE = 'https://api.elevenlabs.io';
/** The lowest-latency model that speaks 32 languages (and takes `language_code`). */
export const ELEVENLABS_DEFAULT_MODEL = 'eleven_flash_v2_5';
/**
 * The voices `en-US Female` and `… Male` stand for: two of ElevenLabs' default voices (Sarah and
 * Brian), which its multilingual models speak in every language, so one pair serves all.
 */
export const ELEVENLABS_DEFAULT_VOICES = { '*': { female: 'EXAVITQu4vr4xnSDxMaL', male: 'nPczCjzI2devNBz1zQrb' } } as const;
/** The form of the provider's own voice ids (agentVoice with agentTtsEngine naming it). */
export const ELEVENLABS_VOICE_ID = /^[A-Za-z0-9]{10,40}$/;
/** The one-shot rate (PCM16). */
const ONE_SHOT_RATE = 16_000;
/** A socket message is one audio chunk in base64: a few hundred kilobytes at most. */
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

export interface ElevenLabsOptions extends StreamedVoiceOptions {
  model?: string;
}

let sdk: Promise<typeof import('@elevenlabs/elevenlabs-js')> | undefined;
const loadSdk = () => (sdk ??= import('@elevenlabs/elevenlabs-js'));

/** ElevenLabs' output_format for an encoding and rate. */
function outputFormat(encoding: SynthesisEncoding, rate: number): string {
  return encoding === 'mulaw' ? 'ulaw_8000' : `pcm_${rate}`;
}

export class ElevenLabsEngine extends StreamedVoiceEngine implements TextToSpeech {
  readonly name = ELEVENLABS;
  readonly model: string;
  private client: Promise<ElevenLabsClient> | undefined;

  constructor(opts: ElevenLabsOptions) {
    super(opts, { baseUrl: ELEVENLABS_BASE, voices: ELEVENLABS_DEFAULT_VOICES });
    this.model = opts.model ?? ELEVENLABS_DEFAULT_MODEL;
  }

  private sdkClient(): Promise<ElevenLabsClient> {
    this.client ??= loadSdk().then(({ ElevenLabsClient: Client }) => new Client({
      apiKey: this.apiKey, baseUrl: this.baseUrl, timeoutInSeconds: this.timeoutMs / 1000, maxRetries: this.maxRetries, fetch: vendorFetch,
    }));
    return this.client;
  }

  private async failure(err: unknown, what: string, signal?: AbortSignal): Promise<unknown> {
    const { ElevenLabsError, ElevenLabsTimeoutError } = await loadSdk();
    return vendorFailure(this.name, what, err, signal, {
      timedOut: (e) => e instanceof ElevenLabsTimeoutError, apiStatus: (e) => (e instanceof ElevenLabsError ? { status: e.statusCode as number | undefined } : undefined),
    });
  }

  openStream(opts: SynthesisStreamOptions): SynthesisStream {
    const format = streamFormat(this.name, opts);
    const voice = chooseVoice(this.name, opts, this.voiceDefaults, ELEVENLABS_VOICE_ID);
    const url = new URL(`${socketBase(this.baseUrl)}/v1/text-to-speech/${encodeURIComponent(voice)}/stream-input`);
    url.searchParams.set('model_id', this.model);
    url.searchParams.set('output_format', outputFormat(format.encoding, format.sampleRate));
    const language = opts.language.split(/[-_]/)[0]!.toLowerCase();
    url.searchParams.set('language_code', language);
    return new ElevenLabsStream(this.name, format, this.bounds, url, this.apiKey, opts.speed, opts.signal).begin();
  }

  async *synthesizeStream(text: string, opts: SynthesizeOptions): AsyncGenerator<SpeechChunk> {
    opts.signal?.throwIfAborted();
    const input = synthesisText(this.name, text);
    const voice = chooseVoice(this.name, opts, this.voiceDefaults, ELEVENLABS_VOICE_ID);
    if (input === '') return;
    const stopped = new AbortController();
    const signal = opts.signal ? AbortSignal.any([opts.signal, stopped.signal]) : stopped.signal;
    try {
      const body = await (await this.sdkClient()).textToSpeech.stream(voice, {
        text: input, modelId: this.model, outputFormat: 'pcm_16000', languageCode: opts.language.split(/[-_]/)[0]!.toLowerCase(),
        ...(opts.speed !== undefined ? { voiceSettings: { speed: opts.speed } } : {}),
      }, { abortSignal: signal });
      yield* pcmBody(this.name, body as unknown as AsyncIterable<Uint8Array>, ONE_SHOT_RATE, this.timeoutMs, () => stopped.abort());
    } catch (err) {
      throw await this.failure(err, 'speech', opts.signal);
    } finally {
      stopped.abort();
    }
  }

  /** PCM16 at 16 kHz, over HTTP streaming. */
  async synthesize(text: string, opts: SynthesizeOptions): Promise<Speech> {
    return collectSpeech(this.name, this.synthesizeStream(text, opts), ONE_SHOT_RATE, this.model);
  }

  /** The voices of the account (GET /v1/voices): premade, cloned and library voices added to it. */
  /** Loads the vendor's client (TextToSpeech.ready). */
  async ready(): Promise<void> {
    await this.sdkClient();
  }

  async listVoices(signal?: AbortSignal): Promise<VoiceInfo[]> {
    try {
      const r = await (await this.sdkClient()).voices.getAll({}, { ...(signal ? { abortSignal: signal } : {}) });
      return r.voices.map((v) => {
        const gender = v.labels?.gender?.toLowerCase();
        const language = v.verifiedLanguages?.[0]?.locale ?? v.verifiedLanguages?.[0]?.language ?? v.labels?.language;
        return {
          id: v.voiceId, name: v.name ?? v.voiceId, engine: this.name,
          ...(language ? { language } : {}),
          ...(gender === 'female' || gender === 'male' ? { gender } : {}),
          ...(v.previewUrl ? { previewUrl: v.previewUrl } : {}),
        };
      });
    } catch (err) {
      throw await this.failure(err, 'voices', signal);
    }
  }

  /** Lists the voices: the key and the URL answer, or the SpeechError says which did not. */
  async check(signal?: AbortSignal): Promise<void> {
    await this.listVoices(signal);
  }
}

class ElevenLabsStream extends ProviderStream {
  private socket: WebSocket | undefined;
  /** The end of the last piece, held back until the word it ends in is complete. */
  private partial = '';

  constructor(engine: string, format: { encoding: SynthesisEncoding; sampleRate: 8000 | 16000 | 22050 | 24000 }, bounds: StreamBounds,
    private readonly url: URL, private readonly apiKey: string, private readonly speed: number | undefined, signal?: AbortSignal) {
    super(engine, format, bounds, signal);
  }

  begin(): this {
    return this.start();
  }

  protected connect(): Promise<void> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(this.url, {
        headers: { 'xi-api-key': this.apiKey }, handshakeTimeout: this.bounds.openMs, maxPayload: MAX_MESSAGE_BYTES, perMessageDeflate: false,
      });
      this.socket = ws;
      // A failure before the socket opens rejects connect(); after, it fails the stream. Both at
      // once, so the first cause is the one reported (the close that follows a refusal is not).
      const fail = (e: SpeechError) => {
        reject(e);
        this.failed(e);
      };
      ws.on('unexpected-response', (_req, res) => {
        res.resume();
        fail(providerError(this.engine, 'stream-input', res.statusCode, 'the WebSocket handshake was refused'));
        ws.terminate();
      });
      ws.on('error', (err) => fail(new SpeechError(this.engine, 'failed', `stream-input: ${shortText(err.message)}`)));
      ws.on('open', () => {
        // InitializeConnection: a blank text, then the settings; the key is in the header.
        ws.send(JSON.stringify({
          text: ' ',
          ...(this.speed !== undefined ? { voice_settings: { speed: Math.min(1.2, Math.max(0.7, this.speed)) } } : {}),
          generation_config: { chunk_length_schedule: [50, 120, 160, 250] },
        }));
        resolve();
      });
      ws.on('message', (data, isBinary) => this.message(data as Buffer, isBinary));
      ws.on('close', (code, reason) => {
        const why = shortText(reason.toString());
        if (code === 1008 && /api[_ ]?key|unauthori[sz]ed|authentication/i.test(why)) {
          fail(new SpeechError(this.engine, 'failed', `stream-input: the API key was refused (${why})`, 401));
        } else {
          fail(new SpeechError(this.engine, 'failed', `stream-input: the socket closed before the reply's last audio (${code}${why ? ` ${why}` : ''})`));
        }
      });
    });
  }

  private message(data: Buffer, isBinary: boolean): void {
    if (isBinary) return;
    let m: { audio?: string | null; isFinal?: boolean | null; error?: string; message?: string; code?: number };
    try {
      m = JSON.parse(data.toString('utf8')) as typeof m;
    } catch {
      this.failed(new SpeechError(this.engine, 'failed', 'stream-input: a message that is not JSON'));
      return;
    }
    if (m.error !== undefined) {
      const refused = /api[_ ]?key|unauthori[sz]ed/i.test(`${m.error} ${m.message ?? ''}`);
      this.failed(new SpeechError(this.engine, 'failed', refused
        ? 'stream-input: the API key was refused'
        : `stream-input: ${shortText(m.error)}: ${shortText(m.message)}`, refused ? 401 : undefined));
      return;
    }
    if (typeof m.audio === 'string' && m.audio !== '') this.audio(Buffer.from(m.audio, 'base64'));
    if (m.isFinal === true) this.finished();
  }

  private sendJson(m: object): void {
    this.socket!.send(JSON.stringify(m));
  }

  protected sendText(text: string, flush: boolean): void {
    // SendText: whole words, ending with a space; a word cut between pieces waits for its end.
    const all = this.partial + text;
    const cut = flush ? all.length : Math.max(all.lastIndexOf(' '), all.lastIndexOf('\n')) + 1;
    this.partial = all.slice(cut);
    const words = all.slice(0, cut).trim();
    if (words === '') return;
    this.sendJson({ text: `${words} `, ...(flush ? { flush: true } : {}) });
  }

  protected sendEnd(): void {
    const rest = this.partial.trim();
    this.partial = '';
    if (rest !== '') this.sendJson({ text: `${rest} `, flush: true });
    // CloseConnection: the reply is complete; ElevenLabs speaks what it holds, then isFinal.
    this.sendJson({ text: '' });
  }

  protected stop(): void {
    const ws = this.socket;
    if (!ws) return;
    ws.removeAllListeners('message');
    ws.on('error', () => {});
    if (ws.readyState === WebSocket.OPEN) ws.close(1000);
    else ws.terminate();
  }
}
