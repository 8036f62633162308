// Simulated calls are conversations (issue 36, docs/tasks.md "Simulated calls"), on both engines: a
// call task on the SIMULATED carrier runs the agent's live configuration against a simulated caller
// (the task's context as its persona, or the default one) through the turn runner, and records a
// real conversation on the `simulated` channel that the task's result names. With a scripted model
// on loopback: the caller is told the task's context, the agent's webhook action is answered and
// never called (a real receiver gets nothing; tool_effects say mocked), the transcript and the logs
// show it labelled. Offline (the SIMULATED model engine): the turn limit bounds it, and the rules
// analyse it after the end like any call.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BOOK_SLOT, system, type Body } from '../helpers/agent-test-models.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { waitFor } from '../helpers/wait.ts';

const PHONE = '+15551230000';

/** The agent books with book_slot when asked and says goodbye with end_conversation; the caller asks, then says bye. */
function reply(b: Body) {
  if (b.response_format) return { text: JSON.stringify({ summary: 'Sam booked Tuesday.', leadRating: 3, leadRatingReason: 'Booked.', fields: {} }) };
  if (system(b).startsWith('You are playing a caller')) {
    const mine = b.messages.filter((m) => m.role === 'assistant').length;
    if (mine === 0) return { text: 'Hello? Yes, this is Sam. Please book me for Tuesday.' };
    if (mine === 1) return { text: 'Perfect, thanks, bye.' };
    return { text: '[END]' };
  }
  const last = b.messages.at(-1)!;
  if (last.role === 'tool') return { text: 'You are booked for Tuesday at 9:00.' };
  if (/bye/i.test(last.content ?? '')) return { text: 'Goodbye, Sam!', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'done' } }] };
  if (/book/i.test(last.content ?? '')) return { toolCalls: [{ name: 'book_slot', arguments: { day: 'Tuesday' } }] };
  return { text: 'How can I help?' };
}

async function finished(h: Harness, token: string, id: string) {
  return waitFor(`task ${id} to end`, async () => {
    const res = await h.call('GET', `/api/v2/tasks/${id}`, { token });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const t = res.body.task ?? res.body;
    return ['finished', 'failed', 'canceled'].includes(t.state) ? t : undefined;
  }, 20_000, 50);
}

