// Deepgram's speech to text through its official client (`@deepgram/sdk`, loaded on first use):
//
// - `deepgram` streaming: the live API (`/v1/listen`, nova-3): the call's frames as they come
//   (`encoding` mulaw or linear16 at the call's `sample_rate`, `channels=1`), with interim results,
//   `endpointing`, `utterance_end_ms`, `vad_events` and `smart_format`; its events are turned into
//   the turn events of RecognitionEvent (src/speech/types.ts).
// - `deepgramflux` streaming: Flux (`/v2/listen`, flux-general-en), whose `TurnInfo` events are the
//   turn events themselves (`eager_eot_threshold` set, so EagerEndOfTurn and TurnResumed come).
// - `deepgram` batch: the pre-recorded API (`POST /v1/listen`) for one utterance, as a SpeechToText.
//
// One base URL serves both the HTTP and the WebSocket APIs (`http`→`ws`, `https`→`wss`): the
// client's `environment` is made from it. The key goes in the `Authorization: Token …` header the
// client writes and is never put in an error or a log.
//
// Every wait is bounded: opening (openTimeoutMs), the first result after audio went
// (firstResultTimeoutMs), finalize (finalizeTimeoutMs), closing (closeTimeoutMs). A socket that
// drops is replaced once (the client's own reconnection, which waits seconds and queues without a
// bound, is turned off): what is written meanwhile is kept up to GAP_SECONDS of audio and sent on
// the new socket; a second drop ends the stream with an `error` event. Keep-alives go when nothing
// was sent for keepAliveMs (Deepgram closes a live socket after 10 s without audio or KeepAlive):
// live takes `{"type":"KeepAlive"}`; Flux has no such message (it closes the socket on one) and is
// kept open by WebSocket pings instead, as Deepgram advises.
import type { DeepgramClient } from '@deepgram/sdk';
import { abortOn, languageTag, streamFormat, streamKeywords, utteranceSamples } from './input.ts';
import { buildWav } from './wav.ts';
import {
  SpeechError, type RecognitionEvent, type RecognitionListener, type RecognitionStream,
  type SpeechToText, type StreamingSpeechToText, type StreamOptions, type Transcript, type TranscribeOptions,
} from './types.ts';
import { vendorFetch } from './vendor-fetch.ts';

type Sdk = typeof import('@deepgram/sdk');
let sdk: Promise<Sdk> | undefined;
function deepgramSdk(): Promise<Sdk> {
  sdk ??= import('@deepgram/sdk');
  return sdk;
}

export const DEEPGRAM_URL = 'https://api.deepgram.com';
export const DEEPGRAM_LIVE_MODEL = 'nova-3';
export const DEEPGRAM_FLUX_MODEL = 'flux-general-en';
/** Audio kept while a dropped socket is replaced, in seconds of the stream's own format. */
export const GAP_SECONDS = 5;
/** A transcript longer than this (characters) is cut: a turn is a few sentences. */
const MAX_TRANSCRIPT_CHARS = 4000;
/** Flux's EagerEndOfTurn threshold (0.3–0.9): early enough to prepare a reply, TurnResumed when wrong. */
const FLUX_EAGER_EOT_THRESHOLD = 0.5;

export interface DeepgramOptions {
  apiKey: string;
  /** The HTTP base (default https://api.deepgram.com); its WebSocket twin is derived from it. */
  baseUrl?: string;
  /** The model (default nova-3 for live and batch, flux-general-en for Flux). */
  model?: string;
  /** How long opening a socket may take (default 5000 ms). */
  openTimeoutMs?: number;
  /** How long the first result may take after audio was first sent on a socket (default 5000 ms). */
  firstResultTimeoutMs?: number;
  /** How long finalize() waits for its answer (default 2000 ms). */
  finalizeTimeoutMs?: number;
  /** How long close() waits for the last results and the server's close (default 2000 ms). */
  closeTimeoutMs?: number;
  /** A keep-alive goes when nothing was sent for this long (default 4000 ms; at most 5000). */
  keepAliveMs?: number;
  /** The batch API: time for one request (default 15000 ms) and retries of 408/429/5xx (default 1). */
  requestTimeoutMs?: number;
  maxRetries?: number;
}

