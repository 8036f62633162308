// The conversation engine through the API channel, on both engines, against a model server on
// loopback (test/helpers/fake-llm.ts) and real HTTP receivers: receiveMessage → a turn in the
// worker → the model request (live instructions, notes, history, granted tools) → the signed
// reply delivered; tools granted and refused; webhook actions; automation answers; tenancy.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { conversationRepo } from '../../src/modules/conversations/repository.ts';
import { conversationService } from '../../src/modules/conversations/service.ts';
import { policyFromConfig } from '../../src/webhooks/ssrf.ts';
import { ENGINE_SKIP_REASON, ENGINES, SKIPPED_ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';

const FAST = { leaseMs: 5000, heartbeatMs: 500, rescueEveryMs: 500 };

async function tenant(h: Harness) {
  const r = await h.reseller();
  const o = await h.organization(r.id);
  const agentToken = await h.tokenFor(o.agentId);
  return { r, o, agentToken };
}

async function configure(h: Harness, token: string, config: Record<string, unknown>, publish = true) {
  const edit = await h.call('POST', '/api/v2/agent', { token, body: config });
  assert.equal(edit.status, 200, JSON.stringify(edit.body));
  if (publish) assert.equal((await h.call('POST', '/api/v2/agent/publish', { token })).status, 200);
}

/** The org's message secret, issued when its default reply URL is set. */
async function replyUrl(h: Harness, resellerToken: string, orgId: number, url: string): Promise<string> {
  const r = await h.call('POST', '/api/v2/updateOrganization', { token: resellerToken, query: { targetOrganizationId: orgId }, body: { outboundMessageWebhookUrl: url } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.match(r.body.outboundMessageSigningSecret, /^whsec_/);
  return r.body.outboundMessageSigningSecret as string;
}

function verified(secret: string, req: Receiver['requests'][number]): any {
  return new Webhook(secret).verify(req.body.toString('utf8'), req.headers as Record<string, string>);
}

for (const engine of ENGINES) {
  describe(`conversations without a model provider (SIMULATED) [${engine}]`, () => {
    let h: Harness;
    let hook: Receiver;
    before(async () => {
      h = await startHarness(engine, { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, { turns: true, deliveries: true, deliveryRuntime: FAST });
      hook = await startReceiver();
    });
    after(async () => { await h.close(); await hook.close(); });

    it('receiveMessage answers at once; the simulated reply is delivered, signed, with the message uuid, and says it is simulated', async () => {
      const { r, o } = await tenant(h);
      const secret = await replyUrl(h, r.token, o.id, `${hook.url}/org-default`);
      const shown = await h.call('GET', '/api/v2/account', { token: o.token });
      assert.equal(shown.body.details.outboundMessageWebhookUrl, `${hook.url}/org-default`);
      assert.equal(shown.body.details.outboundMessageSigningSecretIssued, true);
      assert.ok(!JSON.stringify(shown.body).includes(secret), 'the secret is never answered again');
      const again = await h.call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body: { outboundMessageWebhookUrl: `${hook.url}/org-default` } });
      assert.equal(again.body.outboundMessageSigningSecret, undefined, 'issued once');
      const res = await h.call('POST', '/api/v2/agent/receiveMessage', {
        token: r.token, body: { targetAgent: String(o.agentId), sourceAddress: '+1 (415) 555-2671', message: 'Hello there', metadata: { thread: 't1' } },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.success, true);
      assert.match(res.body.messageUuid, /^[0-9a-f-]{36}$/);
      const [got] = await hook.waitFor(1);
      assert.equal(got!.path, '/org-default');
      const payload = verified(secret, got!);
      assert.equal(payload.inReplyTo, res.body.messageUuid);
      assert.equal(payload.type, 'message');
      assert.equal(payload.simulated, true);
      assert.equal(payload.engine, 'simulated');
      assert.match(payload.message, /^\[simulated reply: no language model is configured\] You said: "Hello there"/);
      assert.equal(payload.sourceAddress, '+14155552671');
      assert.deepEqual(payload.metadata, { thread: 't1' });
      assert.equal(payload.agentId, `camp${o.agentId}`);
    });

    it('a URL in the request wins over the organization default; without either it is a 400 naming outboundMessageWebhookUrl', async () => {
      const { r, o } = await tenant(h);
      const none = await h.call('POST', '/api/v2/agent/receiveMessage', { token: r.token, body: { targetAgent: String(o.agentId), sourceAddress: 'user-1', message: 'hi' } });
      assert.equal(none.status, 400);
      assert.match(none.body.message, /outboundMessageWebhookUrl/);
      const before = hook.requests.length;
      const ok = await h.call('POST', '/api/v2/agent/receiveMessage', {
        token: r.token, body: { targetAgent: `camp${o.agentId}`, sourceAddress: 'user-1', message: 'hi', outboundMessageWebhookUrl: `${hook.url}/per-request` },
      });
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      const all = await hook.waitFor(before + 1);
      assert.equal(all.at(-1)!.path, '/per-request');
    });

    it('only resellers and partners may send; another reseller\'s agent is 404; bad input is a 400 naming the field', async () => {
      const { r, o, agentToken } = await tenant(h);
      const other = await tenant(h);
      const body = { targetAgent: String(o.agentId), sourceAddress: '+14155552671', message: 'hi', outboundMessageWebhookUrl: hook.url };
      const org = await h.call('POST', '/api/v2/agent/receiveMessage', { token: o.token, body });
      assert.equal(org.status, 403);
      assert.equal((await h.call('POST', '/api/v2/agent/receiveMessage', { token: agentToken, body })).status, 403);
      const foreign = await h.call('POST', '/api/v2/agent/receiveMessage', { token: other.r.token, body });
      assert.equal(foreign.status, 404);
      assert.match(foreign.body.message, /targetAgent/);
      const empty = await h.call('POST', '/api/v2/agent/receiveMessage', { token: r.token, body: { ...body, message: '   ' } });
      assert.equal(empty.status, 400);
      assert.match(empty.body.message, /message/);
      const long = await h.call('POST', '/api/v2/agent/receiveMessage', { token: r.token, body: { ...body, message: 'x'.repeat(4001) } });
      assert.equal(long.status, 400);
      const badAttachment = await h.call('POST', '/api/v2/agent/receiveMessage', { token: r.token, body: { ...body, attachments: [{ type: 'image', url: 'file:///etc/passwd' }] } });
      assert.equal(badAttachment.status, 400);
      assert.match(badAttachment.body.message, /attachments\[0\]\.url/);
      const bigContext = await h.call('POST', '/api/v2/agent/receiveMessage', { token: r.token, body: { ...body, context: { x: 'y'.repeat(9000) } } });
      assert.equal(bigContext.status, 400);
      assert.match(bigContext.body.message, /context/);
      const badUrl = await h.call('POST', '/api/v2/agent/receiveMessage', { token: r.token, body: { ...body, outboundMessageWebhookUrl: 'ftp://example.com/x' } });
      assert.equal(badUrl.status, 400);
      assert.match(badUrl.body.message, /outboundMessageWebhookUrl/);
    });

    it('the junk rules run as messages arrive: an automated sender and the agent\'s live cnamAutoRejectRegex put the room in the junk inbox', async () => {
      const { r, o, agentToken } = await tenant(h);
      await replyUrl(h, r.token, o.id, hook.url);
      const send = (sourceAddress: string) => h.call('POST', '/api/v2/agent/receiveMessage', { token: r.token, body: { targetAgent: String(o.agentId), sourceAddress, message: 'hi' } });
      assert.equal((await send('no-reply@shop.example')).status, 200);
      assert.equal((await send('+14155550199')).status, 200);
      const junk = async () => (await h.call('GET', '/api/v2/junkConversations', { token: o.token, query: { pagination: true } })).body.rooms.map((x: any) => `${x.unregisteredDisplayName}:${x.junkReason}`);
      assert.deepEqual(await junk(), ['no-reply@shop.example:automatedAddress']);
      await configure(h, agentToken, { cnamAutoRejectRegex: '^\\+1415555019' });
      assert.equal((await send('+14155550199')).status, 200);
      assert.deepEqual((await junk()).sort(), ['+14155550199:cnamAutoRejectRegex', 'no-reply@shop.example:automatedAddress']);
      const inbox = (await h.call('GET', '/api/v2/conversations', { token: o.token, query: { pagination: true } })).body.rooms;
      assert.equal(inbox.length, 0);
    });

    it('webhookActions and transferDestinations are checked field by field', async () => {
      const { agentToken } = await tenant(h);
      const bad = async (body: Record<string, unknown>, field: string) => {
        const res = await h.call('POST', '/api/v2/agent', { token: agentToken, body });
        assert.equal(res.status, 400, JSON.stringify(res.body));
        assert.ok(res.body.message.includes(field), `${res.body.message} should name ${field}`);
      };
      const action = { name: 'check', description: 'd', url: 'https://example.com/a' };
      await bad({ webhookActions: [{ ...action, name: 'end_conversation' }] }, 'webhookActions[0].name');
      await bad({ webhookActions: [{ ...action, name: '1abc' }] }, 'webhookActions[0].name');
      await bad({ webhookActions: [{ ...action, url: 'ftp://example.com' }] }, 'webhookActions[0].url');
      await bad({ webhookActions: [action, action] }, 'webhookActions');
      await bad({ webhookActions: [{ ...action, parameters: { x: { type: 'object' } } }] }, 'webhookActions[0].parameters.x.type');
      await bad({ webhookActions: [{ ...action, parameters: { x: { type: 'number', enum: ['a'] } } }] }, 'webhookActions[0].parameters.x.enum');
      await bad({ webhookActions: [{ ...action, timeoutSeconds: 31 }] }, 'webhookActions[0].timeoutSeconds');
      await bad({ webhookActions: [{ ...action, async: true, timeoutSeconds: 601 }] }, 'webhookActions[0].timeoutSeconds');
      await bad({ webhookActions: [{ ...action, headers: {} }] }, 'webhookActions[0].headers');
      await bad({ transferDestinations: [{ name: 'x', destination: '5551234' }] }, 'transferDestinations[0].destination');
      const ok = await h.call('POST', '/api/v2/agent', { token: agentToken, body: { webhookActions: [{ ...action, async: true }], transferDestinations: [{ name: 'Desk', destination: '+15551230000' }] } });
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      const staged = await h.call('GET', '/api/v2/agentEventRules/staging', { token: agentToken });
      assert.deepEqual(staged.body.agent.webhookActions, [{ ...action, parameters: {}, async: true, timeoutSeconds: 120 }]);
    });

    it('an inbound conversation emits `incoming` to the organization\'s subscriptions', async () => {
      const { r, o } = await tenant(h);
      const sub = await startReceiver();
      try {
        const created = await h.call('POST', '/api/v2/webhooks', { token: o.token, body: { url: sub.url, label: 'incoming', type: 'incoming' } });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        await h.call('POST', '/api/v2/agent/receiveMessage', { token: r.token, body: { targetAgent: String(o.agentId), sourceAddress: '+14155550100', message: 'first', outboundMessageWebhookUrl: hook.url } });
        const [ev] = await sub.waitFor(1);
        const body = JSON.parse(ev!.body.toString('utf8'));
        assert.equal(body.type, 'incoming');
        assert.equal(body.data.message, 'first');
        assert.equal(body.data.channel, 'api');
        assert.equal(body.data.counterpart, '+14155550100');
      } finally {
        await sub.close();
      }
    });
  });

  describe(`message sessions end when idle [${engine}]`, () => {
    let h: Harness;
    let hook: Receiver;
    before(async () => {
      h = await startHarness(engine, { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_CONVERSATION_IDLE_MINUTES: '30' }, { turns: true, deliveries: true, deliveryRuntime: FAST });
      hook = await startReceiver();
    });
    after(async () => { await h.close(); await hook.close(); });

    it('maintenance ends a session idle past the window (outcome completed, detail idle); the next message opens a new one', async () => {
      const { r, o } = await tenant(h);
      await replyUrl(h, r.token, o.id, hook.url);
      const send = async (message: string) => {
        const n = hook.requests.length;
        await h.call('POST', '/api/v2/agent/receiveMessage', { token: r.token, body: { targetAgent: String(o.agentId), sourceAddress: 'visitor@example.com', message } });
        return JSON.parse((await hook.waitFor(n + 1))[n]!.body.toString('utf8'));
      };
      const first = await send('hello');
      const deps = { db: h.database.db, config: h.config, policy: policyFromConfig(h.config), agents: h.services.agents, turns: h.turns.producer, analyses: h.analyses.producer, wakeDeliveries: () => {} };
      // The same service code with its clock 29 minutes on: nothing is idle yet.
      assert.equal(await conversationService({ ...deps, now: () => Date.now() + 29 * 60_000 }).closeIdle(), 0);
      assert.equal((await conversationRepo.find(h.database.db, first.conversationUuid))?.ended_at, null);
      // And 31 minutes on: the session ends.
      assert.equal(await conversationService({ ...deps, now: () => Date.now() + 31 * 60_000 }).closeIdle(), 1);
      const ended = await conversationRepo.find(h.database.db, first.conversationUuid);
      assert.equal(ended?.outcome, 'completed');
      assert.equal(ended?.outcome_detail, 'idle');
      assert.ok(Number(ended?.duration_ms) >= 31 * 60_000 - 5000);
      const second = await send('hello again');
      assert.notEqual(second.conversationUuid, first.conversationUuid);
      assert.equal(second.roomId, first.roomId);
    });
  });

  describe(`conversations with a model provider [${engine}]`, () => {
    let h: Harness;
    let hook: Receiver;
    let llm: FakeLlm;
    before(async () => {
      llm = await startFakeLlm({ models: ['fake-model'] });
      h = await startHarness(engine, {
        CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model',
      }, { turns: true, deliveries: true, deliveryRuntime: FAST });
      hook = await startReceiver();
    });
    after(async () => { await h.close(); await hook.close(); await llm.close(); });

    async function send(r: { token: string }, agentId: number, message: string, sourceAddress = '+14155552671') {
      const before = hook.requests.length;
      const res = await h.call('POST', '/api/v2/agent/receiveMessage', { token: r.token, body: { targetAgent: String(agentId), sourceAddress, message, outboundMessageWebhookUrl: hook.url } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const got = await hook.waitFor(before + 1);
      return { uuid: res.body.messageUuid as string, reply: JSON.parse(got[before]!.body.toString('utf8')) };
    }

    it('the system prompt carries the live instructions and the person\'s notes; staging never reaches a conversation before publish', async () => {
      const { r, o, agentToken } = await tenant(h);
      await configure(h, agentToken, { agentInstructions: 'You are Ada, the front desk of Acme Dental.' });
      await configure(h, agentToken, { agentInstructions: 'STAGING ONLY: talk like a pirate.' }, false);
      const note = await h.call('POST', '/api/v2/context', { token: o.token, body: { target: '+14155552671', context: 'Prefers morning appointments.' } });
      assert.equal(note.status, 201);
      llm.script.push({ text: 'Good morning! How can I help?', usage: { prompt_tokens: 120, completion_tokens: 8 } });
      const { reply } = await send(r, o.agentId, 'Hi, I need a cleaning');
      assert.equal(reply.message, 'Good morning! How can I help?');
      assert.equal(reply.engine, 'model');
      assert.equal(reply.model, 'fake-model');
      assert.equal(reply.simulated, undefined);
      const req = llm.requests.at(-1)!;
      assert.equal(req.headers.authorization, 'Bearer sk-fake');
      const system = req.body.messages[0]!;
      assert.equal(system.role, 'system');
      assert.match(system.content!, /You are Ada, the front desk of Acme Dental\./);
      assert.doesNotMatch(system.content!, /pirate/);
      assert.match(system.content!, /Prefers morning appointments\./);
      assert.deepEqual(req.body.messages.at(-1), { role: 'user', content: 'Hi, I need a cleaning' });
      // The next message carries the room's history.
      llm.script.push({ text: 'Tuesday at 9 works.' });
      await send(r, o.agentId, 'Is Tuesday free?');
      const msgs = llm.requests.at(-1)!.body.messages.map((m) => `${m.role}:${m.content}`);
      assert.deepEqual(msgs.slice(1), ['user:Hi, I need a cleaning', 'assistant:Good morning! How can I help?', 'user:Is Tuesday free?']);
      // Publishing the staged edit changes the next conversation.
      assert.equal((await h.call('POST', '/api/v2/agent/publish', { token: agentToken })).status, 200);
      await send(r, o.agentId, 'Ahoy?');
      assert.match(llm.requests.at(-1)!.body.messages[0]!.content!, /talk like a pirate/);
    });

    it('the best passages of the agent\'s knowledge bases for what was said are in the system prompt; search_knowledge finds more', async () => {
      const { r, o, agentToken } = await tenant(h);
      const kb = await h.call('POST', '/api/v2/kb/knowledgebase', { token: o.token, body: { name: 'FAQ' } });
      assert.equal(kb.status, 201);
      const boundary = '----cpconv';
      const doc = 'Parking is free in the garage on Elm Street. The clinic is closed on public holidays.';
      const up = await h.call('POST', `/api/v2/kb/knowledgebase/${kb.body.knowledgeBase.id}/documents/upload`, {
        token: o.token, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
        payload: `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="faq.txt"\r\nContent-Type: text/plain\r\n\r\n${doc}\r\n--${boundary}--\r\n`,
      });
      assert.equal(up.status, 201, JSON.stringify(up.body));
      // Not named by the agent yet: nothing is retrieved.
      await send(r, o.agentId, 'where can I park?', '+14155550144');
      assert.doesNotMatch(llm.requests.at(-1)!.body.messages[0]!.content!, /Elm Street/);
      await configure(h, agentToken, { knowledgeBases: [kb.body.knowledgeBase.id], actions: ['knowledge'] });
      await send(r, o.agentId, 'where can I park?', '+14155550144');
      const system = llm.requests.at(-1)!.body.messages[0]!.content!;
      assert.match(system, /<passage source="faq\.txt">/);
      assert.match(system, /Parking is free in the garage on Elm Street/);
      assert.ok(llm.requests.at(-1)!.body.tools?.some((t) => t.function.name === 'search_knowledge'));
      llm.script.push({ toolCalls: [{ name: 'search_knowledge', arguments: { query: 'holidays' } }] }, { text: 'Closed on public holidays.' });
      await send(r, o.agentId, 'open on holidays?', '+14155550144');
      const tool = llm.requests.at(-1)!.body.messages.find((m) => m.role === 'tool');
      assert.match(tool!.content!, /closed on public holidays/);
    });

    it('noConvoHistory leaves the history out', async () => {
      const { r, o, agentToken } = await tenant(h);
      await configure(h, agentToken, { noConvoHistory: true });
      await send(r, o.agentId, 'one', '+14155550111');
      await send(r, o.agentId, 'two', '+14155550111');
      const roles = llm.requests.at(-1)!.body.messages.map((m) => m.role);
      assert.deepEqual(roles, ['system', 'user']);
    });

    it('offers only granted tools; a call to a tool not granted, or with bad arguments, is refused and the model is told', async () => {
      const { r, o, agentToken } = await tenant(h);
      await configure(h, agentToken, { actions: ['hangup'] });
      llm.script.push({ toolCalls: [{ name: 'send_text', arguments: { message: 'spam' } }] }, { text: 'Sorry, I cannot do that.' });
      const { reply } = await send(r, o.agentId, 'text my friend +15550001111 please');
      assert.equal(reply.message, 'Sorry, I cannot do that.');
      const offered = llm.requests.at(-2)!.body.tools?.map((t) => t.function.name);
      assert.deepEqual(offered, ['end_conversation']);
      const toolMsg = llm.requests.at(-1)!.body.messages.find((m) => m.role === 'tool');
      assert.match(toolMsg!.content!, /^refused: send_text is not a tool this agent may use/);
      llm.script.push({ toolCalls: [{ name: 'end_conversation', arguments: { reason: 42, extra: true } }] }, { text: 'ok' });
      await send(r, o.agentId, 'bye');
      const refused = llm.requests.at(-1)!.body.messages.filter((m) => m.role === 'tool').at(-1);
      assert.match(refused!.content!, /^refused: argument 'extra' is not a parameter/);
    });

    it('end_conversation ends the conversation and emits `conversation` with the transcript and usage', async () => {
      const { r, o, agentToken } = await tenant(h);
      const sub = await startReceiver();
      try {
        assert.equal((await h.call('POST', '/api/v2/webhooks', { token: o.token, body: { url: sub.url, label: 'c', type: 'conversation' } })).status, 201);
        await configure(h, agentToken, { actions: ['hangup'] });
        llm.script.push({ text: 'Goodbye!', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'done' } }], usage: { prompt_tokens: 50, completion_tokens: 5 } });
        const { reply } = await send(r, o.agentId, 'that is all, bye', '+14155550122');
        assert.equal(reply.message, 'Goodbye!');
        const [ev] = await sub.waitFor(1);
        const body = JSON.parse(ev!.body.toString('utf8'));
        assert.equal(body.type, 'conversation');
        assert.equal(body.data.outcome, 'ended_by_agent');
        assert.equal(body.data.usage.tokensIn, 50);
        assert.equal(body.data.usage.modelCalls, 1);
        assert.deepEqual(body.data.transcript.map((m: any) => `${m.direction}:${m.message}`), ['inbound:that is all, bye', 'outbound:Goodbye!']);
        // The next message opens a new conversation in the same room.
        const next = await send(r, o.agentId, 'one more thing', '+14155550122');
        assert.notEqual(next.reply.conversationUuid, reply.conversationUuid);
        assert.equal(next.reply.roomId, reply.roomId);
      } finally {
        await sub.close();
      }
    });

    it('a webhook action POSTs the checked arguments, signed, to the customer URL and its answer goes back to the model', async () => {
      const { r, o, agentToken } = await tenant(h);
      const action = await startReceiver(() => ({ status: 200, body: '{"slots":["9:00","11:30"]}' }));
      try {
        await configure(h, agentToken, { webhookActions: [{ name: 'check_slots', description: 'Free appointment slots', url: `${action.url}/slots`, parameters: { day: { type: 'string', required: true } } }] });
        llm.script.push({ toolCalls: [{ name: 'check_slots', arguments: { day: 'Tuesday' } }] }, { text: 'We have 9:00 or 11:30.' });
        const { reply } = await send(r, o.agentId, 'what is free tuesday?');
        assert.equal(reply.message, 'We have 9:00 or 11:30.');
        const [call] = await action.waitFor(1);
        const payload = JSON.parse(call!.body.toString('utf8'));
        assert.deepEqual(payload.arguments, { day: 'Tuesday' });
        assert.equal(payload.action, 'check_slots');
        assert.ok(call!.headers['webhook-signature'], 'signed');
        const toolMsg = llm.requests.at(-1)!.body.messages.find((m) => m.role === 'tool');
        assert.equal(toolMsg!.content, '{"slots":["9:00","11:30"]}');
      } finally {
        await action.close();
      }
    });

    it('an asynchronous action waits for POST /agent/zapier/response; unknown ids are 404, a second answer 409, another tenant 404', async () => {
      const { r, o, agentToken } = await tenant(h);
      const other = await tenant(h);
      const action = await startReceiver();
      try {
        await configure(h, agentToken, { webhookActions: [{ name: 'book', description: 'Book it', url: action.url, async: true, timeoutSeconds: 60 }] });
        llm.script.push({ toolCalls: [{ name: 'book', arguments: {} }] }, { text: 'Booked for you.' });
        const before = hook.requests.length;
        const res = await h.call('POST', '/api/v2/agent/receiveMessage', { token: r.token, body: { targetAgent: String(o.agentId), sourceAddress: '+14155550133', message: 'book me', outboundMessageWebhookUrl: hook.url } });
        assert.equal(res.status, 200);
        const [call] = await action.waitFor(1);
        const { requestId } = JSON.parse(call!.body.toString('utf8'));
        assert.match(requestId, /^[0-9a-f-]{36}$/);
        assert.equal(hook.requests.length, before, 'no reply while the action is outstanding');
        assert.equal((await h.call('POST', '/api/v2/agent/zapier/response', { token: r.token, body: { requestId: 'nope', responseData: {} } })).status, 404);
        assert.equal((await h.call('POST', '/api/v2/agent/zapier/response', { token: other.r.token, body: { requestId, responseData: {} } })).status, 404);
        const ok = await h.call('POST', '/api/v2/agent/zapier/response', { token: r.token, body: { requestId, responseData: { confirmation: 'B-123' } } });
        assert.equal(ok.status, 200, JSON.stringify(ok.body));
        const again = await h.call('POST', '/api/v2/agent/zapier/response', { token: r.token, body: { requestId, responseData: {} } });
        assert.equal(again.status, 409);
        const got = await hook.waitFor(before + 1);
        assert.equal(JSON.parse(got[before]!.body.toString('utf8')).message, 'Booked for you.');
        const toolMsg = llm.requests.at(-1)!.body.messages.find((m) => m.role === 'tool');
        assert.equal(toolMsg!.content, '{"confirmation":"B-123"}');
      } finally {
        await action.close();
      }
    });

    it('a model that answers 503 once is retried and the person still gets the reply', async () => {
      const { r, o } = await tenant(h);
      llm.script.push({ status: 503 }, { text: 'Back again.' });
      const { reply } = await send(r, o.agentId, 'are you there?');
      assert.equal(reply.message, 'Back again.');
    });
  });
}
for (const engine of SKIPPED_ENGINES) describe(`conversations [${engine}]`, { skip: ENGINE_SKIP_REASON }, () => {});
