// Every spoken turn's latency, on both engines: a Twilio Media Streams call (the fake Twilio and its
// stream client, as test/modules/conversation-media-stream.test.ts) whose caller speaks espeak-ng
// speech; the session hears it with the Silero VAD and pocketsphinx, the fake model answers. The
// reply's line on GET /api/v2/conversation/{roomId}/{uuid} carries its turn's latency (ordered,
// non-negative, the parts adding up to the total, the endpoint about the agent's speakingTimeout),
// /metrics has the histograms by path and engine, and GET /api/v2/agent/{agentId}/latency
// summarises the agent's turns for its own organization and nobody else's. The budget's log line
// is checked on the recorder itself.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { accountRepo } from '../../src/modules/accounts/repository.ts';
import { turnLatencies, turnSteps } from '../../src/modules/voice/latency.ts';
import { conversationRepo, messageRepo } from '../../src/modules/conversations/repository.ts';
import { EspeakEngine } from '../../src/speech/espeak.ts';
import { resample } from '../../src/speech/resample.ts';
import { FakeMediaStream } from '../helpers/fake-media-stream.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { startFakeTwilio, type FakeTwilio } from '../helpers/fake-twilio.ts';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { freePort, waitFor } from '../helpers/wait.ts';

const FROM = '+15005550006';
const RUNTIME = { leaseMs: 3000, heartbeatMs: 50, rescueEveryMs: 0, carrierOptions: { twilio: { timeoutMs: 1500 }, simulated: { callSeconds: 0.05 } } };
const PHRASES = ['what are your opening hours', 'goodbye', 'hello there'];
const SPEAKING_TIMEOUT = 700;
const unescapeXml = (s: string) => s.replace(/&quot;/g, '"').replace(/&apos;/g, '\'').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
const loud = (f: Int16Array) => Math.sqrt(f.reduce((s, x) => s + x * x, 0) / f.length) > 300;

