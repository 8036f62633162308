// OpenAI's streaming transcription: a Realtime transcription session over WebSocket
// (`GET {base}/realtime?intent=transcription`, `Authorization: Bearer <key>`), fed the call's own
// frames as they arrive and answering with the server's turn detection and transcript deltas. It is
// what `agentSttEngine: openai` streams to where the configured server offers it
// (CALLPLANE_STT_REALTIME: `auto` means OpenAI's own API); servers that do not keep the batch
// transcription (openai-speech.ts) after our VAD.
//
// The official client's Realtime socket (`openai/realtime/ws`) opens conversation sessions only
// (it always names a model in the URL, which makes a conversation session that refuses the
// transcription update, and it always dials wss://), so this speaks the documented protocol itself
// over `ws`, the library that client uses:
//
// - After the socket opens, `session.update` with `type: transcription`: the input format
//   (`audio/pcmu` for a call's μ-law at 8 kHz, sent as it is; `audio/pcm` at 24 kHz otherwise,
//   the call's linear16 resampled as it streams), the transcription model, language (ISO-639-1) and
//   keywords as its prompt, and `server_vad` turn detection whose silence is `endpointingMs`. The
//   stream is open once the server answers `session.updated` (an `error` first is a refusal).
// - Audio: `input_audio_buffer.append` with base64 audio; `finalize()` sends
//   `input_audio_buffer.commit`; keepAlive() is a WebSocket ping (the protocol has no message for it).
// - Turns (RecognitionEvent in types.ts): `input_audio_buffer.speech_started` starts one,
//   `conversation.item.input_audio_transcription.delta`s are its text so far (interim), and
//   `...transcription.completed` ends it with its transcript (a `final` with speechFinal, then
//   `endOfTurn`). After `speech_stopped` the completion must come within endOfTurnTimeoutMs, else
//   the turn ends with the deltas heard; `...transcription.failed` ends it the same way. No eager end.
// - A 401/403 handshake is a SpeechError `refused` naming no key. A socket that drops mid-call
//   ends the stream with an `error` event (no reconnect: the listener goes on with the configured
//   recogniser, docs/voice.md), what was being heard ending its turn first.
import { WebSocket } from 'ws';
import { pcm16FromBytes } from '../media/pcm.ts';
import { abortOn, languageTag, streamFormat, streamKeywords } from './input.ts';
import { StreamResampler } from './resample.ts';
import {
  SpeechError, type RecognitionEvent, type RecognitionListener, type RecognitionStream, type StreamOptions, type StreamingSpeechToText,
} from './types.ts';

/** The rate of `audio/pcm` in a Realtime session (the only one it takes). */
const REALTIME_PCM_RATE = 24_000;
/** Longest transcript kept of one turn (characters). */
const MAX_TRANSCRIPT_CHARS = 4000;
/** Longest message read from the server (bytes). */
const MAX_MESSAGE_BYTES = 1024 * 1024;

export interface OpenAIRealtimeOptions {
  /** Shown in errors and records (default `openai`). */
  name?: string;
  /** The API's base URL (https://api.openai.com/v1); https → wss, http → ws. */
  baseUrl: string;
  apiKey: string | undefined;
  /** The transcription model (gpt-4o-transcribe, gpt-4o-mini-transcribe, whisper-1). */
  model: string;
  /** How long opening may take: the handshake and the session's configuration (default 3000 ms). */
  openTimeoutMs?: number;
  /** How long the transcript may take after the server heard the speech stop (default 2000 ms). */
  endOfTurnTimeoutMs?: number;
  /** How long finalize() waits for the transcript of what was heard (default 2000 ms). */
  finalizeTimeoutMs?: number;
  /** How long close() waits for the last transcript (default 2000 ms). */
  closeTimeoutMs?: number;
  /** The server's turn detection: silence that ends speech when the stream does not say (default 500 ms). */
  silenceMs?: number;
}

