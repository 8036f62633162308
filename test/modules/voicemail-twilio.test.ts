// Voicemail on Twilio calls, on both engines (docs/voice.md, Voicemail): a call task placed on the
// fake Twilio server asks for answering-machine detection as the call policy's plan says
// (MachineDetection, AsyncAmd, a signed AsyncAmdStatusCallback of ours), and the fake's signed AMD
// callback decides: a machine is hung up on, or given the task's message and hung up on, or talked
// to; a person is talked to. The conversation records who answered; the task's outcome is
// `voicemail`. Signatures and tenancy of the callback route; validation of the settings.
// @engines sqlite
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { conversationRepo, messageRepo } from '../../src/modules/conversations/repository.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { startFakeTwilio, type FakeTwilio } from '../helpers/fake-twilio.ts';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { freePort, waitFor } from '../helpers/wait.ts';

const FROM = '+15005550006';
const RUNTIME = { leaseMs: 3000, heartbeatMs: 50, rescueEveryMs: 0, carrierOptions: { twilio: { timeoutMs: 1500 }, simulated: { callSeconds: 0.05 } } };
const AMD_PATH = '/api/v2/providers/twilio/amd';

let targetSeq = 0;
const nextTarget = () => `+1415556${String(3000 + ++targetSeq)}`;

