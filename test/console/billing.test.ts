// The console's Billing page in Chromium, with usage made for real: calls and a text run by the
// harness's task worker on the SIMULATED carrier, on a plan of the reseller's catalog that includes
// three tasks and sells no overage, so a fourth waits with its reason. The page shows the plan, what
// is used of it, the held task's reason and the usage charts; adds and removes an add-on;
// subscribes to a plan on offer and cancels; and, as the reseller, starts a billing period.
// @lane wall
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { waitFor } from '../helpers/sip-peers.ts';
import { FakeStripe } from '../helpers/fake-stripe.ts';

const TIGHT = {
  name: 'Tight', description: 'Three tasks a month', monthlyPrice: 10, yearlyPrice: 100, currency: 'USD',
  included: { callMinutes: 10, texts: 10, tasks: 3, conversations: 10, modelTokens: 100_000 },
  overage: { callMinute: null, text: null, task: null, conversation: null, modelTokensPer1k: null },
  limits: { concurrencyPerRun: 5 },
};

describe('web console Billing page (Chromium)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let reseller: { id: number; token: string };
  let org: { id: number; agentId: number; token: string };
  before(async () => {
    h = await startHarness('sqlite', { CALLPLANE_SIMULATED_CALL_SECONDS: '0.2' }, { worker: true });
    reseller = await h.reseller('Northwind Reseller');
    const put = await h.call('PUT', '/api/v2/product/catalog/plan/pplan-tight', { token: reseller.token, body: TIGHT });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    org = await h.organization(reseller.id, { orgName: 'Acme Dental', productPlanId: 'pplan-tight' });
    // Two calls and a text, run by the worker on the SIMULATED carrier: the plan's three tasks.
    const ids: string[] = [];
    for (const body of [{ type: 'call', target: '+15005551001' }, { type: 'call', target: '+15005551002' }, { type: 'text', target: '+15005551003', content: 'Your appointment is at 10' }]) {
      const r = await h.call('POST', '/api/v2/tasks', { token: org.token, body });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      ids.push(r.body.task.id);
    }
    await waitFor('the three tasks to finish', async () => {
      const rows = await h.database.db.selectFrom('tasks').select('state').where('id', 'in', ids).execute();
      return rows.every((t) => t.state === 'finished');
    }, 30_000);
    // A fourth waits: no task is left in the period and no overage is sold.
    const fourth = await h.call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'call', target: '+15005551004' } });
    await waitFor('the fourth task to be held', async () => {
      const t = await h.call('GET', `/api/v2/tasks/${fourth.body.task.id}`, { token: org.token });
      return typeof t.body.task?.heldReason === 'string';
    }, 15_000);
    c = await openConsole(h);
    await c.signIn(org.token);
  });
  after(async () => {
    await c?.close();
    await h?.close();
  });

  it('shows the plan, what is used of it, the held task\'s reason, and usage charts from the calls made', async () => {
    const { page } = c;
    await c.open('/billing', 'Billing');
    const plan = page.getByRole('region', { name: 'Current plan' });
    await plan.getByText('Tight', { exact: true }).waitFor();
    const used = plan.getByRole('table', { name: 'Included and used in the billing period' });
    const row = async (item: string) => (await used.getByRole('row').filter({ has: page.getByRole('cell', { name: item, exact: true }) }).innerText()).split('\t').map((s) => s.trim());
    assert.deepEqual((await row('Call minutes')).slice(0, 4), ['Call minutes', '10', '2', '8']);
    assert.deepEqual((await row('Texts')).slice(0, 4), ['Texts', '10', '1', '9']);
    assert.deepEqual((await row('Tasks')).slice(0, 4), ['Tasks', '3', '3', 'None left']);
    assert.match((await row('Tasks'))[4], /Tasks wait/);
    const held = plan.getByRole('status').filter({ hasText: 'Held back: 1 task' });
    assert.match(await held.innerText(), /included amount used: 3 of the 3 tasks/);

    const usage = page.getByRole('region', { name: 'Usage' });
    const totals = usage.getByRole('definition');
    assert.deepEqual((await totals.allInnerTexts()).slice(0, 3), ['2', '2', '1']);
    // The chart's figures: today's bar holds the two calls and the text.
    const figures = usage.locator('figure').filter({ hasText: 'Calls and texts per day' });
    assert.equal(await figures.locator('canvas').count(), 1, 'the chart is drawn');
    await figures.getByText('Calls and texts per day: figures').click();
    const today = await h.call('GET', '/api/v2/stats/usage', { token: org.token, query: { timeseries: true, allItems: true } });
    const day = (today.body.timeseries as Array<{ date: string; calls: number }>).find((d) => d.calls > 0)!;
    const cells = await figures.getByRole('row').filter({ has: page.getByRole('rowheader', { name: day.date }) }).getByRole('cell').allInnerTexts();
    assert.deepEqual(cells, ['2', '1']);
    await c.shot('billing-plan-usage');
    await usage.getByLabel('Per', { exact: true }).selectOption('month');
    await usage.getByText('Calls and texts per month', { exact: true }).waitFor();
  });

  it('adds and removes an add-on', async () => {
    const { page } = c;
    await c.open('/billing', 'Billing');
    const addons = page.getByRole('region', { name: 'Add-ons' });
    const texts = addons.getByRole('row').filter({ hasText: '5,000 texts' });
    await texts.getByRole('button', { name: 'Add 5,000 texts' }).click();
    await texts.getByText('In force').waitFor();
    const plan = await h.call('GET', '/api/v2/product/currentPlan', { token: org.token });
    assert.deepEqual(plan.body.addons.filter((a: { removedAt: number | null }) => a.removedAt === null).map((a: { addonId: string }) => a.addonId), ['addon-texts-5000']);
    // What the period includes rises with it.
    const used = page.getByRole('table', { name: 'Included and used in the billing period' });
    await used.getByRole('row').filter({ hasText: /^Texts/ }).getByRole('cell', { name: '5,010', exact: true }).waitFor();
    await c.shot('billing-addons');
    await texts.getByRole('button', { name: 'Remove 5,000 texts' }).click();
    await texts.getByRole('button', { name: 'Yes, remove it' }).click();
    await texts.getByText('Not added').waitFor();
    const after = await h.call('GET', '/api/v2/product/currentPlan', { token: org.token });
    assert.deepEqual(after.body.addons.filter((a: { removedAt: number | null }) => a.removedAt === null), []);
  });

  it('subscribes to a plan on offer and cancels the subscription', async () => {
    const { page } = c;
    await c.open('/billing', 'Billing');
    const plans = page.getByRole('region', { name: 'Plans on offer' });
    await plans.getByRole('button', { name: 'Subscribe to Starter' }).click();
    await plans.getByRole('status').filter({ hasText: 'Subscribed to Starter (monthly), in force now.' }).waitFor();
    const current = page.getByRole('region', { name: 'Current plan' });
    await current.getByText('Starter', { exact: true }).waitFor();
    assert.equal((await h.call('GET', '/api/v2/product/currentPlan', { token: org.token })).body.productPlanId, 'pplan-starter');
    await plans.getByRole('row').filter({ hasText: 'Starter' }).getByText('Your plan').waitFor();
    await c.shot('billing-subscribed');
    await current.getByRole('button', { name: 'Cancel subscription' }).click();
    await current.getByRole('button', { name: 'Yes, cancel it' }).click();
    await current.getByRole('status').filter({ hasText: 'Subscription cancelled' }).waitFor();
    const after = await h.call('GET', '/api/v2/product/currentPlan', { token: org.token });
    assert.equal(after.body.subscription, null);
  });

  it('as the reseller, starts a billing period for the organization', async () => {
    const { page } = c;
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API token').waitFor();
    await c.signIn(reseller.token);
    await page.getByLabel('Organization').selectOption(String(org.id));
    await c.open('/billing', 'Billing');
    const form = page.getByRole('form', { name: 'Start a billing period' });
    const local = (d: Date) => new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    const start = new Date(Date.now() - 120_000);
    const end = new Date(Date.now() + 30 * 86_400_000);
    await form.getByLabel('Starts').fill(local(start));
    await form.getByLabel('Ends').fill(local(end));
    await form.getByRole('button', { name: 'Start period' }).click();
    await form.getByRole('status').filter({ hasText: /Billing period .* started/ }).waitFor();
    const usage = await h.call('GET', '/api/v2/stats/usage', { token: org.token });
    assert.equal(usage.body.billingPeriod.startDateTimestamp, Math.floor(new Date(local(start)).getTime() / 1000));
    await c.shot('billing-period');

    await page.setViewportSize({ width: 320, height: 640 });
    await c.shot('billing-400-percent');
    const { scroll, width, wide } = await page.evaluate(() => ({
      scroll: document.documentElement.scrollWidth, width: window.innerWidth,
      wide: [...document.querySelectorAll('main *')].filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest('.table-wrap, .chart'))
        .slice(0, 5).map((e) => `${e.tagName}.${e.className}`),
    }));
    assert.deepEqual(wide, []);
    assert.ok(scroll <= width + 1, `page is ${scroll}px wide in a ${width}px window`);
    await page.setViewportSize({ width: 1280, height: 860 });
    assert.deepEqual(c.problems, []);
  });
});

