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

describe('web console Numbers page (Chromium)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let reseller: { id: number; token: string };
  let org: { id: number; agentId: number; token: string };
  let frontDesk: { id: number; token: string };
  before(async () => {
    h = await startHarness('sqlite');
    reseller = await h.reseller('Northwind Reseller');
    org = await h.organization(reseller.id, { orgName: 'Acme Dental' });
    frontDesk = await h.agent(org.id, { accountName: 'Front desk' });
    c = await openConsole(h);
    await c.signIn(org.token);
  });
  after(async () => {
    await c?.close();
    await h?.close();
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
    assert.match(await row.innerText(), new RegExp(`Front desk \\(#${frontDesk.id}\\)`));
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
});
