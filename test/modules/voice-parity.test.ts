// One table of call scenarios, run on all three voice paths, asserting the same outcome: the
// agent's lines as recorded (kind and text, in the agent's language), the conversation's outcome
// and the room's last message. The paths:
//   gather — Twilio <Gather>: the fake Twilio fetches the answer's TwiML and posts signed gather
//            actions (test/helpers/fake-twilio.ts);
//   stream — Twilio Media Streams: the fake stream client (test/helpers/fake-media-stream.ts) on
//            our WebSocket route, the deployment's offline speech engines speaking;
//   sip    — the voice session over the fake transport (test/helpers/fake-voice-transport.ts), as
//            voice/sip-calls.ts starts it for a SIP call.
// What differs by path is listed beside each scenario (call-policy.ts CAPABILITIES): <Gather>
// hears speech only, so a turn there is a SpeechResult; the stream path's caller here presses a
// key instead of speaking (no speech engine on the caller's side); SIP's caller speaks to the
// scripted recogniser. Real time is short: callerResponseTimeout is 1 s, and the process's turn
// limit (which every path runs its turns under, voice/turn-limit.ts) TURN_LIMIT_MS.
// @engines sqlite
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { voiceSettings } from '../../src/modules/agents/voice-settings.ts';
import { CAPABILITIES } from '../../src/modules/voice/call-policy.ts';
import { conversationRepo, latencyRepo, messageRepo, roomRepo } from '../../src/modules/conversations/repository.ts';
import { startCall } from '../../src/modules/voice/start-call.ts';
import { agentOnCall } from '../helpers/agent-call.ts';
import { FakeMediaStream } from '../helpers/fake-media-stream.ts';
import type { FakeLlm, ScriptedReply } from '../helpers/fake-llm.ts';
import type { FakeTwilio } from '../helpers/fake-twilio.ts';
import { FakeVoiceTransport, ScriptedStt, ShortTts } from '../helpers/fake-voice-transport.ts';
import { ENGINE_SKIP_REASON, ENGINES, SKIPPED_ENGINES, type Harness } from '../helpers/harness.ts';
import { startTwilioApp, type TwilioApp } from '../helpers/twilio-app.ts';
import { waitFor } from '../helpers/wait.ts';

const FROM = '+15005550006';
const RUNTIME = { leaseMs: 3000, heartbeatMs: 50, rescueEveryMs: 0, carrierOptions: { twilio: { timeoutMs: 1500 }, simulated: { callSeconds: 0.05 } } };
type Path = 'gather' | 'stream' | 'sip';
/** The turn limit of the process (every path's); a slow model here answers well after it. */
const TURN_LIMIT_MS = 3000;
const PATHS: Path[] = ['gather', 'stream', 'sip'];

/** What the caller does, in order: stays silent for callerResponseTimeout, or takes a turn (speaks on gather and SIP, presses 1 on streams). */
type Step = 'silence' | 'turn';

interface Scenario {
  name: string;
  config: Record<string, unknown>;
  model: ScriptedReply[];
  steps: Step[];
  lines: Array<[kind: string, text: string]>;
  outcome: string;
  /** Differences by path, by design (CAPABILITIES). */
  differences: string;
  /** The language every path speaks in (and Gather listens in). */
  language?: string;
  /** The transfer destinations the model is offered on each path (transfer_call's enum), by design different. */
  offered?: Record<Path, string[]>;
}

