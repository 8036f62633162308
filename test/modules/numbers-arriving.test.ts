// What arrives on a held number (docs/numbers.md, Arriving), on both engines: a number assigned
// through the organization's Twilio provider (the fake in test/helpers/fake-twilio.ts) to one of
// its agents — not its first — is answered by that agent, on the gathered path and on Media
// Streams, and a text to it reaches that agent's conversation with the sender. A returned number,
// one still being bought (`reserved`/`attention`), and a number nobody holds are refused exactly
// like a forged signature (the same 403 and body), and nothing is opened.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { conversationRepo } from '../../src/modules/conversations/repository.ts';
import type { FakeLlm } from '../helpers/fake-llm.ts';
import type { FakeTwilio } from '../helpers/fake-twilio.ts';
import { ENGINE_SKIP_REASON, ENGINES, SKIPPED_ENGINES, type Harness } from '../helpers/harness.ts';
import { startTwilioApp, type TwilioApp } from '../helpers/twilio-app.ts';
import { waitFor } from '../helpers/wait.ts';
import { numberCalls } from '../helpers/numbers.ts';

const RUNTIME = { leaseMs: 3000, heartbeatMs: 50, rescueEveryMs: 0, carrierOptions: { twilio: { timeoutMs: 1500 } } };
const VOICE_PATH = '/api/v2/providers/twilio/voice';
const SMS_PATH = '/api/v2/providers/twilio/sms';
/** An error answer without its requestId (which differs on every request). */
const envelope = (body: string) => { const { requestId: _id, ...rest } = JSON.parse(body) as Record<string, unknown>; return rest; };

let seq = 0;
const callSid = () => `CA${'7'.repeat(28)}${String(++seq).padStart(4, '0')}`;

