// Calls heard by Deepgram (issue 35): real SIP calls (sipp carrying the signalling, the test's own
// RTP end speaking espeak-ng audio) to an agent whose agentSttEngine is `deepgram`, in a process
// configured with the protocol double's URL and key (test/helpers/fake-deepgram.ts, through the
// official client). The double hears the call's own frames (linear16 at 8 kHz) and its
// speech_final ends the turn — long before the agent's speakingTimeout — and the model receives
// its transcript. A refused key and a socket that drops twice mid-utterance hand the call to the
// configured recogniser (pocketsphinx): the caller is still heard and answered, and the
// conversation's state.speech and each turn's latency record say which engine heard and why.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Db } from '../../src/db/types.ts';
import { PortPool } from '../../src/media/port-pool.ts';
import { readCallState } from '../../src/modules/voice/call-state.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { startFakeDeepgram, type FakeDeepgram } from '../helpers/fake-deepgram.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import type { Harness } from '../helpers/harness.ts';
import { startSipp, waitFor } from '../helpers/sip-peers.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { publishAgent, tts, voicePeer } from '../helpers/voice-peer.ts';
import { within } from '../helpers/wait.ts';

const HOST = '127.0.0.1';
const CALLER = '127.0.0.6';
const PHRASES = ['hello there', 'we open at nine', 'goodbye'];
const portMin = 32_000 + 2 * crypto.randomInt(0, 1_000);
const testPorts = new PortPool({ portMin, portMax: portMin + 2 * 19 });

let llm: FakeLlm;
let deepgram: FakeDeepgram;
const env: Record<string, string> = { CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_CALL_MAX_SECONDS: '60' };
/** The same process with a key Deepgram refuses. */
const refusedEnv: Record<string, string> = { ...env };

/** The conversation of the organization's SIP call, once it has ended. */
async function endedCall(db: Db, orgId: number) {
  return waitFor('the conversation to end', async () => {
    const row = await db.selectFrom('conversations').selectAll().where('org_id', '=', orgId).where('channel', '=', 'sip').executeTakeFirst();
    return row?.ended_at != null ? row : undefined;
  });
}

/**
 * An inbound call to a new organization's agent (configured with `agent`): greeted, the caller says
 * `question`, the model answers "We open at nine." and hangs up; resolves with what the test needs
 * to check, once the call has ended.
 */
async function call(h: Harness, agent: Record<string, unknown>, question: string) {
  const r = await h.reseller();
  const o = await h.organization(r.id);
  const called = await h.agent(o.id);
  await publishAgent(h, called.token, { welcomeMessage: 'Hello there.', callerResponseTimeout: 60, actions: ['hangup'], ...agent });
  assert.equal((await h.call('POST', '/api/v2/sip/ipWhitelist', { token: o.token, body: { ip: CALLER, label: 'PBX' } })).status, 201);
  const end = await voicePeer(testPorts);
  const sipp = await startSipp({
    host: CALLER, scenario: 'uac-voice.xml',
    vars: { to: `sip:camp${called.id}@127.0.0.1:${h.sip!.endpoint!.port}`, media_host: HOST, media_port: String(end.rtp.port) },
    extra: [`127.0.0.1:${h.sip!.endpoint!.port}`],
  });
  try {
    assert.equal(await end.recognise(0, PHRASES), 'hello there');
    llm.script.push({ text: 'We open at nine.', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'answered' } }] });
    const asked = llm.requests.length;
    const from = end.heard.length;
    const said = await tts.synthesize(question, { language: 'en-US' });
    const speechMs = (said.pcm16.length / said.sampleRate) * 1000;
    const saidAt = Date.now();
    await end.say(question);
    await waitFor('the model to be asked', () => llm.requests.length > asked, 30_000, 10);
    /** From the end of the caller's speech (its audio was queued at once, sent in real time) to the model's request. */
    const askedAfterMs = llm.requests.at(-1)!.at - (saidAt + speechMs);
    const answer = await end.recognise(from, PHRASES);
    assert.equal(await within(sipp.exited, 30_000, () => 'still running'), 0, sipp.output());
    const c = await endedCall(h.database.db, o.id);
    const latency = await waitFor('the turn\'s latency', async () => h.database.db.selectFrom('turn_latencies').selectAll().where('conversation_id', '=', c.id).executeTakeFirst());
    return { c, state: readCallState(c.state), heardByModel: llm.requests.at(-1)!.body.messages.at(-1)!.content, answer, askedAfterMs, latency, saidAt, speechEndAt: saidAt + speechMs };
  } finally {
    await sipp.stop();
    await end.rtp.close();
  }
}