/** The Realtime URL of an API base: `{base}/realtime?intent=transcription`, ws(s). */
export function realtimeUrl(baseUrl: string): URL {
  const url = new URL(baseUrl.replace(/\/+$/, '') + '/realtime');
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new SpeechError('openai', 'input', `the base URL must be http:// or https:// (got ${url.protocol})`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.searchParams.set('intent', 'transcription');
  return url;
}

/** Whether a server offers Realtime transcription under CALLPLANE_STT_REALTIME (`auto`: OpenAI's own API only). */
export function offersRealtime(baseUrl: string, mode: 'auto' | 'on' | 'off'): boolean {
  if (mode !== 'auto') return mode === 'on';
  try {
    return new URL(baseUrl).hostname === 'api.openai.com';
  } catch {
    return false;
  }
}

type Timer = ReturnType<typeof setTimeout>;

/** A server `error` event's code and message, as text (either may be absent or not a string). */
function errorText(error: unknown): string {
  const e = (error ?? {}) as { code?: unknown; message?: unknown };
  const code = typeof e.code === 'string' ? e.code : 'error';
  const message = typeof e.message === 'string' ? e.message : '';
  return `${code}: ${message}`.slice(0, 300);
}

class RealtimeStream implements RecognitionStream {
  state: RecognitionStream['state'] = 'open';
  private readonly listeners: RecognitionListener[] = [];
  private readonly resampler: StreamResampler | undefined;
  private turnOpen = false;
  private turnItem: string | undefined;
  private readonly deltas = new Map<string, string>();
  private endTimer: Timer | undefined;
  private finalizeWaiters: Array<() => void> = [];
  private lastError = '';
  private readonly maxWriteBytes: number;

  constructor(
    readonly name: string,
    private readonly socket: WebSocket,
    private readonly o: Required<Pick<OpenAIRealtimeOptions, 'endOfTurnTimeoutMs' | 'finalizeTimeoutMs' | 'closeTimeoutMs'>>,
    private readonly stream: StreamOptions,
    bytesPerSecond: number,
  ) {
    this.maxWriteBytes = bytesPerSecond;
    this.resampler = stream.encoding === 'linear16' ? new StreamResampler(stream.sampleRate, REALTIME_PCM_RATE) : undefined;
    socket.on('message', (data: Buffer, binary: boolean) => {
      if (binary || data.length > MAX_MESSAGE_BYTES) return;
      let m: Record<string, unknown>;
      try {
        m = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
      } catch {
        return;
      }
      if (m && typeof m === 'object') this.read(m);
    });
    socket.on('error', (e: Error) => { this.lastError = e.message; });
    socket.on('close', (code: number) => {
      if (this.state === 'closed') return;
      const why = this.lastError || `the socket closed (${code})`;
      this.endTurn(this.heard());
      this.end(this.state === 'closing' ? undefined : new SpeechError(this.name, 'failed', `the stream dropped: ${why}`.slice(0, 300)));
    });
  }

  on(listener: RecognitionListener): void { this.listeners.push(listener); }
  off(listener: RecognitionListener): void {
    const i = this.listeners.indexOf(listener);
    if (i >= 0) this.listeners.splice(i, 1);
  }

  private emit(event: RecognitionEvent): void {
    for (const l of [...this.listeners]) l(event);
  }

  private sendJson(event: Record<string, unknown>): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(event));
  }

  write(audio: Buffer): void {
    if (this.state !== 'open' || audio.length === 0) return;
    if (audio.length > this.maxWriteBytes) throw new SpeechError(this.name, 'input', `one write is at most a second of audio (${this.maxWriteBytes} bytes); got ${audio.length}`);
    let bytes = audio;
    if (this.resampler) {
      if (audio.length % 2 !== 0) throw new SpeechError(this.name, 'input', `linear16 audio has an odd number of bytes (${audio.length})`);
      const out = this.resampler.push(pcm16FromBytes(audio));
      if (out.length === 0) return;
      bytes = Buffer.from(out.buffer, out.byteOffset, out.byteLength);
    }
    this.sendJson({ type: 'input_audio_buffer.append', audio: bytes.toString('base64') });
  }

  keepAlive(): void {
    if (this.state === 'open' && this.socket.readyState === WebSocket.OPEN) this.socket.ping();
  }

  async finalize(): Promise<void> {
    if (this.state !== 'open' || !this.turnOpen) return;
    this.sendJson({ type: 'input_audio_buffer.commit' });
    await this.waitTurn(this.o.finalizeTimeoutMs);
  }

  async close(): Promise<void> {
    if (this.state !== 'open') return;
    this.state = 'closing';
    if (this.turnOpen) {
      this.sendJson({ type: 'input_audio_buffer.commit' });
      await this.waitTurn(this.o.closeTimeoutMs);
    }
    this.endTurn(this.heard());
    this.end();
  }

  abort(): void {
    if (this.state !== 'closed') this.end();
  }

  /** Resolves when the open turn has ended, or after `ms`. */
  private waitTurn(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        const i = this.finalizeWaiters.indexOf(done);
        if (i >= 0) this.finalizeWaiters.splice(i, 1);
        resolve();
      }, ms);
      this.finalizeWaiters.push(done);
    });
  }

  /** What the deltas of the open turn say so far. */
  private heard(): string {
    return this.turnItem ? (this.deltas.get(this.turnItem) ?? '') : '';
  }

  private startTurn(item: string | undefined): void {
    if (this.turnOpen) return;
    this.turnOpen = true;
    this.turnItem = item;
    this.emit({ type: 'speechStarted' });
    this.emit({ type: 'startOfTurn' });
  }

  private endTurn(text: string): void {
    clearTimeout(this.endTimer);
    this.endTimer = undefined;
    if (!this.turnOpen) return;
    this.turnOpen = false;
    if (this.turnItem) this.deltas.delete(this.turnItem);
    this.turnItem = undefined;
    this.emit({ type: 'endOfTurn', text: text.trim().slice(0, MAX_TRANSCRIPT_CHARS) });
    for (const w of this.finalizeWaiters.splice(0)) w();
  }

  private read(m: Record<string, unknown>): void {
    const item = typeof m.item_id === 'string' ? m.item_id : undefined;
    switch (m.type) {
      case 'input_audio_buffer.speech_started':
        this.startTurn(item);
        break;
      case 'input_audio_buffer.speech_stopped':
        if (this.turnOpen && !this.endTimer) this.endTimer = setTimeout(() => this.endTurn(this.heard()), this.o.endOfTurnTimeoutMs);
        break;
      case 'conversation.item.input_audio_transcription.delta': {
        if (!item || typeof m.delta !== 'string') break;
        const text = ((this.deltas.get(item) ?? '') + m.delta).slice(0, MAX_TRANSCRIPT_CHARS);
        this.deltas.set(item, text);
        if (this.turnOpen && (this.turnItem === undefined || this.turnItem === item)) {
          this.turnItem ??= item;
          this.emit({ type: 'interim', text: text.trim() });
        }
        break;
      }
      case 'conversation.item.input_audio_transcription.completed': {
        const text = typeof m.transcript === 'string' ? m.transcript.trim().slice(0, MAX_TRANSCRIPT_CHARS) : '';
        if (item && this.turnItem !== undefined && item !== this.turnItem) {
          // A transcript of an earlier item whose turn already ended: a late final, recorded only.
          this.deltas.delete(item);
          this.emit({ type: 'final', text, speechFinal: false });
          break;
        }
        if (!this.turnOpen && text === '') break;
        this.startTurn(item);
        this.emit({ type: 'final', text, speechFinal: true });
        this.endTurn(text);
        break;
      }
      case 'conversation.item.input_audio_transcription.failed':
        if (!item || item === this.turnItem) this.endTurn(this.heard());
        break;
      case 'error':
        this.lastError = errorText(m.error);
        break;
      default:
        break;
    }
  }

  private end(error?: SpeechError): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    clearTimeout(this.endTimer);
    for (const w of this.finalizeWaiters.splice(0)) w();
    try {
      this.socket.close(1000);
    } catch {
      // already closed
    }
    if (error) this.emit({ type: 'error', error });
    this.emit({ type: 'closed' });
  }
}

