// The agent page's Tests tab in Chromium, signed in as an organization, on the SIMULATED model engine
// (its verdicts are deterministic: the agent's turn count and what it never says): a suite document
// the API refuses shows the refusal, naming the path inside the document, beside the editor, and
// nothing is stored; a valid one is saved (a suite, checked through the API); a file is imported as
// another suite; a suite is exported as a YAML download; a run on live and one on staging are
// started from the page and watched to their end, with each scenario's verdict, the checks' reasons
// and the conversation's transcript shown; and the staging run's regression view compares it with
// the live one.
// @lane wall
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

const GOOD = `name: Front desk
scenarios:
  - name: stays short
    persona:
      instructions: You are Sam and want a cleaning.
      opening: Hello, I would like a cleaning.
    maxTurns: 2
    checks:
      - maxTurns: 2
  - name: never says the word zebra
    persona:
      instructions: You are Kim.
      opening: Hi there.
    maxTurns: 1
    checks:
      - neverSaid: "."
`;

describe('web console: agent tests (Chromium)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let org: { id: number; agentId: number; token: string };
  before(async () => {
    h = await startHarness('sqlite', {}, { agentTests: true, agentTestRuntime: { pollMs: 50 } });
    const reseller = await h.reseller('Northwind Reseller');
    org = await h.organization(reseller.id, { orgName: 'Acme Dental' });
    c = await openConsole(h);
    await c.signIn(org.token);
  });
  after(async () => {
    await c?.close();
    await h?.close();
  });

  const suites = async () => (await h.call('GET', `/api/v2/agent/camp${org.agentId}/tests/suites`, { token: org.token })).body.suites as Array<{ id: string; name: string; version: number }>;

  it('shows the API\'s refusal of a suite document beside the editor, then saves a valid one', async () => {
    await c.open(`/agents/${org.agentId}?tab=tests`);
    await c.page.getByRole('button', { name: 'New suite' }).click();
    const form = c.page.getByRole('form', { name: 'Suite document' });
    const editor = form.getByLabel('Suite document (YAML)');
    await editor.fill(GOOD.replace('maxTurns: 2\n    checks', 'maxTurns: 99\n    checks'));
    await form.getByRole('button', { name: 'Save suite' }).click();
    const alert = form.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.innerText(), /scenarios\[0\]\.maxTurns/);
    assert.deepEqual(await suites(), [], 'nothing was stored');
    await c.shot('agent-tests-refused');
    await editor.fill(GOOD);
    await form.getByRole('button', { name: 'Save suite' }).click();
    await form.getByText('Created suite Front desk, version 1.').waitFor();
    assert.deepEqual((await suites()).map((s) => [s.name, s.version]), [['Front desk', 1]]);
    await c.page.getByRole('table', { name: 'The agent\'s test suites' }).getByRole('cell', { name: 'Front desk', exact: true }).waitFor();
  });

  it('imports a suite from a file and exports one as YAML', async () => {
    await c.page.getByLabel('Import a YAML or JSON file').setInputFiles({
      name: 'imported.json', mimeType: 'application/json',
      buffer: Buffer.from(JSON.stringify({ name: 'Imported', scenarios: [{ name: 'one', persona: { instructions: 'x', opening: 'Hi.' }, maxTurns: 1, checks: [{ maxTurns: 1 }] }] })),
    });
    await c.page.getByText('Created suite Imported, version 1.').waitFor();
    assert.deepEqual((await suites()).map((s) => s.name).sort(), ['Front desk', 'Imported']);
    await c.page.getByRole('button', { name: 'Export Front desk' }).click();
    const link = c.page.getByRole('link', { name: 'Download Front desk.yaml' });
    await link.waitFor();
    const [download] = await Promise.all([c.page.waitForEvent('download'), link.click()]);
    const text = fs.readFileSync((await download.path())!, 'utf8');
    assert.match(text, /^name: Front desk/m);
    assert.match(text, /neverSaid: "?\."?/);
  });

  it('runs the suite on live and on staging, watches each to its end, and shows reasons, transcripts and the regression view', async () => {
    const runForm = c.page.getByRole('form', { name: 'Start a test run' });
    const frontDesk = (await suites()).find((s) => s.name === 'Front desk')!;
    await runForm.getByLabel('Suite').selectOption(frontDesk.id);
    await runForm.getByLabel('Configuration').selectOption('live');
    await runForm.getByRole('button', { name: 'Start run' }).click();
    const results = c.page.getByRole('region', { name: /^Run atr_/ });
    await results.getByText('failed', { exact: true }).first().waitFor({ timeout: 20_000 });
    await c.page.getByText(/2 of 2 conversations/).waitFor();
    // The scenario that passed, and the one whose check failed with its reason.
    const short = results.getByRole('article', { name: 'Scenario stays short' });
    await short.getByText('pass rate 100%').waitFor();
    const zebra = results.getByRole('article', { name: 'Scenario never says the word zebra' });
    const reasons = zebra.getByRole('list', { name: /^Reasons, iteration 1/ });
    assert.match(await reasons.innerText(), /neverSaid \/\.\/i: the agent said: "\[simulated reply/);
    assert.match(await zebra.getByLabel('Transcript').innerText(), /inbound: Hi there\./);

    // Now staging: its comparison is with the live run just made.
    await runForm.getByLabel('Configuration').selectOption('staging');
    await runForm.getByRole('button', { name: 'Start run' }).click();
    await c.page.getByRole('region', { name: 'Regressions' }).waitFor({ timeout: 20_000 });
    const regressions = c.page.getByRole('region', { name: 'Regressions' });
    await regressions.getByText(/Against run atr_\w+ on live/).waitFor();
    await regressions.getByText('No scenario regressed.').waitFor();
    const runs = (await h.call('GET', `/api/v2/agent/camp${org.agentId}/tests/runs`, { token: org.token })).body.runs as Array<{ target: string; state: string; mode: string }>;
    assert.deepEqual(runs.map((r) => [r.target, r.state, r.mode]), [['staging', 'finished', 'text'], ['live', 'finished', 'text']]);
    await c.shot('agent-tests-results');
    assert.deepEqual(c.problems, []);
  });

  it('folds to one column at 320 CSS px with no sideways scrolling of the page, results shown', async () => {
    await c.page.setViewportSize({ width: 320, height: 800 });
    try {
      await c.page.getByRole('region', { name: 'Regressions' }).waitFor();
      await c.page.waitForTimeout(200);
      const wide = await c.page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(wide <= 320, `the page is ${wide} px wide`);
      await c.shot('agent-tests-narrow');
    } finally {
      await c.page.setViewportSize({ width: 1280, height: 860 });
    }
    assert.deepEqual(c.problems, [], c.problems.join('\n'));
  });
});
