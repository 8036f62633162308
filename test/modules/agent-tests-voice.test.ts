// Agent tests in voice mode (issue 36, docs/testing-agents.md "Voice mode"): a run with mode voice
// calls the agent over a real loopback SIP leg (our SIP stack on both ends, RTP from src/media); the
// simulated caller's lines are spoken by espeak-ng into the call, the agent's session hears them
// with pocketsphinx and answers through the scripted model on loopback, and the caller hears the
// agent through pocketsphinx too. The checks read what the agent said (its lines as recorded), the
// mocked tool, its end of the call, and each turn's latency as the caller measured it — the
// turnLatencyMs check decides in voice mode, passing under a generous budget and failing under 1 ms.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { waitFor } from '../helpers/wait.ts';
import { BOOK_SLOT, system, type Body } from '../helpers/agent-test-models.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';

/** The agent answers by its turn (what pocketsphinx heard may vary): it books, then says goodbye and ends the call. */
function agent(b: Body) {
  const heard = b.messages.filter((m) => m.role === 'user').length;
  const last = b.messages.at(-1)!;
  if (last.role === 'tool') return { text: 'You are booked for Tuesday at nine.' };
  if (heard <= 1) return { toolCalls: [{ name: 'book_slot', arguments: { day: 'Tuesday' } }] };
  return { text: 'Goodbye.', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'done' } }] };
}

/** The caller: asks for a booking, thanks, then is done. */
function caller(b: Body) {
  const mine = b.messages.filter((m) => m.role === 'assistant').length;
  if (mine === 0) return { text: 'I would like to book a cleaning please.' };
  if (mine === 1) return { text: 'Thank you, goodbye.' };
  return { text: '[END]' };
}

describe('agent tests in voice mode, over SIP with espeak-ng and pocketsphinx', { skip: toolsSkip('espeak-ng', 'pocketsphinx') }, () => {
  let h: Harness;
  let llm: FakeLlm;
  let hook: Receiver;
  before(async () => {
    llm = await startFakeLlm({ models: ['agent-model', 'caller-model'] });
    llm.respond = (b) => (b.model === 'caller-model' || system(b).startsWith('You are playing a caller') ? caller(b) : agent(b));
    hook = await startReceiver();
    h = await startHarness('sqlite', {
      CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'agent-model', CALLPLANE_LLM_MAX_RETRIES: '0',
      CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_STT: 'offline', CALLPLANE_TTS: 'offline',
    }, { agentTests: true, agentTestRuntime: { pollMs: 50 } });
  });
  after(async () => { await h?.close(); await llm?.close(); await hook?.close(); });

  it('the caller speaks into a real call, the checks read what the agent said, and each turn\'s latency decides', async () => {
    const r = await h.reseller();
    const o = await h.organization(r.id);
    const agentId = `camp${o.agentId}`;
    const staged = await h.call('POST', '/api/v2/agent', { token: o.token, body: {
      agentInstructions: 'Book cleanings.', agentModel: 'agent-model', welcomeMessage: 'Hello, this is the dental clinic.', actions: ['hangup'],
      webhookActions: [{ ...BOOK_SLOT, url: `${hook.url}/book` }],
    } });
    assert.equal(staged.status, 200, JSON.stringify(staged.body));
    const scenario = (name: string, budgetMs: number) => ({
      name, persona: { instructions: 'You are Sam and want a cleaning on Tuesday.', language: 'en-US', voice: 'female' }, maxTurns: 4,
      toolMocks: [{ tool: 'book_slot', args: { day: 'Tuesday' }, result: { ok: true } }],
      checks: [{ said: 'booked for Tuesday' }, { neverSaid: 'many slots' }, { toolCalled: { name: 'book_slot' } }, { endedCall: true }, { turnLatencyMs: budgetMs }],
    });
    const suite = await h.call('POST', `/api/v2/agent/${agentId}/tests/suites`, { token: o.token, body: {
      name: 'Voice', settings: { callerModel: 'agent-model', concurrency: 1 }, scenarios: [scenario('within budget', 15_000), scenario('impossible budget', 1)],
    } });
    assert.equal(suite.status, 201, JSON.stringify(suite.body));
    const started = await h.call('POST', `/api/v2/agent/${agentId}/tests/runs`, { token: o.token, body: { suiteId: suite.body.suite.id, mode: 'voice' } });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    assert.equal(started.body.run.mode, 'voice');
    const id = started.body.run.id as string;
    const done = await waitFor(`voice run ${id}`, async () => {
      const res = await h.call('GET', `/api/v2/agent/${agentId}/tests/runs/${id}`, { token: o.token });
      return ['finished', 'failed', 'canceled'].includes(res.body.run.state) ? res.body : undefined;
    }, 120_000, 200);
    assert.equal(done.run.state, 'finished', JSON.stringify(done.run));
    const [ok, impossible] = done.results.scenarios;
    const it0 = ok.iterations[0];
    type V = { check: string; passed: boolean | null; decides: boolean; reason: string };
    const by = (it: { checks: V[] }): Record<string, V> => Object.fromEntries(it.checks.map((v) => [v.check, v]));
    const v = by(it0);
    assert.equal(v.said!.passed, true, v.said!.reason);
    assert.equal(v.neverSaid!.passed, true);
    assert.equal(v.toolCalled!.passed, true, v.toolCalled!.reason);
    assert.equal(v.endedCall!.passed, true, JSON.stringify(it0));
    // Two agent turns answered the caller's two lines, each measured from the end of its line.
    assert.equal(it0.voice.latenciesMs.length, 2, JSON.stringify(it0.voice));
    for (const ms of it0.voice.latenciesMs) assert.ok(ms > 50 && ms < 15_000, `latency ${ms} ms`);
    assert.equal(v.turnLatencyMs!.decides, true);
    assert.equal(v.turnLatencyMs!.passed, true, v.turnLatencyMs!.reason);
    assert.equal(it0.voice.bargeIns, 0);
    // What the caller heard: the greeting and both answers, through the recogniser.
    assert.equal(it0.voice.heard.filter((l: { who: string }) => l.who === 'agent').length, 3, JSON.stringify(it0.voice.heard));
    assert.equal(ok.passed, true, JSON.stringify(ok, null, 1));
    // The same conversation under a 1 ms budget: the latency check decides, and fails.
    const w = by(impossible.iterations[0]);
    assert.equal(w.turnLatencyMs!.decides, true);
    assert.equal(w.turnLatencyMs!.passed, false, w.turnLatencyMs!.reason);
    assert.equal(impossible.passed, false);

    // The transcript: the agent's lines as it said them, on the test channel; the webhook was never called.
    const conv = await h.database.db.selectFrom('conversations').select(['channel', 'outcome']).where('id', '=', it0.conversationId).executeTakeFirstOrThrow();
    assert.deepEqual(conv, { channel: 'test', outcome: 'ended_by_agent' });
    const said = await h.database.db.selectFrom('conversation_messages').select('text').where('conversation_id', '=', it0.conversationId).where('direction', '=', 'outbound').orderBy('at').execute();
    assert.deepEqual(said.map((m) => m.text), ['Hello, this is the dental clinic.', 'You are booked for Tuesday at nine.', 'Goodbye.']);
    assert.equal(hook.requests.length, 0);
    const latencies = await h.database.db.selectFrom('turn_latencies').select('total_ms').where('conversation_id', '=', it0.conversationId).execute();
    assert.equal(latencies.length, 2, 'the agent\'s side recorded each turn\'s latency too');
  });
});
