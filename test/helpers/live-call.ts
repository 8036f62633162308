// A voice call in progress with real audio, for tests of what shows calls as they happen (the live
// feed, test/modules/live-conversations-voice.test.ts; the web console's browser test): a call task
// placed on the fake Twilio server (test/helpers/fake-twilio.ts) is answered with
// <Connect><Stream>, and its Media Stream is driven by test/helpers/fake-media-stream.ts: the
// caller's utterances are espeak-ng speech sent as μ-law at 20 ms, heard by the agent's voice
// session (VAD, pocketsphinx restricted to the server's phrases), answered by the fake model
// (test/helpers/fake-llm.ts: `reply to: <what was heard>`, or what a test scripts in `llm.script`),
// and played back in real time. Needs espeak-ng and pocketsphinx: guard the suite with
// `{ skip: toolsSkip('espeak-ng', 'pocketsphinx') }`.
//
//   const server = await liveCallServer('sqlite');                        // harness + fakes, listening at server.baseUrl
//   const org = await server.organization({ welcomeMessage: 'Hello there.' });
//   const call = await startLiveCall(server, org, ['what are your opening hours', 'goodbye']);
//   await call.spoken;                     // the welcome, then each utterance and its reply, played
//   await call.hangUp();                   // the caller hangs up: the conversation ends (hung_up)
//   await server.close();
//
// Utterances must be among `server.phrases` (the recogniser's grammar; give your own to
// liveCallServer). The call is in progress (its conversation open, on the live feed) from
// startLiveCall's return until hangUp.
import { EspeakEngine } from '../../src/speech/espeak.ts';
import { resample } from '../../src/speech/resample.ts';
import { conversationRepo } from '../../src/modules/conversations/repository.ts';
import type { ConversationRow } from '../../src/db/types.ts';
import { FakeMediaStream } from './fake-media-stream.ts';
import { startFakeLlm, type FakeLlm } from './fake-llm.ts';
import { startFakeTwilio, type FakeTwilio } from './fake-twilio.ts';
import { startHarness, type Engine, type Harness, type HarnessOptions } from './harness.ts';
import { freePort, waitFor } from './wait.ts';

export const LIVE_CALL_PHRASES = ['what are your opening hours', 'i would like an appointment', 'goodbye', 'hello there'];
const FROM = '+15005550006';
const RUNTIME = { leaseMs: 3000, heartbeatMs: 50, rescueEveryMs: 0, carrierOptions: { twilio: { timeoutMs: 1500 } } };

export interface LiveCallServer {
  h: Harness;
  twilio: FakeTwilio;
  llm: FakeLlm;
  /** Where the harness listens (http://127.0.0.1:<port>): the API, and the Media Streams' WebSocket. */
  baseUrl: string;
  phrases: string[];
  /** A reseller and an organization whose calls go through the fake Twilio, its default agent configured with `agent` and published. */
  organization(agent?: Record<string, unknown>): Promise<{ id: number; agentId: number; token: string; reseller: { id: number; token: string } }>;
  close(): Promise<void>;
}

/** A listening harness (the task worker running, Twilio calls streamed), a fake Twilio and a fake model. */
export async function liveCallServer(engine: Engine, opts: { phrases?: string[]; env?: Record<string, string>; harness?: HarnessOptions } = {}): Promise<LiveCallServer> {
  const phrases = opts.phrases ?? LIVE_CALL_PHRASES;
  const llm = await startFakeLlm({ models: ['fake-model'] });
  const twilio = await startFakeTwilio();
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const h = await startHarness(engine, {
    CALLPLANE_PUBLIC_URL: baseUrl, CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_TWILIO_VOICE: 'stream',
    CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0',
    ...opts.env,
  }, { worker: true, runtime: RUNTIME, voiceGrammar: { kind: 'phrases', phrases }, ...opts.harness });
  await h.app.listen({ port, host: '127.0.0.1' });
  await h.vad.ready();
  return {
    h, twilio, llm, baseUrl, phrases,
    async organization(agent = {}) {
      const reseller = await h.reseller();
      const o = await h.organization(reseller.id);
      const provider = await h.call('POST', '/api/v2/numberingProvider', {
        token: reseller.token, query: { targetOrganizationId: o.id },
        body: { providerId: 'twilio', config: { accountSid: twilio.accountSid, authToken: twilio.authToken, phoneNumber: FROM, apiBaseUrl: twilio.url } },
      });
      if (provider.status !== 200) throw new Error(`numbering provider: ${provider.status} ${JSON.stringify(provider.body)}`);
      const agentToken = await h.tokenFor(o.agentId);
      const edit = await h.call('POST', '/api/v2/agent', { token: agentToken, body: { callerResponseTimeout: 60, welcomeMessage: 'Hello there.', ...agent } });
      if (edit.status !== 200) throw new Error(`agent: ${edit.status} ${JSON.stringify(edit.body)}`);
      await h.call('POST', '/api/v2/agent/publish', { token: agentToken });
      return { ...o, reseller };
    },
    async close() {
      // Twilio reports every call's end; the tasks end with it.
      for (const [sid, c] of twilio.calls) {
        if (!['completed', 'busy', 'no-answer', 'failed', 'canceled'].includes(c.status)) await twilio.progressCall(sid, 'completed').catch(() => {});
      }
      await h.close();
      await twilio.close();
      await llm.close();
    },
  };
}

