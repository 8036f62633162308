// The Twilio carrier against a local fake of Twilio's REST API (test/helpers/fake-twilio.ts), its
// signed status callbacks, signature checks and the greeting TwiML.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import {
  PermanentCarrierError, TransientCarrierError, TwilioCarrier, createCarrier, greetingTwiml, parseRetryAfter,
  parseStatusCallback, verifyTwilioSignature, type StatusCallbackEvent,
} from '../../src/providers/index.ts';
import { first, parseForm } from '../../src/providers/twilio/form.ts';
import { twilioDials } from '../../src/providers/twilio/twiml.ts';
import { startFakeTwilio, twilioSignature, type FakeTwilio } from '../helpers/fake-twilio.ts';

const FROM = '+15005550006';
const TO = '+14155550199';
const never = () => new AbortController().signal;

/** Receives callbacks the way our route will: full URL, signature check, then parsing. */
class CallbackReceiver {
  readonly events: Array<{ url: string; verified: boolean; event: StatusCallbackEvent | null; headers: http.IncomingHttpHeaders }> = [];
  readonly #server: http.Server;
  url = '';
  constructor(authToken: () => string, opts: { cancelRequested?: boolean } = {}) {
    this.#server = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => { raw += c.toString('utf8'); });
      req.on('end', () => {
        const fullUrl = `${this.url}${req.url}`;
        const form = new URLSearchParams(raw);
        const verified = verifyTwilioSignature(authToken(), fullUrl, form, req.headers['x-twilio-signature'] as string | undefined);
        this.events.push({ url: fullUrl, verified, event: verified ? parseStatusCallback(form, opts) : null, headers: req.headers });
        res.writeHead(verified ? 204 : 403).end();
      });
    });
  }
  async start(): Promise<this> {
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this;
  }
  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }
}

