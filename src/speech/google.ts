// Google Cloud Speech-to-Text (v1, gRPC) through its official client (`@google-cloud/speech`,
// loaded on first use: it costs a lot at start-up):
//
// - `google` streaming: `StreamingRecognize`, fed the call's frames as they come (`MULAW` or
//   `LINEAR16` at the call's `sampleRateHertz`, one channel), with `interimResults`,
//   `singleUtterance: false` (one stream hears the whole call, turn after turn) and
//   `enableVoiceActivityEvents`, whose SPEECH_ACTIVITY_BEGIN/END make the turns.
// - `google` batch: `Recognize` for one utterance (LINEAR16 at its own rate), as a SpeechToText.
//
// The model: `telephony` for the languages Google serves it in (TELEPHONY_LANGUAGES): Google's
// model for "audio that originated from a phone call, typically recorded at an 8 kHz sampling
// rate", the Conformer model that `phone_call` (with useEnhanced) is routed to since 2024.
// Elsewhere no model is named and `useEnhanced` is set, so Google picks the best model the
// language has (naming `phone_call` or `telephony` for a language without it is an
// INVALID_ARGUMENT). `model` overrides both.
//
// Turns (RecognitionEvent in src/speech/types.ts): SPEECH_ACTIVITY_BEGIN (or the first words)
// starts one; interim results are its words so far; it ends when the speech has ended
// (SPEECH_ACTIVITY_END) and the final result for it has come, in either order. The final comes
// within `endOfTurnTimeoutMs` of the activity's end, or the turn ends with what was heard. A
// stream that never reports voice activity (a model without it) ends a turn on each final result.
//
// Credentials: a service account's key, from its file (GOOGLE_APPLICATION_CREDENTIALS: the
// process's) or as the file's JSON text (an organization's own key, stored sealed by the
// speech-providers module), read and checked here and handed to the client (google-auth-library signs a self-signed JWT with it; nothing is
// exchanged at a token endpoint). Where the endpoint is `http://` (a local double) the channel is
// insecure and the token goes as each call's `authorization` metadata; with `https://` the client
// adds it to the TLS channel itself. A refused credential (UNAUTHENTICATED, PERMISSION_DENIED) is a
// SpeechError `refused` whose message names no key and no token.
//
// Bounds: each request carries at most MAX_CHUNK_BYTES of audio; opening waits openTimeoutMs for
// the server's headers; the first result must come within firstResultTimeoutMs of the first
// audio loud enough to be speech (Google answers nothing to silence, so silence starts no clock);
// finalize and close wait finalizeTimeoutMs and closeTimeoutMs. Google ends a stream after about
// five minutes: a stream is replaced after `restartAfterMs` at the first moment no turn is open
// (at `restartDeadlineMs`, 1.2 × that by default, even inside one), the new call opened before the
// old one is half-closed, so no audio is lost and the old call's last results still count. A call
// that drops is replaced once, what was written meanwhile (up to GAP_SECONDS) sent on the new one;
// a second drop ends the stream with an `error` event. Google takes no keep-alive message and ends
// a stream that got no audio for ~10 s, so keepAlive() sends 100 ms of silence.
import fs from 'node:fs/promises';
import type { SpeechClient } from '@google-cloud/speech';
import type { CancellableStream, CallOptions } from 'google-gax';
import { decodeG711 } from '../media/g711.ts';
import { pcm16FromBytes } from '../media/pcm.ts';
import { abortOn, languageTag, streamFormat, streamKeywords, utteranceSamples } from './input.ts';
import {
  SpeechError, type RecognitionEvent, type RecognitionListener, type RecognitionStream, type SpeechToText,
  type StreamingSpeechToText, type StreamOptions, type Transcript, type TranscribeOptions,
} from './types.ts';

type Modules = { speech: typeof import('@google-cloud/speech'); gax: typeof import('google-gax') };
let modules: Promise<Modules> | undefined;
function googleModules(): Promise<Modules> {
  modules ??= Promise.all([import('@google-cloud/speech'), import('google-gax')]).then(([speech, gax]) => ({ speech, gax }));
  return modules;
}

