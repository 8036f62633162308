// The agent page's "Test call" tab in Chromium (docs/console.md, "Test call"): the browser's
// microphone is Chromium's fake capture device playing a WAV espeak-ng wrote (silence, "what are
// your opening hours", silence, looped), so the call's audio is real speech going through
// getUserMedia, the page's resampling and the WebSocket into the agent's voice session (VAD,
// pocketsphinx). No model is configured: the page says the replies are SIMULATED before the
// first line, the SIMULATED engine's reply quotes what the agent heard, and the page plays the
// reply (its speech counted as it is scheduled for the speakers).
// @lane wall
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { wavHeader, pcm16ToBytes } from '../../src/media/pcm.ts';
import { EspeakEngine } from '../../src/speech/espeak.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

const PHRASES = ['what are your opening hours', 'goodbye', 'hello there'];

describe('web console: a test call from the browser (Chromium)', { skip: toolsSkip('chromium', 'espeak-ng', 'pocketsphinx') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let org: { id: number; agentId: number; token: string };
  let dir: string;

  before(async () => {
    // The microphone: 3 s of silence, the question, 3 s of silence (Chromium loops it).
    const said = await new EspeakEngine().synthesize('what are your opening hours', { language: 'en-US' });
    const gap = new Int16Array(said.sampleRate * 3);
    const pcm = new Int16Array(gap.length * 2 + said.pcm16.length);
    pcm.set(said.pcm16, gap.length);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-talk-'));
    const wav = path.join(dir, 'mic.wav');
    const data = pcm16ToBytes(pcm);
    fs.writeFileSync(wav, Buffer.concat([wavHeader(said.sampleRate, 1, data.length), data]));

    h = await startHarness('sqlite', {}, { voiceGrammar: { kind: 'phrases', phrases: PHRASES } });
    await h.vad.ready();
    const r = await h.reseller();
    org = await h.organization(r.id, { orgName: 'Talk Test' });
    const set = await h.call('POST', '/api/v2/agent', { token: org.token, body: { welcomeMessage: 'Hello there.', callerResponseTimeout: 60, speakingTimeout: 700 } });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    c = await openConsole(h, {
      args: ['--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream', `--use-file-for-fake-audio-capture=${wav}`, '--autoplay-policy=no-user-gesture-required'],
    });
    await c.context.grantPermissions(['microphone'], { origin: c.base });
    await c.signIn(org.token);
  });
  after(async () => {
    await c?.close();
    await h?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('says the replies are SIMULATED before the first line, the agent hears the microphone, and its reply is played', async () => {
    await c.open(`/agents/${org.agentId}?tab=talk`, /^Agent /);
    const page = c.page;
    await page.getByRole('button', { name: 'Talk to this agent' }).click();
    const notice = page.getByTestId('talk-simulated');
    await notice.waitFor();
    assert.match(await notice.innerText(), /SIMULATED/);
    const transcript = page.getByRole('list', { name: 'Test call transcript' });
    // The notice came before anything was said: the welcome is the first line, shown after it.
    await transcript.getByText('Hello there.').waitFor({ timeout: 15_000 });
    // What the microphone said reached the agent: its line, and the SIMULATED reply quoting it.
    await transcript.getByText('what are your opening hours', { exact: true }).waitFor({ timeout: 30_000 });
    await transcript.getByText(/You said: "what are your opening hours"/).waitFor({ timeout: 20_000 });
    // The reply is played: speech (not silence) scheduled for the speakers, well past the welcome's.
    const heard = page.getByTestId('talk-heard');
    const welcomeMs = await waitForHeard(heard, 500);
    await waitForHeard(heard, welcomeMs + 2000);
    await c.shot('agent-talk');
    await page.getByRole('button', { name: 'Hang up' }).click();
    await page.getByText(/The call ended/).waitFor();
    // Kept on the test channel, out of the inbox.
    const rows = await h.database.db.selectFrom('conversations').select(['channel', 'ended_at']).where('org_id', '=', org.id).execute();
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.channel, 'test');
    assert.deepEqual(c.problems, []);
  });
});

/** Waits until the page has played at least `ms` of the agent's speech; answers how much. */
async function waitForHeard(el: ReturnType<ConsoleBrowser['page']['getByTestId']>, ms: number): Promise<number> {
  const until = Date.now() + 30_000;
  for (;;) {
    const v = Number(await el.getAttribute('data-heard-ms'));
    if (v >= ms) return v;
    if (Date.now() > until) throw new Error(`the page played ${v} ms of the agent's speech, not ${ms}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
