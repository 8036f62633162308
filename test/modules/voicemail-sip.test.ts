// Voicemail on SIP calls, end to end and offline (docs/voice.md, Voicemail): a call task's callee
// (sipp for the signalling, the test's own RTP end for the audio) answers with generated audio — a
// machine's greeting spoken by espeak-ng followed by a 1000 Hz beep, or a person saying "Hello?" or a
// long front-desk sentence —
// and the agent's side (the SIP worker, the voice session and its voicemail screen) decides from
// the call's own frames: after the beep the task's message is left, recorded and linked, and the
// task's outcome is voicemail; a person is greeted and the conversation goes on.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { PortPool } from '../../src/media/port-pool.ts';
import { conversationRepo, messageRepo } from '../../src/modules/conversations/repository.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { startSipp, waitFor } from '../helpers/sip-peers.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { loud, publishAgent, stt, tts, voicePeer } from '../helpers/voice-peer.ts';
import { beep, espeak, join, silence } from '../helpers/voicemail-audio.ts';

const HOST = '127.0.0.1';
const FAR_END = '127.0.0.5';
const FINAL = ['finished', 'failed', 'canceled'];

let llm: FakeLlm;
const env: Record<string, string> = { CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_CALL_MAX_SECONDS: '60' };
const portMin = 32_000 + 2 * crypto.randomInt(0, 1_000);
const testPorts = new PortPool({ portMin, portMax: portMin + 2 * 9 });