describe('twilio carrier against the fake Twilio API', () => {
  let fake: FakeTwilio;
  let receiver: CallbackReceiver;
  let carrier: TwilioCarrier;
  const settings = () => ({ accountSid: fake.accountSid, authToken: fake.authToken, phoneNumber: FROM, apiBaseUrl: fake.url });

  before(async () => {
    fake = await startFakeTwilio();
    receiver = await new CallbackReceiver(() => fake.authToken).start();
    carrier = new TwilioCarrier(settings(), { timeoutMs: 2000 });
  });
  after(async () => {
    await fake.close();
    await receiver.close();
  });

  it('placeCall posts the form Twilio expects, with basic auth and the task id as idempotency token', async () => {
    const before = fake.requests.length;
    const start = await carrier.placeCall({
      taskId: 'tsk_call1', to: TO, greeting: 'Hello & welcome', waitToGreet: true, statusCallbackUrl: `${receiver.url}/twilio/status`,
    }, never());
    assert.equal(fake.requests.length, before + 1);
    const req = fake.requests.at(-1)!;
    assert.equal(req.method, 'POST');
    assert.equal(req.path, `/2010-04-01/Accounts/${fake.accountSid}/Calls.json`);
    assert.equal(req.headers['content-type'], 'application/x-www-form-urlencoded');
    assert.equal(req.headers.authorization, 'Basic ' + Buffer.from(`${fake.accountSid}:${fake.authToken}`).toString('base64'));
    assert.equal(req.headers['i-twilio-idempotency-token'], 'tsk_call1');
    assert.equal(req.form.get('To'), TO);
    assert.equal(req.form.get('From'), FROM);
    assert.equal(req.form.get('Url'), null);
    assert.equal(req.form.get('Twiml'), greetingTwiml({ greeting: 'Hello & welcome', waitToGreet: true }));
    assert.equal(req.form.get('StatusCallback'), `${receiver.url}/twilio/status?taskId=tsk_call1`);
    assert.equal(req.form.get('StatusCallbackMethod'), 'POST');
    assert.deepEqual(req.form.getAll('StatusCallbackEvent'), ['initiated', 'ringing', 'answered', 'completed']);
    assert.match(start.providerRef, /^CA[0-9a-f]{32}$/);
    assert.equal(start.provider, 'twilio');
    assert.equal(start.simulated, false);
    assert.equal(start.status, 'queued');
    assert.equal(start.final, null, 'the outcome comes through the status callback');
  });

  it('a task id already in the callback URL is not added again', async () => {
    await carrier.placeCall({ taskId: 'tsk_inpath', to: TO, statusCallbackUrl: `${receiver.url}/twilio/status/tsk_inpath` }, never());
    assert.equal(fake.requests.at(-1)!.form.get('StatusCallback'), `${receiver.url}/twilio/status/tsk_inpath`);
  });

  it('with a TwiML URL the call sends Url and no inline Twiml; a request from number wins over the setting', async () => {
    await carrier.placeCall({ taskId: 'tsk_url', to: TO, from: '+14155550000', twimlUrl: 'https://cp.example/twiml/tsk_url', statusCallbackUrl: `${receiver.url}/s` }, never());
    const form = fake.requests.at(-1)!.form;
    assert.equal(form.get('Url'), 'https://cp.example/twiml/tsk_url');
    assert.equal(form.get('Twiml'), null);
    assert.equal(form.get('From'), '+14155550000');
  });

  it('without a status callback the call task finishes once Twilio accepts it, marked untracked', async () => {
    const start = await carrier.placeCall({ taskId: 'tsk_nocb', to: TO, greeting: 'hi' }, never());
    assert.equal(fake.requests.at(-1)!.form.get('StatusCallback'), null);
    assert.equal(start.final?.state, 'finished');
    assert.equal(start.final?.result.outcome, 'queued');
    assert.equal(start.final?.result.tracked, false);
  });

  it('a call with no caller id configured is refused before any request', async () => {
    const bare = new TwilioCarrier({ ...settings(), phoneNumber: undefined });
    const count = fake.requests.length;
    const err = await bare.placeCall({ taskId: 'tsk_nofrom', to: TO }, never()).catch((e: unknown) => e);
    assert.ok(err instanceof PermanentCarrierError);
    assert.match(err.message, /phoneNumber/);
    assert.equal(fake.requests.length, count);
  });

  it('a greeting too long for inline TwiML is a permanent error, not a request Twilio would refuse', async () => {
    const count = fake.requests.length;
    const err = await carrier.placeCall({ taskId: 'tsk_long', to: TO, greeting: '&'.repeat(1000) }, never()).catch((e: unknown) => e);
    assert.ok(err instanceof PermanentCarrierError);
    assert.match(err.message, /4000/);
    assert.equal(fake.requests.length, count);
  });

  it('wrong credentials are a permanent error carrying Twilio code 20003', async () => {
    const wrong = new TwilioCarrier({ ...settings(), authToken: 'not-the-token' });
    const err = await wrong.placeCall({ taskId: 'tsk_auth', to: TO }, never()).catch((e: unknown) => e);
    assert.ok(err instanceof PermanentCarrierError);
    assert.equal(err.httpStatus, 401);
    assert.equal(err.code, '20003');
    assert.doesNotMatch(err.message, /not-the-token/);
  });

  it('a 429 is transient, carries Retry-After and says the request was not applied', async () => {
    fake.failNext({ status: 429, code: 20429, message: 'Too Many Requests', headers: { 'retry-after': '7' } });
    const err = await carrier.placeCall({ taskId: 'tsk_429', to: TO }, never()).catch((e: unknown) => e);
    assert.ok(err instanceof TransientCarrierError);
    assert.equal(err.httpStatus, 429);
    assert.equal(err.retryAfterMs, 7000);
    assert.equal(err.maybeApplied, false);
    assert.equal(err.permanent, false);
  });

  it('a 500 is transient and may have been applied', async () => {
    fake.failNext({ status: 500, code: 20500, message: 'Internal Server Error' });
    const err = await carrier.sendText({ taskId: 'tsk_500', to: TO, body: 'x' }, never()).catch((e: unknown) => e);
    assert.ok(err instanceof TransientCarrierError);
    assert.equal(err.httpStatus, 500);
    assert.equal(err.maybeApplied, true);
  });

  it('a 400 from Twilio is permanent and keeps its code and message', async () => {
    const err = await carrier.placeCall({ taskId: 'tsk_400', to: '12345' }, never()).catch((e: unknown) => e);
    assert.ok(err instanceof PermanentCarrierError);
    assert.equal(err.httpStatus, 400);
    assert.equal(err.code, '21211');
    assert.match(err.message, /Invalid 'To' Phone Number/);
  });

  it('a redirect from the API base is not followed and is a permanent error', async () => {
    fake.failNext({ status: 307, headers: { location: `${fake.url}/elsewhere` } });
    const count = fake.requests.length;
    const err = await carrier.placeCall({ taskId: 'tsk_307', to: TO }, never()).catch((e: unknown) => e);
    assert.ok(err instanceof PermanentCarrierError);
    assert.match(err.message, /redirect/);
    assert.equal(fake.requests.length, count + 1, 'only the first request was made');
  });

  it('connection refused is transient and known not to have reached Twilio', async () => {
    const probe = http.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const dead = new TwilioCarrier({ ...settings(), apiBaseUrl: `http://127.0.0.1:${port}` });
    const err = await dead.placeCall({ taskId: 'tsk_refused', to: TO }, never()).catch((e: unknown) => e);
    assert.ok(err instanceof TransientCarrierError, String(err));
    assert.equal(err.maybeApplied, false);
    assert.match(err.message, /ECONNREFUSED/);
  });

  it('a request Twilio never answers is cut at the timeout as a transient error that may have been applied', async () => {
    fake.hangNext();
    const slow = new TwilioCarrier(settings(), { timeoutMs: 150 });
    const started = performance.now();
    const err = await slow.placeCall({ taskId: 'tsk_hang', to: TO }, never()).catch((e: unknown) => e);
    const ms = performance.now() - started;
    assert.ok(err instanceof TransientCarrierError, String(err));
    assert.match(err.message, /150 ms/);
    assert.equal(err.maybeApplied, true);
    assert.ok(ms >= 140 && ms < 2000, `gave up after ${ms} ms`);
  });

  it('aborting the signal during a request rejects with the abort, not a carrier error', async () => {
    fake.hangNext();
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 50);
    const err = await carrier.placeCall({ taskId: 'tsk_abort', to: TO }, ac.signal).catch((e: unknown) => e);
    assert.ok(err instanceof Error);
    assert.equal(err.name, 'AbortError');
    assert.ok(!(err instanceof TransientCarrierError) && !(err instanceof PermanentCarrierError));
  });

  it('sendText posts To, From, Body and StatusCallback, and waits for the callback', async () => {
    const sent = await carrier.sendText({ taskId: 'tsk_text1', to: TO, body: 'Your table is ready', statusCallbackUrl: `${receiver.url}/twilio/text` }, never());
    const req = fake.requests.at(-1)!;
    assert.equal(req.path, `/2010-04-01/Accounts/${fake.accountSid}/Messages.json`);
    assert.equal(req.headers['i-twilio-idempotency-token'], 'tsk_text1');
    assert.equal(req.form.get('To'), TO);
    assert.equal(req.form.get('From'), FROM);
    assert.equal(req.form.get('Body'), 'Your table is ready');
    assert.equal(req.form.get('MessagingServiceSid'), null);
    assert.equal(req.form.get('StatusCallback'), `${receiver.url}/twilio/text?taskId=tsk_text1`);
    assert.match(sent.providerRef, /^SM[0-9a-f]{32}$/);
    assert.equal(sent.final, null);
  });

  it('a configured Messaging Service sends the text instead of the phone number', async () => {
    const svc = new TwilioCarrier({ ...settings(), messagingServiceSid: `MG${'a'.repeat(32)}` });
    const sent = await svc.sendText({ taskId: 'tsk_mg', to: TO, body: 'hi' }, never());
    const form = fake.requests.at(-1)!.form;
    assert.equal(form.get('MessagingServiceSid'), `MG${'a'.repeat(32)}`);
    assert.equal(form.get('From'), null);
    assert.equal(sent.status, 'accepted');
    assert.equal(sent.final?.state, 'finished', 'no status callback: finished once accepted');
    assert.equal(sent.final?.result.tracked, false);
  });

  it('endCall posts Status=completed to the call, and ending it again is not an error', async () => {
    const start = await carrier.placeCall({ taskId: 'tsk_end', to: TO }, never());
    await carrier.endCall(start.providerRef);
    const req = fake.requests.at(-1)!;
    assert.equal(req.path, `/2010-04-01/Accounts/${fake.accountSid}/Calls/${start.providerRef}.json`);
    assert.equal(req.form.get('Status'), 'completed');
    assert.equal(req.headers.authorization?.startsWith('Basic '), true);
    assert.equal(fake.calls.get(start.providerRef)?.status, 'completed');
    await carrier.endCall(start.providerRef);
    assert.equal(fake.requests.at(-1)!.form.get('Status'), 'completed');
  });

  it('endCall on a call Twilio does not know is a permanent error', async () => {
    const err = await carrier.endCall(`CA${'0'.repeat(32)}`).catch((e: unknown) => e);
    assert.ok(err instanceof PermanentCarrierError);
    assert.equal(err.code, '20404');
  });

  it('signed call progress callbacks verify and map to our states: only completed is final', async () => {
    const start = await carrier.placeCall({ taskId: 'tsk_cb', to: TO, statusCallbackUrl: `${receiver.url}/twilio/status` }, never());
    const seen = receiver.events.length;
    for (const s of ['initiated', 'ringing', 'in-progress']) assert.equal((await fake.progressCall(start.providerRef, s)).status, 204);
    assert.equal((await fake.progressCall(start.providerRef, 'completed')).status, 204);
    const events = receiver.events.slice(seen);
    assert.equal(events.length, 4);
    assert.ok(events.every((e) => e.verified));
    assert.ok(events.every((e) => e.url.endsWith('/twilio/status?taskId=tsk_cb')));
    assert.deepEqual(events.map((e) => e.event?.status), ['initiated', 'ringing', 'in-progress', 'completed']);
    assert.deepEqual(events.map((e) => e.event?.sequenceNumber), [0, 1, 2, 3]);
    assert.deepEqual(events.slice(0, 3).map((e) => e.event?.final), [null, null, null]);
    const last = events[3].event!;
    assert.equal(last.kind, 'call');
    assert.equal(last.providerRef, start.providerRef);
    assert.equal(last.final?.state, 'finished');
    assert.equal(last.final?.result.outcome, 'completed');
    assert.equal(last.final?.result.durationSeconds, 12);
  });

  it('busy and no-answer are finished outcomes; failed and canceled fail the task', async () => {
    const outcomes: Record<string, [string, string]> = {};
    for (const s of ['busy', 'no-answer', 'failed', 'canceled']) {
      const start = await carrier.placeCall({ taskId: `tsk_${s}`, to: TO, statusCallbackUrl: `${receiver.url}/twilio/status` }, never());
      await fake.progressCall(start.providerRef, s);
      const ev = receiver.events.at(-1)!;
      assert.ok(ev.verified);
      outcomes[s] = [ev.event!.final!.state, String(ev.event!.final!.result.outcome)];
    }
    assert.deepEqual(outcomes, {
      busy: ['finished', 'busy'], 'no-answer': ['finished', 'no-answer'], failed: ['failed', 'failed'], canceled: ['failed', 'canceled'],
    });
  });

  it('a canceled call whose task had a cancel request is canceled, not failed', () => {
    const ev = parseStatusCallback({ CallSid: `CA${'1'.repeat(32)}`, CallStatus: 'canceled' }, { cancelRequested: true });
    assert.equal(ev?.final?.state, 'canceled');
  });

  it('message status callbacks: sent finishes the text, undelivered fails it with the error code', async () => {
    const sent = await carrier.sendText({ taskId: 'tsk_mcb', to: TO, body: 'x', statusCallbackUrl: `${receiver.url}/twilio/text` }, never());
    await fake.messageStatus(sent.providerRef, 'sending');
    const sending = receiver.events.at(-1)!;
    assert.ok(sending.verified);
    assert.equal(sending.event?.final, null);
    await fake.messageStatus(sent.providerRef, 'sent');
    assert.equal(receiver.events.at(-1)!.event?.final?.state, 'finished');
    await fake.messageStatus(sent.providerRef, 'undelivered', { ErrorCode: '30003' });
    const bad = receiver.events.at(-1)!.event!;
    assert.equal(bad.kind, 'message');
    assert.equal(bad.final?.state, 'failed');
    assert.equal(bad.final?.result.errorCode, '30003');
    assert.match(bad.final?.error ?? '', /30003/);
  });

  it('a callback signed with another auth token is refused', async () => {
    const res = await fake.postSigned(`${receiver.url}/twilio/status?taskId=tsk_x`, { CallSid: `CA${'2'.repeat(32)}`, CallStatus: 'completed' }, { token: 'attacker' });
    assert.equal(res.status, 403);
    assert.equal(receiver.events.at(-1)!.verified, false);
  });
});