describe('web console Billing page with a billing system (Chromium, fake Stripe)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let stripe: FakeStripe;
  let org: { id: number; agentId: number; token: string };
  before(async () => {
    stripe = await FakeStripe.start();
    h = await startHarness('sqlite', { CALLPLANE_STRIPE_API_URL: stripe.url });
    const reseller = await h.reseller('Northwind Reseller');
    const keys = { apiKey: 'sk_test_console1abcdef', publishableKey: 'pk_test_console1abcdef', webhookSigningKey: 'whsec_console1signing' };
    stripe.keys.add(keys.apiKey);
    const conf = await h.call('POST', '/api/v2/billing/billingSystemConfig', { token: reseller.token, body: { billingSystemType: 'stripe', ...keys } });
    assert.equal(conf.status, 200, JSON.stringify(conf.body));
    org = await h.organization(reseller.id, { orgName: 'Acme Dental' });
    c = await openConsole(h);
    await c.signIn(org.token);
  });
  after(async () => {
    await c?.close();
    await h?.close();
    await stripe?.close();
  });

  it('subscribing opens the processor\'s checkout as a link, and the plan changes only once it is paid', async () => {
    const { page } = c;
    await c.open('/billing', 'Billing');
    const plans = page.getByRole('region', { name: 'Plans on offer' });
    await plans.getByLabel('Term').selectOption('year');
    await plans.getByRole('button', { name: 'Subscribe to Business' }).click();
    const link = plans.getByRole('link', { name: 'open the checkout page' });
    await link.waitFor();
    assert.match((await link.getAttribute('href'))!, /^https:\/\/checkout\.stripe\.com\/c\/pay\//);
    const session = [...stripe.requests].reverse().find((r) => r.method === 'POST' && r.path.includes('checkout/sessions'));
    assert.ok(session, 'a Checkout Session was asked for');
    assert.match(session.form.get('success_url') ?? '', /\/console\/#\/billing$/);
    const current = page.getByRole('region', { name: 'Current plan' });
    // Not in force until the processor confirms the payment.
    assert.match(await current.innerText(), /Not subscribed/);
    assert.equal((await h.call('GET', '/api/v2/product/currentPlan', { token: org.token })).body.subscription, null);
    await c.shot('billing-checkout');
    assert.deepEqual(c.problems, []);
  });
});
