// Every call the platform carries counts in usage (issue 33): an inbound call to the
// organization's Twilio number (gather), answered by its agent, adds a call and its seconds and
// minutes when it ends, like a call task does; an outbound call task's own conversation is not
// counted a second time. Real HTTP on loopback, the fake Twilio and the fake model server.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { FakeTwilio } from '../helpers/fake-twilio.ts';
import { ENGINES, type Harness } from '../helpers/harness.ts';
import { startTwilioApp, type TwilioApp } from '../helpers/twilio-app.ts';
import { waitFor } from '../helpers/wait.ts';

const RUNTIME = { leaseMs: 3000, heartbeatMs: 50, rescueEveryMs: 0, carrierOptions: { twilio: { timeoutMs: 1500 } } };

for (const engine of ENGINES) {
  describe(`billing: every call counts [${engine}]`, () => {
    let app: TwilioApp;
    let h: Harness;
    let fake: FakeTwilio;
    let publicUrl: string;

    before(async () => {
      app = await startTwilioApp(engine, { worker: true, runtime: RUNTIME });
      ({ h, fake, publicUrl } = app);
    });
    after(async () => { await app?.close(); });

    async function usage(token: string) {
      const res = await h.call('GET', '/api/v2/stats/usage', { token, query: { allItems: true } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.usage as Record<string, number>;
    }

    it('an inbound Twilio call of 26 s adds a call, 26 call seconds and 1 call minute; an outbound call task is counted once', async () => {
      const r = await h.reseller();
      // A plan that includes no call minutes and sells them at 0.05: real minutes are costed.
      const plan = await h.call('PUT', '/api/v2/product/catalog/plan/pplan-metered', { token: r.token, body: {
        name: 'Metered', monthlyPrice: 10, yearlyPrice: 100, currency: 'USD',
        included: { callMinutes: 0, texts: null, tasks: null, conversations: null, modelTokens: null },
        overage: { callMinute: 0.05, text: null, task: null, conversation: null, modelTokensPer1k: null },
        limits: { concurrencyPerRun: 5 },
      } });
      assert.equal(plan.status, 200, JSON.stringify(plan.body));
      const o = await h.organization(r.id, { productPlanId: 'pplan-metered' });
      const number = '+14155561234';
      const provider = await h.call('POST', '/api/v2/numberingProvider', {
        token: r.token, query: { targetOrganizationId: o.id },
        body: { providerId: 'twilio', config: { accountSid: fake.accountSid, authToken: fake.authToken, phoneNumber: number, apiBaseUrl: fake.url } },
      });
      assert.equal(provider.status, 200, JSON.stringify(provider.body));
      const agentToken = await h.tokenFor(o.agentId);
      assert.equal((await h.call('POST', '/api/v2/agent', { token: agentToken, body: { welcomeMessage: 'Acme Dental, how can I help?' } })).status, 200);
      assert.equal((await h.call('POST', '/api/v2/agent/publish', { token: agentToken })).status, 200);

      // The inbound call: answered, then hung up by the caller 26 seconds after it began.
      const sid = `CA${'7'.repeat(32)}`;
      const call = { AccountSid: fake.accountSid, CallSid: sid, From: '+14155550142', To: number, CallStatus: 'ringing', Direction: 'inbound' };
      const answered = await fake.postSigned(`${publicUrl}/api/v2/providers/twilio/voice`, call);
      assert.equal(answered.status, 200, answered.body);
      const c = await h.database.db.selectFrom('conversations').select(['id', 'started_at']).where('carrier_ref', '=', sid).executeTakeFirstOrThrow();
      // The call began 26 s ago (the test does not wait them out).
      await h.database.db.updateTable('conversations').set({ started_at: Number(c.started_at) - 26_000 }).where('id', '=', c.id).execute();
      const done = await fake.postSigned(`${publicUrl}/api/v2/providers/twilio/voice/status`, { ...call, CallStatus: 'completed', CallDuration: '26' });
      assert.equal(done.status, 204, done.body);
      const ended = await h.database.db.selectFrom('conversations').select(['ended_at', 'duration_ms']).where('id', '=', c.id).executeTakeFirstOrThrow();
      assert.notEqual(ended.ended_at, null);
      const inbound = await usage(o.token);
      assert.equal(inbound.calls, 1, JSON.stringify(inbound));
      assert.equal(inbound.callSeconds, Math.ceil(Number(ended.duration_ms) / 1000), JSON.stringify(inbound));
      assert.ok(inbound.callSeconds! >= 26 && inbound.callSeconds! <= 27, JSON.stringify(inbound));
      assert.equal(inbound.callMinutes, 1);
      assert.equal(inbound.conversations, 1);

      // An outbound call task on Twilio: its conversation (with the task) does not count the call again.
      const created = await h.call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: '+14155553001' } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const id = created.body.task.id as string;
      const t = await waitFor('the call placed', async () => {
        const x = (await h.call('GET', `/api/v2/tasks/${id}`, { token: o.token })).body.task;
        return x.state === 'running' && x.providerRef && x;
      });
      assert.equal((await fake.fetchTwiml(t.providerRef)).status, 200);
      assert.equal((await fake.progressCall(t.providerRef, 'completed')).status, 204); // CallDuration 12
      await waitFor('the task to finish', async () => (await h.call('GET', `/api/v2/tasks/${id}`, { token: o.token })).body.task.state === 'finished');
      await waitFor('its conversation to end', async () =>
        (await h.database.db.selectFrom('conversations').select('ended_at').where('task_id', '=', id).executeTakeFirst())?.ended_at != null);
      const both = await usage(o.token);
      assert.equal(both.calls, 2, JSON.stringify(both));
      assert.equal(both.callSeconds, inbound.callSeconds! + 12, JSON.stringify(both));
      assert.equal(both.callMinutes, 2);
      assert.equal(both.tasks, 1);
      // Carried by Twilio and answered by a model provider: nothing labelled simulated.
      assert.equal(both.simulatedCallMinutes, 0);
      assert.equal(both.simulatedTokens, 0);
      // Real minutes past the included amount are costed (simulated ones are not: billing-usage.test.ts).
      const cost = await h.call('GET', '/api/v2/stats/usage', { token: o.token, query: { giveCosts: true } });
      assert.equal(cost.status, 200, JSON.stringify(cost.body));
      assert.equal(cost.body.usage['cost:callMinutes'], 0.1, JSON.stringify(cost.body.usage));
    });
  });
}
