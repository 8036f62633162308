// Opt-outs by text (issue 37, docs/campaigns.md "Opt-outs by text"), on both engines and on
// both ways a text arrives: a SIMULATED number's (the organization posts it) and Twilio's signed
// messaging webhook (the fake Twilio signs and records what is sent back). STOP (and its
// synonyms, any case, spaces around) puts the sender on the organization's list with the
// conversation as evidence and is answered once with a confirmation, never by the agent; START
// takes it off; HELP answers the organization's help text. A listed sender's other texts are
// recorded, not answered; a task to them is refused.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { MessageRow } from '../../src/db/types.ts';
import { DEFAULT_HELP_TEXT } from '../../src/modules/compliance/service.ts';
import { START_CONFIRMATION, STOP_CONFIRMATION } from '../../src/modules/conversations/sms.ts';
import { startFakeTwilio, twilioSignature, type FakeTwilio } from '../helpers/fake-twilio.ts';
import { ENGINE_SKIP_REASON, ENGINES, SKIPPED_ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { numberCalls } from '../helpers/numbers.ts';
import { waitFor } from '../helpers/wait.ts';

const PUBLIC = 'https://sms.callplane.test';
const SMS_PATH = '/api/v2/providers/twilio/sms';
let seq = 0;
const person = () => `+1628555${String(1000 + ++seq)}`;

for (const engine of SKIPPED_ENGINES) describe(`opt-outs by text [${engine}]`, { skip: ENGINE_SKIP_REASON }, () => {});

for (const engine of ENGINES) {
  describe(`opt-outs by text [${engine}]`, () => {
    let harness: Harness;
    let fake: FakeTwilio;
    const h = () => harness;
    const n = numberCalls(h);
    before(async () => {
      fake = await startFakeTwilio();
      harness = await startHarness(engine, { CALLPLANE_PUBLIC_URL: PUBLIC, CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' },
        { turns: true, worker: true, runtime: { carrierOptions: { simulated: { textSeconds: 0.02 } } } });
    });
    after(async () => { await harness.close(); await fake.close(); });

    const db = () => h().database.db;
    const messages = (orgId: number, counterpart: string): Promise<MessageRow[]> => db().selectFrom('conversation_messages')
      .innerJoin('conversations', 'conversations.id', 'conversation_messages.conversation_id')
      .selectAll('conversation_messages').where('conversation_messages.org_id', '=', orgId).where('conversations.counterpart', '=', counterpart)
      .orderBy('conversation_messages.at').orderBy('conversation_messages.id').execute();
    const listed = (orgId: number, number: string) => db().selectFrom('do_not_call').selectAll().where('owner_id', '=', orgId).where('number', '=', number).executeTakeFirst();
    /** Waits until every turn of the organization has ended. */
    const turnsSettled = (orgId: number, count: number) => waitFor(`${count} settled turn(s)`, async () => {
      const rows = await db().selectFrom('conversation_turns').selectAll().where('org_id', '=', orgId).execute();
      return rows.length >= count && rows.every((t) => ['finished', 'failed', 'canceled'].includes(t.state)) && rows;
    });
    const outbound = (rows: MessageRow[]) => rows.filter((m) => m.direction === 'outbound');

    it('on a SIMULATED number: STOP, a text while listed, HELP, START — each keyword answered once by the platform, none by the agent', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const ours = '+13125550130';
      assert.equal((await n.assign(o.token, { number: ours, country: 'US' })).status, 200);
      const from = person();
      const text = async (body: string) => {
        const res = await h().call('POST', '/api/v2/phoneNumber/simulate/text', { token: o.token, body: { number: ours, from, body } });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        return res.body;
      };
      const stop = await text('  sToP ');
      await turnsSettled(o.id, 1);
      const entry = await listed(o.id, from);
      assert.ok(entry, 'STOP put the sender on the organization\'s list');
      assert.equal(entry.source, 'sms-stop');
      assert.equal(entry.evidence, stop.conversationId);
      let rows = await messages(o.id, from);
      assert.deepEqual(outbound(rows).map((m) => [m.text, m.status, JSON.parse(m.data!).kind]), [[STOP_CONFIRMATION, 'success', 'sms_stop']]);
      // Listed: a question is recorded, not answered, and a task to the number is refused.
      const quiet = await text('are you still there?');
      assert.match(quiet.message, /not answered: the sender is on a do-not-call list/);
      const task = await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'text', target: from, content: 'hi', scheduledFor: Math.floor(Date.now() / 1000) + 3600 } });
      assert.equal(task.status, 422);
      assert.match(task.body.message, /do-not-call list.*added by sms-stop/);
      await text('HELP');
      await turnsSettled(o.id, 2);
      rows = await messages(o.id, from);
      assert.deepEqual(outbound(rows).map((m) => m.text), [STOP_CONFIRMATION, DEFAULT_HELP_TEXT]);
      // The organization's own help text.
      const set = await h().call('POST', '/api/v2/compliance/settings', { token: o.token, body: { smsHelpText: 'Acme Dental: call 312-555-0100 for help.' } });
      assert.equal(set.status, 200, JSON.stringify(set.body));
      await text('help');
      await turnsSettled(o.id, 3);
      await text('Unstop');
      await turnsSettled(o.id, 4);
      assert.equal(await listed(o.id, from), undefined, 'START took the number off the list');
      rows = await messages(o.id, from);
      assert.deepEqual(outbound(rows).map((m) => m.text), [STOP_CONFIRMATION, DEFAULT_HELP_TEXT, 'Acme Dental: call 312-555-0100 for help.', START_CONFIRMATION]);
      assert.ok(!rows.some((m) => /simulated reply/.test(m.text)), 'the agent never answered');
      assert.deepEqual(rows.filter((m) => m.direction === 'inbound').map((m) => m.text), ['  sToP ', 'are you still there?', 'HELP', 'help', 'Unstop']);
      // Once off the list the agent answers again.
      await text('what are your hours?');
      await turnsSettled(o.id, 5);
      assert.match(outbound(await messages(o.id, from)).at(-1)!.text, /simulated reply/);
      // "stop please" is not the keyword: answered by the agent, nothing listed.
      await text('stop please');
      await turnsSettled(o.id, 6);
      assert.equal(await listed(o.id, from), undefined);
    });

    it('the agent\'s aiDisclosure is what it writes first in a text thread: before its first reply, and at the start of a text task\'s text', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const agentToken = await h().tokenFor(o.agentId);
      const disclosure = 'This is an AI assistant of Acme Dental.';
      assert.equal((await h().call('POST', '/api/v2/agent', { token: agentToken, body: { aiDisclosure: disclosure } })).status, 200);
      assert.equal((await h().call('POST', '/api/v2/agent/publish', { token: agentToken })).status, 200);
      const ours = '+13125550131';
      assert.equal((await n.assign(o.token, { number: ours, country: 'US' })).status, 200);
      const from = person();
      const text = async (body: string) => {
        const res = await h().call('POST', '/api/v2/phoneNumber/simulate/text', { token: o.token, body: { number: ours, from, body } });
        assert.equal(res.status, 200, JSON.stringify(res.body));
      };
      await text('hi, are you open?');
      await turnsSettled(o.id, 1);
      await text('and on sundays?');
      await turnsSettled(o.id, 2);
      const out = outbound(await messages(o.id, from));
      assert.deepEqual(out.map((m) => (m.data ? JSON.parse(m.data).kind : null) ?? 'reply').sort(), ['ai_disclosure', 'reply', 'reply'], 'one disclosure in the thread');
      assert.equal(out.find((m) => m.data !== null && JSON.parse(m.data).kind === 'ai_disclosure')!.text, disclosure);
      // A text task's text starts with the disclosure.
      const other = person();
      const task = await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'text', target: other, content: 'Your appointment is tomorrow at 9.' } });
      assert.equal(task.status, 201, JSON.stringify(task.body));
      const sent = await waitFor('the text task recorded', async () => outbound(await messages(o.id, other))[0]);
      assert.equal(sent.text, `${disclosure}\n\nYour appointment is tomorrow at 9.`);
    });

    it('through Twilio\'s signed webhook: STOP, START and HELP are answered through the Messages API, once each', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const ours = '+14155553901';
      const prov = await h().call('POST', '/api/v2/numberingProvider', {
        token: r.token, query: { targetOrganizationId: o.id },
        body: { providerId: 'twilio', config: { accountSid: fake.accountSid, authToken: fake.authToken, phoneNumber: ours, apiBaseUrl: fake.url } },
      });
      assert.equal(prov.status, 200, JSON.stringify(prov.body));
      const from = person();
      const post = async (body: string) => {
        const sid = `SM${crypto.randomBytes(16).toString('hex')}`;
        const params = { MessageSid: sid, SmsSid: sid, AccountSid: fake.accountSid, From: from, To: ours, Body: body, NumMedia: '0' };
        const send = () => h().app.inject({
          method: 'POST', url: SMS_PATH, payload: new URLSearchParams(params).toString(),
          headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(fake.authToken, `${PUBLIC}${SMS_PATH}`, params) },
        });
        const res = await send();
        assert.equal(res.statusCode, 200, res.body);
        // Twilio retrying the same MessageSid changes nothing and answers nothing more.
        assert.equal((await send()).statusCode, 200);
      };
      const sentTo = (count: number) => waitFor(`${count} text(s) to ${from}`, async () => {
        const got = [...fake.messages.values()].filter((m) => m.to === from);
        return got.length >= count && got;
      });
      await post('STOP');
      const [confirm] = await sentTo(1);
      assert.equal(confirm!.body, STOP_CONFIRMATION);
      assert.equal(confirm!.from, ours);
      const entry = await listed(o.id, from);
      assert.equal(entry?.source, 'sms-stop');
      await post('HELP');
      await sentTo(2);
      await post('start');
      const all = await sentTo(3);
      assert.deepEqual(all.map((m) => m.body), [STOP_CONFIRMATION, DEFAULT_HELP_TEXT, START_CONFIRMATION]);
      assert.equal(await listed(o.id, from), undefined);
      await turnsSettled(o.id, 3);
      assert.equal([...fake.messages.values()].filter((m) => m.to === from).length, 3, 'each keyword answered once');
      // The agent's disclosure, as the carrier was given it: before its first reply in a new thread.
      const agentToken = await h().tokenFor(o.agentId);
      assert.equal((await h().call('POST', '/api/v2/agent', { token: agentToken, body: { aiDisclosure: 'This is an AI assistant.' } })).status, 200);
      assert.equal((await h().call('POST', '/api/v2/agent/publish', { token: agentToken })).status, 200);
      const newcomer = person();
      const sid = `SM${crypto.randomBytes(16).toString('hex')}`;
      const params = { MessageSid: sid, SmsSid: sid, AccountSid: fake.accountSid, From: newcomer, To: ours, Body: 'hi', NumMedia: '0' };
      const res = await h().app.inject({
        method: 'POST', url: SMS_PATH, payload: new URLSearchParams(params).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(fake.authToken, `${PUBLIC}${SMS_PATH}`, params) },
      });
      assert.equal(res.statusCode, 200);
      const first = await waitFor('the reply to the newcomer', async () => [...fake.messages.values()].find((m) => m.to === newcomer));
      assert.match(first.body, /^This is an AI assistant\.\n\n\[simulated reply/);
    });
  });
}