/** The client's environment for one base URL: HTTP at it, WebSockets at its ws/wss twin. */
export function deepgramEnvironment(baseUrl: string): { base: string; production: string; agent: string; agentRest: string } {
  const http = baseUrl.replace(/\/+$/, '');
  const ws = http.replace(/^http(s?):/i, 'ws$1:');
  return { base: http, production: ws, agent: ws, agentRest: http };
}

function newClient(sdkModule: Sdk, o: DeepgramOptions): DeepgramClient {
  return new sdkModule.DeepgramClient({
    apiKey: o.apiKey,
    environment: deepgramEnvironment(o.baseUrl ?? DEEPGRAM_URL),
    timeoutInSeconds: Math.ceil((o.requestTimeoutMs ?? 15_000) / 1000),
    maxRetries: o.maxRetries ?? 1,
    fetch: vendorFetch,
  });
}

/** A client made on first use and kept. */
function lazyDeepgram(o: DeepgramOptions): () => Promise<DeepgramClient> {
  let client: Promise<DeepgramClient> | undefined;
  return () => {
    client ??= deepgramSdk().then((m) => newClient(m, o));
    return client;
  };
}

/** The HTTP status in the client's failed-handshake message (ws: "Unexpected server response: 401"). */
function handshakeStatus(message: string): number | undefined {
  const m = /Unexpected server response: (\d{3})/.exec(message);
  return m ? Number(m[1]) : undefined;
}

function refusedOrFailed(engine: string, what: string, status: number | undefined, detail: string): SpeechError {
  if (status === 401 || status === 403) {
    return new SpeechError(engine, 'refused', `${what}: Deepgram refused the API key (HTTP ${status}); check CALLPLANE_DEEPGRAM_API_KEY`, status);
  }
  return new SpeechError(engine, 'failed', `${what}: ${status ? `HTTP ${status}` : detail}`, status);
}

const cut = (text: string) => text.trim().slice(0, MAX_TRANSCRIPT_CHARS);

// ── streaming ────────────────────────────────────────────────────────────────────────────────

/** What of the client's sockets (listen v1 and v2) a stream uses. */
interface ListenSocket {
  on(event: 'message', cb: (m: unknown) => void): void;
  on(event: 'close', cb: (e: { code?: number; reason?: string }) => void): void;
  on(event: 'error', cb: (e: Error) => void): void;
  connect(): unknown;
  waitForOpen(): Promise<unknown>;
  close(): void;
  readonly readyState: number;
  sendMedia(audio: ArrayBufferView): void;
}
const OPEN = 1;

/** How live and Flux differ: the socket they open, their control messages, their events. */
interface ListenProtocol {
  readonly name: string;
  connect(client: DeepgramClient, args: Record<string, unknown>): Promise<ListenSocket>;
  keepAlive(socket: ListenSocket): void;
  /** Sends what makes the engine answer at once; false when there is nothing to ask for. */
  finalize(socket: ListenSocket, stream: DeepgramStream): boolean;
  closeStream(socket: ListenSocket): void;
  /** Reads one server message into events; true when it answers a finalize(). */
  read(message: Record<string, unknown>, stream: DeepgramStream): boolean;
}

type Timer = ReturnType<typeof setTimeout>;

class DeepgramStream implements RecognitionStream {
  state: RecognitionStream['state'] = 'open';
  private readonly listeners: RecognitionListener[] = [];
  private socket: ListenSocket | undefined;
  private readonly retired = new WeakSet<ListenSocket>();
  private reconnects = 1;
  private gap: Buffer[] = [];
  private gapBytes = 0;
  private droppedBytes = 0;
  private lastSentAt = Date.now();
  /** When audio first went on this socket with no result back yet. */
  private unansweredSince: number | undefined;
  private answered = false;
  private readonly ticker: NodeJS.Timeout;
  private finalizeWaiters: Array<() => void> = [];
  private closeWaiters: Array<() => void> = [];
  private lastError = '';
  // The turn as a listener sees it (src/speech/types.ts, RecognitionEvent).
  turnOpen = false;
  turnParts: string[] = [];
  private readonly maxWriteBytes: number;
  private readonly gapLimit: number;

