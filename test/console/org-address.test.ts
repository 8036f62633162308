// The organization in the address, in Chromium: every organization page is `#/o/<orgId>/…`, a link
// to send. A partner opens an agent's link cold in a new tab (and reloads it): the agent's page, its
// organization and reseller in the pickers. An old link (`#/agents/<id>`) is rewritten to name the
// agent's organization. Accounts → organization → agent lands on the agent with the pickers set; the
// navigation keeps the organization; the picker moves the address to another one. An organization
// signed in opening another's link is told so. And a fresh partner follows the overview's path to a
// published agent with a number, the clicks counted.
// @lane wall
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Locator, Page } from 'playwright-core';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

/** Waits until the select shows `value` (its options arrive with their lists). */
async function selected(select: Locator, value: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  let last = '';
  while (Date.now() < deadline) {
    last = await select.inputValue();
    if (last === value) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(last, value);
}

const fragment = (page: Page) => new URL(page.url()).hash;

describe('web console: the organization in the address (Chromium)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let reseller: { id: number; token: string };
  let org: { id: number; agentId: number; token: string };
  let other: { id: number; agentId: number; token: string };
  before(async () => {
    h = await startHarness('sqlite');
    reseller = await h.reseller('Northwind Reseller');
    await h.reseller('Empty Reseller');
    org = await h.organization(reseller.id, { orgName: 'Acme Dental', accountName: 'Front desk' });
    other = await h.organization(reseller.id, { orgName: 'Bluebird Clinic', accountName: 'Night line' });
    c = await openConsole(h);
  });
  after(async () => {
    await c?.close();
    await h?.close();
  });

  it('a partner opens an agent\'s link cold in a new tab, and after a reload: the agent, with its organization and reseller picked', async () => {
    await c.signIn(h.adminToken);
    const tab = await c.context.newPage();
    try {
      await tab.goto(`${c.base}/console/#/o/${org.id}/agents/${org.agentId}`);
      await tab.getByRole('heading', { level: 1, name: 'Agent Front desk' }).waitFor();
      await selected(tab.getByLabel('Reseller'), String(reseller.id));
      await selected(tab.getByLabel('Organization'), String(org.id));
      await tab.reload();
      await tab.getByRole('heading', { level: 1, name: 'Agent Front desk' }).waitFor();
      await selected(tab.getByLabel('Organization'), String(org.id));
      // The navigation keeps the organization.
      await tab.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Tasks' }).click();
      await tab.getByRole('heading', { level: 1, name: 'Tasks' }).waitFor();
      assert.equal(fragment(tab), `#/o/${org.id}/tasks`);
      await c.shot('org-address-deep-link');
    } finally {
      await tab.close();
    }
  });

  it('an old link without the organization is rewritten to name the agent\'s', async () => {
    const tab = await c.context.newPage();
    try {
      await tab.goto(`${c.base}/console/#/agents/${other.agentId}?tab=versions`);
      await tab.getByRole('heading', { level: 1, name: 'Agent Night line' }).waitFor();
      assert.equal(fragment(tab), `#/o/${other.id}/agents/${other.agentId}?tab=versions`);
      await selected(tab.getByLabel('Organization'), String(other.id));
      // A page without an id in it, opened in a fresh tab that has opened no organization: the page asks.
      const fresh = await c.context.newPage();
      try {
        await fresh.goto(`${c.base}/console/#/tasks`);
        await fresh.getByText('Choose an organization at the top to see its tasks').waitFor();
      } finally {
        await fresh.close();
      }
      // In the tab that opened one, the same link goes to that organization's.
      await tab.goto(`${c.base}/console/#/tasks`);
      await tab.getByRole('heading', { level: 1, name: 'Tasks' }).waitFor();
      assert.equal(fragment(tab), `#/o/${other.id}/tasks`);
    } finally {
      await tab.close();
    }
  });

  it('Accounts → organization → agent opens the agent with the pickers set; the picker moves the address', async () => {
    const { page } = c;
    await c.open('/accounts', 'Accounts');
    await page.getByRole('link', { name: 'Organizations of Northwind Reseller' }).click();
    await page.getByRole('link', { name: 'Agents of Acme Dental' }).click();
    await page.getByRole('heading', { name: 'Agents of Acme Dental' }).waitFor();
    await page.getByRole('link', { name: 'Open agent Front desk' }).click();
    await page.getByRole('heading', { level: 1, name: 'Agent Front desk' }).waitFor();
    assert.equal(fragment(page), `#/o/${org.id}/agents/${org.agentId}`);
    await selected(page.getByLabel('Reseller'), String(reseller.id));
    await selected(page.getByLabel('Organization'), String(org.id));
    // Another organization at the top: its agents (the agent of the first is not the second's).
    await page.getByLabel('Organization').selectOption(String(other.id));
    await page.getByRole('heading', { level: 1, name: 'Agents' }).waitFor();
    assert.equal(fragment(page), `#/o/${other.id}/agents`);
    await page.getByRole('link', { name: 'Night line' }).waitFor();
    assert.equal(await page.getByRole('link', { name: 'Front desk' }).count(), 0);
    assert.deepEqual(c.problems, []);
  });

  it('an organization opening another organization\'s link is told whose it is', async () => {
    const ctx = await c.browser.newContext();
    try {
      const page = await ctx.newPage();
      await page.goto(`${c.base}/console/#/sign-in`);
      await page.getByLabel('API token').fill(org.token);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
      await page.goto(`${c.base}/console/#/o/${other.id}/agents`);
      await page.getByText(`This link is for organization #${other.id}`).waitFor();
      // Its own organization's link opens.
      await page.goto(`${c.base}/console/#/o/${org.id}/agents/${org.agentId}`);
      await page.getByRole('heading', { level: 1, name: 'Agent Front desk' }).waitFor();
    } finally {
      await ctx.close();
    }
  });
});

