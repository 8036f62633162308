// The agent on SIP calls, end to end and offline: sipp carries the signalling (a caller dialling
// the agent, or the callee of a call task), while the test's own RTP end (named in sipp's SDP)
// speaks to the agent with espeak-ng and listens to it, recognising what the agent said with
// pocketsphinx and a grammar. The agent's side is the whole service: the SIP worker answers (or
// places) the call, the voice session hears through the VAD and pocketsphinx, the model server on
// loopback answers, and espeak-ng speaks. Keys both ways, the agent's hang-up, and a blind transfer
// by REFER are checked on the wire.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { PortPool } from '../../src/media/port-pool.ts';
import { conversationRepo, messageRepo } from '../../src/modules/conversations/repository.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { sippFlow, startSipp, waitFor, type Sipp } from '../helpers/sip-peers.ts';
import { publishAgent, stt, tts, voicePeer } from '../helpers/voice-peer.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { within } from '../helpers/wait.ts';

const HOST = '127.0.0.1';
const FAR_END = '127.0.0.5';
const CALLER = '127.0.0.6';
const FINAL = ['finished', 'failed', 'canceled'];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const exitOf = (sipp: Sipp, ms = 30_000) => within(sipp.exited, ms, () => 'still running');

let llm: FakeLlm;
/** The harness's settings; the model server's address is filled in once it listens. */
const env: Record<string, string> = { CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_CALL_MAX_SECONDS: '60' };
const portMin = 30_000 + 2 * crypto.randomInt(0, 1_000);
const testPorts = new PortPool({ portMin, portMax: portMin + 2 * 19 });

