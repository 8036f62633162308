// An API process's streamed calls (Twilio Media Streams) drain on SIGTERM the way a worker's SIP
// calls do (src/lib/drain-calls.ts, used by src/main.ts; docs/deploy.md): a call in progress keeps
// the drain waiting until the caller hangs up; a call still up when the drain time has passed hears
// the agent's closing line and is ended by us.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { drainCalls } from '../../src/lib/drain-calls.ts';
import { conversationRepo } from '../../src/modules/conversations/repository.ts';
import { FakeMediaStream } from '../helpers/fake-media-stream.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { startFakeTwilio, type FakeTwilio } from '../helpers/fake-twilio.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { freePort, waitFor } from '../helpers/wait.ts';

const FROM = '+15005550006';
const RUNTIME = { leaseMs: 3000, heartbeatMs: 50, rescueEveryMs: 0, carrierOptions: { twilio: { timeoutMs: 1500 }, simulated: { callSeconds: 0.05 } } };
const unescapeXml = (s: string) => s.replace(/&quot;/g, '"').replace(/&apos;/g, '\'').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
const loud = (f: Int16Array) => Math.sqrt(f.reduce((s, x) => s + x * x, 0) / f.length) > 300;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = { info: () => {} };

describe('an API process drains its streamed calls', { skip: toolsSkip('espeak-ng') }, () => {
  let h: Harness;
  let llm: FakeLlm;
  let fake: FakeTwilio;
  let target = 0;
  before(async () => {
    llm = await startFakeLlm({ models: ['fake-model'] });
    fake = await startFakeTwilio();
    const port = await freePort();
    h = await startHarness('sqlite', {
      CALLPLANE_PUBLIC_URL: `http://127.0.0.1:${port}`, CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_TWILIO_VOICE: 'stream',
      CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0',
    }, { worker: true, runtime: RUNTIME });
    await h.app.listen({ port, host: '127.0.0.1' });
  });
  after(async () => {
    await h?.close();
    await fake?.close();
    await llm?.close();
  });

  /** A streamed call of a new organization's agent, answered, its stream connected and the welcome heard. */
  async function streamedCall() {
    const r = await h.reseller();
    const o = await h.organization(r.id);
    const provider = await h.call('POST', '/api/v2/numberingProvider', {
      token: r.token, query: { targetOrganizationId: o.id },
      body: { providerId: 'twilio', config: { accountSid: fake.accountSid, authToken: fake.authToken, phoneNumber: FROM, apiBaseUrl: fake.url } },
    });
    assert.equal(provider.status, 200, JSON.stringify(provider.body));
    const agentToken = await h.tokenFor(o.agentId);
    assert.equal((await h.call('POST', '/api/v2/agent', { token: agentToken, body: { welcomeMessage: 'Hello there.', callerResponseTimeout: 60 } })).status, 200);
    assert.equal((await h.call('POST', '/api/v2/agent/publish', { token: agentToken })).status, 200);
    const created = await h.call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: `+1415555${String(7000 + ++target)}` } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.task.id as string;
    const sid = await waitFor('placed', async () => {
      const t = (await h.call('GET', `/api/v2/tasks/${id}`, { token: o.token })).body.task;
      return t.state === 'running' && typeof t.providerRef === 'string' && t.providerRef as string;
    });
    const twiml = (await fake.fetchTwiml(sid)).body;
    const m = /<Stream url="([^"]+)"><Parameter name="token" value="([^"]+)"\/>/.exec(twiml);
    assert.ok(m, twiml);
    const conversation = (await conversationRepo.byCarrierRef(h.database.db, o.id, sid))!;
    const client = await FakeMediaStream.connect({ url: unescapeXml(m[1]!), callSid: sid, accountSid: fake.accountSid, parameters: { token: unescapeXml(m[2]!) } });
    await waitFor('the welcome', async () => client.heard.filter(loud).length >= 10, 15_000);
    return { client, conversation, sid };
  }

  it('waits for a call in progress to end by itself: the drain ends when the caller hangs up', async () => {
    const call = await streamedCall();
    try {
      assert.equal(h.services.mediaStreams.active, 1);
      let drained = false;
      const drain = drainCalls(h.services.mediaStreams, 30_000, log).then(() => { drained = true; });
      await sleep(800);
      assert.equal(drained, false, 'the call is still up: the drain waits');
      call.client.stop();
      await drain;
      assert.equal(h.services.mediaStreams.active, 0);
      const ended = await waitFor('ended', async () => { const c = await conversationRepo.find(h.database.db, call.conversation.id); return c?.ended_at != null && c; });
      assert.equal(ended.outcome, 'hung_up', 'the caller ended it, not the drain');
    } finally {
      await call.client.close();
    }
  });

  it('a call still up when the drain time has passed hears the closing line and is ended by the agent', async () => {
    const call = await streamedCall();
    try {
      const before = call.client.heard.length;
      await drainCalls(h.services.mediaStreams, 300, log);
      assert.equal(h.services.mediaStreams.active, 0);
      assert.ok(call.client.heard.slice(before).filter(loud).length >= 10, 'the closing line was played');
      const ended = await waitFor('ended', async () => { const c = await conversationRepo.find(h.database.db, call.conversation.id); return c?.ended_at != null && c; });
      assert.equal(ended.outcome, 'ended_by_agent');
    } finally {
      await call.client.close();
    }
  });
});
