// Voices people pay for on calls (issue 35): an agent whose agentTtsEngine is `elevenlabs` speaks
// through ElevenLabs' stream-input socket (the real engine, src/speech/elevenlabs.ts, against its
// double on loopback, test/helpers/fake-elevenlabs.ts), its reply handed over sentence by sentence
// while the model still streams; the caller's barge-in cancels the provider's stream; a refused
// key falls back to the configured voice and the call's state says why; the greeting cache spares
// the second call's greeting a synthesis; GET /api/v2/voices lists the double's voices. The call
// runs the real call start (start-call.ts), session and turn runner over the fake voice transport
// (test/helpers/fake-voice-transport.ts), on a real database.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { voiceSettings } from '../../src/modules/agents/voice-settings.ts';
import { conversationRepo, messageRepo } from '../../src/modules/conversations/repository.ts';
import { CAPABILITIES } from '../../src/modules/voice/call-policy.ts';
import { readCallState } from '../../src/modules/voice/call-state.ts';
import { GreetingCache } from '../../src/modules/voice/greeting-cache.ts';
import { voiceCalls } from '../../src/modules/voice/sip-calls.ts';
import { callSpeaker } from '../../src/modules/voice/speaker.ts';
import { startCall } from '../../src/modules/voice/start-call.ts';
import { ElevenLabsEngine } from '../../src/speech/elevenlabs.ts';
import { OpenAISynthesizer } from '../../src/speech/openai-speech.ts';
import { resample } from '../../src/speech/resample.ts';
import type { TextToSpeech } from '../../src/speech/types.ts';
import { agentOnCall } from '../helpers/agent-call.ts';
import { fakeSpeechPcm } from '../helpers/fake-audio.ts';
import { ELEVENLABS_TEST_KEY, FAKE_ELEVENLABS_VOICES, startFakeElevenLabs } from '../helpers/fake-elevenlabs.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { samplesFor, type FakeTtsServer, type RecordedSocket } from '../helpers/fake-tts.ts';
import { FakeVoiceTransport, ScriptedStt, ShortTts, TimedTransport } from '../helpers/fake-voice-transport.ts';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';

async function until(what: string, fn: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await fn())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

type Msg = { text?: string };
/** What a stream-input socket was asked to speak (its messages after the opening blank). */
const spoken = (s: RecordedSocket) => (s.messages as Msg[]).slice(1).map((m) => m.text ?? '').join('');

