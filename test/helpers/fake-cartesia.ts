// A double of Cartesia's text to speech on loopback, speaking its documented protocol:
// - WebSocket `/tts/websocket`: generation requests `{context_id, model_id, voice, output_format,
//   transcript, continue, flush?, language?}` (continuations share a context_id; `continue: false`
//   ends the context), `{context_id, cancel: true}` stops one; answers are `chunk` events (base64
//   audio in `data`), `flush_done` after a flush's audio, `done` at a context's end, and `error`.
//   A transcript is spoken when it ends a sentence, on flush, or at the end.
// - POST `/tts/bytes`: the audio (raw) as the body.
// - GET `/voices`: `{ data: [...], has_more }`, paged with `starting_after`.
// The key is `Authorization: Bearer <key>` (what the 4.x client sends) or the older `X-API-Key`,
// and a `Cartesia-Version` header is required (400 without it); a wrong key is a 401.
import type { WebSocket } from 'ws';
import { answerAudio, AudioPump, startTtsDouble, type FakeEncoding, type FakeTtsServer } from './fake-tts.ts';

export const CARTESIA_TEST_KEY = 'sk_car_test_0123456789';

export const FAKE_CARTESIA_VOICES = [
  { id: 'f786b574-daa5-4673-aa0c-cbe3e8534c02', name: 'Katie', description: 'Friendly', language: 'en', gender: 'feminine', preview_file_url: 'https://files.example/katie.wav', is_owner: false, access: 'public' },
  { id: 'a0e99841-438c-4a64-b679-ae501e7d6091', name: 'Barbershop Man', description: 'Warm', language: 'en', gender: 'masculine', is_owner: false, access: 'public' },
  { id: '3f4ade23-6eb4-4279-ab05-6a144947c4d5', name: 'German Conversational Woman', description: '', language: 'de', gender: 'feminine', is_owner: false, access: 'public' },
];

interface OutputFormat { container?: string; encoding?: string; sample_rate?: number }

function format(f: OutputFormat | undefined): { encoding: FakeEncoding; rate: number } | null {
  if (f?.container !== 'raw' || ![8000, 16000, 22050, 24000, 44100].includes(f.sample_rate ?? 0)) return null;
  if (f.encoding === 'pcm_mulaw' && f.sample_rate === 8000) return { encoding: 'mulaw', rate: 8000 };
  if (f.encoding === 'pcm_s16le') return { encoding: 'pcm', rate: f.sample_rate! };
  return null;
}

interface Generation {
  context_id?: string;
  transcript?: string;
  continue?: boolean;
  flush?: boolean;
  cancel?: boolean;
  output_format?: OutputFormat;
  model_id?: string;
  voice?: unknown;
}

function onSocket(ws: WebSocket, server: FakeTtsServer, count: () => void): void {
  const contexts = new Map<string, { pump: AudioPump; buffered: string; flushId: number }>();
  const send = (m: object) => ws.send(JSON.stringify(m));
  ws.on('message', (data) => {
    let m: Generation;
    try {
      m = JSON.parse((data as Buffer).toString()) as Generation;
    } catch {
      send({ type: 'error', done: true, status_code: 400, error: 'invalid JSON' });
      return;
    }
    const id = m.context_id ?? '';
    if (m.cancel) {
      contexts.get(id)?.pump.stop();
      contexts.delete(id);
      return;
    }
    let ctx = contexts.get(id);
    if (!ctx) {
      const fmt = format(m.output_format);
      if (!fmt || !m.model_id || !m.voice) {
        send({ type: 'error', context_id: id, done: true, status_code: 400, title: 'Invalid request', message: 'model_id, voice and a raw output_format are required' });
        return;
      }
      ctx = {
        pump: new AudioPump(server, fmt, (audio) => {
          count();
          send({ type: 'chunk', context_id: id, data: audio.toString('base64'), done: false, status_code: 206, step_time: 1, flush_id: ctx!.flushId });
        }, () => ws.terminate()),
        buffered: '', flushId: 0,
      };
      contexts.set(id, ctx);
    }
    const c = ctx;
    c.buffered += m.transcript ?? '';
    const last = m.continue === false;
    if ((m.flush || last || /[.!?]\s*$/.test(c.buffered)) && c.buffered.trim() !== '') {
      c.pump.speak(c.buffered);
      c.buffered = '';
    }
    if (m.flush) {
      const flushId = ++c.flushId;
      c.pump.then(() => send({ type: 'flush_done', context_id: id, flush_id: flushId, flush_done: true, done: false, status_code: 206 }));
    }
    if (last) c.pump.then(() => send({ type: 'done', context_id: id, done: true, status_code: 206 }));
  });
  ws.on('close', () => {
    for (const c of contexts.values()) c.pump.stop();
  });
}

export function startFakeCartesia(): Promise<FakeTtsServer> {
  return startTtsDouble({
    authorized: (req) => req.headers.authorization === `Bearer ${CARTESIA_TEST_KEY}` || req.headers['x-api-key'] === CARTESIA_TEST_KEY,
    malformed: (req) => (req.headers['cartesia-version'] ? null : 'the Cartesia-Version header is required'),
    refusal: { error: 'Invalid API key' },
    socketPath: /^\/tts\/websocket$/,
    onSocket: (ws, rec, server) => onSocket(ws, server, () => rec.audioChunks++),
    async onHttp(req, body, res, server) {
      const url = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'GET' && url.pathname === '/voices') {
        const after = url.searchParams.get('starting_after');
        const data = after ? [] : FAKE_CARTESIA_VOICES;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ data, has_more: false }));
        return true;
      }
      if (req.method === 'POST' && url.pathname === '/tts/bytes') {
        const g = JSON.parse(body.toString('utf8')) as Generation;
        const fmt = format(g.output_format);
        if (!fmt) {
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: 'only raw output here' }));
          return true;
        }
        await answerAudio(res, server, g.transcript ?? '', fmt, 'application/octet-stream');
        return true;
      }
      return false;
    },
  });
}
