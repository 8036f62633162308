// A VoiceTransport over one browser WebSocket (the console's "talk to this agent", docs/voice.md,
// "Talking from the browser"). In: binary messages of PCM16 little-endian mono at the socket's
// rate (8 or 16 kHz), resampled to the session's 8 kHz and cut into 20 ms frames; JSON
// `{"type":"hangup"}`. Out: the agent's audio as binary 20 ms frames at the socket's rate, paced
// in real time here (a little ahead, so the browser's player never starves), JSON `clear` when the
// caller cut the agent short, transcript lines and `ended`. A mark is `played` once its last frame
// went out. The browser has no keys and no transfer (call-policy.ts CAPABILITIES.browser).
// Everything read from the socket is bounded: a message's size, the audio's rate over time.
import { EventEmitter } from 'node:events';
import type { RawData, WebSocket } from 'ws';
import { FRAME_SAMPLES, TELEPHONE_RATE } from '../../media/pcm.ts';
import type { VoiceTransport, VoiceTransportEvents } from '../../media/voice-transport.ts';
import { resample, StreamResampler } from '../../speech/resample.ts';

/** The rates a browser may stream at. */
export const BROWSER_RATES = [8000, 16000] as const;
export type BrowserRate = typeof BROWSER_RATES[number];
/** The largest message read from a browser's socket: 1 s of 16 kHz PCM16 (32 KiB), or a small JSON message. */
export const MAX_BROWSER_MESSAGE_BYTES = 32 * 1024;
/** Audio the browser may send ahead of real time before the excess is dropped, ms. */
const AHEAD_MS = 2000;
/** Frames sent ahead of real time (the browser's jitter margin). */
const LEAD_FRAMES = 5;
const FRAME_MS = 20;
/** Bytes we let queue up unsent on the socket before deciding the browser stopped reading. */
const MAX_BUFFERED_BYTES = 2 * 1024 * 1024;

export interface BrowserCounters {
  messages: number;
  /** Messages that were neither whole PCM16 audio nor a known JSON message (ignored). */
  malformed: number;
  framesIn: number;
  /** Samples dropped because the browser sent audio faster than real time. */
  droppedSamples: number;
  framesOut: number;
}

interface Segment { pcm: Int16Array; at: number; mark?: string }

export class BrowserVoiceTransport extends EventEmitter<VoiceTransportEvents> implements VoiceTransport {
  readonly kind = 'browser';
  readonly counters: BrowserCounters = { messages: 0, malformed: 0, framesIn: 0, droppedSamples: 0, framesOut: 0 };
  private readonly inbound: StreamResampler;
  private partial = new Int16Array(0);
  private queue: Segment[] = [];
  private pacer: NodeJS.Timeout | undefined;
  /** When the pacer started, and the frames sent since. */
  private paceStart = 0;
  private paced = 0;
  private readonly opened: number;
  private received = 0;
  private done = false;
  private readonly onMessage = (data: RawData, binary: boolean) => this.read(data, binary);
  private readonly onClose = () => this.end('the browser closed the call');
  private readonly onError = () => this.end('the browser\'s socket failed');

  constructor(private readonly socket: WebSocket, readonly rate: BrowserRate, private readonly clock: () => number = Date.now) {
    super();
    this.inbound = new StreamResampler(rate, TELEPHONE_RATE);
    this.opened = clock();
    socket.on('message', this.onMessage);
    socket.on('close', this.onClose);
    socket.on('error', this.onError);
    if (socket.readyState !== socket.OPEN) setImmediate(() => this.onClose());
  }

  /** Sends a JSON control or transcript message to the browser. */
  notify(message: Record<string, unknown>): void {
    if (this.done || this.socket.readyState !== this.socket.OPEN) return;
    this.socket.send(JSON.stringify(message));
  }