describe('calls heard by Deepgram', { skip: toolsSkip('sipp', 'espeak-ng', 'pocketsphinx') }, () => {
  before(async () => {
    llm = await startFakeLlm();
    deepgram = await startFakeDeepgram();
    Object.assign(env, { CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_DEEPGRAM_URL: deepgram.url, CALLPLANE_DEEPGRAM_API_KEY: deepgram.apiKey });
    Object.assign(refusedEnv, env, { CALLPLANE_DEEPGRAM_API_KEY: 'dg-wrong-key-9876543210' });
  });
  after(async () => {
    await deepgram.close();
    await llm.close();
  });

  forEachEngine('streamed to Deepgram', (h) => {
    it('streams the call\'s frames to Deepgram, whose speech_final ends the turn (not the agent\'s 5 s speakingTimeout); the model gets its transcript', async () => {
      await h().vad.ready();
      deepgram.hear.push('What are your opening hours?');
      const before = deepgram.connections.length;
      const r = await call(h(), { agentSttEngine: 'deepgram', speakingTimeout: 5000 }, 'what are your opening hours');

      // The model was asked with the double's words, well before our VAD's 5 s of silence could have ended the turn.
      assert.equal(r.heardByModel, 'What are your opening hours?');
      assert.ok(r.askedAfterMs < 3000, `the model was asked ${r.askedAfterMs} ms after the caller stopped`);
      assert.equal(r.answer, 'we open at nine');
      assert.equal(r.latency.stt_engine, 'deepgram');
      assert.ok(r.latency.endpoint_ms !== null && Number(r.latency.endpoint_ms) < 2000, `endpoint ${r.latency.endpoint_ms} ms`);
      assert.deepEqual({ ...r.state.speech, vad: undefined }, { stt: 'deepgram', sttKeySource: 'process', sttRequested: 'deepgram', tts: 'espeak-ng', offline: false, vad: undefined, voice: 'default female en-US', streamed: false });

      // One socket for the call, asked for the call's own audio: linear16 at 8 kHz, frame by frame, closed with CloseStream.
      assert.equal(deepgram.connections.length, before + 1);
      const conn = deepgram.connections.at(-1)!;
      assert.deepEqual([conn.path, conn.query.encoding, conn.query.sample_rate, conn.query.channels], ['/v1/listen', 'linear16', '8000', '1']);
      assert.ok(conn.frames > 100 && conn.audio.every((b) => b.length === 320), `${conn.frames} frames`);
      await waitFor('the stream closed', () => conn.closed !== undefined, 5000, 20);
      assert.ok(conn.controls.includes('CloseStream'), conn.controls.join(','));
    });

    it('Flux (deepgramflux): its EndOfTurn ends the turn and its transcript reaches the model', async () => {
      deepgram.hear.push('What are your opening hours?');
      const before = deepgram.connections.length;
      const r = await call(h(), { agentSttEngine: 'deepgramflux', speakingTimeout: 5000 }, 'what are your opening hours');

      const conn = deepgram.connections.at(-1)!;
      assert.deepEqual([deepgram.connections.length, conn.path, conn.query.encoding, conn.query.sample_rate], [before + 1, '/v2/listen', 'linear16', '8000']);
      assert.ok(conn.sent.some((m) => m.event === 'EndOfTurn'));
      assert.match(r.heardByModel ?? '', /^What are your opening hours\?/);
      assert.ok(r.askedAfterMs < 3000, `the model was asked ${r.askedAfterMs} ms after the caller stopped`);
      assert.equal(r.answer, 'we open at nine');
      assert.equal(r.latency.stt_engine, 'deepgramflux');
      assert.deepEqual([r.state.speech?.stt, r.state.speech?.changes], ['deepgramflux', undefined]);
    });

    it('a socket dropped twice mid-utterance: the configured recogniser hears that utterance whole, the caller is answered, and the record says why', async () => {
      await h().vad.ready();
      deepgram.plan.push({ dropAfterSpeechMs: 400 }, { dropAfterSpeechMs: 200 });
      const before = deepgram.connections.length;
      const r = await call(h(), { agentSttEngine: 'deepgram', speakingTimeout: 700 }, 'what are your opening hours');

      assert.equal(deepgram.connections.length, before + 2);
      assert.match(r.heardByModel ?? '', /^what are your opening/);
      assert.equal(r.answer, 'we open at nine');
      assert.equal(r.latency.stt_engine, 'pocketsphinx');
      const speech = r.state.speech!;
      assert.deepEqual([speech.stt, speech.offline, speech.changes?.length], ['pocketsphinx', true, 1]);
      const change = speech.changes![0]!;
      assert.deepEqual([change.from, change.to], ['deepgram', 'pocketsphinx']);
      assert.match(change.reason, /dropped again/);
      // It failed while the caller was speaking, and what they said before it failed was heard.
      assert.ok(change.at > r.saidAt && change.at < r.speechEndAt, `changed ${change.at - r.saidAt} ms into ${r.speechEndAt - r.saidAt} ms of speech`);
    });
  }, env, { worker: true, sip: { pollMs: 100 } });

  forEachEngine('a key Deepgram refuses', (h) => {
    it('answers the call and hears it with the configured recogniser; state.speech says Deepgram refused the key, and never the key', async () => {
      await h().vad.ready();
      const refusals = deepgram.handshakes.filter((x) => x.status === 401).length;
      const r = await call(h(), { agentSttEngine: 'deepgram', speakingTimeout: 700 }, 'what are your opening hours');

      assert.equal(deepgram.handshakes.filter((x) => x.status === 401).length, refusals + 1);
      assert.match(r.heardByModel ?? '', /^what are your opening/);
      assert.equal(r.answer, 'we open at nine');
      assert.equal(r.latency.stt_engine, 'pocketsphinx');
      const speech = r.state.speech!;
      assert.deepEqual([speech.stt, speech.offline, speech.changes?.map((x) => `${x.from}>${x.to}`)], ['pocketsphinx', true, ['deepgram>pocketsphinx']]);
      assert.match(speech.changes![0]!.reason, /refused the API key \(HTTP 401\)/);
      assert.ok(!JSON.stringify(speech).includes('dg-wrong-key'));
    });
  }, refusedEnv, { worker: true, sip: { pollMs: 100 } });
});
