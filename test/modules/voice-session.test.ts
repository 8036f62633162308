// A spoken conversation end to end, offline, over real RTP on loopback: the caller (an RtpSession)
// says "what are your opening hours" (espeak-ng), the agent's voice session hears it through the
// VAD and pocketsphinx, the model server on loopback answers, the agent speaks the answer
// (espeak-ng) and the caller's side recognises what it heard (pocketsphinx with a grammar, so the
// check is deterministic). Then the caller hangs up and the conversation ends `hung_up`.
// @lane wall
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { PortPool } from '../../src/media/port-pool.ts';
import { RtpSession } from '../../src/media/rtp-session.ts';
import { RtpTransport } from '../../src/media/rtp-transport.ts';
import { accountRepo } from '../../src/modules/accounts/repository.ts';
import { messageSecret } from '../../src/modules/accounts/message-secret.ts';
import { conversationRepo, messageRepo } from '../../src/modules/conversations/repository.ts';
import { turnRunner } from '../../src/modules/conversations/turn.ts';
import { voiceSettings } from '../../src/modules/agents/voice-settings.ts';
import { CAPABILITIES, callOpening } from '../../src/modules/voice/call-policy.ts';
import { splitSentences } from '../../src/modules/voice/reply-player.ts';
import { startVoiceSession } from '../../src/modules/voice/session.ts';
import { createPlatform } from '../../src/platform.ts';
import { EspeakEngine } from '../../src/speech/espeak.ts';
import { PocketsphinxEngine } from '../../src/speech/pocketsphinx.ts';
import { resample } from '../../src/speech/resample.ts';
import type { TextToSpeech } from '../../src/speech/types.ts';
import { guardedDispatcher, policyFromConfig } from '../../src/webhooks/ssrf.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

