// The console's Numbers page in Chromium, on the simulated numbering inventory (no provider
// configured): a search by area code says SIMULATED and lists numbers; one is bought for the agent
// chosen, appears held by that agent (in the page and in the API), and is returned after a
// confirmation. A reseller binds a number of its own (BYO) and sees where to point it.
// @lane wall
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { startFakeTwilio, type FakeTwilio } from '../helpers/fake-twilio.ts';

describe('web console Numbers page (Chromium)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let reseller: { id: number; token: string };
  let org: { id: number; agentId: number; token: string };
  let frontDesk: { id: number; token: string };
  let twilio: FakeTwilio;
  before(async () => {
    twilio = await startFakeTwilio();
    h = await startHarness('sqlite', { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' });
    reseller = await h.reseller('Northwind Reseller');
    org = await h.organization(reseller.id, { orgName: 'Acme Dental' });
    frontDesk = await h.agent(org.id, { accountName: 'Front desk' });
    c = await openConsole(h);
    await c.signIn(org.token);
  });
  after(async () => {
    await c?.close();
    await h?.close();
    await twilio?.close();
  });

  it('searches the simulated inventory, buys a number for the chosen agent, shows it held by that agent, and returns it', async () => {
    const { page } = c;
    await c.open('/numbers', 'Numbers');
    await page.getByText('No numbers yet').waitFor();
    await page.getByLabel('Buy for agent').selectOption(String(frontDesk.id));
    const search = page.getByRole('form', { name: 'Search numbers' });
    await search.getByLabel('Country').fill('US');
    await search.getByLabel('Prefix', { exact: true }).fill('212');
    await search.getByRole('button', { name: 'Search' }).click();
    const found = page.getByRole('table', { name: 'Numbers found' });
    await found.waitFor();
    assert.match(await page.getByRole('status').filter({ hasText: 'SIMULATED' }).first().innerText(), /numbering provider is SIMULATED/);
    const numbers = await found.locator('tbody tr td:first-child').allInnerTexts();
    assert.ok(numbers.length > 0 && numbers.every((n) => n.startsWith('+1212555')), numbers.join(', '));
    await c.shot('numbers-search');

    const number = numbers[0];
    await found.getByRole('button', { name: `Buy ${number}` }).click();
    await page.getByRole('status').filter({ hasText: `${number} is now held by Front desk` }).waitFor();
    const held = page.getByRole('table', { name: 'The organization\'s numbers' });
    const row = held.getByRole('row').filter({ hasText: number });
    await row.waitFor();
    assert.match(await row.innerText(), /Front desk/);
    assert.doesNotMatch(await row.innerText(), /\(#\d+\)/, 'agents named by name, not by id');
    assert.match(await row.innerText(), /SIMULATED/);
    const api = await h.call('GET', '/api/v2/phoneNumbers', { token: org.token });
    assert.deepEqual(api.body.phoneNumbers.map((n: { number: string; agentId: number }) => [n.number, n.agentId]), [[number, frontDesk.id]]);
    await c.shot('numbers-held');

    // Returning asks first; "Cancel" keeps it.
    await row.getByRole('button', { name: `Return ${number}` }).click();
    await row.getByRole('button', { name: 'Cancel' }).click();
    assert.equal((await h.call('GET', '/api/v2/phoneNumbers', { token: org.token })).body.phoneNumbers.length, 1);
    await row.getByRole('button', { name: `Return ${number}` }).click();
    await c.shot('numbers-return-confirm');
    await row.getByRole('button', { name: 'Yes, return it' }).click();
    await page.getByRole('status').filter({ hasText: `${number} returned and released at its provider` }).waitFor();
    await page.getByText('No numbers yet').waitFor();
    assert.deepEqual((await h.call('GET', '/api/v2/phoneNumbers', { token: org.token })).body.phoneNumbers, []);
  });

  it('a search that finds nothing in the simulated inventory names the areas it has', async () => {
    const { page } = c;
    await c.open('/numbers', 'Numbers');
    const search = page.getByRole('form', { name: 'Search numbers' });
    await search.getByLabel('Country').fill('US');
    await search.getByLabel('Prefix', { exact: true }).fill('999');
    await search.getByRole('button', { name: 'Search' }).click();
    const alert = await page.getByRole('alert').innerText();
    assert.match(alert, /simulated inventory/);
    assert.match(alert, /212 \(New York, NY\)/);
    assert.match(alert, /415 \(San Francisco, CA\)/);
    await c.shot('numbers-none-found');
  });

  it('says why a search cannot be done, in the API\'s words', async () => {
    const { page } = c;
    await c.open('/numbers', 'Numbers');
    const search = page.getByRole('form', { name: 'Search numbers' });
    await search.getByLabel('Country').fill('ZZ');
    await search.getByLabel('Prefix', { exact: true }).fill('212');
    await search.getByRole('button', { name: 'Search' }).click();
    assert.match(await page.getByRole('alert').innerText(), /country/);
  });

  it('as the reseller, binds a number the customer owns (BYO) to an agent and shows where to point it', async () => {
    const { page } = c;
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API token').waitFor();
    await c.signIn(reseller.token);
    await page.getByLabel('Organization').selectOption(String(org.id));
    await c.open('/numbers', 'Numbers');
    await page.getByLabel('Buy for agent').selectOption(String(org.agentId));
    const byo = page.getByRole('form', { name: 'Bring your own number' });
    await byo.getByLabel('Number you own').fill('+14155550123');
    await byo.getByRole('button', { name: 'Bind number' }).click();
    const note = page.getByRole('status').filter({ hasText: '+14155550123 is bound to' });
    await note.waitFor();
    assert.match(await note.innerText(), /\/api\/v2\/providers\/twilio\/voice/);
    const row = page.getByRole('table', { name: 'The organization\'s numbers' }).getByRole('row').filter({ hasText: '+14155550123' });
    await row.waitFor();
    assert.match(await row.innerText(), /Brought \(BYO\)/);
    await c.shot('numbers-byo');

    await page.setViewportSize({ width: 320, height: 640 });
    const { scroll, width } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: window.innerWidth }));
    assert.ok(scroll <= width + 1, `page is ${scroll}px wide in a ${width}px window`);
    await c.shot('numbers-400-percent');
    await page.setViewportSize({ width: 1280, height: 860 });
    assert.deepEqual(c.problems, []);
  });

  it('with a real (Twilio) provider, Buy asks first with the monthly price; Cancel buys nothing', async () => {
    const { page } = c;
    // A second organization of the reseller (signed in by the test before), with Twilio as its provider.
    const org2 = await h.organization(reseller.id, { orgName: 'Bravo Clinic' });
    const desk2 = await h.agent(org2.id, { accountName: 'Reception' });
    const res = await h.call('POST', '/api/v2/numberingProvider', {
      token: reseller.token, query: { targetOrganizationId: org2.id },
      body: { providerId: 'twilio', config: { accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const buys = () => twilio.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/IncomingPhoneNumbers.json')).length;
    try {
      await c.open(`/o/${org2.id}/numbers`, 'Numbers');
      await page.getByLabel('Buy for agent').selectOption(String(desk2.id));
      const search = page.getByRole('form', { name: 'Search numbers' });
      await search.getByLabel('Country').fill('US');
      await search.getByLabel('Prefix', { exact: true }).fill('216');
      await search.getByRole('button', { name: 'Search' }).click();
      const found = page.getByRole('table', { name: 'Numbers found' });
      const row = found.getByRole('row').filter({ hasText: '+12165550101' });
      await row.waitFor();
      assert.match(await row.innerText(), /1\.15 USD/);
      await row.getByRole('button', { name: 'Buy +12165550101' }).click();
      const ask = row.getByRole('group');
      assert.match(await ask.innerText(), /Buy \+12165550101 for Reception at the organization's provider\? It costs 1\.15 USD a month\./);
      await c.shot('numbers-buy-confirm');
      await row.getByRole('button', { name: 'Cancel' }).click();
      assert.equal(buys(), 0, 'nothing bought before the confirmation');
      await row.getByRole('button', { name: 'Buy +12165550101' }).click();
      await row.getByRole('button', { name: 'Yes, buy +12165550101 for 1.15 USD a month' }).click();
      await page.getByRole('status').filter({ hasText: '+12165550101 is now held by Reception' }).waitFor();
      assert.equal(buys(), 1);
      const held = (await h.call('GET', '/api/v2/phoneNumbers', { token: org2.token })).body.phoneNumbers;
      assert.deepEqual(held.map((n: { number: string; agentId: number; simulated: boolean }) => [n.number, n.agentId, n.simulated]), [['+12165550101', desk2.id, false]]);
      assert.deepEqual(c.problems, []);
    } finally {
      await h.call('POST', '/api/v2/phoneNumber/return', { token: org2.token, body: { number: '+12165550101' } });
    }
  });
});
