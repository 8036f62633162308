// The staging test chat (POST /api/v2/agent/{agentId}/testMessage, a callplane extension), on both
// engines, against the fake model server on loopback: the turn runs on the STAGING configuration
// (not live), the reply is answered at once, a session keeps its history and another starts afresh,
// the staging welcome message opens a session, bad input is a 400 naming the field, and an agent
// outside the caller's subtree is 404.
// @engines sqlite
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { liveRepo } from '../../src/modules/conversations/repository.ts';
import { conversationService } from '../../src/modules/conversations/service.ts';
import { policyFromConfig } from '../../src/webhooks/ssrf.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';

for (const engine of ENGINES) {
  describe(`staging test chat [${engine}]`, () => {
    let h: Harness;
    let llm: FakeLlm;
    before(async () => {
      llm = await startFakeLlm({ models: ['fake-model'] });
      h = await startHarness(engine, {
        CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0',
      });
    });
    after(async () => { await h?.close(); await llm?.close(); });

    it('answers from the staging configuration, keeps a session\'s turns, and starts afresh in another session', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id, { orgName: `Staging Test ${engine}` });
      // Live says one thing; staging another, not yet published.
      assert.equal((await h.call('POST', '/api/v2/agent', { token: o.token, body: { agentInstructions: 'LIVE: you are Ada.' } })).status, 200);
      assert.equal((await h.call('POST', '/api/v2/agent/publish', { token: o.token })).status, 200);
      assert.equal((await h.call('POST', '/api/v2/agent', { token: o.token, body: { agentInstructions: 'STAGED: talk like a pirate.', welcomeMessage: 'Ahoy there!' } })).status, 200);

      llm.script.push({ text: 'Arr, what day suits ye?' });
      const first = await h.call('POST', `/api/v2/agent/camp${o.agentId}/testMessage`, { token: o.token, body: { text: 'Can I book a cleaning?', session: 's1' } });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.equal(first.body.reply, 'Arr, what day suits ye?');
      assert.equal(first.body.welcome, 'Ahoy there!');
      assert.equal(first.body.ended, false);
      assert.equal(first.body.engine, 'model');
      const system = llm.requests.at(-1)!.body.messages[0]!.content!;
      assert.match(system, /STAGED: talk like a pirate\./);
      assert.doesNotMatch(system, /LIVE: you are Ada/);

      // The same session: the model sees the earlier turn; no second welcome.
      llm.script.push({ text: 'Tuesday it be.' });
      const second = await h.call('POST', `/api/v2/agent/${o.agentId}/testMessage`, { token: o.token, body: { text: 'Tuesday?', session: 's1' } });
      assert.equal(second.status, 200, JSON.stringify(second.body));
      assert.equal(second.body.welcome, undefined);
      assert.equal(second.body.conversationUuid, first.body.conversationUuid);
      const said = JSON.stringify(llm.requests.at(-1)!.body.messages);
      assert.match(said, /Can I book a cleaning\?/);
      assert.match(said, /Arr, what day suits ye\?/);

      // Another session: a new conversation, without the first one's turns.
      llm.script.push({ text: 'Fresh start.' });
      const other = await h.call('POST', `/api/v2/agent/camp${o.agentId}/testMessage`, { token: r.token, body: { text: 'Hello' } });
      assert.equal(other.status, 200, JSON.stringify(other.body));
      assert.notEqual(other.body.conversationUuid, first.body.conversationUuid);
      assert.doesNotMatch(JSON.stringify(llm.requests.at(-1)!.body.messages), /Can I book a cleaning/);
    });

    it('keeps its sessions apart (issue 33): channel test, out of the inbox, logs and live feed unless asked for, test usage not billed, ended after 5 idle minutes', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id, { orgName: `Staging Apart ${engine}` });
      llm.script.push({ text: 'A test reply.' });
      const sent = await h.call('POST', `/api/v2/agent/${o.agentId}/testMessage`, { token: o.token, body: { text: 'Just trying', session: 'apart' } });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const db = h.database.db;
      const c = await db.selectFrom('conversations').selectAll().where('id', '=', sent.body.conversationUuid).executeTakeFirstOrThrow();
      assert.equal(c.channel, 'test');
      assert.ok(Number(c.tokens_in) + Number(c.tokens_out) > 0);

      // The inbox: left out, unless includeTest.
      const inbox = await h.call('GET', '/api/v2/conversations', { token: o.token });
      assert.equal(inbox.status, 200, JSON.stringify(inbox.body));
      assert.equal(inbox.body.totalRooms, 0, JSON.stringify(inbox.body));
      const withTest = await h.call('GET', '/api/v2/conversations', { token: o.token, query: { includeTest: true } });
      assert.equal(withTest.body.totalRooms, 1);
      assert.equal(withTest.body.rooms[0].counterpartKind, 'test');
      // The logs: left out, unless channel=test or includeTest.
      const logs = await h.call('GET', '/api/v2/logs', { token: o.token });
      assert.equal(logs.status, 200, JSON.stringify(logs.body));
      assert.equal(JSON.stringify(logs.body).includes(c.id), false, 'not in the logs by default');
      for (const query of [{ channel: 'test' }, { includeTest: 'true' }]) {
        const shown = await h.call('GET', '/api/v2/logs', { token: o.token, query });
        assert.equal(shown.status, 200, JSON.stringify(shown.body));
        assert.ok(JSON.stringify(shown.body).includes(c.id), `in the logs with ${JSON.stringify(query)}`);
      }
      const bad = await h.call('GET', '/api/v2/logs', { token: o.token, query: { includeTest: 'maybe' } });
      assert.equal(bad.status, 400);
      assert.match(bad.body.message, /includeTest/);
      // The live feed's snapshot: not in progress there.
      assert.deepEqual(await liveRepo.open(db, { id: o.id, kind: 'organization' }, 100), []);

      // Usage: test usage, apart from what is billed.
      const usage = await h.call('GET', '/api/v2/stats/usage', { token: o.token, query: { allItems: true } });
      assert.equal(usage.status, 200, JSON.stringify(usage.body));
      assert.equal(usage.body.usage.modelTokens, 0, JSON.stringify(usage.body.usage));
      assert.equal(usage.body.usage.testTokens, Number(c.tokens_in) + Number(c.tokens_out));

      // Idle for 5 minutes: ended (not shown in progress for the whole 30-minute idle window), counted as a test conversation.
      const later = conversationService({
        db, config: h.config, policy: policyFromConfig(h.config), agents: {} as never, turns: h.turns.producer, analyses: h.analyses.producer, wakeDeliveries: () => {},
        now: () => Date.now() + 5 * 60_000 + 1000,
      } as never);
      assert.ok(await later.closeIdle() >= 1);
      const ended = await db.selectFrom('conversations').select(['ended_at', 'outcome_detail']).where('id', '=', c.id).executeTakeFirstOrThrow();
      assert.notEqual(ended.ended_at, null);
      const after = await h.call('GET', '/api/v2/stats/usage', { token: o.token, query: { allItems: true } });
      assert.equal(after.body.usage.conversations, 0, JSON.stringify(after.body.usage));
      assert.equal(after.body.usage.testConversations, 1);
      // No analysis (a model cost) of a test session.
      assert.equal((await db.selectFrom('conversation_analyses').select('id').where('id', '=', c.id).execute()).length, 0);
    });

    it('a model failure is a 502 that keeps the provider\'s error to the server log', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      llm.script.push({ status: 500 });
      const failed = await h.call('POST', `/api/v2/agent/${o.agentId}/testMessage`, { token: o.token, body: { text: 'Hello?' } });
      assert.equal(failed.status, 502, JSON.stringify(failed.body));
      assert.equal(failed.body.success, false);
      assert.match(failed.body.message, /^The agent could not answer/);
      assert.doesNotMatch(failed.body.message, /scripted failure/);
      assert.ok(failed.body.requestId);
    });

    it('refuses bad input naming the field, and agents outside the caller\'s subtree', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const other = await h.organization((await h.reseller()).id);
      const empty = await h.call('POST', `/api/v2/agent/camp${o.agentId}/testMessage`, { token: o.token, body: { text: '   ' } });
      assert.equal(empty.status, 400);
      assert.match(empty.body.message, /text must be 1–2000 characters/);
      const badSession = await h.call('POST', `/api/v2/agent/camp${o.agentId}/testMessage`, { token: o.token, body: { text: 'hi', session: 'no spaces' } });
      assert.equal(badSession.status, 400);
      assert.match(badSession.body.message, /session/);
      const foreign = await h.call('POST', `/api/v2/agent/camp${other.agentId}/testMessage`, { token: o.token, body: { text: 'hi' } });
      assert.equal(foreign.status, 404);
    });
  });
}

