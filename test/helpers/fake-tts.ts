// What the three streamed-speech doubles (fake-elevenlabs.ts, fake-cartesia.ts,
// fake-deepgram-aura.ts) share: one loopback HTTP server that also upgrades to WebSocket, the key
// check on both (a refused key is a 401 before any upgrade), a record of every request, socket and
// message, audio made from the text received (a tone per character: more text, more audio) in the
// encoding and rate asked for, and the failures a test asks for (a slow first audio, a socket
// dropped mid-reply).
import http from 'node:http';
import type net from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { encodeG711 } from '../../src/media/g711.ts';
import { pcm16ToBytes } from '../../src/speech/wav.ts';

export type FakeEncoding = 'mulaw' | 'pcm';

/** Milliseconds of tone per character that is not a space, and of silence per space. */
export const MS_PER_CHAR = 60;
export const MS_PER_SPACE = 30;

/** The double's speech for `text`: a 440 Hz tone for each character, a short silence for each space. */
export function speechFor(text: string, rate: number): Int16Array {
  const out: number[] = [];
  const tone = Math.round((MS_PER_CHAR / 1000) * rate);
  const gap = Math.round((MS_PER_SPACE / 1000) * rate);
  for (const ch of text) {
    if (/\s/.test(ch)) {
      for (let i = 0; i < gap; i++) out.push(0);
    } else {
      for (let i = 0; i < tone; i++) out.push(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate)));
    }
  }
  return Int16Array.from(out);
}

/** The samples of `speechFor(text)` (what a test compares the audio's length with). */
export function samplesFor(text: string, rate: number): number {
  return speechFor(text, rate).length;
}

export function encodeAudio(pcm: Int16Array, encoding: FakeEncoding): Buffer {
  return encoding === 'mulaw' ? encodeG711('PCMU', pcm) : pcm16ToBytes(pcm);
}

export interface RecordedHttp {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  json: unknown;
}

export interface RecordedSocket {
  url: string;
  headers: http.IncomingHttpHeaders;
  /** Every text message, parsed (or the raw string when it is not JSON). */
  messages: unknown[];
  closedByClient: boolean;
  /** Audio chunks sent on it. */
  audioChunks: number;
}

export interface FakeTtsFailures {
  /** Wait this long before the first audio of each socket or HTTP answer. */
  firstAudioDelayMs?: number;
  /** Drop the socket (no close frame) after this many audio chunks. */
  dropAfterChunks?: number;
}

export interface FakeTtsServer {
  /** http://127.0.0.1:port */
  baseUrl: string;
  requests: RecordedHttp[];
  sockets: RecordedSocket[];
  failures: FakeTtsFailures;
  /** Milliseconds of audio per chunk sent (default 40) and the pause between chunks (default 3). */
  pacing: { chunkMs: number; gapMs: number };
  close(): Promise<void>;
}

export interface TtsDoubleSpec {
  /** Whether a request carries the vendor's key; false answers 401 (before any upgrade). */
  authorized(req: http.IncomingMessage): boolean;
  /** A 400 for a request missing what the vendor requires (a version header), or null. */
  malformed?(req: http.IncomingMessage): string | null;
  /** The body of a 401 in the vendor's form. */
  refusal: unknown;
  /** Paths that upgrade to the vendor's socket. */
  socketPath: RegExp;
  onSocket(ws: WebSocket, rec: RecordedSocket, server: FakeTtsServer): void;
  /** Answers an HTTP request; false when the route is not the vendor's. */
  onHttp(req: http.IncomingMessage, body: Buffer, res: http.ServerResponse, server: FakeTtsServer): Promise<boolean>;
}

/**
 * Sends the audio of one text after another on one socket (or one HTTP answer), in chunks, paced
 * so that a cancel arrives mid-reply; stop() drops what is left at once.
 */
export class AudioPump {
  private tail: Promise<void> = Promise.resolve();
  private sent = 0;
  private pause: { timer: NodeJS.Timeout; done: () => void } | undefined;
  stopped = false;

  constructor(
    private readonly server: FakeTtsServer, private readonly format: { encoding: FakeEncoding; rate: number },
    private readonly send: (audio: Buffer) => void, private readonly drop: () => void,
  ) {}

  /** Queues the audio of `text`, then `after` (a done or flushed message) unless stopped by then. */
  speak(text: string, after?: () => void): void {
    this.tail = this.tail.then(async () => {
      const audio = encodeAudio(speechFor(text, this.format.rate), this.format.encoding);
      const bytesPerChunk = Math.max(2, Math.round((this.server.pacing.chunkMs / 1000) * this.format.rate) * (this.format.encoding === 'mulaw' ? 1 : 2));
      for (let at = 0; at < audio.length; at += bytesPerChunk) {
        if (this.stopped) return;
        if (this.sent === 0 && this.server.failures.firstAudioDelayMs) await this.wait(this.server.failures.firstAudioDelayMs);
        if (this.stopped) return;
        this.send(audio.subarray(at, at + bytesPerChunk));
        this.sent++;
        if (this.server.failures.dropAfterChunks !== undefined && this.sent >= this.server.failures.dropAfterChunks) {
          this.stopped = true;
          this.drop();
          return;
        }
        await this.wait(this.server.pacing.gapMs);
      }
    }).then(() => {
      if (!this.stopped) after?.();
    });
  }

