// The agent pages in Chromium, signed in as an organization: the staging prompt edited (a 400 from
// the API shown next to the form), published (a new version), two versions diffed side by side, a
// version restored, a knowledge base with an uploaded document searched, and a test chat with the
// STAGING configuration (the SIMULATED model engine answers; the unpublished greeting proves it is
// staging), and the voice picked from an engine's list (ElevenLabs' double on loopback) with its
// sample. Each step is checked through the API as well as on the page.
// @lane wall
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { ELEVENLABS_TEST_KEY, FAKE_ELEVENLABS_VOICES, startFakeElevenLabs } from '../helpers/fake-elevenlabs.ts';
import type { FakeTtsServer } from '../helpers/fake-tts.ts';

describe('web console: agents (Chromium)', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let org: { id: number; agentId: number; token: string };
  let el: FakeTtsServer;
  before(async () => {
    el = await startFakeElevenLabs();
    h = await startHarness('sqlite', { CALLPLANE_ELEVENLABS_API_KEY: ELEVENLABS_TEST_KEY, CALLPLANE_ELEVENLABS_URL: el.baseUrl });
    const reseller = await h.reseller('Northwind Reseller');
    org = await h.organization(reseller.id, { orgName: 'Acme Dental' });
    c = await openConsole(h);
    await c.signIn(org.token);
  });
  after(async () => {
    await c?.close();
    await h?.close();
    await el?.close();
  });

  const staging = async () => (await h.call('GET', '/api/v2/agentEventRules/staging', { token: org.token })).body.agent as Record<string, unknown>;
  const versions = async () => (await h.call('GET', `/api/v2/agent/camp${org.agentId}/versions`, { token: org.token })).body.versions as { title: string; versionId: number }[];
  const PROMPT = 'You are Ada, the front desk of Acme Dental. Book cleanings.';

  it('lists the organization\'s agents and opens one', async () => {
    await c.open('/agents', 'Agents');
    await c.shot('agents-list');
    await c.page.getByRole('link', { name: 'Acme Dental Agent' }).click();
    await c.page.getByRole('heading', { level: 1, name: /^Agent / }).waitFor();
  });

  it('edits the staging prompt, and shows the API\'s 400 next to the form for an invalid value', async () => {
    await c.open(`/agents/${org.agentId}?tab=settings`);
    const form = c.page.getByRole('form', { name: 'Staging settings' });
    await form.getByLabel('Language').fill('not a language!');
    await form.getByRole('button', { name: 'Save staging' }).click();
    const alert = form.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.innerText(), /agentLang/);
    assert.equal((await staging()).agentLang, 'en-US', 'nothing was stored');
    await c.shot('agents-settings-error');
    await form.getByLabel('Language').fill('en-US');
    await form.getByLabel('Prompt (instructions)').fill(PROMPT);
    await form.getByRole('button', { name: 'Save staging' }).click();
    await form.getByText('Staging saved.').waitFor();
    assert.equal((await staging()).agentInstructions, PROMPT);
    await c.page.getByText('Staging has unpublished changes').waitFor();
    await c.shot('agents-settings');
  });

  it('publishes staging: a new version holds the live configuration it replaced', async () => {
    const before = (await versions()).length;
    await c.page.getByRole('button', { name: 'Publish staging' }).click();
    await c.page.getByText(/Published\. The live configuration it replaced is kept as version \d+/).waitFor();
    await c.page.getByText('Staging is live').waitFor();
    const after = await versions();
    assert.equal(after.length, before + 1);
    const live = (await h.call('GET', '/api/v2/agentEventRules/default', { token: org.token })).body.agent;
    assert.equal(live.agentInstructions, PROMPT);
    await c.open(`/agents/${org.agentId}?tab=versions`);
    // Versions are named by number (the oldest is 1) and date, not by their millisecond ids.
    await c.page.getByRole('cell', { name: `Version ${after.length}`, exact: true }).waitFor();
    assert.equal(await c.page.getByRole('cell', { name: String(after[0]!.versionId), exact: true }).count(), 0);
    const option = await c.page.getByLabel('Left').locator(`option[value="${after[0]!.versionId}"]`).innerText();
    assert.match(option, new RegExp(`^Version ${after.length}, .*\\d{4}`));
  });

  it('diffs two versions side by side, renames one, and restores one to staging', async () => {
    // A second version: staging stored under a title, after another change.
    assert.equal((await h.call('POST', '/api/v2/agent', { token: org.token, body: { welcomeMessage: 'Hello from staging!' } })).status, 200);
    assert.equal((await h.call('POST', `/api/v2/agent/camp${org.agentId}/versions`, { token: org.token, body: { title: 'With greeting', source: 'staging' } })).status, 201);
    // Reloaded, so the page reads what the API calls above changed.
    await c.open(`/agents/${org.agentId}?tab=versions`);
    await c.page.reload();
    await c.page.getByRole('cell', { name: /^With greeting/ }).waitFor();
    const [withGreeting, auto] = await versions();
    await c.page.getByLabel('Left').selectOption(String(auto!.versionId));
    await c.page.getByLabel('Right').selectOption(String(withGreeting!.versionId));
    const diff = c.page.locator('.diff');
    await diff.locator('pre.ins', { hasText: 'Hello from staging!' }).waitFor();
    // The automatic version is the defaults (empty prompt); the named one has the prompt and greeting.
    assert.match(await diff.locator('pre.ins').allInnerTexts().then((t) => t.join('\n')), /agentInstructions": "You are Ada/);
    assert.match(await diff.locator('pre.del').allInnerTexts().then((t) => t.join('\n')), /agentInstructions": ""/);
    assert.match(await c.page.locator('.diff-view figcaption').innerText(), /changed line/);
    // Unchanged lines are folded, each fold saying how many; opened, its lines are shown.
    const folds = diff.getByRole('button', { name: /^Show \d+ unchanged lines$/ });
    assert.ok(await folds.count() > 0, 'some unchanged lines are folded');
    const rowsBefore = await diff.locator('.diff-row').count();
    const hidden = Number((await folds.first().innerText()).match(/\d+/)![0]);
    await folds.first().click();
    assert.equal(await diff.locator('.diff-row').count(), rowsBefore - 1 + hidden);
    await c.page.locator('.diff-view').scrollIntoViewIfNeeded();
    await c.shot('agents-versions-diff');

    await c.page.getByRole('button', { name: `Rename ${auto!.title}` }).click();
    await c.page.getByLabel(`Title of version ${auto!.versionId}`).fill('Factory defaults');
    await c.page.getByRole('button', { name: 'Save title' }).click();
    await c.page.getByRole('cell', { name: /^Factory defaults/ }).waitFor();
    assert.equal((await versions()).find((v) => v.versionId === auto!.versionId)!.title, 'Factory defaults');

    await c.page.getByRole('button', { name: 'Restore to staging version Factory defaults' }).click();
    await c.page.getByText('Restored to staging. Publish to make it live.').waitFor();
    const s = await staging();
    assert.equal(s.agentInstructions, '');
    assert.equal(s.welcomeMessage, '');
  });

  it('keeps knowledge bases: creates one, uploads a document, searches it and deletes the document', async () => {
    await c.open(`/agents/${org.agentId}?tab=knowledge`);
    await c.page.getByLabel('Knowledge base name').fill('Clinic FAQ');
    await c.page.getByRole('button', { name: 'Create knowledge base' }).click();
    await c.page.getByRole('heading', { name: 'Documents of Clinic FAQ' }).waitFor();
    await c.page.getByLabel('Document (.txt, .md, .html or .pdf)').setInputFiles({
      name: 'hours.txt', mimeType: 'text/plain', buffer: Buffer.from('The clinic opens at eight on weekdays. Parking is free behind the building.\n'),
    });
    await c.page.getByRole('button', { name: 'Upload document' }).click();
    await c.page.getByRole('cell', { name: 'hours.txt', exact: true }).waitFor();
    const kbs = (await h.call('GET', '/api/v2/kb/knowledgebase', { token: org.token })).body.knowledgeBases;
    assert.equal(kbs.length, 1);
    const docs = (await h.call('GET', `/api/v2/kb/knowledgebase/${kbs[0].id}/documents/list`, { token: org.token })).body.documents;
    assert.deepEqual(docs.map((d: { name: string }) => d.name), ['hours.txt']);
    await c.page.getByLabel('Search the documents').fill('parking');
    await c.page.getByRole('button', { name: 'Search', exact: true }).click();
    await c.page.getByRole('list', { name: 'Search results, best first' }).getByText(/Parking is free/).waitFor();
    await c.page.getByRole('button', { name: 'Use Clinic FAQ in staging' }).click();
    await c.page.getByRole('button', { name: 'Stop using Clinic FAQ in staging' }).waitFor();
    assert.deepEqual((await staging()).knowledgeBases, [kbs[0].id]);
    await c.shot('agents-knowledge');
    await c.page.getByRole('button', { name: 'Delete document hours.txt' }).click();
    await c.page.getByRole('button', { name: 'Yes, delete document hours.txt' }).click();
    await c.page.getByRole('cell', { name: 'hours.txt', exact: true }).waitFor({ state: 'detached' });
    assert.equal((await h.call('GET', `/api/v2/kb/knowledgebase/${kbs[0].id}/documents/list`, { token: org.token })).body.documents.length, 0);
  });

  it('says, before any message, that replies will be SIMULATED: no model is configured', async () => {
    await c.open(`/agents/${org.agentId}?tab=settings`);
    const truth = c.page.getByTestId('model-truth');
    await truth.waitFor();
    assert.match(await truth.innerText(), /No language model is configured: replies will be SIMULATED/);
  });

  it('gives the agent a web chat address (agentUrl), the API\'s refusal beside the form, read back and served', async () => {
    await c.open(`/agents/${org.agentId}?tab=settings`);
    const form = c.page.getByRole('form', { name: 'Web chat address' });
    await c.page.getByText('No address yet').waitFor();
    await form.getByLabel('Address name').fill('a!');
    await form.getByRole('button', { name: 'Save address' }).click();
    await form.getByRole('alert').waitFor();
    assert.match(await form.getByRole('alert').innerText(), /slug/);
    await form.getByLabel('Address name').fill('acme-front-desk');
    await form.getByRole('button', { name: 'Save address' }).click();
    const link = c.page.getByTestId('web-chat-address');
    await link.waitFor();
    assert.equal(await link.innerText(), `${c.base}/a/acme-front-desk`);
    const api = await h.call('GET', '/api/v2/agentUrl', { token: org.token, query: { targetUsername: `camp${org.agentId}` } });
    assert.equal(api.body.slug, 'acme-front-desk');
    assert.equal((await fetch(`${c.base}/a/acme-front-desk`)).status, 200, 'the chat page is served there');
    await c.shot('agents-web-chat');
  });

  it('creates an agent from the Agents page and opens it', async () => {
    await c.open('/agents', 'Agents');
    await c.page.getByLabel('New agent\'s name').fill('Billing line');
    await c.page.getByRole('button', { name: 'Create agent' }).click();
    await c.page.getByRole('heading', { level: 1, name: 'Agent Billing line' }).waitFor();
    const listed = await h.call('GET', '/api/v2/listAccounts', { token: org.token, query: { targetOrganizationId: org.id } });
    const made = listed.body.accounts.find((a: { name: string }) => a.name === 'Billing line');
    assert.ok(made, JSON.stringify(listed.body));
    assert.match(c.page.url(), new RegExp(`#/o/${org.id}/agents/${made.id}$`));
  });

  it('chats with the staging configuration (the SIMULATED engine answers)', async () => {
    // A greeting only staging has: the chat's first answer shows it.
    assert.equal((await h.call('POST', '/api/v2/agent', { token: org.token, body: { welcomeMessage: 'Staged hello, this is Ada.' } })).status, 200);
    await c.open(`/agents/${org.agentId}?tab=chat`);
    await c.page.getByRole('textbox', { name: 'Message' }).fill('Can I book a cleaning?');
    await c.page.getByRole('button', { name: 'Send', exact: true }).click();
    const transcript = c.page.getByRole('list', { name: 'Test conversation' });
    await transcript.getByText('You said: "Can I book a cleaning?"', { exact: false }).waitFor();
    const said = await transcript.innerText();
    assert.match(said, /Staged hello, this is Ada\.[\s\S]*Can I book a cleaning\?[\s\S]*\[simulated reply/);
    assert.match(await c.page.locator('main').innerText(), /Answered by the simulated engine/);
    await c.shot('agents-chat');
  });

  it('picks the voice from the engine\'s list (ElevenLabs\' double), with its sample playable and not playing, and saves it', async () => {
    const samples: string[] = [];
    c.page.on('request', (r) => { if (r.url().startsWith('https://storage.example/')) samples.push(r.url()); });
    await c.open(`/agents/${org.agentId}?tab=settings`);
    const form = c.page.getByRole('form', { name: 'Staging settings' });
    await form.getByText('The configured voice speaks, in the catalog voice chosen above').waitFor();
    // Staging read again after the page opened from the cache would reset the form: let it settle.
    await c.page.waitForLoadState('networkidle');
    await form.getByLabel('Voice engine').selectOption('elevenlabs');
    const table = form.locator('.table-wrap[aria-label="Voices of elevenlabs"]');
    await table.locator('tbody tr').first().waitFor();
    // The provider's list, as the double answered it: name, language, gender.
    const rows = await table.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].slice(0, 3).map((td) => td.textContent)));
    assert.deepEqual(rows, [['Sarah', 'en-US', 'female'], ['Brian', 'any (the agent\'s)', 'male'], ['Clone', 'any (the agent\'s)', '—']]);
    assert.ok(el.requests.some((q) => q.url.startsWith('/v1/voices')), 'the list came from the provider');
    // A sample for the voices that have one; nothing plays, nothing is fetched until asked.
    const sample = table.getByLabel('Sample of Sarah');
    assert.equal(await sample.getAttribute('src'), FAKE_ELEVENLABS_VOICES[0]!.preview_url);
    assert.deepEqual(await sample.evaluate((a: HTMLAudioElement) => [a.paused, a.autoplay, a.controls, a.preload]), [true, false, true, 'none']);
    assert.equal(await table.getByRole('cell', { name: 'none', exact: true }).count(), 1, 'the clone has no sample');
    await form.getByRole('button', { name: 'Use voice Brian' }).click();
    assert.equal(await form.getByLabel('Voice', { exact: true }).inputValue(), 'nPczCjzI2devNBz1zQrb');
    await table.getByText('chosen').waitFor();
    const truth = form.getByTestId('speech-truth');
    await truth.getByText('elevenlabs speaks, with this service\'s key').waitFor();
    await form.getByLabel('Speech recognition engine').selectOption('deepgramflux');
    // No Deepgram key anywhere: what hears instead is said, marked Replaced (words, not colour).
    await truth.getByText(/Neither the organization nor this service has a Deepgram key: the configured recogniser/).waitFor();
    assert.match(await truth.innerText(), /Replaced\s+Hearing/);
    await c.shot('agents-voice-picker');
    await form.getByRole('button', { name: 'Save staging' }).click();
    await form.getByText('Staging saved.').waitFor();
    const s = await staging();
    assert.deepEqual([s.agentTtsEngine, s.agentVoice, s.agentSttEngine], ['elevenlabs', 'nPczCjzI2devNBz1zQrb', 'deepgramflux']);
    assert.deepEqual(samples, [], 'no sample was fetched before a play');
    // An engine this process has no key for: said plainly; back to the configured voice saves null.
    await form.getByLabel('Voice engine').selectOption('cartesia');
    await form.getByText(/This process cannot speak with cartesia/).waitFor();
    await truth.getByText('Neither the organization nor this service has a cartesia key: the configured voice speaks instead.').waitFor();
    await form.getByLabel('Voice engine').selectOption('');
    // The configured voice: the voice is one of the catalog's, chosen from a list (no free text).
    await form.getByLabel('Voice', { exact: true }).selectOption('en-US Male');
    await form.getByRole('button', { name: 'Save staging' }).click();
    await c.page.waitForFunction(() => !document.querySelector('form[aria-label="Staging settings"] button[type="submit"]')?.hasAttribute('disabled'));
    await form.getByText('Staging saved.').waitFor();
    const back = await staging();
    assert.deepEqual([back.agentTtsEngine, back.agentVoice], [null, 'en-US Male']);
    // The static list, for the narrow view below.
    await form.getByLabel('Voice engine').selectOption('espeak');
    await form.locator('.table-wrap[aria-label="Voices of espeak"]').getByRole('cell', { name: /^espeak-ng f3/ }).waitFor();
  });

  it('folds to one column at 320 CSS px (400 % zoom) with no sideways scrolling of the page', async () => {
    await c.page.setViewportSize({ width: 320, height: 800 });
    try {
      for (const tab of ['settings', 'versions', 'knowledge', 'chat']) {
        await c.open(`/agents/${org.agentId}?tab=${tab}`);
        await c.page.getByRole('heading', { level: 1, name: /^Agent / }).waitFor();
        await c.page.waitForTimeout(200);
        const wide = await c.page.evaluate(() => document.documentElement.scrollWidth);
        assert.ok(wide <= 320, `${tab}: the page is ${wide} px wide`);
      }
      await c.shot('agents-narrow');
    } finally {
      await c.page.setViewportSize({ width: 1280, height: 860 });
    }
    assert.deepEqual(c.problems, [], c.problems.join('\n'));
  });
});
