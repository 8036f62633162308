// Opening a one-time sign-in link while signed in as someone else (issue 33): the page asks first
// ("You are signed in as X; sign in as Y instead?") and never swaps silently; the link is not spent
// until the person says so, and the sign-in it replaces ends.
// @lane wall
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { hashToken } from '../../src/lib/crypto.ts';
import { tokenRepo } from '../../src/modules/tokens/repository.ts';

describe('a sign-in link opened while signed in as someone else (Chromium)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let reseller: { id: number; token: string };
  let first: { id: number; agentId: number; token: string };
  let second: { id: number; agentId: number; token: string };
  before(async () => {
    h = await startHarness('sqlite');
    reseller = await h.reseller('Northwind Reseller');
    first = await h.organization(reseller.id, { orgName: 'Acme Dental' });
    second = await h.organization(reseller.id, { orgName: 'Bright Smiles' });
    c = await openConsole(h);
  });
  after(async () => {
    await c?.close();
    await h?.close();
  });

  const cookie = async () => (await c.context.cookies()).find((k) => k.name === 'callplane_console')?.value;
  const who = async (value: string) => h.app.inject({ method: 'GET', url: '/console/session', headers: { 'x-callplane-console': '1', cookie: `callplane_console=${value}` } });

  it('asks before signing in as the link\'s account, keeps the sign-in when told to stay, and swaps only when told to', async () => {
    await c.signIn(first.token);
    const before = (await cookie())!;
    const invited = await h.call('POST', '/api/v2/member', { token: second.token, body: { email: 'desk@bright.example' } });
    assert.ok(invited.status < 300, JSON.stringify(invited.body));
    const one = await h.call('GET', '/api/v2/auth/account/oneTimeAuthToken', { token: reseller.token, query: { email: 'desk@bright.example', customerId: second.id } });
    assert.equal(one.status, 200, JSON.stringify(one.body));
    const ott = one.body.authToken as string;
    const link = `${c.base}/console/#/sign-in?ott=${encodeURIComponent(ott)}`;

    await c.page.goto(link);
    const question = c.page.getByRole('alertdialog');
    await question.waitFor();
    assert.match(await question.innerText(),
      new RegExp(`You are signed in as Organization Acme Dental \\(#${first.id}\\); sign in as Organization Bright Smiles \\(#${second.id}\\) instead\\?`));
    assert.ok(!c.page.url().includes(ott), c.page.url());
    await c.shot('sign-in-link-asks');
    // Nothing happened yet: still the first organization, the link unspent.
    assert.equal((await cookie()), before);
    assert.equal((await who(before)).json().account.id, first.id);
    assert.equal((await tokenRepo.findByHash(h.database.db, hashToken(ott)))?.used_at, null);

    await c.page.getByRole('button', { name: 'Stay signed in as Acme Dental' }).click();
    await c.page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    assert.match(await c.page.locator('.who').innerText(), /Organization\s+Acme Dental/);
    assert.equal((await tokenRepo.findByHash(h.database.db, hashToken(ott)))?.used_at, null, 'staying does not spend the link');

    await c.page.goto(link);
    await c.page.getByRole('alertdialog').waitFor();
    await c.page.getByRole('button', { name: 'Sign in as Bright Smiles' }).click();
    await c.page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    assert.match(await c.page.locator('.who').innerText(), /Organization\s+Bright Smiles/);
    const after = (await cookie())!;
    assert.notEqual(after, before);
    assert.equal((await who(after)).json().account.id, second.id);
    assert.equal((await who(before)).statusCode, 401, 'the replaced sign-in ended');
    assert.deepEqual(c.problems, []);
  });

  it('a link of the account already signed in is not spent and changes nothing', async () => {
    const invited = await h.call('POST', '/api/v2/member', { token: second.token, body: { email: 'again@bright.example' } });
    assert.ok(invited.status < 300, JSON.stringify(invited.body));
    const one = await h.call('GET', '/api/v2/auth/account/oneTimeAuthToken', { token: reseller.token, query: { email: 'again@bright.example', customerId: second.id } });
    const before = (await cookie())!;
    await c.page.goto(`${c.base}/console/#/sign-in?ott=${encodeURIComponent(one.body.authToken as string)}`);
    await c.page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    assert.match(await c.page.locator('.who').innerText(), /Organization\s+Bright Smiles/);
    assert.equal(await cookie(), before);
    assert.equal((await c.page.getByRole('alertdialog').count()), 0);
    assert.equal((await tokenRepo.findByHash(h.database.db, hashToken(one.body.authToken as string)))?.used_at, null);
  });
  it('lists the account\'s console sessions on the Accounts page, and ends another one', async () => {
    // A second sign-in of the same organization, elsewhere.
    const elsewhere = await h.app.inject({ method: 'POST', url: '/console/session', payload: { token: second.token } });
    const value = /callplane_console=([^;]+)/.exec(String(elsewhere.headers['set-cookie']))![1];
    const listed = await h.call('GET', '/api/v2/tokens/sessions', { token: second.token });
    const other = listed.body.sessions.find((x: { current: boolean; sessionId: number }) => !x.current && x.sessionId === Math.max(...listed.body.sessions.map((y: { sessionId: number }) => y.sessionId)));
    await c.open(`/accounts?tokens=${second.id}`, 'Accounts');
    const table = c.page.getByRole('table', { name: `Console sessions of account ${second.id}` });
    await table.waitFor();
    assert.match(await table.innerText(), /This session/);
    await c.shot('accounts-console-sessions');
    await c.page.getByRole('button', { name: `End session ${other.sessionId}` }).click();
    await c.page.getByRole('button', { name: `Yes, end session ${other.sessionId}` }).click();
    await c.page.getByRole('button', { name: `End session ${other.sessionId}` }).waitFor({ state: 'detached' });
    assert.equal((await who(value)).statusCode, 401, 'the ended session is refused');
    assert.equal((await who((await cookie())!)).statusCode, 200, 'this one goes on');
    assert.deepEqual(c.problems, []);
  });
});