for (const engine of ENGINES) {
  describe(`every spoken turn's latency [${engine}]`, { skip: toolsSkip('espeak-ng', 'pocketsphinx') }, () => {
    let h: Harness;
    let llm: FakeLlm;
    let fake: FakeTwilio;
    const placed: string[] = [];
    const tts = new EspeakEngine();
    let n = 0;

    before(async () => {
      llm = await startFakeLlm({ models: ['fake-model'] });
      fake = await startFakeTwilio();
      const port = await freePort();
      h = await startHarness(engine, {
        CALLPLANE_PUBLIC_URL: `http://127.0.0.1:${port}`, CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_TWILIO_VOICE: 'stream',
        CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0',
      }, { worker: true, runtime: RUNTIME, voiceGrammar: { kind: 'phrases', phrases: PHRASES } });
      await h.app.listen({ port, host: '127.0.0.1' });
      await h.vad.ready(); // the calls' state names Silero: load it before the first call, not during
    });
    after(async () => {
      for (const sid of placed) {
        if (!['completed', 'busy', 'no-answer', 'failed', 'canceled'].includes(fake.calls.get(sid)?.status ?? '')) await fake.progressCall(sid, 'completed');
      }
      await h?.close();
      await fake?.close();
      await llm?.close();
    });

    it('stores each turn\'s steps with its reply, shows them on the transcript, observes them at /metrics, and summarises them per agent', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      assert.equal((await h.call('POST', '/api/v2/numberingProvider', {
        token: r.token, query: { targetOrganizationId: o.id },
        body: { providerId: 'twilio', config: { accountSid: fake.accountSid, authToken: fake.authToken, phoneNumber: FROM, apiBaseUrl: fake.url } },
      })).status, 200);
      const agentToken = await h.tokenFor(o.agentId);
      assert.equal((await h.call('POST', '/api/v2/agent', { token: agentToken, body: { welcomeMessage: 'Hello there.', callerResponseTimeout: 60, speakingTimeout: SPEAKING_TIMEOUT } })).status, 200);
      assert.equal((await h.call('POST', '/api/v2/agent/publish', { token: agentToken })).status, 200);

      const created = await h.call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: `+1415555${String(7000 + ++n)}` } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const sid = await waitFor('call placed', async () => {
        const t = (await h.call('GET', `/api/v2/tasks/${created.body.task.id as string}`, { token: o.token })).body.task;
        return t.state === 'running' && typeof t.providerRef === 'string' && t.providerRef as string;
      });
      placed.push(sid);
      const twiml = (await fake.fetchTwiml(sid)).body;
      const m = /<Stream url="([^"]+)"><Parameter name="token" value="([^"]+)"\/>/.exec(twiml);
      assert.ok(m, twiml);
      const conversation = (await conversationRepo.byCarrierRef(h.database.db, o.id, sid))!;
      llm.script.push({ text: 'We open at nine. Is there anything else?' });
      const client = await FakeMediaStream.connect({ url: unescapeXml(m[1]!), callSid: sid, accountSid: fake.accountSid, parameters: { token: unescapeXml(m[2]!) } });
      try {
        await waitFor('the welcome', async () => client.heard.filter(loud).length >= 20 && client.echoed.length >= 1, 15_000);
        const said = await tts.synthesize('what are your opening hours', { language: 'en-US' });
        await client.speak(resample(said.pcm16, said.sampleRate, 8000));
        await waitFor('the reply recorded', async () => (await messageRepo.ofConversation(h.database.db, conversation.id)).length === 3, 20_000);
        const roomId = `${o.agentId}:${conversation.room_id}`;
        const lines = await waitFor('the latency recorded', async () => {
          const res = await h.call('GET', `/api/v2/conversation/${roomId}/${conversation.id}`, { token: o.token });
          assert.equal(res.status, 200, JSON.stringify(res.body));
          const ls = res.body[0].conversation as Array<Record<string, any>>;
          return ls.some((l) => l.latency) && ls;
        }, 15_000);
        assert.deepEqual(lines.map((l) => [l.direction, l.message, l.latency !== undefined]), [
          ['outbound', 'Hello there.', false], ['inbound', 'what are your opening hours', false], ['outbound', 'We open at nine. Is there anything else?', true],
        ]);
        const l = lines[2]!.latency;
        assert.equal(l.path, 'stream');
        assert.deepEqual(l.engines, { stt: 'pocketsphinx', llm: l.engines.llm, tts: 'espeak-ng' });
        assert.equal(typeof l.engines.llm, 'string');
        for (const k of ['endpointMs', 'sttMs', 'llmFirstTokenMs', 'ttsFirstAudioMs', 'totalMs']) {
          assert.ok(Number.isInteger(l[k]) && l[k] >= 0, `${k} = ${l[k]}`);
        }
        assert.equal(l.totalMs, l.endpointMs + l.sttMs + l.llmFirstTokenMs + l.ttsFirstAudioMs, 'the steps follow one another');
        // The end of the turn is the agent's speakingTimeout after the speech, plus the detector's own latency.
        assert.ok(l.endpointMs >= SPEAKING_TIMEOUT - 250 && l.endpointMs <= SPEAKING_TIMEOUT + 1500, `endpoint ${l.endpointMs} ms`);
        assert.ok(l.sttMs > 0, 'pocketsphinx takes time');
        assert.ok(l.totalMs < 20_000);
        const state = JSON.parse((await conversationRepo.find(h.database.db, conversation.id))!.state);
        assert.equal(state.speech.vad, 'silero');

        // Prometheus: the turn in each histogram, by path and engine.
        const metrics = await h.call('GET', '/metrics', { token: null });
        assert.equal(metrics.status, 200);
        const text = String(metrics.body);
        assert.match(text, /callplane_voice_turn_seconds_count\{path="stream",stt_engine="pocketsphinx",llm_engine="[^"]+",tts_engine="espeak-ng"\} 1\b/);
        assert.match(text, /callplane_voice_endpoint_seconds_count\{path="stream",engine="(silero|energy)"\} 1\b/);
        assert.match(text, /callplane_voice_stt_seconds_count\{path="stream",engine="pocketsphinx"\} 1\b/);
        assert.match(text, /callplane_voice_llm_first_token_seconds_count\{path="stream",engine="[^"]+"\} 1\b/);
        assert.match(text, /callplane_voice_tts_first_audio_seconds_count\{path="stream",engine="espeak-ng"\} 1\b/);

        // The per-agent summary: the agent's own token, its organization's; nobody else's.
        const url = `/api/v2/agent/camp${o.agentId}/latency`;
        for (const token of [agentToken, o.token, r.token]) {
          const s = await h.call('GET', url, { token, query: { windowHours: 1 } });
          assert.equal(s.status, 200, JSON.stringify(s.body));
          assert.equal(s.body.agentId, `camp${o.agentId}`);
          assert.equal(s.body.windowHours, 1);
          assert.equal(s.body.turns, 1);
          assert.deepEqual(s.body.steps.totalMs, { count: 1, p50: l.totalMs, p95: l.totalMs });
          assert.deepEqual(s.body.steps.sttMs, { count: 1, p50: l.sttMs, p95: l.sttMs });
          assert.deepEqual(Object.keys(s.body.paths), ['stream']);
          assert.equal(s.body.paths.stream.turns, 1);
        }
        const other = await h.organization(r.id);
        const otherAgent = await h.agent(o.id);
        for (const token of [other.token, await h.tokenFor(other.agentId), otherAgent.token]) {
          const s = await h.call('GET', url, { token });
          assert.equal(s.status, 404, JSON.stringify(s.body));
          assert.equal(s.body.success, false);
        }
        const none = await h.call('GET', `/api/v2/agent/camp${other.agentId}/latency`, { token: other.token });
        assert.equal(none.status, 200);
        assert.equal(none.body.turns, 0);
        assert.deepEqual(none.body.steps.totalMs, { count: 0, p50: null, p95: null });
        for (const windowHours of ['0', '100000', 'abc']) {
          const bad = await h.call('GET', url, { token: o.token, query: { windowHours } });
          assert.equal(bad.status, 400);
          assert.match(bad.body.message, /windowHours/);
        }
      } finally {
        client.stop();
        await client.close();
      }
    });

    it('a turn slower than the budget is logged with its breakdown; a gathered turn has no audio of ours to time', async () => {
      const warned: Array<{ obj: Record<string, unknown>; msg: string }> = [];
      const recorder = turnLatencies({ db: h.database.db, budgetMs: 1500, now: Date.now, log: { warn: (obj, msg) => warned.push({ obj: obj as Record<string, unknown>, msg }) } });
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const agent = (await accountRepo.findById(h.database.db, o.agentId))!;
      const opened = await h.database.db.transaction().execute((tx) => h.services.conversations.open(tx, {
        agent, channel: 'sip', direction: 'inbound', counterpart: '+14155550100', counterpartKind: 'phone', fresh: true,
      }, Date.now()));
      const reply = await h.database.db.transaction().execute(async (tx) => {
        const { recordAgentLine } = await import('../../src/modules/conversations/service.ts');
        return recordAgentLine(tx, opened.conversation, { text: 'A slow answer.', status: 'success' }, Date.now());
      });
      const labels = { path: 'sip' as const, vad: 'silero', stt: 'pocketsphinx', llm: 'openai', tts: 'espeak-ng' };
      const fast = await recorder.record(opened.conversation, reply, labels, { speechEndedAt: 0, turnEndedAt: 1200, transcriptAt: 1900, firstTokenAt: 2400, firstAudioAt: 2600 });
      assert.deepEqual(fast, { endpointMs: 1200, sttMs: 700, llmFirstTokenMs: 500, ttsFirstAudioMs: 200, totalMs: 2600 });
      assert.equal(warned.length, 0, 'within the budget once the turn had ended (the speakingTimeout is the agent\'s own): nothing logged');
      const slow = await recorder.record(opened.conversation, reply, labels, { speechEndedAt: 0, turnEndedAt: 1200, transcriptAt: 2100, firstTokenAt: 3500, firstAudioAt: 3600 });
      assert.equal(slow.totalMs, 3600);
      assert.equal(warned.length, 1);
      assert.match(warned[0]!.msg, /latency budget/);
      assert.deepEqual({ ...warned[0]!.obj, conversation: undefined, message: undefined }, {
        conversation: undefined, message: undefined, path: 'sip', budgetMs: 1500, responseMs: 2400,
        endpointMs: 1200, sttMs: 900, llmFirstTokenMs: 1400, ttsFirstAudioMs: 100, totalMs: 3600,
        engines: { vad: 'silero', stt: 'pocketsphinx', llm: 'openai', tts: 'espeak-ng' },
      });
      // Gather: Twilio listened and will speak; the model's first token and our answer are ours.
      assert.deepEqual(turnSteps('gather', { transcriptAt: 100, firstTokenAt: 400, answeredAt: 650 }), {
        endpointMs: null, sttMs: null, llmFirstTokenMs: 300, ttsFirstAudioMs: null, totalMs: 550,
      });
      // A reply interrupted before any audio went out: no first audio, no total.
      assert.deepEqual(turnSteps('sip', { speechEndedAt: 0, turnEndedAt: 700, transcriptAt: 900, firstTokenAt: 1000 }), {
        endpointMs: 700, sttMs: 200, llmFirstTokenMs: 100, ttsFirstAudioMs: null, totalMs: null,
      });
    });
  });
}