  private read(data: RawData, binary: boolean): void {
    if (this.done) return;
    this.counters.messages++;
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    if (buf.length > MAX_BROWSER_MESSAGE_BYTES) { this.counters.malformed++; return; }
    if (!binary) {
      let m: unknown;
      try { m = JSON.parse(buf.toString('utf8')); } catch { this.counters.malformed++; return; }
      if (m && typeof m === 'object' && (m as { type?: unknown }).type === 'hangup') this.end('the caller hung up');
      else this.counters.malformed++;
      return;
    }
    if (buf.length % 2 !== 0) { this.counters.malformed++; return; }
    let pcm = new Int16Array(buf.length / 2);
    for (let i = 0; i < pcm.length; i++) pcm[i] = buf.readInt16LE(i * 2);
    // No more audio than real time allows (plus a margin): a browser cannot make the session hear faster.
    const allowed = Math.floor(((this.clock() - this.opened + AHEAD_MS) * this.rate) / 1000) - this.received;
    if (pcm.length > allowed) {
      this.counters.droppedSamples += pcm.length - Math.max(0, allowed);
      pcm = pcm.subarray(0, Math.max(0, allowed));
    }
    this.received += pcm.length;
    if (pcm.length > 0) this.frames(this.inbound.push(pcm));
  }

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

  play(pcm: Int16Array, mark?: string): void {
    if (this.done) return;
    this.queue.push({ pcm: resample(pcm, TELEPHONE_RATE, this.rate), at: 0, ...(mark !== undefined ? { mark } : {}) });
    if (!this.pacer) {
      this.paceStart = this.clock();
      this.paced = 0;
      this.pacer = setInterval(() => this.pace(), FRAME_MS);
      this.pace();
    }
  }

  /** Sends the frames real time has reached (plus the lead); marks of segments sent in full are played. */
  private pace(): void {
    const due = Math.floor((this.clock() - this.paceStart) / FRAME_MS) + LEAD_FRAMES;
    const frame = (this.rate * FRAME_MS) / 1000;
    while (this.paced < due && this.queue.length > 0) {
      const s = this.queue[0]!;
      const chunk = s.pcm.subarray(s.at, s.at + frame);
      s.at += chunk.length;
      this.paced++;
      this.counters.framesOut++;
      this.sendAudio(chunk);
      if (this.done) return;
      if (s.at >= s.pcm.length) {
        this.queue.shift();
        if (s.mark !== undefined) this.emit('played', s.mark);
      }
    }
    if (this.queue.length === 0) this.stopPacer();
  }

  private stopPacer(): void {
    clearInterval(this.pacer);
    this.pacer = undefined;
  }

  private sendAudio(pcm: Int16Array): void {
    if (this.socket.readyState !== this.socket.OPEN) return;
    if (this.socket.bufferedAmount > MAX_BUFFERED_BYTES) { this.end('the browser is not reading'); return; }
    const bytes = Buffer.alloc(pcm.length * 2);
    for (let i = 0; i < pcm.length; i++) bytes.writeInt16LE(pcm[i]!, i * 2);
    this.socket.send(bytes, { binary: true });
  }

  clear(): number {
    const n = this.queue.reduce((sum, s) => sum + s.pcm.length - s.at, 0);
    this.queue = [];
    this.stopPacer();
    // The browser drops what it has scheduled and not yet played.
    this.notify({ type: 'clear' });
    return Math.round((n * TELEPHONE_RATE) / this.rate);
  }

  sendDigits(): Promise<void> {
    return Promise.reject(new Error('a browser call has no keys to send'));
  }

  transfer(): Promise<void> {
    return Promise.reject(new Error('a browser call cannot be transferred'));
  }

  async hangup(reason = 'hung up by the agent'): Promise<void> {
    this.end(reason);
  }

  /** The call is over (the browser closed or hung up, the agent hung up, the time limit): once. */
  end(reason: string): void {
    if (this.done) return;
    this.notify({ type: 'ended', reason });
    this.done = true;
    this.stopPacer();
    this.queue = [];
    this.socket.off('message', this.onMessage);
    this.socket.off('close', this.onClose);
    if (this.socket.readyState === this.socket.OPEN || this.socket.readyState === this.socket.CONNECTING) this.socket.close(1000, 'call ended');
    this.emit('ended', reason);
  }
}
