// The Accounts page in Chromium: a partner creates a reseller; a reseller creates an organization
// (the API's validation message shown for a bad one), suspends and reactivates it, deletes one after
// confirming, makes a one-time sign-in link for its owner that signs in a fresh browser, creates a
// token (shown once; it works) and revokes it (it stops working), and adds an agent. Everything is
// checked through the API as well as on the page.
// @lane wall
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

describe('web console: accounts (Chromium)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let reseller: { id: number; token: string };
  before(async () => {
    h = await startHarness('sqlite');
    reseller = await h.reseller('Northwind Reseller');
    c = await openConsole(h);
  });
  after(async () => {
    await c?.close();
    await h?.close();
  });

  const orgs = async () => (await h.call('GET', '/api/v2/listOrganizations', { token: reseller.token, query: { targetResellerId: reseller.id } })).body.organizations as { id: number; name: string; active: boolean }[];

  it('a partner creates a reseller and sees it listed', async () => {
    await c.signIn(h.adminToken);
    await c.open('/accounts', 'Accounts');
    await c.page.getByLabel('Reseller name').fill('Southwind Reseller');
    await c.page.getByRole('button', { name: 'Create reseller' }).click();
    await c.page.getByRole('cell', { name: 'Southwind Reseller', exact: true }).waitFor();
    const listed = await h.call('GET', '/api/v2/listResellers', { token: h.adminToken, query: { targetPartnerId: h.partnerId } });
    assert.ok(listed.body.resellers.some((r: { name: string }) => r.name === 'Southwind Reseller'), JSON.stringify(listed.body));
    await c.shot('accounts-resellers');
    await c.page.getByRole('button', { name: 'Sign out' }).click();
    await c.page.getByLabel('API token').waitFor();
  });

  it('a reseller creates an organization (the API\'s message shown for a bad one), suspends, reactivates and deletes one', async () => {
    await c.signIn(reseller.token);
    await c.open('/accounts', 'Accounts');
    // Too long a name: the API refuses it and the page says why, next to the form.
    await c.page.getByLabel('Organization name').fill('x'.repeat(201));
    await c.page.getByRole('button', { name: 'Create organization' }).click();
    const alert = c.page.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.innerText(), /orgName/);
    await c.page.getByLabel('Organization name').fill('Bluebird Clinic');
    await c.page.getByLabel('Owner\'s email (optional)').fill('owner@bluebird.example');
    await c.page.getByRole('button', { name: 'Create organization' }).click();
    await c.page.getByRole('cell', { name: 'Bluebird Clinic', exact: true }).waitFor();
    assert.ok((await orgs()).some((o) => o.name === 'Bluebird Clinic'));
    await c.shot('accounts-organizations');

    await c.page.getByRole('button', { name: 'Suspend Bluebird Clinic' }).click();
    await c.page.getByRole('button', { name: 'Reactivate Bluebird Clinic' }).waitFor();
    assert.equal((await orgs()).find((o) => o.name === 'Bluebird Clinic')!.active, false);
    await c.page.getByRole('button', { name: 'Reactivate Bluebird Clinic' }).click();
    await c.page.getByRole('button', { name: 'Suspend Bluebird Clinic' }).waitFor();
    assert.equal((await orgs()).find((o) => o.name === 'Bluebird Clinic')!.active, true);

    await c.page.getByLabel('Organization name').fill('Temporary Org');
    await c.page.getByRole('button', { name: 'Create organization' }).click();
    await c.page.getByRole('cell', { name: 'Temporary Org', exact: true }).waitFor();
    await c.page.getByRole('button', { name: 'Delete organization Temporary Org' }).click();
    // Nothing is deleted before the confirmation.
    assert.ok((await orgs()).some((o) => o.name === 'Temporary Org'));
    await c.page.getByRole('button', { name: 'Yes, delete organization Temporary Org' }).click();
    await c.page.getByRole('cell', { name: 'Temporary Org', exact: true }).waitFor({ state: 'detached' });
    assert.ok(!(await orgs()).some((o) => o.name === 'Temporary Org'));
  });

  it('makes a one-time sign-in link for the organization\'s owner, which signs in a fresh browser once', async () => {
    await c.open('/accounts', 'Accounts');
    await c.page.getByRole('link', { name: 'Sign-in link for Bluebird Clinic' }).click();
    await c.page.getByLabel('Member\'s email').fill('owner@bluebird.example');
    await c.page.getByRole('button', { name: 'Make sign-in link' }).click();
    const shown = c.page.getByTestId('sign-in-link');
    await shown.waitFor();
    const link = await shown.innerText();
    assert.match(link, new RegExp(`^${c.base.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/console/#/sign-in\\?ott=`));
    assert.match(await c.page.locator('main').innerText(), /It signs in once, until /);
    await c.shot('accounts-sign-in-link');

    const fresh = await c.browser.newContext();
    const other = await c.browser.newContext();
    try {
      const page = await fresh.newPage();
      await page.goto(link);
      await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
      assert.match(await page.locator('.who').innerText(), /Organization\s+Bluebird Clinic/);
      // Used: a second browser cannot sign in with it.
      const again = await other.newPage();
      await again.goto(link);
      await again.getByRole('alert').waitFor();
      assert.match(await again.getByRole('alert').innerText(), /already been used/);
    } finally {
      await fresh.close();
      await other.close();
    }
  });

  it('creates a token for the organization, shown once, and revokes it', async () => {
    const org = (await orgs()).find((o) => o.name === 'Bluebird Clinic')!;
    await c.open('/accounts', 'Accounts');
    await c.page.getByRole('link', { name: 'Tokens of Bluebird Clinic' }).click();
    await c.page.getByLabel('New token\'s description').fill('Front desk script');
    await c.page.getByRole('button', { name: 'Create token' }).click();
    const shown = c.page.getByTestId('new-token');
    await shown.waitFor();
    const token = (await shown.innerText()).trim();
    assert.equal((await h.call('GET', '/api/v2/account', { token })).body.id, org.id, 'the token shown is the organization\'s');
    await c.page.getByRole('cell', { name: 'Front desk script', exact: true }).waitFor();
    await c.shot('accounts-tokens');
    const prefix = (await h.call('GET', '/api/v2/tokens', { token: reseller.token, query: { targetAccountId: org.id } })).body.tokens
      .find((t: { description: string }) => t.description === 'Front desk script').token as string;
    assert.ok(!token.startsWith(prefix) || token.length > prefix.length);
    await c.page.getByRole('button', { name: `Delete token ${prefix}` }).click();
    await c.page.getByRole('button', { name: `Yes, delete token ${prefix}` }).click();
    await c.page.getByRole('cell', { name: 'Front desk script', exact: true }).waitFor({ state: 'detached' });
    assert.equal((await h.call('GET', '/api/v2/account', { token })).status, 401, 'a revoked token stops working');
  });

  it('lists an organization\'s agents and creates one', async () => {
    const org = (await orgs()).find((o) => o.name === 'Bluebird Clinic')!;
    await c.open('/accounts', 'Accounts');
    await c.page.getByRole('link', { name: 'Agents of Bluebird Clinic' }).click();
    await c.page.getByRole('heading', { name: 'Agents of Bluebird Clinic' }).waitFor();
    await c.page.getByLabel('Agent name').fill('Night line');
    await c.page.getByRole('button', { name: 'Create agent' }).click();
    await c.page.getByRole('cell', { name: 'Night line', exact: true }).waitFor();
    const listed = await h.call('GET', '/api/v2/listAccounts', { token: reseller.token, query: { targetOrganizationId: org.id } });
    assert.ok(listed.body.accounts.some((a: { name: string }) => a.name === 'Night line'));
    await c.shot('accounts-agents');
    // Opening an agent from here acts on its organization (the picker at the top follows).
    await c.page.getByRole('link', { name: 'Open agent Night line' }).click();
    await c.page.getByRole('heading', { level: 1, name: /^Agent Night line/ }).waitFor();
    // …in its address too: a link to send.
    assert.equal(new URL(c.page.url()).hash.split('/agents/')[0], `#/o/${org.id}`);
    await c.page.getByLabel('Organization').locator(`option[value="${org.id}"]`).waitFor({ state: 'attached' });
    assert.equal(await c.page.getByLabel('Organization').inputValue(), String(org.id));
  });

  it('finds an account by name (searchAccounts) and opens it on the ladder', async () => {
    await c.open('/accounts', 'Accounts');
    await c.page.getByLabel('Name, email or external id').fill('bluebird');
    await c.page.getByRole('button', { name: 'Find', exact: true }).click();
    await c.page.getByRole('link', { name: 'Bluebird Clinic', exact: true }).click();
    await c.page.getByRole('heading', { name: 'Agents of Bluebird Clinic' }).waitFor();
    await c.shot('accounts-search');
    await c.page.setViewportSize({ width: 320, height: 800 });
    try {
      await c.page.waitForTimeout(200);
      const wide = await c.page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(wide <= 320, `the page is ${wide} px wide`);
      await c.shot('accounts-narrow');
    } finally {
      await c.page.setViewportSize({ width: 1280, height: 860 });
    }
    assert.deepEqual(c.problems, []);
  });
});