  constructor(
    private readonly protocol: ListenProtocol,
    private readonly client: DeepgramClient,
    private readonly args: Record<string, unknown>,
    private readonly opts: Required<Pick<DeepgramOptions, 'openTimeoutMs' | 'firstResultTimeoutMs' | 'finalizeTimeoutMs' | 'closeTimeoutMs' | 'keepAliveMs'>>,
    private readonly encoding: StreamOptions['encoding'],
    bytesPerSecond: number,
  ) {
    this.maxWriteBytes = bytesPerSecond;
    this.gapLimit = bytesPerSecond * GAP_SECONDS;
    const every = Math.max(50, Math.min(1000, Math.floor(opts.keepAliveMs / 4)));
    this.ticker = setInterval(() => this.tick(), every);
    this.ticker.unref();
  }

  on(listener: RecognitionListener): void {
    this.listeners.push(listener);
  }

  off(listener: RecognitionListener): void {
    const i = this.listeners.indexOf(listener);
    if (i >= 0) this.listeners.splice(i, 1);
  }

  emit(event: RecognitionEvent): void {
    for (const l of [...this.listeners]) l(event);
  }

  /** Opens a socket (the first, or the one replacing a dropped one); rejects with a SpeechError. */
  async attach(): Promise<void> {
    const socket = await this.protocol.connect(this.client, this.args);
    socket.on('message', (m) => this.message(socket, m));
    socket.on('error', (e) => {
      if (socket === this.socket) this.lastError = e.message;
    });
    socket.on('close', (e) => {
      // The client reports an error first as a close and then as an error: read both first.
      setImmediate(() => this.closed(socket, e));
    });
    socket.connect();
    let timer: Timer | undefined;
    const opened = socket.waitForOpen();
    opened.catch(() => undefined);
    try {
      await new Promise<void>((resolve, reject) => {
        timer = setTimeout(() => reject(new SpeechError(this.protocol.name, 'timeout', `the socket did not open within ${this.opts.openTimeoutMs} ms`)), this.opts.openTimeoutMs);
        opened.then(() => resolve(), (e: unknown) => {
          const message = String((e as { message?: unknown })?.message ?? e);
          reject(refusedOrFailed(this.protocol.name, 'opening the stream', handshakeStatus(message), message));
        });
      });
    } catch (err) {
      this.retire(socket);
      throw err;
    } finally {
      clearTimeout(timer);
    }
    this.socket = socket;
    this.answered = false;
    this.unansweredSince = undefined;
    this.lastSentAt = Date.now();
  }

  write(audio: Buffer): void {
    if (this.state === 'closed' || this.state === 'closing' || audio.length === 0) return;
    if (audio.length > this.maxWriteBytes) {
      throw new SpeechError(this.protocol.name, 'input', `one write is at most a second of audio (${this.maxWriteBytes} bytes); got ${audio.length}`);
    }
    if (this.encoding === 'linear16' && audio.length % 2 !== 0) {
      throw new SpeechError(this.protocol.name, 'input', `linear16 audio has an odd number of bytes (${audio.length})`);
    }
    const socket = this.socket;
    if (this.state === 'reconnecting' || !socket || socket.readyState !== OPEN) {
      if (this.gapBytes + audio.length <= this.gapLimit) {
        this.gap.push(Buffer.from(audio));
        this.gapBytes += audio.length;
      } else {
        this.droppedBytes += audio.length;
      }
      return;
    }
    this.send(socket, audio);
  }

  private send(socket: ListenSocket, audio: Buffer): void {
    socket.sendMedia(audio);
    this.lastSentAt = Date.now();
    if (!this.answered) this.unansweredSince ??= this.lastSentAt;
  }

  keepAlive(): void {
    const socket = this.socket;
    if (this.state !== 'open' || !socket || socket.readyState !== OPEN) return;
    this.protocol.keepAlive(socket);
    this.lastSentAt = Date.now();
  }

  async finalize(): Promise<void> {
    const socket = this.socket;
    if (this.state !== 'open' || !socket || socket.readyState !== OPEN) return;
    if (!this.protocol.finalize(socket, this)) return;
    await this.waitFor(this.finalizeWaiters, this.opts.finalizeTimeoutMs);
  }

