// The staging test chat (POST /api/v2/agent/{agentId}/testMessage, a callplane extension), on both
// engines, against the fake model server on loopback: the turn runs on the STAGING configuration
// (not live), the reply is answered at once, a session keeps its history and another starts afresh,
// the staging welcome message opens a session, bad input is a 400 naming the field, and an agent
// outside the caller's subtree is 404.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
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