describe('the agent on SIP calls', { skip: toolsSkip('sipp', 'espeak-ng', 'pocketsphinx') }, () => {
  before(async () => {
    await tts.check();
    await stt.check();
    llm = await startFakeLlm();
    env.CALLPLANE_LLM_BASE_URL = llm.baseUrl;
  });
  after(async () => { await llm.close(); });

  forEachEngine('SIP voice', (h) => {
    const publish = (token: string, config: Record<string, unknown>) => publishAgent(h(), token, config);

    it('answers an inbound call with the agent it names: greets, hears the caller, answers through the model, takes keys and hangs up (BYE)', async () => {
      await h().vad.ready(); // the call's state below names Silero: load it before the call, not during
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const called = await h().agent(o.id);
      await publish(called.token, {
        welcomeMessage: 'Hello there.', agentInstructions: 'You are the front desk of Acme Dental.',
        speakingTimeout: 700, callerResponseTimeout: 60, actions: ['hangup'],
      });
      assert.equal((await h().call('POST', '/api/v2/sip/ipWhitelist', { token: o.token, body: { ip: CALLER, label: 'PBX' } })).status, 201);
      const end = await voicePeer(testPorts);
      const sipp = await startSipp({
        host: CALLER, scenario: 'uac-voice.xml',
        vars: { to: `sip:camp${called.id}@127.0.0.1:${h().sip!.endpoint!.port}`, media_host: HOST, media_port: String(end.rtp.port) },
        extra: [`127.0.0.1:${h().sip!.endpoint!.port}`],
      });
      try {
        // The greeting, synthesized before the answer, plays first.
        assert.equal(await end.recognise(0, ['hello there', 'we open at nine', 'goodbye']), 'hello there');

        // The caller asks; the model answers; the caller hears it.
        llm.script.push({ text: 'We open at nine.' });
        const asked = llm.requests.length;
        const from = end.heard.length;
        await end.say('what are your opening hours');
        await waitFor('the model to be asked', () => llm.requests.length > asked, 20_000, 20);
        const messages = llm.requests.at(-1)!.body.messages;
        assert.match(messages[0]!.content!, /front desk of Acme Dental/);
        // The agent recognises free speech (no grammar): the words may come out a little off.
        assert.deepEqual(messages.slice(1, 2).map((m) => `${m.role}:${m.content}`), ['assistant:Hello there.']);
        assert.match(messages[2]!.content!, /^what are your opening/);
        assert.equal(await end.recognise(from, ['hello there', 'we open at nine', 'goodbye']), 'we open at nine');

        // A key: the model hears it and ends the call; sipp gets our BYE.
        llm.script.push({ text: 'Goodbye.', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'done' } }] });
        end.rtp.sendDigits('5');
        assert.equal(await exitOf(sipp), 0, sipp.output());
        assert.equal(llm.requests.at(-1)!.body.messages.at(-1)!.content, '[DTMF 5]');
        assert.deepEqual(sippFlow(sipp), ['< INVITE', '> 100', '> 200', '< ACK', '> BYE', '< 200']);

        const db = h().database.db;
        const c = await waitFor('the conversation to end', async () => {
          const row = await db.selectFrom('conversations').selectAll().where('org_id', '=', o.id).where('channel', '=', 'sip').executeTakeFirst();
          return row?.ended_at != null ? row : undefined;
        });
        assert.deepEqual([c.account_id, c.direction, c.outcome], [called.id, 'inbound', 'ended_by_agent']);
        // Answered only because the source is on the organization's whitelist: its trunk vouches for the caller ID.
        assert.equal(c.caller_verified, 1);
        assert.deepEqual(JSON.parse(c.state).speech, {
          stt: 'pocketsphinx', sttRequested: 'deepgram', sttSubstituted: 'no deepgram key on this process nor of the organization: pocketsphinx hears the call',
          tts: 'espeak-ng', offline: true, vad: 'silero', voice: 'default female en-US', streamed: false,
        });
        const room = await db.selectFrom('conversation_rooms').selectAll().where('id', '=', c.room_id).executeTakeFirstOrThrow();
        assert.equal(room.counterpart, '+14155552672');
        const transcript = await messageRepo.ofConversation(db, c.id);
        assert.deepEqual(transcript.map((m) => `${m.direction}:${m.text.replace(/^what are your opening.*/, 'what are your opening …')}`).slice(0, 4),
          ['outbound:Hello there.', 'inbound:what are your opening …', 'outbound:We open at nine.', 'inbound:[DTMF 5]']);
        // The inbound call is billed (issue 33): a call, its seconds, its minutes rounded up.
        const usage = await h().call('GET', '/api/v2/stats/usage', { token: o.token, query: { allItems: true } });
        assert.equal(usage.status, 200, JSON.stringify(usage.body));
        const seconds = Math.ceil(Number(c.duration_ms) / 1000);
        assert.ok(seconds > 0);
        assert.deepEqual([usage.body.usage.calls, usage.body.usage.callSeconds, usage.body.usage.callMinutes, usage.body.usage.conversations],
          [1, seconds, Math.ceil(seconds / 60), 1]);
      } finally {
        await sipp.stop();
        await end.rtp.close();
      }
    });

    it('a call task\'s callee hears the task\'s greeting and the agent\'s keys, and is transferred by REFER when the agent transfers', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const agentToken = await h().tokenFor(o.agentId);
      await publish(agentToken, {
        postAnswerDtmf: '12', speakingTimeout: 700, callerResponseTimeout: 60, actions: ['transfer'],
        transferDestinations: [{ name: 'sales', destination: '+14155550100' }],
      });
      const end = await voicePeer(testPorts);
      const sipp = await startSipp({ host: FAR_END, scenario: 'uas-voice-refer.xml', vars: { media_host: HOST, media_port: String(end.rtp.port), frag: 'SIP/2.0 200 OK' } });
      try {
        assert.equal((await h().call('POST', '/api/v2/sip/outboundRoutes', { token: o.token, body: { route: `${FAR_END}:${sipp.port}` } })).status, 201);
        const created = await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: '+14155552671', greeting: 'Hi, this is Acme.' } });
        assert.equal(created.status, 201, JSON.stringify(created.body));

        // The agent's keys (postAnswerDtmf, RFC 4733), then the task's greeting.
        await waitFor('the agent\'s keys', () => end.keys.length >= 2, 20_000, 20);
        assert.deepEqual(end.keys, ['1', '2']);
        assert.equal(await end.recognise(0, ['hi this is acme', 'one moment please', 'goodbye']), 'hi this is acme');

        llm.script.push({ text: 'One moment please.', toolCalls: [{ name: 'transfer_call', arguments: { destination: 'sales' } }] });
        const from = end.heard.length;
        await end.say('i want to buy something');
        assert.equal(await end.recognise(from, ['hi this is acme', 'one moment please', 'goodbye']), 'one moment please');
        assert.equal(await exitOf(sipp), 0, sipp.output());
        assert.deepEqual(sippFlow(sipp), ['> INVITE', '< 100', '< 200', '> ACK', '> REFER', '< 202', '< NOTIFY', '> 200', '> BYE', '< 200']);
        assert.match(sipp.messages(), new RegExp(`Refer-To: <sip:\\+14155550100@${FAR_END.replace(/\./g, '\\.')}:${sipp.port}>`));

        const task = await waitFor('the task to end', async () => {
          const t = await h().call('GET', `/api/v2/tasks/${created.body.task.id}`, { token: o.token });
          return FINAL.includes(t.body.task.state) ? t.body.task : undefined;
        }, 20_000);
        assert.deepEqual([task.state, task.result.outcome, task.result.transferred], ['finished', 'completed', true], JSON.stringify(task));
        const c = (await conversationRepo.byCarrierRef(h().database.db, o.id, task.providerRef))!;
        assert.deepEqual([c.channel, c.direction, c.task_id, c.outcome], ['sip', 'outbound', created.body.task.id, 'transferred']);
        assert.equal(c.caller_verified, null, 'nobody called in');
      } finally {
        await sipp.stop();
        await end.rtp.close();
      }
    });

    it('an attended transfer calls the destination, announces the caller, then joins the two calls: speech and keys pass both ways until the destination hangs up', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const agentToken = await h().tokenFor(o.agentId);
      await publish(agentToken, {
        welcomeMessage: 'Hello there.', speakingTimeout: 700, callerResponseTimeout: 60, actions: ['transfer'], attendedTransfers: true,
        transferDestinations: [{ name: 'sales', destination: '+14155550100' }],
      });
      assert.equal((await h().call('POST', '/api/v2/sip/ipWhitelist', { token: o.token, body: { ip: CALLER, label: 'PBX' } })).status, 201);
      const caller = await voicePeer(testPorts);
      const sales = await voicePeer(testPorts);
      const destination = await startSipp({ host: FAR_END, scenario: 'uas-voice-bye.xml', vars: { media_host: HOST, media_port: String(sales.rtp.port), hold_ms: '12000' } });
      assert.equal((await h().call('POST', '/api/v2/sip/outboundRoutes', { token: o.token, body: { route: `${FAR_END}:${destination.port}` } })).status, 201);
      const sipp = await startSipp({
        host: CALLER, scenario: 'uac-voice.xml',
        vars: { to: `sip:camp${o.agentId}@127.0.0.1:${h().sip!.endpoint!.port}`, media_host: HOST, media_port: String(caller.rtp.port) },
        extra: [`127.0.0.1:${h().sip!.endpoint!.port}`],
      });
      try {
        assert.equal(await caller.recognise(0, ['hello there', 'one moment please']), 'hello there');
        llm.script.push({ text: 'One moment please.', toolCalls: [{ name: 'transfer_call', arguments: { destination: 'sales' } }] });
        await caller.say('i want to talk to sales');
        // The destination is called and hears who is coming.
        const announced = await sales.recognise(0, ['hello i have a caller for sales on the line connecting you now', 'hello there', 'thank you']);
        assert.equal(announced, 'hello i have a caller for sales on the line connecting you now');
        // Joined: the destination's words reach the caller, the caller's keys reach the destination.
        const from = caller.heard.length;
        await sleep(300);
        await sales.say('thank you');
        assert.equal(await caller.recognise(from, ['hello there', 'one moment please', 'thank you']), 'thank you');
        caller.rtp.sendDigits('7');
        await waitFor('the caller\'s key at the destination', () => sales.keys.includes('7'), 5000, 20);
        // The destination hangs up: the caller's leg is ended by us.
        assert.equal(await exitOf(destination), 0, destination.output());
        assert.equal(await exitOf(sipp), 0, sipp.output());
        assert.deepEqual(sippFlow(sipp), ['< INVITE', '> 100', '> 200', '< ACK', '> BYE', '< 200']);
        assert.match(destination.messages(), /INVITE sip:\+14155550100@/);
        const c = await waitFor('the conversation to end', async () => {
          const row = await h().database.db.selectFrom('conversations').selectAll().where('org_id', '=', o.id).where('channel', '=', 'sip').executeTakeFirst();
          return row?.ended_at != null ? row : undefined;
        });
        assert.equal(c.outcome, 'transferred');
      } finally {
        await sipp.stop();
        await destination.stop();
        await caller.rtp.close();
        await sales.rtp.close();
      }
    });

    it('a REFER the destination turns down (NOTIFY 486) leaves the callee with the agent, who says so', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      await publish(await h().tokenFor(o.agentId), {
        welcomeMessage: '', speakingTimeout: 700, callerResponseTimeout: 60, actions: ['transfer', 'hangup'],
        transferDestinations: [{ name: 'sales', destination: '+14155550100' }],
      });
      const end = await voicePeer(testPorts);
      const sipp = await startSipp({ host: FAR_END, scenario: 'uas-voice-refer.xml', vars: { media_host: HOST, media_port: String(end.rtp.port), frag: 'SIP/2.0 486 Busy Here' } });
      try {
        assert.equal((await h().call('POST', '/api/v2/sip/outboundRoutes', { token: o.token, body: { route: `${FAR_END}:${sipp.port}` } })).status, 201);
        const created = await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: '+14155552671' } });
        assert.equal(created.status, 201);
        llm.script.push({ text: 'One moment please.', toolCalls: [{ name: 'transfer_call', arguments: { destination: 'sales' } }] });
        await waitFor('the call to be up', () => end.heard.length > 10, 20_000, 20);
        const asked = llm.requests.length;
        end.rtp.sendDigits('1');
        await waitFor('the model to be asked', () => llm.requests.length > asked, 20_000, 20);
        // The reply, the REFER turned down, and the apology after it. The REFER's round trip (202,
        // then NOTIFY 486) and the apology's synthesis lie between the sentences: on a quick machine
        // they are one stretch of speech, on a busy one several, with pauses the recogniser takes
        // for the end of an utterance. Each stretch is cut where it went quiet (before it is
        // recognised, which takes a while), and what they say together must be the three sentences.
        const sentences = ['one moment please', 'sorry i could not transfer your call', 'how else can i help'];
        const phrases = ['goodbye'];
        for (let i = 0; i < sentences.length; i++) for (let j = i + 1; j <= sentences.length; j++) phrases.push(sentences.slice(i, j).join(' '));
        const heard: string[] = [];
        let from = end.heard.length;
        while (heard.length === 0 || sentences.join(' ').startsWith(`${heard.join(' ')} `)) {
          const pcm = await end.agentSpoke(from, 500);
          from += pcm.length / 160;
          heard.push(await end.recognisePcm(pcm, phrases));
        }
        assert.equal(heard.join(' '), sentences.join(' '));
        // Still talking: a key, and the agent ends the call itself.
        llm.script.push({ text: 'Goodbye.', toolCalls: [{ name: 'end_conversation', arguments: {} }] });
        end.rtp.sendDigits('2');
        assert.equal(await exitOf(sipp), 0, sipp.output());
        const task = await waitFor('the task to end', async () => {
          const t = await h().call('GET', `/api/v2/tasks/${created.body.task.id}`, { token: o.token });
          return FINAL.includes(t.body.task.state) ? t.body.task : undefined;
        }, 20_000);
        assert.equal(task.result.transferred, undefined);
        const c = (await conversationRepo.byCarrierRef(h().database.db, o.id, task.providerRef))!;
        assert.equal(c.outcome, 'ended_by_agent');
        const said = (await messageRepo.ofConversation(h().database.db, c.id)).map((m) => m.text);
        assert.ok(said.includes('Sorry, I could not transfer your call. How else can I help?'), JSON.stringify(said));
      } finally {
        await sipp.stop();
        await end.rtp.close();
      }
    });
  }, env, {
    worker: true, sip: { pollMs: 100 },
  });
});