for (const engine of ENGINES) {
  describe(`simulated calls are conversations [${engine}]`, () => {
    describe('with a model', () => {
      let h: Harness;
      let llm: FakeLlm;
      let hook: Receiver;
      before(async () => {
        llm = await startFakeLlm({ models: ['agent-model'] });
        llm.respond = reply;
        hook = await startReceiver();
        h = await startHarness(engine, {
          CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'agent-model', CALLPLANE_LLM_MAX_RETRIES: '0',
          CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_SIMULATED_CALL_SECONDS: '0.2',
        }, { worker: true, analyses: true, runtime: { pollMs: 50 } });
      });
      after(async () => { await h?.close(); await llm?.close(); await hook?.close(); });

      it('a call task records the conversation its simulated caller had with the agent, labelled SIMULATED, and nothing leaves', async () => {
        const r = await h.reseller();
        const o = await h.organization(r.id);
        const staged = await h.call('POST', '/api/v2/agent', { token: o.token, body: {
          agentInstructions: 'Book appointments.', agentModel: 'agent-model', welcomeMessage: 'Hi, this is the clinic calling.',
          actions: ['hangup'], webhookActions: [{ ...BOOK_SLOT, url: `${hook.url}/book` }],
        } });
        assert.equal(staged.status, 200, JSON.stringify(staged.body));
        assert.equal((await h.call('POST', '/api/v2/agent/publish', { token: o.token })).status, 200);
        const created = await h.call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: PHONE, context: 'Sam wants his cleaning moved to Tuesday.' } });
        assert.ok(created.status === 200 || created.status === 201, JSON.stringify(created.body));
        const taskId = (created.body.task ?? created.body).id as string;
        const t = await finished(h, o.token, taskId);
        assert.equal(t.state, 'finished', JSON.stringify(t));
        assert.equal(t.result.simulated, true);
        assert.equal(t.result.outcome, 'completed');
        assert.match(t.result.note, /^SIMULATED: .*simulated caller/);
        const c = t.result.conversation;
        assert.equal(c.persona, 'task context');
        assert.equal(c.simulatedCaller, false);
        assert.equal(c.outcome, 'ended_by_agent');
        assert.equal(c.turns, 2);

        // The caller followed the task's context as its persona.
        const callerAsks = llm.requests.filter((q) => system(q.body).startsWith('You are playing a caller'));
        assert.ok(callerAsks.length >= 2);
        assert.match(system(callerAsks[0]!.body), /Sam wants his cleaning moved to Tuesday/);

        // The transcript: the greeting, the caller's lines, the agent's, the mocked tool; on the simulated channel.
        const res = await h.call('GET', `/api/v2/conversation/${c.roomId}/${c.conversationId}`, { token: o.token });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        const conv = res.body[0];
        assert.equal(conv.channel, 'simulated');
        assert.equal(conv.eventType, 'call');
        assert.equal(conv.direction, 'outbound');
        const said = res.body[0].conversation.map((m: { direction: string; message: string }) => `${m.direction}: ${m.message}`);
        assert.deepEqual(said.filter((l: string) => !l.startsWith('tool')), [
          'outbound: Hi, this is the clinic calling.',
          'inbound: Hello? Yes, this is Sam. Please book me for Tuesday.',
          'outbound: You are booked for Tuesday at 9:00.',
          'inbound: Perfect, thanks, bye.',
          'outbound: Goodbye, Sam!',
        ]);
        // The webhook action was answered, never called.
        assert.equal(hook.requests.length, 0, 'no webhook action reached the receiver');
        const effects = await h.database.db.selectFrom('tool_effects').select(['tool', 'state', 'outcome']).where('conversation_id', '=', c.conversationId).execute();
        assert.deepEqual(effects.map((e) => [e.tool, e.state]), [['book_slot', 'mocked']]);
        assert.match(effects[0]!.outcome!, /SIMULATED call: book_slot was not run/);
        const row = await h.database.db.selectFrom('conversations').select(['task_id', 'carrier_ref', 'state', 'outcome_detail']).where('id', '=', c.conversationId).executeTakeFirstOrThrow();
        assert.equal(row.task_id, taskId);
        assert.equal(row.carrier_ref, `sim_call_${taskId}`);
        assert.equal(JSON.parse(row.state).simulated.carrier, 'simulated');

        // The logs find it by its task, labelled by its channel; the analysis after the call ran on it.
        const logs = await h.call('GET', '/api/v2/logs', { token: o.token, query: { taskId, fields: 'uuid,channel,eventType,outcome,taskId' } });
        assert.equal(logs.status, 200, JSON.stringify(logs.body));
        const entries = logs.body.logs ?? logs.body.data ?? logs.body;
        assert.deepEqual(entries.map((e: Record<string, unknown>) => [e.uuid, e.channel, e.eventType, e.taskId]), [[c.conversationId, 'simulated', 'call', taskId]]);
        await waitFor('the analysis to ask the model', async () => llm.requests.some((q) => q.body.response_format && JSON.stringify(q.body.messages).includes('Perfect, thanks, bye')) || undefined, 10_000, 50);
      });
    });

    describe('offline (the SIMULATED model engine)', () => {
      let h: Harness;
      before(async () => {
        h = await startHarness(engine, { CALLPLANE_SIMULATED_CALL_SECONDS: '0' }, { worker: true, analyses: true, runtime: { pollMs: 50 }, simulatedCalls: { maxTurns: 3 } });
      });
      after(async () => { await h?.close(); });

      it('the default persona talks until the turn limit, and the rules analyse the call', async () => {
        const r = await h.reseller();
        const o = await h.organization(r.id);
        const created = await h.call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: PHONE } });
        const taskId = (created.body.task ?? created.body).id as string;
        const t = await finished(h, o.token, taskId);
        assert.equal(t.state, 'finished', JSON.stringify(t));
        const c = t.result.conversation;
        assert.equal(c.persona, 'default');
        assert.equal(c.simulatedCaller, true);
        assert.equal(c.turns, 3);
        assert.equal(c.outcome, 'completed');
        const res = await h.call('GET', `/api/v2/conversation/${c.roomId}/${c.conversationId}`, { token: o.token });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        const lines = res.body[0].conversation as Array<{ direction: string }>;
        assert.equal(lines.filter((m) => m.direction === 'inbound').length, 3);
        const row = await h.database.db.selectFrom('conversations').select(['outcome_detail', 'engine']).where('id', '=', c.conversationId).executeTakeFirstOrThrow();
        assert.equal(row.outcome_detail, 'SIMULATED call: turn limit (3) reached');
        assert.equal(row.engine, 'simulated');
        const analysed = await waitFor('the analysis', async () => {
          const got = await h.call('GET', `/api/v2/conversation/${c.roomId}/${c.conversationId}`, { token: o.token });
          return got.body[0].analysisStatus === 'done' ? got.body[0] : undefined;
        }, 10_000, 50);
        assert.equal(analysed.channel, 'simulated');
        // Usage: the conversation, and the model's tokens, labelled SIMULATED (the engine's), the agent's and the caller's.
        const usage = await h.call('GET', '/api/v2/stats/usage', { token: o.token, query: { allItems: true } });
        assert.equal(usage.status, 200, JSON.stringify(usage.body));
        assert.equal(usage.body.usage.conversations, 1);
        assert.equal(usage.body.usage.testConversations, 0);
        assert.ok(usage.body.usage.simulatedTokens > 0 && usage.body.usage.simulatedTokens === usage.body.usage.modelTokens, JSON.stringify(usage.body.usage));
        // One conversation per task.
        const all = await h.database.db.selectFrom('conversations').select('id').where('task_id', '=', taskId).execute();
        assert.equal(all.length, 1);
      });
    });
  });
}