export const GOOGLE_SPEECH_URL = 'https://speech.googleapis.com';
/** Where Google serves `telephony` (Speech-to-Text v1; its model and Conformer-migration pages). */
export const TELEPHONY_LANGUAGES: ReadonlySet<string> = new Set([
  'en-US', 'en-AU', 'en-GB', 'en-IN', 'de-DE', 'es-ES', 'es-US', 'fr-CA', 'fr-FR', 'it-IT', 'ja-JP', 'nl-NL', 'pt-BR',
]);
/** Most audio one streaming request carries (Google's documented chunk limit: 15,360 bytes). */
export const MAX_CHUNK_BYTES = 15_360;
/** Audio kept while a dropped call is replaced, in seconds of the stream's own format. */
export const GAP_SECONDS = 5;
const MAX_TRANSCRIPT_CHARS = 4000;
const MAX_KEY_FILE_BYTES = 64 * 1024;
const CLOUD_PLATFORM = 'https://www.googleapis.com/auth/cloud-platform';
/** A 20 ms block of written audio louder than this (RMS) is speech, for the first-result bound. */
const LOUD_RMS = 500;
const KEEPALIVE_SILENCE_MS = 100;

const UNKNOWN = 2, INVALID_ARGUMENT = 3, DEADLINE_EXCEEDED = 4, PERMISSION_DENIED = 7, RESOURCE_EXHAUSTED = 8, UNAUTHENTICATED = 16;
const CODE_NAMES: Record<number, string> = {
  0: 'OK', 1: 'CANCELLED', 2: 'UNKNOWN', 3: 'INVALID_ARGUMENT', 4: 'DEADLINE_EXCEEDED', 5: 'NOT_FOUND', 7: 'PERMISSION_DENIED',
  8: 'RESOURCE_EXHAUSTED', 9: 'FAILED_PRECONDITION', 10: 'ABORTED', 11: 'OUT_OF_RANGE', 12: 'UNIMPLEMENTED', 13: 'INTERNAL', 14: 'UNAVAILABLE', 16: 'UNAUTHENTICATED',
};

/** Where the service account's key comes from: its file, or the file's JSON text. */
export type GoogleKeySource = { keyFile: string; keyJson?: undefined } | { keyJson: string; keyFile?: undefined };

export type GoogleSpeechOptions = GoogleKeySource & GoogleEngineOptions;

export interface GoogleEngineOptions {
  /** The gRPC endpoint: https://host[:port] (TLS; default https://speech.googleapis.com) or http://host:port (insecure: a local double). */
  url?: string;
  /** The model for every language (default: `telephony` where Google has it, else Google's choice). */
  model?: string;
  /** How long opening a call waits for the server's headers (default 2000 ms); a call that sent none by then is used anyway. */
  openTimeoutMs?: number;
  /** How long the first result may take after the first loud audio on a call (default 5000 ms). */
  firstResultTimeoutMs?: number;
  /** How long the final result may take after SPEECH_ACTIVITY_END before the turn ends without it (default 1500 ms). */
  endOfTurnTimeoutMs?: number;
  /** How long finalize() waits for the results of what was heard (default 2000 ms). */
  finalizeTimeoutMs?: number;
  /** How long close() waits for the last results and the server's end (default 2000 ms). */
  closeTimeoutMs?: number;
  /** Silence is sent as a keep-alive when nothing was sent for this long (default 2000 ms; at most 5000). */
  keepAliveMs?: number;
  /** A call is replaced after this long, between turns (default 240000 ms; at most 250000, under Google's ~305 s). */
  restartAfterMs?: number;
  /** ... and at this age even inside a turn (default restartAfterMs × 1.2; at most 290000). */
  restartDeadlineMs?: number;
  /** The batch API: time for one request (default 15000 ms). */
  requestTimeoutMs?: number;
}

