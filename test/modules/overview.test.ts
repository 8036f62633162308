// A reseller's overview across its organizations (issue 38, part C): GET /api/v2/stats/overview
// checked against GET /api/v2/stats/usage for the same window — per organization and summed —
// from records made for real (calls and texts by the task worker on the SIMULATED carrier,
// conversations through receiveMessage, ended by the service and analysed by the analysis worker
// with the SIMULATED rules); the success rate from those analyses' outcomes; the near-limit list;
// paging; tenancy refusals.
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { conversationService } from '../../src/modules/conversations/service.ts';
import { policyFromConfig } from '../../src/webhooks/ssrf.ts';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness, Reply } from '../helpers/harness.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { waitFor } from '../queue/fixtures.ts';

const FINAL = ['finished', 'failed', 'canceled'];
const phone = (n: number) => `+1500555${String(2000 + n).padStart(4, '0')}`;

function ok(res: Reply, label = ''): any {
  assert.equal(res.status, 200, `${label} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Small included amounts (2 tasks) so a few records go past them; tasks past them cost 0.01. */
const TIGHT = {
  name: 'Tight', monthlyPrice: 10, yearlyPrice: 100, currency: 'USD',
  included: { callMinutes: 100, texts: 100, tasks: 2, conversations: 100, modelTokens: 1_000_000 },
  overage: { callMinute: 0.05, text: 0.02, task: 0.01, conversation: 0.02, modelTokensPer1k: 1.5 },
  limits: { concurrencyPerRun: 5 },
};

forEachEngine('reseller overview', (h) => {
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

  /** One conversation through receiveMessage (a simulated model turn) saying `text`, ended by the service; its analysis then runs. */
  async function conversation(resellerToken: string, agentId: number, text: string): Promise<string> {
    const res = await call('POST', '/api/v2/agent/receiveMessage', {
      token: resellerToken, body: { targetAgent: String(agentId), sourceAddress: `visitor-${Math.random()}@example.com`, message: text, outboundMessageWebhookUrl: hook.url },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const uuid = res.body.messageUuid as string;
    const id = await waitFor('the turn to run', async () => {
      const m = await db().selectFrom('conversation_messages').select('conversation_id').where('id', '=', uuid).executeTakeFirst();
      if (!m) return false;
      const c = await db().selectFrom('conversations').selectAll().where('id', '=', m.conversation_id).executeTakeFirstOrThrow();
      return Number(c.model_calls) > 0 && c.id;
    }, 15_000);
    const deps = {
      db: db(), config: h().config, policy: policyFromConfig(h().config), agents: h().services.agents,
      turns: h().turns.producer, analyses: h().analyses.producer, wakeDeliveries: () => {},
    };
    assert.equal(await conversationService(deps as never).end(id, 'completed', null), true);
    return id;
  }

  async function analysed(ids: string[]): Promise<void> {
    await waitFor(`${ids.length} analyses to finish`, async () => {
      const rows = await db().selectFrom('conversation_analyses').select('state').where('id', 'in', ids).execute();
      return rows.length === ids.length && rows.every((r) => r.state === 'finished');
    }, 30_000);
  }

  it("equals GET /api/v2/stats/usage for the same window, per organization and in total, with the success rate from the analyses' outcomes", async () => {
    const r = await h().reseller();
    ok(await call('PUT', '/api/v2/product/catalog/plan/pplan-tight', { token: r.token, body: TIGHT }));
    const a = await h().organization(r.id, { productPlanId: 'pplan-tight' });
    const b = await h().organization(r.id, { productPlanId: 'pplan-tight' });
    const c = await h().organization(r.id);
    // Another reseller's organization: never in r's overview.
    const other = await h().reseller();
    const x = await h().organization(other.id);

    await runTasks(a.token, [{ type: 'call', target: phone(1) }, { type: 'call', target: phone(2) }, { type: 'call', target: phone(3) }, { type: 'text', target: phone(4), content: 'hi' }]);
    await runTasks(b.token, [{ type: 'call', target: phone(5) }]);
    await runTasks(c.token, [{ type: 'text', target: phone(6), content: 'hello' }]);
    await runTasks(x.token, [{ type: 'call', target: phone(7) }]);
    const conversations = [
      await conversation(r.token, a.agentId, 'Hello, what are your opening hours?'), // resolved
      await conversation(r.token, a.agentId, 'No thanks, I am not interested.'), // not-interested
      await conversation(r.token, b.agentId, 'Busy now, please call me back later.'), // callback-requested
      await conversation(other.token, x.agentId, 'Hello, what are your opening hours?'),
    ];
    await analysed(conversations);

    const o = ok(await call('GET', '/api/v2/stats/overview', { token: r.token }));
    assert.equal(o.accountId, r.id);
    assert.equal(o.accountType, 'reseller');
    assert.deepEqual(o.successOutcomes, ['resolved', 'callback-requested']);
    const window = { startDate: o.window.startDate, endDate: o.window.endDate };

    // In total: the usage operation's own figures for the reseller and window.
    const sum = ok(await call('GET', '/api/v2/stats/usage', { token: r.token, query: { ...window, allItems: true, combineCosts: true } }));
    assert.equal(o.totals.organizations, 3);
    assert.equal(o.totals.calls, 4);
    assert.equal(o.totals.texts, 2);
    for (const k of ['calls', 'texts', 'callMinutes', 'modelTokens', 'conversations'] as const) assert.equal(o.totals[k], sum.usage[k], k);
    assert.equal(o.totals.currency, 'USD');
    assert.equal(o.totals.cost, sum.usage['cost:total']);
    assert.equal(o.totals.cost, 20.02, 'two plans at 10, and two tasks past the 2 included at 0.01; the third organization is on the free default plan');
    assert.equal(o.totals.costPerCall, Math.round((20.02 / 4) * 1e6) / 1e6);
    assert.deepEqual([o.totals.analysed, o.totals.succeeded, o.totals.successRate], [3, 2, 2 / 3]);
    // Calls and texts by day: the usage operation's timeseries, summing to the totals.
    const series = ok(await call('GET', '/api/v2/stats/usage', { token: r.token, query: { ...window, allItems: true, timeseries: true } }));
    assert.deepEqual(o.days, series.timeseries.map((d: any) => ({ date: d.date, calls: d.calls, texts: d.texts })));
    assert.equal(o.days.reduce((n: number, d: any) => n + d.calls, 0), 4);

    // Per organization: each one's usage for the same window, and the sum of them is the total.
    assert.deepEqual(o.organizations.map((g: any) => g.organizationId), [a.id, b.id, c.id]);
    let costs = 0;
    for (const g of o.organizations) {
      const u = ok(await call('GET', '/api/v2/stats/usage', { token: r.token, query: { ...window, targetAccountId: g.organizationId, allItems: true, combineCosts: true } }));
      for (const k of ['calls', 'texts', 'callMinutes', 'modelTokens', 'conversations'] as const) assert.equal(g[k], u.usage[k], `${g.name} ${k}`);
      assert.equal(g.cost, u.productPlanId ? u.usage['cost:total'] : null, `${g.name} cost`);
      assert.equal(g.costPerCall, g.cost === null || g.calls === 0 ? null : Math.round((g.cost / g.calls) * 1e6) / 1e6);
      costs += g.cost ?? 0;
    }
    assert.equal(Math.round(costs * 100), Math.round(o.totals.cost * 100));
    const [ga, gb, gc] = o.organizations;
    assert.deepEqual([ga.calls, ga.texts, ga.cost, ga.analysed, ga.succeeded, ga.successRate], [3, 1, 10.02, 2, 1, 0.5]);
    assert.deepEqual([gb.calls, gb.cost, gb.costPerCall, gb.analysed, gb.succeeded, gb.successRate], [1, 10, 10, 1, 1, 1]);
    assert.deepEqual([gc.calls, gc.texts, gc.cost, gc.costPerCall, gc.analysed, gc.successRate], [0, 1, 0, null, 0, null], 'no calls: no cost per call; nothing analysed: no success rate');

    // Near the plan's limits: a used 4 tasks of the 2 included; b 1 of 2 (listed only from a half).
    assert.deepEqual(o.nearLimit, [{ organizationId: a.id, name: ga.name, item: 'tasks', used: 4, included: 2, share: 2 }]);
    const half = ok(await call('GET', '/api/v2/stats/overview', { token: r.token, query: { nearLimitShare: 0.5 } }));
    assert.deepEqual(half.nearLimit.map((e: any) => [e.organizationId, e.item, e.share]), [[a.id, 'tasks', 2], [b.id, 'tasks', 0.5]]);

    // Pages of organizations: the totals stay the subtree's.
    const page = ok(await call('GET', '/api/v2/stats/overview', { token: r.token, query: { limit: 1, offset: 1 } }));
    assert.deepEqual(page.organizations.map((g: any) => g.organizationId), [b.id]);
    assert.deepEqual([page.total, page.limit, page.offset, page.totals.calls], [3, 1, 1, 4]);

    // The partner sees every reseller's organizations, and r's alone when it names r.
    const partner = ok(await call('GET', '/api/v2/stats/overview', { query: { targetAccountId: r.id } }));
    assert.deepEqual(partner.totals, o.totals);
    const all = ok(await call('GET', '/api/v2/stats/overview', { query: { limit: 100 } }));
    assert.ok(all.organizations.some((g: any) => g.organizationId === x.id));
    assert.ok(all.totals.calls >= 5);

    // Tenancy: the other reseller sees only its own; naming r is not found; an organization is refused.
    const theirs = ok(await call('GET', '/api/v2/stats/overview', { token: other.token }));
    assert.deepEqual(theirs.organizations.map((g: any) => g.organizationId), [x.id]);
    assert.deepEqual([theirs.totals.calls, theirs.totals.analysed, theirs.totals.succeeded], [1, 1, 1]);
    const foreign = await call('GET', '/api/v2/stats/overview', { token: other.token, query: { targetAccountId: r.id } });
    assert.equal(foreign.status, 404, JSON.stringify(foreign.body));
    assert.equal(foreign.body.success, false);
    const org = await call('GET', '/api/v2/stats/overview', { token: a.token });
    assert.equal(org.status, 403, JSON.stringify(org.body));
    assert.equal(org.body.success, false);
    assert.match(org.body.message, /needs a partner or a reseller/i);
    // An organization named as the subject is not a reseller or partner: 404, as every kind mismatch of targetAccountId.
    const self = await call('GET', '/api/v2/stats/overview', { token: a.token, query: { targetAccountId: a.id } });
    assert.equal(self.status, 404, JSON.stringify(self.body));
    assert.match(self.body.message, /targetAccountId .* is not a partner or a reseller/i);
    assert.equal((await call('GET', '/api/v2/stats/overview', { token: r.token, query: { targetAccountId: a.id } })).status, 404);
  });

  it('names the field of a bad query in a 400', async () => {
    const r = await h().reseller();
    for (const [query, field] of [
      [{ limit: 0 }, 'limit'], [{ limit: 101 }, 'limit'], [{ offset: -1 }, 'offset'], [{ nearLimitShare: 0 }, 'nearLimitShare'],
      [{ nearLimitShare: 1.5 }, 'nearLimitShare'], [{ startDate: 'yesterday' }, 'startDate'], [{ startDate: '2026-03-02', endDate: '2026-03-01' }, 'endDate'],
    ] as const) {
      const res = await call('GET', '/api/v2/stats/overview', { token: r.token, query });
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.equal(res.body.success, false);
      assert.ok(String(res.body.message).includes(field), `${field}: ${res.body.message}`);
    }
  });
  // Simulated calls without their simulated caller's conversation (docs/tasks.md): the success rates count only the conversations this file makes.
}, { CALLPLANE_SIMULATED_CALL_SECONDS: '0.2', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_SIMULATED_CALL_CONVERSATIONS: 'false' }, { worker: true, turns: true, analyses: true, runtime: { carrierOptions: { simulated: { textSeconds: 0.02 } } } });