  async close(): Promise<void> {
    if (this.state === 'closed' || this.state === 'closing') {
      if (this.state === 'closing') await this.waitFor(this.closeWaiters, this.opts.closeTimeoutMs);
      return;
    }
    const socket = this.socket;
    const wasOpen = this.state === 'open' && socket !== undefined && socket.readyState === OPEN;
    this.state = 'closing';
    if (wasOpen) {
      this.protocol.closeStream(socket);
      // The server sends its last results, then closes.
      await this.waitFor(this.closeWaiters, this.opts.closeTimeoutMs);
    }
    // A turn the engine had not ended ends with what was heard of it.
    this.endTurn(this.turnParts.join(' '));
    this.end();
  }

  /** Ends at once (an abort): no CloseStream, no waiting. */
  abort(): void {
    if (this.state !== 'closed') this.end();
  }

  private waitFor(list: Array<() => void>, ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        const i = list.indexOf(done);
        if (i >= 0) list.splice(i, 1);
        resolve();
      }, ms);
      list.push(done);
    });
  }

  private static release(list: Array<() => void>): void {
    for (const w of list.splice(0)) w();
  }

  private retire(socket: ListenSocket): void {
    this.retired.add(socket);
    try {
      socket.close();
    } catch {
      // already closed
    }
  }

  private end(error?: SpeechError): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    clearInterval(this.ticker);
    if (this.socket) this.retire(this.socket);
    this.socket = undefined;
    this.gap = [];
    DeepgramStream.release(this.finalizeWaiters);
    DeepgramStream.release(this.closeWaiters);
    if (error) this.emit({ type: 'error', error });
    this.emit({ type: 'closed' });
  }

  private message(socket: ListenSocket, raw: unknown): void {
    if (socket !== this.socket || this.retired.has(socket)) return;
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return;
    const m = raw as Record<string, unknown>;
    if (m.type === 'Error') {
      const code = typeof m.code === 'string' ? m.code.slice(0, 100) : 'ERROR';
      const description = typeof m.description === 'string' ? m.description.slice(0, 300) : '';
      this.end(new SpeechError(this.protocol.name, 'failed', `the server reported ${code}${description ? `: ${description}` : ''}`));
      return;
    }
    if (m.type === 'Results' || m.type === 'TurnInfo') {
      this.answered = true;
      this.unansweredSince = undefined;
    }
    if (this.protocol.read(m, this)) DeepgramStream.release(this.finalizeWaiters);
  }

  private closed(socket: ListenSocket, e: { code?: number; reason?: string }): void {
    if (socket !== this.socket || this.retired.has(socket)) return;
    if (this.state === 'closing') {
      // The server's close after our CloseStream: the end we waited for.
      this.retired.add(socket);
      DeepgramStream.release(this.closeWaiters);
      return;
    }
    if (this.state !== 'open') return;
    const why = `code ${e.code ?? 'none'}${e.reason ? ` ${String(e.reason).slice(0, 100)}` : ''}${this.lastError ? `, ${this.lastError.slice(0, 200)}` : ''}`;
    this.retired.add(socket);
    this.socket = undefined;
    this.lastError = '';
    if (this.reconnects === 0) {
      this.end(new SpeechError(this.protocol.name, 'failed', `the connection dropped again (${why}) after it was replaced once`));
      return;
    }
    this.reconnects--;
    this.state = 'reconnecting';
    void this.reconnect(why);
  }

  private async reconnect(why: string): Promise<void> {
    try {
      await this.attach();
    } catch (err) {
      if (this.state !== 'reconnecting') return;
      const reason = err instanceof SpeechError ? err.message : String(err);
      this.end(new SpeechError(this.protocol.name, err instanceof SpeechError && err.kind === 'refused' ? 'refused' : 'failed',
        `the connection dropped (${why}) and could not be opened again: ${reason}`));
      return;
    }
    const socket = this.socket!;
    if (this.state !== 'reconnecting') {
      // Closed or aborted while the new socket opened.
      this.retire(socket);
      return;
    }
    this.state = 'open';
    const resentBytes = this.gapBytes;
    const droppedBytes = this.droppedBytes;
    for (const b of this.gap) this.send(socket, b);
    this.gap = [];
    this.gapBytes = 0;
    this.droppedBytes = 0;
    this.emit({ type: 'reconnected', resentBytes, droppedBytes });
  }

  private tick(): void {
    if (this.state !== 'open') return;
    const now = Date.now();
    if (this.unansweredSince !== undefined && now - this.unansweredSince > this.opts.firstResultTimeoutMs) {
      this.end(new SpeechError(this.protocol.name, 'timeout', `no result within ${this.opts.firstResultTimeoutMs} ms of the first audio`));
      return;
    }
    if (now - this.lastSentAt >= this.opts.keepAliveMs) this.keepAlive();
  }

  // ── turn bookkeeping shared by the protocols ──

  startTurn(): void {
    if (this.turnOpen) return;
    this.turnOpen = true;
    this.turnParts = [];
    this.emit({ type: 'startOfTurn' });
  }

  endTurn(text: string, confidence?: number): void {
    if (!this.turnOpen) return;
    this.turnOpen = false;
    this.turnParts = [];
    this.emit({ type: 'endOfTurn', text, ...(confidence !== undefined ? { confidence } : {}) });
  }
}

