// An organization's own speech provider keys (issue 35): the API (add, list masked, change keeping
// the key, a base URL of another origin without the key refused, delete; other organizations and
// agents kept out; private base URLs refused), sealing, the resolution the voice side asks
// (the organization's enabled key wins over the process's; disabled falls back to it), the engines
// built per key (through Deepgram's official client against its double on loopback), and each
// vendor's use counted in its own unit into the usage rollups and read by GET /api/v2/stats/usage —
// on both engines.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { recordSpeechUsage } from '../../src/modules/billing/speech-usage.ts';
import { speechProviderRepo } from '../../src/modules/speech-providers/repository.ts';
import { processSpeechKeys, speechCredentials } from '../../src/modules/speech-providers/service.ts';
import { DeepgramLive, DeepgramTranscriber } from '../../src/speech/deepgram.ts';
import { OpenAISynthesizer } from '../../src/speech/openai-speech.ts';
import { CartesiaEngine } from '../../src/speech/cartesia.ts';
import { DeepgramAuraEngine } from '../../src/speech/deepgram-aura.ts';
import { GoogleStreaming, GoogleTranscriber } from '../../src/speech/google.ts';
import { vendorEngineCache, type VendorEngines } from '../../src/speech/registry.ts';
import { TargetRefusedError } from '../../src/webhooks/ssrf.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { startFakeDeepgram, type FakeDeepgram } from '../helpers/fake-deepgram.ts';
import type { Reply } from '../helpers/harness.ts';

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  for (const w of words) assert.ok(String(res.body.message).includes(w), `"${res.body.message}" should name ${w}`);
}

const PROCESS_KEY = 'dg-process-key-0000000000';
const ORG_KEY = 'dg-organization-key-1234567890wxyz';
const PATH = '/api/v2/speech/providers';

/** A Google service account key file as Google hands it out (the private key is not a real one). */
const googleKey = (email = 'speech@acme-voice.iam.gserviceaccount.com') => JSON.stringify({
  type: 'service_account', project_id: 'acme-voice', private_key_id: '0123456789abcdef0123456789abcdef9f3e',
  private_key: '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n',
  client_email: email, client_id: '1234567890', token_uri: 'https://oauth2.googleapis.com/token',
}, null, 2);

describe('engines for given credentials', () => {
  it('are built once per vendor, URL and key, the least recently used dropped past the bound', () => {
    const speech = loadConfig({}).speech;
    const cache = vendorEngineCache(speech, { max: 2 });
    const a = cache.engineFor('deepgram', { apiKey: 'key-a', baseUrl: 'https://api.deepgram.com' });
    assert.ok(a?.streaming.deepgram instanceof DeepgramLive);
    assert.ok(a.stt instanceof DeepgramTranscriber);
    assert.ok(a.tts instanceof DeepgramAuraEngine, 'Deepgram\'s key speaks too (Aura)');
    assert.equal(cache.engineFor('deepgram', { apiKey: 'key-a', baseUrl: 'https://api.deepgram.com' }), a, 'the same key: the same engines');
    const moved = cache.engineFor('deepgram', { apiKey: 'key-a', baseUrl: 'https://eu.api.deepgram.com' });
    assert.notEqual(moved, a, 'another URL: other engines');
    assert.equal(cache.engineFor('deepgram', { apiKey: 'key-a', baseUrl: 'https://api.deepgram.com' }), a, 'a is now the most recently used');
    const openai = cache.engineFor('openai', { apiKey: 'sk-org', baseUrl: 'https://api.openai.com/v1' });
    assert.ok(openai?.tts instanceof OpenAISynthesizer);
    assert.equal(cache.size, 2, 'bounded');
    assert.equal(cache.engineFor('deepgram', { apiKey: 'key-a', baseUrl: 'https://api.deepgram.com' }), a, 'kept');
    assert.notEqual(cache.engineFor('deepgram', { apiKey: 'key-a', baseUrl: 'https://eu.api.deepgram.com' }), moved, 'the least recently used was dropped and is built again');
    assert.ok(cache.engineFor('cartesia', { apiKey: 'c', baseUrl: 'https://api.cartesia.ai' })?.tts instanceof CartesiaEngine);
    const google = cache.engineFor('google', { apiKey: '{"type":"service_account"}', baseUrl: 'https://speech.googleapis.com' });
    assert.ok(google?.streaming.google instanceof GoogleStreaming && google.stt instanceof GoogleTranscriber, 'Google\'s engines take the service account\'s JSON');
  });

  it('the process\'s keys come from its configuration', () => {
    assert.deepEqual(processSpeechKeys(loadConfig({}).speech), {});
    const c = loadConfig({ CALLPLANE_DEEPGRAM_API_KEY: PROCESS_KEY, CALLPLANE_DEEPGRAM_URL: 'https://dg.example.com/', CALLPLANE_SPEECH_API_KEY: 'sk-process' });
    assert.deepEqual(processSpeechKeys(c.speech), {
      deepgram: { apiKey: PROCESS_KEY, baseUrl: 'https://dg.example.com' },
      openai: { apiKey: 'sk-process', baseUrl: 'https://api.openai.com/v1' },
    });
  });
});

