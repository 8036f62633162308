// Cartesia text to speech through its official client (@cartesia/cartesia-js) against its double
// (test/helpers/fake-cartesia.ts): the shared cases of test/helpers/tts-suite.ts, then Cartesia's
// own protocol: one context per reply, continuations, flush at a sentence's end, the final empty
// transcript, cancel, and the headers the client sends.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CARTESIA_DEFAULT_VOICES, CartesiaEngine } from '../../src/speech/cartesia.ts';
import { CARTESIA_TEST_KEY, startFakeCartesia } from '../helpers/fake-cartesia.ts';
// Loaded as the service loads it (src/speech/vendor-fetch.ts says why).
import 'undici';
import { readAll, type FakeTtsServer, type RecordedSocket } from '../helpers/fake-tts.ts';
import { streamedTtsSuite } from '../helpers/tts-suite.ts';

type Gen = { transcript?: string; continue?: boolean; flush?: boolean; cancel?: boolean; context_id?: string };
const gens = (s: RecordedSocket) => s.messages as Gen[];

streamedTtsSuite('cartesia', {
  start: startFakeCartesia,
  key: CARTESIA_TEST_KEY,
  engine: (baseUrl, apiKey, bounds) => new CartesiaEngine({ apiKey, baseUrl, ...(bounds ? { bounds } : {}), maxRetries: 0, timeoutMs: 5000 }),
  spoken: (s) => gens(s).map((m) => m.transcript ?? '').join(''),
  stopSeen: (s) => gens(s).some((m) => m.cancel === true) && s.closedByClient,
  voices: { count: 3, female: { id: 'f786b574-daa5-4673-aa0c-cbe3e8534c02', name: 'Katie', previewUrl: 'https://files.example/katie.wav' } },
});

describe('cartesia: the WebSocket protocol', () => {
  let fake: FakeTtsServer;
  before(async () => {
    fake = await startFakeCartesia();
  });
  after(() => fake.close());

  it('one context per reply: continuations, flush at a sentence end, an empty final transcript', async () => {
    const tts = new CartesiaEngine({ apiKey: CARTESIA_TEST_KEY, baseUrl: fake.baseUrl });
    const s = tts.openStream({ language: 'fr-FR', gender: 'male', sampleRate: 8000 });
    s.push('Bonjour, ');
    s.push('comment allez-vous ? ');
    s.push('Merci');
    s.end();
    const r = await readAll(s.chunks);
    assert.equal(r.error, undefined);
    const sock = fake.sockets.at(-1)!;
    assert.equal(new URL(sock.url, 'http://x').pathname, '/tts/websocket');
    assert.equal(sock.headers.authorization, `Bearer ${CARTESIA_TEST_KEY}`);
    assert.ok(sock.headers['cartesia-version'], 'the client names the API version');
    assert.ok(!sock.url.includes(CARTESIA_TEST_KEY), 'the key is not in the URL');
    const m = gens(sock);
    const ctx = m[0]!.context_id;
    assert.ok(ctx && m.every((g) => g.context_id === ctx), 'one context');
    const common = {
      model_id: 'sonic-3', voice: { mode: 'id', id: CARTESIA_DEFAULT_VOICES['*'].male },
      output_format: { container: 'raw', encoding: 'pcm_mulaw', sample_rate: 8000 }, language: 'fr', context_id: ctx,
    };
    assert.deepEqual(m, [
      { ...common, transcript: 'Bonjour, ', continue: true },
      { ...common, transcript: 'comment allez-vous ? ', continue: true },
      { ...common, transcript: '', continue: true, flush: true },
      { ...common, transcript: 'Merci', continue: true },
      { ...common, transcript: '', continue: false },
    ]);
  });

  it('asks pcm_s16le for PCM, and sends the voice id it is given', async () => {
    const tts = new CartesiaEngine({ apiKey: CARTESIA_TEST_KEY, baseUrl: fake.baseUrl, model: 'sonic-3.5' });
    const s = tts.openStream({ language: 'de', voice: '3f4ade23-6eb4-4279-ab05-6a144947c4d5', sampleRate: 24000 });
    s.push('Guten Tag.');
    s.end();
    const r = await readAll(s.chunks);
    assert.equal(r.error, undefined);
    assert.ok(r.chunks.every((c) => c.sampleRate === 24000 && c.encoding === 'pcm'));
    const g = fake.sockets.at(-1)!.messages[0] as Record<string, unknown>;
    assert.deepEqual(g.output_format, { container: 'raw', encoding: 'pcm_s16le', sample_rate: 24000 });
    assert.deepEqual(g.voice, { mode: 'id', id: '3f4ade23-6eb4-4279-ab05-6a144947c4d5' });
    assert.equal(g.model_id, 'sonic-3.5');
  });

  it('says an error event of the provider', async () => {
    const tts = new CartesiaEngine({ apiKey: CARTESIA_TEST_KEY, baseUrl: fake.baseUrl, model: '' });
    const s = tts.openStream({ language: 'en-US', sampleRate: 8000 });
    s.push('Hi.');
    s.end();
    const r = await readAll(s.chunks);
    assert.match(String(r.error), /cartesia.*model_id, voice and a raw output_format are required/);
  });

  it('one-shot speech is POST /tts/bytes with raw PCM at 16 kHz', async () => {
    const tts = new CartesiaEngine({ apiKey: CARTESIA_TEST_KEY, baseUrl: fake.baseUrl });
    await tts.synthesize('Hello.', { language: 'en-US' });
    const req = fake.requests.at(-1)!;
    assert.equal(req.url, '/tts/bytes');
    assert.deepEqual(req.json, {
      model_id: 'sonic-3', transcript: 'Hello.', voice: { mode: 'id', id: CARTESIA_DEFAULT_VOICES['*'].female },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 }, language: 'en',
    });
  });
});
