// The console's Webhooks pages in Chromium, against a harness whose task and delivery workers run:
// a subscription to a real receiver on loopback that first answers 500, the failed delivery in the
// log (refreshed on its own), its replay delivered once the receiver answers 200; a generic relay
// configured, a request to its ingress forwarded and replayed; removal and deletion asked first.
// Loopback targets are opened with CALLPLANE_ALLOW_PRIVATE_TARGETS, as the delivery tests do.
// @lane wall
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

describe('web console: webhooks (Chromium)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let rx: Receiver;
  let failing = true;
  let org: { id: number; agentId: number; token: string };
  let reseller: { id: number; token: string };
  before(async () => {
    rx = await startReceiver(() => (failing ? { status: 500, body: 'database is down' } : { status: 200, body: 'thanks' }));
    h = await startHarness('sqlite', { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_SIMULATED_CALL_SECONDS: '0.1', CALLPLANE_PUBLIC_URL: 'https://relay.callplane.test' }, {
      worker: true, deliveries: true,
      // One attempt per delivery: a failed one ends "failed" at once, which is what replay is for.
      deliveryRuntime: { retryDelay: () => null, dispatchEveryMs: 50 },
    });
    reseller = await h.reseller('Northwind Reseller');
    org = await h.organization(reseller.id, { orgName: 'Acme Dental', vidaPremium: true });
    c = await openConsole(h);
    await c.signIn(org.token);
  });
  after(async () => {
    await c?.close();
    await h?.close();
    await rx?.close();
  });

  const deliveries = async () => (await h.call('GET', '/api/v2/webhooks/deliveries', { token: org.token })).body.deliveries as { id: string; eventId: string; eventType: string; state: string; lastStatusCode: number | null }[];

  it('adds a subscription, shows its secret once and masked afterwards', async () => {
    await c.open('/webhooks', 'Webhooks');
    const form = c.page.getByRole('form', { name: 'Add a subscription' });
    await form.getByLabel('URL').fill(`${rx.url}/events`);
    await form.getByLabel('Label').fill('CRM');
    // Events are a labelled multi-select, each with its meaning: task is ticked; conversation too.
    const events = form.getByRole('group', { name: 'Events to send' });
    assert.ok(await events.getByRole('checkbox', { name: /task: every state change of a task/ }).isChecked());
    await events.getByRole('checkbox', { name: /conversation: a conversation ended/ }).check();
    await form.getByRole('button', { name: 'Add subscription' }).click();
    const note = form.getByRole('status').filter({ hasText: 'shown this once' });
    await note.waitFor();
    assert.equal(await note.locator('code').count(), 2, 'one subscription, and secret, per event type');
    const secret = (await note.locator('code').first().innerText()).trim();
    const subs = (await h.call('GET', '/api/v2/webhooks', { token: org.token })).body.webhooks as { type: string; url: string }[];
    assert.deepEqual(subs.map((w) => w.type).sort(), ['conversation', 'task']);
    assert.equal((await h.call('DELETE', '/api/v2/webhooks', { token: org.token, body: { url: `${rx.url}/events`, type: 'conversation' } })).status, 200);
    assert.match(secret, /^whsec_/);
    const table = c.page.getByRole('table', { name: 'Subscriptions' });
    await table.getByRole('row').filter({ hasText: `${rx.url}/events` }).first().waitFor();
    // Compared as text: the secret's last characters may be `+` or `/`, which a pattern would read as its own.
    assert.ok((await table.innerText()).includes(`****${secret.slice(-4)}`), 'the secret masked to its last four characters');
    assert.ok(!(await table.innerText()).includes(secret));
    await c.page.reload();
    await table.getByRole('row').filter({ hasText: `${rx.url}/events` }).first().waitFor();
    assert.ok(!(await c.page.locator('main').innerText()).includes(secret), 'the full secret is never shown again');
  });

  it('shows the failed deliveries in the log without a reload, and delivers a replay once the receiver recovers', async () => {
    const url = c.page.url();
    const made = await h.call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'ping' } });
    assert.equal(made.status, 201);
    const log = c.page.getByRole('table', { name: 'Deliveries to subscriptions' });
    const finishedRow = log.getByRole('row').filter({ hasText: 'task.finished' });
    await finishedRow.getByText('failed', { exact: true }).waitFor({ timeout: 20_000 });
    assert.match(await finishedRow.innerText(), /500/);
    // Its payload, as sent.
    await finishedRow.getByText('Show payload').click();
    const payload = JSON.parse(await finishedRow.getByLabel(/^Payload of/).innerText()) as { type: string; data: { id?: string; taskId?: string; task?: { id: string } } };
    assert.equal(payload.type, 'task.finished');
    assert.ok(JSON.stringify(payload).includes(made.body.task.id), 'the payload names the task');
    assert.equal(c.page.url(), url);
    const failed = (await deliveries()).find((d) => d.eventType === 'task.finished')!;
    assert.equal(failed.state, 'failed');
    await c.shot('webhooks-failed');

    failing = false;
    const before = rx.requests.length;
    await finishedRow.getByRole('button', { name: `Replay delivery ${failed.id}` }).click();
    await c.page.getByRole('status').filter({ hasText: `Sent again as a new delivery of the same event (${failed.eventId})` }).waitFor();
    await log.getByRole('row').filter({ hasText: 'task.finished' }).getByText('delivered', { exact: true }).waitFor({ timeout: 20_000 });
    const got = await rx.waitFor(before + 1);
    assert.equal(got[before].headers['webhook-id'], failed.eventId);
    const after = (await deliveries()).filter((d) => d.eventId === failed.eventId).map((d) => d.state).sort();
    assert.deepEqual(after, ['failed', 'finished']);
    await c.page.getByLabel('Delivery state').selectOption('failed');
    await log.getByRole('row').filter({ hasText: 'task.pending' }).waitFor();
    assert.equal(await log.getByText('delivered', { exact: true }).count(), 0);
    await c.page.getByLabel('Delivery state').selectOption('');
    await c.shot('webhooks-subscriptions');
  });

  it('sends a test event to a subscription: signed, received once, listed in the log', async () => {
    failing = false;
    const before = rx.requests.length;
    await c.page.getByRole('button', { name: 'Send a test event to the task subscription' }).click();
    await c.page.getByText(/A test event is on its way to/).waitFor();
    const got = await rx.waitFor(before + 1);
    assert.equal(got.length, before + 1, 'one request');
    const body = JSON.parse(got[before]!.body.toString()) as { type: string; data: { subscriptionType: string } };
    assert.deepEqual([body.type, body.data.subscriptionType], ['webhook.test', 'task']);
    assert.ok(got[before]!.headers['webhook-signature'], 'signed like every event');
    const log = c.page.getByRole('table', { name: 'Deliveries to subscriptions' });
    await log.getByRole('row').filter({ hasText: 'webhook.test' }).getByText('delivered', { exact: true }).waitFor({ timeout: 20_000 });
    assert.ok((await deliveries()).some((d) => d.eventType === 'webhook.test' && d.state === 'finished'));
  });

  it('without the premium setting, the relays page says why instead of showing a form that cannot work', async () => {
    const down = await h.call('POST', '/api/v2/updateOrganization', { token: reseller.token, query: { targetOrganizationId: org.id }, body: { vidaPremium: false } });
    assert.equal(down.status, 200, JSON.stringify(down.body));
    try {
      await c.open('/webhooks/relays', 'Webhook relays');
      await c.page.getByText(/Relays are not available to this organization: they are a premium feature/).waitFor();
      assert.equal(await c.page.getByRole('form', { name: /relay/i }).count(), 0, 'no relay form');
      assert.equal(await c.page.getByRole('heading', { name: 'Configure a relay' }).count(), 0);
      await c.shot('webhooks-relays-not-premium');
    } finally {
      await h.call('POST', '/api/v2/updateOrganization', { token: reseller.token, query: { targetOrganizationId: org.id }, body: { vidaPremium: true } });
      await c.page.reload();
    }
  });

  it('configures a generic relay, forwards what its ingress receives, and replays a forward', async () => {
    await c.open('/webhooks/relays', 'Webhook relays');
    await c.page.getByText('No relays configured.').waitFor();
    const form = c.page.getByRole('form', { name: 'Configure a relay' });
    await form.getByLabel('Relay type').selectOption('generic');
    await form.getByLabel('Forward to URL').fill(`${rx.url}/relay`);
    await form.getByLabel('Custom headers', { exact: true }).fill('Authorization: Bearer very-secret-value');
    await form.getByRole('button', { name: 'Configure relay' }).click();
    const note = form.getByRole('status').filter({ hasText: 'configured successfully' });
    await note.waitFor();
    const table = c.page.getByRole('table', { name: 'Relays' });
    await table.getByRole('row').filter({ hasText: 'generic' }).waitFor();
    assert.ok(!(await table.innerText()).includes('very-secret-value'));
    await c.shot('webhooks-relays');

    await note.getByRole('link', { name: 'Open the generic relay' }).click();
    await c.page.getByRole('heading', { level: 1, name: 'Webhook relay: generic' }).waitFor();
    const main = c.page.locator('main');
    assert.ok(!(await main.innerText()).includes('very-secret-value'), 'header values are shown masked');
    assert.equal(await c.page.getByLabel('Custom headers', { exact: true }).inputValue(), '', 'secrets are never put back in the form');
    const ingress = (await c.page.locator('dd code').first().innerText()).trim();
    assert.match(ingress, /^https:\/\/relay\.callplane\.test\/hooks\/relay\//);
    const before = rx.requests.length;
    const res = await h.app.inject({ method: 'POST', url: new URL(ingress).pathname, payload: { hello: 'world' }, headers: { 'idempotency-key': 'evt-1' } });
    assert.equal(res.statusCode, 200, res.body);
    await rx.waitFor(before + 1);
    assert.equal(rx.requests[before].headers.authorization, 'Bearer very-secret-value');
    const log = c.page.getByRole('table', { name: 'Forwards of this relay' });
    await log.getByText('delivered', { exact: true }).waitFor({ timeout: 20_000 });
    await log.getByRole('button', { name: /^Replay delivery / }).click();
    await c.page.getByRole('status').filter({ hasText: 'Sent again as a new delivery' }).waitFor();
    await rx.waitFor(before + 2);
    assert.equal(rx.requests[before + 1].headers['webhook-id'], rx.requests[before].headers['webhook-id']);
    await log.getByText('delivered', { exact: true }).nth(1).waitFor({ timeout: 20_000 });
    await c.shot('webhooks-relay');
  });

  it('changes the relay\'s success codes, read and written as ranges, and says what the API refuses, next to the form', async () => {
    const form = c.page.getByRole('form', { name: 'Change the relay' });
    assert.equal(await form.getByLabel('Success status codes').inputValue(), '200-299');
    await form.getByLabel('Success status codes').fill('200-204, 304');
    await form.getByRole('button', { name: 'Save relay' }).click();
    await form.getByRole('status').filter({ hasText: 'configured successfully' }).waitFor();
    const stored = (await h.call('GET', '/api/v2/webhookRelay/generic', { token: org.token })).body.config;
    assert.deepEqual(stored.successStatusCodes, [200, 201, 202, 203, 204, 304]);
    assert.equal(stored.headers.length, 1, 'headers left empty in the form are kept');
    await c.page.getByText('200-204, 304', { exact: true }).waitFor();
    await form.getByLabel('Timeout (ms)').fill('60000');
    // The browser's own check would stop a number above max: send it past that, as a client could.
    await form.getByLabel('Timeout (ms)').evaluate((el) => el.removeAttribute('max'));
    await form.getByRole('button', { name: 'Save relay' }).click();
    const alert = form.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.innerText(), /timeout/);
  });

  it('deletes the relay and removes the subscription, each after asking', async () => {
    await c.page.getByRole('button', { name: 'Delete relay' }).click();
    assert.equal((await h.call('GET', '/api/v2/webhookRelay/generic', { token: org.token })).status, 200, 'nothing happens before the confirmation');
    await c.page.getByRole('button', { name: 'Yes, delete it' }).click();
    await c.page.getByRole('heading', { level: 1, name: 'Webhook relays' }).waitFor();
    await c.page.getByText('No relays configured.').waitFor();
    assert.equal((await h.call('GET', '/api/v2/webhookRelay/generic', { token: org.token })).status, 404);

    await c.open('/webhooks', 'Webhooks');
    await c.page.getByRole('button', { name: 'Remove task subscription' }).click();
    await c.page.getByRole('button', { name: 'Yes, remove it' }).click();
    await c.page.getByText('No subscriptions yet.').waitFor();
    assert.deepEqual((await h.call('GET', '/api/v2/webhooks', { token: org.token })).body.webhooks, []);
  });

  it('is readable at 320 CSS pixels: wide tables scroll inside their box, not the page', async () => {
    await c.page.setViewportSize({ width: 320, height: 640 });
    for (const [path, title] of [['/tasks', 'Tasks'], ['/tasks/import', 'Import tasks from CSV'], ['/tasks/daily', 'Daily counts and limits'], ['/webhooks/relays', 'Webhook relays'], ['/webhooks', 'Webhooks']] as const) {
      await c.open(path, title);
      await c.page.waitForTimeout(300);
      const { scroll, width } = await c.page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: window.innerWidth }));
      assert.ok(scroll <= width + 1, `${path} is ${scroll}px wide in a ${width}px window`);
    }
    await c.shot('webhooks-narrow');
    await c.page.setViewportSize({ width: 1280, height: 860 });
    assert.deepEqual(c.problems, []);
  });
});