const HOST = '127.0.0.1';
const PCMU = { pt: 0, name: 'PCMU' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

it('splits streamed text at sentence ends', () => {
  assert.deepEqual(splitSentences('We open at nine. We close'), { sentences: ['We open at nine.'], rest: 'We close' });
  assert.deepEqual(splitSentences('Yes! Really? Ok. '), { sentences: ['Yes!', 'Really?', 'Ok.'], rest: '' });
  assert.deepEqual(splitSentences('3.5 percent'), { sentences: [], rest: '3.5 percent' });
});

describe('a voice session over RTP, offline speech', { skip: toolsSkip('espeak-ng', 'pocketsphinx') }, () => {
  let h: Harness;
  let llm: FakeLlm;
  const portMin = 24_000 + 2 * crypto.randomInt(0, 1_000);
  const pool = new PortPool({ portMin, portMax: portMin + 2 * 19 });
  const tts = new EspeakEngine();
  const stt = new PocketsphinxEngine();
  before(async () => {
    await tts.check();
    await stt.check();
    llm = await startFakeLlm();
    h = await startHarness('sqlite', { CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' });
  });
  after(async () => { await h.close(); await llm.close(); });

  /** An organization's agent with this live configuration, a conversation, and a call's two RTP ends. */
  async function call(config: Record<string, unknown>, grammar: string[], speech: { tts?: TextToSpeech } = {}) {
    const r = await h.reseller();
    const o = await h.organization(r.id);
    const agentToken = await h.tokenFor(o.agentId);
    assert.equal((await h.call('POST', '/api/v2/agent', { token: agentToken, body: config })).status, 200);
    assert.equal((await h.call('POST', '/api/v2/agent/publish', { token: agentToken })).status, 200);
    const platform = createPlatform({ config: h.config, database: h.database, box: h.box });
    const { services } = platform;
    const db = h.database.db;
    const agent = (await accountRepo.findById(db, o.agentId))!;
    const opened = await db.transaction().execute((tx) => services.conversations.open(tx, {
      agent, channel: 'sip', direction: 'inbound', counterpart: '+14155552672', counterpartKind: 'phone', fresh: true,
    }, Date.now()));
    const http = guardedDispatcher(policyFromConfig(h.config));
    const turns = turnRunner({
      db, models: services.models, knowledge: services.knowledge, context: services.context, tasks: services.tasks,
      http, messageSecret: (orgId) => messageSecret(db, h.box, orgId), now: Date.now,
    });
    const agentSide = await RtpSession.open({ host: HOST, pool, codec: PCMU, telephoneEvent: 101 });
    const caller = await RtpSession.open({ host: HOST, pool, codec: PCMU, telephoneEvent: 101 });
    agentSide.setRemote({ address: HOST, port: caller.port });
    caller.setRemote({ address: HOST, port: agentSide.port });
    const heard: Int16Array[] = [];
    caller.on('audio', (f) => heard.push(f));
    const hangups: string[] = [];
    const transport = new RtpTransport(agentSide, { transfer: () => Promise.resolve(), hangup: (why) => { hangups.push(why); return Promise.resolve(); } });
    const live = await services.agents.liveConfig(agent);
    const settings = voiceSettings(live);
    const session = startVoiceSession({ turns, stt, tts: speech.tts ?? tts, now: Date.now, log: { warn: (o, m) => process.env.VOICE_DEBUG && console.log(m, o) } }, {
      transport, transcript: services.conversations.callTranscript(opened), conversation: opened.conversation, room: opened.room, config: live, settings, opening: callOpening(settings, { recorded: false }),
      capabilities: CAPABILITIES.sip, grammar: { kind: 'phrases', phrases: grammar },
    });
    return {
      db, opened, caller, heard, hangups, transport, session,
      async close() { transport.end('test over'); await caller.close(); await http.close(); await platform.close(); },
    };
  }
  const loudFrame = (f: Int16Array) => Math.sqrt(f.reduce((s, x) => s + x * x, 0) / f.length) > 300;

  it('barge-in: the caller talking over the reply stops it, only what was heard is kept (status interrupted), and the agent answers the interruption', async () => {
    const c = await call({ interruptionWordCount: 1, interruptionMinimumSpeakingTime: 0, speakingTimeout: 700, callerResponseTimeout: 60, actions: ['hangup'] },
      ['what are your opening hours', 'goodbye', 'hello there']);
    try {
      const long = 'We open at nine. ' + Array.from({ length: 8 }, (_, i) => `On day ${i + 1} we also open at nine in the morning and close at five.`).join(' ');
      llm.script.push({ text: long }, { text: 'Goodbye!', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'bye' } }] });
      const before = llm.requests.length;
      const ask = await tts.synthesize('what are your opening hours', { language: 'en-US' });
      c.caller.send(resample(ask.pcm16, ask.sampleRate, 8000));
      for (let i = 0; i < 1000 && llm.requests.length === before; i++) await sleep(20);
      // The agent starts speaking its long answer.
      const start = c.heard.length;
      for (let i = 0; i < 500 && c.heard.slice(start).filter(loudFrame).length < 40; i++) await sleep(20);
      assert.ok(c.heard.slice(start).filter(loudFrame).length >= 40, 'the reply is playing');
      // The caller talks over it.
      const bye = await tts.synthesize('goodbye', { language: 'en-US' });
      c.caller.send(resample(bye.pcm16, bye.sampleRate, 8000));
      await c.session.done;
      assert.deepEqual(c.hangups, ['ended_by_agent']);
      const transcript = await messageRepo.ofConversation(c.db, c.opened.conversation.id);
      const cut = transcript.find((m) => m.direction === 'outbound' && m.status === 'interrupted');
      assert.ok(cut, `an interrupted reply in ${JSON.stringify(transcript.map((m) => [m.direction, m.status, m.text.slice(0, 30)]))}`);
      assert.ok(cut.text.length < long.length / 2, `only what was heard is kept: ${cut.text}`);
      assert.equal(llm.requests.length - before, 2, 'the interruption was answered');
      const second = llm.requests.at(-1)!.body.messages;
      assert.equal(second.at(-1)!.content, 'goodbye');
      assert.ok(!second.some((m) => m.content === long), 'the unplayed reply is not in the model\'s history');
      assert.equal((await conversationRepo.find(c.db, c.opened.conversation.id))?.outcome, 'ended_by_agent');
    } finally {
      await c.close();
    }
  });

  it('a silent caller is asked, then the agent hangs up: no_response', async () => {
    const c = await call({ callerResponseTimeout: 1, callerResponseTimeoutHangupCounter: 1, welcomeMessage: '' }, ['hello there']);
    try {
      await c.session.done;
      assert.deepEqual(c.hangups, ['no_response']);
      assert.ok(c.heard.filter(loudFrame).length > 20, 'the prompt and the goodbye were spoken');
      assert.equal((await conversationRepo.find(c.db, c.opened.conversation.id))?.outcome, 'no_response');
    } finally {
      await c.close();
    }
  });

  it('a speech engine that cannot speak (espeak-ng missing) leaves the prompts unsaid, and the silent caller is still hung up on: no_response', async () => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => { rejections.push(reason); };
    process.on('unhandledRejection', onRejection);
    const broken = new EspeakEngine({ command: 'espeak-ng-not-installed-here' });
    const c = await call({ callerResponseTimeout: 1, callerResponseTimeoutHangupCounter: 1, welcomeMessage: 'Hello, this is the agent.' }, ['hello there'], { tts: broken });
    try {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<string>((r) => { timer = setTimeout(() => r('the session never ended'), 30_000); });
      assert.equal(await Promise.race([c.session.done.then(() => 'done'), late]), 'done');
      clearTimeout(timer);
      assert.deepEqual(c.hangups, ['no_response']);
      assert.equal((await conversationRepo.find(c.db, c.opened.conversation.id))?.outcome, 'no_response');
      await sleep(100);
      assert.deepEqual(rejections.map(String), [], 'no unhandled rejection (it would end a serving process)');
    } finally {
      process.off('unhandledRejection', onRejection);
      await c.close();
    }
  });

  it('keys the caller presses reach the model as the person\'s message', async () => {
    const c = await call({ callerResponseTimeout: 60, welcomeMessage: '', actions: ['hangup'] }, ['hello there']);
    try {
      const before = llm.requests.length;
      llm.script.push({ text: 'You pressed five. Bye.', toolCalls: [{ name: 'end_conversation', arguments: {} }] });
      c.caller.sendDigits('5');
      await c.session.done;
      assert.equal(llm.requests.length - before, 1);
      assert.equal(llm.requests.at(-1)!.body.messages.at(-1)!.content, '[DTMF 5]');
    } finally {
      await c.close();
    }
  });

  it('hears the caller, answers through the model, speaks the answer the caller recognises, and ends when the caller hangs up', async () => {
    const c = await call({ welcomeMessage: 'Hello there.', agentInstructions: 'You are the front desk of Acme Dental.', speakingTimeout: 700, callerResponseTimeout: 60 },
      ['what are your opening hours', 'goodbye', 'hello there']);
    const { caller, heard, transport, session, db, opened } = c;
    llm.script.push({ text: 'We open at nine.' });
    try {
      // The welcome plays first.
      const loud = (f: Int16Array) => Math.sqrt(f.reduce((s, x) => s + x * x, 0) / f.length) > 300;
      for (let i = 0; i < 300 && heard.filter(loud).length < 20; i++) await sleep(20);
      assert.ok(heard.filter(loud).length >= 20, 'the welcome was heard');
      await sleep(1500);
      const welcomeFrames = heard.length;

      // The caller speaks.
      const asked = llm.requests.length;
      const said = await tts.synthesize('what are your opening hours', { language: 'en-US' });
      caller.send(resample(said.pcm16, said.sampleRate, 8000));
      for (let i = 0; i < 1000 && llm.requests.length === asked; i++) await sleep(20);
      assert.equal(llm.requests.length - asked, 1, 'the model was asked');
      const request = llm.requests.at(-1)!.body.messages;
      assert.match(request[0]!.content!, /front desk of Acme Dental/);
      assert.deepEqual(request.slice(1).map((m) => `${m.role}:${m.content}`), ['assistant:Hello there.', 'user:what are your opening hours']);

      // The agent's answer, as the caller heard it.
      for (let i = 0; i < 500; i++) {
        const reply = heard.slice(welcomeFrames);
        const lastLoud = reply.map(loud).lastIndexOf(true);
        if (lastLoud > 0 && reply.length - lastLoud > 25) break;
        await sleep(20);
      }
      const reply = heard.slice(welcomeFrames);
      const pcm = new Int16Array(reply.length * 160);
      reply.forEach((f, i) => pcm.set(f, i * 160));
      const recognised = await stt.transcribe(pcm, 8000, { language: 'en-US', grammar: { kind: 'phrases', phrases: ['we open at nine', 'we close at five', 'hello there'] } });
      assert.equal(recognised.text, 'we open at nine');

      const transcript = await messageRepo.ofConversation(db, opened.conversation.id);
      assert.deepEqual(transcript.map((m) => `${m.direction}:${m.text}`), ['outbound:Hello there.', 'inbound:what are your opening hours', 'outbound:We open at nine.']);

      // The caller hangs up.
      transport.end('the far end hung up');
      await session.done;
      const ended = await conversationRepo.find(db, opened.conversation.id);
      assert.equal(ended?.outcome, 'hung_up');
    } finally {
      await c.close();
    }
  });
});
