// Calls use the organization's own speech keys, and what they use is metered (issue 35): an agent
// whose agentSttEngine is `deepgram` and whose agentTtsEngine is `elevenlabs`, in an organization
// that stored its own Deepgram and ElevenLabs keys (POST /api/v2/speech/providers, each at its own
// double on loopback), is heard by ITS Deepgram double while the double holding the process's key
// (CALLPLANE_DEEPGRAM_API_KEY) sees nothing; the call's audio seconds and the characters its voice
// spoke are in GET /api/v2/stats/usage once it ends, recorded once however often the end is
// recorded. An organization without a key, or with its key disabled, is heard with the process's.
// An organization's Google key (a service account's JSON) hears with Google's gRPC double, and its
// OpenAI key with the Realtime transcription double.
// The real call start (start-call.ts), session, speech-providers service and engines (official
// clients) run over the fake voice transport (test/helpers/fake-voice-transport.ts).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { voiceSettings } from '../../src/modules/agents/voice-settings.ts';
import { conversationRepo, messageRepo } from '../../src/modules/conversations/repository.ts';
import { CAPABILITIES } from '../../src/modules/voice/call-policy.ts';
import { speechProviderRepo } from '../../src/modules/speech-providers/repository.ts';
import { readCallState } from '../../src/modules/voice/call-state.ts';
import { recordCallSpeech, SpeechMeter } from '../../src/modules/voice/speech-meter.ts';
import { startCall } from '../../src/modules/voice/start-call.ts';
import { agentOnCall } from '../helpers/agent-call.ts';
import { startFakeDeepgram, type FakeDeepgram } from '../helpers/fake-deepgram.ts';
import { ELEVENLABS_TEST_KEY, startFakeElevenLabs } from '../helpers/fake-elevenlabs.ts';
import { makeServiceAccount, startFakeGoogleSpeech, type FakeGoogleSpeech, type ServiceAccount } from '../helpers/fake-google-speech.ts';
import { startFakeOpenAIRealtime, type FakeOpenAIRealtime } from '../helpers/fake-openai-realtime.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import type { FakeTtsServer } from '../helpers/fake-tts.ts';
import { FakeVoiceTransport, ScriptedStt, ShortTts } from '../helpers/fake-voice-transport.ts';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { waitFor } from '../helpers/sip-peers.ts';

const PROCESS_KEY = 'dg-process-key-0123456789';
const ORG_KEY = 'dg-org-key-9876543210';
const REPLY = 'We open at nine.';

