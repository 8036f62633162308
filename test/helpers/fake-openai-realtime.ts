// A stand-in for OpenAI's Realtime transcription on loopback that speaks its documented protocol
// (WebSocket `GET /v1/realtime?intent=transcription`, JSON events), for tests of
// src/speech/openai-realtime.ts:
//
// - The handshake needs `Authorization: Bearer <key>` (else 401) and `intent=transcription` with
//   no `model` (else 400, as a model in the URL makes a conversation session). On connect:
//   `session.created`; a `session.update` whose session is `type: transcription` with a known
//   input format (`audio/pcmu`, or `audio/pcm` at 24000) answers `session.updated`, anything else
//   an `error` event (invalid_request_error).
// - `input_audio_buffer.append` (base64) is decoded (μ-law at 8 kHz or PCM16 at 24 kHz) and heard
//   by energy in audio time (10 ms blocks): `input_audio_buffer.speech_started` as speech starts;
//   after the session's `silence_duration_ms` of quiet, `speech_stopped`, `committed`, a delta per
//   word and, `transcriptDelayMs` later, `conversation.item.input_audio_transcription.completed`.
//   `input_audio_buffer.commit` does the same at once for speech under way.
// - The words of each utterance are the next of `hear`, else `utterance <n>`. Every connection is
//   recorded (headers, session.update, bytes and appends, events sent), and a connection can be
//   told to drop after a number of appends.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { decodeG711 } from '../../src/media/g711.ts';
import { pcm16FromBytes } from '../../src/media/pcm.ts';

const SPEECH_RMS = 300;

export interface RealtimeConnection {
  url: string;
  headers: http.IncomingHttpHeaders;
  session?: Record<string, unknown>;
  appends: number;
  bytes: number;
  commits: number;
  sent: Array<Record<string, unknown>>;
  closed: boolean;
}

export interface FakeOpenAIRealtime {
  /** http://127.0.0.1:port/v1: the API base the engine is given. */
  baseUrl: string;
  apiKey: string;
  connections: RealtimeConnection[];
  refusedHandshakes: number;
  hear: string[];
  /** How long the completed transcript takes after the speech stopped (default 150 ms). */
  transcriptDelayMs: number;
  /** The next connection drops (the socket is destroyed) after this many appends. */
  dropAfterAppends: number | undefined;
  close(): Promise<void>;
}

function rmsOf(pcm: Int16Array, from: number, to: number): number {
  let sum = 0;
  for (let i = from; i < to; i++) sum += pcm[i]! * pcm[i]!;
  return Math.sqrt(sum / Math.max(1, to - from));
}

