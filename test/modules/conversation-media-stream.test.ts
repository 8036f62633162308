// Voice over Twilio Media Streams (CALLPLANE_TWILIO_VOICE=stream), on both engines, offline: a call
// task placed on the fake Twilio server is answered with <Connect><Stream> TwiML; the fake Twilio
// stream client (test/helpers/fake-media-stream.ts) connects to our WebSocket route with the
// token of that TwiML, speaks espeak-ng speech as μ-law paced at 20 ms, plays what it is sent in
// real time and echoes marks. The agent's voice session hears it (VAD, pocketsphinx), the fake
// model answers, and the reply the caller heard is recognised with pocketsphinx and a grammar.
// Also: refused streams touch nothing, barge-in clears, keys reach the model, transfers and
// hang-ups go through the fake Twilio Calls API.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { conversationRepo, messageRepo } from '../../src/modules/conversations/repository.ts';
import { streamToken } from '../../src/modules/twilio/media-stream-token.ts';
import { EspeakEngine } from '../../src/speech/espeak.ts';
import { PocketsphinxEngine } from '../../src/speech/pocketsphinx.ts';
import { resample } from '../../src/speech/resample.ts';
import { FakeMediaStream } from '../helpers/fake-media-stream.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { startFakeTwilio, type FakeTwilio } from '../helpers/fake-twilio.ts';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { freePort, waitFor } from '../helpers/wait.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

const FROM = '+15005550006';
const RUNTIME = { leaseMs: 3000, heartbeatMs: 50, rescueEveryMs: 0, carrierOptions: { twilio: { timeoutMs: 1500 }, simulated: { callSeconds: 0.05 } } };
const STREAM_PATH = '/api/v2/providers/twilio/voice/stream';
const PHRASES = ['what are your opening hours', 'goodbye', 'hello there'];

