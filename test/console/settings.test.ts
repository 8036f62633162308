// The settings that had no page, in Chromium, each saved and read back through the API, the API's
// message beside the field when refused, secrets shown once and masked after: an organization's
// name, time zone and default reply webhook (with its signing secret), its Twilio credentials, its
// members, its own API tokens and its activity-record export (a reseller acting on it; the
// organization itself sees what only its reseller may change); a reseller's plan catalog and prices
// and its billing system (Stripe's double on loopback), from the partner's Plans and billing page.
// @lane wall
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { FakeStripe } from '../helpers/fake-stripe.ts';

describe('web console: settings (Chromium)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let stripe: FakeStripe;
  let reseller: { id: number; token: string };
  let org: { id: number; agentId: number; token: string };
  before(async () => {
    stripe = await FakeStripe.start();
    h = await startHarness('sqlite', { CALLPLANE_STRIPE_API_URL: stripe.url });
    reseller = await h.reseller('Northwind Reseller');
    org = await h.organization(reseller.id, { orgName: 'Acme Dental', accountName: 'Front desk' });
    c = await openConsole(h);
    await c.signIn(reseller.token);
  });
  after(async () => {
    await c?.close();
    await h?.close();
    await stripe?.close();
  });

  const details = async () => (await h.call('GET', '/api/v2/account', { token: reseller.token, query: { targetAccountId: org.id } })).body.details;

  it('the organization\'s name, time zone and reply webhook: a bad zone refused by name, saved and read back; a signing secret shown once', async () => {
    const { page } = c;
    await c.open(`/o/${org.id}/settings`, 'Organization settings');
    const form = page.getByRole('form', { name: 'Organization settings' });
    await form.getByLabel('Time zone').fill('Mars/Olympus_Mons');
    await form.getByRole('button', { name: 'Save settings' }).click();
    await form.getByRole('alert').first().waitFor();
    assert.match(await form.getByRole('alert').first().innerText(), /timezone/);
    assert.equal((await details()).timezone ?? null, null, 'nothing stored');
    await form.getByLabel('Time zone').fill('Europe/Paris');
    await form.getByLabel('Default reply webhook').fill('https://hooks.acme.example/replies');
    await form.getByRole('button', { name: 'Save settings' }).click();
    await form.getByText('Settings saved.').waitFor();
    const d = await details();
    assert.equal(d.timezone, 'Europe/Paris');
    assert.equal(d.outboundMessageWebhookUrl, 'https://hooks.acme.example/replies');
    await page.getByRole('button', { name: 'Issue a new signing secret' }).click();
    const secret = page.getByTestId('new-signing-secret');
    await secret.waitFor();
    assert.match(await secret.innerText(), /^whsec_/);
    assert.equal((await details()).outboundMessageSigningSecretIssued, true);
    // Read again: the values stay, the secret is not shown again.
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Organization settings' }).waitFor();
    assert.equal(await page.getByLabel('Time zone').inputValue(), 'Europe/Paris');
    await page.getByText('Signing secret of those replies: issued (not shown again).').waitFor();
    assert.equal(await page.getByTestId('new-signing-secret').count(), 0);
    await c.shot('settings-organization');
  });

  it('Twilio credentials: a malformed SID refused by name; saved, the token never shown back', async () => {
    const { page } = c;
    const form = page.getByRole('form', { name: 'Twilio credentials' });
    await page.getByText(/numbers come from the SIMULATED inventory/).waitFor();
    await form.getByLabel('Twilio Account SID').fill('AC-not-a-sid');
    await form.getByLabel('Twilio auth token').fill('twilio-secret-token-0001');
    await form.getByRole('button', { name: 'Add Twilio' }).click();
    await form.getByRole('alert').waitFor();
    assert.match(await form.getByRole('alert').innerText(), /accountSid/);
    const sid = `AC${'0123456789abcdef'.repeat(2)}`;
    await form.getByLabel('Twilio Account SID').fill(sid);
    await form.getByLabel('Twilio auth token').fill('twilio-secret-token-0001');
    await form.getByRole('button', { name: 'Add Twilio' }).click();
    await form.getByText(/Twilio settings saved/).waitFor();
    const table = page.getByRole('table', { name: 'Numbering providers' });
    await table.getByRole('cell', { name: 'twilio', exact: true }).waitFor();
    const providers = (await details()).numberingProviders as { providerId: string; config: Record<string, string> }[];
    assert.deepEqual(providers.map((p) => [p.providerId, p.config.accountSid]), [['twilio', sid]]);
    assert.ok(!JSON.stringify(providers).includes('twilio-secret-token-0001'), 'the API masks the token');
    assert.ok(!(await page.locator('main').innerText()).includes('twilio-secret-token-0001'), 'the page never shows it');
    assert.equal(await form.getByLabel('Twilio auth token').inputValue(), '', 'the field is emptied');
    await form.getByRole('button', { name: 'Save Twilio settings' }).waitFor();
  });

  it('members: invited (a duplicate refused in the API\'s words), listed and removed', async () => {
    const { page } = c;
    const form = page.getByRole('form', { name: 'Invite a member' });
    await form.getByLabel('Member\'s email').fill('front@acme.example');
    await form.getByRole('button', { name: 'Invite member' }).click();
    const members = page.getByRole('table', { name: 'Members' });
    await members.getByRole('cell', { name: 'front@acme.example', exact: true }).waitFor();
    const listed = await h.call('GET', '/api/v2/members', { token: org.token });
    assert.deepEqual(listed.body.members.map((m: { email: string }) => m.email), ['front@acme.example']);
    await form.getByLabel('Member\'s email').fill('FRONT@acme.example');
    await form.getByRole('button', { name: 'Invite member' }).click();
    await page.getByRole('alert').filter({ hasText: /front@acme\.example/i }).waitFor();
    await page.getByRole('button', { name: 'Remove member front@acme.example' }).click();
    await page.getByRole('button', { name: 'Yes, remove front@acme.example' }).click();
    await members.waitFor({ state: 'detached' });
    assert.deepEqual((await h.call('GET', '/api/v2/members', { token: org.token })).body.members, []);
  });

  it('the organization\'s own API token: shown once, it acts as the organization', async () => {
    const { page } = c;
    await page.getByLabel('New token\'s description').fill('Booking script');
    await page.getByRole('button', { name: 'Create token' }).click();
    const shown = page.getByTestId('new-token');
    await shown.waitFor();
    const token = (await shown.innerText()).trim();
    assert.equal((await h.call('GET', '/api/v2/account', { token })).body.id, org.id);
  });

  it('the activity-record export: a missing host key refused by name; saved, the password masked', async () => {
    const { page } = c;
    const form = page.getByRole('form', { name: 'Activity-record export settings' });
    await form.getByLabel('Server (host)').fill('files.acme.example');
    await form.getByLabel('User name').fill('acme');
    await form.getByLabel('Password').fill('export-password-77');
    await form.getByRole('button', { name: 'Save export' }).click();
    await form.getByRole('alert').waitFor();
    assert.match(await form.getByRole('alert').innerText(), /hostKeyFingerprint/);
    await form.getByLabel('Host key fingerprint').fill('trust-on-first-use');
    await form.getByRole('button', { name: 'Save export' }).click();
    await page.getByText(/sftp:\/\/acme@files\.acme\.example:22/).waitFor();
    const cfg = (await h.call('GET', '/api/v2/billing/adrExportSettings', { token: org.token })).body.config;
    assert.deepEqual([cfg.deliveryProtocol, cfg.host, cfg.username, cfg.hostKeyFingerprint, cfg.enabled], ['sftp', 'files.acme.example', 'acme', 'trust-on-first-use', true]);
    assert.notEqual(cfg.password, 'export-password-77');
    assert.ok(!(await page.locator('main').innerText()).includes('export-password-77'));
    await c.shot('settings-export');
    // At 320 CSS px (400 % zoom) the page folds to one column, with no sideways scrolling.
    await page.setViewportSize({ width: 320, height: 800 });
    try {
      await page.waitForTimeout(200);
      const wide = await page.evaluate(() => document.documentElement.scrollWidth);
      const culprits = await page.evaluate(() => [...document.querySelectorAll('body *')].filter((e) => !e.closest('.table-wrap') && e.getBoundingClientRect().right > 320).slice(0, 8).map((e) => `${e.tagName}.${e.className} ${e.getBoundingClientRect().right} ${(e.textContent ?? '').slice(0, 40)}`));
      assert.ok(wide <= 320, `the settings page is ${wide} px wide: ${culprits.join(' | ')}`);
    } finally {
      await page.setViewportSize({ width: 1280, height: 860 });
    }
    assert.deepEqual(c.problems, []);
  });

  it('the organization itself sees what only its reseller changes, and manages its members', async () => {
    const ctx = await c.browser.newContext();
    try {
      const page = await ctx.newPage();
      await page.goto(`${c.base}/console/#/sign-in`);
      await page.getByLabel('API token').fill(org.token);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
      await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Settings' }).click();
      await page.getByRole('heading', { level: 1, name: 'Organization settings' }).waitFor();
      await page.getByText('Only your reseller can change these settings').waitFor();
      assert.equal(await page.getByLabel('Time zone').inputValue(), 'Europe/Paris');
      assert.equal(await page.getByLabel('Time zone').isDisabled(), true);
      await page.getByLabel('Member\'s email').fill('desk@acme.example');
      await page.getByRole('button', { name: 'Invite member' }).click();
      await page.getByRole('cell', { name: 'desk@acme.example', exact: true }).waitFor();
    } finally {
      await ctx.close();
    }
  });

  it('a partner sets a reseller\'s plan prices (a bad id refused by name) and its billing system, keys masked after', async () => {
    const { page } = c;
    await c.open('/', 'Overview');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API token').waitFor();
    await c.signIn(h.adminToken);
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Plans and billing' }).click();
    await page.getByRole('heading', { level: 1, name: 'Plans and billing' }).waitFor();
    await page.getByLabel('Whose').selectOption(String(reseller.id));
    await page.getByRole('heading', { name: 'Plan catalog of Northwind Reseller' }).waitFor();
    const plans = page.getByRole('table', { name: 'Plans' });
    await plans.locator('tbody tr').first().waitFor();
    const form = page.getByRole('form', { name: 'A plan of the catalog' });
    await form.getByLabel('Plan id').fill('Gold Plan');
    await form.getByLabel('Plan name').fill('Gold');
    await form.getByLabel('Monthly price').fill('49');
    await form.getByLabel('Yearly price').fill('490');
    await form.getByLabel('Call minutes included').fill('1000');
    await form.getByRole('button', { name: 'Add plan' }).click();
    await form.getByRole('alert').waitFor();
    assert.match(await form.getByRole('alert').innerText(), /productPlanId/);
    await form.getByLabel('Plan id').fill('pplan-gold');
    await form.getByRole('button', { name: 'Add plan' }).click();
    await plans.getByRole('cell', { name: /^Gold pplan-gold/ }).waitFor();
    const catalog = await h.call('GET', '/api/v2/product/productCatalog', { query: { targetAccountId: reseller.id } });
    const gold = catalog.body.plans.find((p: { productPlanId: string }) => p.productPlanId === 'pplan-gold');
    assert.deepEqual([gold.name, gold.monthlyPrice, gold.yearlyPrice, gold.included.callMinutes], ['Gold', 49, 490, 1000]);
    // Edit its price.
    await page.getByRole('button', { name: 'Edit plan Gold' }).click();
    await form.getByLabel('Monthly price').fill('59');
    await form.getByRole('button', { name: 'Save plan' }).click();
    await plans.getByRole('cell', { name: /^59 USD a month/ }).waitFor();
    const again = await h.call('GET', '/api/v2/product/productCatalog', { query: { targetAccountId: reseller.id } });
    assert.equal(again.body.plans.find((p: { productPlanId: string }) => p.productPlanId === 'pplan-gold').monthlyPrice, 59);
    await c.shot('plans-catalog');

    const keys = { apiKey: 'sk_test_console51abcdef', publishableKey: 'pk_test_console51abcdef', webhookSigningKey: 'whsec_console51signing' };
    stripe.keys.add(keys.apiKey);
    const billing = page.getByRole('form', { name: 'Billing system' });
    await billing.getByLabel('API key').fill('sk_test_refused000000');
    await billing.getByLabel('Publishable key').fill(keys.publishableKey);
    await billing.getByLabel('Webhook signing key').fill(keys.webhookSigningKey);
    await billing.getByRole('button', { name: 'Save billing system' }).click();
    await billing.getByRole('alert').waitFor();
    assert.match(await billing.getByRole('alert').innerText(), /apiKey/);
    await billing.getByLabel('API key').fill(keys.apiKey);
    await billing.getByRole('button', { name: 'Save billing system' }).click();
    await billing.getByText(/the processor accepted the key/).waitFor();
    const stored = await h.call('GET', '/api/v2/billing/billingSystemSettings', { query: { targetAccountId: reseller.id } });
    assert.equal(stored.body.billingSystem.billingSystemType, 'stripe');
    const text = await page.locator('main').innerText();
    for (const k of Object.values(keys)) assert.ok(!text.includes(k), `${k} is not shown`);
    assert.match(text, new RegExp(stored.body.billingSystem.webhookUrl.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')));
    await c.shot('plans-billing-system');
    assert.deepEqual(c.problems, []);
  });
});
