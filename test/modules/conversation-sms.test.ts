// Text messages end to end, on both engines: Twilio's messaging webhook (signed here with the fake
// Twilio's independent signer) → the organization found by its number and checked by its own auth
// token → the message recorded and a turn queued → the worker asks the model (test/helpers/fake-llm.ts)
// → the reply goes out through the Messages API of the organization's Twilio account (the fake
// Twilio server records it). Also: retries of one MessageSid, forged and foreign signatures,
// unknown numbers, two organizations, text tasks recorded in the person's conversation, the
// SIMULATED engine and carrier, carrier failures while sending a reply, and the twilioSMS relay.
// @engines sqlite
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { ConversationRow, MessageRow, TurnRow } from '../../src/db/types.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { startFakeTwilio, twilioSignature, type FakeMessage, type FakeTwilio } from '../helpers/fake-twilio.ts';
import { ENGINE_SKIP_REASON, ENGINES, SKIPPED_ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { waitFor } from '../helpers/wait.ts';

const PUBLIC = 'https://sms.callplane.test';
const SMS_PATH = '/api/v2/providers/twilio/sms';
const SMS_URL = `${PUBLIC}${SMS_PATH}`;
const EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response/>';

let seq = 0;
/** A number of ours (an organization's twilio phoneNumber). */
const ourNumber = () => `+1415555${String(3000 + ++seq)}`;
/** A person who texts us. */
const person = () => `+1628555${String(1000 + ++seq)}`;
const sid = (prefix: string) => `${prefix}${crypto.randomBytes(16).toString('hex')}`;

interface Org { id: number; agentId: number; token: string; reseller: { id: number; token: string }; number: string; fake: FakeTwilio }

function kit(h: () => Harness) {
  const db = () => h().database.db;

  /** An organization whose twilio provider (on `fake`) owns `number`. */
  async function twilioOrg(fake: FakeTwilio, opts: { number?: string; premium?: boolean } = {}): Promise<Org> {
    const reseller = await h().reseller();
    const o = await h().organization(reseller.id, opts.premium ? { vidaPremium: true } : {});
    const number = opts.number ?? ourNumber();
    const res = await h().call('POST', '/api/v2/numberingProvider', {
      token: reseller.token, query: { targetOrganizationId: o.id },
      body: { providerId: 'twilio', config: { accountSid: fake.accountSid, authToken: fake.authToken, phoneNumber: number, apiBaseUrl: fake.url } },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return { ...o, reseller, number, fake };
  }

  /** The form Twilio posts for an incoming message. */
  function incoming(org: Pick<Org, 'number' | 'fake'>, from: string, body: string, extra: Record<string, string> = {}): Record<string, string> {
    const messageSid = sid('SM');
    return {
      ToCountry: 'US', ToState: 'CA', SmsMessageSid: messageSid, NumMedia: '0', ToCity: 'SAN FRANCISCO', FromZip: '94105',
      SmsSid: messageSid, FromState: 'CA', SmsStatus: 'received', FromCity: 'SAN FRANCISCO', Body: body, FromCountry: 'US',
      To: org.number, MessagingServiceSid: '', ToZip: '94105', NumSegments: '1', MessageSid: messageSid,
      AccountSid: org.fake.accountSid, From: from, ApiVersion: '2010-04-01', ...extra,
    };
  }

  /** Posts the messaging webhook as Twilio does: a form signed with `token` (the fake's auth token by default). */
  async function post(params: Record<string, string>, opts: { token?: string; signature?: string | null; headers?: Record<string, string>; fake?: FakeTwilio } = {}) {
    const signature = opts.signature === undefined ? twilioSignature(opts.token ?? opts.fake!.authToken, SMS_URL, params) : opts.signature;
    const res = await h().app.inject({
      method: 'POST', url: SMS_PATH, payload: new URLSearchParams(params).toString(),
      headers: {
        'content-type': 'application/x-www-form-urlencoded', 'user-agent': 'TwilioProxy/1.1',
        ...(signature !== null ? { 'x-twilio-signature': signature } : {}), ...opts.headers,
      },
    });
    return { status: res.statusCode, body: res.body, contentType: String(res.headers['content-type'] ?? '') };
  }

  /** Posts an incoming message that must be accepted. */
  async function text(org: Org, from: string, body: string, extra: Record<string, string> = {}) {
    const params = incoming(org, from, body, extra);
    const res = await post(params, { fake: org.fake });
    assert.equal(res.status, 200, res.body);
    assert.match(res.contentType, /^text\/xml/);
    assert.equal(res.body, EMPTY_TWIML);
    return params;
  }

  /** The texts the fake Twilio accepted for `to`, once there are `n`. */
  const repliesTo = (fake: FakeTwilio, to: string, n = 1): Promise<FakeMessage[]> =>
    waitFor(`${n} text(s) to ${to}`, async () => {
      const got = [...fake.messages.values()].filter((m) => m.to === to);
      return got.length >= n && got;
    });

  return {
    db, twilioOrg, incoming, post, text, repliesTo,
    messages: (orgId: number): Promise<MessageRow[]> =>
      db().selectFrom('conversation_messages').selectAll().where('org_id', '=', orgId).orderBy('at').orderBy('id').execute(),
    conversations: (orgId: number): Promise<ConversationRow[]> =>
      db().selectFrom('conversations').selectAll().where('org_id', '=', orgId).orderBy('started_at').execute(),
    turns: (orgId: number): Promise<TurnRow[]> =>
      db().selectFrom('conversation_turns').selectAll().where('org_id', '=', orgId).orderBy('created_at').execute(),
    /** Waits until every turn of the organization has ended; answers them. */
    settledTurns: (orgId: number, n: number) => waitFor(`${n} settled turn(s) of ${orgId}`, async () => {
      const rows = await db().selectFrom('conversation_turns').selectAll().where('org_id', '=', orgId).execute();
      return rows.length >= n && rows.every((t) => ['finished', 'failed', 'canceled'].includes(t.state)) && rows;
    }),
  };
}

/** What the model was asked in its last request, as role:content lines after the system prompt. */
const asked = (llm: FakeLlm) => llm.requests.at(-1)!.body.messages.slice(1).map((m) => `${m.role}:${m.content}`);

for (const engine of SKIPPED_ENGINES) describe(`text messages [${engine}]`, { skip: ENGINE_SKIP_REASON }, () => {});

for (const engine of ENGINES) {
  describe(`text messages with a model provider [${engine}]`, () => {
    let harness: Harness;
    let llm: FakeLlm;
    let fake: FakeTwilio;
    let other: FakeTwilio;
    const h = () => harness;
    const t = kit(h);
    before(async () => {
      llm = await startFakeLlm({ models: ['fake-model'] });
      fake = await startFakeTwilio();
      other = await startFakeTwilio();
      harness = await startHarness(engine, {
        CALLPLANE_PUBLIC_URL: PUBLIC, CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
        CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model',
      }, { turns: true, worker: true, runtime: { carrierOptions: { twilio: { timeoutMs: 2000 } } } });
    });
    after(async () => { await harness.close(); await llm.close(); await fake.close(); await other.close(); });

    it('an incoming text is answered at once with empty TwiML; the model\'s reply goes out through the Messages API, to the sender, from the number texted', async () => {
      const org = await t.twilioOrg(fake);
      const from = person();
      llm.script.push({ text: 'Hi! We open at 9 tomorrow.' });
      const params = await t.text(org, from, 'When do you open?');
      const [reply] = await t.repliesTo(fake, from);
      assert.equal(reply!.body, 'Hi! We open at 9 tomorrow.');
      assert.equal(reply!.from, org.number);
      const request = fake.requests.find((r) => r.path.endsWith('/Messages.json') && r.form.get('To') === from)!;
      assert.equal(request.headers.authorization, `Basic ${Buffer.from(`${fake.accountSid}:${fake.authToken}`).toString('base64')}`);
      assert.equal(request.form.get('From'), org.number);
      // The model was asked with the message, over the SMS channel.
      const sent = llm.requests.at(-1)!.body.messages;
      assert.match(sent[0]!.content!, /text messages \(SMS/);
      assert.match(sent[0]!.content!, new RegExp(`talking with \\${from}`));
      assert.deepEqual(sent.at(-1), { role: 'user', content: 'When do you open?' });
      // Recorded: the inbound message (with its MessageSid), the reply, one sms conversation of the default agent.
      const [conversation, ...more] = await t.conversations(org.id);
      assert.equal(more.length, 0);
      assert.equal(conversation!.channel, 'sms');
      assert.equal(conversation!.direction, 'inbound');
      assert.equal(conversation!.counterpart, from);
      assert.equal(conversation!.account_id, org.agentId);
      const [turn] = await t.settledTurns(org.id, 1);
      assert.equal(turn!.state, 'finished');
      const msgs = await t.messages(org.id);
      assert.deepEqual(msgs.map((m) => [m.direction, m.text, m.status]), [
        ['inbound', 'When do you open?', 'received'],
        ['outbound', 'Hi! We open at 9 tomorrow.', 'success'],
      ]);
      assert.equal(JSON.parse(msgs[0]!.data!).messageSid, params.MessageSid);
      assert.deepEqual(JSON.parse(turn!.reply_to), { kind: 'sms', to: from, from: org.number, inReplyTo: msgs[0]!.id });
    });

    it('a second text continues the same conversation: the model sees the history', async () => {
      const org = await t.twilioOrg(fake);
      const from = person();
      llm.script.push({ text: 'Sure, what day suits you?' });
      await t.text(org, from, 'Can I book a cleaning?');
      await t.repliesTo(fake, from, 1);
      llm.script.push({ text: 'Tuesday at 10 is free.' });
      await t.text(org, from, 'Tuesday morning?');
      const replies = await t.repliesTo(fake, from, 2);
      assert.deepEqual(replies.map((m) => m.body), ['Sure, what day suits you?', 'Tuesday at 10 is free.']);
      assert.deepEqual(asked(llm), ['user:Can I book a cleaning?', 'assistant:Sure, what day suits you?', 'user:Tuesday morning?']);
      const conversations = await t.conversations(org.id);
      assert.equal(conversations.length, 1);
      assert.equal(conversations[0]!.messages_in, 2);
      assert.equal(conversations[0]!.messages_out, 2);
    });

    it('the same MessageSid posted again (Twilio retrying) is answered the same and makes no second turn', async () => {
      const org = await t.twilioOrg(fake);
      const from = person();
      const params = t.incoming(org, from, 'Are you open on Sunday?');
      const before = llm.requests.length;
      for (let i = 0; i < 3; i++) {
        const res = await t.post(params, { fake });
        assert.equal(res.status, 200, res.body);
        assert.equal(res.body, EMPTY_TWIML);
      }
      await t.repliesTo(fake, from, 1);
      await t.settledTurns(org.id, 1);
      // Once more after the turn has run.
      assert.equal((await t.post(params, { fake })).status, 200);
      assert.equal((await t.turns(org.id)).length, 1);
      assert.equal((await t.messages(org.id)).filter((m) => m.direction === 'inbound').length, 1);
      assert.equal(llm.requests.length, before + 1);
      assert.equal([...fake.messages.values()].filter((m) => m.to === from).length, 1);
    });

    it('a missing, forged or foreign signature is a 403 and records nothing; an unknown number is the same 403, so numbers cannot be listed', async () => {
      const org = await t.twilioOrg(fake);
      const stranger = await t.twilioOrg(other);
      const params = t.incoming(org, person(), 'hello?');
      const missing = await t.post(params, { signature: null });
      assert.equal(missing.status, 403);
      assert.match(JSON.parse(missing.body).message, /X-Twilio-Signature/);
      assert.equal((await t.post(params, { token: crypto.randomBytes(16).toString('hex') })).status, 403);
      // Another organization's valid auth token does not open this organization's number.
      assert.equal((await t.post(params, { token: other.authToken })).status, 403);
      // A signature over other parameters (the body changed on the way) does not match.
      assert.equal((await t.post({ ...params, Body: 'changed' }, { signature: twilioSignature(fake.authToken, SMS_URL, params) })).status, 403);
      // A correctly signed message naming another Twilio account is refused too.
      assert.equal((await t.post({ ...params, AccountSid: other.accountSid }, { fake })).status, 403);
      // A number nobody has, correctly signed by a real account, answers exactly as a bad signature on a known one.
      const forged = await t.post(params, { token: crypto.randomBytes(16).toString('hex') });
      const unknown = await t.post({ ...params, To: '+14155550199' }, { fake });
      const envelope = (body: string) => { const { requestId: _id, ...rest } = JSON.parse(body) as Record<string, unknown>; return rest; };
      for (const res of [unknown, await t.post({ ...params, To: 'not a number' }, { fake }), await t.post({ ...params, To: '+14155550199' }, { token: crypto.randomBytes(16).toString('hex') })]) {
        assert.equal(res.status, forged.status);
        assert.deepEqual(envelope(res.body), envelope(forged.body));
        assert.equal(res.contentType, forged.contentType);
      }
      assert.deepEqual(envelope(forged.body), { success: false, message: 'X-Twilio-Signature is missing or does not match this request' });
      assert.doesNotMatch(unknown.body, /\+?14155550199|organization/i);
      assert.equal((await t.messages(org.id)).length, 0);
      assert.equal((await t.turns(org.id)).length, 0);
      assert.equal((await t.conversations(org.id)).length, 0);
      assert.equal((await t.messages(stranger.id)).length, 0);
    });

    it('two organizations, each with its own number: each text reaches only its own organization\'s agent and is answered from its own account', async () => {
      const a = await t.twilioOrg(fake);
      const b = await t.twilioOrg(other);
      const from = person();
      await t.text(a, from, 'for A');
      await t.text(b, from, 'for B');
      const [viaA] = await t.repliesTo(fake, from, 1);
      const [viaB] = await t.repliesTo(other, from, 1);
      assert.equal(viaA!.from, a.number);
      assert.equal(viaA!.body, 'reply to: for A');
      assert.equal(viaB!.from, b.number);
      assert.equal(viaB!.body, 'reply to: for B');
      const [convA] = await t.conversations(a.id);
      const [convB] = await t.conversations(b.id);
      assert.equal(convA!.account_id, a.agentId);
      assert.equal(convB!.account_id, b.agentId);
      assert.deepEqual((await t.messages(a.id)).filter((m) => m.direction === 'inbound').map((m) => m.text), ['for A']);
      assert.deepEqual((await t.messages(b.id)).filter((m) => m.direction === 'inbound').map((m) => m.text), ['for B']);
      // Neither model request carried the other organization's message.
      for (const r of llm.requests.slice(-2)) {
        const said = r.body.messages.map((m) => m.content ?? '').join('\n');
        assert.ok(!(said.includes('for A') && said.includes('for B')), said);
      }
    });

    it('one number in two organizations on different Twilio accounts: the posted AccountSid decides, each checked with its own token', async () => {
      const number = ourNumber();
      const a = await t.twilioOrg(fake, { number });
      const b = await t.twilioOrg(other, { number });
      const from = person();
      await t.text(b, from, 'via the other account');
      const [reply] = await t.repliesTo(other, from, 1);
      assert.equal(reply!.body, 'reply to: via the other account');
      assert.equal((await t.messages(a.id)).length, 0);
      assert.equal((await t.conversations(b.id)).length, 1);
      // B's AccountSid signed with A's token: neither organization takes it.
      const forged = t.incoming(b, person(), 'mixed up');
      assert.equal((await t.post(forged, { token: fake.authToken })).status, 403);
    });

    it('media and long bodies are kept within bounds', async () => {
      const org = await t.twilioOrg(fake);
      const from = person();
      const media: Record<string, string> = { NumMedia: '12' };
      for (let i = 0; i < 12; i++) {
        media[`MediaUrl${i}`] = `https://api.twilio.com/2010-04-01/Accounts/${fake.accountSid}/Messages/MM${i}/Media/ME${i}`;
        media[`MediaContentType${i}`] = 'image/jpeg';
      }
      media.MediaUrl3 = 'javascript:alert(1)';
      await t.text(org, from, 'x'.repeat(2000), media);
      await t.repliesTo(fake, from, 1);
      const [inbound] = (await t.messages(org.id)).filter((m) => m.direction === 'inbound');
      assert.equal(inbound!.text.length, 1600);
      const attachments = JSON.parse(inbound!.attachments) as Array<{ type: string; url: string }>;
      assert.equal(attachments.length, 9); // the first ten, less the one that is not http(s)
      assert.ok(attachments.every((a) => a.type === 'image/jpeg' && a.url.startsWith('https://')));
      assert.equal(JSON.parse(inbound!.data!).truncated, true);
      // A picture without words still reaches the model as something.
      const pic = person();
      await t.text(org, pic, '', { NumMedia: '1', MediaUrl0: 'https://api.twilio.com/m/ME1', MediaContentType0: 'image/png' });
      const [answer] = await t.repliesTo(fake, pic, 1);
      assert.equal(answer!.body, 'reply to: (sent 1 attachment: image/png)');
    });

    it('a text task is recorded in the person\'s text conversation; their answer continues it and the model sees the text', async () => {
      const org = await t.twilioOrg(fake);
      const to = person();
      const res = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'text', target: to, content: 'Your appointment is Tuesday at 3 pm. Reply YES to confirm.' } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const taskId = res.body.task.id as string;
      const [sent] = await t.repliesTo(fake, to, 1);
      const recorded = await waitFor('the task\'s text recorded', async () => (await t.messages(org.id)).find((m) => m.direction === 'outbound'));
      assert.equal(recorded.text, 'Your appointment is Tuesday at 3 pm. Reply YES to confirm.');
      assert.equal(recorded.source, 'sms');
      assert.deepEqual(JSON.parse(recorded.data!), { taskId, provider: 'twilio', carrierRef: sent!.sid });
      const [conversation] = await t.conversations(org.id);
      assert.equal(conversation!.channel, 'sms');
      assert.equal(conversation!.direction, 'outbound');
      assert.equal(conversation!.task_id, taskId);
      assert.equal(conversation!.carrier_ref, sent!.sid);
      assert.equal(conversation!.account_id, org.agentId);

      llm.script.push({ text: 'Great, see you Tuesday!' });
      await t.text(org, to, 'YES');
      const replies = await t.repliesTo(fake, to, 2);
      assert.equal(replies[1]!.body, 'Great, see you Tuesday!');
      assert.deepEqual(asked(llm), ['assistant:Your appointment is Tuesday at 3 pm. Reply YES to confirm.', 'user:YES']);
      const conversations = await t.conversations(org.id);
      assert.equal(conversations.length, 1);
      const inbound = (await t.messages(org.id)).find((m) => m.direction === 'inbound');
      assert.equal(inbound!.conversation_id, conversation!.id);
    });

    it('a text task as the contract writes it (context, no content): the agent\'s model writes the text, it is sent and recorded, and the answer continues it', async () => {
      const org = await t.twilioOrg(fake);
      const to = person();
      const written = 'Hi Dana, this is Riverside Dental: your cleaning is due. Reply with a day that suits you.';
      llm.script.push({ text: `  ${written}  ` });
      const before = llm.requests.length;
      const res = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'text', target: to, context: 'Dana is due for her six-month cleaning.' } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const taskId = res.body.task.id as string;
      const [sent] = await t.repliesTo(fake, to, 1);
      assert.equal(sent!.body, written);
      assert.equal(sent!.from, org.number);
      // The model was asked once, with the agent's instructions, the task's context and that it writes first.
      assert.equal(llm.requests.length, before + 1);
      const system = llm.requests[before]!.body.messages[0]!.content!;
      assert.match(system, /Dana is due for her six-month cleaning/);
      assert.match(system, /You are writing first/);
      // Kept on the task before it was sent (every attempt sends these words); the carrier's status callback settles it later.
      const task = (await h().call('GET', `/api/v2/tasks/${taskId}`, { token: org.token })).body.task;
      assert.equal(task.content, written);
      assert.notEqual(task.state, 'failed', JSON.stringify(task));
      const recorded = await waitFor('the task\'s text recorded', async () => (await t.messages(org.id)).find((m) => m.direction === 'outbound'));
      assert.equal(recorded.text, written);
      const [conversation] = await t.conversations(org.id);
      assert.equal(conversation!.task_id, taskId);
      // Its tokens count as the organization's model usage.
      const usage = await t.db().selectFrom('usage_daily').selectAll().where('org_id', '=', org.id).where('metric', '=', 'modelTokens').execute();
      assert.ok(usage.some((u) => Number(u.n) > 0), JSON.stringify(usage));

      llm.script.push({ text: 'Thursday works, see you then!' });
      await t.text(org, to, 'Thursday please');
      const replies = await t.repliesTo(fake, to, 2);
      assert.equal(replies[1]!.body, 'Thursday works, see you then!');
      assert.deepEqual(asked(llm), [`assistant:${written}`, 'user:Thursday please']);
      assert.match(llm.requests.at(-1)!.body.messages[0]!.content!, /Dana is due for her six-month cleaning/);
      assert.equal((await t.conversations(org.id)).length, 1);
    });

    it('a text task whose model fails is tried again and sends the text once; one whose model keeps failing or writes nothing fails with the reason and sends nothing', async () => {
      const org = await t.twilioOrg(fake);
      const flaky = person();
      llm.script.push({ status: 400 }, { text: 'Second try wording.' });
      const res = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'text', target: flaky, context: 'Remind them of the invoice.' } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const [sent] = await t.repliesTo(fake, flaky, 1);
      assert.equal(sent!.body, 'Second try wording.');
      const settle = (id: string) => waitFor(`task ${id} settled`, async () => {
        const r = await h().call('GET', `/api/v2/tasks/${id}`, { token: org.token });
        return ['finished', 'failed'].includes(r.body.task.state as string) && r.body.task;
      });
      const retried = (await h().call('GET', `/api/v2/tasks/${res.body.task.id as string}`, { token: org.token })).body.task;
      assert.equal(retried.content, 'Second try wording.');
      assert.equal(retried.attempts, 2);

      const broken = person();
      llm.script.push({ status: 400 }, { status: 400 }, { status: 400 });
      const failing = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'text', target: broken, context: 'Remind them of the invoice.' } });
      const failed = await settle(failing.body.task.id as string);
      assert.equal(failed.state, 'failed');
      assert.match(failed.error as string, /model could not write the text .*nothing was sent/);
      assert.equal(failed.content, null);

      const silent = person();
      llm.script.push({ text: '   ' });
      const empty = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'text', target: silent, context: 'Say nothing.' } });
      const emptied = await settle(empty.body.task.id as string);
      assert.equal(emptied.state, 'failed');
      assert.match(emptied.error as string, /empty text; nothing was sent/);
      assert.equal([...fake.messages.values()].filter((m) => m.to === broken || m.to === silent).length, 0);
    });

    it('the answer to a text task of another agent goes to that agent while the conversation is open', async () => {
      const org = await t.twilioOrg(fake);
      const second = await h().agent(org.id);
      const to = person();
      const res = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'text', target: to, content: 'This is your second agent.', accountId: second.id } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      await waitFor('the task\'s text recorded', async () => (await t.messages(org.id)).find((m) => m.direction === 'outbound'));
      await t.text(org, to, 'Hello second agent');
      await t.repliesTo(fake, to, 2);
      const conversations = await t.conversations(org.id);
      assert.equal(conversations.length, 1);
      assert.equal(conversations[0]!.account_id, second.id);
      assert.deepEqual(asked(llm), ['assistant:This is your second agent.', 'user:Hello second agent']);
      // Someone the second agent never texted gets the default agent.
      const stranger = person();
      await t.text(org, stranger, 'Hi');
      await t.repliesTo(fake, stranger, 1);
      const theirs = (await t.conversations(org.id)).find((c) => c.counterpart === stranger);
      assert.equal(theirs!.account_id, org.agentId);
    });

    it('a carrier that is busy (429) gets the same reply again, without asking the model twice; one that failed (500) fails the turn and the reply', async () => {
      const org = await t.twilioOrg(fake);
      const busy = person();
      const before = llm.requests.length;
      fake.failNext({ status: 429, code: 20429, message: 'Too Many Requests', headers: { 'retry-after': '0' } });
      llm.script.push({ text: 'Answer after a busy carrier.' });
      await t.text(org, busy, 'first try');
      const [reply] = await t.repliesTo(fake, busy, 1);
      assert.equal(reply!.body, 'Answer after a busy carrier.');
      const [turn] = await t.settledTurns(org.id, 1);
      assert.equal(turn!.state, 'finished');
      assert.equal(turn!.attempt, 2);
      assert.equal(llm.requests.length, before + 1);
      assert.equal(fake.requests.filter((r) => r.path.endsWith('/Messages.json') && r.form.get('To') === busy).length, 2);
      assert.deepEqual((await t.messages(org.id)).filter((m) => m.direction === 'outbound').map((m) => [m.text, m.status]), [['Answer after a busy carrier.', 'success']]);

      const broken = person();
      fake.failNext({ status: 500, code: 20500, message: 'Internal Server Error' });
      await t.text(org, broken, 'second try');
      const turns = await t.settledTurns(org.id, 2);
      const failed = turns.find((x) => x.state !== 'finished')!;
      assert.equal(failed.state, 'failed');
      assert.match(failed.last_error!, /twilio 500/);
      assert.equal(llm.requests.length, before + 2);
      assert.equal(fake.requests.filter((r) => r.path.endsWith('/Messages.json') && r.form.get('To') === broken).length, 1);
      const out = (await t.messages(org.id)).filter((m) => m.direction === 'outbound');
      assert.equal(out.at(-1)!.status, 'failed');
    });

    it('the organization\'s twilioSMS relay still receives the raw webhook, once per retry-deduplicated request', async () => {
      const org = await t.twilioOrg(fake, { premium: true });
      const relay = await h().call('POST', '/api/v2/webhookRelay/twilioSMS', { token: org.token, body: { url: 'https://hooks.example.com/sms' } });
      assert.equal(relay.status, 200, JSON.stringify(relay.body));
      const from = person();
      const params = t.incoming(org, from, 'relay me');
      const headers = { 'i-twilio-idempotency-token': crypto.randomUUID() };
      assert.equal((await t.post(params, { fake, headers })).status, 200);
      assert.equal((await t.post(params, { fake, headers })).status, 200);
      await t.repliesTo(fake, from, 1);
      const events = await t.db().selectFrom('relay_events').selectAll().where('org_id', '=', org.id).execute();
      assert.equal(events.length, 1);
      assert.equal(Buffer.from(events[0]!.body, 'base64').toString('utf8'), new URLSearchParams(params).toString());
      assert.equal(JSON.parse(events[0]!.headers)['x-twilio-signature'], twilioSignature(fake.authToken, SMS_URL, params));
      const deliveries = await t.db().selectFrom('webhook_deliveries').selectAll().where('org_id', '=', org.id).where('kind', '=', 'relay').execute();
      assert.equal(deliveries.length, 1);
      assert.equal((await t.turns(org.id)).length, 1);
      // Without a relay nothing is stored for it (and nothing fails).
      const plain = await t.twilioOrg(fake, { premium: true });
      await t.text(plain, person(), 'no relay here');
      assert.equal((await t.db().selectFrom('relay_events').selectAll().where('org_id', '=', plain.id).execute()).length, 0);
    });
  });

  describe(`text messages without a model provider (SIMULATED) [${engine}]`, () => {
    let harness: Harness;
    let fake: FakeTwilio;
    const h = () => harness;
    const t = kit(h);
    before(async () => {
      fake = await startFakeTwilio();
      harness = await startHarness(engine, { CALLPLANE_PUBLIC_URL: PUBLIC, CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, {
        turns: true, worker: true, runtime: { carrierOptions: { simulated: { textSeconds: 0.02 } } },
      });
    });
    after(async () => { await harness.close(); await fake.close(); });

    it('the SIMULATED engine answers a text too, and its reply says it is simulated', async () => {
      const org = await t.twilioOrg(fake);
      const from = person();
      await t.text(org, from, 'Anyone there?');
      const [reply] = await t.repliesTo(fake, from, 1);
      assert.match(reply!.body, /^\[simulated reply: no language model is configured\] You said: "Anyone there\?"/);
      assert.equal(reply!.from, org.number);
      const [conversation] = await t.conversations(org.id);
      assert.equal(conversation!.engine, 'simulated');
    });

    it('a text task on the SIMULATED carrier is recorded too, marked simulated', async () => {
      const reseller = await h().reseller();
      const org = await h().organization(reseller.id);
      const to = person();
      const res = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'text', target: to, content: 'Simulated hello' } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const taskId = res.body.task.id as string;
      const recorded = await waitFor('the simulated text recorded', async () => (await t.messages(org.id)).find((m) => m.direction === 'outbound'));
      assert.equal(recorded.text, 'Simulated hello');
      assert.equal(recorded.status, 'success');
      assert.deepEqual(JSON.parse(recorded.data!), { taskId, provider: 'simulated', carrierRef: `sim_text_${taskId}`, simulated: true });
      const [conversation] = await t.conversations(org.id);
      assert.equal(conversation!.task_id, taskId);
      assert.equal(conversation!.counterpart, to);
      assert.equal(conversation!.engine, 'simulated');
      const task = await waitFor('the task finished', async () => {
        const r = await h().call('GET', `/api/v2/tasks/${taskId}`, { token: org.token });
        return r.body.task.state === 'finished' && r.body.task;
      });
      assert.equal(task.state, 'finished');
    });
  });
}
