// The console's overview across organizations (#/overview, issue 38 part C) in Chromium, with usage
// made for real: calls and a text run by the harness's task worker on the SIMULATED carrier,
// conversations through receiveMessage answered by the SIMULATED model engine, one ended and
// analysed by the analysis worker. The reseller's page shows each organization's figures equal to
// GET /api/v2/stats/usage for the window it names (and the totals to the reseller's), the chart of
// calls and texts per day, the organization past its plan's included tasks linking to its Billing
// page, and a conversation in progress in another organization from the live feed. An
// organization signed in has no such page: the API's refusal is shown.
// @lane wall
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { conversationService } from '../../src/modules/conversations/service.ts';
import { policyFromConfig } from '../../src/webhooks/ssrf.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { waitFor } from '../helpers/sip-peers.ts';

const TIGHT = {
  name: 'Tight', monthlyPrice: 10, yearlyPrice: 100, currency: 'USD',
  included: { callMinutes: 100, texts: 100, tasks: 2, conversations: 100, modelTokens: 1_000_000 },
  overage: { callMinute: 0.05, text: 0.02, task: 0.01, conversation: 0.02, modelTokensPer1k: 1.5 },
  limits: { concurrencyPerRun: 5 },
};

describe('web console: overview across organizations (Chromium)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let hook: Receiver;
  let reseller: { id: number; token: string };
  let acme: { id: number; agentId: number; token: string };
  let bolt: { id: number; agentId: number; token: string };
  let acmeOpen: string;

  async function runTasks(token: string, bodies: Record<string, unknown>[]): Promise<void> {
    const ids: string[] = [];
    for (const body of bodies) {
      const r = await h.call('POST', '/api/v2/tasks', { token, body });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      ids.push(r.body.task.id);
    }
    await waitFor(`${ids.length} tasks to finish`, async () => {
      const rows = await h.database.db.selectFrom('tasks').select('state').where('id', 'in', ids).execute();
      return rows.every((t) => t.state === 'finished');
    }, 30_000);
  }

  /** A conversation through receiveMessage; its id once the agent answered. */
  async function converse(agentId: number, text: string): Promise<string> {
    const res = await h.call('POST', '/api/v2/agent/receiveMessage', {
      token: reseller.token, body: { targetAgent: String(agentId), sourceAddress: `visitor-${Math.random()}@example.com`, message: text, outboundMessageWebhookUrl: hook.url },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return waitFor('the agent to answer', async () => {
      const m = await h.database.db.selectFrom('conversation_messages').select('conversation_id').where('id', '=', res.body.messageUuid).executeTakeFirst();
      if (!m) return undefined;
      const conv = await h.database.db.selectFrom('conversations').select(['id', 'model_calls']).where('id', '=', m.conversation_id).executeTakeFirstOrThrow();
      return Number(conv.model_calls) > 0 ? conv.id : undefined;
    }, 15_000);
  }

  before(async () => {
    hook = await startReceiver();
    // Simulated calls without their simulated caller's conversation (docs/tasks.md): the success rates below count only the conversations this test makes.
    h = await startHarness('sqlite', { CALLPLANE_SIMULATED_CALL_SECONDS: '0.2', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_SIMULATED_CALL_CONVERSATIONS: 'false' }, { worker: true, turns: true, analyses: true });
    reseller = await h.reseller('Northwind Reseller');
    const put = await h.call('PUT', '/api/v2/product/catalog/plan/pplan-tight', { token: reseller.token, body: TIGHT });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    acme = await h.organization(reseller.id, { orgName: 'Acme Dental', productPlanId: 'pplan-tight' });
    bolt = await h.organization(reseller.id, { orgName: 'Bolt Plumbing', productPlanId: 'pplan-tight' });
    // Acme: three calls and a text, two past the two tasks its plan includes. Bolt: one call.
    await runTasks(acme.token, [{ type: 'call', target: '+15005552001' }, { type: 'call', target: '+15005552002' }, { type: 'call', target: '+15005552003' }, { type: 'text', target: '+15005552004', content: 'See you at 10' }]);
    await runTasks(bolt.token, [{ type: 'call', target: '+15005552005' }]);
    // Bolt: a conversation asking to be called back, ended and analysed (a success); Acme: one still in progress.
    const ended = await converse(bolt.agentId, 'Busy now, please call me back later.');
    const deps = { db: h.database.db, config: h.config, policy: policyFromConfig(h.config), agents: h.services.agents, turns: h.turns.producer, analyses: h.analyses.producer, wakeDeliveries: () => {} };
    assert.equal(await conversationService(deps as never).end(ended, 'completed', null), true);
    await waitFor('the analysis', async () => (await h.database.db.selectFrom('conversation_analyses').select('state').where('id', '=', ended).executeTakeFirst())?.state === 'finished', 30_000);
    acmeOpen = await converse(acme.agentId, 'Do you have an appointment on Friday?');
    c = await openConsole(h);
    await c.signIn(reseller.token);
  });
  after(async () => {
    await c?.close();
    await h?.close();
    await hook?.close();
  });

  it("shows each organization's figures as the API's usage for the same window, the chart, the near-limit list and live conversations", async () => {
    const { page } = c;
    // The reseller's navigation offers the page.
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Across organizations' }).click();
    await page.getByRole('heading', { level: 1, name: 'Across organizations' }).waitFor();
    const windowText = await page.getByTestId('overview-window').innerText();
    const [, startDate, endDate] = /^(\d{4}-\d{2}-\d{2}) to (\d{4}-\d{2}-\d{2}) \(UTC\): 2 organizations\.$/.exec(windowText) ?? [];
    assert.ok(startDate && endDate, windowText);
    const usd = (n: number) => new Intl.NumberFormat('en', { style: 'currency', currency: 'USD', maximumFractionDigits: 4 }).format(n);

    // Each row equals GET /api/v2/stats/usage of that organization over the window the page names.
    const table = page.getByRole('table').filter({ has: page.getByRole('columnheader', { name: 'Cost per call' }) });
    for (const org of [{ name: 'Acme Dental', id: acme.id, success: '—' }, { name: 'Bolt Plumbing', id: bolt.id, success: '100 % (1/1)' }]) {
      const u = await h.call('GET', '/api/v2/stats/usage', { token: reseller.token, query: { targetAccountId: org.id, startDate, endDate, allItems: true, combineCosts: true } });
      assert.equal(u.status, 200, JSON.stringify(u.body));
      const cells = (await table.getByRole('row').filter({ hasText: org.name }).getByRole('cell').allInnerTexts()).map((s) => s.trim());
      const calls = u.body.usage.calls as number;
      const cost = u.body.usage['cost:total'] as number;
      assert.deepEqual(cells, [
        org.name, String(calls), String(u.body.usage.texts), String(u.body.usage.callMinutes), u.body.usage.modelTokens.toLocaleString('en'),
        org.success, usd(cost), usd(Math.round((cost / calls) * 1e6) / 1e6), 'Billing',
      ], org.name);
    }
    assert.equal((await table.getByRole('row').filter({ hasText: 'Acme Dental' }).getByRole('cell').nth(1).innerText()).trim(), '3');
    // The totals are the reseller's usage over the same window.
    const sum = await h.call('GET', '/api/v2/stats/usage', { token: reseller.token, query: { startDate, endDate, allItems: true, combineCosts: true, timeseries: true } });
    const totals = page.getByTestId('overview-totals');
    const figure = async (label: string) => (await totals.locator('dt').filter({ hasText: new RegExp(`^${label}$`) }).locator('xpath=following-sibling::dd[1]').innerText()).trim();
    assert.equal(await figure('Calls'), String(sum.body.usage.calls));
    assert.equal(sum.body.usage.calls, 4);
    assert.equal(await figure('Texts'), String(sum.body.usage.texts));
    assert.equal(await figure('Cost'), usd(sum.body.usage['cost:total']));
    assert.equal(sum.body.usage['cost:total'], 20.02);
    assert.match(await figure('Success rate'), /^100 % \(1 of 1 analysed\)$/);

    // The chart, with its figures: the usage timeseries' calls and texts by day.
    const chart = page.locator('figure').filter({ hasText: 'Calls and texts per day' });
    assert.equal(await chart.locator('canvas').count(), 1, 'the chart is drawn');
    await chart.getByText('figures').click();
    const day = (sum.body.timeseries as { date: string; calls: number; texts: number }[]).find((d) => d.calls > 0)!;
    const dayRow = (await chart.getByRole('row').filter({ has: page.getByRole('rowheader', { name: day.date.slice(5), exact: true }) }).innerText()).split('\t').map((s) => s.trim());
    assert.deepEqual(dayRow, [day.date.slice(5), String(day.calls), String(day.texts)]);

    // Live across organizations: Acme's conversation in progress, named by its organization, with its last line.
    const live = page.getByRole('region', { name: /^Live across organizations/ });
    await live.locator('[data-feed="connected"]').waitFor();
    // (The text Acme sent is a conversation still open too.)
    const liveRow = live.getByRole('row').filter({ hasText: 'Conversation from visitor-' });
    await liveRow.waitFor();
    const liveCells = (await liveRow.getByRole('cell').allInnerTexts()).map((s) => s.trim());
    assert.equal(liveCells[0], 'Acme Dental');
    assert.equal(await liveRow.getByRole('link', { name: 'Acme Dental' }).getAttribute('href'), `#/o/${acme.id}/live`);
    const last = await h.database.db.selectFrom('conversation_messages').select('text').where('conversation_id', '=', acmeOpen).orderBy('at', 'desc').executeTakeFirstOrThrow();
    assert.equal(liveCells[4], last.text.replace(/\s+/g, ' ').trim(), 'the last line is the agent\'s answer');
    await c.shot('overview-across');

    // 400 % zoom (320 CSS pixels): nothing wider than the window but the tables' and charts' own scrolling boxes.
    await page.setViewportSize({ width: 320, height: 640 });
    await c.shot('overview-across-320');
    const { scroll, width, wide } = await page.evaluate(() => ({
      scroll: document.documentElement.scrollWidth, width: window.innerWidth,
      wide: [...document.querySelectorAll('main *')].filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest('.table-wrap, .chart'))
        .slice(0, 5).map((e) => `${e.tagName}.${e.className}`),
    }));
    assert.deepEqual(wide, []);
    assert.ok(scroll <= width + 1, `page is ${scroll}px wide in a ${width}px window`);
    await page.setViewportSize({ width: 1280, height: 860 });

    // Near the limits: Acme used 4 of its 2 included tasks; the link opens Acme's Billing page.
    const near = page.getByRole('list', { name: "Organizations near their plan's limits" });
    assert.deepEqual((await near.getByRole('listitem').allInnerTexts()).map((s) => s.trim()), ['Past Acme Dental: 4 of 2 tasks (200 %)']);
    const link = near.getByRole('link', { name: 'Acme Dental' });
    assert.equal(await link.getAttribute('href'), `#/o/${acme.id}/billing`);
    await link.click();
    await page.getByRole('heading', { level: 1, name: 'Billing' }).waitFor();
    assert.match(page.url(), new RegExp(`#/o/${acme.id}/billing$`));
    assert.deepEqual(c.problems, []);
  });

  it('a window typed in is kept in the address and read from the API; an organization signed in is refused with the API\'s message', async () => {
    const { page } = c;
    await c.open('/overview', 'Across organizations');
    await page.getByLabel('From', { exact: true }).fill('2020-01-01');
    await page.getByLabel('To', { exact: true }).fill('2020-01-31');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByTestId('overview-window').filter({ hasText: '2020-01-01 to 2020-01-31' }).waitFor();
    assert.match(page.url(), /#\/overview\?from=2020-01-01&to=2020-01-31$/);
    // Nothing happened then: the figures say so.
    const totals = page.getByTestId('overview-totals');
    assert.equal((await totals.locator('dt').filter({ hasText: /^Calls$/ }).locator('xpath=following-sibling::dd[1]').innerText()).trim(), '0');

    const org = await openConsole(h);
    try {
      await org.signIn(acme.token);
      assert.equal(await org.page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Across organizations' }).count(), 0);
      await org.open('/overview', 'Across organizations');
      await org.page.getByText(/needs a partner or a reseller/i).waitFor();
    } finally {
      await org.close();
    }
  });
});