let targetSeq = 0;
const nextTarget = () => `+1415555${String(5000 + ++targetSeq)}`;
const unescapeXml = (s: string) => s.replace(/&quot;/g, '"').replace(/&apos;/g, '\'').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
const loud = (f: Int16Array) => Math.sqrt(f.reduce((s, x) => s + x * x, 0) / f.length) > 300;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const engine of ENGINES) {
  describe(`voice over Twilio Media Streams [${engine}]`, { skip: toolsSkip('espeak-ng', 'pocketsphinx') }, () => {
    let h: Harness;
    let llm: FakeLlm;
    let fake: FakeTwilio;
    let publicUrl: string;
    const placed: string[] = [];
    const tts = new EspeakEngine();
    const stt = new PocketsphinxEngine();

    before(async () => {
      await tts.check();
      await stt.check();
      llm = await startFakeLlm({ models: ['fake-model'] });
      fake = await startFakeTwilio();
      const port = await freePort();
      publicUrl = `http://127.0.0.1:${port}`;
      h = await startHarness(engine, {
        CALLPLANE_PUBLIC_URL: publicUrl, CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_TWILIO_VOICE: 'stream',
        CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0',
      }, { worker: true, runtime: RUNTIME, voiceGrammar: { kind: 'phrases', phrases: PHRASES } });
      await h.app.listen({ port, host: '127.0.0.1' });
      await h.vad.ready(); // the calls' state names Silero: load it before the first call, not during
    });
    after(async () => {
      // Twilio reports every call's end; the tasks end with it.
      for (const sid of placed) {
        if (!['completed', 'busy', 'no-answer', 'failed', 'canceled'].includes(fake.calls.get(sid)?.status ?? '')) await fake.progressCall(sid, 'completed');
      }
      await h?.close();
      await fake?.close();
      await llm?.close();
    });

    async function org(config: Record<string, unknown>) {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const res = await h.call('POST', '/api/v2/numberingProvider', {
        token: r.token, query: { targetOrganizationId: o.id },
        body: { providerId: 'twilio', config: { accountSid: fake.accountSid, authToken: fake.authToken, phoneNumber: FROM, apiBaseUrl: fake.url } },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const agentToken = await h.tokenFor(o.agentId);
      assert.equal((await h.call('POST', '/api/v2/agent', { token: agentToken, body: { callerResponseTimeout: 60, ...config } })).status, 200);
      assert.equal((await h.call('POST', '/api/v2/agent/publish', { token: agentToken })).status, 200);
      return o;
    }

    /** A call task placed on the fake and answered: its TwiML, the stream URL and token in it, its conversation. */
    async function answeredCall(o: { id: number; token: string }) {
      const created = await h.call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: nextTarget() } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const id = created.body.task.id as string;
      const sid = await waitFor(`call ${id} placed`, async () => {
        const t = (await h.call('GET', `/api/v2/tasks/${id}`, { token: o.token })).body.task;
        return t.state === 'running' && typeof t.providerRef === 'string' && t.providerRef as string;
      });
      placed.push(sid);
      const fetched = await fake.fetchTwiml(sid);
      assert.equal(fetched.status, 200, fetched.body);
      const m = /<Connect><Stream url="([^"]+)"><Parameter name="token" value="([^"]+)"\/><\/Stream><\/Connect><\/Response>$/.exec(fetched.body);
      assert.ok(m, `<Connect><Stream> with a token: ${fetched.body}`);
      assert.ok(!fetched.body.includes('<Gather'), 'no <Gather> when streaming');
      const conversation = await conversationRepo.byCarrierRef(h.database.db, o.id, sid);
      assert.ok(conversation, 'the call\'s conversation opened on answer');
      return { id, sid, twiml: fetched.body, url: unescapeXml(m[1]!), token: unescapeXml(m[2]!), conversation };
    }

    const transcript = async (conversationId: string) =>
      (await messageRepo.ofConversation(h.database.db, conversationId)).map((m) => `${m.direction}:${m.text}`);
    const completedBy = (sid: string) => fake.requests.filter((r) => r.path.endsWith(`/Calls/${sid}.json`) && r.form.get('Status') === 'completed');

    it('hears the caller, answers through the model, speaks the answer the caller recognises, and ends when the caller hangs up', async () => {
      const o = await org({ welcomeMessage: 'Hello there.', agentInstructions: 'You are the front desk of Acme Dental.', speakingTimeout: 700, postAnswerDtmf: '1,2#' });
      const call = await answeredCall(o);
      assert.equal(call.url, `ws://127.0.0.1:${new URL(publicUrl).port}${STREAM_PATH}`);
      assert.match(call.twiml, /<Response><Play digits="1w2#"\/><Connect>/, 'the digits to press on answer come before the stream');
      llm.script.push({ text: 'We open at nine.' });
      const client = await FakeMediaStream.connect({ url: call.url, callSid: call.sid, accountSid: fake.accountSid, parameters: { token: call.token } });
      try {
        // The welcome plays, and its mark comes back.
        await waitFor('the welcome', async () => client.heard.filter(loud).length >= 20 && client.echoed.length >= 1, 15_000);
        await sleep(300);
        const welcomeFrames = client.heard.length;

        const asked = llm.requests.length;
        const said = await tts.synthesize('what are your opening hours', { language: 'en-US' });
        await client.speak(resample(said.pcm16, said.sampleRate, 8000));
        await waitFor('the model asked', async () => llm.requests.length > asked, 20_000);
        const request = llm.requests.at(-1)!.body.messages;
        assert.match(request[0]!.content!, /front desk of Acme Dental/);
        assert.deepEqual(request.slice(1).map((m) => `${m.role}:${m.content}`), ['assistant:Hello there.', 'user:what are your opening hours']);

        // The reply as the caller heard it (played in real time), recognised.
        await waitFor('the reply played', async () => {
          const reply = client.heard.slice(welcomeFrames);
          return reply.filter(loud).length > 20 && client.echoed.length >= 2;
        }, 20_000);
        const reply = client.heard.slice(welcomeFrames);
        const pcm = new Int16Array(reply.length * 160);
        reply.forEach((f, i) => pcm.set(f, i * 160));
        const recognised = await stt.transcribe(pcm, 8000, { language: 'en-US', grammar: { kind: 'phrases', phrases: ['we open at nine', 'we close at five', 'hello there'] } });
        assert.equal(recognised.text, 'we open at nine');
        await waitFor('the transcript', async () => (await transcript(call.conversation.id)).length === 3);
        assert.deepEqual(await transcript(call.conversation.id), ['outbound:Hello there.', 'inbound:what are your opening hours', 'outbound:We open at nine.']);

        // The caller hangs up: Twilio stops the stream.
        client.stop();
        const ended = await waitFor('ended', async () => { const c = await conversationRepo.find(h.database.db, call.conversation.id); return c?.ended_at != null && c; });
        assert.equal(ended.outcome, 'hung_up');
        assert.deepEqual(JSON.parse(ended.state), {
          transport: 'twilio-media-stream',
          speech: {
            stt: 'pocketsphinx', sttRequested: 'deepgram', sttSubstituted: 'no deepgram key on this process nor of the organization: pocketsphinx hears the call',
            tts: 'espeak-ng', offline: true, vad: 'silero', voice: 'default female en-US', streamed: false,
          },
        });
        await waitFor('the session is over', async () => h.services.mediaStreams.running === 0);
      } finally {
        await client.close();
      }
    });

    it('a stream with a missing, forged, other call\'s or unneeded token is closed (1008) and touches no conversation', async () => {
      const o = await org({ welcomeMessage: 'Hello there.' });
      const call = await answeredCall(o);
      const other = await answeredCall(o);
      const before = await transcript(call.conversation.id);
      const tries: Array<Record<string, string>> = [
        {},
        { token: 'nonsense' },
        { token: `${call.token.slice(0, -4)}AAAA` },
        // Another call's token on this call's stream.
        { token: other.token },
        // A resume token while no redirected call runs.
        { token: streamToken(h.box, 'resume', call.conversation.id, call.sid, Date.now()) },
      ];
      for (const parameters of tries) {
        const client = await FakeMediaStream.connect({ url: call.url, callSid: call.sid, parameters });
        const closed = await client.whenClosed;
        assert.equal(closed.code, 1008, JSON.stringify(parameters));
        assert.equal(client.heard.length, 0);
      }
      // An expired token.
      const old = streamToken(h.box, 'start', call.conversation.id, call.sid, Date.now() - 3600_000);
      const expired = await FakeMediaStream.connect({ url: call.url, callSid: call.sid, parameters: { token: old } });
      assert.equal((await expired.whenClosed).code, 1008);
      // Garbage instead of a start; a message over the size bound (closed by the socket itself: 1009).
      const garbage = await FakeMediaStream.connect({ url: call.url, callSid: call.sid, start: false });
      garbage.send('{"event":"start","start":');
      assert.equal((await garbage.whenClosed).code, 1008);
      const big = await FakeMediaStream.connect({ url: call.url, callSid: call.sid, start: false });
      big.send(JSON.stringify({ event: 'start', start: { streamSid: 'MZ1', callSid: call.sid, customParameters: { token: 'x'.repeat(100_000) } } }));
      assert.equal((await big.whenClosed).code, 1009);
      // No start at all: closed after a few seconds.
      const silent = await FakeMediaStream.connect({ url: call.url, callSid: call.sid, start: false });
      assert.equal((await silent.whenClosed).code, 1008);
      assert.equal(h.services.mediaStreams.running, 0);
      assert.deepEqual(await transcript(call.conversation.id), before);
      const c = await conversationRepo.find(h.database.db, call.conversation.id);
      assert.equal(c?.ended_at, null);
      // The right token still opens the call, once.
      const good = await FakeMediaStream.connect({ url: call.url, callSid: call.sid, parameters: { token: call.token } });
      await waitFor('the welcome', async () => client0Loud(good));
      const twice = await FakeMediaStream.connect({ url: call.url, callSid: call.sid, parameters: { token: call.token } });
      assert.equal((await twice.whenClosed).code, 1008, 'a second stream of a running call is refused');
      good.stop();
      await waitFor('ended', async () => (await conversationRepo.find(h.database.db, call.conversation.id))?.ended_at != null);
    });
    const client0Loud = (c: FakeMediaStream) => c.heard.filter(loud).length >= 10;

    it('barge-in: the caller talking over the reply makes us send `clear`; only what was heard is kept, and the agent\'s hang-up completes the call', async () => {
      const o = await org({ welcomeMessage: '', interruptionWordCount: 1, interruptionMinimumSpeakingTime: 0, speakingTimeout: 700, actions: ['hangup'] });
      const call = await answeredCall(o);
      const long = 'We open at nine. ' + Array.from({ length: 8 }, (_, i) => `On day ${i + 1} we also open at nine in the morning and close at five.`).join(' ');
      llm.script.push({ text: long }, { text: 'Goodbye!', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'bye' } }] });
      const client = await FakeMediaStream.connect({ url: call.url, callSid: call.sid, parameters: { token: call.token } });
      try {
        const before = llm.requests.length;
        const ask = await tts.synthesize('what are your opening hours', { language: 'en-US' });
        await client.speak(resample(ask.pcm16, ask.sampleRate, 8000));
        await waitFor('the model asked', async () => llm.requests.length > before, 20_000);
        await waitFor('the reply playing', async () => client.heard.filter(loud).length >= 40, 20_000);
        assert.equal(client.clears, 0);
        const bye = await tts.synthesize('goodbye', { language: 'en-US' });
        await client.speak(resample(bye.pcm16, bye.sampleRate, 8000));
        await waitFor('clear sent', async () => client.clears >= 1, 10_000);
        const ended = await waitFor('ended', async () => { const c = await conversationRepo.find(h.database.db, call.conversation.id); return c?.ended_at != null && c; }, 30_000);
        assert.equal(ended.outcome, 'ended_by_agent');
        await waitFor('the call completed through the Calls API', async () => completedBy(call.sid).length === 1);
        const messages = await messageRepo.ofConversation(h.database.db, call.conversation.id);
        const cut = messages.find((m) => m.direction === 'outbound' && m.status === 'interrupted');
        assert.ok(cut, `an interrupted reply in ${JSON.stringify(messages.map((m) => [m.direction, m.status, m.text.slice(0, 30)]))}`);
        assert.ok(cut.text.length < long.length / 2, `only what was heard is kept: ${cut.text}`);
        assert.equal(llm.requests.at(-1)!.body.messages.at(-1)!.content, 'goodbye');
      } finally {
        await client.close();
      }
    });

    it('sending digits redirects the call to <Play digits> and a new stream, which re-attaches to the running session', async () => {
      const o = await org({ welcomeMessage: '', actions: ['hangup'] });
      const call = await answeredCall(o);
      const first = await FakeMediaStream.connect({ url: call.url, callSid: call.sid, parameters: { token: call.token } });
      const transport = await waitFor('the session', async () => h.services.mediaStreams.transportOf(call.conversation.id));
      await transport.sendDigits('1,2');
      const redirect = fake.redirects.find((r) => r.sid === call.sid);
      assert.ok(redirect, 'the call was redirected');
      const m = /^<\?xml version="1.0" encoding="UTF-8"\?><Response><Play digits="1w2"\/><Connect><Stream url="([^"]+)"><Parameter name="token" value="(v1\.resume\.[^"]+)"\/><\/Stream><\/Connect><\/Response>$/.exec(redirect.twiml);
      assert.ok(m, redirect.twiml);
      // Twilio stops the old stream and opens the new one.
      first.stop();
      await sleep(100);
      assert.equal((await conversationRepo.find(h.database.db, call.conversation.id))?.ended_at, null, 'the redirect did not end the call');
      const second = await FakeMediaStream.connect({ url: unescapeXml(m[1]!), callSid: call.sid, parameters: { token: unescapeXml(m[2]!) } });
      try {
        await waitFor('adopted', async () => !transport.awaitingStream);
        llm.script.push({ text: 'You pressed five. Goodbye.', toolCalls: [{ name: 'end_conversation', arguments: {} }] });
        second.pressKey('5');
        const ended = await waitFor('ended', async () => { const c = await conversationRepo.find(h.database.db, call.conversation.id); return c?.ended_at != null && c; }, 20_000);
        assert.equal(ended.outcome, 'ended_by_agent');
        assert.equal(llm.requests.at(-1)!.body.messages.at(-1)!.content, '[DTMF 5]');
        assert.ok(second.heard.filter(loud).length >= 20, 'the reply was played on the new stream');
        assert.equal(first.heard.filter(loud).length, 0);
        // The resume token does not open the call again.
        const again = await FakeMediaStream.connect({ url: unescapeXml(m[1]!), callSid: call.sid, parameters: { token: unescapeXml(m[2]!) } });
        assert.equal((await again.whenClosed).code, 1008);
      } finally {
        await second.close();
      }
    });

    it('a key the caller presses reaches the model as [DTMF 5]; transfer_call redirects the call to <Dial> through the Calls API', async () => {
      const o = await org({
        welcomeMessage: '', actions: ['transfer'],
        transferDestinations: [{ name: 'front desk', destination: '+14155550199' }],
      });
      const call = await answeredCall(o);
      llm.script.push({ text: 'Connecting you to the front desk now.', toolCalls: [{ name: 'transfer_call', arguments: { destination: 'front desk' } }] });
      const client = await FakeMediaStream.connect({ url: call.url, callSid: call.sid, parameters: { token: call.token } });
      try {
        await sleep(200);
        const before = llm.requests.length;
        client.pressKey('5');
        await waitFor('the model asked', async () => llm.requests.length > before);
        assert.equal(llm.requests.at(-1)!.body.messages.at(-1)!.content, '[DTMF 5]');
        const redirect = await waitFor('the transfer', async () => fake.redirects.find((r) => r.sid === call.sid), 20_000);
        assert.equal(redirect.twiml, '<?xml version="1.0" encoding="UTF-8"?><Response><Dial>+14155550199</Dial></Response>');
        const ended = await waitFor('ended', async () => { const c = await conversationRepo.find(h.database.db, call.conversation.id); return c?.ended_at != null && c; });
        assert.equal(ended.outcome, 'transferred');
        assert.ok(client.heard.filter(loud).length >= 20, 'the reply was played before the transfer');
        assert.equal(completedBy(call.sid).length, 0, 'a transfer does not hang up');
      } finally {
        await client.close();
      }
    });
  });
}
