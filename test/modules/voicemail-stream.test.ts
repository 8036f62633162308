// Voicemail on Twilio calls that stream (CALLPLANE_TWILIO_VOICE=stream), on both engines, offline
// (docs/voice.md, Voicemail): a call task placed on the fake Twilio server asks Twilio for NO
// answering-machine detection — the call's own audio decides, as on SIP. The fake Twilio stream
// client (test/helpers/fake-media-stream.ts) answers with generated audio (a machine's greeting
// spoken by espeak-ng and a beep, or a person's "Hello?") as μ-law paced at 20 ms; the voice
// session's screen decides: a machine is hung up on through the Calls API, or given the task's
// message after the beep; a person is greeted. The verdict is on the conversation (answeredBy)
// and on the task (result.outcome voicemail, result.answeredBy).
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { conversationRepo, messageRepo } from '../../src/modules/conversations/repository.ts';
import { PocketsphinxEngine } from '../../src/speech/pocketsphinx.ts';
import { FakeMediaStream } from '../helpers/fake-media-stream.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { startFakeTwilio, type FakeTwilio } from '../helpers/fake-twilio.ts';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { beep, espeak, join, silence } from '../helpers/voicemail-audio.ts';
import { freePort, waitFor } from '../helpers/wait.ts';

const FROM = '+15005550006';
const RUNTIME = { leaseMs: 3000, heartbeatMs: 50, rescueEveryMs: 0, carrierOptions: { twilio: { timeoutMs: 1500 }, simulated: { callSeconds: 0.05 } } };
const FINAL = ['finished', 'failed', 'canceled'];
const SAID = ['please call acme back', 'hello this is acme calling', 'goodbye'];

let targetSeq = 0;
const nextTarget = () => `+1415557${String(4000 + ++targetSeq)}`;
const unescapeXml = (s: string) => s.replace(/&quot;/g, '"').replace(/&apos;/g, '\'').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
const loud = (f: Int16Array) => Math.sqrt(f.reduce((s, x) => s + x * x, 0) / f.length) > 300;

