// Twilio's side of a bidirectional Media Stream, for tests: a `ws` client that connects to our
// stream route, sends `connected` and `start` (with the <Parameter>s of the TwiML), streams the
// caller's audio as μ-law `media` messages paced at 20 ms, and plays what it is sent in real time
// the way Twilio does: media is queued and played 20 ms at a time, a `mark` is echoed once the
// audio before it has played, and a `clear` drops what is queued and echoes its marks at once.
// Written from Twilio's protocol description, independently of src/providers/twilio/media-stream.ts.
import crypto from 'node:crypto';
import alawmulaw from 'alawmulaw';
import WebSocket from 'ws';

const FRAME = 160;

export interface StreamClientOptions {
  url: string;
  callSid: string;
  accountSid?: string;
  /** customParameters of the start message (the TwiML's <Parameter>s). */
  parameters?: Record<string, string>;
  /** Send a start at all (false: a stream that never starts). */
  start?: boolean;
}

export class FakeMediaStream {
  readonly streamSid = `MZ${crypto.randomBytes(16).toString('hex')}`;
  /** What the caller heard, 20 ms frames, as played. */
  readonly heard: Int16Array[] = [];
  /** Every message we were sent, parsed. */
  readonly received: Array<Record<string, any>> = [];
  /** Marks echoed back, in order (played, or cleared). */
  readonly echoed: string[] = [];
  clears = 0;
  closed: { code: number; reason: string } | undefined;
  readonly #socket: WebSocket;
  readonly #queue: Array<{ pcm: Int16Array } | { mark: string }> = [];
  #player: NodeJS.Timeout | undefined;
  readonly #mic: Array<Int16Array | (() => void)> = [];
  #chunk = 0;
  /** Whether the line sends the caller's audio (silence between utterances) once started. */
  #live = false;
  readonly #closedPromise: Promise<{ code: number; reason: string }>;

  private constructor(socket: WebSocket) {
    this.#socket = socket;
    this.#closedPromise = new Promise((resolve) => {
      socket.on('close', (code, reason) => {
        this.closed = { code, reason: reason.toString() };
        clearInterval(this.#player);
        resolve(this.closed);
      });
    });
    socket.on('message', (data: Buffer) => this.#onMessage(data));
  }

  static async connect(o: StreamClientOptions): Promise<FakeMediaStream> {
    const socket = new WebSocket(o.url);
    await new Promise<void>((resolve, reject) => { socket.once('open', () => resolve()); socket.once('error', reject); });
    const s = new FakeMediaStream(socket);
    s.send({ event: 'connected', protocol: 'Call', version: '1.0.0' });
    if (o.start !== false) {
      s.send({
        event: 'start', sequenceNumber: '1', streamSid: s.streamSid,
        start: {
          accountSid: o.accountSid ?? 'ACtest', streamSid: s.streamSid, callSid: o.callSid, tracks: ['inbound'],
          customParameters: o.parameters ?? {}, mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
        },
      });
    }
    s.#live = o.start !== false;
    s.#player = setInterval(() => { s.#playFrame(); if (s.#live) s.#sendFrame(); }, 20);
    return s;
  }

  send(message: unknown): void {
    if (this.#socket.readyState === WebSocket.OPEN) this.#socket.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /**
   * The caller speaks: PCM16 8 kHz, sent as μ-law media messages one 20 ms frame at a time in real
   * time (between utterances the line sends silence, as Twilio does); resolves once it is all sent.
   */
  speak(pcm: Int16Array): Promise<void> {
    return new Promise((resolve) => {
      for (let at = 0; at < pcm.length; at += FRAME) {
        const frame = new Int16Array(FRAME);
        frame.set(pcm.subarray(at, at + FRAME));
        this.#mic.push(frame);
      }
      this.#mic.push(resolve);
    });
  }

  #sendFrame(): void {
    while (typeof this.#mic[0] === 'function') (this.#mic.shift() as () => void)();
    const frame = (this.#mic.shift() as Int16Array | undefined) ?? new Int16Array(FRAME);
    this.#chunk++;
    this.send({ event: 'media', streamSid: this.streamSid, media: { track: 'inbound', chunk: String(this.#chunk), timestamp: String(this.#chunk * 20), payload: Buffer.from(alawmulaw.mulaw.encode(frame)).toString('base64') } });
  }

  pressKey(digit: string): void {
    this.send({ event: 'dtmf', streamSid: this.streamSid, dtmf: { track: 'inbound_track', digit } });
  }

  stop(): void {
    this.#live = false;
    this.send({ event: 'stop', streamSid: this.streamSid, stop: { accountSid: 'ACtest', callSid: 'x' } });
    this.#socket.close(1000);
  }

  close(): Promise<{ code: number; reason: string }> {
    if (this.#socket.readyState === WebSocket.OPEN) this.#socket.close(1000);
    return this.#closedPromise;
  }

  get whenClosed(): Promise<{ code: number; reason: string }> {
    return this.#closedPromise;
  }

  #onMessage(data: Buffer): void {
    const m = JSON.parse(data.toString('utf8')) as Record<string, any>;
    this.received.push(m);
    if (m.streamSid !== this.streamSid) return;
    if (m.event === 'media') {
      const bytes = Buffer.from(String(m.media.payload), 'base64');
      const pcm = alawmulaw.mulaw.decode(bytes);
      for (let at = 0; at < pcm.length; at += FRAME) this.#queue.push({ pcm: pcm.slice(at, at + FRAME) });
    } else if (m.event === 'mark') {
      this.#queue.push({ mark: String(m.mark.name) });
    } else if (m.event === 'clear') {
      this.clears++;
      // Twilio drops the buffered audio and sends back the marks that were in it.
      const marks = this.#queue.filter((x): x is { mark: string } => 'mark' in x).map((x) => x.mark);
      this.#queue.length = 0;
      for (const name of marks) this.#echo(name);
    }
  }

  #echo(name: string): void {
    this.echoed.push(name);
    this.send({ event: 'mark', streamSid: this.streamSid, sequenceNumber: '9', mark: { name } });
  }

  #playFrame(): void {
    while (this.#queue.length > 0 && 'mark' in this.#queue[0]!) this.#echo((this.#queue.shift() as { mark: string }).mark);
    const next = this.#queue.shift();
    if (next && 'pcm' in next) this.heard.push(next.pcm);
    while (this.#queue.length > 0 && 'mark' in this.#queue[0]!) this.#echo((this.#queue.shift() as { mark: string }).mark);
  }
}