describe('Twilio signature verification', () => {
  // Twilio's documented example (twilio.com/docs/usage/security, "Validating Requests are coming from Twilio").
  const token = '12345';
  const url = 'https://mycompany.com/myapp.php?foo=1&bar=2';
  const params = { CallSid: 'CA1234567890ABCDE', Caller: '+14158675309', Digits: '1234', From: '+14158675309', To: '+18005551212' };
  const signature = 'RSOYDt4T1cUTdK1PDd93/VVr8B8=';

  it("accepts Twilio's own documented example, as an object and as URLSearchParams", () => {
    assert.equal(verifyTwilioSignature(token, url, params, signature), true);
    assert.equal(verifyTwilioSignature(token, url, new URLSearchParams(params), signature), true);
    assert.equal(verifyTwilioSignature(token, url, new URLSearchParams(params).toString(), signature), true);
    assert.equal(twilioSignature(token, url, params), signature, 'the fake server signs the same way');
  });

  it('refuses a modified parameter, an extra parameter, another URL, another token or a forged signature', () => {
    assert.equal(verifyTwilioSignature(token, url, { ...params, Digits: '1235' }, signature), false);
    assert.equal(verifyTwilioSignature(token, url, { ...params, Extra: 'x' }, signature), false);
    assert.equal(verifyTwilioSignature(token, 'https://mycompany.com/myapp.php?foo=1&bar=3', params, signature), false);
    assert.equal(verifyTwilioSignature('54321', url, params, signature), false);
    assert.equal(verifyTwilioSignature(token, url, params, 'RSOYDt4T1cUTdK1PDd93/VVr8B9='), false);
    assert.equal(verifyTwilioSignature(token, url, params, twilioSignature('other', url, params)), false);
  });

  it('refuses a missing signature, an empty token and a malformed URL without throwing', () => {
    assert.equal(verifyTwilioSignature(token, url, params, undefined), false);
    assert.equal(verifyTwilioSignature(token, url, params, ''), false);
    assert.equal(verifyTwilioSignature('', url, params, signature), false);
    assert.equal(verifyTwilioSignature(token, 'not a url', '{"a":1}', signature), false);
  });

  it("accepts the other example of Twilio's documentation (its PHP snippet: another caller, another signature)", () => {
    const php = { ...params, Caller: '+14158675310', From: '+14158675310' };
    assert.equal(verifyTwilioSignature(token, url, php, 'GvWf1cFY/Q7PnoempGyD5oXAezc='), true);
    assert.equal(verifyTwilioSignature(token, url, php, signature), false);
  });

  // Signatures below are computed here on node:crypto, independently of src/providers/twilio/signature.ts.
  const hmac = (key: string, data: string) => crypto.createHmac('sha1', key).update(data, 'utf8').digest('base64');

  it('accepts a URL signed with the default port when asked without it, and the other way round', () => {
    const signedWithPort = hmac(token, 'https://mycompany.com:443/myapp.php?foo=1&bar=2' + 'CallSidCA1');
    assert.equal(verifyTwilioSignature(token, url, { CallSid: 'CA1' }, signedWithPort), true);
    const signedBare = hmac(token, 'http://example.com/cb' + 'CallSidCA1');
    assert.equal(verifyTwilioSignature(token, 'http://example.com:80/cb', { CallSid: 'CA1' }, signedBare), true);
    // Another port is another URL.
    assert.equal(verifyTwilioSignature(token, 'https://mycompany.com:8443/myapp.php?foo=1&bar=2', { CallSid: 'CA1' }, signedWithPort), false);
  });

  it('signs a repeated parameter once per value, values sorted, and sorts names by code unit', () => {
    const form = new URLSearchParams([['b', '2'], ['StatusCallbackEvent', 'ringing'], ['StatusCallbackEvent', 'answered'], ['a', '1']]);
    const sig = hmac(token, url + 'StatusCallbackEventansweredStatusCallbackEventringing' + 'a1' + 'b2');
    assert.equal(verifyTwilioSignature(token, url, form, sig), true);
    assert.equal(verifyTwilioSignature(token, url, form.toString(), sig), true);
    assert.equal(verifyTwilioSignature(token, url, { a: '1', b: '2', StatusCallbackEvent: 'ringing' }, sig), false);
  });

  it("checks a JSON body through bodySHA256 with the body and hash of Twilio's documentation", () => {
    // From Twilio's JSON validation snippet: this body's SHA-256 is the bodySHA256 it shows.
    const body = '{"CallSid":"CA1234567890ABCDE","Caller":"+12349013030"}';
    const hash = '5ccde7145dfb8f56479710896586cb9d5911809d83afbe34627818790db0aec9';
    assert.equal(crypto.createHash('sha256').update(body).digest('hex'), hash);
    const jsonUrl = `https://example.com/myapp?bodySHA256=${hash}`;
    const sig = hmac(token, jsonUrl); // the URL alone is signed
    assert.equal(verifyTwilioSignature(token, jsonUrl, body, sig), true);
    assert.equal(verifyTwilioSignature(token, jsonUrl, body + ' ', sig), false, 'another body');
    const upper = `https://example.com/myapp?bodySHA256=${hash.toUpperCase()}`;
    assert.equal(verifyTwilioSignature(token, upper, body, hmac(token, upper)), false, 'the hash is lowercase hex, as Twilio writes it');
    const short = 'https://example.com/myapp?bodySHA256=5ccde714';
    assert.equal(verifyTwilioSignature(token, short, body, hmac(token, short)), false, 'a hash of another length');
    assert.equal(verifyTwilioSignature(token, jsonUrl, body, sig.slice(0, -2)), false, 'a signature of another length');
  });

  it('checks JSON bodies through bodySHA256 and refuses a changed body', async () => {
    const fake = await startFakeTwilio({ authToken: token });
    const got: Array<{ url: string; body: string; sig: string }> = [];
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => { body += c.toString('utf8'); });
      req.on('end', () => { got.push({ url: req.url!, body, sig: String(req.headers['x-twilio-signature']) }); res.writeHead(204).end(); });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const json = JSON.stringify({ CallSid: 'CA1', CallStatus: 'completed' });
      await fake.postSigned(`${base}/hook?x=1`, {}, { json });
      const { url: path, body, sig } = got[0];
      assert.match(path, /bodySHA256=[0-9a-f]{64}/);
      assert.equal(verifyTwilioSignature(token, base + path, body, sig), true);
      assert.equal(verifyTwilioSignature(token, base + path, body.replace('completed', 'failed'), sig), false);
      assert.equal(verifyTwilioSignature('other', base + path, body, sig), false);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await fake.close();
    }
  });
});