for (const engine of ENGINES) {
  describe(`voicemail on streamed Twilio calls [${engine}]`, { skip: toolsSkip('espeak-ng', 'pocketsphinx') }, () => {
    let h: Harness;
    let llm: FakeLlm;
    let fake: FakeTwilio;
    const placed: string[] = [];
    const stt = new PocketsphinxEngine();

    before(async () => {
      await stt.check();
      llm = await startFakeLlm({ models: ['fake-model'] });
      fake = await startFakeTwilio();
      const port = await freePort();
      h = await startHarness(engine, {
        CALLPLANE_PUBLIC_URL: `http://127.0.0.1:${port}`, CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_TWILIO_VOICE: 'stream',
        CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0',
      }, { worker: true, runtime: RUNTIME, voiceGrammar: { kind: 'phrases', phrases: ['hello', 'hello there'] } });
      await h.app.listen({ port, host: '127.0.0.1' });
      await h.vad.ready();
    });
    after(async () => {
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
      assert.equal((await h.call('POST', '/api/v2/agent', { token: agentToken, body: { callerResponseTimeout: 60, speakingTimeout: 700, ...config } })).status, 200);
      assert.equal((await h.call('POST', '/api/v2/agent/publish', { token: agentToken })).status, 200);
      return o;
    }

    /** A call task placed on the fake, answered (its TwiML fetched) and streaming: the fake's stream client. */
    async function streamedCall(o: { id: number; token: string }, body: Record<string, unknown> = {}) {
      const created = await h.call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: nextTarget(), ...body } });
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
      const conversation = (await conversationRepo.byCarrierRef(h.database.db, o.id, sid))!;
      assert.ok(conversation);
      const client = await FakeMediaStream.connect({ url: unescapeXml(m[1]!), callSid: sid, accountSid: fake.accountSid, parameters: { token: unescapeXml(m[2]!) } });
      await waitFor('the session', async () => h.services.mediaStreams.transportOf(conversation.id));
      return { id, sid, conversationId: conversation.id, client };
    }

    const finished = (o: { token: string }, id: string) => waitFor('the task to end', async () => {
      const t = (await h.call('GET', `/api/v2/tasks/${id}`, { token: o.token })).body.task;
      return FINAL.includes(t.state) ? t : undefined;
    }, 30_000);
    const completedBy = (sid: string) => fake.requests.filter((r) => r.path.endsWith(`/Calls/${sid}.json`) && r.form.get('Status') === 'completed');
    /** What the caller heard from frame `from` on, recognised among what the agent could say. */
    async function recognise(client: FakeMediaStream, from: number): Promise<string> {
      const frames = client.heard.slice(from);
      const pcm = new Int16Array(frames.length * 160);
      frames.forEach((f, i) => pcm.set(f, i * 160));
      return (await stt.transcribe(pcm, 8000, { language: 'en-US', grammar: { kind: 'phrases', phrases: SAID } })).text;
    }

    it('hangup (the task\'s): Twilio is asked for no detection; a greeting past the 8 s maximum is hung up on while it still speaks, through the Calls API; outcome voicemail, answeredBy machine', async () => {
      const o = await org({ welcomeMessage: 'Hello, this is Acme calling.' });
      const { id, sid, conversationId, client } = await streamedCall(o, { voicemail: { action: 'hangup' } });
      try {
        const placedCall = fake.calls.get(sid)!;
        assert.equal(placedCall.machineDetection, undefined, 'the call\'s audio decides, not Twilio');
        assert.equal(placedCall.asyncAmd, undefined);
        assert.equal(placedCall.amdCallback, undefined);

        // A greeting with no beep is decided by its length only at the detector's hard maximum (8 s of
        // speech with no 1 s pause; a shorter one waits for what follows, as a person's long answer
        // does): this one goes on past it, and is hung up on there, while it still speaks.
        const greeting = await espeak('Thank you for calling Acme Dental. Our office is currently closed. Please leave a message and we will return your call on the next business day. If this is an emergency, please hang up and call the clinic on call. You can also book an appointment on our website at any time.', 'en-us+f3', { pitch: 65, speed: 175 });
        const sentAt = Date.now();
        void client.speak(join([silence(300), greeting]));
        await waitFor('the call ended through the Calls API', async () => completedBy(sid).length === 1, 30_000);
        const hungUpAfter = Date.now() - sentAt;
        assert.ok(hungUpAfter < 300 + (greeting.length / 8000) * 1000, `hung up ${hungUpAfter} ms after answer, before the greeting ended (${300 + (greeting.length / 8000) * 1000} ms)`);
        assert.equal(client.heard.filter(loud).length, 0, 'the agent said nothing to the machine');

        const task = await finished(o, id);
        assert.deepEqual([task.state, task.result.outcome, task.result.answeredBy], ['finished', 'voicemail', 'machine'], JSON.stringify(task));
        // The conversation's outcome is written as its session ends (the greeting may still be arriving when the task is).
        await waitFor('the session is over', async () => !h.services.mediaStreams.transportOf(conversationId));
        const c = (await conversationRepo.find(h.database.db, conversationId))!;
        assert.deepEqual([c.answered_by, c.outcome, c.voicemail_recording], ['machine', 'voicemail', null]);
        assert.ok(c.answered_by_at !== null && c.answered_by_at >= sentAt);
        assert.deepEqual(await messageRepo.ofConversation(h.database.db, conversationId), []);
      } finally {
        await client.close();
      }
    });

    it('leave-message (the agent\'s): a greeting and a beep → the message after the beep, then the call ends; voicemailRecording stays null (not recorded by callplane)', async () => {
      const o = await org({ welcomeMessage: 'Hello, this is Acme calling.', voicemailAction: 'leave-message', voicemailMessage: 'Please call Acme back.' });
      const { id, sid, conversationId, client } = await streamedCall(o);
      try {
        assert.equal(fake.calls.get(sid)!.machineDetection, undefined);
        const greeting = await espeak('Hi, you have reached Jordan. I can not take your call right now. Please leave a message after the tone.', 'en-gb', { pitch: 40, speed: 150 });
        const audio = join([silence(300), greeting, silence(300), beep([1000], 400)]);
        const from = client.heard.length;
        // When the last frame of the beep went out (the line sends 20 ms frames in real time).
        const beepSent = client.speak(audio).then(() => Date.now());
        // What the agent plays is played in real time: when its first loud frame was heard.
        const heardAt = await waitFor('the agent to speak', async () => client.heard.slice(from).some(loud) && Date.now(), 40_000, 10);
        const beepEnd = await beepSent;
        assert.ok(heardAt >= beepEnd - 100, `the message started ${beepEnd - heardAt} ms before the beep ended`);
        assert.ok(heardAt <= beepEnd + 3000, `and within 3 s of it (${heardAt - beepEnd} ms)`);
        await waitFor('the call ended through the Calls API', async () => completedBy(sid).length === 1, 40_000);
        const firstLoud = client.heard.slice(from).findIndex(loud);
        assert.equal(await recognise(client, from + Math.max(0, firstLoud - 10)), 'please call acme back');

        const task = await finished(o, id);
        assert.deepEqual([task.state, task.result.outcome, task.result.answeredBy], ['finished', 'voicemail', 'machine'], JSON.stringify(task));
        const c = (await conversationRepo.find(h.database.db, conversationId))!;
        assert.deepEqual([c.answered_by, c.outcome, c.voicemail_recording], ['machine', 'voicemail', null]);
        assert.deepEqual((await messageRepo.ofConversation(h.database.db, conversationId)).map((m) => `${m.direction}:${m.text}`), ['outbound:Please call Acme back.']);
      } finally {
        await client.close();
      }
    });

    it('a person says "Hello?" (the agent\'s hangup): decided human, greeted, the call goes on; the task\'s outcome is completed', async () => {
      const o = await org({ welcomeMessage: 'Hello, this is Acme calling.', voicemailAction: 'hangup' });
      const { id, sid, conversationId, client } = await streamedCall(o);
      try {
        assert.equal(fake.calls.get(sid)!.machineDetection, undefined);
        const hello = await espeak('Hello?', 'en-us');
        const from = client.heard.length;
        const marks = client.echoed.length;
        void client.speak(join([silence(200), hello]));
        // The greeting plays, and its mark comes back once it has.
        await waitFor('the agent to greet', async () => client.heard.slice(from).some(loud) && client.echoed.length > marks, 20_000);
        const firstLoud = client.heard.slice(from).findIndex(loud);
        assert.equal(await recognise(client, from + Math.max(0, firstLoud - 10)), 'hello this is acme calling');
        const c = (await conversationRepo.find(h.database.db, conversationId))!;
        assert.equal(c.answered_by, 'human');
        assert.equal(c.ended_at, null, 'the call goes on');
        assert.equal(completedBy(sid).length, 0, 'nobody ended the call');

        // The person hangs up: Twilio stops the stream and reports the call completed.
        client.stop();
        await waitFor('the conversation ended', async () => (await conversationRepo.find(h.database.db, conversationId))?.ended_at != null);
        assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
        const task = await finished(o, id);
        assert.deepEqual([task.state, task.result.outcome, task.result.answeredBy], ['finished', 'completed', 'human'], JSON.stringify(task));
        assert.equal((await conversationRepo.find(h.database.db, conversationId))!.outcome, 'hung_up');
      } finally {
        await client.close();
      }
    });
  });
}