for (const engine of ENGINES) {
  describe(`streamed voices on a call [${engine}]`, () => {
    let h: Harness;
    let llm: FakeLlm;
    let el: FakeTtsServer;
    before(async () => {
      llm = await startFakeLlm();
      el = await startFakeElevenLabs();
      h = await startHarness(engine, {
        CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
        CALLPLANE_ELEVENLABS_API_KEY: ELEVENLABS_TEST_KEY, CALLPLANE_ELEVENLABS_URL: el.baseUrl,
      });
    });
    after(async () => {
      await h?.close(); await llm?.close(); await el?.close();
      if (process.env.VOICE_DEBUG) setTimeout(() => console.error((process as unknown as { _getActiveHandles(): object[] })._getActiveHandles().map((x) => x.constructor.name), (process as unknown as { _getActiveRequests(): object[] })._getActiveRequests().length), 300).unref();
    });

    /** A call to an agent with this configuration; its voice engines: ElevenLabs (with `key`) and an offline stand-in. */
    async function call(config: Record<string, unknown>, opts: { heard?: string[]; key?: string; greetings?: GreetingCache; tts?: TextToSpeech } = {}) {
      const { db, live, opened, http, turns } = await agentOnCall(h, config);
      const transport = new TimedTransport();
      const offline = new ShortTts();
      const elevenlabs = new ElevenLabsEngine({ apiKey: opts.key ?? ELEVENLABS_TEST_KEY, baseUrl: el.baseUrl, maxRetries: 0, timeoutMs: 5000 });
      const settings = voiceSettings(live);
      const log = { warn: (obj: object, msg: string) => { if (process.env.VOICE_DEBUG) console.error(msg, obj); } };
      const started = await startCall({
        db, conversations: h.services.conversations, turns, stt: new ScriptedStt(opts.heard ?? []), tts: opts.tts ?? offline,
        voices: { elevenlabs }, greetings: opts.greetings, now: Date.now, log,
      }, transport, { conversation: opened.conversation, room: opened.room, config: live, settings, capabilities: CAPABILITIES.sip, opening: {} });
      const id = opened.conversation.id;
      return {
        transport, offline, settings, session: started.session,
        async replies() { return (await messageRepo.ofConversation(db, id)).filter((m) => m.direction === 'outbound'); },
        async speech() { return readCallState((await conversationRepo.find(db, id))!.state).speech!; },
        async close() { transport.end('test over'); await started.done; await http.close(); },
      };
    }

    it('speaks the reply through the provider\'s stream while the model still writes it: first audio before the model\'s last token, every sentence from the double', async () => {
      const text = 'We open at nine today. We close at five. Anything else I can do?';
      llm.script.push({ text, pieceDelayMs: 120 });
      const socketsBefore = el.sockets.length;
      const c = await call({ welcomeMessage: '', agentTtsEngine: 'elevenlabs', callerResponseTimeout: 60 }, { heard: ['when do you open'] });
      await until('listening', () => c.session.phase === 'listening');
      c.transport.utter(c.settings.speakingTimeoutMs);
      await until('the reply recorded and heard', async () => c.session.phase === 'listening' && (await c.replies()).length === 1);
      const chat = llm.requests.at(-1)!;
      assert.ok(chat.doneT !== undefined);
      const firstAudio = c.transport.playedAt[0]!;
      assert.ok(firstAudio < chat.doneT!, `first audio ${(chat.doneT! - firstAudio).toFixed(0)} ms before the model's last token`);
      const sockets = el.sockets.slice(socketsBefore);
      // One stream per sentence, each told its sentence and its end; each sentence's audio played as the double sent it.
      assert.deepEqual(sockets.map(spoken), ['We open at nine today. ', 'We close at five. ', 'Anything else I can do? ']);
      assert.deepEqual(sockets.map((s) => s.audioChunks), sockets.map((s) => Math.ceil(samplesFor(spoken(s), 8000) / 320)), 'each stream spoke its sentence to the end (40 ms chunks)');
      const played = c.transport.of('play').reduce((n, p) => n + p.samples, 0);
      assert.equal(played, sockets.reduce((n, s) => n + samplesFor(spoken(s), 8000), 0), 'every sample from the double');
      assert.equal(c.transport.of('play').length, sockets.reduce((n, s) => n + s.audioChunks, 0), 'a mark per chunk');
      assert.deepEqual(c.offline.said, [], 'the configured voice said nothing');
      assert.deepEqual((await c.replies()).map((m) => m.text), [text]);
      assert.deepEqual(await c.speech(), {
        stt: 'scripted', sttRequested: 'deepgram', sttSubstituted: 'no deepgram key on this process nor of the organization: scripted hears the call',
        tts: 'elevenlabs', offline: false, voice: 'default female en-US', streamed: true, ttsRequested: 'elevenlabs', ttsKeySource: 'process',
      });
      await c.close();
    });

    it('a configured voice that streams one synthesis (OpenAI-compatible speech) plays each sentence as its audio arrives, not after its last byte', async () => {
      const openai = new OpenAISynthesizer({ name: 'openai', baseUrl: llm.baseUrl, apiKey: 'sk-speech', timeoutMs: 5000, maxRetries: 0, model: 'tts-1', format: 'pcm' });
      const text = 'We open at nine today, every day of the week.';
      llm.script.push({ text });
      // The speech server sends its first pieces, then holds the rest back for 700 ms.
      llm.audioScript.push({ stallMs: 700 });
      const before = llm.audioRequests.length;
      const c = await call({ welcomeMessage: '', callerResponseTimeout: 60 }, { heard: ['when do you open'], tts: openai });
      await until('listening', () => c.session.phase === 'listening');
      c.transport.utter(c.settings.speakingTimeoutMs);
      await until('the reply recorded and heard', async () => c.session.phase === 'listening' && (await c.replies()).length === 1);
      const asked = llm.audioRequests.slice(before);
      assert.deepEqual(asked.map((r) => r.body?.input), [text]);
      const plays = c.transport.of('play');
      assert.ok(plays.length >= 2, `${plays.length} pieces`);
      // The first piece went out before the stall ended, a good part of a second before the last.
      const spread = c.transport.playedAt.at(-1)! - c.transport.playedAt[0]!;
      assert.ok(spread >= 500, `first piece ${spread.toFixed(0)} ms before the last (the server held 700 ms)`);
      // Every sample of the server's 24 kHz answer, resampled to 8 kHz, exactly as the whole would be.
      assert.equal(plays.reduce((n, p) => n + p.samples, 0), resample(fakeSpeechPcm(text, 24_000), 24_000, 8000).length);
      const speech = await c.speech();
      assert.deepEqual([speech.tts, speech.offline, speech.streamed], ['openai', false, false]);
      assert.deepEqual(c.offline.said, []);
      await c.close();
    });

    it('a barge-in cancels the provider\'s stream and what is queued at once; only what was heard stays', async () => {
      el.pacing.gapMs = 25;
      try {
        llm.script.push({ text: 'Let me tell you all about our many opening hours and holidays in great detail. And then more.' });
        const socketsBefore = el.sockets.length;
        const c = await call({ welcomeMessage: '', agentTtsEngine: 'elevenlabs', callerResponseTimeout: 60, interruptionWordCount: 1, interruptionMinimumSpeakingTime: 0 }, { heard: ['hours please'] });
        await until('listening', () => c.session.phase === 'listening');
        c.transport.autoPlay = false;
        c.transport.utter(c.settings.speakingTimeoutMs);
        await until('the reply\'s first audio', () => c.transport.of('play').length >= 3);
        c.transport.hush(100);
        c.transport.talk(800);
        await until('the reply cut short', () => c.transport.of('clear').length > 0);
        const plays = c.transport.of('play').length;
        const sock = el.sockets[socketsBefore]!;
        await until('the socket closed', () => sock.closedByClient);
        await new Promise((r) => setTimeout(r, 150));
        assert.equal(c.transport.of('play').length, plays, 'nothing queued after the barge-in');
        assert.ok(sock.audioChunks < samplesFor(spoken(sock), 8000) / 320, 'the double stopped before the sentence\'s end');
        assert.equal(el.sockets.length - socketsBefore, 1, 'the next sentence never went to the provider');
        await until('the interrupted reply recorded', async () => (await c.replies()).some((m) => m.status === 'interrupted'));
        await c.close();
      } finally {
        el.pacing.gapMs = 3;
      }
    });

    it('a refused key: the configured voice speaks the whole reply, and state.speech says which engine spoke and why it changed', async () => {
      llm.script.push({ text: 'Hello there. How can I help?' });
      const c = await call({ welcomeMessage: '', agentTtsEngine: 'elevenlabs', callerResponseTimeout: 60 }, { heard: ['hi'], key: 'xi-wrong-key-000000' });
      await until('listening', () => c.session.phase === 'listening');
      c.transport.utter(c.settings.speakingTimeoutMs);
      await until('the reply heard', async () => c.session.phase === 'listening' && (await c.replies()).length === 1);
      assert.deepEqual(c.offline.said.map((s) => s.text), ['Hello there.', 'How can I help?']);
      assert.ok(c.transport.of('play').every((p) => p.samples === 800), 'all of it in the configured voice');
      // The change is written to the call's state beside the call, not before the reply: wait for it.
      await until('the change recorded', async () => (await c.speech()).tts === 'short');
      const speech = await c.speech();
      assert.equal(speech.tts, 'short');
      assert.equal(speech.streamed, false);
      assert.equal(speech.ttsRequested, 'elevenlabs');
      assert.equal(speech.ttsChanges?.length, 1);
      assert.equal(speech.ttsChanges![0]!.from, 'elevenlabs');
      assert.equal(speech.ttsChanges![0]!.to, 'short');
      assert.match(speech.ttsChanges![0]!.reason, /refused/);
      assert.doesNotMatch(JSON.stringify(speech), /xi-wrong-key/, 'the key is not in the state');
      await c.close();
    });

    it('an agent naming a provider this process has no key for: the configured voice, the substitution said', async () => {
      const c = await call({ welcomeMessage: 'Hi.', agentTtsEngine: 'cartesia', callerResponseTimeout: 60 });
      await until('greeted', () => c.offline.said.length === 1);
      const speech = await c.speech();
      assert.equal(speech.tts, 'short');
      assert.match(speech.ttsSubstituted ?? '', /cartesia has no key on this process \(CALLPLANE_CARTESIA_API_KEY\)/);
      await c.close();
    });

    it('the greeting cache: the second call\'s greeting is not synthesized again (the double records one request)', async () => {
      const greetings = new GreetingCache();
      const welcome = `Welcome to the bakery ${engine}.`;
      const asked = () => el.requests.filter((r) => r.url.includes('/stream') && (r.json as { text?: string })?.text === welcome).length;
      const first = await call({ welcomeMessage: welcome, agentTtsEngine: 'elevenlabs', agentVoice: 'nPczCjzI2devNBz1zQrb', callerResponseTimeout: 60 }, { greetings });
      await until('the first greeting played', () => first.transport.of('play').length === 1);
      await first.close();
      const second = await call({ welcomeMessage: welcome, agentTtsEngine: 'elevenlabs', agentVoice: 'nPczCjzI2devNBz1zQrb', callerResponseTimeout: 60 }, { greetings });
      await until('the second greeting played', () => second.transport.of('play').length === 1);
      await second.close();
      assert.equal(asked(), 1);
      assert.deepEqual(greetings.stats, { hits: 1, misses: 1, evictions: 0 });
      assert.equal(first.transport.of('play')[0]!.samples, second.transport.of('play')[0]!.samples);
      assert.equal((await second.speech()).voice, 'nPczCjzI2devNBz1zQrb');
      assert.ok(el.requests.filter((r) => r.url.includes('/stream')).every((r) => r.url.includes('/v1/text-to-speech/nPczCjzI2devNBz1zQrb/')), 'the agent\'s own voice id');
    });

    it('the greeting cache keeps what an organization\'s own key made to that organization: the process\'s key is shared, two organizations\' own keys each synthesize', async () => {
      const greetings = new GreetingCache();
      const welcome = `Welcome to the cloned voice ${engine}.`;
      const asked = () => el.requests.filter((r) => r.url.includes('/stream') && (r.json as { text?: string })?.text === welcome).length;
      const elevenlabs = new ElevenLabsEngine({ apiKey: ELEVENLABS_TEST_KEY, baseUrl: el.baseUrl, maxRetries: 0, timeoutMs: 5000 });
      const settings = { ttsEngine: 'elevenlabs' as const, engineVoice: 'nPczCjzI2devNBz1zQrb', language: 'en-US', gender: 'female' as const };
      const speak = (keys: Parameters<typeof callSpeaker>[3]) => callSpeaker({ tts: new ShortTts(), voices: { elevenlabs }, greetings }, settings, Date.now, keys).audio(welcome, { line: true });
      const before = asked();
      await speak({ source: 'process' });
      await speak({ source: 'process' });
      assert.equal(asked() - before, 1, 'the process\'s key: one synthesis for every organization');
      await speak({ source: 'organization', owner: 'organization 1' });
      await speak({ source: 'organization', owner: 'organization 2' });
      await speak({ source: 'organization', owner: 'organization 1' });
      assert.equal(asked() - before, 3, 'each organization\'s own key made its own, and only its calls hear it again');
      assert.deepEqual(greetings.stats, { hits: 2, misses: 3, evictions: 0 });
    });

    it('a SIP call: the greeting synthesized before answering through the cache; a provider past the 3 s wait moves the call to the configured voice, said in state.speech', async () => {
      const greetings = new GreetingCache();
      const welcome = `Good morning from the garage ${engine}.`;
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const token = await h.tokenFor(o.agentId);
      assert.equal((await h.call('POST', '/api/v2/agent', { token, body: { welcomeMessage: welcome, agentTtsEngine: 'elevenlabs', callerResponseTimeout: 60 } })).status, 200);
      assert.equal((await h.call('POST', '/api/v2/agent/publish', { token })).status, 200);
      const db = h.database.db;
      const offline = new ShortTts();
      // An aborted one-shot request leaves a timer of timeoutMs behind it (the file stayed alive
      // timeoutMs − 3 s after its last test with 5000): kept short, so the file does not linger.
      const elevenlabs = new ElevenLabsEngine({ apiKey: ELEVENLABS_TEST_KEY, baseUrl: el.baseUrl, maxRetries: 0, timeoutMs: 4000 });
      const calls = voiceCalls({
        db, conversations: h.services.conversations, turns: { run: () => Promise.reject(new Error('no turn here')) }, stt: new ScriptedStt(), tts: offline,
        voices: { elevenlabs }, greetings, now: Date.now,
      });
      /** One inbound call to the agent: the greeting's samples and the call's state.speech. */
      const oneCall = async () => {
        const prepared = await calls.inbound({ orgId: o.id, callee: String(o.agentId), caller: '+14155550123' });
        assert.ok(prepared && 'start' in prepared);
        const transport = new FakeVoiceTransport();
        const callId = `c-${Math.random()}`;
        const { done } = prepared.start(transport, { callId });
        await until('greeted', () => transport.of('play').length === 1);
        transport.end('test over');
        await done;
        const row = (await conversationRepo.byCarrierRef(db, o.id, callId))!;
        return { samples: transport.of('play')[0]!.samples, speech: readCallState(row.state).speech! };
      };
      const asked = () => el.requests.filter((q) => (q.json as { text?: string })?.text === welcome).length;
      const first = await oneCall();
      const second = await oneCall();
      assert.equal(asked(), 1, 'the second call\'s greeting came from the cache');
      assert.equal(second.samples, first.samples);
      assert.equal(second.speech.tts, 'elevenlabs');
      // A provider whose first audio takes longer than the greeting's wait: the configured voice.
      greetings.set({ text: welcome, engine: 'x', voice: 'x', language: 'x', format: 'x' }, new Int16Array(greetings.maxBytes / 2));
      assert.equal(greetings.size, 1, 'the greeting evicted (the bound in bytes)');
      el.failures.firstAudioDelayMs = 3500;
      try {
        const slow = await oneCall();
        assert.equal(slow.samples, 800, 'the configured voice said the greeting');
        assert.deepEqual(offline.said.map((x) => x.text), [welcome]);
        assert.equal(slow.speech.tts, 'short');
        assert.match(slow.speech.ttsChanges?.[0]?.reason ?? '', /not synthesized within 3000 ms/);
      } finally {
        el.failures.firstAudioDelayMs = undefined;
      }
    });

    it('GET /api/v2/voices: the provider\'s list from the double (read once, then kept), the static ones, 400 naming engine', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const token = await h.tokenFor(o.agentId);
      const listed = () => el.requests.filter((q) => q.url.startsWith('/v1/voices')).length;
      const before = listed();
      const one = await h.call('GET', '/api/v2/voices?engine=elevenlabs', { token });
      assert.equal(one.status, 200);
      assert.deepEqual(one.body.engines, [{ engine: 'elevenlabs', available: true }]);
      assert.deepEqual(one.body.voices.map((v: { id: string }) => v.id), FAKE_ELEVENLABS_VOICES.map((v) => v.voice_id));
      assert.deepEqual(one.body.voices[0], {
        id: 'EXAVITQu4vr4xnSDxMaL', name: 'Sarah', engine: 'elevenlabs', language: 'en-US', gender: 'female', previewUrl: 'https://storage.example/sarah.mp3',
      });
      const all = await h.call('GET', '/api/v2/voices', { token });
      assert.equal(all.status, 200);
      assert.equal(listed() - before, 1, 'the provider asked once');
      assert.deepEqual(all.body.engines.map((e: { engine: string; available: boolean }) => [e.engine, e.available]),
        [['espeak', true], ['openai', false], ['elevenlabs', true], ['cartesia', false], ['deepgram', false]]);
      assert.ok(all.body.voices.some((v: { engine: string; id: string }) => v.engine === 'openai' && v.id === 'nova'));
      assert.ok(all.body.voices.some((v: { engine: string; id: string }) => v.engine === 'espeak' && v.id === 'f3'));
      const bad = await h.call('GET', '/api/v2/voices?engine=polly', { token });
      assert.equal(bad.status, 400);
      assert.match(bad.body.message, /engine/);
      assert.equal((await h.call('GET', '/api/v2/voices', { token: '' })).status, 401);
    });
  });
}