describe('a webhook\'s form, and whom a Twilio call can be handed to', () => {
  it('parseForm reads a form as Twilio encodes it: + and %20 as spaces, repeated keys as a list, a signature over it checks', () => {
    const raw = 'Body=hello+there%20you&To=%2B14155550199&MediaUrl0=a&MediaUrl0=b&Empty=';
    const form = parseForm(raw);
    assert.deepEqual(form, { Body: 'hello there you', To: '+14155550199', MediaUrl0: ['a', 'b'], Empty: '' });
    assert.equal(first(form, 'MediaUrl0'), 'a');
    assert.equal(first(form, 'Empty'), undefined);
    const url = 'https://example.com/api/v2/providers/twilio/sms';
    const sig = twilioSignature('tok', url, { Body: 'hello there you', To: '+14155550199', MediaUrl0: ['a', 'b'], Empty: '' });
    assert.equal(verifyTwilioSignature('tok', url, form, sig), true);
    assert.equal(verifyTwilioSignature('tok', url, raw, sig), true, 'the raw bytes and the parsed form are the same signed parameters');
  });

  it('twilioDials: E.164 numbers only, never a PBX extension or a SIP URI', () => {
    assert.equal(twilioDials('+14155550199'), true);
    for (const d of ['ext:101', 'pbx:200', 'sip:front@pbx.example.com', '4155550199', '']) assert.equal(twilioDials(d), false, d);
  });
});

