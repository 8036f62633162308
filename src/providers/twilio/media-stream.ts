// A VoiceTransport over one Twilio bidirectional Media Stream (a WebSocket Twilio opens to us for
// <Connect><Stream>; messages: https://www.twilio.com/docs/voice/media-streams/websocket-messages).
// In: `media` (base64 μ-law, 8 kHz) decoded to PCM16 and cut into 20 ms frames, `dtmf`, the `mark`
// echoes that say our audio has been played, `stop` and the socket's close. Out: `media`, `mark`
// and `clear`. Twilio buffers what we send and plays it in order, so audio goes out at once and
// a mark is `played` only when Twilio echoes it. Twilio echoes the marks of cleared audio as well:
// those are remembered and never reported. Digits, transfer and hang-up go through Twilio's Calls
// REST API, which the stream's owner hands in. Sending digits redirects the call (<Play digits>),
// which ends this stream; the owner then hands the call's next stream to adopt(), and what was not
// yet confirmed played is sent again on it. Everything read from the socket is bounded.
import { EventEmitter } from 'node:events';
import type { WebSocket, RawData } from 'ws';
import { decodeG711, encodeG711 } from '../../media/g711.ts';
import { FRAME_SAMPLES } from '../../media/pcm.ts';
import type { TransferOptions, VoiceTransport, VoiceTransportEvents } from '../../media/voice-transport.ts';

/** The largest message read from the stream; Twilio's are well under 1 KiB (20 ms of μ-law). */
export const MAX_STREAM_MESSAGE_BYTES = 64 * 1024;
/** Samples of μ-law one inbound media message may carry (1 s); more is not Twilio's. */
const MAX_INBOUND_SAMPLES = 8000;
/** Samples per outbound media message (20 ms). */
const CHUNK_SAMPLES = FRAME_SAMPLES;
/** Bytes we let queue up unsent on the socket before deciding the far end stopped reading. */
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

/** What a stream's `start` message says (only the fields we use, checked). */
export interface StreamStart {
  streamSid: string;
  callSid: string;
  accountSid: string;
  /** <Parameter> values of the TwiML, as strings (bounded). */
  customParameters: Record<string, string>;
}

export type StreamMessage =
  | { event: 'connected' }
  | { event: 'start'; start: StreamStart }
  | { event: 'media'; payload: Buffer; track: string }
  | { event: 'dtmf'; digit: string }
  | { event: 'mark'; name: string }
  | { event: 'stop' }
  | { event: 'other' };