for (const engine of ENGINES) {
  describe(`calls with the organization's own speech keys [${engine}]`, () => {
    let h: Harness;
    let llm: FakeLlm;
    let processDg: FakeDeepgram;
    let orgDg: FakeDeepgram;
    let el: FakeTtsServer;
    let google: FakeGoogleSpeech;
    let realtime: FakeOpenAIRealtime;
    let dir: string;
    let account: ServiceAccount;
    before(async () => {
      llm = await startFakeLlm();
      google = await startFakeGoogleSpeech();
      realtime = await startFakeOpenAIRealtime();
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-org-google-'));
      account = makeServiceAccount(dir, 'org-speech');
      google.trust(account);
      processDg = await startFakeDeepgram({ apiKey: PROCESS_KEY });
      orgDg = await startFakeDeepgram({ apiKey: ORG_KEY });
      el = await startFakeElevenLabs();
      h = await startHarness(engine, {
        CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
        CALLPLANE_DEEPGRAM_API_KEY: PROCESS_KEY, CALLPLANE_DEEPGRAM_URL: processDg.url, CALLPLANE_STT_REALTIME: 'on',
      });
    });
    after(async () => {
      await h?.close(); await llm?.close(); await processDg?.close(); await orgDg?.close(); await el?.close(); await google?.close(); await realtime?.close();
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    });

    /**
     * A call of a new organization (with `keys` stored first) to an agent heard by Deepgram and
     * spoken by ElevenLabs: the caller says one thing, the agent answers, the call ends.
     */
    async function call(keys: { vendor: string; apiKey: string; baseUrl: string; enabled?: boolean }[], stt: { engine: 'deepgram' | 'google' | 'openai'; hears?: { hear: string[] } } = { engine: 'deepgram' }) {
      const { db, org, live, opened, http, turns } = await agentOnCall(h, {
        welcomeMessage: '', agentSttEngine: stt.engine, agentTtsEngine: 'elevenlabs', speakingTimeout: 5000, callerResponseTimeout: 60,
      });
      for (const k of keys) {
        const added = await h.call('POST', '/api/v2/speech/providers', { token: org.token, body: k });
        assert.equal(added.status, 201, JSON.stringify(added.body));
      }
      const transport = new FakeVoiceTransport();
      const offline = new ShortTts();
      const settings = voiceSettings(live);
      const deps = {
        db, conversations: h.services.conversations, turns, stt: new ScriptedStt(['heard offline']), tts: offline,
        speechKeys: h.services.speechProviders, now: Date.now,
      };
      const started = await startCall(deps, transport, { conversation: opened.conversation, room: opened.room, config: live, settings, capabilities: CAPABILITIES.sip, opening: {} });
      const id = opened.conversation.id;
      await waitFor('listening', () => started.session.phase === 'listening', 10_000, 5);
      (stt.hears ?? (keys.some((k) => k.vendor === 'deepgram' && k.enabled !== false) ? orgDg : processDg)).hear.push('When do you open?');
      llm.script.push({ text: REPLY });
      transport.utter(settings.speakingTimeoutMs, 1500);
      await waitFor('the reply', async () => (await messageRepo.ofConversation(db, id)).some((m) => m.direction === 'outbound'), 15_000, 20);
      await waitFor('listening again', () => started.session.phase === 'listening', 10_000, 5);
      transport.end('test over');
      await started.done;
      await http.close();
      const row = (await conversationRepo.find(db, id))!;
      const usage = await h.call('GET', '/api/v2/stats/usage', { token: org.token, query: { allItems: true } });
      assert.equal(usage.status, 200, JSON.stringify(usage.body));
      return { id, org, state: readCallState(row.state), usage: usage.body.usage as Record<string, number>, offline, heardByModel: llm.requests.at(-1)!.body.messages.at(-1)!.content };
    }

    it('the organization\'s key wins: its double hears the call, the process\'s sees nothing; the audio seconds and characters are in its usage, once', async () => {
      const processBefore = processDg.connections.length;
      const orgBefore = orgDg.connections.length;
      const r = await call([
        { vendor: 'deepgram', apiKey: ORG_KEY, baseUrl: orgDg.url },
        { vendor: 'elevenlabs', apiKey: ELEVENLABS_TEST_KEY, baseUrl: el.baseUrl },
      ]);
      assert.equal(processDg.connections.length, processBefore, 'the process\'s Deepgram was not asked');
      assert.equal(orgDg.connections.length, orgBefore + 1);
      const conn = orgDg.connections.at(-1)!;
      assert.equal(conn.headers.authorization, `Token ${ORG_KEY}`);
      assert.equal(r.heardByModel, 'When do you open?');
      assert.deepEqual(r.offline.said, [], 'the configured voice said nothing');
      const speech = r.state.speech!;
      assert.deepEqual([speech.stt, speech.sttKeySource, speech.tts, speech.ttsKeySource, speech.changes], ['deepgram', 'organization', 'elevenlabs', 'organization', undefined]);
      assert.ok(!JSON.stringify(r.state).includes(ORG_KEY) && !JSON.stringify(r.state).includes(ELEVENLABS_TEST_KEY));

      // What the double received (linear16 at 8 kHz: 2 bytes a sample) is what is counted, to the millisecond.
      const seconds = conn.bytes / 16_000;
      assert.ok(seconds > 1.5, `${seconds} s of audio`);
      assert.equal(r.state.speechUsage?.['deepgram:audioSeconds'], Math.round(seconds * 1000) / 1000);
      assert.equal(r.state.speechUsage?.['elevenlabs:characters'], REPLY.length);
      assert.equal(r.usage['speech:deepgram:audioSeconds'], Math.round(seconds * 1000) / 1000);
      assert.equal(r.usage['speech:elevenlabs:characters'], REPLY.length);
      assert.equal(r.usage['speech:deepgram:characters'], 0);

      // A retried end records nothing more.
      const again = new SpeechMeter();
      again.add('deepgram', 'audioSeconds', 5);
      await recordCallSpeech(h.database.db, r.id, again, Date.now());
      const u2 = await h.call('GET', '/api/v2/stats/usage', { token: r.org.token, query: { allItems: true } });
      assert.equal((u2.body.usage as Record<string, number>)['speech:deepgram:audioSeconds'], r.usage['speech:deepgram:audioSeconds']);
    });

    it('an organization\'s Google key (its service account\'s JSON) hears its calls: the token is signed with that account, at the organization\'s endpoint', async () => {
      const before = google.streams.length;
      const r = await call([
        { vendor: 'google', apiKey: fs.readFileSync(account.file, 'utf8'), baseUrl: google.url },
        { vendor: 'elevenlabs', apiKey: ELEVENLABS_TEST_KEY, baseUrl: el.baseUrl },
      ], { engine: 'google', hears: google });
      assert.equal(google.streams.length, before + 1);
      const stream = google.streams.at(-1)!;
      assert.equal(stream.claims?.iss, account.email, 'signed with the organization\'s service account');
      assert.equal((stream.config as { config?: { encoding?: string } }).config?.encoding, 'LINEAR16');
      assert.equal(r.heardByModel, 'When do you open?');
      const speech = r.state.speech!;
      assert.deepEqual([speech.stt, speech.sttKeySource, speech.changes], ['google', 'organization', undefined]);
      assert.ok(!JSON.stringify(r.state).includes(account.email) && !JSON.stringify(r.state).includes('PRIVATE KEY'));
      assert.ok(r.usage['speech:google:audioSeconds']! > 1.5, JSON.stringify(r.usage));
    });

    it('an organization\'s OpenAI key streams its calls to its server\'s Realtime transcription (CALLPLANE_STT_REALTIME=on), metered in audio seconds', async () => {
      const before = realtime.connections.length;
      const r = await call([
        { vendor: 'openai', apiKey: realtime.apiKey, baseUrl: realtime.baseUrl },
        { vendor: 'elevenlabs', apiKey: ELEVENLABS_TEST_KEY, baseUrl: el.baseUrl },
      ], { engine: 'openai', hears: realtime });
      assert.equal(realtime.connections.length, before + 1);
      const conn = realtime.connections.at(-1)!;
      assert.equal(conn.headers.authorization, `Bearer ${realtime.apiKey}`);
      assert.equal(r.heardByModel, 'When do you open?');
      const speech = r.state.speech!;
      assert.deepEqual([speech.stt, speech.sttKeySource, speech.changes], ['openai', 'organization', undefined]);
      assert.ok(r.usage['speech:openai:audioSeconds']! > 1.5, JSON.stringify(r.usage));
    });

    it('an organization without a key is heard with the process\'s; a disabled key falls back to it too', async () => {
      for (const keys of [[], [{ vendor: 'deepgram', apiKey: ORG_KEY, baseUrl: orgDg.url, enabled: false }]]) {
        const processBefore = processDg.connections.length;
        const orgBefore = orgDg.connections.length;
        const r = await call(keys);
        assert.equal(orgDg.connections.length, orgBefore, 'the organization\'s double was not asked');
        assert.equal(processDg.connections.length, processBefore + 1);
        assert.equal(processDg.connections.at(-1)!.headers.authorization, `Token ${PROCESS_KEY}`);
        assert.equal(r.heardByModel, 'When do you open?');
        const speech = r.state.speech!;
        // No ElevenLabs key anywhere: the configured voice speaks, and says so.
        assert.deepEqual([speech.stt, speech.sttKeySource, speech.tts, speech.ttsKeySource], ['deepgram', 'process', r.offline.name, undefined]);
        assert.match(speech.ttsSubstituted ?? '', /elevenlabs has no key/);
        // Metered for the organization all the same (the process's key is the platform's), and nothing for the offline voice.
        assert.ok(r.usage['speech:deepgram:audioSeconds']! > 1.5);
        assert.equal(r.usage['speech:elevenlabs:characters'], 0);
      }
    });

    it('an organization base URL resolving to a private address is refused like a refused key: the configured recogniser hears and the configured voice speaks, state.speech says why', async () => {
      const strict = await startHarness(engine, {
        CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0',
        CALLPLANE_DEEPGRAM_API_KEY: PROCESS_KEY, CALLPLANE_DEEPGRAM_URL: processDg.url,
      });
      try {
        const { db, org, live, opened, http, turns } = await agentOnCall(strict, { welcomeMessage: '', agentSttEngine: 'deepgram', agentTtsEngine: 'elevenlabs', callerResponseTimeout: 60 });
        // A key stored while the policy allowed its loopback URL (the API refuses it under this one): checked again where it is used.
        await speechProviderRepo.insert(db, org.id, 'deepgram', { api_key: strict.box.seal(ORG_KEY), base_url: orgDg.url, enabled: 1 }, Date.now());
        await speechProviderRepo.insert(db, org.id, 'elevenlabs', { api_key: strict.box.seal(ELEVENLABS_TEST_KEY), base_url: el.baseUrl, enabled: 1 }, Date.now());
        const orgBefore = orgDg.connections.length;
        const processBefore = processDg.connections.length;
        const socketsBefore = el.sockets.length;
        const transport = new FakeVoiceTransport();
        const started = await startCall({
          db, conversations: strict.services.conversations, turns, stt: new ScriptedStt([]), tts: new ShortTts(), speechKeys: strict.services.speechProviders, now: Date.now,
        }, transport, { conversation: opened.conversation, room: opened.room, config: live, settings: voiceSettings(live), capabilities: CAPABILITIES.sip, opening: {} });
        transport.end('test over');
        await started.done;
        await http.close();
        assert.deepEqual([orgDg.connections.length, processDg.connections.length, el.sockets.length], [orgBefore, processBefore, socketsBefore]);
        const speech = readCallState((await conversationRepo.find(db, opened.conversation.id))!.state).speech!;
        assert.deepEqual([speech.stt, speech.sttKeySource, speech.changes?.map((c) => `${c.from}>${c.to}`)], ['scripted', undefined, ['deepgram>scripted']]);
        assert.match(speech.changes![0]!.reason, /organization's deepgram base URL was refused/);
        // The voice alike: the configured one speaks, and says why.
        assert.deepEqual([speech.tts, speech.ttsKeySource], ['short', undefined]);
        assert.match(speech.ttsSubstituted ?? '', /organization's elevenlabs base URL was refused.*the configured voice \(short\) speaks/);
        assert.ok(!JSON.stringify(speech).includes(ORG_KEY) && !JSON.stringify(speech).includes(ELEVENLABS_TEST_KEY));
      } finally {
        await strict.close();
      }
    });
  });
}
