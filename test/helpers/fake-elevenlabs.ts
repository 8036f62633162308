// A double of ElevenLabs' text to speech on loopback, speaking its documented protocol:
// - WebSocket `/v1/text-to-speech/{voice_id}/stream-input?model_id&output_format&language_code`:
//   the first message `{"text":" ", voice_settings?, generation_config?}`, then
//   `{"text":"… ", flush?, try_trigger_generation?}`, and `{"text":""}` to end; audio answers as
//   `{"audio":"<base64>","isFinal":null,…}` and the end as `{"isFinal":true}` before a normal close.
//   Text is spoken when a message flushes, when 50 characters wait, or at the end.
// - POST `/v1/text-to-speech/{voice_id}/stream?output_format=pcm_16000`: the audio as the body.
// - GET `/v1/voices`: `{ voices: [...] }` in the API's snake_case.
// The key is the `xi-api-key` header; anything else is a 401 in ElevenLabs' form.
import { startTtsDouble, answerAudio, AudioPump, type FakeEncoding, type FakeTtsServer } from './fake-tts.ts';

export const ELEVENLABS_TEST_KEY = 'xi-test-key-0123456789';

export const FAKE_ELEVENLABS_VOICES = [
  { voice_id: 'EXAVITQu4vr4xnSDxMaL', name: 'Sarah', labels: { gender: 'female', accent: 'american' }, preview_url: 'https://storage.example/sarah.mp3', verified_languages: [{ language: 'en', model_id: 'eleven_flash_v2_5', locale: 'en-US' }] },
  { voice_id: 'nPczCjzI2devNBz1zQrb', name: 'Brian', labels: { gender: 'male', accent: 'american' }, preview_url: 'https://storage.example/brian.mp3', verified_languages: [] },
  { voice_id: 'abcdefghij0123456789', name: 'Clone', labels: {}, category: 'cloned' },
];

/** `ulaw_8000` → μ-law at 8 kHz; `pcm_16000` → PCM16 at 16 kHz; null for anything else. */
function format(outputFormat: string | null): { encoding: FakeEncoding; rate: number } | null {
  if (outputFormat === 'ulaw_8000') return { encoding: 'mulaw', rate: 8000 };
  const m = /^pcm_(8000|16000|22050|24000|44100)$/.exec(outputFormat ?? '');
  return m ? { encoding: 'pcm', rate: Number(m[1]) } : null;
}

export function startFakeElevenLabs(): Promise<FakeTtsServer> {
  return startTtsDouble({
    authorized: (req) => req.headers['xi-api-key'] === ELEVENLABS_TEST_KEY,
    refusal: { detail: { status: 'invalid_api_key', message: 'Invalid API key' } },
    socketPath: /^\/v1\/text-to-speech\/[^/]+\/stream-input$/,
    onSocket(ws, _rec, server) {
      const q = new URL(_rec.url, 'http://x').searchParams;
      const fmt = format(q.get('output_format'));
      if (!fmt || !q.get('model_id')) {
        ws.send(JSON.stringify({ message: 'invalid output_format or model_id', error: 'invalid_request', code: 1008 }));
        ws.close(1008, 'invalid_request');
        return;
      }
      const pump = new AudioPump(server, fmt, (audio) => {
        _rec.audioChunks++;
        ws.send(JSON.stringify({ audio: audio.toString('base64'), isFinal: null, normalizedAlignment: null, alignment: null }));
      }, () => ws.terminate());
      let buffered = '';
      let first = true;
      ws.on('message', (data) => {
        let m: { text?: unknown; flush?: boolean; try_trigger_generation?: boolean };
        try {
          m = JSON.parse((data as Buffer).toString()) as typeof m;
        } catch {
          ws.send(JSON.stringify({ message: 'Could not parse input message', error: 'invalid_input_message', code: 1008 }));
          ws.close(1008, 'invalid_input_message');
          return;
        }
        if (typeof m.text !== 'string') return;
        if (first) {
          first = false;
          if (m.text !== ' ') ws.close(1008, 'the first message must be a blank text');
          return;
        }
        if (m.text === '') {
          if (buffered.trim() !== '') pump.speak(buffered);
          buffered = '';
          pump.then(() => {
            ws.send(JSON.stringify({ isFinal: true }));
            ws.close(1000);
          });
          return;
        }
        buffered += m.text;
        if (m.flush || m.try_trigger_generation || buffered.length >= 50) {
          pump.speak(buffered);
          buffered = '';
        }
      });
      ws.on('close', () => pump.stop());
    },
    async onHttp(req, body, res, server) {
      const url = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'GET' && url.pathname === '/v1/voices') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ voices: FAKE_ELEVENLABS_VOICES }));
        return true;
      }
      if (req.method === 'POST' && /^\/v1\/text-to-speech\/[^/]+\/stream$/.test(url.pathname)) {
        const fmt = format(url.searchParams.get('output_format') ?? 'mp3_44100_128');
        const text = (JSON.parse(body.toString('utf8')) as { text?: string }).text ?? '';
        if (!fmt) {
          res.writeHead(422, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ detail: { status: 'invalid_output_format', message: 'only ulaw_8000 and pcm_* here' } }));
          return true;
        }
        await answerAudio(res, server, text, fmt, 'audio/pcm');
        return true;
      }
      return false;
    },
  });
}