/** OpenAI's Realtime transcription as a streaming recogniser (agentSttEngine `openai`). */
export class OpenAIRealtimeTranscription implements StreamingSpeechToText {
  readonly offline = false;
  readonly name: string;
  readonly model: string;
  private readonly url: URL;

  constructor(private readonly options: OpenAIRealtimeOptions) {
    this.name = options.name ?? 'openai';
    this.model = options.model;
    this.url = realtimeUrl(options.baseUrl);
  }

  /** The session.update a stream sends first. */
  sessionUpdate(o: StreamOptions): Record<string, unknown> {
    const tag = languageTag(this.name, o.language);
    const keywords = streamKeywords(o.keywords);
    return {
      type: 'session.update',
      session: {
        type: 'transcription',
        audio: {
          input: {
            format: o.encoding === 'mulaw' ? { type: 'audio/pcmu' } : { type: 'audio/pcm', rate: REALTIME_PCM_RATE },
            transcription: {
              model: this.model,
              ...(tag.language.length === 2 ? { language: tag.language } : {}),
              ...(keywords ? { prompt: keywords.join(', ').slice(0, 800) } : {}),
            },
            turn_detection: { type: 'server_vad', silence_duration_ms: o.endpointingMs ?? this.options.silenceMs ?? 500, prefix_padding_ms: 300, threshold: 0.5 },
          },
        },
      },
    };
  }

