// Issue 37 in conversations (docs/campaigns.md): a request not to be called again,
// recognised by the analysis after the conversation (the SIMULATED rules offline, or a model's
// answer), puts the number on the organization's do-not-call list with the conversation as
// evidence; and redaction (an organization setting) replaces personal data before messages are
// stored, so the transcript, the webhooks and the logs' CSV carry placeholders. Both engines, a
// real HTTP receiver for the webhooks, the fake model server for the model's answer.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { ENGINE_SKIP_REASON, ENGINES, SKIPPED_ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { analysisRepo } from '../../src/modules/conversations/repository.ts';
import type { AnalysisRow } from '../../src/db/types.ts';

const FAST = { leaseMs: 5000, heartbeatMs: 500, rescueEveryMs: 500 };
let seq = 0;
const person = () => `+1415555${String(2000 + ++seq)}`;

async function settled(h: Harness, id: string): Promise<AnalysisRow> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const a = await analysisRepo.find(h.database.db, id);
    if (a && (a.state === 'finished' || a.state === 'failed')) return a;
    if (Date.now() > deadline) throw new Error(`the analysis of ${id} did not settle`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A message from `from` to the organization's agent; resolves with the agent's reply webhook. */
async function converse(h: Harness, reseller: { token: string }, agentId: number, hook: Receiver, from: string, message: string) {
  const res = await h.call('POST', '/api/v2/agent/receiveMessage', {
    token: reseller.token, body: { targetAgent: String(agentId), sourceAddress: from, message, outboundMessageWebhookUrl: `${hook.url}/reply` },
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const deadline = Date.now() + 15_000;
  for (;;) {
    const reply = hook.requests.filter((r) => r.path === '/reply').map((r) => JSON.parse(r.body.toString('utf8'))).find((p) => p.inReplyTo === res.body.messageUuid);
    if (reply) return reply as { conversationUuid: string; roomId: string; message: string };
    if (Date.now() > deadline) throw new Error('no reply');
    await new Promise((r) => setTimeout(r, 30));
  }
}

async function endIt(h: Harness, id: string) {
  assert.ok(await h.services.conversations.end(id, 'ended_by_agent', null));
}

for (const engine of SKIPPED_ENGINES) describe(`compliance in conversations [${engine}]`, { skip: ENGINE_SKIP_REASON }, () => {});

for (const engine of ENGINES) {
  describe(`spoken opt-out, SIMULATED analysis [${engine}]`, () => {
    let h: Harness;
    let hook: Receiver;
    before(async () => {
      h = await startHarness(engine, { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, { turns: true, deliveries: true, deliveryRuntime: FAST, analyses: true, analysisRuntime: FAST });
      hook = await startReceiver();
    });
    after(async () => { await h.close(); await hook.close(); });

    it('"take me off your list, don\'t call me again" ends as outcome do-not-call and the number on the list, the conversation its evidence; other words do not', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const from = person();
      const c = await converse(h, r, o.agentId, hook, from, 'Please take me off your list and don\'t call me again.');
      await endIt(h, c.conversationUuid);
      const a = await settled(h, c.conversationUuid);
      assert.equal(a.engine, 'simulated');
      const answer = JSON.parse(a.answer!);
      assert.equal(answer.outcome, 'do-not-call');
      assert.match(answer.leadRatingReason, /^rules:/);
      const entry = await h.call('GET', '/api/v2/do-not-call', { token: o.token, query: { number: from } });
      assert.equal(entry.body.total, 1, JSON.stringify(entry.body));
      assert.deepEqual([entry.body.numbers[0].source, entry.body.numbers[0].evidence], ['call-analysis', c.conversationUuid]);
      const task = await h.call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: from, scheduledFor: Math.floor(Date.now() / 1000) + 3600 } });
      assert.equal(task.status, 422);
      // "Call me again tomorrow" is a callback, not an opt-out.
      const other = person();
      const c2 = await converse(h, r, o.agentId, hook, other, 'Busy now, call me again tomorrow.');
      await endIt(h, c2.conversationUuid);
      assert.equal(JSON.parse((await settled(h, c2.conversationUuid)).answer!).outcome, 'callback-requested');
      assert.equal((await h.call('GET', '/api/v2/do-not-call', { token: o.token, query: { number: other } })).body.total, 0);
    });
  });

  describe(`spoken opt-out, a model's analysis [${engine}]`, () => {
    let h: Harness;
    let hook: Receiver;
    let llm: FakeLlm;
    before(async () => {
      llm = await startFakeLlm({ models: ['fake-model'] });
      h = await startHarness(engine, {
        CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0',
      }, { turns: true, deliveries: true, deliveryRuntime: FAST, analyses: true, analysisRuntime: FAST });
      hook = await startReceiver();
    });
    after(async () => { await h.close(); await hook.close(); await llm.close(); });

    it('the model is offered do-not-call among the outcomes; its answer do-not-call puts the number on the list', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const from = person();
      llm.script.push({ text: 'Understood, sorry to bother you.' });
      const c = await converse(h, r, o.agentId, hook, from, 'Whoever this is, I never want to hear from you people again.');
      llm.script.push({ text: JSON.stringify({ summary: 'The person asked never to be contacted again.', outcome: 'do-not-call', leadRating: 1, leadRatingReason: 'opted out', fields: {} }) });
      await endIt(h, c.conversationUuid);
      const a = await settled(h, c.conversationUuid);
      assert.equal(a.engine, 'model', a.last_error ?? '');
      const asked = llm.requests.at(-1)!.body as any;
      assert.ok(asked.response_format.json_schema.schema.properties.outcome.enum.includes('do-not-call'));
      const entry = await h.call('GET', '/api/v2/do-not-call', { token: o.token, query: { number: from } });
      assert.deepEqual([entry.body.total, entry.body.numbers[0]?.source, entry.body.numbers[0]?.evidence], [1, 'call-analysis', c.conversationUuid]);
    });
  });

  describe(`redaction of personal data [${engine}]`, () => {
    let h: Harness;
    let hook: Receiver;
    before(async () => {
      h = await startHarness(engine, { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, { turns: true, deliveries: true, deliveryRuntime: FAST, analyses: true, analysisRuntime: FAST });
      hook = await startReceiver();
    });
    after(async () => { await h.close(); await hook.close(); });

    const SAID = 'My card is 4111 1111 1111 1111, SSN 123-45-6789, mail jane.roe@example.com, phone (415) 555-2671, I live at 1600 Pennsylvania Avenue, Washington, DC 20500.';
    const PLANTED = ['4111 1111 1111 1111', '123-45-6789', 'jane.roe@example.com', '(415) 555-2671', '1600 Pennsylvania Avenue'];

    it('with redaction on, the stored transcript, the reply and conversation webhooks and the logs\' CSV carry placeholders; off (the default), the words as said', async () => {
      const r = await h.reseller();
      const on = await h.organization(r.id);
      const off = await h.organization(r.id);
      const settings = await h.call('GET', '/api/v2/compliance/settings', { token: on.token });
      assert.equal(settings.body.settings.redactPersonalData, false, 'off by default');
      const set = await h.call('POST', '/api/v2/compliance/settings', { token: on.token, body: { redactPersonalData: true } });
      assert.equal(set.status, 200, JSON.stringify(set.body));
      for (const o of [on, off]) {
        const sub = await h.call('POST', '/api/v2/webhooks', { token: o.token, body: { url: `${hook.url}/events/${o.id}`, label: 'c', type: 'conversation' } });
        assert.equal(sub.status, 201, JSON.stringify(sub.body));
      }
      const results: Record<string, string[]> = {};
      for (const [name, o] of [['on', on], ['off', off]] as const) {
        const reply = await converse(h, r, o.agentId, hook, person(), SAID);
        await endIt(h, reply.conversationUuid);
        await settled(h, reply.conversationUuid);
        const transcript = await h.call('GET', `/api/v2/conversation/${reply.roomId}/${reply.conversationUuid}`, { token: o.token });
        assert.equal(transcript.status, 200, JSON.stringify(transcript.body));
        const event = await (async () => {
          const deadline = Date.now() + 15_000;
          for (;;) {
            const got = hook.requests.filter((q) => q.path === `/events/${o.id}`).map((q) => q.body.toString('utf8')).find((b) => JSON.parse(b).type === 'conversation');
            if (got) return got;
            if (Date.now() > deadline) throw new Error('no conversation event');
            await new Promise((res) => setTimeout(res, 50));
          }
        })();
        const csv = await h.call('GET', '/api/v2/logs', { token: o.token, query: { format: 'csv', fields: 'uuid,transcript,summary' } });
        assert.equal(csv.status, 200);
        const stored = await h.database.db.selectFrom('conversation_messages').select('text').where('conversation_id', '=', reply.conversationUuid).execute();
        const room = await h.database.db.selectFrom('conversation_rooms').select('last_message').where('org_id', '=', o.id).executeTakeFirstOrThrow();
        results[name] = [JSON.stringify(transcript.body), reply.message, event, String(csv.body), JSON.stringify(stored), room.last_message ?? ''];
      }
      const where = ['transcript', 'reply webhook', 'conversation webhook', 'logs CSV', 'stored messages', 'room\'s last message'];
      results.on!.forEach((text, i) => {
        for (const p of PLANTED) assert.ok(!text.includes(p), `${where[i]} still holds ${p}: ${text.slice(0, 400)}`);
      });
      for (const i of [0, 2, 3, 4]) {
        for (const tag of ['[card]', '[ssn]', '[email]', '[phone]', '[address]']) assert.ok(results.on![i]!.includes(tag), `${where[i]} lacks ${tag}`);
        for (const p of PLANTED) assert.ok(results.off![i]!.includes(p), `${where[i]} without redaction lost ${p}`);
      }
      // The SIMULATED agent echoes what it was told: its reply is redacted in the webhook too.
      assert.match(results.on![1]!, /\[card\]/);
    });
  });
}