describe('staging test chat without a model provider [sqlite]', () => {
  let h: Harness;
  before(async () => { h = await startHarness('sqlite'); });
  after(async () => { await h?.close(); });

  it('answers with the SIMULATED engine, labelled so', async () => {
    const r = await h.reseller();
    const o = await h.organization(r.id);
    const res = await h.call('POST', `/api/v2/agent/camp${o.agentId}/testMessage`, { token: o.token, body: { text: 'Is anyone there?' } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.simulated, true);
    assert.equal(res.body.engine, 'simulated');
    assert.match(res.body.reply, /You said: "Is anyone there\?"/);
  });
});

// Inline model turns are limited per organization (issue 33): concurrency and rate, 429 with
// Retry-After and a message, another organization unaffected (the web chat page's turns share the
// same limiter: src/platform.ts).
for (const engine of ENGINES) {
  describe(`inline model turns are limited per organization [${engine}]`, () => {
    let h: Harness;
    let llm: FakeLlm;
    before(async () => {
      llm = await startFakeLlm({ models: ['fake-model'] });
      h = await startHarness(engine, {
        CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0',
        CALLPLANE_INLINE_TURNS_CONCURRENT: '1', CALLPLANE_INLINE_TURNS_PER_MINUTE: '3',
      });
    });
    after(async () => { await h?.close(); await llm?.close(); });

    const send = (o: { agentId: number; token: string }, session: string) =>
      h.call('POST', `/api/v2/agent/${o.agentId}/testMessage`, { token: o.token, body: { text: 'Hello?', session } });

    it('one at a time and 3 a minute per organization; another organization still answered', async () => {
      const r = await h.reseller();
      const a = await h.organization(r.id);
      const b = await h.organization(r.id);
      // A slow answer holds organization a's only slot.
      llm.script.push({ text: 'Slow answer.', delayMs: 800 });
      const slow = send(a, 's1');
      await new Promise((res) => setTimeout(res, 200));
      const busy = await send(a, 's2');
      assert.equal(busy.status, 429, JSON.stringify(busy.body));
      assert.equal(busy.body.success, false);
      assert.match(busy.body.message, /at most 1 at once/);
      assert.ok(Number(busy.headers['retry-after']) >= 1);
      // Nothing was recorded for the refused message.
      assert.equal((await h.database.db.selectFrom('conversations').select('id').where('org_id', '=', a.id).execute()).length, 1);
      // Organization b is not held up by a.
      llm.script.push({ text: 'B answered.' });
      const other = await send(b, 's1');
      assert.equal(other.status, 200, JSON.stringify(other.body));
      assert.equal((await slow).status, 200);

      // Rate: a's refused turn did not count; two more start (3 in the minute), the next is refused.
      for (const session of ['s3', 's4']) {
        llm.script.push({ text: 'ok' });
        assert.equal((await send(a, session)).status, 200);
      }
      const limited = await send(a, 's5');
      assert.equal(limited.status, 429, JSON.stringify(limited.body));
      assert.match(limited.body.message, /at most 3 a minute/);
      assert.ok(Number(limited.headers['retry-after']) >= 1 && Number(limited.headers['retry-after']) <= 60);
    });
  });
}