const ES = { agentLang: 'es-US', agentVoice: 'es-US Female' };
const APOLOGY_ES = 'Disculpe, tengo problemas para responder en este momento. ¿Podría repetirlo?';
const SCENARIOS: Scenario[] = [
  {
    name: 'a Spanish agent greets, asks whether the caller is still there, and hangs up no_response',
    config: { ...ES, welcomeMessage: 'Hola, soy Ana.', callerResponseTimeout: 1, callerResponseTimeoutHangupCounter: 1 },
    model: [],
    steps: ['silence', 'silence'],
    lines: [['welcome', 'Hola, soy Ana.'], ['still_there', '¿Sigue ahí?'], ['no_response', 'No he escuchado nada, así que voy a terminar la llamada. Adiós.']],
    outcome: 'no_response',
    differences: 'gather: Twilio times the silence (<Gather timeout>) and posts an empty result; stream and SIP: the session\'s timer',
    language: 'es-US',
  },
  {
    name: 'a multi agent with a Spanish voice speaks and listens in Spanish',
    config: { agentLang: 'multi', agentVoice: 'es-US Female', welcomeMessage: 'Hola.', callerResponseTimeout: 1, callerResponseTimeoutHangupCounter: 1 },
    model: [],
    steps: ['silence', 'silence'],
    lines: [['welcome', 'Hola.'], ['still_there', '¿Sigue ahí?'], ['no_response', 'No he escuchado nada, así que voy a terminar la llamada. Adiós.']],
    outcome: 'no_response',
    differences: 'as for any silence',
    language: 'es-US',
  },
  {
    name: 'a turn past the turn limit is an apology (the model aborted), and the call goes on',
    config: { ...ES, welcomeMessage: 'Hola.', callerResponseTimeout: 30, actions: ['hangup'] },
    model: [
      { delayMs: TURN_LIMIT_MS * 3, text: 'Demasiado tarde.' },
      { text: 'Adiós.', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'done' } }] },
    ],
    steps: ['turn', 'turn'],
    lines: [['welcome', 'Hola.'], ['apology', APOLOGY_ES], ['reply', 'Adiós.']],
    outcome: 'ended_by_agent',
    differences: 'none but how the turn comes in',
    language: 'es-US',
  },
  {
    name: 'a Spanish agent whose model fails three turns in a row apologises twice, then says goodbye and hangs up failed',
    config: { ...ES, welcomeMessage: 'Hola.', callerResponseTimeout: 30 },
    model: [{ status: 500 }, { status: 500 }, { status: 500 }],
    steps: ['turn', 'turn', 'turn'],
    lines: [
      ['welcome', 'Hola.'],
      ['apology', APOLOGY_ES],
      ['apology', APOLOGY_ES],
      ['failed', 'Disculpe, algo salió mal de nuestro lado. Inténtelo más tarde. Adiós.'],
    ],
    outcome: 'failed',
    differences: 'none but how the turn comes in',
    language: 'es-US',
  },
  {
    name: 'a transfer is offered only to destinations the path can dial (Twilio dials E.164 numbers only)',
    config: {
      welcomeMessage: 'Hi, this is Ana.', callerResponseTimeout: 30, actions: ['hangup', 'transfer'],
      transferDestinations: [{ name: 'Front desk', destination: 'ext:100' }, { name: 'Sales', destination: '+14155550100' }],
    },
    model: [{ text: 'Goodbye!', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'done' } }] }],
    steps: ['turn'],
    lines: [['welcome', 'Hi, this is Ana.'], ['reply', 'Goodbye!']],
    outcome: 'ended_by_agent',
    differences: 'an extension is offered on SIP only',
    offered: { gather: ['Sales'], stream: ['Sales'], sip: ['Front desk', 'Sales'] },
  },
  {
    name: 'the agent ends the call after its reply',
    config: { welcomeMessage: 'Hi, this is Ana.', callerResponseTimeout: 30, actions: ['hangup'] },
    model: [{ text: 'Goodbye!', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'done' } }] }],
    steps: ['turn'],
    lines: [['welcome', 'Hi, this is Ana.'], ['reply', 'Goodbye!']],
    outcome: 'ended_by_agent',
    differences: 'none but how the turn comes in',
  },
];

let seq = 0;
const nextTarget = () => `+1415556${String(1000 + ++seq).slice(-4)}`;
const unescapeXml = (s: string) => s.replace(/&quot;/g, '"').replace(/&apos;/g, '\'').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

