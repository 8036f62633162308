// A double of Deepgram Aura's text to speech on loopback, speaking its documented protocol:
// - WebSocket `/v1/speak?model&encoding&sample_rate`: a `Metadata` message on open; `Speak`
//   messages are held until a `Flush`, whose audio comes as binary frames followed by `Flushed`
//   (with its sequence_id); `Clear` drops what is held and being spoken and answers `Cleared`;
//   `Close` closes the socket.
// - POST `/v1/speak?model&encoding&sample_rate&container=none`: the audio as the body.
// - GET `/v1/models`: `{ stt: [], tts: [...] }`.
// The key is `Authorization: Token <key>`; anything else is a 401 in Deepgram's form.
import type { WebSocket } from 'ws';
import { answerAudio, AudioPump, startTtsDouble, type FakeEncoding, type FakeTtsServer } from './fake-tts.ts';

export const DEEPGRAM_TEST_KEY = 'dg-test-key-0123456789';

export const FAKE_AURA_MODELS = [
  { name: 'thalia', canonical_name: 'aura-2-thalia-en', architecture: 'aura-2', languages: ['en', 'en-US'], version: '2025-04-07.0', uuid: 'ecb76e9d-f2db-4127-8060-79b05590d22f', metadata: { accent: 'American', age: 'Adult', tags: ['feminine', 'clear', 'confident'], sample: 'https://static.example/thalia.wav', use_cases: ['IVR'] } },
  { name: 'apollo', canonical_name: 'aura-2-apollo-en', architecture: 'aura-2', languages: ['en', 'en-US'], version: '2025-04-07.0', uuid: 'f6b1c3b3-0a3c-4b0e-9c3e-3e3b1b0a0c11', metadata: { accent: 'American', tags: ['masculine', 'casual'], sample: 'https://static.example/apollo.wav' } },
  { name: 'celeste', canonical_name: 'aura-2-celeste-es', architecture: 'aura-2', languages: ['es', 'es-CO'], version: '2025-04-07.0', uuid: '0d4a3a9b-5f7e-4a55-9c6e-8b2f8d1c6e21', metadata: { accent: 'Colombian', tags: ['feminine'] } },
];

function format(q: URLSearchParams): { encoding: FakeEncoding; rate: number } | null {
  const rate = Number(q.get('sample_rate') ?? '24000');
  if (![8000, 16000, 22050, 24000, 32000, 48000].includes(rate)) return null;
  const encoding = q.get('encoding') ?? 'linear16';
  if (encoding === 'mulaw' && rate === 8000) return { encoding: 'mulaw', rate };
  if (encoding === 'linear16') return { encoding: 'pcm', rate };
  return null;
}

function onSocket(ws: WebSocket, url: string, server: FakeTtsServer, count: () => void): void {
  const q = new URL(url, 'http://x').searchParams;
  const fmt = format(q);
  if (!fmt || !/^aura/.test(q.get('model') ?? '')) {
    ws.close(1008, 'UNSUPPORTED_MODEL_OR_FORMAT');
    return;
  }
  const send = (m: object) => ws.send(JSON.stringify(m));
  const newPump = () => new AudioPump(server, fmt, (audio) => {
    count();
    ws.send(audio, { binary: true });
  }, () => ws.terminate());
  let pump = newPump();
  let held = '';
  let sequence = 0;
  send({ type: 'Metadata', request_id: 'b1c2d3e4-0000-4000-8000-000000000001', model_name: q.get('model'), model_version: '2025-04-07.0', model_uuid: 'ecb76e9d-f2db-4127-8060-79b05590d22f' });
  ws.on('message', (data, isBinary) => {
    if (isBinary) return;
    let m: { type?: string; text?: string };
    try {
      m = JSON.parse((data as Buffer).toString()) as typeof m;
    } catch {
      send({ type: 'Warning', description: 'the message is not JSON', code: 'INVALID_MESSAGE' });
      return;
    }
    if (m.type === 'Speak') held += m.text ?? '';
    else if (m.type === 'Flush') {
      if (held !== '') pump.speak(held);
      held = '';
      const id = sequence++;
      pump.then(() => send({ type: 'Flushed', sequence_id: id }));
    } else if (m.type === 'Clear') {
      pump.stop();
      pump = newPump();
      held = '';
      send({ type: 'Cleared', sequence_id: sequence++ });
    } else if (m.type === 'Close') {
      pump.stop();
      ws.close(1000);
    }
  });
  ws.on('close', () => pump.stop());
}

export function startFakeDeepgramAura(): Promise<FakeTtsServer> {
  return startTtsDouble({
    authorized: (req) => req.headers.authorization === `Token ${DEEPGRAM_TEST_KEY}`,
    refusal: { err_code: 'INVALID_AUTH', err_msg: 'Invalid credentials.', request_id: 'b1c2d3e4-0000-4000-8000-000000000002' },
    socketPath: /^\/v1\/speak$/,
    onSocket: (ws, rec, server) => onSocket(ws, rec.url, server, () => rec.audioChunks++),
    async onHttp(req, body, res, server) {
      const url = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'GET' && url.pathname === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ stt: [], tts: FAKE_AURA_MODELS }));
        return true;
      }
      if (req.method === 'POST' && url.pathname === '/v1/speak') {
        const fmt = format(url.searchParams);
        if (!fmt || url.searchParams.get('container') !== 'none') {
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ err_code: 'UNSUPPORTED_AUDIO_FORMAT', err_msg: 'only raw linear16/mulaw here' }));
          return true;
        }
        const text = (JSON.parse(body.toString('utf8')) as { text?: string }).text ?? '';
        await answerAudio(res, server, text, fmt, 'audio/l16');
        return true;
      }
      return false;
    },
  });
}