/** Where a URL points the client: host and port, and whether the channel is insecure (http). */
export function googleEndpoint(url: string): { host: string; port: number; insecure: boolean } {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new SpeechError('google', 'input', `'${url}' is not a URL such as https://speech.googleapis.com or http://127.0.0.1:50051`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new SpeechError('google', 'input', `the endpoint must be http:// or https:// (got ${u.protocol})`);
  const insecure = u.protocol === 'http:';
  return { host: u.hostname, port: u.port ? Number(u.port) : insecure ? 80 : 443, insecure };
}

/** The model a language gets (TELEPHONY_LANGUAGES), or undefined for Google's own choice. */
export function googleModelFor(language: string, override?: string): string | undefined {
  if (override) return override;
  const tag = languageTag('google', language);
  return tag.region && TELEPHONY_LANGUAGES.has(`${tag.language}-${tag.region}`) ? 'telephony' : undefined;
}

interface ServiceAccountKey {
  type: 'service_account';
  client_email: string;
  private_key: string;
  [k: string]: unknown;
}

/** Reads and checks the key; errors name what is wrong with it, never its content. */
async function readKey(engine: string, source: GoogleKeySource): Promise<ServiceAccountKey> {
  if (source.keyJson !== undefined) return checkedKey(engine, source.keyJson, 'the organization\'s Google key');
  const what = 'the credentials file in GOOGLE_APPLICATION_CREDENTIALS';
  let raw: Buffer;
  try {
    const h = await fs.open(source.keyFile, 'r');
    try {
      raw = Buffer.alloc(MAX_KEY_FILE_BYTES + 1);
      const { bytesRead } = await h.read(raw, 0, raw.length, 0);
      raw = raw.subarray(0, bytesRead);
    } finally {
      await h.close();
    }
  } catch (err) {
    throw new SpeechError(engine, 'unavailable', `${what} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return checkedKey(engine, raw.toString('utf8'), what);
}

function checkedKey(engine: string, raw: string, what: string): ServiceAccountKey {
  if (Buffer.byteLength(raw) > MAX_KEY_FILE_BYTES) throw new SpeechError(engine, 'unavailable', `${what} is too large for a service account key`);
  let key: Record<string, unknown>;
  try {
    key = JSON.parse(raw) as Record<string, unknown>;
  } catch {
    throw new SpeechError(engine, 'unavailable', `${what} is not JSON`);
  }
  if (key === null || typeof key !== 'object' || key.type !== 'service_account' || typeof key.client_email !== 'string' || typeof key.private_key !== 'string') {
    throw new SpeechError(engine, 'unavailable', `${what} is not a service account key (type service_account, client_email, private_key)`);
  }
  return key as ServiceAccountKey;
}

interface GoogleConnection {
  client: SpeechClient;
  /** Call options carrying the token (insecure channels only; TLS channels carry it themselves). */
  callOptions: () => Promise<CallOptions>;
}

/** A client made on first use and kept (a failed attempt is tried again next time). */
function lazyGoogle(engine: string, o: GoogleSpeechOptions): () => Promise<GoogleConnection> {
  let made: Promise<GoogleConnection> | undefined;
  return () => {
    made ??= (async () => {
      const endpoint = googleEndpoint(o.url ?? GOOGLE_SPEECH_URL);
      const [{ speech, gax }, key] = await Promise.all([googleModules(), readKey(engine, o)]);
      // A self-signed JWT from the key (as the client makes for a key file), built here so the
      // key is the one checked above; nothing is exchanged at a token endpoint.
      const jwt = new gax.googleAuthLibrary.JWT({
        email: key.client_email, key: key.private_key, scopes: [CLOUD_PLATFORM],
        ...(typeof key.private_key_id === 'string' ? { keyId: key.private_key_id } : {}),
      });
      jwt.useJWTAccessWithScope = true;
      const auth = new gax.GoogleAuth({ authClient: jwt, scopes: [CLOUD_PLATFORM] });
      const client = new speech.v1.SpeechClient({
        apiEndpoint: endpoint.host, port: endpoint.port, auth,
        ...(endpoint.insecure ? { sslCreds: gax.grpc.credentials.createInsecure() } : {}),
      });
      const callOptions = async (): Promise<CallOptions> => {
        if (!endpoint.insecure) return {};
        let authorization: string | null;
        try {
          authorization = (await client.auth.getRequestHeaders()).get('authorization');
        } catch (err) {
          throw new SpeechError(engine, 'refused', `the service account key could not sign a token (${(err as Error).name})`);
        }
        return authorization ? { otherArgs: { headers: { authorization } } } : {};
      };
      return { client, callOptions };
    })();
    made.catch(() => {
      made = undefined;
    });
    return made;
  };
}

function statusCode(err: unknown): number {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : UNKNOWN;
}

function statusDetail(err: unknown): string {
  const e = err as { details?: unknown; message?: unknown } | null;
  const text = typeof e?.details === 'string' && e.details !== '' ? e.details : String(e?.message ?? err);
  return text.slice(0, 300);
}

/** A gRPC status as a SpeechError: refusals name no credential; INVALID_ARGUMENT is the request's fault. */
function googleError(engine: string, what: string, err: unknown): SpeechError {
  if (err instanceof SpeechError) return err;
  const code = statusCode(err);
  if (code === UNAUTHENTICATED || code === PERMISSION_DENIED) {
    return new SpeechError(engine, 'refused',
      `${what}: Google refused the credentials (${CODE_NAMES[code]}); check the service account key (GOOGLE_APPLICATION_CREDENTIALS, or the organization's own) and its access to Speech-to-Text`,
      code === UNAUTHENTICATED ? 401 : 403);
  }
  const named = `${CODE_NAMES[code] ?? `code ${code}`}: ${statusDetail(err)}`;
  if (code === INVALID_ARGUMENT) return new SpeechError(engine, 'input', `${what}: ${named}`);
  if (code === DEADLINE_EXCEEDED) return new SpeechError(engine, 'timeout', `${what}: ${named}`);
  return new SpeechError(engine, 'failed', `${what}: ${named}`);
}

/** Statuses after which a new call is not worth trying. */
const FINAL_CODES = new Set([INVALID_ARGUMENT, PERMISSION_DENIED, RESOURCE_EXHAUSTED, UNAUTHENTICATED]);

const cut = (text: string) => text.trim().slice(0, MAX_TRANSCRIPT_CHARS);
/** A confidence as Google means it (a float32 on the wire: 0.93 arrives as 0.9300000071525574). */
const rounded = (c: number) => Math.round(c * 10_000) / 10_000;

function eventName(v: unknown): string {
  if (typeof v === 'string') return v;
  return ['SPEECH_EVENT_UNSPECIFIED', 'END_OF_SINGLE_UTTERANCE', 'SPEECH_ACTIVITY_BEGIN', 'SPEECH_ACTIVITY_END', 'SPEECH_ACTIVITY_TIMEOUT'][Number(v)] ?? '';
}

// ── streaming ────────────────────────────────────────────────────────────────────────────────

interface StreamingResponse {
  error?: { code?: number; message?: string } | null;
  results?: Array<{ isFinal?: boolean; alternatives?: Array<{ transcript?: string; confidence?: number }> }> | null;
  speechEventType?: unknown;
}

/** One StreamingRecognize call. */
interface Call {
  stream: CancellableStream;
  openedAt: number;
  answered: boolean;
  /** When loud audio first went with no response yet. */
  loudSince?: number;
  done: boolean;
  /** Resolved when the call has ended (after a half-close: when its last results came). */
  ended: Promise<void>;
  markEnded(): void;
}

type Timer = ReturnType<typeof setTimeout>;

interface StreamTiming {
  openTimeoutMs: number;
  firstResultTimeoutMs: number;
  endOfTurnTimeoutMs: number;
  finalizeTimeoutMs: number;
  closeTimeoutMs: number;
  keepAliveMs: number;
  restartAfterMs: number;
  restartDeadlineMs: number;
}

class GoogleStream implements RecognitionStream {
  state: RecognitionStream['state'] = 'open';
  /** Calls opened to replace one past restartAfterMs or for finalize() (for records and tests). */
  restarts = 0;
  private readonly listeners: RecognitionListener[] = [];
  private call: Call | undefined;
  private readonly draining = new Set<Call>();
  private switching: Promise<void> | undefined;
  private reconnects = 1;
  private gap: Buffer[] = [];
  private gapBytes = 0;
  private droppedBytes = 0;
  private lastSentAt = Date.now();
  private readonly ticker: NodeJS.Timeout;
  private readonly maxWriteBytes: number;
  private readonly gapLimit: number;
  private readonly silence: Buffer;
  // The turn as a listener sees it.
  private turnOpen = false;
  private parts: string[] = [];
  private interim = '';
  private lastConfidence: number | undefined;
  /** Whether the engine reports voice activity, and what it last said (from which call). */
  private vadSeen = false;
  private speaking = false;
  private activityCall: Call | undefined;
  private endTimer: Timer | undefined;

  constructor(
    private readonly name: string,
    private readonly connection: GoogleConnection,
    private readonly request: Record<string, unknown>,
    private readonly timing: StreamTiming,
    private readonly encoding: StreamOptions['encoding'],
    bytesPerSecond: number,
  ) {
    this.maxWriteBytes = bytesPerSecond;
    this.gapLimit = bytesPerSecond * GAP_SECONDS;
    this.silence = Buffer.alloc(Math.round((bytesPerSecond * KEEPALIVE_SILENCE_MS) / 1000), encoding === 'mulaw' ? 0xff : 0);
    const every = Math.max(50, Math.min(1000, Math.floor(Math.min(timing.keepAliveMs, timing.restartAfterMs) / 4)));
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

  private emit(event: RecognitionEvent): void {
    for (const l of [...this.listeners]) l(event);
  }

  /** Opens a call and sends its config; resolves once the server answered its headers (or the open bound passed without a refusal). */
  async attach(): Promise<Call> {
    const options = await this.connection.callOptions();
    const stream = this.connection.client._streamingRecognize(options);
    let markEnded!: () => void;
    const call: Call = { stream, openedAt: Date.now(), answered: false, done: false, ended: new Promise<void>((r) => (markEnded = r)), markEnded: () => markEnded() };
    let settle: ((err?: unknown) => void) | undefined;
    stream.on('metadata', () => settle?.());
    stream.on('data', (r: StreamingResponse) => this.response(call, r));
    stream.on('error', (e: unknown) => {
      if (settle) settle(e === undefined || e === null ? new Error('the call failed') : e);
      else this.finished(call, e);
    });
    stream.on('end', () => {
      if (settle) settle(Object.assign(new Error('the server ended the call at once'), { code: UNKNOWN }));
      else this.finished(call);
    });
    stream.write(this.request);
    let timer: Timer | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        settle = (err?: unknown) => (err === undefined ? resolve() : reject(err as Error));
        // gRPC asks no headers of a server before its first message: a call not refused within
        // the bound is taken as open, and a later refusal ends the stream as an `error` event.
        timer = setTimeout(() => resolve(), this.timing.openTimeoutMs);
      });
    } catch (err) {
      call.done = true;
      call.markEnded();
      stream.cancel();
      throw googleError(this.name, 'opening the stream', err);
    } finally {
      settle = undefined;
      clearTimeout(timer);
    }
    return call;
  }

  start(call: Call): void {
    this.call = call;
    this.lastSentAt = Date.now();
  }

  write(audio: Buffer): void {
    if (this.state === 'closed' || this.state === 'closing' || audio.length === 0) return;
    if (audio.length > this.maxWriteBytes) {
      throw new SpeechError(this.name, 'input', `one write is at most a second of audio (${this.maxWriteBytes} bytes); got ${audio.length}`);
    }
    if (this.encoding === 'linear16' && audio.length % 2 !== 0) {
      throw new SpeechError(this.name, 'input', `linear16 audio has an odd number of bytes (${audio.length})`);
    }
    const call = this.call;
    if (this.state === 'reconnecting' || !call || call.done) {
      if (this.gapBytes + audio.length <= this.gapLimit) {
        this.gap.push(Buffer.from(audio));
        this.gapBytes += audio.length;
      } else {
        this.droppedBytes += audio.length;
      }
      return;
    }
    this.send(call, audio);
    if (!call.answered && call.loudSince === undefined && this.loud(audio)) call.loudSince = Date.now();
  }

  private send(call: Call, audio: Buffer): void {
    for (let at = 0; at < audio.length; at += MAX_CHUNK_BYTES) {
      call.stream.write({ audioContent: Buffer.from(audio.subarray(at, at + MAX_CHUNK_BYTES)) });
    }
    this.lastSentAt = Date.now();
  }

  private loud(audio: Buffer): boolean {
    const pcm = this.encoding === 'mulaw' ? decodeG711('PCMU', audio) : pcm16FromBytes(audio);
    let sum = 0;
    for (let i = 0; i < pcm.length; i++) sum += pcm[i]! * pcm[i]!;
    return pcm.length > 0 && Math.sqrt(sum / pcm.length) > LOUD_RMS;
  }

  keepAlive(): void {
    const call = this.call;
    if (this.state !== 'open' || !call || call.done) return;
    this.send(call, this.silence);
  }

  /**
   * Google v1 has no "finalize now" message: the call that heard the turn is half-closed (Google
   * answers its final results, then ends it) after a new one took over the audio. The turn ends
   * with what those results say.
   */
  async finalize(): Promise<void> {
    const call = this.call;
    if (this.state !== 'open' || !call || (!this.turnOpen && this.interim === '')) return;
    await this.replace();
    if (this.call !== call) await bounded(call.ended, this.timing.finalizeTimeoutMs);
  }

  async close(): Promise<void> {
    if (this.state === 'closed' || this.state === 'closing') {
      if (this.state === 'closing') await bounded(Promise.all([...this.draining].map((c) => c.ended)), this.timing.closeTimeoutMs);
      return;
    }
    this.state = 'closing';
    const call = this.call;
    if (call && !call.done) this.drain(call);
    // The server sends its last results, then ends the calls.
    await bounded(Promise.all([...this.draining].map((c) => c.ended)), this.timing.closeTimeoutMs);
    this.endTurn([...this.parts, this.interim].filter((t) => t !== '').join(' '));
    this.end();
  }

  /** Ends at once (an abort): no half-close, no waiting. */
  abort(): void {
    if (this.state !== 'closed') this.end();
  }

  /** A new call takes over the audio and the current one is half-closed; its last results still count. */
  private replace(): Promise<void> {
    this.switching ??= (async () => {
      const old = this.call;
      let next: Call;
      try {
        next = await this.attach();
      } catch (err) {
        if (this.state === 'open' && this.call === old) this.end(googleError(this.name, 'replacing the stream', err));
        return;
      }
      if (this.state !== 'open' || this.call !== old) {
        next.done = true;
        next.stream.cancel();
        return;
      }
      this.restarts++;
      this.start(next);
      if (old && !old.done) this.drain(old);
    })().finally(() => {
      this.switching = undefined;
    });
    return this.switching;
  }

  /** Half-closes a call; it is cancelled if its end does not come within closeTimeoutMs. */
  private drain(call: Call): void {
    this.draining.add(call);
    try {
      call.stream.end();
    } catch {
      // already ended
    }
    const timer = setTimeout(() => {
      if (!call.done) {
        call.stream.cancel();
        this.finished(call);
      }
    }, this.timing.closeTimeoutMs);
    timer.unref();
    void call.ended.then(() => clearTimeout(timer));
  }

  private end(error?: SpeechError): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    clearInterval(this.ticker);
    this.clearEndTimer();
    for (const c of [this.call, ...this.draining]) {
      if (!c) continue;
      if (!c.done) {
        c.done = true;
        c.stream.cancel();
      }
      c.markEnded();
    }
    this.call = undefined;
    this.draining.clear();
    this.gap = [];
    if (error) this.emit({ type: 'error', error });
    this.emit({ type: 'closed' });
  }

  /** A call ended: the end we asked for (a drained call), or a drop. */
  private finished(call: Call, err?: unknown): void {
    if (call.done && !this.draining.has(call)) {
      call.markEnded();
      return;
    }
    call.done = true;
    call.markEnded();
    if (this.draining.delete(call)) {
      // Its last results are in: a turn it was hearing ends with them.
      if (this.turnOpen && this.activityCall === call) this.endTurn(this.turnText());
      return;
    }
    if (call !== this.call || this.state !== 'open') return;
    this.call = undefined;
    const code = err === undefined ? undefined : statusCode(err);
    if (code !== undefined && FINAL_CODES.has(code)) {
      this.end(googleError(this.name, 'the stream', err));
      return;
    }
    const why = err === undefined ? 'the server ended the call' : `${CODE_NAMES[code!] ?? `code ${code}`}: ${statusDetail(err)}`;
    // What this call was hearing will not be finalized by it: the turn ends unless the next call hears it go on.
    if (this.turnOpen && this.activityCall === call) {
      this.speaking = false;
      this.armEndTimer();
    }
    if (this.reconnects === 0) {
      this.end(new SpeechError(this.name, 'failed', `the stream dropped again (${why}) after it was replaced once`));
      return;
    }
    this.reconnects--;
    this.state = 'reconnecting';
    void this.reconnect(why);
  }

  private async reconnect(why: string): Promise<void> {
    let call: Call;
    try {
      call = await this.attach();
    } catch (err) {
      if (this.state !== 'reconnecting') return;
      const e = googleError(this.name, 'opening the stream', err);
      this.end(new SpeechError(this.name, e.kind === 'refused' ? 'refused' : 'failed', `the stream dropped (${why}) and could not be opened again: ${e.message}`, e.status));
      return;
    }
    if (this.state !== 'reconnecting') {
      call.done = true;
      call.stream.cancel();
      return;
    }
    this.state = 'open';
    this.start(call);
    const resentBytes = this.gapBytes;
    const droppedBytes = this.droppedBytes;
    for (const b of this.gap) this.send(call, b);
    this.gap = [];
    this.gapBytes = 0;
    this.droppedBytes = 0;
    this.emit({ type: 'reconnected', resentBytes, droppedBytes });
  }

  private tick(): void {
    const call = this.call;
    if (this.state !== 'open' || !call || call.done) return;
    const now = Date.now();
    if (!call.answered && call.loudSince !== undefined && now - call.loudSince > this.timing.firstResultTimeoutMs) {
      this.end(new SpeechError(this.name, 'timeout', `no result within ${this.timing.firstResultTimeoutMs} ms of the first speech`));
      return;
    }
    const age = now - call.openedAt;
    if (!this.switching && ((age >= this.timing.restartAfterMs && !this.turnOpen) || age >= this.timing.restartDeadlineMs)) void this.replace();
    if (now - this.lastSentAt >= this.timing.keepAliveMs) this.keepAlive();
  }

  private response(call: Call, r: StreamingResponse): void {
    if (this.state === 'closed' || (call !== this.call && !this.draining.has(call))) return;
    call.answered = true;
    if (r.error && typeof r.error.code === 'number' && r.error.code !== 0) {
      const err = { code: r.error.code, details: String(r.error.message ?? '') };
      if (!call.done) call.stream.cancel();
      this.finished(call, err);
      return;
    }
    const event = eventName(r.speechEventType);
    if (event === 'SPEECH_ACTIVITY_BEGIN') {
      this.vadSeen = true;
      this.speaking = true;
      this.activityCall = call;
      this.clearEndTimer();
      this.emit({ type: 'speechStarted' });
      this.startTurn(call);
    }
    let sawFinal = false;
    const finals: Array<{ text: string; confidence?: number }> = [];
    const interims: string[] = [];
    for (const res of r.results ?? []) {
      const alt = res.alternatives?.[0];
      const text = typeof alt?.transcript === 'string' ? cut(alt.transcript) : '';
      if (res.isFinal === true) {
        sawFinal = true;
        if (text !== '') finals.push({ text, ...(typeof alt?.confidence === 'number' && alt.confidence > 0 ? { confidence: rounded(alt.confidence) } : {}) });
      } else if (text !== '') {
        interims.push(text);
      }
    }
    if (sawFinal) {
      // A final ends the turn once the speech has ended (or when the engine reports no voice activity).
      const ends = (this.turnOpen || finals.length > 0) && (!this.vadSeen || !this.speaking);
      this.interim = '';
      finals.forEach((f, i) => {
        this.startTurn(call);
        this.parts.push(f.text);
        this.lastConfidence = f.confidence;
        this.emit({ type: 'final', text: f.text, speechFinal: ends && i === finals.length - 1, ...(f.confidence !== undefined ? { confidence: f.confidence } : {}) });
      });
      if (ends) this.endTurn(this.parts.join(' '), this.lastConfidence);
    }
    if (interims.length > 0) {
      this.startTurn(call);
      this.interim = cut(interims.join(' '));
      this.emit({ type: 'interim', text: [...this.parts, this.interim].join(' ') });
    }
    if (event === 'SPEECH_ACTIVITY_END') {
      this.vadSeen = true;
      this.speaking = false;
      this.activityCall = call;
      if (this.turnOpen) {
        if (this.interim === '' && this.parts.length > 0) this.endTurn(this.parts.join(' '), this.lastConfidence);
        else this.armEndTimer();
      }
    }
  }

  private turnText(): string {
    return [...this.parts, this.interim].filter((t) => t !== '').join(' ');
  }

  private armEndTimer(): void {
    this.clearEndTimer();
    this.endTimer = setTimeout(() => {
      this.endTimer = undefined;
      if (!this.speaking) this.endTurn(this.turnText(), this.lastConfidence);
    }, this.timing.endOfTurnTimeoutMs);
    this.endTimer.unref();
  }

  private clearEndTimer(): void {
    if (this.endTimer) clearTimeout(this.endTimer);
    this.endTimer = undefined;
  }

  private startTurn(call: Call): void {
    this.activityCall ??= call;
    if (this.turnOpen) return;
    this.turnOpen = true;
    this.activityCall = call;
    this.parts = [];
    this.interim = '';
    this.lastConfidence = undefined;
    this.emit({ type: 'startOfTurn' });
  }

  private endTurn(text: string, confidence?: number): void {
    this.clearEndTimer();
    if (!this.turnOpen) return;
    this.turnOpen = false;
    this.parts = [];
    this.interim = '';
    this.lastConfidence = undefined;
    this.emit({ type: 'endOfTurn', text, ...(confidence !== undefined ? { confidence } : {}) });
  }
}