function transcriptOf(m: Record<string, unknown>): { text: string; confidence?: number } {
  const channel = m.channel as { alternatives?: Array<{ transcript?: unknown; confidence?: unknown }> } | undefined;
  const alt = Array.isArray(channel?.alternatives) ? channel.alternatives[0] : undefined;
  const text = typeof alt?.transcript === 'string' ? cut(alt.transcript) : '';
  return typeof alt?.confidence === 'number' ? { text, confidence: alt.confidence } : { text };
}

const liveProtocol: ListenProtocol = {
  name: 'deepgram',
  async connect(client, args) {
    return await client.listen.v1.connect(args as unknown as Parameters<DeepgramClient['listen']['v1']['connect']>[0]) as unknown as ListenSocket;
  },
  keepAlive(socket) {
    (socket as unknown as { sendKeepAlive(m: { type: 'KeepAlive' }): void }).sendKeepAlive({ type: 'KeepAlive' });
  },
  finalize(socket) {
    (socket as unknown as { sendFinalize(m: { type: 'Finalize' }): void }).sendFinalize({ type: 'Finalize' });
    return true;
  },
  closeStream(socket) {
    (socket as unknown as { sendCloseStream(m: { type: 'CloseStream' }): void }).sendCloseStream({ type: 'CloseStream' });
  },
  read(m, s) {
    switch (m.type) {
      case 'SpeechStarted':
        s.emit({ type: 'speechStarted' });
        s.startTurn();
        return false;
      case 'UtteranceEnd':
        s.emit({ type: 'utteranceEnd' });
        s.endTurn(s.turnParts.join(' '));
        return false;
      case 'Results': {
        const { text, confidence } = transcriptOf(m);
        const speechFinal = m.speech_final === true;
        if (text !== '') s.startTurn();
        if (m.is_final === true) {
          if (text !== '') {
            s.turnParts.push(text);
            s.emit({ type: 'final', text, speechFinal, ...(confidence !== undefined ? { confidence } : {}) });
          }
          if (speechFinal) s.endTurn(s.turnParts.join(' '));
        } else if (text !== '') {
          s.emit({ type: 'interim', text: [...s.turnParts, text].join(' ') });
        }
        return m.from_finalize === true;
      }
      default:
        return false;
    }
  },
};

