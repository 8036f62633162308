// The do-not-call list page in Chromium (docs/campaigns.md, "Do-not-call"): a reseller acting on
// its organization adds a number (a bad one refused with the API's message), sees it listed and
// read back through the API, imports a CSV (a refused line shown with its number), downloads the
// export, removes a number (asked twice); on its own list, a number applies to the organization
// below it (a task to it is refused); the organization itself sees its list and not the reseller's.
// @lane wall
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

describe('web console: do-not-call list (Chromium)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let reseller: { id: number; token: string };
  let org: { id: number; agentId: number; token: string };
  let dir: string;
  before(async () => {
    h = await startHarness('sqlite');
    reseller = await h.reseller('Northwind Reseller');
    org = await h.organization(reseller.id, { orgName: 'Acme Dental', accountName: 'Front desk' });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-dnc-page-'));
    c = await openConsole(h);
    await c.signIn(reseller.token);
  });
  after(async () => {
    await c?.close();
    await h?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const listed = async (token: string, query: Record<string, unknown> = {}) =>
    ((await h.call('GET', '/api/v2/do-not-call', { token, query })).body.numbers as { number: string; source: string }[]).map((e) => `${e.number}:${e.source}`).sort();

  it('adds (a bad number refused beside the form), lists, imports a CSV with its refused line, exports and removes', async () => {
    const { page } = c;
    await c.open(`/o/${org.id}/do-not-call`, 'Do-not-call list');
    const add = page.getByRole('form', { name: 'Add a number to the list' });
    await add.getByLabel('Number').fill('not a number');
    await add.getByRole('button', { name: 'Add to the list' }).click();
    await add.getByRole('alert').waitFor();
    assert.match(await add.getByRole('alert').innerText(), /number/i);
    await add.getByLabel('Number').fill('+1 (415) 555-2671');
    await add.getByLabel('Note (optional)').fill('asked by email');
    await add.getByRole('button', { name: 'Add to the list' }).click();
    await add.getByText('+14155552671 is on the list.').waitFor();
    await page.getByRole('cell', { name: '+14155552671', exact: true }).waitFor();
    assert.deepEqual(await listed(reseller.token, { targetAccountId: org.id }), ['+14155552671:api']);

    const csv = path.join(dir, 'list.csv');
    fs.writeFileSync(csv, 'number,note\n+14155550101,imported\nnonsense,bad\n+442071234567,uk\n');
    const imp = page.getByRole('form', { name: 'Import numbers from a CSV file' });
    await imp.locator('input[type=file]').setInputFiles(csv);
    await imp.getByRole('button', { name: 'Import' }).click();
    await imp.getByRole('status').waitFor();
    const report = await imp.getByRole('status').innerText();
    assert.match(report, /3 rows read: 2 added, 0 already on the list, 1 refused/);
    assert.match(report, /Line 3:/);
    assert.deepEqual(await listed(reseller.token, { targetAccountId: org.id }), ['+14155550101:csv', '+14155552671:api', '+442071234567:csv']);
    await page.getByRole('cell', { name: '+442071234567', exact: true }).waitFor();

    await page.getByRole('button', { name: 'Prepare the CSV' }).click();
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download do-not-call.csv' }).click()]);
    const exported = fs.readFileSync(await download.path(), 'utf8');
    for (const n of ['14155552671', '14155550101', '442071234567']) assert.match(exported, new RegExp(n));

    await page.getByRole('button', { name: 'Remove +14155550101' }).click();
    await page.getByRole('button', { name: 'Yes, remove it' }).click();
    await page.getByRole('cell', { name: '+14155550101', exact: true }).waitFor({ state: 'detached' });
    assert.deepEqual(await listed(reseller.token, { targetAccountId: org.id }), ['+14155552671:api', '+442071234567:csv']);
    await c.shot('do-not-call');
  });

  it('the reseller\'s own list applies to its organization; the organization sees its own list only', async () => {
    const { page } = c;
    await c.open(`/o/${org.id}/do-not-call`, 'Do-not-call list');
    await page.getByLabel('List', { exact: true }).selectOption('own');
    const add = page.getByRole('form', { name: 'Add a number to the list' });
    await add.getByLabel('Number').fill('+14155559999');
    await add.getByRole('button', { name: 'Add to the list' }).click();
    await add.getByText('+14155559999 is on the list.').waitFor();
    assert.deepEqual(await listed(reseller.token), ['+14155559999:api'], 'on the reseller\'s own list');
    assert.ok(!(await listed(reseller.token, { targetAccountId: org.id })).includes('+14155559999:api'), 'not on the organization\'s');
    const refused = await h.call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'call', target: '+14155559999' } });
    assert.equal(refused.status, 422, JSON.stringify(refused.body));

    const own = await openConsole(h);
    try {
      await own.signIn(org.token);
      await own.open(`/o/${org.id}/do-not-call`, 'Do-not-call list');
      await own.page.getByRole('cell', { name: '+14155552671', exact: true }).waitFor();
      assert.equal(await own.page.getByLabel('List', { exact: true }).count(), 0, 'an organization has only its own list');
      assert.equal(await own.page.getByRole('cell', { name: '+14155559999', exact: true }).count(), 0, 'the reseller\'s list is not shown to it');
    } finally {
      await own.close();
    }
  });
});
