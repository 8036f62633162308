// ElevenLabs text to speech against its double (test/helpers/fake-elevenlabs.ts): the reply's text
// over the documented stream-input WebSocket (spoken with `ws`), one-shot speech and the voices
// through the official client (@elevenlabs/elevenlabs-js). The shared cases are in
// test/helpers/tts-suite.ts; what is ElevenLabs' own (the socket's URL, header and messages) here.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ELEVENLABS_DEFAULT_VOICES, ElevenLabsEngine } from '../../src/speech/elevenlabs.ts';
import { ELEVENLABS_TEST_KEY, startFakeElevenLabs } from '../helpers/fake-elevenlabs.ts';
// Loaded as the service loads it (src/speech/vendor-fetch.ts says why).
import 'undici';
import { readAll, type FakeTtsServer, type RecordedSocket } from '../helpers/fake-tts.ts';
import { streamedTtsSuite } from '../helpers/tts-suite.ts';

type Msg = { text?: string; flush?: boolean };
const texts = (s: RecordedSocket) => (s.messages as Msg[]).slice(1).map((m) => m.text ?? '');

streamedTtsSuite('elevenlabs', {
  start: startFakeElevenLabs,
  key: ELEVENLABS_TEST_KEY,
  engine: (baseUrl, apiKey, bounds) => new ElevenLabsEngine({ apiKey, baseUrl, ...(bounds ? { bounds } : {}), maxRetries: 0, timeoutMs: 5000 }),
  spoken: (s) => texts(s).join(''),
  stopSeen: (s) => s.closedByClient,
  voices: { count: 3, female: { id: 'EXAVITQu4vr4xnSDxMaL', name: 'Sarah', previewUrl: 'https://storage.example/sarah.mp3' } },
});

describe('elevenlabs: the stream-input protocol', () => {
  let fake: FakeTtsServer;
  before(async () => {
    fake = await startFakeElevenLabs();
  });
  after(() => fake.close());

  it('opens stream-input for the voice with the model, ulaw_8000 and the language, the key in xi-api-key', async () => {
    const tts = new ElevenLabsEngine({ apiKey: ELEVENLABS_TEST_KEY, baseUrl: fake.baseUrl });
    const s = tts.openStream({ language: 'es-MX', gender: 'male', sampleRate: 8000, speed: 1.1 });
    s.push('Hola, ');
    s.push('¿en qué puedo ayu');
    s.push('darle? ');
    s.push('Gracias');
    s.end();
    const r = await readAll(s.chunks);
    assert.equal(r.error, undefined);
    const sock = fake.sockets.at(-1)!;
    const url = new URL(sock.url, 'http://x');
    assert.equal(url.pathname, `/v1/text-to-speech/${ELEVENLABS_DEFAULT_VOICES['*'].male}/stream-input`);
    assert.equal(url.searchParams.get('model_id'), 'eleven_flash_v2_5');
    assert.equal(url.searchParams.get('output_format'), 'ulaw_8000');
    assert.equal(url.searchParams.get('language_code'), 'es');
    assert.equal(sock.headers['xi-api-key'], ELEVENLABS_TEST_KEY);
    assert.ok(!sock.url.includes(ELEVENLABS_TEST_KEY), 'the key is not in the URL');
    assert.deepEqual(sock.messages, [
      { text: ' ', voice_settings: { speed: 1.1 }, generation_config: { chunk_length_schedule: [50, 120, 160, 250] } },
      // Whole words only: "ayu" waits for "darle?", which ends a sentence and flushes.
      { text: 'Hola, ' },
      { text: '¿en qué puedo ' },
      { text: 'ayudarle? ', flush: true },
      { text: 'Gracias ', flush: true },
      { text: '' },
    ]);
  });

  it('passes a voice id of its own through, and asks pcm_16000 for PCM at 16 kHz', async () => {
    const tts = new ElevenLabsEngine({ apiKey: ELEVENLABS_TEST_KEY, baseUrl: fake.baseUrl });
    const s = tts.openStream({ language: 'en-US', voice: 'abcdefghij0123456789', sampleRate: 16000 });
    s.push('Hi.');
    s.end();
    assert.equal((await readAll(s.chunks)).error, undefined);
    const url = new URL(fake.sockets.at(-1)!.url, 'http://x');
    assert.match(url.pathname, /\/abcdefghij0123456789\/stream-input$/);
    assert.equal(url.searchParams.get('output_format'), 'pcm_16000');
  });

  it('says a provider error message on the socket', async () => {
    const tts = new ElevenLabsEngine({ apiKey: ELEVENLABS_TEST_KEY, baseUrl: fake.baseUrl, model: '' });
    const s = tts.openStream({ language: 'en-US', sampleRate: 8000 });
    s.push('Hi.');
    s.end();
    const r = await readAll(s.chunks);
    assert.match(String(r.error), /elevenlabs.*invalid_request/);
  });

  it('one-shot speech goes to /stream with pcm_16000 and the model', async () => {
    const tts = new ElevenLabsEngine({ apiKey: ELEVENLABS_TEST_KEY, baseUrl: fake.baseUrl });
    await tts.synthesize('Good morning.', { language: 'en-GB' });
    const req = fake.requests.at(-1)!;
    assert.equal(req.method, 'POST');
    assert.match(req.url, new RegExp(`^/v1/text-to-speech/${ELEVENLABS_DEFAULT_VOICES['*'].female}/stream\\?`));
    assert.match(req.url, /output_format=pcm_16000/);
    assert.deepEqual(req.json, { text: 'Good morning.', model_id: 'eleven_flash_v2_5', language_code: 'en' });
    assert.equal(req.headers['xi-api-key'], ELEVENLABS_TEST_KEY);
  });
});
