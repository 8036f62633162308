// The console's SIP page in Chromium, against a real registrar: Kamailio on loopback with digest
// auth, registered with by the harness's SIP worker. A wrong password's refusal is shown in the
// API's words; the right one becomes "Registered" with the REGISTER's answer; the whitelist takes
// and loses an entry; the captured REGISTER exchange is drawn as a ladder (an arrow per message)
// and offered as a pcap; deleting un-REGISTERs.
// @lane wall
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { startKamailio, type Kamailio } from '../helpers/sip-peers.ts';

describe('web console SIP page (Chromium, Kamailio)', { skip: toolsSkip('chromium', 'kamailio') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let kam: Kamailio;
  let org: { id: number; agentId: number; token: string };
  const user = 'console1';
  before(async () => {
    kam = await startKamailio({ host: '127.0.0.24', maxExpires: 60, minExpires: 1 });
    h = await startHarness('sqlite', { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_SIP_REGISTER_EXPIRES: '60' }, { sip: { pollMs: 100 } });
    const reseller = await h.reseller('Northwind Reseller');
    org = await h.organization(reseller.id, { orgName: 'Acme Dental' });
    c = await openConsole(h);
    await c.signIn(org.token);
  });
  after(async () => {
    await c?.close();
    await h?.close();
    await kam?.stop();
  });

  it('shows a refused registration\'s message, then registers: status, the REGISTER\'s answer, no password shown back', async () => {
    const { page } = c;
    await c.open('/sip', 'SIP');
    await page.getByText('No registration').waitFor();
    const form = page.getByRole('form', { name: 'Create a registration' });
    await form.getByLabel('Address of record (AOR)').fill(`sip:${user}@${kam.domain}`);
    await form.getByLabel('Authentication username').fill(kam.user);
    await form.getByLabel('Outbound proxy').fill(`${kam.host}:${kam.port}`);
    const password = form.getByLabel('Password');
    assert.equal(await password.getAttribute('type'), 'password');
    await password.fill('not-the-password');
    await form.getByRole('button', { name: 'Register' }).click();
    const refused = form.getByRole('alert');
    await refused.waitFor({ timeout: 20_000 });
    assert.match(await refused.innerText(), /401 Unauthorized.*credentials refused/);
    await c.shot('sip-registration-refused');
    assert.equal(kam.locations(`${user}@${kam.domain}`).length, 0);

    await password.fill(kam.password);
    await form.getByRole('button', { name: 'Register' }).click();
    const status = page.getByRole('definition').filter({ hasText: /^Registered$/ });
    await status.waitFor({ timeout: 20_000 });
    const facts = await page.locator('dl[aria-label="Registration status"]').innerText();
    assert.match(facts, /Last REGISTER answer\s+200 OK/);
    assert.match(facts, new RegExp(`sip:${user}@${kam.domain}`));
    assert.doesNotMatch(facts, /Expires\s+—/, 'a registered binding shows when it expires');
    assert.equal(kam.locations(`${user}@${kam.domain}`).length, 1, 'the binding is in Kamailio\'s location table');
    assert.ok(!(await page.content()).includes(kam.password), 'the password is never shown back');

    // Changing it offers the stored values, never the password.
    await page.getByRole('button', { name: 'Change registration' }).click();
    const change = page.getByRole('form', { name: 'Change the registration' });
    assert.equal(await change.getByLabel('Address of record (AOR)').inputValue(), `sip:${user}@${kam.domain}`);
    assert.equal(await change.getByLabel('Password').inputValue(), '');
    await change.getByRole('button', { name: 'Cancel' }).click();
    await c.shot('sip-registration');
  });

  it('says where to send calls: our address, port, transports and the Request-URI, with the organization\'s number', async () => {
    const { page } = c;
    const bought = await h.call('POST', '/api/v2/phoneNumber/assign', { token: org.token, query: { targetAccountId: org.agentId }, body: { number: '+12125550142', country: 'US' } });
    assert.equal(bought.status, 200, JSON.stringify(bought.body));
    try {
      await c.open('/sip', 'SIP');
      await page.reload(); // the page was open already, with the numbers read before this one was bought
      const api = (await h.call('GET', '/api/v2/sip/ingress', { token: org.token })).body.ingress;
      const box = page.locator('.sip-ingress');
      const at = api.port === null ? api.host : `${api.host}:${api.port}`;
      await box.getByText(`sip:+12125550142@${at}`).waitFor();
      const text = await page.locator('.sip-ingress').innerText();
      assert.ok(text.includes(api.host), text);
      if (api.port !== null) assert.ok(text.includes(String(api.port)), text);
      assert.match(text, /UDP or TCP/);
      assert.ok(text.includes(`sip:<number>@${at}`), text);
      await c.shot('sip-ingress');
    } finally {
      await h.call('POST', '/api/v2/phoneNumber/return', { token: org.token, body: { number: '+12125550142' } });
    }
  });

  it('adds a whitelist entry without a label', async () => {
    const { page } = c;
    await c.open('/sip', 'SIP');
    const form = page.getByRole('form', { name: 'Add an address' });
    await form.getByLabel('Address or range').fill('198.51.100.9');
    await form.getByRole('button', { name: 'Add address' }).click();
    await page.getByRole('button', { name: 'Remove 198.51.100.9' }).waitFor();
    const listed = await h.call('GET', '/api/v2/sip/ipWhitelist', { token: org.token });
    assert.deepEqual(listed.body.whitelist.map((w: { ip: string; label: string }) => [w.ip, w.label]), [['198.51.100.9', '']]);
    await page.getByRole('button', { name: 'Remove 198.51.100.9' }).click();
    await page.getByText('No addresses: every inbound INVITE is refused.').waitFor();
  });

  it('adds and removes a whitelist entry', async () => {
    const { page } = c;
    await c.open('/sip', 'SIP');
    const form = page.getByRole('form', { name: 'Add an address' });
    await form.getByLabel('Address or range').fill('198.51.100.7');
    await form.getByLabel('Label (optional)').fill('Office PBX');
    await form.getByRole('button', { name: 'Add address' }).click();
    const table = page.getByRole('table', { name: 'Whitelisted addresses' });
    await table.getByRole('cell', { name: 'Office PBX' }).waitFor();
    const listed = await h.call('GET', '/api/v2/sip/ipWhitelist', { token: org.token });
    assert.deepEqual(listed.body.whitelist.map((w: { ip: string; label: string }) => [w.ip, w.label]), [['198.51.100.7', 'Office PBX']]);
    // A bad entry: the API's message, next to the form.
    await form.getByLabel('Address or range').fill('0.0.0.0/0');
    await form.getByLabel('Label (optional)').fill('Everyone');
    await form.getByRole('button', { name: 'Add address' }).click();
    await page.getByRole('alert').filter({ hasText: /ip/ }).waitFor();
    await c.shot('sip-whitelist');
    await page.getByRole('button', { name: 'Remove 198.51.100.7' }).click();
    await page.getByText('No addresses: every inbound INVITE is refused.').waitFor();
    assert.deepEqual((await h.call('GET', '/api/v2/sip/ipWhitelist', { token: org.token })).body.whitelist, []);
  });

  it('adds and removes an outbound route', async () => {
    const { page } = c;
    await c.open('/sip', 'SIP');
    const form = page.getByRole('form', { name: 'Add a route' });
    await form.getByLabel('Route').fill('sip.example.com:5080;transport=tcp');
    await form.getByRole('button', { name: 'Add route' }).click();
    await page.getByRole('table', { name: 'Outbound routes' }).getByRole('cell', { name: 'sip.example.com:5080;transport=tcp', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Remove sip.example.com:5080;transport=tcp' }).click();
    await page.getByText('No routes: calls do not go out over SIP.').waitFor();
  });

  it('draws the captured REGISTER exchange as a ladder, lists it in words, and offers it as a pcap', async () => {
    const { page } = c;
    // Captures are written in batches: the page is opened again until the accepting 200 is among them.
    const ladder = page.getByTestId('sip-ladder');
    let labels: Array<string | null>;
    const until = Date.now() + 15_000;
    do {
      await c.open('/sip', 'SIP');
      await ladder.waitFor({ timeout: 15_000 });
      labels = await ladder.locator('g.ladder-step').evaluateAll((gs) => gs.map((g) => g.getAttribute('data-label')));
    } while (!labels.includes('200 OK') && Date.now() < until && await new Promise((r) => setTimeout(r, 500, true)));
    // The newest Call-ID is the registration that holds: challenged, answered, accepted. A REGISTER
    // retransmitted before its 401 came (a loaded machine) draws again with its own 401.
    const accepted = labels.indexOf('200 OK');
    assert.ok(accepted >= 3, labels.join(', '));
    assert.deepEqual(labels.slice(0, 2), ['REGISTER', '401 Unauthorized'], labels.join(', '));
    assert.equal(labels[accepted - 1], 'REGISTER', labels.join(', '));
    assert.equal(await ladder.locator('g.ladder-step line.ladder-arrow').count(), labels.length, 'an arrow per message');
    // Two parties: our endpoint and Kamailio, each with its lane.
    const lanes = await ladder.locator('g.ladder-party text.ladder-addr').allTextContents();
    assert.equal(lanes.length, 2, lanes.join(', '));
    assert.equal(lanes[1], `${kam.host}:${kam.port}`);
    // Requests go from our lane to Kamailio's, answers come back.
    const arrows = await ladder.locator('g.ladder-step line.ladder-arrow').evaluateAll((ls) => ls.map((l) => Number(l.getAttribute('x2')) - Number(l.getAttribute('x1'))));
    labels.forEach((label, i) => assert.ok(label === 'REGISTER' ? arrows[i]! > 0 : arrows[i]! < 0, `${label}: ${arrows.join(', ')}`));
    const list = page.getByRole('list', { name: /the messages in order/ });
    const items = await list.getByRole('listitem').allInnerTexts();
    assert.match(items[0], /REGISTER\s+callplane 127\.0\.0\.1:\d+ → 127\.0\.0\.24:\d+ \(UDP\)/);
    assert.match(items[1], /401 Unauthorized/);
    assert.match(items[accepted], /200 OK/);

    const link = page.getByRole('link', { name: /Download these messages as pcap/ });
    assert.match((await link.getAttribute('download'))!, /^sip-.+\.pcap$/);
    // Clicked, the browser saves the file (what the service answered for ?format=pcap, with the console's header).
    const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
    const saved = fs.readFileSync((await download.path())!);
    const magic = saved.subarray(0, 4).toString('hex');
    assert.ok(saved.length > 24 + 4 * 16, `pcap of ${saved.length} bytes`);
    assert.ok(['d4c3b2a1', 'a1b2c3d4', '4d3cb2a1', 'a1b23c4d'].includes(magic), `pcap magic ${magic}`);
    await c.shot('sip-captures');

    // Readable at 320 CSS pixels: the ladder scrolls in its own box, the page does not.
    await page.setViewportSize({ width: 320, height: 640 });
    await c.shot('sip-400-percent');
    const { scroll, width, wide } = await page.evaluate(() => ({
      scroll: document.documentElement.scrollWidth, width: window.innerWidth,
      wide: [...document.querySelectorAll('main *')].filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest('.ladder-wrap, .table-wrap'))
        .slice(0, 5).map((e) => `${e.tagName}.${e.className}`),
    }));
    assert.deepEqual(wide, []);
    assert.ok(scroll <= width + 1, `page is ${scroll}px wide in a ${width}px window`);
    await c.shot('sip-400-percent');
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  it('deletes the registration, which un-REGISTERs it', async () => {
    const { page } = c;
    await c.open('/sip', 'SIP');
    await page.getByRole('button', { name: 'Delete registration' }).click();
    await page.getByRole('button', { name: 'Yes, delete it' }).click();
    await page.getByText(/Registration deleted \(the registrar confirmed/).waitFor({ timeout: 20_000 });
    await page.getByText('No registration').waitFor();
    assert.equal(kam.locations(`${user}@${kam.domain}`).length, 0);
    // The refused registration's 502 is the one failed request the page made on purpose.
    assert.deepEqual(c.problems.filter((p) => !/status of 502/.test(p)), []);
  });
});
