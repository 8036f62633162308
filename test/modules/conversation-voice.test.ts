// Voice over Twilio, on both engines: a call task placed on the fake Twilio server
// (test/helpers/fake-twilio.ts) is answered with the agent's live configuration as TwiML (greeting,
// voice, language, <Gather>), and each SpeechResult posted, signed, to the gather action runs a
// turn on the fake model server (test/helpers/fake-llm.ts) whose reply is said back; silence,
// hang-ups, transfers, model failures and timeouts, signatures and tenancy; the transcript is read
// from the conversation tables.
// @engines sqlite
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { conversationRepo, messageRepo } from '../../src/modules/conversations/repository.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { startFakeTwilio, twilioSignature, type FakeTwilio } from '../helpers/fake-twilio.ts';
import { ENGINE_SKIP_REASON, ENGINES, SKIPPED_ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { freePort, waitFor } from '../helpers/wait.ts';

const FROM = '+15005550006';
const RUNTIME = { leaseMs: 3000, heartbeatMs: 50, rescueEveryMs: 0, carrierOptions: { twilio: { timeoutMs: 1500 }, simulated: { callSeconds: 0.05 } } };
const TURN_TIMEOUT_MS = 1500;
const GATHER_PATH = '/api/v2/providers/twilio/voice/gather';

let targetSeq = 0;
const nextTarget = () => `+1415555${String(3000 + ++targetSeq)}`;
/** An error answer without its requestId (which differs on every request). */
const envelope = (body: string) => { const { requestId: _id, ...rest } = JSON.parse(body) as Record<string, unknown>; return rest; };
const unescapeXml = (s: string) => s.replace(/&quot;/g, '"').replace(/&apos;/g, '\'').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

for (const engine of ENGINES) {
  describe(`voice over Twilio [${engine}]`, () => {
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
      }, { worker: true, runtime: RUNTIME, voiceTurnTimeoutMs: TURN_TIMEOUT_MS });
      // Our public URL is the address the app listens on, so the fake can fetch the TwiML.
      await h.app.listen({ port, host: '127.0.0.1' });
    });
    after(async () => {
      await h?.close();
      await fake?.close();
      await other?.close();
      await llm?.close();
    });

    /** An organization whose default numbering provider is the fake Twilio `twilio`, and its agent's token. */
    async function org(twilio: FakeTwilio | null = fake) {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      if (twilio) {
        const res = await h.call('POST', '/api/v2/numberingProvider', {
          token: r.token, query: { targetOrganizationId: o.id },
          body: { providerId: 'twilio', config: { accountSid: twilio.accountSid, authToken: twilio.authToken, phoneNumber: FROM, apiBaseUrl: twilio.url } },
        });
        assert.equal(res.status, 200, JSON.stringify(res.body));
      }
      return { ...o, agentToken: await h.tokenFor(o.agentId) };
    }

    async function configure(token: string, config: Record<string, unknown>, publish = true) {
      const edit = await h.call('POST', '/api/v2/agent', { token, body: config });
      assert.equal(edit.status, 200, JSON.stringify(edit.body));
      if (publish) assert.equal((await h.call('POST', '/api/v2/agent/publish', { token })).status, 200);
    }

    async function task(o: { token: string }, id: string) {
      const res = await h.call('GET', `/api/v2/tasks/${id}`, { token: o.token });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.task;
    }

    /** A call task the worker has placed on the fake (running, its CallSid known), answered: its TwiML and gather URL. */
    async function answeredCall(o: { token: string }, body: Record<string, unknown> = {}, twilio = fake) {
      const created = await h.call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: nextTarget(), ...body } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const id = created.body.task.id as string;
      const t = await waitFor(`call ${id} placed`, async () => { const x = await task(o, id); return x.state === 'running' && x.providerRef && x; });
      const sid = t.providerRef as string;
      const fetched = await twilio.fetchTwiml(sid);
      assert.equal(fetched.status, 200, fetched.body);
      assert.match(fetched.contentType ?? '', /^text\/xml/);
      const action = /<Gather [^>]*action="([^"]+)"/.exec(fetched.body);
      assert.ok(action, `a <Gather> with an action: ${fetched.body}`);
      return { id, sid, twiml: fetched.body, gatherUrl: unescapeXml(action[1]!) };
    }

    /** What Twilio posts to the gather action: the caller's words (empty: silence), signed. */
    async function speak(twilio: FakeTwilio, sid: string, url: string, speech: string, extra: Record<string, string> = {}, token?: string) {
      const params: Record<string, string> = {
        AccountSid: twilio.accountSid, ApiVersion: '2010-04-01', CallSid: sid, CallStatus: 'in-progress', Direction: 'outbound-api',
        SpeechResult: speech, Confidence: speech ? '0.92' : '0', Language: 'en-US', ...extra,
      };
      if (speech === '') delete params.SpeechResult;
      return twilio.postSigned(url, params, token ? { token } : {});
    }

    const conversationOf = async (orgId: number, sid: string) => {
      const c = await conversationRepo.byCarrierRef(h.database.db, orgId, sid);
      assert.ok(c, `a conversation for call ${sid}`);
      return c;
    };
    const transcript = async (conversationId: string) =>
      (await messageRepo.ofConversation(h.database.db, conversationId)).map((m) => `${m.direction}:${m.text}`);

    it('an answered call greets with the live configuration (voice, language, DTMF, pause, <Gather>) and holds a conversation on the model', async () => {
      const o = await org();
      await configure(o.agentToken, {
        agentInstructions: 'You are Ada, the front desk of Acme Dental.', welcomeMessage: 'Hola, soy Ada de Acme Dental.',
        agentVoice: 'es-MX Female', agentLang: 'es-MX', callerResponseTimeout: 7, speakingTimeout: 2000, waitOnAnswer: 1500, postAnswerDtmf: '1,2#',
      });
      await configure(o.agentToken, { agentInstructions: 'STAGING ONLY: talk like a pirate.', welcomeMessage: 'Ahoy!' }, false);
      const { id, sid, twiml, gatherUrl } = await answeredCall(o, { context: 'Confirm the cleaning booked for Tuesday.' });

      const c = await conversationOf(o.id, sid);
      assert.equal(c.channel, 'voice');
      assert.equal(c.direction, 'outbound');
      assert.equal(c.task_id, id);
      assert.equal(c.counterpart, fake.calls.get(sid)!.to);
      assert.equal(gatherUrl, `${publicUrl}${GATHER_PATH}?conversation=${c.id}`);
      assert.equal(twiml, '<?xml version="1.0" encoding="UTF-8"?><Response><Play digits="1w2#"/><Pause length="2"/>'
        + `<Gather input="speech" language="es-MX" speechTimeout="2" timeout="7" action="${gatherUrl}" method="POST" actionOnEmptyResult="true">`
        + '<Say voice="Polly.Mia-Neural" language="es-MX">Hola, soy Ada de Acme Dental.</Say></Gather></Response>');

      llm.script.push({ text: 'Claro, ¿el martes a las 9 & 10 <ok>?', usage: { prompt_tokens: 100, completion_tokens: 9 } });
      const first = await speak(fake, sid, gatherUrl, 'Necesito una limpieza');
      assert.equal(first.status, 200, first.body);
      assert.equal(first.body, '<?xml version="1.0" encoding="UTF-8"?><Response>'
        + `<Gather input="speech" language="es-MX" speechTimeout="2" timeout="7" action="${gatherUrl}" method="POST" actionOnEmptyResult="true">`
        + '<Say voice="Polly.Mia-Neural" language="es-MX">Claro, ¿el martes a las 9 &amp; 10 &lt;ok&gt;?</Say></Gather></Response>');
      const req = llm.requests.at(-1)!;
      assert.equal(req.body.model, 'fake-model');
      const system = req.body.messages[0]!;
      assert.equal(system.role, 'system');
      assert.match(system.content!, /You are Ada, the front desk of Acme Dental\./);
      assert.match(system.content!, /phone call/);
      assert.match(system.content!, /<task>\nConfirm the cleaning booked for Tuesday\.\n<\/task>/, 'the task\'s context reaches the model');
      assert.doesNotMatch(system.content!, /pirate/);
      assert.deepEqual(req.body.messages.slice(1).map((m) => `${m.role}:${m.content}`), ['assistant:Hola, soy Ada de Acme Dental.', 'user:Necesito una limpieza']);

      llm.script.push({ text: 'Perfecto, queda reservado.' });
      const second = await speak(fake, sid, gatherUrl, 'El martes a las 9 está bien');
      assert.match(second.body, /<Say voice="Polly.Mia-Neural" language="es-MX">Perfecto, queda reservado\.<\/Say><\/Gather>/);
      assert.deepEqual(llm.requests.at(-1)!.body.messages.slice(1).map((m) => `${m.role}:${m.content}`), [
        'assistant:Hola, soy Ada de Acme Dental.', 'user:Necesito una limpieza', 'assistant:Claro, ¿el martes a las 9 & 10 <ok>?', 'user:El martes a las 9 está bien',
      ]);

      assert.deepEqual(await transcript(c.id), [
        'outbound:Hola, soy Ada de Acme Dental.', 'inbound:Necesito una limpieza', 'outbound:Claro, ¿el martes a las 9 & 10 <ok>?',
        'inbound:El martes a las 9 está bien', 'outbound:Perfecto, queda reservado.',
      ]);
      const messages = await messageRepo.ofConversation(h.database.db, c.id);
      assert.deepEqual(JSON.parse(messages[1]!.data!), { confidence: 0.92 });
      assert.ok(messages.every((m) => m.source === 'voice'));
      const during = await conversationRepo.find(h.database.db, c.id);
      assert.equal(during!.engine, 'model');
      assert.equal(during!.model, 'fake-model');
      assert.equal(during!.messages_in, 2);
      assert.equal(during!.messages_out, 3);
      assert.equal(during!.model_calls, 2);
      assert.equal(during!.ended_at, null);

      // The caller hangs up: the final status callback ends the task and the conversation.
      assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
      const done = await waitFor('task finished', async () => { const x = await task(o, id); return x.state === 'finished' && x; });
      assert.equal(done.result.outcome, 'completed');
      const ended = await conversationRepo.find(h.database.db, c.id);
      assert.equal(ended!.outcome, 'hung_up');
      assert.ok(ended!.ended_at);
      // A late gather on the ended conversation hangs up without asking the model.
      const calls = llm.requests.length;
      const late = await speak(fake, sid, gatherUrl, 'hello?');
      assert.equal(late.status, 200);
      assert.equal(late.body, '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>');
      assert.equal(llm.requests.length, calls);
    });

    it('the task\'s own greeting wins over welcomeMessage; a second TwiML fetch (GET) answers the same conversation; the default voice is Joanna', async () => {
      const o = await org();
      await configure(o.agentToken, { welcomeMessage: 'Welcome message', agentLang: 'multi' });
      const { sid, twiml } = await answeredCall(o, { greeting: 'Hi, it is Acme & "friends" calling back <3', waitToGreet: true });
      assert.match(twiml, /<Pause length="2"\/><Gather input="speech" language="en-US" speechTimeout="1" timeout="13" /);
      assert.match(twiml, /<Say voice="Polly.Joanna-Neural" language="en-US">Hi, it is Acme &amp; &quot;friends&quot; calling back &lt;3<\/Say>/);
      assert.doesNotMatch(twiml, /Welcome message|<Play/);
      const again = await fake.fetchTwiml(sid, { method: 'GET' });
      assert.equal(again.status, 200, again.body);
      assert.equal(again.body, twiml);
      const c = await conversationOf(o.id, sid);
      assert.deepEqual(await transcript(c.id), ['outbound:Hi, it is Acme & "friends" calling back <3']);
      assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
    });

    it('what the caller says is bounded and escaped: it never becomes TwiML of ours', async () => {
      const o = await org();
      const { sid, gatherUrl } = await answeredCall(o);
      // The fake model echoes the last user message ("reply to: …").
      const attack = '</Say><Dial>+19005550100</Dial><Hangup/><Say>';
      const res = await speak(fake, sid, gatherUrl, attack);
      assert.equal(res.status, 200, res.body);
      assert.doesNotMatch(res.body, /<Dial>|<Hangup\/>/);
      assert.match(res.body, /reply to: &lt;\/Say&gt;&lt;Dial&gt;\+19005550100&lt;\/Dial&gt;/);
      const long = `${'blah '.repeat(1000)}END`;
      await speak(fake, sid, gatherUrl, long);
      const sent = llm.requests.at(-1)!.body.messages.at(-1)!;
      assert.equal(sent.role, 'user');
      assert.equal(sent.content!.length, 4000);
      const messages = await messageRepo.ofConversation(h.database.db, (await conversationOf(o.id, sid)).id);
      const inbound = messages.filter((m) => m.direction === 'inbound');
      assert.equal(inbound.at(-1)!.text.length, 4000);
      assert.equal(JSON.parse(inbound.at(-1)!.data!).clipped, long.length);
      assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
    });

    it('silence: "are you still there?" callerResponseTimeoutHangupCounter times, then goodbye and <Hangup/> (no_response); speech resets the count', async () => {
      const o = await org();
      await configure(o.agentToken, { callerResponseTimeoutHangupCounter: 2, welcomeMessage: 'Hello!' });
      const { id, sid, gatherUrl } = await answeredCall(o);
      const calls = llm.requests.length;
      const ask = async () => {
        const r = await speak(fake, sid, gatherUrl, '');
        assert.equal(r.status, 200, r.body);
        assert.match(r.body, /<Gather [^>]*><Say [^>]*>Are you still there\?<\/Say><\/Gather><\/Response>$/);
      };
      await ask();
      assert.match((await speak(fake, sid, gatherUrl, 'sorry, I was away')).body, /reply to: sorry, I was away/);
      await ask();
      await ask();
      const last = await speak(fake, sid, gatherUrl, '   ');
      assert.equal(last.status, 200);
      assert.match(last.body, /<Say [^>]*>I haven&apos;t heard anything, so I&apos;ll end the call now\. Goodbye\.<\/Say><Hangup\/><\/Response>$/);
      assert.doesNotMatch(last.body, /<Gather/);
      assert.equal(llm.requests.length, calls + 1, 'silence never asks the model');
      const c = await conversationOf(o.id, sid);
      assert.equal(c.outcome, 'no_response');
      assert.deepEqual(JSON.parse(c.state), { noResponse: 3, failures: 0 });
      assert.deepEqual(await transcript(c.id), [
        'outbound:Hello!', 'outbound:Are you still there?', 'inbound:sorry, I was away', 'outbound:reply to: sorry, I was away',
        'outbound:Are you still there?', 'outbound:Are you still there?', 'outbound:I haven\'t heard anything, so I\'ll end the call now. Goodbye.',
      ]);
      // Twilio then reports the call completed: the task finishes; the outcome stays no_response.
      assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
      await waitFor('task finished', async () => (await task(o, id)).state === 'finished');
      assert.equal((await conversationRepo.find(h.database.db, c.id))!.outcome, 'no_response');
    });

    it('end_conversation: the reply is said, then <Hangup/>; the conversation ends ended_by_agent', async () => {
      const o = await org();
      await configure(o.agentToken, { actions: ['hangup'] });
      const { sid, gatherUrl } = await answeredCall(o);
      llm.script.push({ text: 'Thanks for calling, goodbye!', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'the caller is done' } }] });
      const res = await speak(fake, sid, gatherUrl, 'That is all, bye');
      assert.equal(res.status, 200, res.body);
      assert.match(res.body, /<Response><Say voice="Polly.Joanna-Neural" language="en-US">Thanks for calling, goodbye!<\/Say><Hangup\/><\/Response>$/);
      assert.deepEqual(llm.requests.at(-1)!.body.tools?.map((t) => t.function.name), ['end_conversation']);
      const c = await conversationOf(o.id, sid);
      assert.equal(c.outcome, 'ended_by_agent');
      assert.equal(c.outcome_detail, 'the caller is done');
      assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
      assert.equal((await conversationRepo.find(h.database.db, c.id))!.outcome, 'ended_by_agent');
    });

    it('transfer_call: the reply is said, then <Dial> of the E.164 destination (transferred); ext:/pbx: destinations are not offered on a Twilio call', async () => {
      const o = await org();
      await configure(o.agentToken, {
        actions: ['transfer'],
        transferDestinations: [{ name: 'front desk', destination: '+14155550199' }, { name: 'pbx', destination: 'ext:204' }],
      });
      const { sid, gatherUrl } = await answeredCall(o);
      llm.script.push({ text: 'Connecting you to the front desk now.', toolCalls: [{ name: 'transfer_call', arguments: { destination: 'front desk' } }] });
      const res = await speak(fake, sid, gatherUrl, 'Can I talk to a person?');
      assert.equal(res.status, 200, res.body);
      assert.match(res.body, /<Response><Say [^>]*>Connecting you to the front desk now\.<\/Say><Dial>\+14155550199<\/Dial><\/Response>$/);
      const offered = llm.requests.at(-1)!.body.tools!.find((t) => t.function.name === 'transfer_call')!;
      assert.deepEqual((offered.function.parameters as any).properties.destination.enum, ['front desk']);
      const c = await conversationOf(o.id, sid);
      assert.equal(c.outcome, 'transferred');
      assert.match(c.outcome_detail!, /front desk \(\+14155550199\)/);
      const tools = (await messageRepo.ofConversation(h.database.db, c.id)).filter((m) => m.direction === 'tool');
      assert.equal(tools.length, 1);
      assert.match(tools[0]!.text, /^transfer_call: ok/);
      assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
    });

    it('attendedTransfers: <Dial><Number url> whose whisper (signed) tells the destination who is coming before the calls are joined', async () => {
      const o = await org();
      await configure(o.agentToken, {
        actions: ['transfer'], attendedTransfers: true, transferDestinations: [{ name: 'front desk', destination: '+14155550199' }],
      });
      const { sid, gatherUrl } = await answeredCall(o);
      llm.script.push({ text: 'One moment.', toolCalls: [{ name: 'transfer_call', arguments: { destination: 'front desk' } }] });
      const res = await speak(fake, sid, gatherUrl, 'Can I talk to a person?');
      assert.equal(res.status, 200, res.body);
      const c = await conversationOf(o.id, sid);
      const whisper = `${publicUrl}/api/v2/providers/twilio/voice/whisper?conversation=${c.id}&name=front%20desk`;
      assert.ok(res.body.endsWith(`<Dial><Number url="${whisper.replace(/&/g, '&amp;')}" method="POST">+14155550199</Number></Dial></Response>`), res.body);
      // Twilio fetches the whisper once the destination answers; only a signed request gets it.
      assert.equal((await fake.postSigned(whisper, { AccountSid: fake.accountSid, CallSid: 'CA' + 'f'.repeat(32) }, { token: 'forged' })).status, 403);
      // A conversation that is not one (not a UUID, or no such call) is refused exactly as a forged signature.
      const forgedWhisper = await fake.postSigned(whisper, { AccountSid: fake.accountSid, CallSid: 'CA' + 'f'.repeat(32) }, { token: 'forged' });
      for (const bad of ['not-a-conversation', crypto.randomUUID()]) {
        const missing = await fake.postSigned(`${publicUrl}/api/v2/providers/twilio/voice/whisper?conversation=${bad}`, { AccountSid: fake.accountSid, CallSid: 'CA' + 'f'.repeat(32) });
        assert.equal(missing.status, forgedWhisper.status, missing.body);
        assert.deepEqual(envelope(missing.body), envelope(forgedWhisper.body));
      }
      const said = await fake.postSigned(whisper, { AccountSid: fake.accountSid, CallSid: 'CA' + 'f'.repeat(32) });
      assert.equal(said.status, 200, said.body);
      assert.match(said.body, /^<\?xml[^>]*\?><Response><Say [^>]*>Hello, I have a caller for front desk on the line\. Connecting you now\.<\/Say><\/Response>$/);
      assert.equal(c.outcome, 'transferred');
      assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
    });

    it('a failing or slow model: an apology and listening again (counted), never a 5xx; three failures in a row say goodbye (failed)', async () => {
      const o = await org();
      const { sid, gatherUrl } = await answeredCall(o);
      const apology = /<Gather [^>]*><Say [^>]*>Sorry, I&apos;m having trouble answering right now\. Could you say that again\?<\/Say><\/Gather><\/Response>$/;
      llm.script.push({ status: 500 });
      const failed = await speak(fake, sid, gatherUrl, 'hello?');
      assert.equal(failed.status, 200, failed.body);
      assert.match(failed.body, apology);
      // Slower than the turn's bound: aborted, and the caller hears the apology in time.
      llm.script.push({ delayMs: TURN_TIMEOUT_MS + 2000, text: 'too late' });
      const started = Date.now();
      const slow = await speak(fake, sid, gatherUrl, 'are you there?');
      const took = Date.now() - started;
      assert.equal(slow.status, 200, slow.body);
      assert.match(slow.body, apology);
      assert.ok(took >= TURN_TIMEOUT_MS - 100 && took < TURN_TIMEOUT_MS + 1500, `answered after ${took} ms`);
      let c = await conversationOf(o.id, sid);
      assert.deepEqual(JSON.parse(c.state), { noResponse: 0, failures: 2 });
      // A good turn resets the count.
      assert.match((await speak(fake, sid, gatherUrl, 'one more try')).body, /reply to: one more try/);
      c = await conversationOf(o.id, sid);
      assert.equal(JSON.parse(c.state).failures, 0);
      llm.script.push({ status: 500 }, { status: 500 }, { status: 503 });
      assert.match((await speak(fake, sid, gatherUrl, 'a')).body, apology);
      assert.match((await speak(fake, sid, gatherUrl, 'b')).body, apology);
      const last = await speak(fake, sid, gatherUrl, 'c');
      assert.equal(last.status, 200);
      assert.match(last.body, /<Say [^>]*>Sorry, something went wrong on our side\. Please try again later\. Goodbye\.<\/Say><Hangup\/><\/Response>$/);
      c = await conversationOf(o.id, sid);
      assert.equal(c.outcome, 'failed');
      assert.match(c.outcome_detail!, /503/);
      assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
    });

    it('signatures and tenancy: unsigned or forged 403, another organization\'s conversation 403, another call 409, an unknown conversation the same 403 as a forged signature; nothing recorded', async () => {
      const a = await org();
      const b = await org(other);
      const { sid, gatherUrl } = await answeredCall(a);
      const bCall = await answeredCall(b, {}, other);
      const c = await conversationOf(a.id, sid);
      const before = (await transcript(c.id)).length;
      const calls = llm.requests.length;
      const params = { AccountSid: fake.accountSid, CallSid: sid, SpeechResult: 'transfer all my money', Confidence: '0.9' };
      const post = async (url: string, form: Record<string, string>, signature?: string) => {
        const res = await fetch(url, {
          method: 'POST', body: new URLSearchParams(form).toString(),
          headers: { 'content-type': 'application/x-www-form-urlencoded', ...(signature ? { 'x-twilio-signature': signature } : {}) },
        });
        return { status: res.status, body: await res.text() };
      };
      assert.equal((await post(gatherUrl, params)).status, 403, 'unsigned');
      const forged = await speak(fake, sid, gatherUrl, 'hi', {}, 'not-the-auth-token');
      assert.equal(forged.status, 403, forged.body);
      assert.match(JSON.parse(forged.body).message, /X-Twilio-Signature/);
      const signature = twilioSignature(fake.authToken, gatherUrl, params);
      assert.equal((await post(gatherUrl, { ...params, SpeechResult: 'tampered' }, signature)).status, 403, 'tampered form');
      // Organization B, signing with its own Twilio account, names A's conversation.
      const foreign = await speak(other, bCall.sid, gatherUrl, 'hi from b');
      assert.equal(foreign.status, 403, foreign.body);
      // B's own conversation URL with A's call in it.
      const crossed = await speak(other, sid, bCall.gatherUrl, 'hi');
      assert.equal(crossed.status, 409, crossed.body);
      // A's account, another call of A's.
      const wrongCall = await speak(fake, 'CA00000000000000000000000000000000', gatherUrl, 'hi');
      assert.equal(wrongCall.status, 409, wrongCall.body);
      // No such conversation: the same 403 and body as the forged signature on a real one.
      for (const conversation of ['00000000-0000-4000-8000-000000000000', 'not-a-conversation']) {
        const unknown = await speak(fake, sid, `${publicUrl}${GATHER_PATH}?conversation=${conversation}`, 'hi');
        assert.equal(unknown.status, forged.status, unknown.body);
        assert.deepEqual(envelope(unknown.body), envelope(forged.body));
      }
      const missing = await speak(fake, sid, `${publicUrl}${GATHER_PATH}`, 'hi');
      assert.equal(missing.status, 400, missing.body);
      assert.equal((await transcript(c.id)).length, before);
      assert.equal(llm.requests.length, calls);
      // The real one still works.
      assert.match((await speak(fake, sid, gatherUrl, 'hi')).body, /reply to: hi/);
      assert.equal((await fake.progressCall(sid, 'completed')).status, 204);
      assert.equal((await other.progressCall(bCall.sid, 'completed')).status, 204);
    });

    it('a call to the organization\'s Twilio number is answered by its agent (signed, by To), talks through the gather action, and ends with the number\'s status callback', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const number = `+1415556${String(1000 + ++targetSeq).slice(-4)}`;
      const provider = await h.call('POST', '/api/v2/numberingProvider', {
        token: r.token, query: { targetOrganizationId: o.id },
        body: { providerId: 'twilio', config: { accountSid: fake.accountSid, authToken: fake.authToken, phoneNumber: number, apiBaseUrl: fake.url } },
      });
      assert.equal(provider.status, 200, JSON.stringify(provider.body));
      await configure(await h.tokenFor(o.agentId), { welcomeMessage: 'Acme Dental, how can I help?' });
      const sid = `CA${'9'.repeat(30)}${String(targetSeq).padStart(2, '0')}`;
      const call = { AccountSid: fake.accountSid, CallSid: sid, From: '+14155550142', To: number, CallStatus: 'ringing', Direction: 'inbound' };
      const incoming = `${publicUrl}/api/v2/providers/twilio/voice`;

      // Forged, or for a number nobody has: refused the same way (status and body), nothing opened,
      // so nobody learns which numbers this deployment serves.
      const status = `${publicUrl}/api/v2/providers/twilio/voice/status`;
      for (const url of [incoming, status]) {
        const forged = await fake.postSigned(url, call, { token: 'not-the-token' });
        assert.equal(forged.status, 403, forged.body);
        assert.deepEqual(envelope(forged.body), { success: false, message: 'X-Twilio-Signature is missing or does not match this request' });
        for (const unknown of [await fake.postSigned(url, { ...call, To: '+14155550199' }), await fake.postSigned(url, { ...call, To: '+14155550199' }, { token: 'not-the-token' })]) {
          assert.equal(unknown.status, forged.status, `${url}: ${unknown.body}`);
          assert.deepEqual(envelope(unknown.body), envelope(forged.body));
        }
      }
      assert.equal(await conversationRepo.byCarrierRef(h.database.db, o.id, sid), undefined);

      const answered = await fake.postSigned(incoming, call);
      assert.equal(answered.status, 200, answered.body);
      const action = /<Gather [^>]*action="([^"]+)"/.exec(answered.body);
      assert.ok(action, answered.body);
      assert.match(answered.body, /<Say[^>]*>Acme Dental, how can I help\?<\/Say>/);
      const c = await conversationOf(o.id, sid);
      assert.deepEqual([c.channel, c.direction, c.counterpart, c.account_id], ['voice', 'inbound', '+14155550142', o.agentId]);
      // Twilio retrying the webhook gets the same conversation.
      assert.equal((await fake.postSigned(incoming, call)).status, 200);
      assert.equal((await h.database.db.selectFrom('conversations').select('id').where('carrier_ref', '=', sid).execute()).length, 1);

      llm.script.push({ text: 'We open at nine.' });
      const said = await speak(fake, sid, unescapeXml(action[1]!), 'When do you open?', { Direction: 'inbound' });
      assert.equal(said.status, 200, said.body);
      assert.match(said.body, /We open at nine\./);
      assert.deepEqual(await transcript(c.id), ['outbound:Acme Dental, how can I help?', 'inbound:When do you open?', 'outbound:We open at nine.']);

      assert.equal((await fake.postSigned(status, { ...call, CallStatus: 'in-progress' })).status, 204);
      assert.equal((await conversationOf(o.id, sid)).ended_at, null, 'not over while in progress');
      assert.equal((await fake.postSigned(status, { ...call, CallStatus: 'completed' }, { token: 'forged' })).status, 403);
      assert.equal((await fake.postSigned(status, { ...call, CallStatus: 'completed' })).status, 204);
      assert.equal((await conversationOf(o.id, sid)).outcome, 'hung_up');
    });

    it('an organization chooses Media Streams for its calls in its twilio provider (voice: stream) on a deployment that gathers by default', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const number = `+1415557${String(1000 + ++targetSeq).slice(-4)}`;
      const provider = (voice: string) => h.call('POST', '/api/v2/numberingProvider', {
        token: r.token, query: { targetOrganizationId: o.id },
        body: { providerId: 'twilio', config: { accountSid: fake.accountSid, authToken: fake.authToken, phoneNumber: number, apiBaseUrl: fake.url, voice } },
      });
      const bad = await provider('telepathy');
      assert.equal(bad.status, 400, JSON.stringify(bad.body));
      assert.match(bad.body.message, /voice/);
      assert.equal((await provider('stream')).status, 200);
      const sid = `CA${'8'.repeat(30)}${String(targetSeq).padStart(2, '0')}`;
      const answered = await fake.postSigned(`${publicUrl}/api/v2/providers/twilio/voice`, {
        AccountSid: fake.accountSid, CallSid: sid, From: '+14155550143', To: number, CallStatus: 'ringing', Direction: 'inbound',
      });
      assert.equal(answered.status, 200, answered.body);
      assert.match(answered.body, /<Connect><Stream url="ws:\/\/127\.0\.0\.1:\d+\/api\/v2\/providers\/twilio\/voice\/stream">/);
      assert.doesNotMatch(answered.body, /<Gather/);
      // The deployment's default (gather) still holds for everyone else.
      const other = await answeredCall(await org());
      assert.match(other.twiml, /<Gather /);
    });

    it('a call on the SIMULATED carrier asks Twilio for nothing: its conversation is a simulated caller\'s, on the simulated channel', async () => {
      const o = await org(null);
      const asked = fake.requests.length;
      const created = await h.call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: nextTarget(), greeting: 'Hi' } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const done = await waitFor('simulated call finished', async () => { const x = await task(o, created.body.task.id); return x.state === 'finished' && x; });
      assert.equal(done.provider, 'simulated');
      assert.equal(done.result.outcome, 'completed');
      assert.equal(fake.requests.length, asked, 'no Twilio request, no TwiML');
      // Since issue 36 a simulated call talks with a simulated caller (docs/tasks.md, "Simulated calls").
      const conversation = await conversationRepo.byCarrierRef(h.database.db, o.id, done.providerRef);
      assert.equal(conversation?.channel, 'simulated');
    });
  });
}
for (const engine of SKIPPED_ENGINES) {
  describe(`voice over Twilio [${engine}]`, { skip: ENGINE_SKIP_REASON }, () => {});
}