export interface LiveCall {
  taskId: string;
  callSid: string;
  /** The call's conversation (its uuid is `conversation.id`; roomId `${account_id}:${room_id}`). */
  conversation: ConversationRow;
  roomId: string;
  /** Twilio's side of the Media Stream: what the caller heard, marks, clears. */
  stream: FakeMediaStream;
  /** Resolves once the welcome played and each utterance was said and its reply played. */
  spoken: Promise<void>;
  /** The caller hangs up (Twilio stops the stream); resolves once the conversation has ended. */
  hangUp(): Promise<ConversationRow>;
}

let seq = 0;
const tts = new EspeakEngine();

/**
 * Places a call from `org` to a new number, answers it on the fake Twilio, connects its Media
 * Stream and, once the welcome has played, speaks `utterances` one after the other, each after the
 * previous reply has played (the agent needs a welcome message: organization() gives one). Returns
 * as soon as the call is in progress; `spoken` follows the talk.
 */
export async function startLiveCall(server: LiveCallServer, org: { id: number; token: string }, utterances: string[], opts: { target?: string } = {}): Promise<LiveCall> {
  const { h, twilio } = server;
  for (const u of utterances) if (!server.phrases.includes(u)) throw new Error(`'${u}' is not among the recogniser's phrases (${server.phrases.join(', ')})`);
  const created = await h.call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'call', target: opts.target ?? `+1415555${String(7000 + (++seq % 2000))}` } });
  if (created.status !== 201) throw new Error(`call task: ${created.status} ${JSON.stringify(created.body)}`);
  const taskId = created.body.task.id as string;
  const callSid = await waitFor(`call ${taskId} placed`, async () => {
    const t = (await h.call('GET', `/api/v2/tasks/${taskId}`, { token: org.token })).body.task;
    return t.state === 'running' && typeof t.providerRef === 'string' && t.providerRef as string;
  });
  const fetched = await twilio.fetchTwiml(callSid);
  const m = /<Stream url="([^"]+)"><Parameter name="token" value="([^"]+)"\/>/.exec(fetched.body);
  if (fetched.status !== 200 || !m) throw new Error(`no <Connect><Stream> in the TwiML: ${fetched.status} ${fetched.body}`);
  const unescape = (s: string) => s.replace(/&quot;/g, '"').replace(/&apos;/g, '\'').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
  const conversation = await waitFor('the call\'s conversation', async () => conversationRepo.byCarrierRef(h.database.db, org.id, callSid));
  const stream = await FakeMediaStream.connect({ url: unescape(m[1]!), callSid, accountSid: twilio.accountSid, parameters: { token: unescape(m[2]!) } });

  /** Waits until the agent has spoken and gone quiet: what was sent has played (its marks came back). */
  const replyPlayed = async (marks: number) => {
    await waitFor('the agent\'s words played', async () => stream.echoed.length > marks, 30_000, 50);
    // Nothing more played for a while: the line is quiet (a reply may be sent in several parts).
    let played = -1;
    let since = Date.now();
    await waitFor('the agent done speaking', async () => {
      if (stream.heard.length !== played) { played = stream.heard.length; since = Date.now(); }
      return Date.now() - since >= 400;
    }, 30_000, 50);
  };
  const spoken = (async () => {
    await replyPlayed(0);
    for (const u of utterances) {
      const marks = stream.echoed.length;
      const said = await tts.synthesize(u, { language: 'en-US' });
      await stream.speak(resample(said.pcm16, said.sampleRate, 8000));
      await replyPlayed(marks);
    }
  })();
  spoken.catch(() => {});
  return {
    taskId, callSid, conversation, roomId: `${conversation.account_id}:${conversation.room_id}`, stream, spoken,
    async hangUp() {
      stream.stop();
      const ended = await waitFor('the call\'s conversation ended', async () => {
        const c = await conversationRepo.find(h.database.db, conversation.id);
        return c?.ended_at != null && c;
      }, 30_000);
      await stream.close();
      return ended;
    },
  };
}