  async open(o: StreamOptions): Promise<RecognitionStream> {
    o.signal?.throwIfAborted();
    const { bytesPerSecond } = streamFormat(this.name, o);
    if (o.encoding === 'mulaw' && o.sampleRate !== 8000) throw new SpeechError(this.name, 'input', `μ-law is taken at 8000 Hz only (got ${o.sampleRate})`);
    const update = this.sessionUpdate(o);
    const openTimeoutMs = this.options.openTimeoutMs ?? 3000;
    const socket = new WebSocket(this.url, {
      headers: this.options.apiKey ? { Authorization: `Bearer ${this.options.apiKey}` } : {},
      handshakeTimeout: openTimeoutMs,
      maxPayload: MAX_MESSAGE_BYTES,
    });
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new SpeechError(this.name, 'timeout', `the session was not ready within ${openTimeoutMs} ms`)), openTimeoutMs);
        const settle = (err?: SpeechError) => {
          clearTimeout(timer);
          socket.off('message', onMessage);
          if (err) reject(err);
          else resolve();
        };
        const onMessage = (data: Buffer) => {
          let m: { type?: unknown; error?: unknown };
          try {
            m = JSON.parse(data.toString('utf8')) as typeof m;
          } catch {
            return;
          }
          if (m.type === 'session.updated') settle();
          else if (m.type === 'error') settle(new SpeechError(this.name, 'failed', `the server refused the transcription session: ${errorText(m.error)}`));
        };
        socket.on('message', onMessage);
        socket.once('open', () => socket.send(JSON.stringify(update)));
        socket.once('unexpected-response', (_req, res) => {
          const status = res.statusCode ?? 0;
          res.resume();
          settle(status === 401 || status === 403
            ? new SpeechError(this.name, 'refused', `opening the stream: the server refused the API key (HTTP ${status})`, status)
            : new SpeechError(this.name, 'failed', `opening the stream: HTTP ${status}`, status));
        });
        socket.once('error', (e: Error) => settle(new SpeechError(this.name, 'failed', `opening the stream: ${e.message}`.slice(0, 300))));
        socket.once('close', () => settle(new SpeechError(this.name, 'failed', 'opening the stream: the socket closed before the session was ready')));
      });
    } catch (err) {
      socket.removeAllListeners();
      socket.on('error', () => {});
      socket.terminate();
      throw err;
    }
    socket.removeAllListeners();
    const stream = new RealtimeStream(this.name, socket, {
      endOfTurnTimeoutMs: this.options.endOfTurnTimeoutMs ?? 2000,
      finalizeTimeoutMs: this.options.finalizeTimeoutMs ?? 2000,
      closeTimeoutMs: this.options.closeTimeoutMs ?? 2000,
    }, o, bytesPerSecond);
    abortOn(o.signal, stream, () => stream.abort());
    return stream;
  }

  /** Nothing to check without opening a session; a wrong URL or key shows on the first open(). */
  check(): Promise<void> {
    return Promise.resolve();
  }
}