/** Waits for `p` at most `ms`. */
function bounded(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: Timer | undefined;
  return Promise.race([
    p.then(() => undefined),
    new Promise<void>((r) => {
      timer = setTimeout(r, ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Google's streaming recognition (v1 StreamingRecognize): turns from its voice activity events and finals. */
export class GoogleStreaming implements StreamingSpeechToText {
  readonly name = 'google';
  readonly offline = false;
  private readonly connection: () => Promise<GoogleConnection>;
  private readonly timing: StreamTiming;

  constructor(private readonly options: GoogleSpeechOptions) {
    this.connection = lazyGoogle(this.name, options);
    const restartAfterMs = Math.min(options.restartAfterMs ?? 240_000, 250_000);
    this.timing = {
      openTimeoutMs: options.openTimeoutMs ?? 2000,
      firstResultTimeoutMs: options.firstResultTimeoutMs ?? 5000,
      endOfTurnTimeoutMs: options.endOfTurnTimeoutMs ?? 1500,
      finalizeTimeoutMs: options.finalizeTimeoutMs ?? 2000,
      closeTimeoutMs: options.closeTimeoutMs ?? 2000,
      keepAliveMs: Math.min(options.keepAliveMs ?? 2000, 5000),
      restartAfterMs,
      restartDeadlineMs: Math.min(Math.max(options.restartDeadlineMs ?? restartAfterMs * 1.2, restartAfterMs), 290_000),
    };
  }

  /** The StreamingRecognize config a stream sends first. */
  streamingConfig(o: StreamOptions): Record<string, unknown> {
    const tag = languageTag(this.name, o.language);
    const model = googleModelFor(o.language, this.options.model);
    const phrases = streamKeywords(o.keywords);
    return {
      streamingConfig: {
        config: {
          encoding: o.encoding === 'mulaw' ? 'MULAW' : 'LINEAR16',
          sampleRateHertz: o.sampleRate,
          audioChannelCount: 1,
          languageCode: tag.region ? `${tag.language}-${tag.region}` : tag.language,
          enableAutomaticPunctuation: true,
          ...(model ? { model } : {}),
          useEnhanced: true,
          ...(phrases ? { speechContexts: [{ phrases }] } : {}),
        },
        interimResults: true,
        singleUtterance: false,
        enableVoiceActivityEvents: true,
      },
    };
  }

  async open(o: StreamOptions): Promise<RecognitionStream> {
    o.signal?.throwIfAborted();
    const { bytesPerSecond } = streamFormat(this.name, o);
    const request = this.streamingConfig(o);
    const stream = new GoogleStream(this.name, await this.connection(), request, this.timing, o.encoding, bytesPerSecond);
    try {
      stream.start(await stream.attach());
    } catch (err) {
      stream.abort();
      throw err;
    }
    abortOn(o.signal, stream, () => stream.abort());
    return stream;
  }

  /** Reads and checks the key; spends no request (a refused account shows on the first open()). */
  async check(): Promise<void> {
    await readKey(this.name, this.options);
  }
}

// ── one utterance ────────────────────────────────────────────────────────────────────────────

/** Google's Recognize for one utterance (LINEAR16 at its own rate). */
export class GoogleTranscriber implements SpeechToText {
  readonly name = 'google';
  readonly offline = false;
  private readonly connection: () => Promise<GoogleConnection>;

  constructor(private readonly options: GoogleSpeechOptions) {
    this.connection = lazyGoogle(this.name, options);
  }

  async transcribe(audio: Int16Array | Buffer, sampleRate: number, opts: TranscribeOptions): Promise<Transcript> {
    opts.signal?.throwIfAborted();
    const pcm = utteranceSamples(this.name, audio, sampleRate);
    const tag = languageTag(this.name, opts.language);
    const model = googleModelFor(opts.language, this.options.model);
    if (pcm.length === 0) return { text: '', engine: this.name, ...(model ? { model } : {}) };
    const phrases = opts.grammar?.kind === 'phrases' ? streamKeywords(opts.grammar.phrases) : undefined;
    const { client, callOptions } = await this.connection();
    const call = client.recognize({
      config: {
        encoding: 'LINEAR16', sampleRateHertz: sampleRate, audioChannelCount: 1,
        languageCode: tag.region ? `${tag.language}-${tag.region}` : tag.language,
        enableAutomaticPunctuation: true, ...(model ? { model } : {}), useEnhanced: true,
        ...(phrases ? { speechContexts: [{ phrases }] } : {}),
      },
      audio: { content: Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength) },
    }, { ...(await callOptions()), timeout: this.options.requestTimeoutMs ?? 15_000, retry: null });
    const onAbort = () => (call as unknown as { cancel?: () => void }).cancel?.();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const [r] = await call;
      const results = r.results ?? [];
      const text = cut(results.map((x) => x.alternatives?.[0]?.transcript ?? '').filter((t) => t.trim() !== '').join(' '));
      const confidence = results[0]?.alternatives?.[0]?.confidence;
      return { text, engine: this.name, ...(model ? { model } : {}), ...(typeof confidence === 'number' && text !== '' ? { confidence: rounded(confidence) } : {}) };
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason ?? err;
      throw googleError(this.name, 'transcription', err);
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
    }
  }

  async check(): Promise<void> {
    await readKey(this.name, this.options);
  }
}