const SID = /^[A-Za-z0-9]{2,64}$/;
const DIGIT = /^[0-9*#A-D]$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

const obj = (v: unknown): Record<string, unknown> | undefined =>
  (v && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : undefined);
const str = (v: unknown, max: number): string | undefined => (typeof v === 'string' && v.length <= max ? v : undefined);

/**
 * One message of the stream, checked; null for anything that is not a well-formed Twilio message
 * (too large, not JSON, a known event with missing or oversized fields). Unknown events are `other`.
 */
export function parseStreamMessage(data: RawData | string): StreamMessage | null {
  const size = typeof data === 'string' ? data.length : Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : data.byteLength;
  if (size > MAX_STREAM_MESSAGE_BYTES) return null;
  const text = typeof data === 'string' ? data
    : Array.isArray(data) ? Buffer.concat(data).toString('utf8') : Buffer.from(data as ArrayBuffer).toString('utf8');
  let parsed: unknown;
  try { parsed = JSON.parse(text); } catch { return null; }
  const m = obj(parsed);
  if (!m) return null;
  switch (m.event) {
    case 'connected': return { event: 'connected' };
    case 'stop': return { event: 'stop' };
    case 'start': {
      const s = obj(m.start);
      const streamSid = str(s?.streamSid ?? m.streamSid, 64);
      const callSid = str(s?.callSid, 64);
      if (!s || !streamSid || !SID.test(streamSid) || !callSid || !SID.test(callSid)) return null;
      const format = obj(s.mediaFormat);
      // Bidirectional streams are μ-law at 8 kHz, one channel; anything else we could not decode.
      if (format && (format.encoding !== 'audio/x-mulaw' || format.sampleRate !== 8000 || (format.channels ?? 1) !== 1)) return null;
      const customParameters: Record<string, string> = {};
      const given = obj(s.customParameters) ?? {};
      for (const [k, v] of Object.entries(given).slice(0, 16)) {
        const value = str(v, 1024);
        if (k.length <= 64 && value !== undefined) customParameters[k] = value;
      }
      return { event: 'start', start: { streamSid, callSid, accountSid: str(s.accountSid, 64) ?? '', customParameters } };
    }
    case 'media': {
      const media = obj(m.media);
      const payload = str(media?.payload, Math.ceil(MAX_INBOUND_SAMPLES / 3) * 4);
      if (payload === undefined || !BASE64.test(payload)) return null;
      return { event: 'media', payload: Buffer.from(payload, 'base64'), track: str(media?.track, 16) ?? 'inbound' };
    }
    case 'dtmf': {
      const digit = str(obj(m.dtmf)?.digit, 1);
      return digit !== undefined && DIGIT.test(digit) ? { event: 'dtmf', digit } : null;
    }
    case 'mark': {
      const name = str(obj(m.mark)?.name, 64);
      return name ? { event: 'mark', name } : null;
    }
    default: return { event: 'other' };
  }
}

/** A stream whose `start` has arrived: what follows it is kept until the transport takes it. */
export interface PendingStream {
  start: StreamStart;
  /** The messages that came after `start` (at most MAX_BACKLOG); collecting stops. */
  take(): RawData[];
}

/** Messages kept between a stream's `start` and its transport (10 s of media). */
const MAX_BACKLOG = 500;

/**
 * Waits for a socket's `start` message (after an optional `connected`): resolves with it, or null
 * when anything else arrives first, more than a few messages come without one, the socket closes,
 * or `timeoutMs` passes. The socket is left open either way. After the start, messages are kept
 * (bounded) until take(), so nothing the caller sends is lost while the call is being looked up.
 */
export function readStreamStart(socket: WebSocket, timeoutMs: number): Promise<PendingStream | null> {
  return new Promise((resolve) => {
    let seen = 0;
    let started: StreamStart | undefined;
    const backlog: RawData[] = [];
    const detach = () => {
      clearTimeout(timer);
      socket.off('message', onMessage);
      socket.off('close', onClose);
    };
    const onMessage = (data: RawData) => {
      if (started) {
        if (backlog.length < MAX_BACKLOG) backlog.push(data);
        return;
      }
      const m = parseStreamMessage(data);
      if (m?.event === 'start') {
        started = m.start;
        clearTimeout(timer);
        socket.off('close', onClose);
        resolve({ start: m.start, take: () => { detach(); return backlog.splice(0); } });
      } else if (m?.event !== 'connected' || ++seen > 3) {
        detach();
        resolve(null);
      }
    };
    const onClose = () => { detach(); resolve(null); };
    const timer = setTimeout(() => { detach(); resolve(null); }, timeoutMs);
    socket.on('message', onMessage);
    socket.on('close', onClose);
  });
}

export interface TwilioMediaStreamOptions {
  /** Plays keys to the far end (the owner redirects the call to <Play digits>, then a new stream). */
  sendDigits(digits: string): Promise<void>;
  /** Hands the call to `destination` (the owner redirects the call to <Dial>). */
  transfer(destination: string, opts: TransferOptions): Promise<void>;
  /** Ends the call (the owner completes it through the Calls API). */
  hangup(reason: string): Promise<void>;
  /** How long a redirected call may take to open its next stream (default 15 s). */
  resumeTimeoutMs?: number;
  /** Silence on the socket (no message at all) after which the call is taken as dead (default 30 s). */
  idleTimeoutMs?: number;
}

/** Audio handed to Twilio and not yet confirmed played (a mark echoed after it). */
interface Segment {
  pcm: Int16Array;
  /** The mark sent after it on the wire, and the session's name for it. */
  wire?: string;
  mark?: string;
}

export interface StreamCounters {
  messages: number;
  /** Messages that were not well-formed Twilio messages (ignored). */
  malformed: number;
  /** Well-formed messages we have no use for (other events, other tracks). */
  ignored: number;
  framesIn: number;
  /** Mark echoes of audio we cleared (never reported as played). */
  clearedEchoes: number;
}

export class TwilioMediaStream extends EventEmitter<VoiceTransportEvents> implements VoiceTransport {
  readonly kind = 'twilio-media-stream';
  readonly callSid: string;
  readonly counters: StreamCounters = { messages: 0, malformed: 0, ignored: 0, framesIn: 0, clearedEchoes: 0 };
  private socket: WebSocket;
  private streamSid: string;
  private segments: Segment[] = [];
  /** Wire marks sent and not yet echoed, in order. */
  private pendingWire: string[] = [];
  /** Wire marks of cleared audio: their echoes are dropped. */
  private cleared = new Set<string>();
  private wireSeq = 0;
  /** Caller audio not yet a whole frame. */
  private partial = new Int16Array(0);
  private done = false;
  /** Between a redirect (sendDigits) and the call's next stream. */
  private resuming: NodeJS.Timeout | undefined;
  private idle: NodeJS.Timeout | undefined;
  /** Messages held until the session listens (set while the constructor's backlog is replayed). */
  private held: RawData[] | null = null;
  private readonly onMessage = (data: RawData) => { if (this.held) this.held.push(data); else this.read(data); };
  private readonly onClose = () => { if (!this.resuming) this.end('the media stream closed'); };
  private readonly onError = () => { if (!this.resuming) this.end('the media stream failed'); };

  /**
   * `backlog`: what the socket sent after `start` before this transport existed (readStreamStart's
   * take()); it is read, in order and before anything newer, once whoever built the transport has
   * attached its listeners (the next turn of the event loop). A socket that closed meanwhile ends
   * the call then.
   */
  constructor(socket: WebSocket, start: StreamStart, private readonly o: TwilioMediaStreamOptions, backlog: RawData[] = []) {
    super();
    this.socket = socket;
    this.streamSid = start.streamSid;
    this.callSid = start.callSid;
    this.held = [...backlog];
    this.listen();
    setImmediate(() => {
      const held = this.held ?? [];
      this.held = null;
      for (const data of held) this.read(data);
      if (this.socket === socket && socket.readyState !== socket.OPEN) this.onClose();
    });
  }

  private listen(): void {
    this.socket.on('message', this.onMessage);
    this.socket.on('close', this.onClose);
    this.socket.on('error', this.onError);
    this.touch();
  }

  private touch(): void {
    clearTimeout(this.idle);
    this.idle = setTimeout(() => this.end('no message from the media stream'), this.o.idleTimeoutMs ?? 30_000);
  }

  private read(data: RawData): void {
    if (this.done) return;
    this.counters.messages++;
    this.touch();
    const m = parseStreamMessage(data);
    if (!m) { this.counters.malformed++; return; }
    switch (m.event) {
      case 'media':
        if (m.track !== 'inbound' || m.payload.length > MAX_INBOUND_SAMPLES) { this.counters.ignored++; return; }
        this.frames(decodeG711('PCMU', m.payload));
        return;
      case 'dtmf':
        this.emit('dtmf', m.digit);
        return;
      case 'mark':
        this.echoed(m.name);
        return;
      case 'stop':
        if (!this.resuming) this.end('the call ended');
        return;
      default:
        this.counters.ignored++;
    }
  }

  /** Caller audio to whole 160-sample frames (Twilio sends 20 ms, but nothing relies on it). */
  private frames(pcm: Int16Array): void {
    let buf = pcm;
    if (this.partial.length > 0) {
      buf = new Int16Array(this.partial.length + pcm.length);
      buf.set(this.partial);
      buf.set(pcm, this.partial.length);
    }
    let at = 0;
    for (; at + FRAME_SAMPLES <= buf.length; at += FRAME_SAMPLES) {
      this.counters.framesIn++;
      this.emit('audio', buf.slice(at, at + FRAME_SAMPLES));
    }
    this.partial = buf.slice(at);
  }

  private echoed(wire: string): void {
    if (this.cleared.delete(wire)) { this.counters.clearedEchoes++; return; }
    const i = this.pendingWire.indexOf(wire);
    if (i < 0) { this.counters.ignored++; return; }
    this.pendingWire.splice(0, i + 1);
    // Everything up to this mark has been played: report its marks in order.
    const j = this.segments.findIndex((s) => s.wire === wire);
    const played = this.segments.splice(0, j + 1);
    for (const s of played) if (s.mark !== undefined) this.emit('played', s.mark);
  }

  private send(message: object): void {
    if (this.socket.readyState !== this.socket.OPEN) return;
    if (this.socket.bufferedAmount > MAX_BUFFERED_BYTES) {
      this.end('the media stream is not reading');
      return;
    }
    this.socket.send(JSON.stringify(message));
  }

  private transmit(s: Segment): void {
    for (let at = 0; at < s.pcm.length; at += CHUNK_SAMPLES) {
      const payload = encodeG711('PCMU', s.pcm.subarray(at, at + CHUNK_SAMPLES)).toString('base64');
      this.send({ event: 'media', streamSid: this.streamSid, media: { payload } });
    }
    if (s.wire !== undefined) this.send({ event: 'mark', streamSid: this.streamSid, mark: { name: s.wire } });
  }

  play(pcm: Int16Array, mark?: string): void {
    if (this.done) return;
    const s: Segment = { pcm, ...(mark !== undefined ? { mark, wire: `w${++this.wireSeq}` } : {}) };
    this.segments.push(s);
    if (s.wire !== undefined) this.pendingWire.push(s.wire);
    // While the call is being redirected its next stream gets it (adopt()).
    if (!this.resuming) this.transmit(s);
  }

  clear(): number {
    const n = this.segments.reduce((sum, s) => sum + s.pcm.length, 0);
    for (const w of this.pendingWire) this.cleared.add(w);
    this.pendingWire = [];
    this.segments = [];
    if (!this.done && !this.resuming) this.send({ event: 'clear', streamSid: this.streamSid });
    return n;
  }

  /** Samples handed over and not yet confirmed played. */
  get unconfirmedSamples(): number {
    return this.segments.reduce((sum, s) => sum + s.pcm.length, 0);
  }

  /** Whether the call is between a redirect and its next stream. */
  get awaitingStream(): boolean {
    return this.resuming !== undefined;
  }

  async sendDigits(digits: string): Promise<void> {
    if (this.done) throw new Error('the call has ended');
    if (this.resuming) throw new Error('the call is already being redirected');
    // The redirect ends this stream: its stop and close are expected, not the end of the call.
    this.resuming = setTimeout(() => { this.resuming = undefined; this.end('the media stream did not come back after sending digits'); }, this.o.resumeTimeoutMs ?? 15_000);
    try {
      await this.o.sendDigits(digits);
    } catch (err) {
      clearTimeout(this.resuming);
      this.resuming = undefined;
      if (this.socket.readyState !== this.socket.OPEN) this.end('the media stream closed');
      throw err;
    }
  }

  /**
   * The call's next stream after a redirect: it replaces the old one, and audio not yet confirmed
   * played (with its marks) is sent again on it. False when no redirect is under way.
   */
  adopt(socket: WebSocket, start: StreamStart, backlog: RawData[] = []): boolean {
    if (this.done || !this.resuming || start.callSid !== this.callSid) return false;
    clearTimeout(this.resuming);
    this.resuming = undefined;
    this.detach();
    this.socket = socket;
    this.streamSid = start.streamSid;
    this.partial = new Int16Array(0);
    this.listen();
    for (const s of this.segments) this.transmit(s);
    for (const data of backlog) this.read(data);
    if (socket.readyState !== socket.OPEN) this.onClose();
    return true;
  }

  private detach(): void {
    this.socket.off('message', this.onMessage);
    this.socket.off('close', this.onClose);
    this.socket.off('error', this.onError);
    if (this.socket.readyState === this.socket.OPEN || this.socket.readyState === this.socket.CONNECTING) this.socket.close(1000);
  }

  async transfer(destination: string, opts: TransferOptions = {}): Promise<void> {
    await this.o.transfer(destination, opts);
    this.end('transferred');
  }

  async hangup(reason = 'hung up by the agent'): Promise<void> {
    if (this.done) return;
    await this.o.hangup(reason);
    this.end(reason);
  }

  /** The call is over (stop, close, our own hang-up or transfer): once. */
  end(reason: string): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.idle);
    clearTimeout(this.resuming);
    this.resuming = undefined;
    this.segments = [];
    this.pendingWire = [];
    this.detach();
    this.emit('ended', reason);
  }
}
