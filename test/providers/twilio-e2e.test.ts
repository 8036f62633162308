// Twilio end to end: tasks run by the worker place calls and texts on the fake Twilio server
// (test/helpers/fake-twilio.ts), which calls our app back over real HTTP on 127.0.0.1 with
// signed status callbacks and TwiML fetches, as Twilio would.
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import { startFakeTwilio, twilioSignature, type FakeCall, type FakeTwilio } from '../helpers/fake-twilio.ts';
import type { Harness } from '../helpers/harness.ts';
import { freePort, waitFor } from '../helpers/wait.ts';

// Our app's public URL is the address it listens on, so the fake can reach it. The suites of the
// two engines run one after the other and each closes its server, so they share the port.
const PORT = await freePort();
const PUBLIC = `http://127.0.0.1:${PORT}`;
const STATUS = `${PUBLIC}/api/v2/providers/twilio/status`;
const TWIML = `${PUBLIC}/api/v2/providers/twilio/twiml`;
/** An error answer without its requestId (which differs on every request). */
const envelope = (body: string) => { const { requestId: _id, ...rest } = JSON.parse(body) as Record<string, unknown>; return rest; };
const FROM = '+15005550006';
const RUNTIME = {
  // A short heartbeat: the worker notices quickly that a callback has settled its task.
  leaseMs: 3000, heartbeatMs: 50, rescueEveryMs: 0,
  carrierOptions: { twilio: { timeoutMs: 1500 } },
};

let targetSeq = 0;
const nextTarget = () => `+1415555${String(2000 + ++targetSeq)}`;