const fluxProtocol: ListenProtocol = {
  name: 'deepgramflux',
  async connect(client, args) {
    return await client.listen.v2.connect(args as unknown as Parameters<DeepgramClient['listen']['v2']['connect']>[0]) as unknown as ListenSocket;
  },
  keepAlive(socket) {
    // Flux takes no KeepAlive message; the client's v2 socket pings (Node's ws).
    (socket as unknown as { ping(): void }).ping();
  },
  finalize(socket, s) {
    if (!s.turnOpen) return false;
    (socket as unknown as { sendForceEndTurn(m: { type: 'ForceEndTurn' }): void }).sendForceEndTurn({ type: 'ForceEndTurn' });
    return true;
  },
  closeStream(socket) {
    (socket as unknown as { sendCloseStream(m: { type: 'CloseStream' }): void }).sendCloseStream({ type: 'CloseStream' });
  },
  read(m, s) {
    if (m.type !== 'TurnInfo') return false;
    const text = typeof m.transcript === 'string' ? cut(m.transcript) : '';
    switch (m.event) {
      case 'StartOfTurn':
        s.startTurn();
        if (text !== '') s.emit({ type: 'interim', text });
        return false;
      case 'Update':
        if (text !== '') {
          s.startTurn();
          s.emit({ type: 'interim', text });
        }
        return false;
      case 'EagerEndOfTurn':
        s.startTurn();
        s.emit({ type: 'eagerEndOfTurn', text });
        return false;
      case 'TurnResumed':
        if (s.turnOpen) s.emit({ type: 'turnResumed' });
        return false;
      case 'EndOfTurn': {
        s.startTurn();
        const confidence = typeof m.end_of_turn_confidence === 'number' ? m.end_of_turn_confidence : undefined;
        s.endTurn(text, confidence);
        return true;
      }
      default:
        return false;
    }
  },
};

abstract class DeepgramStreamingEngine implements StreamingSpeechToText {
  readonly offline = false;
  abstract readonly name: string;
  readonly model: string;
  private readonly client: () => Promise<DeepgramClient>;
  protected readonly timing: Required<Pick<DeepgramOptions, 'openTimeoutMs' | 'firstResultTimeoutMs' | 'finalizeTimeoutMs' | 'closeTimeoutMs' | 'keepAliveMs'>>;

  constructor(protected readonly options: DeepgramOptions, defaultModel: string, private readonly protocol: ListenProtocol) {
    this.model = options.model ?? defaultModel;
    this.client = lazyDeepgram(options);
    this.timing = {
      openTimeoutMs: options.openTimeoutMs ?? 5000,
      firstResultTimeoutMs: options.firstResultTimeoutMs ?? 5000,
      finalizeTimeoutMs: options.finalizeTimeoutMs ?? 2000,
      closeTimeoutMs: options.closeTimeoutMs ?? 2000,
      keepAliveMs: Math.min(options.keepAliveMs ?? 4000, 5000),
    };
  }

  /** The query parameters of the socket (the client turns them into the URL). */
  protected abstract query(o: StreamOptions): Record<string, unknown>;

  async open(o: StreamOptions): Promise<RecognitionStream> {
    o.signal?.throwIfAborted();
    const { bytesPerSecond } = streamFormat(this.name, o);
    const args = {
      ...this.query(o),
      // Replacing a dropped socket is the stream's (once, at once, bounded); the client would
      // retry up to 30 times, seconds apart, queueing audio without a bound.
      reconnectAttempts: 0,
      shouldReconnect: () => false,
      connectionTimeoutInSeconds: Math.ceil(this.timing.openTimeoutMs / 1000),
    };
    const stream = new DeepgramStream(this.protocol, await this.client(), args, this.timing, o.encoding, bytesPerSecond);
    try {
      await stream.attach();
    } catch (err) {
      stream.abort();
      throw err;
    }
    abortOn(o.signal, stream, () => stream.abort());
    return stream;
  }

  /** Nothing to check without spending a request; a refused key shows on the first open(). */
  check(): Promise<void> {
    return Promise.resolve();
  }
}

/** Deepgram's live API (nova-3): interim results and endpointing, its events made into turns. */
export class DeepgramLive extends DeepgramStreamingEngine {
  readonly name = 'deepgram';
  constructor(options: DeepgramOptions) {
    super(options, DEEPGRAM_LIVE_MODEL, liveProtocol);
  }