export async function startFakeOpenAIRealtime(opts: { apiKey?: string } = {}): Promise<FakeOpenAIRealtime> {
  const apiKey = opts.apiKey ?? 'sk-realtime-test';
  let utterances = 0;
  let items = 0;
  const sockets = new Set<WebSocket>();
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, fn: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
  };
  const fake: FakeOpenAIRealtime = {
    baseUrl: '', apiKey, connections: [], refusedHandshakes: 0, hear: [], transcriptDelayMs: 150, dropAfterAppends: undefined,
    close: async () => {
      for (const t of timers) clearTimeout(t);
      for (const s of sockets) s.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const wss = new WebSocketServer({ noServer: true, maxPayload: 4 * 1024 * 1024 });
  const server = http.createServer((_req, res) => {
    res.writeHead(404);
    res.end();
  });

  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const refuse = (status: number) => {
      fake.refusedHandshakes++;
      socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{"error":{"message":"refused","type":"invalid_request_error"}}`);
    };
    if (url.pathname !== '/v1/realtime' || url.searchParams.get('intent') !== 'transcription' || url.searchParams.has('model')) return refuse(400);
    if (req.headers.authorization !== `Bearer ${apiKey}`) return refuse(401);
    wss.handleUpgrade(req, socket, head, (ws) => serve(ws, req));
  });

  function serve(ws: WebSocket, req: http.IncomingMessage): void {
    sockets.add(ws);
    const record: RealtimeConnection = { url: req.url ?? '', headers: req.headers, appends: 0, bytes: 0, commits: 0, sent: [], closed: false };
    fake.connections.push(record);
    const dropAfter = fake.dropAfterAppends;
    fake.dropAfterAppends = undefined;
    let eventSeq = 0;
    const send = (event: Record<string, unknown>) => {
      const e = { event_id: `event_${++eventSeq}`, ...event };
      record.sent.push(e);
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(e));
    };
    let format: 'audio/pcmu' | 'audio/pcm' | undefined;
    let silenceMs = 500;
    // Audio time, in ms, and the utterance being heard.
    let audioMs = 0;
    let speaking: { item: string; quietMs: number } | undefined;
    let carry = new Int16Array(0);

    const finish = (item: string) => {
      const words = fake.hear.shift() ?? `utterance ${++utterances}`;
      send({ type: 'input_audio_buffer.committed', item_id: item, previous_item_id: null });
      for (const w of words.split(' ')) send({ type: 'conversation.item.input_audio_transcription.delta', item_id: item, content_index: 0, delta: `${w} ` });
      later(fake.transcriptDelayMs, () => send({ type: 'conversation.item.input_audio_transcription.completed', item_id: item, content_index: 0, transcript: words }));
    };

    const hear = (pcm: Int16Array, rate: number) => {
      const block = rate / 100;
      const all = new Int16Array(carry.length + pcm.length);
      all.set(carry);
      all.set(pcm, carry.length);
      let i = 0;
      for (; i + block <= all.length; i += block) {
        audioMs += 10;
        const loud = rmsOf(all, i, i + block) > SPEECH_RMS;
        if (loud && !speaking) {
          speaking = { item: `item_${++items}`, quietMs: 0 };
          send({ type: 'input_audio_buffer.speech_started', item_id: speaking.item, audio_start_ms: audioMs });
        } else if (speaking) {
          speaking.quietMs = loud ? 0 : speaking.quietMs + 10;
          if (speaking.quietMs >= silenceMs) {
            const item = speaking.item;
            speaking = undefined;
            send({ type: 'input_audio_buffer.speech_stopped', item_id: item, audio_end_ms: audioMs });
            finish(item);
          }
        }
      }
      carry = all.slice(i);
    };

    ws.on('message', (data: Buffer) => {
      let m: Record<string, unknown>;
      try {
        m = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
      } catch {
        return send({ type: 'error', error: { type: 'invalid_request_error', code: 'invalid_json', message: 'not JSON' } });
      }
      if (m.type === 'session.update') {
        const session = m.session as { type?: string; audio?: { input?: { format?: { type?: string; rate?: number }; turn_detection?: { silence_duration_ms?: number } } } } | undefined;
        record.session = session as Record<string, unknown> | undefined;
        const f = session?.audio?.input?.format;
        const known = f?.type === 'audio/pcmu' || (f?.type === 'audio/pcm' && f.rate === 24_000);
        if (session?.type !== 'transcription' || !known) {
          return send({ type: 'error', error: { type: 'invalid_request_error', code: 'invalid_value', message: 'not a transcription session this server takes' } });
        }
        format = f!.type as typeof format;
        silenceMs = session.audio?.input?.turn_detection?.silence_duration_ms ?? 500;
        return send({ type: 'session.updated', session });
      }
      if (m.type === 'input_audio_buffer.append' && typeof m.audio === 'string' && format) {
        const bytes = Buffer.from(m.audio, 'base64');
        record.appends++;
        record.bytes += bytes.length;
        if (dropAfter !== undefined && record.appends >= dropAfter) {
          (ws as unknown as { _socket?: { destroy(): void } })._socket?.destroy();
          return;
        }
        if (format === 'audio/pcmu') hear(decodeG711('PCMU', bytes), 8000);
        else hear(pcm16FromBytes(bytes), 24_000);
        return;
      }
      if (m.type === 'input_audio_buffer.commit') {
        record.commits++;
        if (!speaking) return send({ type: 'error', error: { type: 'invalid_request_error', code: 'input_audio_buffer_commit_empty', message: 'buffer too small' } });
        const item = speaking.item;
        speaking = undefined;
        finish(item);
      }
    });
    ws.on('close', () => {
      record.closed = true;
      sockets.delete(ws);
    });
    ws.on('error', () => {});
    send({ type: 'session.created', session: { type: 'transcription', object: 'realtime.transcription_session' } });
  }

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  fake.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return fake;
}