describe('status callback parsing and helpers', () => {
  it('a form that is not a status callback parses to null', () => {
    assert.equal(parseStatusCallback({}), null);
    assert.equal(parseStatusCallback({ CallSid: 'CA1' }), null);
    assert.equal(parseStatusCallback(new URLSearchParams('Body=hello&From=%2B1555')), null);
  });

  it('an unknown status is not final', () => {
    assert.equal(parseStatusCallback({ CallSid: 'CA1', CallStatus: 'teleported' })?.final, null);
  });

  it('Retry-After is read as seconds or as an HTTP date', () => {
    assert.equal(parseRetryAfter('3'), 3000);
    assert.equal(parseRetryAfter(new Date(10_000 + 5000).toUTCString(), 10_000), 5000);
    assert.equal(parseRetryAfter('soon'), undefined);
    assert.equal(parseRetryAfter(undefined), undefined);
  });

  it('createCarrier picks twilio from its settings and secrets, simulated without a provider', () => {
    const c = createCarrier({ providerId: 'twilio', config: { accountSid: `AC${'0'.repeat(32)}`, phoneNumber: FROM }, secrets: { authToken: 't' } });
    assert.equal(c.name, 'twilio');
    assert.equal(c.simulated, false);
    assert.equal(createCarrier(undefined).name, 'simulated');
    assert.throws(() => createCarrier({ providerId: 'twilio', config: { accountSid: `AC${'0'.repeat(32)}` } }), PermanentCarrierError);
    assert.throws(() => createCarrier({ providerId: 'carrier-pigeon', config: {} }), PermanentCarrierError);
  });
});