for (const engine of ENGINES) {
  describe(`calls and texts arriving on a held number [${engine}]`, () => {
    let app: TwilioApp;
    let h: Harness;
    let llm: FakeLlm;
    let fake: FakeTwilio;
    let publicUrl: string;
    const n = numberCalls(() => h);

    before(async () => {
      app = await startTwilioApp(engine, { worker: true, turns: true, runtime: RUNTIME, voiceTurnTimeoutMs: 1500 });
      ({ h, llm, fake, publicUrl } = app);
    });
    after(async () => { await app?.close(); });

    /**
     * An organization whose twilio provider (the fake, no phoneNumber of its own) bought `number`
     * for its second agent, whose live welcomeMessage says who it is.
     */
    async function heldNumber(number: string, voice?: 'stream' | 'gather', config: Record<string, unknown> = {}) {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const provider = await h.call('POST', '/api/v2/numberingProvider', {
        token: r.token, query: { targetOrganizationId: o.id },
        body: { providerId: 'twilio', config: { accountSid: fake.accountSid, authToken: fake.authToken, apiBaseUrl: fake.url, ...(voice ? { voice } : {}) } },
      });
      assert.equal(provider.status, 200, JSON.stringify(provider.body));
      const agent = await h.agent(o.id, { name: 'Front desk' });
      const edit = await h.call('POST', '/api/v2/agent', { token: agent.token, body: { welcomeMessage: 'Front desk, the number\'s own agent.', ...config } });
      assert.equal(edit.status, 200, JSON.stringify(edit.body));
      assert.equal((await h.call('POST', '/api/v2/agent/publish', { token: agent.token })).status, 200);
      const bought = await n.assign(o.token, { number, country: number.startsWith('+1416') ? 'CA' : 'US' }, { targetAccountId: agent.id });
      assert.equal(bought.status, 200, JSON.stringify(bought.body));
      return { r, o, agent, number };
    }

    const call = (to: string, sid = callSid()) => ({ AccountSid: fake.accountSid, CallSid: sid, From: '+14155550142', To: to, CallStatus: 'ringing', Direction: 'inbound' });
    const text = (to: string, body: string) => ({
      AccountSid: fake.accountSid, MessageSid: `SM${String(++seq).padStart(32, '0')}`, From: '+16285551001', To: to, Body: body, NumMedia: '0', ApiVersion: '2010-04-01',
    });

    it('a gathered call to the number is answered by the agent holding it (its live welcomeMessage), not the organization\'s first agent', async () => {
      const { o, agent, number } = await heldNumber('+12165550101');
      const params = call(number);
      const answered = await fake.postSigned(`${publicUrl}${VOICE_PATH}`, params);
      assert.equal(answered.status, 200, answered.body);
      assert.match(answered.body, /<Gather /);
      assert.match(answered.body, /<Say[^>]*>Front desk, the number(&apos;|')s own agent\.<\/Say>/);
      const c = await conversationRepo.byCarrierRef(h.database.db, o.id, params.CallSid);
      assert.ok(c);
      assert.deepEqual([c.channel, c.direction, c.account_id], ['voice', 'inbound', agent.id]);
      assert.notEqual(agent.id, o.agentId);
    });

    it('a streamed call to the number opens its Media Stream on the agent holding it', async () => {
      const { o, agent, number } = await heldNumber('+12165550102', 'stream');
      const params = call(number);
      const answered = await fake.postSigned(`${publicUrl}${VOICE_PATH}`, params);
      assert.equal(answered.status, 200, answered.body);
      assert.match(answered.body, /<Connect><Stream url=/);
      const c = await conversationRepo.byCarrierRef(h.database.db, o.id, params.CallSid);
      assert.ok(c);
      assert.equal(c.account_id, agent.id);
    });

    it('a text to the number reaches the holding agent\'s conversation with the sender, and its reply goes back from the number', async () => {
      const { o, agent, number } = await heldNumber('+12167770103');
      llm.script.push({ text: 'Hello from the front desk.' });
      const sent = text(number, 'Are you open today?');
      const res = await fake.postSigned(`${publicUrl}${SMS_PATH}`, sent);
      assert.equal(res.status, 200, res.body);
      const rows = await h.database.db.selectFrom('conversations').selectAll().where('org_id', '=', o.id).where('channel', '=', 'sms').execute();
      assert.deepEqual(rows.map((c) => [c.account_id, c.counterpart, c.direction]), [[agent.id, '+16285551001', 'inbound']]);
      const turn = await waitFor('the agent\'s turn', async () => {
        const t = await h.database.db.selectFrom('conversation_turns').selectAll().where('org_id', '=', o.id).executeTakeFirst();
        return t && ['finished', 'failed', 'canceled'].includes(t.state) && t;
      });
      assert.equal(turn.state, 'finished', String(turn.last_error));
      const reply = [...fake.messages.values()].find((m) => m.to === '+16285551001');
      assert.deepEqual([reply?.from, reply?.body], [number, 'Hello from the front desk.']);
    });

    it('a returned number, one not yet active and one nobody holds are refused exactly like a forged signature, by voice and by text; nothing opens', async () => {
      const { o, agent, number } = await heldNumber('+15125550104');
      const voice = `${publicUrl}${VOICE_PATH}`;
      const sms = `${publicUrl}${SMS_PATH}`;
      const forged = await fake.postSigned(voice, call(number), { token: 'not-the-token' });
      assert.equal(forged.status, 403, forged.body);
      assert.deepEqual(envelope(forged.body), { success: false, message: 'X-Twilio-Signature is missing or does not match this request' });
      const forgedText = await fake.postSigned(sms, text(number, 'hi'), { token: 'not-the-token' });
      assert.equal(forgedText.status, 403, forgedText.body);
      const sameAsForged = async (to: string, why: string) => {
        for (const [url, params, model] of [[voice, call(to), forged], [sms, text(to, 'hi'), forgedText]] as const) {
          const res = await fake.postSigned(url, params);
          assert.equal(res.status, model.status, `${why} (${url}): ${res.body}`);
          assert.deepEqual(envelope(res.body), envelope(model.body), why);
        }
      };
      await sameAsForged('+12125550999', 'a number nobody holds');
      for (const state of ['reserved', 'attention'] as const) {
        await h.database.db.updateTable('phone_numbers').set({ state }).where('number', '=', number).execute();
        await sameAsForged(number, `a number in state ${state}`);
      }
      await h.database.db.updateTable('phone_numbers').set({ state: 'active' }).where('number', '=', number).execute();
      assert.equal((await n.ret(o.token, { number })).status, 200);
      await sameAsForged(number, 'a returned number');
      const opened = await h.database.db.selectFrom('conversations').select('id').where('org_id', '=', o.id).execute();
      assert.deepEqual(opened, []);
      assert.ok(agent.id);
    });

    it('cnamAutoRejectRegex rejects the call before the agent answers (<Reject>, busy for 486), on the caller name or number, gathered or streamed; nothing opens', async () => {
      for (const [num, voice] of [['+12165550201', 'gather'], ['+12165550206', 'stream']] as const) {
        fake.inventory.push({ phoneNumber: num, isoCountry: 'US', locality: 'Cleveland', region: 'OH', capabilities: { voice: true, SMS: true, MMS: true } });
        const { o, number } = await heldNumber(num, voice, { cnamAutoRejectRegex: '^(SPAM|\\+1900)', cnamAutoRejectCode: 486 });
        const rejected = await fake.postSigned(`${publicUrl}${VOICE_PATH}`, { ...call(number), CallerName: 'SPAM LIKELY' });
        assert.equal(rejected.status, 200, rejected.body);
        assert.match(rejected.body, /<Response><Reject reason="busy"\/><\/Response>/, voice);
        const byNumber = await fake.postSigned(`${publicUrl}${VOICE_PATH}`, { ...call(number), From: '+19005550100' });
        assert.match(byNumber.body, /<Response><Reject reason="busy"\/><\/Response>/, voice);
        const answered = await fake.postSigned(`${publicUrl}${VOICE_PATH}`, { ...call(number), CallerName: 'JANE DOE' });
        assert.match(answered.body, voice === 'stream' ? /<Connect><Stream / : /<Gather /, voice);
        const opened = await h.database.db.selectFrom('conversations').select('id').where('org_id', '=', o.id).execute();
        assert.equal(opened.length, 1, 'only the answered call opened a conversation');
      }
    });

    it('cnamAutoTransferRegex dials cnamAutoTransferDestination instead of answering, gathered or streamed', async () => {
      for (const [num, voice] of [['+12165550202', 'gather'], ['+12165550203', 'stream']] as const) {
        fake.inventory.push({ phoneNumber: num, isoCountry: 'US', locality: 'Cleveland', region: 'OH', capabilities: { voice: true, SMS: true, MMS: true } });
        const { number } = await heldNumber(num, voice, { cnamAutoTransferRegex: 'ROBO', cnamAutoTransferDestination: '+14155550100' });
        const sent = await fake.postSigned(`${publicUrl}${VOICE_PATH}`, { ...call(number), CallerName: 'ROBOCALLER INC' });
        assert.equal(sent.status, 200, sent.body);
        assert.match(sent.body, /<Response><Dial>\+14155550100<\/Dial><\/Response>/, voice);
      }
    });

    it('preAnswerRingTime: the TwiML begins with a <Pause> of that many seconds (Twilio rings before it picks up), gathered or streamed', async () => {
      for (const [num, voice] of [['+12165550204', 'gather'], ['+12165550205', 'stream']] as const) {
        fake.inventory.push({ phoneNumber: num, isoCountry: 'US', locality: 'Cleveland', region: 'OH', capabilities: { voice: true, SMS: true, MMS: true } });
        const { number } = await heldNumber(num, voice, { preAnswerRingTime: 25 });
        const answered = await fake.postSigned(`${publicUrl}${VOICE_PATH}`, call(number));
        assert.equal(answered.status, 200, answered.body);
        assert.match(answered.body, /<Response><Pause length="25"\/><(Gather|Connect)/, voice);
      }
    });

    it('a number whose agent was deleted is answered by the organization\'s first agent', async () => {
      const { o, agent, number } = await heldNumber('+14165550105');
      await h.database.db.updateTable('phone_numbers').set({ agent_id: null }).where('number', '=', number).execute();
      const params = call(number);
      const answered = await fake.postSigned(`${publicUrl}${VOICE_PATH}`, params);
      assert.equal(answered.status, 200, answered.body);
      const c = await conversationRepo.byCarrierRef(h.database.db, o.id, params.CallSid);
      assert.ok(c);
      assert.equal(c.account_id, o.agentId);
      assert.notEqual(agent.id, o.agentId);
    });
  });
}

for (const engine of SKIPPED_ENGINES) describe(`calls and texts arriving on a held number [${engine}]`, { skip: ENGINE_SKIP_REASON }, () => {});