  /** Runs `fn` after everything queued so far (unless stopped). */
  then(fn: () => void): void {
    this.tail = this.tail.then(() => {
      if (!this.stopped) fn();
    });
  }

  /** A pause that stop() ends at once (no timer outlives the socket). */
  private wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.pause = { timer: setTimeout(resolve, ms), done: resolve };
    });
  }

  stop(): void {
    this.stopped = true;
    if (this.pause) {
      clearTimeout(this.pause.timer);
      this.pause.done();
    }
  }
}

/** Starts a vendor's double on 127.0.0.1 (an ephemeral port). */
export async function startTtsDouble(spec: TtsDoubleSpec): Promise<FakeTtsServer> {
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  const live = new Set<net.Socket>();
  const refuse = (req: http.IncomingMessage): { status: number; body: unknown } | null => {
    if (!spec.authorized(req)) return { status: 401, body: spec.refusal };
    const bad = spec.malformed?.(req);
    return bad ? { status: 400, body: { error: bad } } : null;
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      let json: unknown;
      try {
        json = body.length ? JSON.parse(body.toString('utf8')) : undefined;
      } catch {
        json = body.toString('utf8');
      }
      fake.requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, json });
      const no = refuse(req);
      if (no) {
        res.writeHead(no.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(no.body));
        return;
      }
      spec.onHttp(req, body, res, fake).then((handled) => {
        if (!handled) {
          res.writeHead(404, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: `no route ${req.method} ${req.url}` }));
        }
      }, (err: Error) => {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: err.message }));
      });
    });
  });
  server.on('connection', (s) => {
    live.add(s);
    s.on('close', () => live.delete(s));
  });
  server.on('upgrade', (req, socket, head) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const no = spec.socketPath.test(path) ? refuse(req) : { status: 404, body: { error: 'no socket here' } };
    if (no) {
      const body = JSON.stringify(no.body);
      socket.end(`HTTP/1.1 ${no.status} ${http.STATUS_CODES[no.status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const rec: RecordedSocket = { url: req.url ?? '', headers: req.headers, messages: [], closedByClient: false, audioChunks: 0 };
      fake.sockets.push(rec);
      ws.on('message', (data, isBinary) => {
        if (isBinary) return;
        const s = (data as Buffer).toString();
        try {
          rec.messages.push(JSON.parse(s));
        } catch {
          rec.messages.push(s);
        }
      });
      ws.on('close', () => {
        rec.closedByClient = true;
      });
      spec.onSocket(ws, rec, fake);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const fake: FakeTtsServer = {
    baseUrl: `http://127.0.0.1:${port}`,
    requests: [],
    sockets: [],
    failures: {},
    pacing: { chunkMs: 40, gapMs: 3 },
    close: async () => {
      for (const c of wss.clients) c.terminate();
      for (const s of live) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  return fake;
}

/** Streams the audio of `text` as an HTTP answer (the vendors' one-shot routes), paced like a socket. */
export async function answerAudio(res: http.ServerResponse, server: FakeTtsServer, text: string, format: { encoding: FakeEncoding; rate: number }, contentType: string): Promise<void> {
  res.writeHead(200, { 'content-type': contentType });
  await new Promise<void>((resolve) => {
    const pump = new AudioPump(server, format, (audio) => res.write(audio), () => {
      res.destroy();
      resolve();
    });
    pump.speak(text, () => {
      res.end();
      resolve();
    });
    res.on('close', () => {
      pump.stop();
      resolve();
    });
  });
}

/** Everything a stream gives, with how many chunks came after `cancelAt` (when given) was called. */
export async function readAll<C extends { pcm16: Int16Array }>(chunks: AsyncIterable<C>): Promise<{ chunks: C[]; samples: number; error?: unknown }> {
  const out: C[] = [];
  let samples = 0;
  try {
    for await (const c of chunks) {
      out.push(c);
      samples += c.pcm16.length;
    }
  } catch (error) {
    return { chunks: out, samples, error };
  }
  return { chunks: out, samples };
}

/** Root mean square of the samples (0 for silence). */
export function rms(pcm: Int16Array): number {
  let s = 0;
  for (const v of pcm) s += v * v;
  return pcm.length ? Math.sqrt(s / pcm.length) : 0;
}

/** The samples of several chunks as one array. */
export function joined(chunks: readonly { pcm16: Int16Array }[]): Int16Array {
  const out = new Int16Array(chunks.reduce((n, c) => n + c.pcm16.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c.pcm16, at);
    at += c.pcm16.length;
  }
  return out;
}