for (const engine of ENGINES) {
  describe(`voicemail on Twilio calls [${engine}]`, () => {
    let h: Harness;
    let llm: FakeLlm;
    let fake: FakeTwilio;
    let other: FakeTwilio;
    let publicUrl: string;

    before(async () => {
      llm = await startFakeLlm({ models: ['fake-model'] });
      fake = await startFakeTwilio();
      other = await startFakeTwilio();
      const port = await freePort();
      publicUrl = `http://127.0.0.1:${port}`;
      h = await startHarness(engine, {
        CALLPLANE_PUBLIC_URL: publicUrl, CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
        CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0',
      }, { worker: true, runtime: RUNTIME });
      await h.app.listen({ port, host: '127.0.0.1' });
    });
    after(async () => {
      await h?.close();
      await fake?.close();
      await other?.close();
      await llm?.close();
    });

    async function org(twilio: FakeTwilio = fake, extra: Record<string, string> = {}) {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const res = await h.call('POST', '/api/v2/numberingProvider', {
        token: r.token, query: { targetOrganizationId: o.id },
        body: { providerId: 'twilio', config: { accountSid: twilio.accountSid, authToken: twilio.authToken, phoneNumber: FROM, apiBaseUrl: twilio.url, ...extra } },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return { ...o, agentToken: await h.tokenFor(o.agentId) };
    }

    async function configure(token: string, config: Record<string, unknown>) {
      const edit = await h.call('POST', '/api/v2/agent', { token, body: config });
      assert.equal(edit.status, 200, JSON.stringify(edit.body));
      assert.equal((await h.call('POST', '/api/v2/agent/publish', { token })).status, 200);
    }

    const task = async (o: { token: string }, id: string) => {
      const res = await h.call('GET', `/api/v2/tasks/${id}`, { token: o.token });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.task;
    };

    /** A call task placed and answered (its TwiML fetched, so its conversation is open). */
    async function answeredCall(o: { id: number; token: string }, body: Record<string, unknown> = {}, twilio = fake) {
      const created = await h.call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: nextTarget(), ...body } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const id = created.body.task.id as string;
      const t = await waitFor(`call ${id} placed`, async () => { const x = await task(o, id); return x.state === 'running' && x.providerRef && x; });
      const sid = t.providerRef as string;
      assert.equal((await twilio.fetchTwiml(sid)).status, 200);
      const c = await conversationRepo.byCarrierRef(h.database.db, o.id, sid);
      assert.ok(c);
      return { id, sid, conversationId: c.id };
    }

    const transcript = async (id: string) => (await messageRepo.ofConversation(h.database.db, id)).map((m) => `${m.direction}:${m.text}`);

    it('leave-message (the task\'s own): DetectMessageEnd with async AMD to our route; machine_end_beep → the message said, hung up, outcome voicemail', async () => {
      const o = await org();
      await configure(o.agentToken, { welcomeMessage: 'Hello from Acme.', voicemailAction: 'continue' });
      const { id, sid, conversationId } = await answeredCall(o, { voicemail: { action: 'leave-message', message: 'Hi, this is Acme & co. Please call us back.' } });
      const placed = fake.calls.get(sid)!;
      assert.equal(placed.machineDetection, 'DetectMessageEnd');
      assert.equal(placed.asyncAmd, 'true');
      assert.equal(placed.amdCallback, `${publicUrl}${AMD_PATH}?taskId=${id}`);
      assert.equal(placed.amdCallbackMethod, 'POST');
      const shown = await task(o, id);
      assert.deepEqual(shown.voicemail, { action: 'leave-message', message: 'Hi, this is Acme & co. Please call us back.' });

      const before = Date.now();
      assert.equal((await fake.sendAmd(sid, 'machine_end_beep')).status, 204);
      const redirect = fake.redirects.find((r) => r.sid === sid);
      assert.ok(redirect, 'the call was given the message');
      assert.equal(redirect.twiml, '<?xml version="1.0" encoding="UTF-8"?><Response><Say voice="Polly.Joanna-Neural" language="en-US">'
        + 'Hi, this is Acme &amp; co. Please call us back.</Say><Hangup/></Response>');
      const c = (await conversationRepo.find(h.database.db, conversationId))!;
      assert.equal(c.answered_by, 'machine');
      assert.ok(c.answered_by_at! >= before);
      assert.equal(c.outcome, 'voicemail');
      assert.deepEqual(await transcript(conversationId), ['outbound:Hello from Acme.', 'outbound:Hi, this is Acme & co. Please call us back.']);
      // A repeated callback changes nothing (the first verdict stands).
      assert.equal((await fake.sendAmd(sid, 'human')).status, 204);
      assert.equal((await conversationRepo.find(h.database.db, conversationId))!.answered_by, 'machine');
      assert.equal(fake.redirects.filter((r) => r.sid === sid).length, 1);

      assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
      const done = await waitFor('task finished', async () => { const x = await task(o, id); return x.state === 'finished' && x; });
      assert.equal(done.result.outcome, 'voicemail');
      assert.equal(done.result.answeredBy, 'machine_end_beep');
      // The conversation read says who answered (extension) and when.
      const read = await h.call('GET', `/api/v2/conversation/${o.agentId}:${c.room_id}/${c.id}`, { token: o.token });
      assert.equal(read.status, 200, JSON.stringify(read.body));
      const [one] = read.body as Record<string, unknown>[];
      assert.equal(one!.answeredBy, 'machine');
      assert.equal(one!.outcome, 'voicemail');
      assert.equal(typeof one!.answeredByAt, 'number');
      assert.equal(one!.voicemailRecording, null, 'Twilio calls are not recorded by callplane');
    });

    it('hangup (the agent\'s): MachineDetection Enable; machine_start → the call is ended, outcome voicemail on the task and the conversation', async () => {
      const o = await org();
      await configure(o.agentToken, { voicemailAction: 'hangup' });
      const { id, sid, conversationId } = await answeredCall(o);
      assert.equal(fake.calls.get(sid)!.machineDetection, 'Enable');
      assert.equal((await fake.sendAmd(sid, 'machine_start')).status, 204);
      await waitFor('the call ended by us', () => Promise.resolve(fake.calls.get(sid)!.status === 'completed'));
      assert.equal(fake.redirects.filter((r) => r.sid === sid).length, 0);
      const done = await waitFor('task finished', async () => { const x = await task(o, id); return x.state === 'finished' && x; });
      assert.equal(done.result.outcome, 'voicemail');
      const c = (await conversationRepo.find(h.database.db, conversationId))!;
      assert.equal(c.answered_by, 'machine');
      assert.equal(c.outcome, 'voicemail');
    });

    it('a person (human) and continue: the call goes on; the task\'s outcome is completed; continue asks Twilio for no detection', async () => {
      const o = await org();
      await configure(o.agentToken, { voicemailAction: 'hangup' });
      const person = await answeredCall(o);
      assert.equal((await fake.sendAmd(person.sid, 'human')).status, 204);
      assert.equal(fake.calls.get(person.sid)!.status, 'queued', 'nobody ended the call');
      assert.equal(fake.redirects.filter((r) => r.sid === person.sid).length, 0);
      const c = (await conversationRepo.find(h.database.db, person.conversationId))!;
      assert.equal(c.answered_by, 'human');
      assert.equal(c.ended_at, null);
      assert.equal((await fake.progressCall(person.sid, 'completed')).status, 204);
      const done = await waitFor('task finished', async () => { const x = await task(o, person.id); return x.state === 'finished' && x; });
      assert.equal(done.result.outcome, 'completed');

      // The task's `continue` over the agent's hangup: Twilio is not asked to detect (it bills per call).
      const going = await answeredCall(o, { voicemail: { action: 'continue' } });
      assert.equal(fake.calls.get(going.sid)!.machineDetection, undefined);
      assert.equal(fake.calls.get(going.sid)!.amdCallback, undefined);
      assert.equal((await fake.progressCall(going.sid, 'completed')).status, 204);
    });

    it('an organization whose calls stream (its provider\'s voice, over this gathering deployment): Twilio is asked for no detection (the stream\'s audio decides)', async () => {
      const o = await org(fake, { voice: 'stream' });
      await configure(o.agentToken, { voicemailAction: 'hangup' });
      const { sid } = await answeredCall(o, { voicemail: { action: 'leave-message', message: 'Call us back.' } });
      const placed = fake.calls.get(sid)!;
      assert.equal(placed.machineDetection, undefined);
      assert.equal(placed.amdCallback, undefined);
      assert.match((await fake.fetchTwiml(sid)).body, /<Connect><Stream /, 'the call streams');
      // The same deployment's gathering organizations still ask (the tests above).
      assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
    });

    it('the callback route: unsigned, forged or another organization\'s signature 403; an unknown task the same 403; another call 409; nothing recorded', async () => {
      const o = await org();
      await configure(o.agentToken, { voicemailAction: 'hangup' });
      const { id, sid, conversationId } = await answeredCall(o);
      const forged = await fake.sendAmd(sid, 'machine_start', { token: 'not-the-token' });
      assert.equal(forged.status, 403, forged.body);
      const unsigned = await fetch(`${publicUrl}${AMD_PATH}?taskId=${id}`, {
        method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ AccountSid: fake.accountSid, CallSid: sid, AnsweredBy: 'machine_start' }).toString(),
      });
      assert.equal(unsigned.status, 403);
      // Signed with another organization's (real) token.
      const foreignOrg = await org(other);
      assert.ok(foreignOrg);
      const foreign = await other.postSigned(`${publicUrl}${AMD_PATH}?taskId=${id}`, { AccountSid: other.accountSid, CallSid: sid, AnsweredBy: 'machine_start' });
      assert.equal(foreign.status, 403);
      // An unknown task: the same answer as a forged signature.
      const unknown = await fake.postSigned(`${publicUrl}${AMD_PATH}?taskId=tsk_nothere`, { AccountSid: fake.accountSid, CallSid: sid, AnsweredBy: 'machine_start' });
      assert.equal(unknown.status, 403);
      assert.deepEqual({ ...JSON.parse(unknown.body), requestId: 0 }, { ...JSON.parse(forged.body), requestId: 0 });
      // Another call of ours for this task: 409.
      const wrong = await fake.postSigned(`${publicUrl}${AMD_PATH}?taskId=${id}`, { AccountSid: fake.accountSid, CallSid: `CA${'e'.repeat(32)}`, AnsweredBy: 'machine_start' });
      assert.equal(wrong.status, 409, wrong.body);
      // A value Twilio never sends: 400.
      const odd = await fake.postSigned(`${publicUrl}${AMD_PATH}?taskId=${id}`, { AccountSid: fake.accountSid, CallSid: sid, AnsweredBy: 'robot' });
      assert.equal(odd.status, 400, odd.body);
      const c = (await conversationRepo.find(h.database.db, conversationId))!;
      assert.equal(c.answered_by, null);
      assert.equal(c.ended_at, null);
      assert.equal(fake.calls.get(sid)!.status, 'queued');
      assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
    });

    it('validation: the task\'s voicemail and the agent\'s voicemailAction are 400s naming the field', async () => {
      const o = await org();
      const bad = async (body: Record<string, unknown>, field: RegExp) => {
        const res = await h.call('POST', '/api/v2/tasks', { token: o.token, body: { target: nextTarget(), type: 'call', ...body } });
        assert.equal(res.status, 400, JSON.stringify(res.body));
        assert.equal(res.body.success, false);
        assert.match(res.body.message, field);
      };
      await bad({ voicemail: { action: 'shout' } }, /^voicemail\.action must be one of: hangup, leave-message, continue/);
      // The short string forms (`hangup`, `continue`, `leave-message: …`) are accepted (docs/tasks.md); another string is not.
      await bad({ voicemail: 'shout' }, /^voicemail/);
      await bad({ voicemail: { action: 'hangup', colour: 'red' } }, /^voicemail\.colour is not a field/);
      await bad({ voicemail: { action: 'leave-message', message: 'x'.repeat(1001) } }, /^voicemail\.message must be at most 1000/);
      await bad({ voicemail: { action: 'leave-message', message: 7 } }, /^voicemail\.message must be a string/);
      await bad({ type: 'text', content: 'hi', voicemail: { action: 'hangup' } }, /^voicemail applies to call tasks only/);
      const agent = await h.call('POST', '/api/v2/agent', { token: o.agentToken, body: { voicemailAction: 'scream' } });
      assert.equal(agent.status, 400, JSON.stringify(agent.body));
      assert.match(agent.body.message, /voicemailAction/);
      const long = await h.call('POST', '/api/v2/agent', { token: o.agentToken, body: { voicemailMessage: 'x'.repeat(1001) } });
      assert.equal(long.status, 400);
      assert.match(long.body.message, /voicemailMessage/);
    });
  });
}