forEachEngine('speech providers', (h) => {
  const call = (method: string, url: string, token: string, body?: unknown, query?: Record<string, unknown>) => h().call(method, url, { token, body, query });
  async function tenant() {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    return { r, o };
  }

  it('add (201), listed masked, sealed at rest, changed keeping the key, a URL of another origin needs the key again, disabled, deleted', async () => {
    const { o } = await tenant();
    const added = await call('POST', PATH, o.token, { vendor: 'deepgram', apiKey: ORG_KEY });
    assert.equal(added.status, 201, JSON.stringify(added.body));
    assert.deepEqual({ ...added.body.provider, createdAt: 0, updatedAt: 0 }, {
      vendor: 'deepgram', apiKey: '****wxyz', serviceAccount: null, baseUrl: null, enabled: true, createdAt: 0, updatedAt: 0,
    });
    assert.ok(!JSON.stringify(added.body).includes(ORG_KEY));
    expectError(await call('POST', PATH, o.token, { vendor: 'deepgram', apiKey: 'another-key-000000' }), 409, 'deepgram');

    const row = await speechProviderRepo.find(h().database.db, o.id, 'deepgram');
    assert.ok(row);
    assert.ok(!row.api_key.includes(ORG_KEY) && !row.api_key.includes('1234567890'), 'the stored column is not the key');
    assert.match(row.api_key, /^v1:/);
    assert.equal(h().box.open(row.api_key), ORG_KEY, 'it is sealed with the secret box');

    const list = await call('GET', PATH, o.token);
    assert.equal(list.status, 200, JSON.stringify(list.body));
    assert.deepEqual(list.body.providers.map((p: any) => [p.vendor, p.apiKey, p.enabled]), [['deepgram', '****wxyz', true]]);
    assert.ok(!JSON.stringify(list.body).includes(ORG_KEY));

    // The vendor's own URL to a proxy of another origin, keeping the key: refused, nothing changed.
    expectError(await call('PUT', `${PATH}/deepgram`, o.token, { baseUrl: 'https://dg-proxy.example.net' }), 400,
      'apiKey is required when baseUrl changes its origin', 'https://api.deepgram.com', 'https://dg-proxy.example.net');
    const same = await speechProviderRepo.find(h().database.db, o.id, 'deepgram');
    assert.deepEqual(same, row, 'nothing changed');
    // The vendor's own origin written out, with a path: the same origin, the key stays.
    const samePlace = await call('PUT', `${PATH}/deepgram`, o.token, { baseUrl: 'https://api.deepgram.com/' });
    assert.equal(samePlace.status, 200, JSON.stringify(samePlace.body));
    assert.equal(samePlace.body.provider.baseUrl, 'https://api.deepgram.com', 'trailing slash dropped');
    assert.equal(samePlace.body.provider.apiKey, '****wxyz');
    // With the key again, another origin is fine.
    const moved = await call('PUT', `${PATH}/deepgram`, o.token, { baseUrl: 'https://dg-proxy.example.net', apiKey: 'dg-new-key-for-the-proxy-5678' });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    assert.deepEqual([moved.body.provider.baseUrl, moved.body.provider.apiKey], ['https://dg-proxy.example.net', '****5678']);
    // Back to the vendor's own (null) is another origin too.
    expectError(await call('PUT', `${PATH}/deepgram`, o.token, { baseUrl: null }), 400, 'apiKey', 'https://dg-proxy.example.net', 'https://api.deepgram.com');
    // enabled alone keeps the key and the URL.
    const off = await call('PUT', `${PATH}/deepgram`, o.token, { enabled: false });
    assert.equal(off.status, 200, JSON.stringify(off.body));
    assert.deepEqual([off.body.provider.enabled, off.body.provider.apiKey, off.body.provider.baseUrl], [false, '****5678', 'https://dg-proxy.example.net']);
    assert.ok(off.body.provider.updatedAt >= moved.body.provider.updatedAt);

    const del = await call('DELETE', `${PATH}/deepgram`, o.token);
    assert.equal(del.status, 200, JSON.stringify(del.body));
    expectError(await call('DELETE', `${PATH}/deepgram`, o.token), 404, 'deepgram');
    expectError(await call('PUT', `${PATH}/deepgram`, o.token, { enabled: true }), 404, 'deepgram');
    assert.deepEqual((await call('GET', PATH, o.token)).body.providers, []);
  });

  it('Google\'s key is a service account\'s JSON key: checked, sealed whole, shown by its account and key id', async () => {
    const { o } = await tenant();
    const key = googleKey();
    const added = await call('POST', PATH, o.token, { vendor: 'google', apiKey: key });
    assert.equal(added.status, 201, JSON.stringify(added.body));
    assert.equal(added.body.provider.apiKey, '****9f3e');
    assert.equal(added.body.provider.serviceAccount, 'speech@acme-voice.iam.gserviceaccount.com');
    assert.ok(!JSON.stringify(added.body).includes('PRIVATE KEY'));
    const row = await speechProviderRepo.find(h().database.db, o.id, 'google');
    assert.ok(row && !row.api_key.includes('PRIVATE'));
    assert.equal(h().box.open(row.api_key), key, 'sealed whole');
    const { o: other } = await tenant();
    expectError(await call('POST', PATH, other.token, { vendor: 'google', apiKey: 'AIzaSyA-not-a-service-account' }), 400, 'apiKey', 'not JSON');
    expectError(await call('POST', PATH, other.token, { vendor: 'google', apiKey: JSON.stringify({ type: 'authorized_user' }) }), 400, 'apiKey', 'service_account');
    expectError(await call('POST', PATH, other.token, { vendor: 'google', apiKey: JSON.stringify({ type: 'service_account', client_email: 'a@b' }) }), 400, 'private_key');
    const big = JSON.stringify({ ...JSON.parse(googleKey()), padding: 'x'.repeat(17_000) });
    expectError(await call('POST', PATH, other.token, { vendor: 'google', apiKey: big }), 400, 'apiKey');
    assert.deepEqual((await call('GET', PATH, other.token)).body.providers, [], 'nothing stored');
  });

  it('refuses unknown vendors, bad keys and private base URLs (the address policy); agents may not; another organization sees and changes nothing (404)', async () => {
    const { r, o } = await tenant();
    const other = await tenant();
    expectError(await call('POST', PATH, o.token, { vendor: 'azure', apiKey: 'k-0000000000' }), 400, 'vendor', 'deepgram, elevenlabs, cartesia, google, openai');
    expectError(await call('POST', PATH, o.token, { vendor: 'cartesia' }), 400, 'apiKey');
    expectError(await call('POST', PATH, o.token, { vendor: 'cartesia', apiKey: '' }), 400, 'apiKey');
    expectError(await call('POST', PATH, o.token, { vendor: 'cartesia', apiKey: 'line\nbreak' }), 400, 'apiKey');
    expectError(await call('POST', PATH, o.token, { vendor: 'cartesia', apiKey: 'k'.repeat(1001) }), 400, 'apiKey');
    for (const baseUrl of ['http://127.0.0.1:9000', 'http://10.0.0.5', 'http://[::1]:8080', 'http://169.254.169.254']) {
      expectError(await call('POST', PATH, o.token, { vendor: 'elevenlabs', apiKey: 'xi-key-0000000000', baseUrl }), 400, 'baseUrl', 'private targets are not allowed');
    }
    expectError(await call('POST', PATH, o.token, { vendor: 'elevenlabs', apiKey: 'xi-key-0000000000', baseUrl: 'ftp://example.com' }), 400, 'baseUrl');
    expectError(await call('POST', PATH, o.token, { vendor: 'elevenlabs', apiKey: 'xi-key-0000000000', baseUrl: 'https://u:p@example.com' }), 400, 'baseUrl');
    expectError(await call('POST', PATH, o.token, { vendor: 'elevenlabs', apiKey: 'xi-key-0000000000', baseUrl: 'https://example.com/?region=eu' }), 400, 'baseUrl');
    assert.deepEqual((await call('GET', PATH, o.token)).body.providers, [], 'nothing stored');

    // Who may: the organization, its reseller naming it; not its agent, nor a reseller without naming one.
    expectError(await call('POST', PATH, await h().tokenFor(o.agentId), { vendor: 'openai', apiKey: 'sk-0000000000' }), 403);
    expectError(await call('GET', PATH, await h().tokenFor(o.agentId)), 403);
    expectError(await call('POST', PATH, r.token, { vendor: 'openai', apiKey: 'sk-0000000000' }), 403);
    const byReseller = await call('POST', PATH, r.token, { vendor: 'openai', apiKey: 'sk-reseller-set-000000abcd', baseUrl: 'https://speech.example.com/v1' }, { targetAccountId: o.id });
    assert.equal(byReseller.status, 201, JSON.stringify(byReseller.body));
    // A private address is refused on change too.
    expectError(await call('PUT', `${PATH}/openai`, o.token, { baseUrl: 'http://192.168.1.10/v1', apiKey: 'sk-new-0000000000' }), 400, 'baseUrl', 'private targets are not allowed');

    // Another organization, and another reseller, neither see nor change it.
    assert.deepEqual((await call('GET', PATH, other.o.token)).body.providers, []);
    expectError(await call('GET', PATH, other.r.token, undefined, { targetAccountId: o.id }), 404);
    expectError(await call('PUT', `${PATH}/openai`, other.o.token, { enabled: false }), 404);
    expectError(await call('PUT', `${PATH}/openai`, other.r.token, { enabled: false }, { targetAccountId: o.id }), 404);
    expectError(await call('DELETE', `${PATH}/openai`, other.o.token), 404);
    expectError(await call('DELETE', `${PATH}/openai`, other.r.token, undefined, { targetAccountId: o.id }), 404);
    expectError(await call('POST', PATH, other.r.token, { vendor: 'cartesia', apiKey: 'sk_car_0000000000' }, { targetAccountId: o.id }), 404);
    const mine = (await call('GET', PATH, o.token)).body.providers;
    assert.deepEqual(mine.map((p: any) => [p.vendor, p.apiKey, p.enabled, p.baseUrl]), [['openai', '****abcd', true, 'https://speech.example.com/v1']], 'untouched');
  });

  it('resolution: the organization\'s enabled key wins over the process\'s; disabled or deleted, the process\'s; neither, none', async () => {
    const { o } = await tenant();
    const { o: other } = await tenant();
    const sp = h().services.speechProviders;
    const processKeys = processSpeechKeys(h().config.speech);
    assert.deepEqual(await sp.credentials(o.id, 'deepgram'), { apiKey: PROCESS_KEY, baseUrl: 'https://dg.example.com', source: 'process' });
    assert.equal(await sp.credentials(o.id, 'elevenlabs'), undefined, 'no key anywhere');

    assert.equal((await call('POST', PATH, o.token, { vendor: 'deepgram', apiKey: ORG_KEY })).status, 201);
    assert.deepEqual(await sp.credentials(o.id, 'deepgram'), { apiKey: ORG_KEY, baseUrl: 'https://api.deepgram.com', source: 'organization' });
    assert.deepEqual(await speechCredentials(h().database.db, h().box, o.id, 'deepgram', processKeys), { apiKey: ORG_KEY, baseUrl: 'https://api.deepgram.com', source: 'organization' });
    assert.equal((await sp.credentials(other.id, 'deepgram'))?.source, 'process', 'another organization keeps the process\'s');

    assert.equal((await call('PUT', `${PATH}/deepgram`, o.token, { enabled: false })).status, 200);
    assert.deepEqual(await sp.credentials(o.id, 'deepgram'), { apiKey: PROCESS_KEY, baseUrl: 'https://dg.example.com', source: 'process' }, 'disabled: the process\'s');
    assert.equal((await call('PUT', `${PATH}/deepgram`, o.token, { enabled: true })).status, 200);
    assert.equal((await sp.credentials(o.id, 'deepgram'))?.source, 'organization');
    assert.equal((await call('DELETE', `${PATH}/deepgram`, o.token)).status, 200);
    assert.equal((await sp.credentials(o.id, 'deepgram'))?.source, 'process', 'deleted: the process\'s');

    // An organization's own key for a vendor the process has none of; disabled, none at all.
    assert.equal((await call('POST', PATH, o.token, { vendor: 'cartesia', apiKey: 'sk_car_org_0000000000', enabled: false })).status, 201);
    assert.equal(await sp.credentials(o.id, 'cartesia'), undefined);
    assert.equal((await call('PUT', `${PATH}/cartesia`, o.token, { enabled: true })).status, 200);
    assert.deepEqual(await sp.credentials(o.id, 'cartesia'), { apiKey: 'sk_car_org_0000000000', baseUrl: 'https://api.cartesia.ai', source: 'organization' });

    // Engines: the organization's built once per key, the process's apart.
    assert.equal((await call('POST', PATH, o.token, { vendor: 'deepgram', apiKey: ORG_KEY })).status, 201);
    const first = await sp.engines(o.id, 'deepgram');
    assert.equal(first?.source, 'organization');
    assert.ok(first.engines.streaming.deepgram instanceof DeepgramLive);
    assert.equal((await sp.engines(o.id, 'deepgram'))?.engines, first.engines, 'kept');
    const theirs = await sp.engines(other.id, 'deepgram');
    assert.equal(theirs?.source, 'process');
    assert.notEqual(theirs.engines, first.engines);
    const cartesia = await sp.engines(o.id, 'cartesia');
    assert.equal(cartesia?.source, 'organization');
    assert.ok(cartesia.engines.tts instanceof CartesiaEngine, 'the organization\'s Cartesia key speaks');
  });

  it('a base URL whose name resolves to a private address passes the write but is refused where it is used', async () => {
    const { o } = await tenant();
    assert.equal((await call('POST', PATH, o.token, { vendor: 'deepgram', apiKey: ORG_KEY, baseUrl: 'http://localhost:9000' })).status, 201);
    await assert.rejects(h().services.speechProviders.credentials(o.id, 'deepgram'), (e: unknown) =>
      e instanceof TargetRefusedError && /localhost: the address policy refused the target/.test(e.message) && !/127\.0\.0\.1|::1/.test(e.message));
  });

  it('usage: each vendor\'s use in its own unit, per organization, in the caller\'s transaction, read with allItems', async () => {
    const { o } = await tenant();
    const { o: other } = await tenant();
    const db = h().database.db;
    const at = Date.now();
    await recordSpeechUsage(db, o.id, 'deepgram', 'audioSeconds', 1.25, at);
    await recordSpeechUsage(db, o.id, 'deepgram', 'audioSeconds', 0.0004, at); // under half a millisecond: nothing
    await db.transaction().execute(async (tx) => {
      await recordSpeechUsage(tx, o.id, 'deepgram', 'audioSeconds', 2.5, at);
      await recordSpeechUsage(tx, o.id, 'elevenlabs', 'characters', 120, at);
    });
    await recordSpeechUsage(db, other.id, 'openai', 'characters', 7, at);
    // A rolled-back transaction counts nothing.
    await assert.rejects(db.transaction().execute(async (tx) => {
      await recordSpeechUsage(tx, o.id, 'cartesia', 'characters', 999, at);
      throw new Error('the call failed');
    }), /the call failed/);
    await assert.rejects(recordSpeechUsage(db, o.id, 'elevenlabs', 'audioSeconds', 1, at), RangeError, 'ElevenLabs does not recognise');
    await assert.rejects(recordSpeechUsage(db, o.id, 'deepgram', 'characters', -1, at), RangeError);
    await assert.rejects(recordSpeechUsage(db, o.id, 'deepgram', 'audioSeconds', Number.NaN, at), RangeError);

    const read = async (token: string, query: Record<string, unknown>) => {
      const res = await h().call('GET', '/api/v2/stats/usage', { token, query });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body;
    };
    const all = await read(o.token, { allItems: true });
    const speech = Object.fromEntries(Object.entries(all.usage).filter(([k]) => k.startsWith('speech:')));
    assert.deepEqual(speech, {
      'speech:deepgram:audioSeconds': 3.75, 'speech:deepgram:characters': 0, 'speech:elevenlabs:characters': 120, 'speech:cartesia:characters': 0,
      'speech:google:audioSeconds': 0, 'speech:openai:audioSeconds': 0, 'speech:openai:characters': 0,
    });
    assert.equal(all.usage.callMinutes, 0, 'billed items are untouched');
    const plain = await read(o.token, {});
    assert.ok(!Object.keys(plain.usage).some((k) => k.startsWith('speech:')), 'without allItems: the billed items only');
    const series = await read(o.token, { allItems: true, timeseries: true });
    const today = series.timeseries.find((d: any) => d['speech:elevenlabs:characters'] > 0);
    assert.equal(today['speech:deepgram:audioSeconds'], 3.75);
    assert.equal((await read(other.token, { allItems: true })).usage['speech:openai:characters'], 7);
    assert.equal((await read(other.token, { allItems: true })).usage['speech:deepgram:audioSeconds'], 0, 'each organization its own');
  });
}, { CALLPLANE_DEEPGRAM_API_KEY: PROCESS_KEY, CALLPLANE_DEEPGRAM_URL: 'https://dg.example.com' });