function makeTools(h: () => Harness) {
  async function org(fake: FakeTwilio | null, extra: Record<string, string> = {}) {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    if (fake) {
      const res = await h().call('POST', '/api/v2/numberingProvider', {
        token: r.token, query: { targetOrganizationId: o.id },
        body: { providerId: 'twilio', config: { accountSid: fake.accountSid, authToken: fake.authToken, phoneNumber: FROM, apiBaseUrl: fake.url, ...extra } },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
    }
    return o;
  }

  async function create(o: { token: string }, body: Record<string, unknown>): Promise<string> {
    const res = await h().call('POST', '/api/v2/tasks', { token: o.token, body });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.task.id;
  }

  async function get(o: { token: string }, id: string) {
    const res = await h().call('GET', `/api/v2/tasks/${id}`, { token: o.token });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.task;
  }

  const until = (o: { token: string }, id: string, state: string) =>
    waitFor(`task ${id} ${state}`, async () => { const t = await get(o, id); return t.state === state && t; });

  /** A call task that the worker has placed on the fake: running, its CallSid recorded. */
  async function runningCall(fake: FakeTwilio, o: { token: string }, body: Record<string, unknown> = {}) {
    const id = await create(o, { type: 'call', target: nextTarget(), ...body });
    const task = await waitFor(`call ${id} placed`, async () => {
      const t = await get(o, id);
      return t.state === 'running' && t.providerRef && t;
    });
    const call = fake.calls.get(task.providerRef);
    assert.ok(call, 'the fake has the call');
    return { id, sid: task.providerRef as string, call: call! };
  }

  async function runningText(fake: FakeTwilio, o: { token: string }) {
    const id = await create(o, { type: 'text', target: nextTarget(), content: 'Your appointment is at 3' });
    const task = await waitFor(`text ${id} sent`, async () => {
      const t = await get(o, id);
      return t.state === 'running' && t.providerRef && t;
    });
    assert.ok(fake.messages.get(task.providerRef), 'the fake has the message');
    return { id, sid: task.providerRef as string };
  }

  /** The worker has let go of every task (a settled task does not keep a slot). */
  const idle = () => waitFor('the worker to be idle', async () => h().tasks.running === 0);

  return { org, create, get, until, runningCall, runningText, idle };
}

const callParams = (fake: FakeTwilio, call: FakeCall, status: string): Record<string, string> => ({
  AccountSid: fake.accountSid, ApiVersion: '2010-04-01', CallSid: call.sid, CallStatus: status,
  From: call.from, To: call.to, Direction: 'outbound-api', CallDuration: '7',
});

async function post(url: string, params: Record<string, string>, signature?: string) {
  const res = await fetch(url, {
    method: 'POST', body: new URLSearchParams(params).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(signature ? { 'x-twilio-signature': signature } : {}) },
  });
  return { status: res.status, body: await res.text() };
}

forEachEngine('twilio end to end', (h) => {
  let fake: FakeTwilio;
  let other: FakeTwilio;
  const t = makeTools(h);

  before(async () => {
    fake = await startFakeTwilio();
    other = await startFakeTwilio();
    await h().app.listen({ port: PORT, host: '127.0.0.1' });
  });
  after(async () => {
    await fake?.close();
    await other?.close();
  });

  it('a call is placed with our TwiML and status URLs, answered with the greeting, and finished by the signed completed callback', async () => {
    const o = await t.org(fake);
    const greeting = 'Hello & <welcome>, this is "Ada"';
    const { id, sid, call } = await t.runningCall(fake, o, { greeting, waitToGreet: true });
    assert.equal(call.url, `${TWIML}?taskId=${id}`);
    assert.equal(call.twiml, undefined, 'instructions come from the TwiML URL, not inline');
    assert.equal(call.statusCallback, `${STATUS}?taskId=${id}`);

    const ringing = await fake.progressCall(sid, 'ringing');
    assert.equal(ringing.status, 204, ringing.body);
    const during = await t.get(o, id);
    assert.equal(during.state, 'running');
    assert.equal(during.result.status, 'ringing');

    // The answered call's conversation (docs/conversations.md, Voice over Twilio): the greeting,
    // then listening; test/modules/conversation-voice.test.ts holds the conversation.
    const viaPost = await fake.fetchTwiml(sid);
    assert.equal(viaPost.status, 200, viaPost.body);
    assert.match(viaPost.contentType ?? '', /^text\/xml/);
    assert.match(viaPost.body, /^<\?xml version="1.0" encoding="UTF-8"\?><Response><Pause length="2"\/><Gather input="speech" [^>]*action="[^"]+\/voice\/gather\?conversation=[^"]+"/);
    assert.match(viaPost.body, /<Say [^>]*>Hello &amp; &lt;welcome&gt;, this is &quot;Ada&quot;<\/Say><\/Gather><\/Response>$/);
    const viaGet = await fake.fetchTwiml(sid, { method: 'GET' });
    assert.equal(viaGet.status, 200, viaGet.body);
    assert.equal(viaGet.body, viaPost.body);
    assert.equal(fake.twimlFetches.filter((f) => f.sid === sid).length, 2);

    assert.equal((await fake.progressCall(sid, 'in-progress')).status, 204);
    const completed = await fake.progressCall(sid, 'completed');
    assert.equal(completed.status, 204, completed.body);
    const done = await t.until(o, id, 'finished');
    assert.equal(done.result.outcome, 'completed');
    assert.equal(done.result.status, 'completed');
    assert.equal(done.result.durationSeconds, 12);
    assert.equal(done.result.providerRef, sid);
    assert.equal(done.provider, 'twilio');
    assert.equal(done.providerRef, sid);
    assert.equal(done.error, null);
    assert.equal(done.attempts, 1);
    await t.idle();

    // Late and repeated callbacks change nothing: a `ringing` after `completed`, a second final.
    assert.equal((await fake.progressCall(sid, 'ringing')).status, 204);
    assert.equal((await fake.progressCall(sid, 'busy')).status, 204);
    const after = await t.get(o, id);
    assert.equal(after.state, 'finished');
    assert.equal(after.result.outcome, 'completed');
    assert.equal(after.result.status, 'completed');
    assert.equal(after.finishedAt, done.finishedAt);
    // A call still asking for instructions once its task has ended is told to hang up.
    const late = await fake.fetchTwiml(sid);
    assert.equal(late.status, 200);
    assert.match(late.body, /<Hangup\/>/);
  });

  it('progress callbacks out of order do not move result.status backwards', async () => {
    const o = await t.org(fake);
    const { id, sid } = await t.runningCall(fake, o);
    assert.equal((await fake.progressCall(sid, 'in-progress', { SequenceNumber: '3' })).status, 204);
    assert.equal((await fake.progressCall(sid, 'ringing', { SequenceNumber: '1' })).status, 204);
    assert.equal((await t.get(o, id)).result.status, 'in-progress');
    assert.equal((await fake.progressCall(sid, 'completed', { SequenceNumber: '4' })).status, 204);
    assert.equal((await t.until(o, id, 'finished')).result.outcome, 'completed');
    await t.idle();
  });

  for (const outcome of ['busy', 'no-answer'] as const) {
    it(`a ${outcome} call finishes with outcome ${outcome}`, async () => {
      const o = await t.org(fake);
      const { id, sid } = await t.runningCall(fake, o);
      assert.equal((await fake.progressCall(sid, outcome)).status, 204);
      const done = await t.until(o, id, 'finished');
      assert.equal(done.result.outcome, outcome);
      assert.equal(done.error, null);
      await t.idle();
    });
  }

  it('retry rules over Twilio: a no-answer status callback sends the call back to the queue, the retry is a new call (its own idempotency token), each attempt logged', async () => {
    const o = await t.org(fake);
    const first = await t.runningCall(fake, o, { retryRules: { on: ['no-answer'], delaysSec: [1], maxAttempts: 2 } });
    assert.equal(first.call.idempotencyToken, first.id, 'the first attempt keeps the task id as its key');
    assert.equal((await fake.progressCall(first.sid, 'no-answer')).status, 204);
    const waiting = await t.until(o, first.id, 'pending');
    assert.match(waiting.error, /^no-answer on attempt 1 of 2; next attempt at /);
    assert.deepEqual(waiting.attemptLog.map((a: { result: string; providerRef: string }) => [a.result, a.providerRef]), [['no-answer', first.sid]]);
    const second = await waitFor('the second call', async () => {
      const v = await t.get(o, first.id);
      return v.state === 'running' && v.providerRef && v.providerRef !== first.sid && v;
    });
    const call2 = fake.calls.get(second.providerRef)!;
    assert.equal(call2.idempotencyToken, `${first.id}:attempt-2`);
    assert.equal((await fake.progressCall(second.providerRef, 'no-answer')).status, 204);
    const done = await t.until(o, first.id, 'finished');
    assert.equal(done.result.stopReason, 'retries exhausted after 2 attempts: no-answer');
    assert.deepEqual(done.attemptLog.map((a: { attempt: number; result: string; providerRef: string }) => [a.attempt, a.result, a.providerRef]),
      [[1, 'no-answer', first.sid], [2, 'no-answer', second.providerRef]]);
    await t.idle();
  });

  it('a failed call fails the task, with Twilio\'s error code', async () => {
    const o = await t.org(fake);
    const { id, sid } = await t.runningCall(fake, o);
    assert.equal((await fake.progressCall(sid, 'failed', { ErrorCode: '32009' })).status, 204);
    const done = await t.until(o, id, 'failed');
    assert.equal(done.result.outcome, 'failed');
    assert.equal(done.result.errorCode, '32009');
    assert.match(done.error, /twilio: call failed \(error 32009\)/);
    await t.idle();
  });

  it('a text is finished when Twilio reports it delivered', async () => {
    const o = await t.org(fake);
    const { id, sid } = await t.runningText(fake, o);
    const msg = fake.messages.get(sid)!;
    assert.equal(msg.statusCallback, `${STATUS}?taskId=${id}`);
    assert.equal(msg.from, FROM);
    assert.equal((await fake.messageStatus(sid, 'sending')).status, 204);
    const during = await t.get(o, id);
    assert.equal(during.state, 'running');
    assert.equal(during.result.status, 'sending');
    assert.equal((await fake.messageStatus(sid, 'delivered')).status, 204);
    const done = await t.until(o, id, 'finished');
    assert.equal(done.result.outcome, 'delivered');
    assert.equal(done.providerRef, sid);
    await t.idle();
  });

  it('an undelivered text fails the task, with Twilio\'s error code', async () => {
    const o = await t.org(fake);
    const { id, sid } = await t.runningText(fake, o);
    assert.equal((await fake.messageStatus(sid, 'undelivered', { ErrorCode: '30003' })).status, 204);
    const done = await t.until(o, id, 'failed');
    assert.equal(done.result.outcome, 'undelivered');
    assert.equal(done.result.errorCode, '30003');
    assert.match(done.error, /text undelivered \(error 30003\)/);
    await t.idle();
  });

  it('a forged, missing or stale signature is refused with 403 and the task keeps running', async () => {
    const o = await t.org(fake);
    const { id, sid, call } = await t.runningCall(fake, o);
    const url = call.statusCallback!;
    const params = callParams(fake, call, 'completed');

    const forged = await fake.postSigned(url, params, { token: 'not-the-auth-token' });
    assert.equal(forged.status, 403, forged.body);
    assert.match(JSON.parse(forged.body).message, /X-Twilio-Signature/);
    assert.equal((await post(url, params)).status, 403, 'no signature');
    // Signed for one form, sent with another (a different status).
    const signature = twilioSignature(fake.authToken, url, params);
    assert.equal((await post(url, { ...params, CallStatus: 'failed' }, signature)).status, 403, 'tampered form');
    // Signed for another task's URL (a task that does not exist): the same 403 as the forged signature.
    const unknownTask = await post(`${STATUS}?taskId=${id}x`, params, signature);
    assert.equal(unknownTask.status, 403, unknownTask.body);
    assert.deepEqual(envelope(unknownTask.body), envelope(forged.body));
    const otherUrlSig = twilioSignature(fake.authToken, `${STATUS}?taskId=other`, params);
    assert.equal((await post(url, params, otherUrlSig)).status, 403, 'signature for another URL');
    const twiml = await fake.fetchTwiml(sid, { token: 'not-the-auth-token' });
    assert.equal(twiml.status, 403);
    assert.doesNotMatch(twiml.body, /<Response>/);

    const still = await t.get(o, id);
    assert.equal(still.state, 'running');
    assert.notEqual(still.result.status, 'completed');

    // The real callback still ends it.
    assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
    assert.equal((await t.until(o, id, 'finished')).result.outcome, 'completed');
    await t.idle();
  });

  it('a callback for another organization\'s task is refused: wrong token 403, wrong AccountSid 403, wrong CallSid 409', async () => {
    const mine = await t.org(fake);
    const theirs = await t.org(other);
    const { id, sid, call } = await t.runningCall(other, theirs);
    const url = call.statusCallback!;
    const params = callParams(other, call, 'completed');

    // Signed by the first organization's Twilio account (its real token), for the second's task.
    const wrongToken = await fake.postSigned(url, { ...params, AccountSid: fake.accountSid });
    assert.equal(wrongToken.status, 403, wrongToken.body);
    // Correctly signed, but naming another Twilio account.
    const wrongAccount = await other.postSigned(url, { ...params, AccountSid: fake.accountSid });
    assert.equal(wrongAccount.status, 403, wrongAccount.body);
    assert.match(JSON.parse(wrongAccount.body).message, /AccountSid/);
    // Correctly signed, but for a call that is not this task's.
    const wrongCall = await other.postSigned(url, { ...params, CallSid: `CA${'0'.repeat(32)}` });
    assert.equal(wrongCall.status, 409, wrongCall.body);
    assert.match(JSON.parse(wrongCall.body).message, /CallSid/);

    assert.equal((await t.get(theirs, id)).state, 'running');
    assert.equal((await other.progressCall(sid, 'completed')).status, 204);
    assert.equal((await t.until(theirs, id, 'finished')).result.outcome, 'completed');
    assert.ok(mine.id !== theirs.id);
    await t.idle();
  });

  it('callbacks that name no task, an unknown task, or a task of an organization without Twilio are refused; an unknown task exactly as a bad signature', async () => {
    const params = { AccountSid: fake.accountSid, CallSid: `CA${'1'.repeat(32)}`, CallStatus: 'completed' };
    assert.equal((await fake.postSigned(STATUS, params)).status, 400);
    const plain = await t.org(null);
    const ping = await t.create(plain, { type: 'ping' });
    await t.until(plain, ping, 'finished');
    const res = await fake.postSigned(`${STATUS}?taskId=${ping}`, params);
    assert.equal(res.status, 403, res.body);
    // Status callback and TwiML URL: a task that does not exist answers what a known one with a bad signature does.
    for (const base of [STATUS, TWIML]) {
      const forged = await fake.postSigned(`${base}?taskId=${ping}`, params, { token: 'not-the-auth-token' });
      assert.equal(forged.status, 403, forged.body);
      for (const unknown of [await fake.postSigned(`${base}?taskId=tsk_nope`, params), await fake.postSigned(`${base}?taskId=tsk_nope`, params, { token: 'not-the-auth-token' })]) {
        assert.equal(unknown.status, forged.status, unknown.body);
        assert.deepEqual(envelope(unknown.body), envelope(forged.body));
      }
      assert.deepEqual(envelope(forged.body), { success: false, message: 'X-Twilio-Signature is missing or does not match this request' });
    }
  });

  it('canceling a running call hangs it up at Twilio and the task ends canceled', async () => {
    const o = await t.org(fake);
    const { id, sid } = await t.runningCall(fake, o);
    const res = await h().call('POST', `/api/v2/tasks/${id}`, { token: o.token, body: { state: 'canceled' } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const hangup = await waitFor('the hang-up request', async () =>
      fake.requests.find((r) => r.method === 'POST' && r.path.endsWith(`/Calls/${sid}.json`)));
    assert.equal(hangup.form.get('Status'), 'completed');
    const done = await t.until(o, id, 'canceled');
    assert.ok(done.cancelRequestedAt);
    await t.idle();
    assert.equal(fake.calls.get(sid)!.status, 'completed');
  });

  it('after a cancel request, Twilio\'s `completed` for the hung-up call ends the task canceled, not finished', async () => {
    const o = await t.org(fake);
    const { id, sid } = await t.runningCall(fake, o);
    // The hang-up request gets no answer, so the status callback is what settles the task.
    fake.hangNext();
    assert.equal((await h().call('POST', `/api/v2/tasks/${id}`, { token: o.token, body: { state: 'canceled' } })).status, 200);
    await waitFor('the hang-up request', async () => fake.requests.some((r) => r.path.endsWith(`/Calls/${sid}.json`)));
    assert.equal((await t.get(o, id)).state, 'running');
    assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
    const done = await t.until(o, id, 'canceled');
    assert.equal(done.result.outcome, 'completed', 'what Twilio reported is kept');
    assert.equal(done.result.durationSeconds, 12);
    assert.equal(done.error, null);
    await t.idle(); // the worker gives up on the unanswered hang-up and lets go
    assert.equal((await t.get(o, id)).state, 'canceled');
  });

  it('a Twilio 500 on create fails the task without a retry: the call may exist', async () => {
    const o = await t.org(fake);
    const creates = () => fake.requests.filter((r) => r.path.endsWith('/Calls.json')).length;
    const before = creates();
    fake.failNext({ status: 500, code: 20500, message: 'Internal Server Error' });
    const id = await t.create(o, { type: 'call', target: nextTarget() });
    const done = await t.until(o, id, 'failed');
    assert.match(done.error, /twilio 500/);
    assert.match(done.error, /not retried/);
    assert.equal(done.attempts, 1);
    assert.equal(creates(), before + 1);
    await t.idle();
  });

  it('a Twilio 429 with Retry-After is retried after the wait it asked for', async () => {
    const o = await t.org(fake);
    const createsBefore = fake.requests.filter((r) => r.path.endsWith('/Calls.json')).length;
    fake.failNext({ status: 429, code: 20429, message: 'Too Many Requests', headers: { 'Retry-After': '1' } });
    const { id, sid } = await t.runningCall(fake, o);
    const creates = fake.requests.filter((r) => r.path.endsWith('/Calls.json')).slice(createsBefore);
    assert.equal(creates.length, 2);
    assert.ok(creates[1].at - creates[0].at >= 900, `retried after ${creates[1].at - creates[0].at} ms, before Retry-After`);
    const running = await t.get(o, id);
    assert.equal(running.attempts, 2);
    assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
    const done = await t.until(o, id, 'finished');
    assert.equal(done.result.outcome, 'completed');
    assert.equal(done.error, null);
    await t.idle();
  });
}, { CALLPLANE_PUBLIC_URL: PUBLIC, CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, { worker: true, runtime: RUNTIME });

forEachEngine('twilio apiBaseUrl outside twilio.com', (h) => {
  let fake: FakeTwilio;
  const t = makeTools(h);
  before(async () => { fake = await startFakeTwilio(); });
  after(async () => { await fake?.close(); });

  it('without CALLPLANE_ALLOW_PRIVATE_TARGETS a non-Twilio apiBaseUrl fails the task, naming apiBaseUrl, and nothing is sent', async () => {
    const local = await t.org(fake);
    const id = await t.create(local, { type: 'call', target: nextTarget() });
    const done = await t.until(local, id, 'failed');
    assert.match(done.error, /apiBaseUrl/);
    assert.equal(done.attempts, 1);

    const elsewhere = await t.org(fake, { apiBaseUrl: 'https://twilio.example.com' });
    const text = await t.create(elsewhere, { type: 'text', target: nextTarget(), content: 'hi' });
    const failed = await t.until(elsewhere, text, 'failed');
    assert.match(failed.error, /apiBaseUrl must be a twilio\.com address/);
    assert.equal(fake.requests.length, 0);
  });
}, {}, { worker: true, runtime: RUNTIME });