describe('voicemail on SIP calls', { skip: toolsSkip('sipp', 'espeak-ng', 'pocketsphinx') }, () => {
  before(async () => {
    await tts.check();
    await stt.check();
    llm = await startFakeLlm();
    env.CALLPLANE_LLM_BASE_URL = llm.baseUrl;
  });
  after(async () => { await llm.close(); });

  forEachEngine('SIP voicemail', (h) => {
    /** An organization with an outbound route to sipp, and a call task to it; the callee's RTP end. */
    async function placed(config: Record<string, unknown>, body: Record<string, unknown>) {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      await publishAgent(h(), await h().tokenFor(o.agentId), { speakingTimeout: 700, callerResponseTimeout: 60, ...config });
      const end = await voicePeer(testPorts);
      const sipp = await startSipp({ host: FAR_END, scenario: 'uas-voice-answer.xml', vars: { media_host: HOST, media_port: String(end.rtp.port), hold_ms: '20000' } });
      assert.equal((await h().call('POST', '/api/v2/sip/outboundRoutes', { token: o.token, body: { route: `${FAR_END}:${sipp.port}` } })).status, 201);
      const created = await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: '+14155552671', ...body } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      // Answered: our media starts arriving (the session sends silence from the first frame).
      await waitFor('the call to be answered', () => end.heard.length > 0, 20_000, 20);
      return { o, end, sipp, taskId: created.body.task.id as string };
    }

    const finished = (o: { token: string }, id: string) => waitFor('the task to end', async () => {
      const t = await h().call('GET', `/api/v2/tasks/${id}`, { token: o.token });
      return FINAL.includes(t.body.task.state) ? t.body.task : undefined;
    }, 30_000);

    it('a machine\'s greeting and beep: the agent does not greet it, leaves the task\'s message after the beep, hangs up; outcome voicemail, the message recorded and linked', async () => {
      const { o, end, sipp, taskId } = await placed({ welcomeMessage: 'Hello, this is Acme calling.' },
        { voicemail: { action: 'leave-message', message: 'Please call Acme back.' } });
      try {
        const greeting = await espeak('Hi, you have reached Jordan. I can not take your call right now. Please leave a message after the tone.', 'en-gb', { pitch: 40, speed: 150 });
        const audio = join([silence(300), greeting, silence(300), beep([1000], 400)]);
        const sentAt = Date.now();
        const from = end.heard.length;
        end.rtp.send(audio);
        const beepEnd = sentAt + (audio.length / 8000) * 1000;
        // What the agent says (only once the beep is over), recognised among what it could say.
        const firstLoud = await waitFor('the agent to speak', () => { const i = end.heard.slice(from).findIndex(loud); return i >= 0 ? i + 1 : undefined; }, 30_000, 20) - 1;
        const said = await end.recognise(from + Math.max(0, firstLoud - 10), ['please call acme back', 'hello this is acme calling', 'goodbye']);
        assert.equal(said, 'please call acme back');
        // Frames arrive in real time: the first loud one came after the beep had been sent to its end.
        assert.ok(sentAt + firstLoud * 20 >= beepEnd - 200, `the message started ${beepEnd - sentAt - firstLoud * 20} ms before the beep ended`);
        assert.ok(sentAt + firstLoud * 20 <= beepEnd + 3000, 'and within 3 s of it');

        const task = await finished(o, taskId);
        assert.deepEqual([task.state, task.result.outcome, task.result.answeredBy], ['finished', 'voicemail', 'machine'], JSON.stringify(task));
        const c = (await conversationRepo.byCarrierRef(h().database.db, o.id, task.providerRef))!;
        assert.equal(c.answered_by, 'machine');
        assert.ok(c.answered_by_at !== null && c.answered_by_at >= sentAt);
        assert.equal(c.outcome, 'voicemail');
        assert.deepEqual((await messageRepo.ofConversation(h().database.db, c.id)).map((m) => `${m.direction}:${m.text}`), ['outbound:Please call Acme back.']);
        // Recorded even though calls are not (CALLPLANE_CALL_RECORDING is off), and linked on the reads.
        const path = `/api/v2/conversation/${o.agentId}:${c.room_id}/${c.id}/recording`;
        assert.equal(c.voicemail_recording, path);
        const wav = await h().call('GET', path, { token: o.token });
        assert.equal(wav.status, 200);
        const recent = await h().call('GET', '/api/v2/messages/recent', { token: o.token });
        assert.equal(recent.status, 200);
        const line = (recent.body as Record<string, unknown>[]).find((m) => m.message === 'Please call Acme back.');
        assert.equal(line?.voicemailRecording, path);
        const [read] = (await h().call('GET', `/api/v2/conversation/${o.agentId}:${c.room_id}/${c.id}`, { token: o.token })).body as Record<string, unknown>[];
        assert.deepEqual([read!.answeredBy, read!.voicemailRecording], ['machine', path]);
        // Another organization sees none of it.
        const stranger = await h().organization((await h().reseller()).id);
        assert.equal((await h().call('GET', path, { token: stranger.token })).status, 404);
      } finally {
        await sipp.stop();
        await end.rtp.close();
      }
    });

    it('hangup (the agent\'s): a greeting past the 8 s maximum is hung up on while it still speaks; nothing is said to it; outcome voicemail', async () => {
      const { o, end, sipp, taskId } = await placed({ welcomeMessage: 'Hello, this is Acme calling.', voicemailAction: 'hangup' }, {});
      try {
        // A greeting with no beep is decided by its length only at the detector's hard maximum (8 s of
        // speech with no 1 s pause; a shorter one waits for what follows, as a person's long answer
        // does): this one goes on past it, and is hung up on there, while it still speaks.
        const greeting = await espeak('Thank you for calling Acme Dental. Our office is currently closed. Please leave a message and we will return your call on the next business day. If this is an emergency, please hang up and call the clinic on call. You can also book an appointment on our website at any time.', 'en-us+f3', { pitch: 65, speed: 175 });
        const sentAt = Date.now();
        end.rtp.send(join([silence(300), greeting]));
        const task = await finished(o, taskId);
        const endedAt = Date.now();
        assert.deepEqual([task.state, task.result.outcome, task.result.answeredBy], ['finished', 'voicemail', 'machine'], JSON.stringify(task));
        assert.ok(endedAt - sentAt < 300 + (greeting.length / 8000) * 1000, 'hung up before the greeting ended');
        assert.equal(end.heard.filter(loud).length, 0, 'the agent said nothing to the machine');
        const c = (await conversationRepo.byCarrierRef(h().database.db, o.id, task.providerRef))!;
        assert.deepEqual([c.answered_by, c.outcome, c.voicemail_recording], ['machine', 'voicemail', null]);
        assert.deepEqual(await messageRepo.ofConversation(h().database.db, c.id), []);
      } finally {
        await sipp.stop();
        await end.rtp.close();
      }
    });

    it('a person says "Hello?" and waits: decided human within about 1.5 s, greeted, and the conversation goes on', async () => {
      const { o, end, sipp, taskId } = await placed({ welcomeMessage: 'Hello, this is Acme calling.', voicemailAction: 'hangup', actions: ['hangup'] }, {});
      try {
        // The person's "Hello?" becomes the first turn after the greeting; its reply comes late enough to be heard apart.
        llm.script.push({ text: 'Goodbye.', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'done' } }], delayMs: 2500 });
        const hello = await espeak('Hello?', 'en-us');
        const sentAt = Date.now();
        const from = end.heard.length;
        end.rtp.send(join([silence(200), hello]));
        // The recogniser hears poorly after long digital silence: from just before the agent's first loud frame.
        const firstLoud = await waitFor('the agent to greet', () => { const i = end.heard.slice(from).findIndex(loud); return i >= 0 ? i + 1 : undefined; }, 20_000, 20) - 1;
        const said = await end.recognise(from + Math.max(0, firstLoud - 10), ['please call acme back', 'hello this is acme calling', 'goodbye']);
        assert.equal(said, 'hello this is acme calling');
        const decidedWithin = firstLoud * 20 - (200 + (hello.length / 8000) * 1000);
        assert.ok(decidedWithin <= 2000, `greeted ${decidedWithin} ms after the person stopped`);

        const task = await finished(o, taskId);
        assert.deepEqual([task.state, task.result.outcome], ['finished', 'completed'], JSON.stringify(task));
        const c = (await conversationRepo.byCarrierRef(h().database.db, o.id, task.providerRef))!;
        assert.equal(c.answered_by, 'human');
        assert.equal(c.outcome, 'ended_by_agent', 'the conversation went on to the agent\'s own end');
        assert.equal(c.voicemail_recording, null);
        assert.ok(c.answered_by_at !== null && c.answered_by_at >= sentAt);
      } finally {
        await sipp.stop();
        await end.rtp.close();
      }
    });

    it('a person answers with a long sentence and waits (hangup chosen): decided human, not hung up on, greeted about 1.5 s after the sentence', async () => {
      const { o, end, sipp, taskId } = await placed({ welcomeMessage: 'Hello, this is Acme calling.', voicemailAction: 'hangup', actions: ['hangup'] }, {});
      try {
        llm.script.push({ text: 'Goodbye.', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'done' } }], delayMs: 2500 });
        const desk = await espeak('Hello, this is Maria from the front desk at Riverside Dental, how can I help you today?', 'en-us', { pitch: 50, speed: 165 });
        const sentAt = Date.now();
        const from = end.heard.length;
        end.rtp.send(join([silence(200), desk]));
        const firstLoud = await waitFor('the agent to greet', () => { const i = end.heard.slice(from).findIndex(loud); return i >= 0 ? i + 1 : undefined; }, 20_000, 20) - 1;
        const sentenceEnd = 200 + (desk.length / 8000) * 1000;
        assert.ok(sentenceEnd > 4000, 'a long sentence');
        const greetedAfter = firstLoud * 20 - sentenceEnd;
        assert.ok(greetedAfter >= 0 && greetedAfter <= 2500, `greeted ${greetedAfter} ms after the sentence ended`);

        const task = await finished(o, taskId);
        assert.deepEqual([task.state, task.result.outcome, task.result.answeredBy], ['finished', 'completed', 'human'], JSON.stringify(task));
        const c = (await conversationRepo.byCarrierRef(h().database.db, o.id, task.providerRef))!;
        assert.equal(c.answered_by, 'human');
        assert.notEqual(c.outcome, 'voicemail');
        assert.ok(c.answered_by_at !== null && c.answered_by_at >= sentAt);
      } finally {
        await sipp.stop();
        await end.rtp.close();
      }
    });
  }, env, {
    worker: true, sip: { pollMs: 100 },
  });
});
