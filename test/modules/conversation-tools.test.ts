// The agent's tools with outside effects, on both engines (issue 23): a queued turn whose model
// fails after send_text and queue_follow_up ran is retried by the turn queue without texting the
// person again (one text task, one follow-up, one reply); a follow-up is scheduled in unix seconds;
// a webhook action is POSTed once, with an Idempotency-Key; one conversation sends at most
// MAX_TEXTS_PER_CONVERSATION texts and follow-ups; and an agent
// with requireVerifiedCallerForTexts texts no caller whose caller ID Twilio did not fully attest.
// The model is test/helpers/fake-llm.ts, replies go to a loopback receiver, calls come from
// test/helpers/fake-twilio.ts; what the tools made is read from the tasks table.
// @engines sqlite
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { conversationRepo } from '../../src/modules/conversations/repository.ts';
import { MAX_TEXTS_PER_CONVERSATION } from '../../src/modules/conversations/turn.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { startFakeTwilio, type FakeTwilio } from '../helpers/fake-twilio.ts';
import { ENGINE_SKIP_REASON, ENGINES, SKIPPED_ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { freePort } from '../helpers/wait.ts';

const FAST = { leaseMs: 5000, heartbeatMs: 500, rescueEveryMs: 500 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let seq = 0;
const nextNumber = () => `+1415558${String(1000 + ++seq).slice(-4)}`;
const unescapeXml = (s: string) => s.replace(/&quot;/g, '"').replace(/&apos;/g, '\'').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

for (const engine of ENGINES) {
  describe(`tools with outside effects [${engine}]`, () => {
    let h: Harness;
    let hook: Receiver;
    let llm: FakeLlm;
    let fake: FakeTwilio;
    let publicUrl: string;
    before(async () => {
      llm = await startFakeLlm({ models: ['fake-model'] });
      fake = await startFakeTwilio();
      const port = await freePort();
      publicUrl = `http://127.0.0.1:${port}`;
      h = await startHarness(engine, {
        CALLPLANE_PUBLIC_URL: publicUrl, CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
        // A 5xx fails the turn at once: the turn queue's retries are what is tested.
        CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0',
      }, { turns: true, deliveries: true, deliveryRuntime: FAST });
      await h.app.listen({ port, host: '127.0.0.1' });
      hook = await startReceiver();
    });
    after(async () => { await h?.close(); await hook?.close(); await llm?.close(); await fake?.close(); });

    async function agent(config: Record<string, unknown>) {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const token = await h.tokenFor(o.agentId);
      assert.equal((await h.call('POST', '/api/v2/agent', { token, body: config })).status, 200);
      assert.equal((await h.call('POST', '/api/v2/agent/publish', { token })).status, 200);
      return { r, o };
    }

    const tasksOf = (orgId: number) => h.database.db.selectFrom('tasks').selectAll().where('org_id', '=', orgId).orderBy('created_at').execute();
    const toolResults = () => llm.requests.at(-1)!.body.messages.filter((m) => m.role === 'tool').map((m) => m.content ?? '');

    it('a model that fails (5xx) after send_text and queue_follow_up ran: the retries resume after the tools, one text, one follow-up, one reply', async () => {
      const { r, o } = await agent({ actions: ['text', 'followup'] });
      const person = nextNumber();
      const calls = llm.requests.length;
      llm.script.push(
        { toolCalls: [{ name: 'send_text', arguments: { message: 'Your cleaning is Tuesday at 9.' } }, { name: 'queue_follow_up', arguments: { type: 'call', delayMinutes: 60, message: 'Confirm the cleaning' } }] },
        { status: 503 }, { status: 500 },
        { text: 'Done: texted you the time, and we will call in an hour.' },
      );
      const before = hook.requests.length;
      const startedAt = Date.now();
      const res = await h.call('POST', '/api/v2/agent/receiveMessage', { token: r.token, body: { targetAgent: String(o.agentId), sourceAddress: person, message: 'book me and text me', outboundMessageWebhookUrl: hook.url } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const got = await hook.waitFor(before + 1, 30_000);
      const reply = JSON.parse(got[before]!.body.toString('utf8'));
      assert.equal(reply.type, 'message', JSON.stringify(reply));
      assert.equal(reply.message, 'Done: texted you the time, and we will call in an hour.');
      // The model was asked four times: the tools once, then three times after them (two failures).
      assert.equal(llm.requests.length - calls, 4);
      const last = llm.requests.at(-1)!.body.messages;
      assert.equal(last.filter((m) => m.role === 'assistant' && m.tool_calls?.length).length, 1, 'the saved answer with its tool calls, once');
      assert.equal(last.filter((m) => m.role === 'tool').length, 2);
      const tasks = await tasksOf(o.id);
      assert.deepEqual(tasks.map((t) => `${t.type}:${t.target}`), [`text:${person}`, `call:${person}`]);
      const followUp = tasks[1]!;
      // Scheduled an hour on (unix seconds in, milliseconds stored), not refused.
      assert.ok(followUp.scheduled_for! >= startedAt + 3600_000 - 1000 && followUp.scheduled_for! <= Date.now() + 3600_000 + 1000, String(followUp.scheduled_for));
      assert.equal(followUp.context, 'Confirm the cleaning');
      const turn = await h.database.db.selectFrom('conversation_turns').selectAll().where('message_id', '=', res.body.messageUuid).executeTakeFirstOrThrow();
      assert.equal(turn.state, 'finished');
      assert.equal(turn.attempt, 3);
      // Nothing more arrives.
      await sleep(1500);
      assert.equal(hook.requests.filter((q) => JSON.parse(q.body.toString('utf8')).inReplyTo === res.body.messageUuid).length, 1);
      assert.equal((await tasksOf(o.id)).length, 2);
    });

    it('a webhook action is POSTed once, with an Idempotency-Key, though the model fails after it and the turn is retried', async () => {
      const action = await startReceiver(() => ({ status: 200, body: '{"booked":true}' }));
      try {
        const { r, o } = await agent({ webhookActions: [{ name: 'book', description: 'Book it', url: `${action.url}/book`, parameters: { day: { type: 'string', required: true } } }] });
        llm.script.push({ toolCalls: [{ name: 'book', arguments: { day: 'Tuesday' } }] }, { status: 502 }, { text: 'Booked for Tuesday.' });
        const before = hook.requests.length;
        const res = await h.call('POST', '/api/v2/agent/receiveMessage', { token: r.token, body: { targetAgent: String(o.agentId), sourceAddress: nextNumber(), message: 'book tuesday', outboundMessageWebhookUrl: hook.url } });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        const got = await hook.waitFor(before + 1, 30_000);
        assert.equal(JSON.parse(got[before]!.body.toString('utf8')).message, 'Booked for Tuesday.');
        assert.deepEqual(toolResults(), ['{"booked":true}'], 'the recorded answer, once');
        await sleep(500);
        assert.equal(action.requests.length, 1);
        assert.match(String(action.requests[0]!.headers['idempotency-key']), /^tool-[0-9a-f]{40}$/);
      } finally {
        await action.close();
      }
    });

    it(`one conversation sends at most ${MAX_TEXTS_PER_CONVERSATION} texts and follow-ups; the next is refused and the model is told`, async () => {
      const { r, o } = await agent({ actions: ['text', 'followup'] });
      const person = nextNumber();
      const send = async (message: string) => {
        const before = hook.requests.length;
        const res = await h.call('POST', '/api/v2/agent/receiveMessage', { token: r.token, body: { targetAgent: String(o.agentId), sourceAddress: person, message, outboundMessageWebhookUrl: hook.url } });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        await hook.waitFor(before + 1, 30_000);
      };
      llm.script.push(
        { toolCalls: [{ name: 'send_text', arguments: { message: 'one' } }, { name: 'queue_follow_up', arguments: { type: 'text', delayMinutes: 5, message: 'two' } }] },
        { text: 'Sent.' },
      );
      await send('text me twice');
      assert.equal(toolResults().filter((t) => t.startsWith('{"ok":true')).length, 2);
      llm.script.push(
        { toolCalls: [{ name: 'send_text', arguments: { message: 'three' } }, { name: 'send_text', arguments: { message: 'four' } }] },
        { text: 'Only one more could go.' },
      );
      await send('two more please');
      const results = toolResults();
      assert.match(results.at(-2)!, /^\{"ok":true/);
      assert.match(results.at(-1)!, new RegExp(`^refused: this conversation has sent ${MAX_TEXTS_PER_CONVERSATION} texts and follow-ups already`));
      assert.deepEqual((await tasksOf(o.id)).map((t) => t.type), ['text', 'text', 'text']);
    });

    /** A call to the organization's Twilio number from `from` with this StirVerstat (none: left out); its gather URL. */
    async function inboundCall(orgId: number, number: string, from: string, stirVerstat?: string) {
      const sid = `CA${String(Date.now())}${String(++seq).padStart(6, '0')}`.padEnd(34, '0');
      const params: Record<string, string> = { AccountSid: fake.accountSid, CallSid: sid, From: from, To: number, CallStatus: 'ringing', Direction: 'inbound' };
      if (stirVerstat) params.StirVerstat = stirVerstat;
      const answered = await fake.postSigned(`${publicUrl}/api/v2/providers/twilio/voice`, params);
      assert.equal(answered.status, 200, answered.body);
      const action = /<Gather [^>]*action="([^"]+)"/.exec(answered.body);
      assert.ok(action, answered.body);
      const c = await conversationRepo.byCarrierRef(h.database.db, orgId, sid);
      assert.ok(c);
      return { sid, gatherUrl: unescapeXml(action[1]!), conversation: c };
    }

    async function twilioOrg(config: Record<string, unknown>) {
      const { r, o } = await agent(config);
      const number = nextNumber();
      const provider = await h.call('POST', '/api/v2/numberingProvider', {
        token: r.token, query: { targetOrganizationId: o.id },
        body: { providerId: 'twilio', config: { accountSid: fake.accountSid, authToken: fake.authToken, phoneNumber: number, apiBaseUrl: fake.url } },
      });
      assert.equal(provider.status, 200, JSON.stringify(provider.body));
      return { o, number };
    }

    const say = (sid: string, url: string, speech: string) => fake.postSigned(url, {
      AccountSid: fake.accountSid, ApiVersion: '2010-04-01', CallSid: sid, CallStatus: 'in-progress', Direction: 'inbound',
      SpeechResult: speech, Confidence: '0.92', Language: 'en-US',
    });

    it('requireVerifiedCallerForTexts: send_text and queue_follow_up to a caller below full attestation are refused (the model is told); a fully attested one is texted', async () => {
      const { o, number } = await twilioOrg({ actions: ['text', 'followup'], requireVerifiedCallerForTexts: true });
      for (const verstat of [undefined, 'TN-Validation-Passed-B', 'No-TN-Validation']) {
        const from = nextNumber();
        const call = await inboundCall(o.id, number, from, verstat);
        assert.equal(call.conversation.caller_verified, 0, `${verstat ?? 'no StirVerstat'}: not verified`);
        llm.script.push(
          { toolCalls: [{ name: 'send_text', arguments: { message: 'your code is 1234' } }, { name: 'queue_follow_up', arguments: { type: 'call', delayMinutes: 10, message: 'call back' } }] },
          { text: 'I cannot text this number.' },
        );
        const said = await say(call.sid, call.gatherUrl, 'text me the code');
        assert.equal(said.status, 200, said.body);
        assert.match(said.body, /I cannot text this number\./);
        const results = toolResults();
        assert.equal(results.length, 2);
        for (const r of results) assert.match(r, /^refused: the caller's number was not verified/);
      }
      assert.equal((await tasksOf(o.id)).length, 0, 'nobody was texted');
      const from = nextNumber();
      const call = await inboundCall(o.id, number, from, 'TN-Validation-Passed-A');
      assert.equal(call.conversation.caller_verified, 1);
      llm.script.push({ toolCalls: [{ name: 'send_text', arguments: { message: 'your code is 1234' } }] }, { text: 'Texted.' });
      assert.match((await say(call.sid, call.gatherUrl, 'text me the code')).body, /Texted\./);
      assert.deepEqual((await tasksOf(o.id)).map((t) => `${t.type}:${t.target}`), [`text:${from}`]);
    });

    it('without requireVerifiedCallerForTexts (the default) an unverified caller is texted, within the cap', async () => {
      const { o, number } = await twilioOrg({ actions: ['text'] });
      const from = nextNumber();
      const call = await inboundCall(o.id, number, from, 'TN-Validation-Failed-B');
      assert.equal(call.conversation.caller_verified, 0);
      llm.script.push({ toolCalls: [{ name: 'send_text', arguments: { message: 'hello' } }] }, { text: 'Texted.' });
      assert.match((await say(call.sid, call.gatherUrl, 'text me')).body, /Texted\./);
      assert.deepEqual((await tasksOf(o.id)).map((t) => `${t.type}:${t.target}`), [`text:${from}`]);
    });
  });
}
for (const engine of SKIPPED_ENGINES) describe(`tools with outside effects [${engine}]`, { skip: ENGINE_SKIP_REASON }, () => {});