for (const engine of ENGINES) {
  describe(`one call policy on every path [${engine}]`, () => {
    let app: TwilioApp;
    let h: Harness;
    let llm: FakeLlm;
    let fake: FakeTwilio;

    before(async () => {
      app = await startTwilioApp(engine, { worker: true, runtime: RUNTIME, voiceTurnTimeoutMs: TURN_LIMIT_MS });
      ({ h, llm, fake } = app);
    });
    after(async () => {
      if (fake) for (const [sid, call] of fake.calls) if (!['completed', 'busy', 'no-answer', 'failed', 'canceled'].includes(call.status)) await fake.progressCall(sid, 'completed');
      await app?.close();
    });

    /** An organization on the fake Twilio (gathering or streaming), its agent configured and published. */
    async function org(config: Record<string, unknown>, voice: 'gather' | 'stream') {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const res = await h.call('POST', '/api/v2/numberingProvider', {
        token: r.token, query: { targetOrganizationId: o.id },
        body: { providerId: 'twilio', config: { accountSid: fake.accountSid, authToken: fake.authToken, phoneNumber: FROM, apiBaseUrl: fake.url, voice } },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const token = await h.tokenFor(o.agentId);
      assert.equal((await h.call('POST', '/api/v2/agent', { token, body: config })).status, 200);
      assert.equal((await h.call('POST', '/api/v2/agent/publish', { token })).status, 200);
      return o;
    }

    /** A call task placed on the fake Twilio: its CallSid and the answer's TwiML. */
    async function placed(o: { token: string }) {
      const created = await h.call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: nextTarget() } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const id = created.body.task.id as string;
      const sid = await waitFor(`call ${id} placed`, async () => {
        const t = (await h.call('GET', `/api/v2/tasks/${id}`, { token: o.token })).body.task;
        return t.state === 'running' && typeof t.providerRef === 'string' && t.providerRef as string;
      });
      const fetched = await fake.fetchTwiml(sid);
      assert.equal(fetched.status, 200, fetched.body);
      return { sid, twiml: fetched.body };
    }

    /** Runs the scenario on a path; the conversation it made. */
    async function run(path: Path, s: Scenario): Promise<{ conversationId: string; said: string[] }> {
      llm.script.push(...s.model);
      const said: string[] = [];
      if (path === 'gather') {
        const o = await org(s.config, 'gather');
        const { sid, twiml } = await placed(o);
        said.push(twiml);
        const action = unescapeXml(/<Gather [^>]*action="([^"]+)"/.exec(twiml)![1]!);
        for (const step of s.steps) {
          const res = await fake.postSigned(action, {
            AccountSid: fake.accountSid, CallSid: sid, CallStatus: 'in-progress', ...(step === 'turn' ? { SpeechResult: 'hola', Confidence: '0.9' } : {}),
          });
          assert.equal(res.status, 200, res.body);
          said.push(res.body);
        }
        return { conversationId: (await conversationRepo.byCarrierRef(h.database.db, o.id, sid))!.id, said };
      }
      if (path === 'stream') {
        const o = await org(s.config, 'stream');
        const { sid, twiml } = await placed(o);
        const m = /<Stream url="([^"]+)"><Parameter name="token" value="([^"]+)"\/>/.exec(twiml);
        assert.ok(m, twiml);
        const c = (await conversationRepo.byCarrierRef(h.database.db, o.id, sid))!;
        const client = await FakeMediaStream.connect({ url: unescapeXml(m[1]!), callSid: sid, accountSid: fake.accountSid, parameters: { token: unescapeXml(m[2]!) } });
        try {
          const outbound = async () => (await messageRepo.ofConversation(h.database.db, c.id)).filter((x) => x.direction === 'outbound').length;
          await waitFor('the greeting', async () => (await outbound()) >= 1 && client.echoed.length >= 1, 20_000);
          for (const step of s.steps) {
            const before = await outbound();
            if (step === 'turn') client.pressKey('1');
            // silence: the session's own timer (callerResponseTimeout) runs out.
            await waitFor(`the agent's answer to a ${step}`, async () => (await outbound()) > before, 20_000);
          }
          await waitFor('the end', async () => (await conversationRepo.find(h.database.db, c.id))?.ended_at != null, 20_000);
        } finally {
          client.stop();
        }
        return { conversationId: c.id, said };
      }
      // sip: the call started as voice/sip-calls.ts starts it (startCall), over the fake transport.
      const { db, live, opened, http, turns } = await agentOnCall(h, s.config, { direction: 'outbound', counterpart: nextTarget() });
      const transport = new FakeVoiceTransport();
      const tts = new ShortTts();
      const settings = voiceSettings(live);
      const { session, done } = await startCall({
        db, conversations: h.services.conversations, turns, stt: new ScriptedStt(s.steps.map(() => 'hola')), tts, now: Date.now, turnTimeoutMs: TURN_LIMIT_MS,
      }, transport, { conversation: opened.conversation, room: opened.room, config: live, settings, capabilities: CAPABILITIES.sip, opening: {} });
      const outbound = async () => (await messageRepo.ofConversation(db, opened.conversation.id)).filter((x) => x.direction === 'outbound').length;
      await waitFor('the greeting', async () => (await outbound()) >= 1 && session.phase === 'listening');
      for (const step of s.steps) {
        const before = await outbound();
        if (step === 'turn') transport.utter(settings.speakingTimeoutMs);
        await waitFor(`the agent's answer to a ${step}`, async () => (await outbound()) > before, 20_000);
        await waitFor('listening or ended', async () => session.phase === 'listening' || session.phase === 'ended', 20_000);
      }
      await done;
      await http.close();
      said.push(...tts.said.map((x) => `${x.language}:${x.text}`));
      return { conversationId: opened.conversation.id, said };
    }

    for (const s of SCENARIOS) {
      for (const path of PATHS) {
        it(`${s.name} — on ${path} (differences: ${s.differences})`, async () => {
          const asked = llm.requests.length;
          const { conversationId, said } = await run(path, s);
          if (s.offered) {
            const turns = llm.requests.slice(asked);
            assert.equal(turns.length, 1, 'one model turn');
            const transfer = turns[0]!.body.tools?.find((t) => t.function.name === 'transfer_call');
            const schema = transfer?.function.parameters as { properties: { destination: { enum: string[] } } } | undefined;
            assert.deepEqual(schema?.properties.destination.enum, s.offered[path], `the destinations offered on ${path}`);
          }
          const db = h.database.db;
          const lines = (await messageRepo.ofConversation(db, conversationId)).filter((m) => m.direction === 'outbound')
            .map((m) => [m.data ? (JSON.parse(m.data) as { kind: string }).kind : 'reply', m.text]);
          assert.deepEqual(lines, s.lines, `the agent's lines on ${path}`);
          const row = await waitFor('ended', async () => { const c = await conversationRepo.find(db, conversationId); return c?.ended_at != null && c; });
          assert.equal(row.outcome, s.outcome);
          assert.equal(row.messages_out, s.lines.length, 'the outbound count');
          assert.equal((await roomRepo.find(db, row.room_id))?.last_message, s.lines.at(-1)![1], 'the room\'s last message');
          if (path === 'gather') {
            // Each gathered reply's latency, as far as we can see it: Twilio listened and speaks.
            const latencies = await latencyRepo.ofConversations(db, [conversationId]);
            assert.equal(latencies.length, s.lines.filter(([k]) => k === 'reply').length, 'one latency per reply');
            for (const l of latencies) {
              assert.equal(l.path, 'gather');
              assert.deepEqual([l.endpoint_ms, l.stt_ms, l.tts_first_audio_ms, l.stt_engine, l.tts_engine], [null, null, null, 'twilio', 'twilio']);
              assert.ok(Number(l.llm_first_token_ms) >= 0 && Number(l.total_ms) >= Number(l.llm_first_token_ms), JSON.stringify(l));
            }
          }
          // Spoken (and, on Gather, listened for) in the agent's language.
          if (s.language) {
            if (path === 'gather') {
              for (const t of said) for (const m of t.matchAll(/<(?:Say|Gather) [^>]*language="([^"]+)"/g)) assert.equal(m[1], s.language, t);
            }
            if (path === 'sip') assert.ok(said.every((x) => x.startsWith(`${s.language}:`)), said.join('\n'));
          }
        });
      }
    }
  });
}
for (const engine of SKIPPED_ENGINES) describe(`one call policy on every path [${engine}]`, { skip: ENGINE_SKIP_REASON }, () => {});
