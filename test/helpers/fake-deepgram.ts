// A stand-in for Deepgram on loopback that speaks its documented protocols, for tests through the
// official client (@deepgram/sdk) pointed at it:
//
// - live (`GET /v1/listen`, WebSocket): `Authorization: Token <key>` or the handshake is answered
//   401; the query is read (model, encoding, sample_rate, channels, interim_results, endpointing,
//   utterance_end_ms, vad_events, …); binary frames are audio in the query's encoding and rate;
//   text frames are KeepAlive, Finalize and CloseStream. Answers: `Results` (channel.alternatives[0]
//   .transcript, is_final, speech_final, from_finalize, start, duration), `SpeechStarted`,
//   `UtteranceEnd`, and `Metadata` before it closes on CloseStream. Without audio or KeepAlive
//   for `idleTimeoutMs` it closes with 1011 (NET-0001), as Deepgram does after 10 s.
// - Flux (`GET /v2/listen`): `Connected`, then `TurnInfo` events (StartOfTurn, Update,
//   EagerEndOfTurn when eager_eot_threshold is set, TurnResumed, EndOfTurn) following Flux's state
//   machine; ForceEndTurn and CloseStream; WebSocket pings keep it open; any other text message
//   (a KeepAlive) is a fatal `Error` and a close, as the real service closes on it.
// - pre-recorded (`POST /v1/listen`): the body's WAV, answered with results.channels[0].
//
// What it "hears" comes from the audio actually sent: it decodes the frames (μ-law or PCM16) and
// finds speech by energy, in audio time (10 ms blocks), so an utterance's final comes only after
// the frames went quiet for `endpointing` ms. The words of each utterance heard are the next of
// `hear` (a test's script), else `utterance <n>`. It records every handshake, frame, control
// message and ping, and can be told per connection (`plan`, taken in order) to accept slowly, hold
// its first answer back, or drop the socket after a number of frames or of ms of speech.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { decodeG711 } from '../../src/media/g711.ts';
import { pcm16FromBytes } from '../../src/media/pcm.ts';
import { parseWav } from '../../src/speech/wav.ts';

/** A 10 ms block louder than this (RMS) is speech. */
const SPEECH_RMS = 300;
/** Flux: a speech segment ends after this much quiet; the eager end and the end of turn come after more. */
const FLUX_SEGMENT_GAP_S = 0.15;
const FLUX_EAGER_SILENCE_S = 0.25;
const FLUX_EOT_SILENCE_S = 0.7;
/** Interim results (live) and Updates (Flux) every this much audio. */
const INTERIM_EVERY_S = 0.25;
/** Live: an empty final for every second of silence, as Deepgram answers audio without words. */
const SILENT_RESULT_EVERY_S = 1;
const MAX_KEPT_AUDIO = 4 * 1024 * 1024;

export interface ConnectionPlan {
  /** Complete the WebSocket handshake after this long. */
  acceptDelayMs?: number;
  /** Hold every answer back until this long after the first audio frame. */
  firstResultDelayMs?: number;
  /** Drop the socket (no close frame) on receiving this frame. */
  dropAfterFrames?: number;
  /** Drop the socket (no close frame) once it has received this much speech (ms of loud audio): mid-utterance. */
  dropAfterSpeechMs?: number;
}

export interface DeepgramConnection {
  path: string;
  query: Record<string, string | string[]>;
  headers: http.IncomingHttpHeaders;
  frames: number;
  bytes: number;
  /** The audio received, as it came (up to 4 MB). */
  audio: Buffer[];
  /** The type of each text message received, in order. */
  controls: string[];
  /** Each control message with the audio time (s) at which it came. */
  controlTimes: Array<{ type: string; atAudioS: number; atMs: number }>;
  pings: number;
  /** The messages sent, in order. */
  sent: Array<Record<string, unknown>>;
  closed?: { code: number; by: 'client' | 'server' };
}

export interface HandshakeRecord {
  path: string;
  status: number;
  authorization: string | undefined;
}