describe('greeting TwiML', () => {
  it('speaks the greeting and escapes <, &, quotes and >', () => {
    assert.equal(
      greetingTwiml({ greeting: `Tom & Jerry's "deals" <today> > yesterday` }),
      '<?xml version="1.0" encoding="UTF-8"?><Response><Say>Tom &amp; Jerry&apos;s &quot;deals&quot; &lt;today&gt; &gt; yesterday</Say></Response>',
    );
  });

  it('input cannot close the Say element or add verbs', () => {
    const xml = greetingTwiml({ greeting: '</Say><Dial>+19005550100</Dial><Say>' });
    assert.doesNotMatch(xml, /<Dial>/);
    assert.equal(xml.match(/<Say>/g)?.length, 1);
    assert.equal(xml.match(/<\/Say>/g)?.length, 1);
  });

  it('drops characters XML cannot carry', () => {
    assert.equal(greetingTwiml({ greeting: 'a\u0000b\u0007c\uFFFEd\uD800e' }), '<?xml version="1.0" encoding="UTF-8"?><Response><Say>abcde</Say></Response>');
  });

  it('with waitToGreet it listens (Pause) before speaking', () => {
    assert.equal(
      greetingTwiml({ greeting: 'Hi', waitToGreet: true }),
      '<?xml version="1.0" encoding="UTF-8"?><Response><Pause length="2"/><Say>Hi</Say></Response>',
    );
    assert.match(greetingTwiml({ greeting: 'Hi', waitToGreet: true, waitSeconds: 60 }), /<Pause length="10"\/>/);
  });

  it('without a greeting there is nothing to say', () => {
    assert.equal(greetingTwiml({}), '<?xml version="1.0" encoding="UTF-8"?><Response></Response>');
  });
});
