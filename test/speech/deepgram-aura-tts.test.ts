// Deepgram Aura text to speech through its official client (@deepgram/sdk) against its double
// (test/helpers/fake-deepgram-aura.ts): the shared cases of test/helpers/tts-suite.ts, then Aura's
// own protocol: Speak and Flush as the reply streams, Close at its end, Clear on cancel, the
// model, encoding and rate in the socket's query, the key as `Token`.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DeepgramAuraEngine } from '../../src/speech/deepgram-aura.ts';
import { DEEPGRAM_TEST_KEY, startFakeDeepgramAura } from '../helpers/fake-deepgram-aura.ts';
// Loaded as the service loads it (src/speech/vendor-fetch.ts says why).
import 'undici';
import { readAll, type FakeTtsServer, type RecordedSocket } from '../helpers/fake-tts.ts';
import { streamedTtsSuite } from '../helpers/tts-suite.ts';
import { waitFor } from '../helpers/wait.ts';

type Msg = { type?: string; text?: string };
const msgs = (s: RecordedSocket) => s.messages as Msg[];

streamedTtsSuite('deepgram aura', {
  start: startFakeDeepgramAura,
  key: DEEPGRAM_TEST_KEY,
  engine: (baseUrl, apiKey, bounds) => new DeepgramAuraEngine({ apiKey, baseUrl, ...(bounds ? { bounds } : {}), maxRetries: 0, timeoutMs: 5000 }),
  spoken: (s) => msgs(s).filter((m) => m.type === 'Speak').map((m) => m.text).join(''),
  stopSeen: (s) => msgs(s).some((m) => m.type === 'Clear') && s.closedByClient,
  voices: { count: 3, female: { id: 'aura-2-thalia-en', name: 'thalia', previewUrl: 'https://static.example/thalia.wav' } },
});

describe('deepgram aura: the /v1/speak socket', () => {
  let fake: FakeTtsServer;
  before(async () => {
    fake = await startFakeDeepgramAura();
  });
  after(() => fake.close());

  it('Speak as the text comes, Flush at each sentence end and at the end, then Close', async () => {
    const tts = new DeepgramAuraEngine({ apiKey: DEEPGRAM_TEST_KEY, baseUrl: fake.baseUrl });
    const s = tts.openStream({ language: 'es-CO', gender: 'female', sampleRate: 8000 });
    s.push('Hola. ');
    s.push('¿Cómo ');
    s.push('está?');
    s.push(' Bien');
    s.end();
    const r = await readAll(s.chunks);
    assert.equal(r.error, undefined);
    const sock = fake.sockets.at(-1)!;
    const url = new URL(sock.url, 'http://x');
    assert.equal(url.pathname, '/v1/speak');
    assert.equal(url.searchParams.get('model'), 'aura-2-celeste-es');
    assert.equal(url.searchParams.get('encoding'), 'mulaw');
    assert.equal(url.searchParams.get('sample_rate'), '8000');
    assert.equal(sock.headers.authorization, `Token ${DEEPGRAM_TEST_KEY}`);
    await waitFor('Close', async () => msgs(sock).some((m) => m.type === 'Close'), 3000);
    assert.deepEqual(msgs(sock), [
      { type: 'Speak', text: 'Hola. ' }, { type: 'Flush' },
      { type: 'Speak', text: '¿Cómo ' },
      { type: 'Speak', text: 'está?' }, { type: 'Flush' },
      { type: 'Speak', text: ' Bien' }, { type: 'Flush' },
      { type: 'Close' },
    ]);
  });

  it('linear16 for PCM, a named voice passes through, and a language without a default is refused', async () => {
    const tts = new DeepgramAuraEngine({ apiKey: DEEPGRAM_TEST_KEY, baseUrl: fake.baseUrl });
    const s = tts.openStream({ language: 'en-US', voice: 'aura-2-apollo-en', sampleRate: 16000 });
    s.push('Hi.');
    s.end();
    assert.equal((await readAll(s.chunks)).error, undefined);
    const url = new URL(fake.sockets.at(-1)!.url, 'http://x');
    assert.equal(url.searchParams.get('model'), 'aura-2-apollo-en');
    assert.equal(url.searchParams.get('encoding'), 'linear16');
    assert.equal(url.searchParams.get('sample_rate'), '16000');
    assert.throws(() => tts.openStream({ language: 'ko-KR', sampleRate: 8000 }), /no default deepgram voice for 'ko-KR'/);
  });

  it('one-shot speech is POST /v1/speak, linear16 at 16 kHz without a container', async () => {
    const tts = new DeepgramAuraEngine({ apiKey: DEEPGRAM_TEST_KEY, baseUrl: fake.baseUrl });
    await tts.synthesize('Hello.', { language: 'en-US' });
    const req = fake.requests.at(-1)!;
    const url = new URL(req.url, 'http://x');
    assert.equal(url.pathname, '/v1/speak');
    assert.deepEqual(Object.fromEntries(url.searchParams), { model: 'aura-2-thalia-en', encoding: 'linear16', sample_rate: '16000', container: 'none' });
    assert.deepEqual(req.json, { text: 'Hello.' });
    assert.equal(req.headers.authorization, `Token ${DEEPGRAM_TEST_KEY}`);
  });
});