export interface BatchRequest {
  query: Record<string, string | string[]>;
  headers: http.IncomingHttpHeaders;
  bytes: number;
  sampleRate?: number;
}

export interface FakeDeepgram {
  /** The HTTP base URL (its WebSocket twin is ws://…). */
  url: string;
  apiKey: string;
  connections: DeepgramConnection[];
  handshakes: HandshakeRecord[];
  batch: BatchRequest[];
  /** What the next utterances say, in order. */
  hear: string[];
  /** How each next connection behaves, in order. */
  plan: ConnectionPlan[];
  idleTimeoutMs: number;
  /** Statuses the next batch requests are answered with instead of a transcript. */
  batchFailures: number[];
  close(): Promise<void>;
}

function queryOf(url: URL): Record<string, string | string[]> {
  const q: Record<string, string | string[]> = {};
  for (const [k, v] of url.searchParams) {
    const had = q[k];
    q[k] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v];
  }
  return q;
}

const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

function loud(pcm: Int16Array, from: number, to: number): boolean {
  let sum = 0;
  for (let i = from; i < to; i++) sum += pcm[i]! * pcm[i]!;
  return Math.sqrt(sum / Math.max(1, to - from)) > SPEECH_RMS;
}

export async function startFakeDeepgram(opts: { apiKey?: string } = {}): Promise<FakeDeepgram> {
  const apiKey = opts.apiKey ?? 'dg-test-key-0123456789';
  let utterances = 0;
  const sockets = new Set<WebSocket>();
  /** Handshakes held back (acceptDelayMs), destroyed on close. */
  const heldHandshakes = new Set<Duplex>();
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, fn: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
    return t;
  };
  const fake: FakeDeepgram = {
    url: '', apiKey, connections: [], handshakes: [], batch: [], hear: [], plan: [], idleTimeoutMs: 10_000, batchFailures: [],
    close: async () => {
      for (const t of timers) clearTimeout(t);
      for (const s of sockets) s.terminate();
      for (const s of heldHandshakes) s.destroy();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const nextWords = () => fake.hear.shift() ?? `utterance ${++utterances}`;
  const authorized = (h: http.IncomingHttpHeaders) => h.authorization === `Token ${apiKey}`;

  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024 });

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= 16 * 1024 * 1024) chunks.push(c);
    });
    req.on('end', () => {
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (req.method !== 'POST' || url.pathname !== '/v1/listen') return json(404, { err_code: 'NOT_FOUND', err_msg: 'no such route' });
      const body = Buffer.concat(chunks);
      const record: BatchRequest = { query: queryOf(url), headers: req.headers, bytes: body.length };
      fake.batch.push(record);
      if (!authorized(req.headers)) return json(401, { err_code: 'INVALID_AUTH', err_msg: 'Invalid credentials.' });
      const failure = fake.batchFailures.shift();
      if (failure) return json(failure, { err_code: 'FAILED', err_msg: `scripted ${failure}` });
      let wav: ReturnType<typeof parseWav>;
      try {
        wav = parseWav(body);
      } catch {
        return json(400, { err_code: 'Bad Request', err_msg: 'Bad Request: failed to process audio: corrupt or unsupported data' });
      }
      record.sampleRate = wav.sampleRate;
      const duration = wav.pcm16.length / wav.sampleRate;
      const block = wav.sampleRate / 100;
      let speech = false;
      for (let i = 0; i + block <= wav.pcm16.length && !speech; i += block) speech = loud(wav.pcm16, i, i + block);
      const heard = speech ? nextWords() : '';
      json(200, {
        metadata: { request_id: `req-${fake.batch.length}`, duration, channels: 1, models: [one(record.query.model) ?? 'nova-3'] },
        results: { channels: [{ alternatives: [{ transcript: heard, confidence: heard ? 0.97 : 0, words: [] }] }] },
      });
    });
  });

  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const refuse = (status: number, message: string) => {
      fake.handshakes.push({ path: url.pathname, status, authorization: req.headers.authorization });
      socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n${JSON.stringify({ err_code: status === 401 ? 'INVALID_AUTH' : 'Bad Request', err_msg: message })}`);
    };
    if (url.pathname !== '/v1/listen' && url.pathname !== '/v2/listen') return refuse(404, 'no such route');
    if (!authorized(req.headers)) return refuse(401, 'Invalid credentials.');
    const query = queryOf(url);
    const model = one(query.model) ?? '';
    const flux = url.pathname === '/v2/listen';
    if (flux ? !model.startsWith('flux-') : model === '' || model.startsWith('flux-')) return refuse(400, `model '${model}' is not served here`);
    const encoding = one(query.encoding);
    const rate = Number(one(query.sample_rate));
    if ((encoding !== 'mulaw' && encoding !== 'linear16') || !Number.isInteger(rate) || rate < 8000 || rate > 48_000) {
      return refuse(400, 'raw audio needs encoding (mulaw or linear16) and sample_rate');
    }
    const plan = fake.plan.shift() ?? {};
    fake.handshakes.push({ path: url.pathname, status: 101, authorization: req.headers.authorization });
    const accept = () => wss.handleUpgrade(req, socket, head, (ws) => {
      sockets.add(ws);
      ws.on('close', () => sockets.delete(ws));
      const conn: DeepgramConnection = {
        path: url.pathname, query, headers: req.headers, frames: 0, bytes: 0, audio: [], controls: [], controlTimes: [], pings: 0, sent: [],
      };
      fake.connections.push(conn);
      serve(ws, conn, plan, { flux, encoding, rate });
    });
    if (plan.acceptDelayMs) {
      heldHandshakes.add(socket);
      later(plan.acceptDelayMs, () => {
        heldHandshakes.delete(socket);
        accept();
      });
    } else accept();
  });

  function serve(ws: WebSocket, conn: DeepgramConnection, plan: ConnectionPlan, f: { flux: boolean; encoding: 'mulaw' | 'linear16'; rate: number }): void {
    const q = conn.query;
    const interim = one(q.interim_results) === 'true';
    const vadEvents = one(q.vad_events) === 'true';
    const endpointingS = one(q.endpointing) !== undefined && one(q.endpointing) !== 'false' ? Number(one(q.endpointing)) / 1000 : 0.01;
    const utteranceEndS = one(q.utterance_end_ms) !== undefined ? Number(one(q.utterance_end_ms)) / 1000 : undefined;
    const eager = one(q.eager_eot_threshold) !== undefined;
    const eotTimeoutS = one(q.eot_timeout_ms) !== undefined ? Number(one(q.eot_timeout_ms)) / 1000 : 5;
    const block = f.rate / 100;
    let carry = new Int16Array(0);
    let samples = 0;
    let loudMs = 0;
    let holdUntil: number | undefined;
    let seq = 0;
    let idle: NodeJS.Timeout | undefined;
    let closing = false;
    const now = () => samples / f.rate;

    const send = (msg: Record<string, unknown>) => {
      const out = f.flux ? { ...msg, sequence_id: seq++ } : msg;
      const go = () => {
        if (ws.readyState !== WebSocket.OPEN) return;
        conn.sent.push(out);
        ws.send(JSON.stringify(out));
      };
      inOrder(go);
    };
    // What is held back goes out in the order it was made, once the hold ends.
    const held: Array<() => void> = [];
    const inOrder = (fn: () => void) => {
      const wait = holdUntil === undefined ? 0 : holdUntil - Date.now();
      if (wait <= 0 && held.length === 0) return fn();
      held.push(fn);
      if (held.length === 1) later(Math.max(0, wait), () => { for (const h of held.splice(0)) h(); });
    };
    const closeWith = (code: number, reason: string) => {
      if (conn.closed) return;
      conn.closed = { code, by: 'server' };
      inOrder(() => ws.close(code, reason));
    };
    const touch = () => {
      if (idle) {
        clearTimeout(idle);
        timers.delete(idle);
      }
      idle = later(fake.idleTimeoutMs, () => closeWith(1011, 'NET-0001: no audio received within the timeout'));
    };
    touch();

    // ── live ──
    let speaking = false;
    let segStart = 0;
    let lastLoud = 0;
    let words = '';
    let lastInterim = 0;
    let lastSilentResult = 0;
    let utteranceEndDue: number | undefined;
    const results = (transcript: string, isFinal: boolean, speechFinal: boolean, extra: Record<string, unknown> = {}) => send({
      type: 'Results', channel_index: [0, 1], start: segStart, duration: Math.max(0, (isFinal ? lastLoud : now()) - segStart),
      is_final: isFinal, speech_final: speechFinal, ...extra,
      channel: { alternatives: [{ transcript, confidence: transcript ? 0.95 : 0, words: [] }] },
      metadata: { request_id: 'req', model_info: { name: one(q.model), version: 'fake', arch: 'fake' }, model_uuid: 'fake' },
    });
    const partial = (text: string, spokenS: number) => {
      const all = text.split(' ');
      return all.slice(0, Math.min(all.length - 1, Math.max(1, Math.floor(spokenS / 0.3)))).join(' ');
    };
    const liveBlock = (isLoud: boolean) => {
      const t = now();
      if (isLoud) {
        lastLoud = t;
        if (!speaking) {
          speaking = true;
          segStart = t;
          lastInterim = t;
          utteranceEndDue = undefined;
          words = nextWords();
          if (vadEvents) send({ type: 'SpeechStarted', channel: [0], timestamp: t });
        }
      }
      if (speaking) {
        if (interim && t - lastInterim >= INTERIM_EVERY_S) {
          lastInterim = t;
          results(partial(words, t - segStart), false, false);
        }
        if (!isLoud && t - lastLoud >= endpointingS) {
          speaking = false;
          results(words, true, true);
          lastSilentResult = t;
          if (utteranceEndS !== undefined) utteranceEndDue = lastLoud + utteranceEndS;
        }
        return;
      }
      if (utteranceEndDue !== undefined && t >= utteranceEndDue) {
        utteranceEndDue = undefined;
        send({ type: 'UtteranceEnd', channel: [0, 1], last_word_end: lastLoud });
      }
      if (t - lastSilentResult >= SILENT_RESULT_EVERY_S) {
        lastSilentResult = t;
        segStart = t;
        results('', true, false);
      }
    };
    const liveFlush = (fromFinalize: boolean) => {
      if (speaking) {
        speaking = false;
        results(words, true, false, fromFinalize ? { from_finalize: true } : {});
        if (utteranceEndS !== undefined) utteranceEndDue = lastLoud + utteranceEndS;
      } else if (fromFinalize) {
        results('', true, false, { from_finalize: true });
      }
    };

    // ── Flux ──
    let turnOpen = false;
    let turnIndex = 0;
    let parts: string[] = [];
    let segWords = '';
    let eagerSent = false;
    let lastUpdate = 0;
    const turnInfo = (event: string, transcript: string, extra: Record<string, unknown> = {}) => send({
      type: 'TurnInfo', request_id: 'req', event, turn_index: turnIndex, audio_window_start: segStart, audio_window_end: now(),
      transcript, words: transcript ? transcript.split(' ').map((word) => ({ word, confidence: 0.95 })) : [],
      end_of_turn_confidence: event === 'EndOfTurn' ? 0.9 : event === 'EagerEndOfTurn' ? 0.6 : 0.1, ...extra,
    });
    const heardSoFar = () => [...parts, ...(speaking ? [partial(segWords, now() - segStart)] : [])].filter((p) => p !== '').join(' ');
    const endTurn = (trigger: string) => {
      if (speaking) {
        speaking = false;
        parts.push(segWords);
      }
      turnInfo('EndOfTurn', parts.join(' '), { trigger });
      turnOpen = false;
      eagerSent = false;
      parts = [];
      turnIndex++;
    };
    const fluxBlock = (isLoud: boolean) => {
      const t = now();
      if (isLoud) {
        lastLoud = t;
        if (!speaking) {
          speaking = true;
          segStart = t;
          segWords = nextWords();
          if (!turnOpen) {
            turnOpen = true;
            lastUpdate = t;
            turnInfo('StartOfTurn', '');
          } else if (eagerSent) {
            eagerSent = false;
            turnInfo('TurnResumed', parts.join(' '));
          }
        }
      }
      if (!turnOpen) return;
      if (speaking && !isLoud && t - lastLoud >= FLUX_SEGMENT_GAP_S) {
        speaking = false;
        parts.push(segWords);
      }
      if (!speaking) {
        const quiet = t - lastLoud;
        if (eager && !eagerSent && quiet >= FLUX_EAGER_SILENCE_S) {
          eagerSent = true;
          turnInfo('EagerEndOfTurn', parts.join(' '));
        }
        if (quiet >= Math.min(FLUX_EOT_SILENCE_S, eotTimeoutS)) return endTurn(quiet >= eotTimeoutS ? 'timeout' : 'model');
      }
      if (t - lastUpdate >= INTERIM_EVERY_S) {
        lastUpdate = t;
        turnInfo('Update', heardSoFar());
      }
    };

    if (f.flux) send({ type: 'Connected', request_id: 'req' });

    ws.on('ping', () => {
      conn.pings++;
      if (f.flux) touch();
    });
    ws.on('close', (code) => {
      conn.closed ??= { code, by: 'client' };
      if (idle) clearTimeout(idle);
    });
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (closing || conn.closed) return;
      if (isBinary) {
        conn.frames++;
        conn.bytes += data.length;
        if (conn.bytes <= MAX_KEPT_AUDIO) conn.audio.push(Buffer.from(data));
        holdUntil ??= plan.firstResultDelayMs ? Date.now() + plan.firstResultDelayMs : Date.now();
        touch();
        if (plan.dropAfterFrames !== undefined && conn.frames >= plan.dropAfterFrames) {
          conn.closed = { code: 1006, by: 'server' };
          ws.terminate();
          return;
        }
        const pcm = f.encoding === 'mulaw' ? decodeG711('PCMU', data) : pcm16FromBytes(data);
        const all = new Int16Array(carry.length + pcm.length);
        all.set(carry);
        all.set(pcm, carry.length);
        let i = 0;
        for (; i + block <= all.length; i += block) {
          samples += block;
          const isLoud = loud(all, i, i + block);
          if (isLoud) loudMs += 10;
          (f.flux ? fluxBlock : liveBlock)(isLoud);
        }
        carry = all.slice(i);
        if (plan.dropAfterSpeechMs !== undefined && loudMs >= plan.dropAfterSpeechMs) {
          conn.closed = { code: 1006, by: 'server' };
          ws.terminate();
        }
        return;
      }
      let type = 'unreadable';
      try {
        const m = JSON.parse(data.toString('utf8')) as { type?: unknown };
        if (typeof m.type === 'string') type = m.type;
      } catch {
        // stays unreadable
      }
      conn.controls.push(type);
      conn.controlTimes.push({ type, atAudioS: now(), atMs: Date.now() });
      if (!f.flux) {
        if (type === 'KeepAlive') return touch();
        if (type === 'Finalize') return liveFlush(true);
        if (type === 'CloseStream') {
          closing = true;
          liveFlush(false);
          send({ type: 'Metadata', transaction_key: 'deprecated', request_id: 'req', sha256: '', created: new Date().toISOString(), duration: now(), channels: 1 });
          return closeWith(1000, '');
        }
      } else {
        if (type === 'ForceEndTurn') {
          if (turnOpen) endTurn('manual');
          return;
        }
        if (type === 'CloseStream') {
          closing = true;
          if (turnOpen) endTurn('model');
          return closeWith(1000, '');
        }
      }
      send({ type: 'Error', code: 'UNPARSABLE_CLIENT_MESSAGE', description: `unknown message '${type}'` });
      closeWith(1008, 'unparsable client message');
    });
  }

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}