// The engines the resolution hands out reach the organization's URL with its key, and the process's
// with the process's, through Deepgram's official client (doubles on loopback: private targets open).
// The live (WebSocket) engine: the pre-recorded one fails in any process that loaded undici 7
// (the platform does), reported apart.
describe('speech provider keys on the wire', () => {
  let processDg: FakeDeepgram;
  let orgDg: FakeDeepgram;
  // Read when each engine's harness starts, after the doubles are up.
  const env: Record<string, string> = { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_DEEPGRAM_API_KEY: PROCESS_KEY };
  before(async () => {
    [processDg, orgDg] = await Promise.all([startFakeDeepgram({ apiKey: PROCESS_KEY }), startFakeDeepgram({ apiKey: ORG_KEY })]);
    env.CALLPLANE_DEEPGRAM_URL = processDg.url;
  });
  after(async () => { await Promise.all([processDg?.close(), orgDg?.close()]); });

  async function listenOnce(engines: VendorEngines): Promise<void> {
    const stream = await engines.streaming.deepgram!.open({ language: 'en-US', encoding: 'mulaw', sampleRate: 8000 });
    await stream.close();
  }

  forEachEngine('the organization\'s Deepgram key, then the process\'s', (h) => {
    it('sends each key only to its own URL', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const sp = h().services.speechProviders;
      const seen = (fake: FakeDeepgram) => fake.handshakes.map((s) => [s.path, s.status, s.authorization]);
      processDg.handshakes.length = 0;
      orgDg.handshakes.length = 0;
      assert.equal((await h().call('POST', PATH, { token: o.token, body: { vendor: 'deepgram', apiKey: ORG_KEY, baseUrl: orgDg.url } })).status, 201);
      const own = await sp.engines(o.id, 'deepgram');
      assert.equal(own?.source, 'organization');
      await listenOnce(own.engines);
      assert.deepEqual(seen(orgDg), [['/v1/listen', 101, `Token ${ORG_KEY}`]]);
      assert.deepEqual(seen(processDg), []);

      assert.equal((await h().call('PUT', `${PATH}/deepgram`, { token: o.token, body: { enabled: false } })).status, 200);
      const fallback = await sp.engines(o.id, 'deepgram');
      assert.equal(fallback?.source, 'process');
      await listenOnce(fallback.engines);
      assert.deepEqual(seen(processDg), [['/v1/listen', 101, `Token ${PROCESS_KEY}`]]);
      assert.equal(orgDg.handshakes.length, 1, 'the organization\'s URL got nothing more');
    });
  }, env);
});
