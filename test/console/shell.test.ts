// The console's shell in Chromium: signing in by a reseller's one-time link and by a token (which
// the page never keeps), signing out, the organization picker, keyboard use and 400 % zoom.
// @lane wall
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

describe('web console shell (Chromium)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let reseller: { id: number; token: string };
  let org: { id: number; agentId: number; token: string };
  before(async () => {
    h = await startHarness('sqlite');
    reseller = await h.reseller('Northwind Reseller');
    org = await h.organization(reseller.id, { orgName: 'Acme Dental' });
    c = await openConsole(h);
  });
  after(async () => {
    await c?.close();
    await h?.close();
  });

  it('signs in by a one-time link, drops the link\'s token from the address, and keeps no token in the page', async () => {
    const invited = await h.call('POST', '/api/v2/member', { token: org.token, body: { email: 'front@acme.example' } });
    assert.ok(invited.status < 300, JSON.stringify(invited.body));
    const one = await h.call('GET', '/api/v2/auth/account/oneTimeAuthToken', { token: reseller.token, query: { email: 'front@acme.example', customerId: org.id } });
    assert.equal(one.status, 200);
    const ott = one.body.authToken as string;
    await c.page.goto(`${c.base}/console/#/sign-in?ott=${encodeURIComponent(ott)}`);
    await c.page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    assert.ok(!c.page.url().includes(ott), c.page.url());
    assert.match(await c.page.locator('.who').innerText(), /Organization\s+Acme Dental/);
    const kept = await c.page.evaluate(() => ({ cookie: document.cookie, local: JSON.stringify({ ...localStorage }), session: JSON.stringify({ ...sessionStorage }) }));
    assert.ok(!kept.cookie.includes('callplane_console'), 'the session cookie is HttpOnly');
    for (const v of Object.values(kept)) assert.ok(!v.includes(ott) && !v.includes('cpl_'), JSON.stringify(kept));
    const cookies = await c.context.cookies();
    const session = cookies.find((k) => k.name === 'callplane_console');
    assert.ok(session?.httpOnly && session.sameSite === 'Strict', JSON.stringify(cookies));
    await c.shot('overview');
    // A reload keeps the sign-in (the cookie), with nothing stored by the page.
    await c.page.reload();
    await c.page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    // The link works once.
    await c.page.goto(`${c.base}/console/#/sign-in?ott=${encodeURIComponent(ott)}`);
    await c.page.getByRole('alert').waitFor();
    assert.match(await c.page.getByRole('alert').innerText(), /already been used/);
  });

  it('signs out: the page asks for a token again and the old session is refused', async () => {
    await c.open('/', 'Overview');
    const before = (await c.context.cookies()).find((k) => k.name === 'callplane_console')!.value;
    await c.page.getByRole('button', { name: 'Sign out' }).click();
    await c.page.getByLabel('API token').waitFor();
    const r = await h.app.inject({ method: 'GET', url: '/console/session', headers: { 'x-callplane-console': '1', cookie: `callplane_console=${before}` } });
    assert.equal(r.statusCode, 401);
  });

  it('says why a token is refused, next to the form', async () => {
    await c.page.goto(`${c.base}/console/#/sign-in`);
    await c.page.getByLabel('API token').fill('cpl_wrong');
    await c.page.keyboard.press('Enter');
    await c.page.getByRole('alert').waitFor();
    assert.match(await c.page.getByRole('alert').innerText(), /unknown or deleted token/);
    await c.shot('sign-in');
  });

  it('signed in as a reseller, acts on the organization chosen at the top', async () => {
    await c.signIn(reseller.token);
    await c.page.getByLabel('Organization').selectOption(String(org.id));
    await c.page.getByRole('heading', { name: 'Tasks' }).waitFor();
    assert.match(await c.page.locator('main').innerText(), new RegExp(`Acting on organization Acme Dental \\(#${org.id}\\)`));
  });

  it('can be used from the keyboard: the first Tab reaches "Skip to content", which moves focus to the page', async () => {
    await c.open('/', 'Overview');
    await c.page.keyboard.press('Tab');
    assert.equal(await c.page.evaluate(() => document.activeElement?.textContent), 'Skip to content');
    await c.page.keyboard.press('Enter');
    assert.equal(await c.page.evaluate(() => document.activeElement?.id), 'main');
  });

  it('is readable at 400 % zoom: one column and no sideways scrolling at 320 CSS pixels', async () => {
    await c.page.setViewportSize({ width: 320, height: 215 });
    await c.open('/', 'Overview');
    const { scroll, width } = await c.page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: window.innerWidth }));
    assert.ok(scroll <= width + 1, `page is ${scroll}px wide in a ${width}px window`);
    await c.shot('overview-400-percent');
    await c.page.setViewportSize({ width: 1280, height: 860 });
    assert.deepEqual(c.problems, []);
  });
});
