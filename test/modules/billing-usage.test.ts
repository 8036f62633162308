// Usage (issue 26): GET /api/v2/stats/usage read from the usage_daily rollups, checked against
// records made for real: calls, texts and pings run by the task worker on the SIMULATED carrier,
// conversations through receiveMessage on the SIMULATED model engine and ended by the service.
// Exact minutes, texts, tasks, tokens and costs; a timeseries by local day in a non-UTC zone; a
// reseller's sum over its organizations; tenancy.
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { conversationService } from '../../src/modules/conversations/service.ts';
import { policyFromConfig } from '../../src/webhooks/ssrf.ts';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness, Reply } from '../helpers/harness.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { waitFor } from '../queue/fixtures.ts';

const FINAL = ['finished', 'failed', 'canceled'];
const phone = (n: number) => `+1500555${String(1000 + n).padStart(4, '0')}`;

function ok(res: Reply, label = ''): any {
  assert.equal(res.status, 200, `${label} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** A plan with small included amounts so a few records go past them. */
const TIGHT = {
  name: 'Tight', monthlyPrice: 10, yearlyPrice: 100, currency: 'USD',
  included: { callMinutes: 1, texts: 1, tasks: 2, conversations: 0, modelTokens: 0 },
  overage: { callMinute: 0.05, text: 0.02, task: 0.01, conversation: 0.02, modelTokensPer1k: 1.5 },
  limits: { concurrencyPerRun: 5 },
};

forEachEngine('billing usage', (h) => {
  const call = (method: string, url: string, opts?: Parameters<Harness['call']>[2]) => h().call(method, url, opts);
  const db = () => h().database.db;
  let hook: Receiver;
  before(async () => { hook = await startReceiver(); });
  after(async () => { await hook.close(); });

  async function runTasks(token: string, bodies: Record<string, unknown>[]): Promise<void> {
    const ids: string[] = [];
    for (const body of bodies) {
      const res = await call('POST', '/api/v2/tasks', { token, body });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      ids.push(res.body.task.id);
    }
    await waitFor(`${ids.length} task(s) to end`, async () => {
      const rows = await db().selectFrom('tasks').select('state').where('id', 'in', ids).execute();
      return rows.every((r) => FINAL.includes(r.state));
    }, 30_000);
  }

  /** One conversation through receiveMessage (a simulated model turn), ended by the service with its clock at `endAt`. */
  async function conversation(resellerToken: string, agentId: number, endAt?: number): Promise<{ id: string; tokens: number }> {
    const res = await call('POST', '/api/v2/agent/receiveMessage', {
      token: resellerToken, body: { targetAgent: String(agentId), sourceAddress: `visitor-${Math.random()}@example.com`, message: 'Hello, what are your opening hours?', outboundMessageWebhookUrl: hook.url },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const uuid = res.body.messageUuid as string;
    const msg = await waitFor('the turn to run', async () => {
      const m = await db().selectFrom('conversation_messages').select('conversation_id').where('id', '=', uuid).executeTakeFirst();
      if (!m) return false;
      const c = await db().selectFrom('conversations').selectAll().where('id', '=', m.conversation_id).executeTakeFirstOrThrow();
      return Number(c.model_calls) > 0 && c;
    }, 15_000);
    const deps = {
      db: db(), config: h().config, policy: policyFromConfig(h().config),
      agents: h().services.agents,
      turns: h().turns.producer, analyses: h().analyses.producer, wakeDeliveries: () => {}, ...(endAt === undefined ? {} : { now: () => endAt }),
    };
    assert.equal(await conversationService(deps as never).end(msg.id, 'completed', null), true);
    return { id: msg.id, tokens: Number(msg.tokens_in) + Number(msg.tokens_out) };
  }

  it('counts calls (each rounded up to the whole minute), texts, tasks, conversations and tokens from real records, and costs them on the plan', async () => {
    const r = await h().reseller();
    ok(await call('PUT', '/api/v2/product/catalog/plan/pplan-tight', { token: r.token, body: TIGHT }));
    const o = await h().organization(r.id, { productPlanId: 'pplan-tight' });
    const before = ok(await call('GET', '/api/v2/stats/usage', { token: o.token }));
    assert.deepEqual(before.usage, { callMinutes: 0, texts: 0, tasks: 0, conversations: 0, modelTokens: 0 });

    // Three answered calls (the simulated carrier's calls last a fraction of a second: one minute each), two texts, a ping.
    await runTasks(o.token, [
      { type: 'call', target: phone(1) }, { type: 'call', target: phone(2) }, { type: 'call', target: phone(3) },
      { type: 'text', target: phone(4), content: 'hi' }, { type: 'text', target: phone(5), content: 'there' }, { type: 'ping' },
    ]);
    const conv = await conversation(r.token, o.agentId);
    assert.ok(conv.tokens > 0);

    const u = ok(await call('GET', '/api/v2/stats/usage', { token: o.token, query: { allItems: true } }));
    assert.equal(u.accountId, o.id);
    assert.equal(u.productPlanId, 'pplan-tight');
    // Every call and text ran on the SIMULATED carrier and the turn on the SIMULATED model engine: labelled so (issue 33).
    assert.deepEqual(u.usage, {
      callMinutes: 3, texts: 2, tasks: 5, conversations: 1, modelTokens: conv.tokens, calls: 3, callSeconds: 3, testConversations: 0, testTokens: 0,
      simulatedCallMinutes: 3, simulatedTexts: 2, simulatedTokens: conv.tokens,
      // Speech providers' own units (issue 35): nothing used with them here.
      'speech:deepgram:audioSeconds': 0, 'speech:deepgram:characters': 0, 'speech:elevenlabs:characters': 0, 'speech:cartesia:characters': 0,
      'speech:google:audioSeconds': 0, 'speech:openai:audioSeconds': 0, 'speech:openai:characters': 0,
    });

    const c = ok(await call('GET', '/api/v2/stats/usage', { token: o.token, query: { giveCosts: true } }));
    assert.equal(c.currency, 'USD');
    // Past the included amounts: 3 tasks × 0.01, 1 conversation × 0.02. The minutes, texts and tokens
    // are past theirs too (overIncluded) but all simulated: labelled, not costed as real (issue 33).
    const expected = { 'cost:callMinutes': 0, 'cost:texts': 0, 'cost:tasks': 0.03, 'cost:conversations': 0.02, 'cost:modelTokens': 0, 'cost:plan': 10, 'cost:addons': 0 };
    const totalCents = 3 + 2 + 1000;
    assert.equal(c.overIncluded.callMinutes, 2, 'simulated minutes still use up the included amounts (enforcement)');
    assert.equal(c.overIncluded.texts, 1);
    assert.deepEqual(c.usage, { ...expected, 'cost:total': totalCents / 100 });
    assert.equal(c.usage.callMinutes, undefined, 'giveCosts alone answers the cost: keys only');
    const both = ok(await call('GET', '/api/v2/stats/usage', { token: o.token, query: { giveCosts: true, combineCosts: true } }));
    assert.equal(both.usage.texts, 2);
    assert.equal(both.usage['cost:texts'], 0);

    // The previous billing period (the calendar month before, without a subscription) has none of it.
    const prev = ok(await call('GET', '/api/v2/stats/usage', { token: o.token, query: { billingPeriod: 'previous' } }));
    assert.equal(prev.usage.texts, 0);
    assert.equal(prev.billingPeriod.period, 'previous');
  });

  it("a timeseries by day in the organization's time zone: a record just after local midnight lands on the local day", async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id, { timezone: 'Asia/Tokyo' });
    // 00:01 on 10 March 2026 in Tokyo is 15:01 on 9 March UTC.
    const justAfterMidnight = Date.UTC(2026, 2, 9, 15, 1);
    await conversation(r.token, o.agentId, justAfterMidnight);
    const u = ok(await call('GET', '/api/v2/stats/usage', {
      token: o.token, query: { timeseries: true, startDate: '2026-03-08T15:00:00Z', endDate: '2026-03-11T14:59:59Z' },
    }));
    assert.equal(u.timezone, 'Asia/Tokyo');
    assert.equal(u.billingPeriod.startDate, '2026-03-09');
    assert.equal(u.billingPeriod.endDate, '2026-03-11');
    assert.deepEqual(u.timeseries.map((p: { date: string; conversations: number }) => [p.date, p.conversations]),
      [['2026-03-09', 0], ['2026-03-10', 1], ['2026-03-11', 0]]);
    assert.equal(u.usage.conversations, 1);
    const monthly = ok(await call('GET', '/api/v2/stats/usage', { token: o.token, query: { timeseries: true, frequency: 'month', startDate: '2026-02-01', endDate: '2026-03-31' } }));
    assert.deepEqual(monthly.timeseries.map((p: { date: string; conversations: number }) => [p.date, p.conversations]), [['2026-02', 0], ['2026-03', 1]]);
  });

  it("a reseller's usage is the sum over its organizations; an organization never sees another's", async () => {
    const r = await h().reseller();
    const o1 = await h().organization(r.id);
    const o2 = await h().organization(r.id);
    const other = await h().reseller();
    const o3 = await h().organization(other.id);
    await runTasks(o1.token, [{ type: 'text', target: phone(11), content: 'a' }, { type: 'text', target: phone(12), content: 'b' }]);
    await runTasks(o2.token, [{ type: 'text', target: phone(13), content: 'c' }, { type: 'call', target: phone(14) }]);
    await runTasks(o3.token, [{ type: 'text', target: phone(15), content: 'd' }]);

    const sum = ok(await call('GET', '/api/v2/stats/usage', { token: r.token }));
    assert.equal(sum.accountType, 'reseller');
    assert.equal(sum.organizations, 2);
    assert.deepEqual(sum.usage, { callMinutes: 1, texts: 3, tasks: 4, conversations: 0, modelTokens: 0 });
    const one = ok(await call('GET', '/api/v2/stats/usage', { token: r.token, query: { targetAccountId: o2.id } }));
    assert.deepEqual(one.usage, { callMinutes: 1, texts: 1, tasks: 2, conversations: 0, modelTokens: 0 });

    // Tenancy: another organization (or its reseller) is not found; an organization cannot read its reseller's sum.
    const foreign = await call('GET', '/api/v2/stats/usage', { token: o1.token, query: { targetAccountId: o2.id } });
    assert.equal(foreign.status, 404, JSON.stringify(foreign.body));
    assert.equal(foreign.body.success, false);
    assert.equal((await call('GET', '/api/v2/stats/usage', { token: other.token, query: { targetAccountId: o1.id } })).status, 404);
    assert.equal((await call('GET', '/api/v2/stats/usage', { token: o1.token, query: { targetAccountId: r.id } })).status, 404);
    const own = ok(await call('GET', '/api/v2/stats/usage', { token: o3.token }));
    assert.equal(own.usage.texts, 1);
  });

  it('names the field of a bad query in a 400', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    for (const [query, field] of [
      [{ billingPeriod: 'next' }, 'billingPeriod'], [{ frequency: 'week' }, 'frequency'], [{ startDate: 'yesterday' }, 'startDate'],
      [{ startDate: '2026-03-02', endDate: '2026-03-01' }, 'endDate'],
    ] as const) {
      const res = await call('GET', '/api/v2/stats/usage', { token: o.token, query });
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.ok(String(res.body.message).includes(field), res.body.message);
    }
  });

  it('billingPeriod: a reseller or partner starts an organization\'s next period; validated; usage follows it', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id, { externalAccountId: `ext-${Date.now()}` });
    const other = await h().reseller();
    const DAY = 86_400;
    const s0 = Math.floor(Date.now() / 1000) - 10 * DAY;
    const period = (token: string, query: Record<string, unknown>, body: Record<string, unknown>) => call('POST', '/api/v2/billing/billingPeriod', { token, query, body });

    // Only ancestors: the organization itself is refused, another reseller does not find it.
    assert.equal((await period(o.token, { targetAccountId: o.id }, { startDateTimestamp: s0, endDateTimestamp: s0 + 30 * DAY })).status, 403);
    assert.equal((await period(other.token, { targetAccountId: o.id }, { startDateTimestamp: s0, endDateTimestamp: s0 + 30 * DAY })).status, 404);
    const bad = await period(r.token, { targetAccountId: o.id }, { startDateTimestamp: s0 + DAY, endDateTimestamp: s0 });
    assert.equal(bad.status, 400);
    assert.match(bad.body.message, /startDateTimestamp must not be greater than endDateTimestamp/);
    assert.equal((await period(r.token, {}, { startDateTimestamp: s0, endDateTimestamp: s0 + DAY })).status, 400);

    const first = ok(await period(r.token, { targetAccountId: o.id }, { startDateTimestamp: s0, endDateTimestamp: s0 + 20 * DAY }));
    assert.deepEqual(first.billingPeriod, { startDateTimestamp: s0, endDateTimestamp: s0 + 20 * DAY });
    assert.equal(first.previousBillingPeriod, null);
    const u = ok(await call('GET', '/api/v2/stats/usage', { token: o.token }));
    assert.equal(u.billingPeriod.startDateTimestamp, s0);
    assert.equal(u.billingPeriod.endDateTimestamp, s0 + 20 * DAY);

    // Overlap (starting before the current one began) and gap (after it ends) are refused; a gap when asked for is accepted.
    const overlap = await period(r.token, { targetAccountId: o.id }, { startDateTimestamp: s0 - DAY, endDateTimestamp: s0 + 40 * DAY });
    assert.equal(overlap.status, 400);
    assert.match(overlap.body.message, /overlaps/);
    const gap = await period(r.token, { targetAccountId: o.id }, { startDateTimestamp: s0 + 21 * DAY, endDateTimestamp: s0 + 50 * DAY });
    assert.equal(gap.status, 400);
    assert.match(gap.body.message, /gap/);

    // The next period, named by externalAccountId, starts 5 days in: the current one is closed there.
    const ext = (await call('GET', '/api/v2/account', { token: o.token })).body;
    const next = ok(await call('POST', '/api/v2/billing/billingPeriod', {
      token: r.token, query: { externalAccountId: ext.externalAccountId ?? ext.details?.externalAccountId }, body: { startDateTimestamp: s0 + 5 * DAY, endDateTimestamp: s0 + 35 * DAY },
    }));
    assert.deepEqual(next.previousBillingPeriod, { startDateTimestamp: s0, endDateTimestamp: s0 + 5 * DAY });
    const cur = ok(await call('GET', '/api/v2/stats/usage', { token: o.token }));
    assert.equal(cur.billingPeriod.startDateTimestamp, s0 + 5 * DAY);
    const prev = ok(await call('GET', '/api/v2/stats/usage', { token: o.token, query: { billingPeriod: 'previous' } }));
    assert.equal(prev.billingPeriod.startDateTimestamp, s0);
    assert.equal(prev.billingPeriod.endDateTimestamp, s0 + 5 * DAY);
    // The partner may too, with a gap it asks for.
    ok(await call('POST', '/api/v2/billing/billingPeriod', {
      query: { targetAccountId: o.id }, body: { startDateTimestamp: s0 + 40 * DAY, endDateTimestamp: s0 + 70 * DAY, allowGap: true },
    }));
  });
  // The counts above are of the records these tests make; a SIMULATED call's own conversation (and
  // its simulated caller's tokens) are counted in test/modules/simulated-calls.test.ts.
}, { CALLPLANE_SIMULATED_CALL_SECONDS: '0.2', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_SIMULATED_CALL_CONVERSATIONS: 'false' }, { worker: true, turns: true, runtime: { carrierOptions: { simulated: { textSeconds: 0.02 } } } });
