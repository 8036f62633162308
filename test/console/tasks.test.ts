// The console's Tasks pages in Chromium, against a harness whose worker really runs the tasks on
// the SIMULATED carrier: tasks created from the form reach "finished" in the list without a
// reload, an API 400 is shown by the form, a scheduled task is canceled and deleted, a CSV with a
// bad row is uploaded with a progress bar and a per-row report, the imported tasks finish and are
// counted in the daily chart (in the organization's time zone), and the limits are edited.
// @lane wall
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

const ZONE = 'America/Chicago';

describe('web console: tasks (Chromium)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let org: { id: number; agentId: number; token: string };
  let reseller: { id: number; token: string };
  let second: { id: number; token: string };
  before(async () => {
    h = await startHarness('sqlite', { CALLPLANE_SIMULATED_CALL_SECONDS: '0.3' }, { worker: true });
    reseller = await h.reseller('Northwind Reseller');
    org = await h.organization(reseller.id, { orgName: 'Acme Dental', timezone: ZONE });
    second = await h.agent(org.id, { accountName: 'Night shift' });
    c = await openConsole(h);
    await c.signIn(org.token);
  });
  after(async () => {
    await c?.close();
    await h?.close();
  });

  const tasksNow = async () => (await h.call('GET', '/api/v2/tasks', { token: org.token, query: { limit: 1000 } })).body.tasks as { id: string; type: string; state: string; target?: string }[];
  const row = (text: string) => c.page.getByRole('row').filter({ hasText: text });

  it('creates a ping and a call from the form and shows them reach "finished" without a reload', async () => {
    await c.open('/tasks', 'Tasks');
    await c.page.getByRole('link', { name: 'Tasks', exact: true }).waitFor();
    const form = c.page.getByRole('form', { name: 'New task' });
    await form.getByLabel('Type').selectOption('ping');
    await form.getByRole('button', { name: 'Create task' }).click();
    await c.page.getByRole('status').filter({ hasText: /Task tsk_\S+ created/ }).waitFor();
    await form.getByLabel('Type').selectOption('call');
    await form.getByLabel('Target').fill('+1 415 555 2671');
    await form.getByLabel('Greeting').fill('Hi, this is Acme Dental.');
    await form.getByRole('button', { name: 'Create task' }).click();
    await c.page.getByRole('status').filter({ hasText: /Task tsk_\S+ created/ }).waitFor();
    const made = await tasksNow();
    assert.deepEqual(made.map((t) => t.type).sort(), ['call', 'ping']);
    // The page was never reloaded: the list refreshes itself while a task is pending or running.
    const url = c.page.url();
    for (const t of made) await row(t.id).getByText('finished', { exact: true }).waitFor({ timeout: 20_000 });
    assert.equal(c.page.url(), url);
    assert.ok((await tasksNow()).every((t) => t.state === 'finished'));
    await c.shot('tasks-list');
  });

  it('a task on the simulated carrier says SIMULATED, its outcome in words (not JSON), and its attempt log', async () => {
    const call = (await tasksNow()).find((t) => t.type === 'call')!;
    await row(call.id).getByText('SIMULATED').waitFor();
    await row(call.id).getByRole('link').first().click();
    await c.page.getByRole('heading', { level: 1, name: `Task ${call.id}` }).waitFor();
    await c.page.locator('main').getByText('SIMULATED', { exact: true }).first().waitFor();
    await c.page.getByText(/SIMULATED: this task ran on the simulated carrier/).waitFor();
    await c.page.locator('dl[aria-label="Result"]').waitFor();
    assert.match(await c.page.locator('dl[aria-label="Result"]').innerText(), /Outcome\s+completed/);
    assert.equal(await c.page.locator('pre.json').count(), 0, 'no raw JSON');
    const api = (await h.call('GET', `/api/v2/tasks/${call.id}`, { token: org.token })).body.task;
    const log = c.page.getByRole('table', { name: 'Attempt log' });
    assert.equal(await log.locator('tbody tr').count(), api.attemptLog.length);
    assert.match(await log.locator('tbody tr').first().innerText(), new RegExp(`1\\s+.*${api.attemptLog[0].result}.*none \\(SIMULATED\\)`, 's'));
    await c.shot('tasks-detail-simulated');
    await c.open('/tasks', 'Tasks');
  });

  it('a task held by its calling window says why and when it will be considered again', async () => {
    const made = await h.call('POST', '/api/v2/tasks', { token: org.token, body: {
      type: 'call', target: '+14155552698', greeting: 'Hi',
      callingWindow: { days: [0, 1, 2, 3, 4, 5, 6], start: '00:00', end: '00:01', timezone: 'Pacific/Kiritimati' },
    } });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const id = made.body.task.id as string;
    try {
      let held = '';
      for (let i = 0; i < 100 && !held; i++) {
        held = (await h.call('GET', `/api/v2/tasks/${id}`, { token: org.token })).body.task.heldReason ?? '';
        if (!held) await new Promise((r) => setTimeout(r, 100));
      }
      assert.match(held, /calling window/);
      await c.open(`/tasks/${id}`, `Task ${id}`);
      const status = c.page.getByRole('status').filter({ hasText: 'Waiting:' });
      await status.waitFor();
      assert.ok((await status.innerText()).includes(held), await status.innerText());
      await c.shot('tasks-detail-held');
    } finally {
      // Gone again, so the counts of the tests below are theirs.
      await h.call('POST', `/api/v2/tasks/${id}`, { token: org.token, body: { state: 'canceled' } });
      await h.call('DELETE', `/api/v2/tasks/${id}`, { token: org.token });
      await c.open('/tasks', 'Tasks');
    }
  });

  it('shows the API\'s 400 next to the form', async () => {
    const form = c.page.getByRole('form', { name: 'New task' });
    await form.getByLabel('Type').selectOption('call');
    await form.getByLabel('Target').fill('+1234567890');
    await form.getByRole('button', { name: 'Create task' }).click();
    const alert = form.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.innerText(), /target/);
    assert.equal((await tasksNow()).length, 2);
  });

  it('filters the list by type, state and agent, kept in the address', async () => {
    const filters = c.page.getByRole('form', { name: 'Filter tasks' });
    await filters.getByLabel('Type').selectOption('ping');
    await filters.getByRole('button', { name: 'Apply filters' }).click();
    await c.page.getByText('Tasks 1–1 of 1').waitFor();
    assert.equal(await c.page.getByRole('row').filter({ hasText: 'tsk_' }).count(), 1);
    // The filters are in the address: a reload (or a link) shows the same list.
    // (with the organization in it: docs/console.md, "Acting on an organization").
    assert.match(c.page.url(), new RegExp(`#/o/${org.id}/tasks\\?type=ping$`));
    await c.page.reload();
    await c.page.getByText('Tasks 1–1 of 1').waitFor();
    assert.equal(await filters.getByLabel('Type').inputValue(), 'ping');
    await filters.getByLabel('State').selectOption('failed');
    await filters.getByRole('button', { name: 'Apply filters' }).click();
    await c.page.getByText('No tasks match.').waitFor();
    await filters.getByRole('button', { name: 'Clear' }).click();
    await c.page.getByText('Tasks 1–2 of 2').waitFor();
    // The agents are offered by name; both tasks ran as the first one.
    await filters.getByLabel('Agent').selectOption({ label: 'Night shift' });
    assert.equal(await filters.getByLabel('Agent').inputValue(), String(second.id), 'agents listed by name');
    await filters.getByRole('button', { name: 'Apply filters' }).click();
    await c.page.getByText('No tasks match.').waitFor();
    await filters.getByLabel('Agent').selectOption(String(org.agentId));
    await filters.getByRole('button', { name: 'Apply filters' }).click();
    await c.page.getByText('Tasks 1–2 of 2').waitFor();
    await filters.getByRole('button', { name: 'Clear' }).click();
  });

  it('shows a task\'s detail, cancels a scheduled task after asking, and deletes it', async () => {
    const form = c.page.getByRole('form', { name: 'New task' });
    await form.getByLabel('Type').selectOption('call');
    await form.getByLabel('Target').fill('+14155552699');
    const tomorrow = new Date(Date.now() + 86_400_000);
    const local = new Date(tomorrow.getTime() - tomorrow.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    await form.getByLabel('Scheduled for').fill(local);
    await form.getByRole('button', { name: 'Create task' }).click();
    const note = c.page.getByRole('status').filter({ hasText: /Task tsk_\S+ created \(pending\)/ });
    await note.waitFor();
    await note.getByRole('link').click();
    await c.page.getByRole('heading', { level: 1, name: /^Task tsk_/ }).waitFor();
    const id = (await c.page.getByRole('heading', { level: 1 }).innerText()).replace('Task ', '');
    await c.page.getByText('pending', { exact: true }).waitFor();
    await c.page.getByRole('button', { name: 'Cancel task' }).click();
    await c.page.getByText('Cancel this task?').waitFor();
    assert.equal((await h.call('GET', `/api/v2/tasks/${id}`, { token: org.token })).body.task.state, 'pending', 'nothing happens before the confirmation');
    await c.page.getByRole('button', { name: 'Yes, cancel it' }).click();
    await c.page.getByText('canceled', { exact: true }).first().waitFor();
    assert.equal((await h.call('GET', `/api/v2/tasks/${id}`, { token: org.token })).body.task.state, 'canceled');
    await c.shot('tasks-detail');
    await c.page.getByRole('button', { name: 'Delete task' }).click();
    await c.page.getByRole('button', { name: 'Yes, delete it' }).click();
    await c.page.getByRole('heading', { level: 1, name: 'Tasks' }).waitFor();
    assert.equal((await h.call('GET', `/api/v2/tasks/${id}`, { token: org.token })).status, 404);
  });

  it('imports a CSV with a progress bar reaching 100 % and a report naming the bad row; the imported tasks finish', async () => {
    await c.open('/tasks/import', 'Import tasks from CSV');
    const csv = [
      'type,target,greeting,externalTaskId',
      'call,+14155552672,Hello from the import,csv-1',
      'call,+1555,Too short,csv-2',
      'text,+14155552673,Your appointment is tomorrow,csv-3',
      ',+14155552674,A row without a type is a call,csv-4',
      '',
    ].join('\n');
    await c.page.getByLabel('CSV file', { exact: true }).setInputFiles({ name: 'tasks.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
    await c.page.getByRole('button', { name: 'Upload' }).click();
    await c.page.getByRole('heading', { name: 'Report' }).waitFor();
    const bar = c.page.getByLabel('Upload progress');
    assert.equal(await bar.evaluate((el) => (el as HTMLProgressElement).value), 100);
    assert.equal(await bar.evaluate((el) => (el as HTMLProgressElement).max), 100);
    const refused = c.page.getByRole('table', { name: 'Refused rows' });
    const bad = refused.getByRole('row').filter({ hasText: 'not a valid phone number' });
    assert.equal(await bad.count(), 1);
    assert.equal((await bad.getByRole('cell').first().innerText()).trim(), '3');
    assert.match(await bad.innerText(), /target '\+1555'/);
    assert.match(await c.page.getByRole('status').filter({ hasText: 'tasks queued' }).innerText(), /3 tasks queued; 4 rows: 3 valid, 1 refused/);
    await c.shot('tasks-import');
    const imported = (await tasksNow()).filter((t) => ['+14155552672', '+14155552673', '+14155552674'].includes(t.target ?? ''));
    assert.equal(imported.length, 3);
    await c.open('/tasks', 'Tasks');
    for (const t of imported) await row(t.id).getByText('finished', { exact: true }).waitFor({ timeout: 20_000 });
  });

  it('uploads a larger file as a dry run: the bar counts the request\'s bytes as they are sent, and nothing is queued', async () => {
    await c.open('/tasks/import', 'Import tasks from CSV');
    const before = (await tasksNow()).length;
    const long = 'x'.repeat(9_000);
    const lines = ['target,context'];
    for (let i = 0; i < 300; i++) lines.push(`+1415555${String(3000 + i).padStart(4, '0')},${long}`);
    const big = Buffer.from(lines.join('\n'));
    await c.page.getByLabel('Dry run (check every row, queue nothing)').check();
    // Every value the bar takes, frame by frame, while the upload runs.
    // (A string: the test's compiler would wrap a named function in a helper the page does not have.)
    await c.page.evaluate(`(() => {
      const seen = window.seen = [];
      const look = () => {
        const bar = document.querySelector('progress');
        if (bar && seen[seen.length - 1] !== bar.value) seen.push(bar.value);
        requestAnimationFrame(look);
      };
      look();
    })()`);
    await c.page.getByLabel('CSV file', { exact: true }).setInputFiles({ name: 'big.csv', mimeType: 'text/csv', buffer: big });
    await c.page.getByRole('button', { name: 'Upload' }).click();
    await c.page.getByText('A dry run: nothing was queued.').waitFor({ timeout: 30_000 });
    const seen = await c.page.evaluate(() => (window as unknown as { seen: number[] }).seen);
    assert.equal(seen[seen.length - 1], 100, JSON.stringify(seen));
    assert.ok(seen.every((v, i) => i === 0 || v >= seen[i - 1]), `the bar only moves forward: ${JSON.stringify(seen)}`);
    const said = await c.page.getByRole('status').filter({ hasText: 'bytes' }).innerText();
    // The request's bytes: the file and the form around it.
    const m = /100 % \((\d+) of (\d+) bytes sent\)/.exec(said.replace(/[,.\u202f\u00a0 ](?=\d{3})/g, ''));
    assert.ok(m, said);
    assert.equal(m[1], m[2]);
    assert.ok(Number(m[2]) > big.length && Number(m[2]) < big.length + 1000, said);
    assert.match(await c.page.getByRole('status').filter({ hasText: 'rows' }).first().innerText(), /300 rows: 300 valid, 0 refused/);
    assert.equal((await tasksNow()).length, before);
  });

  it('charts the calls and texts started each day in the organization\'s time zone', async () => {
    await c.open('/tasks/daily', 'Daily counts and limits');
    const chart = c.page.locator('figure.chart');
    await chart.waitFor();
    assert.match(await chart.locator('figcaption').innerText(), new RegExp(`time zone ${ZONE}`));
    // Calls: the form's one and the import's two; texts: the import's one (pings are not counted).
    const today = new Intl.DateTimeFormat('en-CA', { timeZone: ZONE, year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());
    await chart.getByText(/figures/).click();
    const todayRow = chart.getByRole('row').filter({ has: c.page.getByRole('rowheader', { name: today.slice(5) }) });
    assert.deepEqual((await todayRow.getByRole('cell').allInnerTexts()).map((s) => s.trim()), ['3', '1']);
    assert.match(await c.page.getByRole('status').filter({ hasText: 'Today' }).innerText(), new RegExp(`Today \\(${today}, ${ZONE}\\): 3 calls, 1 texts`));
    await c.shot('tasks-daily');
  });

  it('edits the limits an organization may change, and shows the API\'s refusal', async () => {
    const form = c.page.getByRole('form', { name: 'Limits' });
    await form.getByLabel('Calls cooldown').fill('120');
    await form.getByLabel('Retries when busy').fill('2');
    await form.getByRole('button', { name: 'Save limits' }).click();
    await c.page.getByText('Limits saved.').waitFor();
    const limits = (await h.call('GET', '/api/v2/tasks/limits', { token: org.token })).body.limits;
    assert.equal(limits.cooldowns.calls, 120);
    assert.equal(limits.retries.busy, 2);
    await form.getByLabel('Start calls and texts only within business hours').check();
    await form.getByLabel('Time zone').fill('Mars/Olympus');
    await form.getByRole('button', { name: 'Save limits' }).click();
    const alert = form.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.innerText(), /timezone/);
    // Set by a reseller: shown, not editable by the organization.
    assert.equal(await form.getByLabel('Calls per day').count(), 0);
    await c.shot('tasks-limits');
  });

  it('signed in as the reseller, acts on the chosen organization and sets its daily caps and concurrency', async () => {
    await c.page.getByRole('button', { name: 'Sign out' }).click();
    await c.page.getByLabel('API token').waitFor();
    await c.signIn(reseller.token);
    await c.page.getByLabel('Organization').selectOption(String(org.id));
    await c.open('/tasks', 'Tasks');
    await c.page.getByText('Tasks 1–5 of 5').waitFor();
    await c.open('/tasks/daily', 'Daily counts and limits');
    await c.page.getByRole('status').filter({ hasText: `Today` }).filter({ hasText: '3 calls, 1 texts' }).waitFor();
    const form = c.page.getByRole('form', { name: 'Limits' });
    await form.getByLabel('Calls per day').fill('50');
    await form.getByLabel('Running at once').fill('3');
    await form.getByRole('button', { name: 'Save limits' }).click();
    await c.page.getByText('Limits saved.').waitFor();
    const limits = (await h.call('GET', '/api/v2/tasks/limits', { token: org.token })).body.limits;
    assert.equal(limits.daily.calls, 50);
    assert.equal(limits.concurrencyPerRun, 3);
    assert.equal(limits.cooldowns.calls, 120, 'what was not changed is not sent');
    await c.page.getByRole('status').filter({ hasText: 'Daily caps: 50 calls' }).waitFor();
    assert.deepEqual(c.problems, []);
  });
});