describe('web console: a fresh install\'s path (Chromium)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  before(async () => {
    h = await startHarness('sqlite');
    c = await openConsole(h);
  });
  after(async () => {
    await c?.close();
    await h?.close();
  });

  it('a fresh partner reaches a published agent with a number in under 10 clicks after signing in', async () => {
    const { page } = c;
    await c.signIn(h.adminToken);
    let clicks = 0;
    const click = async (l: Locator) => { clicks++; await l.click(); };
    const path = page.getByRole('region', { name: 'Get started' });
    await path.waitFor();
    await c.shot('onboarding-fresh');

    await path.getByLabel('Reseller name').fill('Harbor Telecom');
    await click(path.getByRole('button', { name: 'Create reseller' }));
    await path.getByLabel('Organization name').fill('Seaside Bakery');
    await path.getByLabel('First agent\'s name (optional)').fill('Order line');
    await click(path.getByRole('button', { name: 'Create organization' }));
    // The new organization is the one acted on, in the address and at the top.
    await click(path.getByRole('button', { name: 'Publish Order line' }));
    await path.getByLabel('Area code (US)').fill('212');
    await click(path.getByRole('button', { name: 'Find numbers' }));
    const buy = path.getByRole('button', { name: /^Buy \+1212\d+ for Order line$/ }).first();
    await buy.waitFor();
    const number = (await buy.getAttribute('aria-label'))!.split(' ')[1];
    await click(buy);
    await path.waitFor({ state: 'detached' });
    assert.ok(clicks < 10, `${clicks} clicks`);

    const resellers = (await h.call('GET', '/api/v2/listResellers', { query: { targetPartnerId: h.partnerId } })).body.resellers as { id: number; name: string }[];
    const reseller = resellers.find((r) => r.name === 'Harbor Telecom')!;
    const orgs = (await h.call('GET', '/api/v2/listOrganizations', { query: { targetResellerId: reseller.id } })).body.organizations as { id: number; name: string }[];
    const org = orgs.find((o) => o.name === 'Seaside Bakery')!;
    assert.equal(fragment(page), `#/o/${org.id}`);
    await selected(page.getByLabel('Organization'), String(org.id));
    const agents = (await h.call('GET', '/api/v2/listAccounts', { query: { targetOrganizationId: org.id } })).body.accounts as { id: number; name: string }[];
    assert.deepEqual(agents.map((a) => a.name), ['Order line']);
    const agent = await h.call('GET', `/api/v2/agent/camp${agents[0].id}`, { query: { targetAccountId: agents[0].id } });
    assert.equal(typeof agent.body.sponsorship.publishedAt, 'number', JSON.stringify(agent.body.sponsorship.publishedAt));
    const numbers = (await h.call('GET', '/api/v2/phoneNumbers', { query: { targetAccountId: org.id } })).body.phoneNumbers as { number: string; agentId: number }[];
    assert.deepEqual(numbers.map((n) => [n.number, n.agentId]), [[number, agents[0].id]]);
    await c.shot('onboarding-done');
    assert.deepEqual(c.problems, []);
  });
});