  protected query(o: StreamOptions): Record<string, unknown> {
    const tag = languageTag(this.name, o.language);
    const endpointing = o.endpointingMs ?? 300;
    const utteranceEnd = o.utteranceEndMs ?? 1000;
    if (!Number.isInteger(endpointing) || endpointing < 10 || endpointing > 10_000) throw new SpeechError(this.name, 'input', `endpointing must be 10–10000 ms (got ${endpointing})`);
    if (!Number.isInteger(utteranceEnd) || utteranceEnd < 1000 || utteranceEnd > 10_000) throw new SpeechError(this.name, 'input', `utterance end must be 1000–10000 ms (got ${utteranceEnd})`);
    const terms = streamKeywords(o.keywords);
    return {
      model: this.model,
      language: tag.region ? `${tag.language}-${tag.region}` : tag.language,
      encoding: o.encoding,
      sample_rate: o.sampleRate,
      channels: 1,
      interim_results: 'true',
      endpointing,
      utterance_end_ms: utteranceEnd,
      vad_events: 'true',
      smart_format: 'true',
      ...(terms ? { keyterm: terms } : {}),
    };
  }
}

/** Flux (flux-general-en): Deepgram's conversational model, whose events are turns. English only. */
export class DeepgramFlux extends DeepgramStreamingEngine {
  readonly name = 'deepgramflux';
  constructor(options: DeepgramOptions) {
    super(options, DEEPGRAM_FLUX_MODEL, fluxProtocol);
  }

  protected query(o: StreamOptions): Record<string, unknown> {
    if (languageTag(this.name, o.language).language !== 'en') {
      throw new SpeechError(this.name, 'input', `${this.model} hears English only (asked for ${o.language})`);
    }
    const terms = streamKeywords(o.keywords);
    return {
      model: this.model,
      encoding: o.encoding,
      sample_rate: o.sampleRate,
      eager_eot_threshold: FLUX_EAGER_EOT_THRESHOLD,
      ...(terms ? { keyterm: terms } : {}),
    };
  }
}

// ── one utterance ────────────────────────────────────────────────────────────────────────────

/** Deepgram's pre-recorded API for one utterance (sent as a WAV at its own rate). */
export class DeepgramTranscriber implements SpeechToText {
  readonly offline = false;
  readonly name = 'deepgram';
  readonly model: string;
  private readonly client: () => Promise<DeepgramClient>;

  constructor(options: DeepgramOptions) {
    this.model = options.model ?? DEEPGRAM_LIVE_MODEL;
    this.client = lazyDeepgram(options);
  }

  async transcribe(audio: Int16Array | Buffer, sampleRate: number, opts: TranscribeOptions): Promise<Transcript> {
    opts.signal?.throwIfAborted();
    const pcm = utteranceSamples(this.name, audio, sampleRate);
    const tag = languageTag(this.name, opts.language);
    if (pcm.length === 0) return { text: '', engine: this.name, model: this.model };
    const terms = opts.grammar?.kind === 'phrases' ? streamKeywords(opts.grammar.phrases) : undefined;
    const { DeepgramError, DeepgramTimeoutError } = await deepgramSdk();
    try {
      const r = await (await this.client()).listen.v1.media.transcribeFile(buildWav(pcm, sampleRate), {
        model: this.model,
        language: tag.region ? `${tag.language}-${tag.region}` : tag.language,
        smart_format: true,
        ...(terms ? { keyterm: terms } : {}),
      }, { abortSignal: opts.signal });
      const results = (r as { results?: { channels?: Array<{ alternatives?: Array<{ transcript?: unknown; confidence?: unknown }> }> } }).results;
      const alt = results?.channels?.[0]?.alternatives?.[0];
      if (typeof alt?.transcript !== 'string') throw new SpeechError(this.name, 'failed', 'transcription: the answer has no transcript');
      return {
        text: cut(alt.transcript), engine: this.name, model: this.model,
        ...(typeof alt.confidence === 'number' ? { confidence: alt.confidence } : {}),
      };
    } catch (err) {
      if (err instanceof SpeechError) throw err;
      if (opts.signal?.aborted) throw opts.signal.reason ?? err;
      if (err instanceof DeepgramTimeoutError) throw new SpeechError(this.name, 'timeout', 'transcription: the request timed out');
      if (err instanceof DeepgramError) throw refusedOrFailed(this.name, 'transcription', err.statusCode, err.message.slice(0, 300));
      throw new SpeechError(this.name, 'failed', `transcription: ${(err as Error).message}`);
    }
  }

  check(): Promise<void> {
    return Promise.resolve();
  }
}
