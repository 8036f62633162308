// The conversation pages in Chromium, driven by a real SIP call: sipp dials the agent and the test's
// own RTP end speaks to it (espeak-ng), the fake model answers, and with CALLPLANE_CALL_RECORDING=on
// the worker records it (the pattern of test/modules/call-recording.test.ts). The Live page must
// show the call's lines as they are said, before the call ends and without a reload, keep going
// after its stream is cut (reconnecting, then a new snapshot), and link to the conversation once it
// ends; the conversation page must show the transcript, each turn's latency, the analysis, and the
// voice substituted for the one the agent asks for (Cartesia, without its key), and play the
// recording; a room moves to junk and back.
// @lane wall
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { PortPool } from '../../src/media/port-pool.ts';
import { openConsole, listening, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { startSipp, type Sipp } from '../helpers/sip-peers.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { publishAgent, stt, tts, voicePeer } from '../helpers/voice-peer.ts';
import { within } from '../helpers/wait.ts';

const HOST = '127.0.0.1';
const CALLER = '127.0.0.7';
const portMin = 46_000 + 2 * crypto.randomInt(0, 2_500);
const testPorts = new PortPool({ portMin, portMax: portMin + 2 * 19 });

/** A TCP relay to the service, whose connections the test can cut (a proxy or a network dropping the live stream). */
async function cuttableRelay(port: number) {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((down) => {
    const up = net.connect(port, HOST);
    sockets.add(down);
    sockets.add(up);
    const drop = () => { down.destroy(); up.destroy(); sockets.delete(down); sockets.delete(up); };
    down.on('error', drop).on('close', drop);
    up.on('error', drop).on('close', drop);
    down.pipe(up);
    up.pipe(down);
  });
  await new Promise<void>((resolve) => server.listen(0, HOST, resolve));
  return {
    base: `http://${HOST}:${(server.address() as AddressInfo).port}`,
    cut(): number {
      const n = sockets.size;
      for (const s of sockets) s.destroy();
      sockets.clear();
      return n;
    },
    close: () => new Promise<void>((resolve) => { for (const s of sockets) s.destroy(); server.close(() => resolve()); }),
  };
}

describe('web console: live calls and conversations (Chromium)', { skip: toolsSkip('chromium', 'sipp', 'espeak-ng', 'pocketsphinx') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  let llm: FakeLlm;
  let relay: Awaited<ReturnType<typeof cuttableRelay>>;
  let reseller: { id: number; token: string };
  let org: { id: number; agentId: number; token: string };
  let agent: { id: number; token: string };
  let call: { roomId: string; uuid: string } | undefined;

  before(async () => {
    await tts.check();
    await stt.check();
    llm = await startFakeLlm();
    h = await startHarness('sqlite', {
      CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
      CALLPLANE_CALL_MAX_SECONDS: '60', CALLPLANE_CALL_RECORDING: 'on',
    }, { worker: true, sip: { pollMs: 100 }, analyses: true });
    const port = Number(new URL(await listening(h)).port);
    relay = await cuttableRelay(port);
    reseller = await h.reseller('Northwind Reseller');
    org = await h.organization(reseller.id, { orgName: 'Acme Dental' });
    agent = await h.agent(org.id);
    // Cartesia asked for, on a process without its key: the configured voice (espeak-ng) speaks, and the conversation says so.
    await publishAgent(h, agent.token, { welcomeMessage: 'Hello there.', speakingTimeout: 700, callerResponseTimeout: 60, actions: ['hangup'], agentTtsEngine: 'cartesia' });
    assert.equal((await h.call('POST', '/api/v2/sip/ipWhitelist', { token: org.token, body: { ip: CALLER, label: 'PBX' } })).status, 201);
    c = await openConsole(h);
  });
  after(async () => {
    await c?.close();
    await relay?.close();
    await h?.close();
    await llm?.close();
  });

  it('Live: a call\'s lines appear as they are said, survive a dropped stream, and the end links to the conversation', async () => {
    const { page } = c;
    await c.signIn(org.token);
    // The feed's requests, with the Last-Event-ID each sent (the page reconnects by itself).
    const feedRequests: Array<string | undefined> = [];
    page.on('request', (r) => { if (r.url().includes('/api/v2/conversations/live')) feedRequests.push(r.headers()['last-event-id']); });
    // Through the relay (the session cookie is the host's, whatever the port), so the test can cut the stream.
    await page.goto(`${relay.base}/console/#/live`);
    await page.getByRole('heading', { level: 1, name: 'Live' }).waitFor();
    const status = page.locator('[data-feed]');
    await page.getByText('Connected: new lines appear as they are said.').waitFor();
    assert.equal(await status.getAttribute('role'), 'status');
    await page.getByText('No call or conversation is in progress.').waitFor();
    await c.shot('live-idle');
    await page.evaluate(() => { (window as unknown as { notReloaded: boolean }).notReloaded = true; });

    const end = await voicePeer(testPorts);
    let sipp: Sipp | undefined;
    try {
      sipp = await startSipp({
        host: CALLER, scenario: 'uac-voice.xml',
        vars: { to: `sip:camp${agent.id}@127.0.0.1:${h.sip!.endpoint!.port}`, media_host: HOST, media_port: String(end.rtp.port) },
        extra: [`127.0.0.1:${h.sip!.endpoint!.port}`],
      });
      const card = page.locator('section.card').filter({ has: page.getByRole('heading', { name: /^Call from / }) });
      await card.waitFor({ timeout: 20_000 });
      const transcript = card.getByRole('list', { name: /^Transcript of the call with / });
      assert.equal(await transcript.getAttribute('aria-live'), 'polite');
      // The greeting shows while it is being said.
      await transcript.locator('li[data-direction="outbound"]', { hasText: 'Hello there.' }).waitFor({ timeout: 20_000 });
      await end.agentSpoke(0);

      // The stream drops: the page says it is reconnecting, then resumes from the last event it had (Last-Event-ID; the greeting is still there).
      assert.ok(relay.cut() > 0, 'the live stream went through the relay');
      await page.getByText(/^Reconnecting \(attempt 1, in 1 s\)/).waitFor({ timeout: 5_000 });
      await c.shot('live-reconnecting');
      await page.getByText('Connected: new lines appear as they are said.').waitFor({ timeout: 10_000 });
      await transcript.locator('li[data-direction="outbound"]', { hasText: 'Hello there.' }).waitFor();
      assert.ok(feedRequests.length >= 2, JSON.stringify(feedRequests));
      assert.equal(feedRequests[0], undefined, 'the first connection takes a snapshot');
      assert.match(feedRequests.at(-1) ?? '', /^[0-9a-f]{8}-\d+$/, 'the reconnection sends the last event\'s id');

      // The caller asks; the question and the answer appear while the call goes on.
      llm.script.push({ text: 'We open at nine.' });
      const from = end.heard.length;
      await end.say('what are your opening hours');
      await transcript.locator('li[data-direction="inbound"]').first().waitFor({ timeout: 20_000 });
      await transcript.locator('li[data-direction="outbound"]', { hasText: 'We open at nine.' }).waitFor({ timeout: 20_000 });
      const row = await h.database.db.selectFrom('conversations').selectAll().where('org_id', '=', org.id).where('channel', '=', 'sip').executeTakeFirstOrThrow();
      assert.equal(row.ended_at, null, 'the lines were shown before the call ended');
      await card.getByText('In progress').waitFor();
      await c.shot('live-call');
      await end.agentSpoke(from + 50);

      // A goodbye ends the call: the page says so and links to the whole conversation.
      llm.script.push({ text: 'Goodbye.', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'done' } }] });
      llm.script.push({ text: JSON.stringify({ summary: 'The caller asked for the opening hours; the agent said nine.', outcome: 'resolved', leadRating: 3, leadRatingReason: 'Asked about hours only.', fields: {} }) });
      end.rtp.sendDigits('5');
      assert.equal(await within(sipp.exited, 30_000, () => 'still running'), 0, sipp.output());
      const ended = page.locator('section.card').filter({ has: page.getByRole('heading', { name: /^Call from / }) });
      await ended.getByText(/^Ended: /).waitFor({ timeout: 10_000 });
      await page.getByRole('heading', { name: 'Ended while this page was open (1)' }).waitFor();
      const link = ended.getByRole('link', { name: 'Open the full conversation' });
      const href = (await link.getAttribute('href'))!;
      // The link names the organization too (docs/console.md, "Acting on an organization").
      const m = new RegExp(`^#/o/${org.id}/conversations/([^/]+)/([^/]+)$`).exec(href);
      assert.ok(m, href);
      call = { roomId: decodeURIComponent(m[1]!), uuid: decodeURIComponent(m[2]!) };
      assert.equal(call.uuid, row.id);
      assert.equal(await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded), true, 'the page was never reloaded');
      await c.shot('live-ended');
    } finally {
      await sipp?.stop();
      await end.rtp.close();
    }
  });

  it('reads the conversation from the inbox: transcript, analysis, each turn\'s latency, and its recording played in the page', async () => {
    assert.ok(call, 'the call of the test before');
    const { page } = c;
    await c.open('/conversations', 'Conversations');
    const rooms = page.locator('.table-wrap[aria-label="Rooms"]');
    const roomLink = rooms.getByRole('link').first();
    await roomLink.waitFor();
    await c.shot('conversations-inbox');
    await roomLink.click();
    await page.getByRole('heading', { level: 1, name: /^Room / }).waitFor();
    await c.shot('conversations-room');
    await page.getByRole('link', { name: /^Open conversation of / }).first().click();
    await page.getByRole('heading', { level: 1, name: /^Call of / }).waitFor();
    assert.ok(page.url().endsWith(`#/o/${org.id}/conversations/${encodeURIComponent(call.roomId)}/${call.uuid}`), `${page.url()} ${JSON.stringify(call)}`);

    const transcript = page.getByRole('list', { name: 'Transcript' });
    await transcript.locator('li').first().waitFor();
    const said = await transcript.locator('li').evaluateAll((ls) => ls.map((l) => [l.getAttribute('data-direction'), l.querySelector('.said')?.textContent ?? l.textContent]));
    assert.deepEqual(said.filter(([d]) => d === 'outbound').map(([, t]) => t), ['This call is being recorded.', 'Hello there.', 'We open at nine.', 'Goodbye.'], 'the recording notice first');
    const heard = said.filter(([d]) => d === 'inbound').map(([, t]) => t);
    assert.equal(heard.length, 2, JSON.stringify(said));
    assert.match(heard[0]!, /^what are your opening/, 'the question as recognised');
    assert.equal(heard[1], '[DTMF 5]', 'the key the caller pressed');
    assert.deepEqual(said.filter(([d]) => d === 'tool').length, 1, 'the agent ending the call');

    // Each spoken turn's latency, as the API recorded it.
    const api = await h.call('GET', `/api/v2/conversation/${encodeURIComponent(call.roomId)}/${call.uuid}`, { token: org.token });
    const timed = (api.body[0].conversation as Array<{ message: string; latency?: { path: string; totalMs: number | null; sttMs: number | null } }>).filter((l) => l.latency);
    assert.ok(timed.length >= 1, JSON.stringify(api.body));
    const latency = page.locator('.table-wrap[aria-label="Latency of each spoken turn"]');
    const rows = latency.locator('tbody tr');
    await rows.first().waitFor();
    assert.equal(await rows.count(), timed.length);
    const first = await rows.first().locator('td').allInnerTexts();
    assert.equal(first[0], `Agent: ${timed[0]!.message}`);
    assert.equal(first[1], timed[0]!.latency!.path);
    assert.equal(first[3], timed[0]!.latency!.sttMs === null ? 'not seen' : `${timed[0]!.latency!.sttMs} ms`);
    assert.equal(first[6], timed[0]!.latency!.totalMs === null ? 'not seen' : `${timed[0]!.latency!.totalMs} ms`);

    // Which engines heard and spoke it: the voice asked for was substituted, and the page says why.
    const speech = api.body[0].speech as { stt: string; tts: string; ttsRequested?: string; ttsSubstituted?: string };
    assert.equal(speech.ttsRequested, 'cartesia');
    assert.match(speech.ttsSubstituted ?? '', /cartesia has no key on this process/);
    const engines = page.locator('section.card', { has: page.getByRole('heading', { name: 'Speech engines' }) });
    await engines.waitFor();
    assert.equal(await engines.locator('dt:text-is("Heard by") + dd').innerText(), speech.stt);
    assert.ok((await engines.locator('dt:text-is("Spoken by") + dd').innerText()).startsWith(speech.tts), 'the voice that spoke');
    const substituted = engines.locator('[data-speech="substituted"]');
    assert.equal(await substituted.innerText(), `Voice substituted The agent asks for cartesia, but ${speech.tts} spoke this call: ${speech.ttsSubstituted}.`);

    // The analysis, once done (the page refreshes while it is pending).
    await page.getByText('The caller asked for the opening hours; the agent said nine.').waitFor({ timeout: 15_000 });
    await page.getByText('3 of 5: Asked about hours only.').waitFor();

    // The agent's answer times over the last day.
    await page.locator('.table-wrap[aria-label="Agent answer times"]').waitFor();

    // The recording: fetched with the console's header, played from a blob: URL.
    const audio = page.getByLabel('Call recording');
    await audio.waitFor({ timeout: 10_000 });
    assert.match((await audio.getAttribute('src'))!, /^blob:/);
    const played = await audio.evaluate(async (a: HTMLAudioElement) => {
      a.muted = true; // autoplay without a click is allowed muted
      await a.play();
      // Waits for playback to pass 0.3 s (bounded), not for a fixed time: a busy machine's
      // Chromium may start playing late. (No named functions in here: tsx would wrap them in a
      // helper the page does not have.)
      const until = Date.now() + 10_000;
      while (a.currentTime <= 0.3 && !a.error && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
      const state = { duration: a.duration, time: a.currentTime, error: a.error?.code ?? null };
      a.pause();
      return state;
    });
    assert.equal(played.error, null);
    assert.ok(played.duration > 2, `duration ${played.duration}`);
    assert.ok(played.time > 0.3, `played to ${played.time}`);
    await c.shot('conversations-conversation');

    // Readable at 320 CSS px: the wide latency table scrolls inside its frame, not the page.
    await page.setViewportSize({ width: 320, height: 640 });
    const { scroll, width } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: window.innerWidth }));
    assert.ok(scroll <= width + 1, `page is ${scroll}px wide in a ${width}px window`);
    await c.shot('conversations-conversation-320');
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  it('moves a room to junk and back', async () => {
    assert.ok(call, 'the call of the first test');
    const { page } = c;
    await c.open('/conversations', 'Conversations');
    const rooms = page.locator('.table-wrap[aria-label="Rooms"]');
    const name = (await rooms.getByRole('link').first().innerText()).trim();
    await page.getByRole('button', { name: `Move to junk: ${name}` }).click();
    await page.getByText('No conversation yet.').waitFor();
    let room = await h.call('GET', '/api/v2/junkConversations', { token: org.token });
    assert.deepEqual(room.body.rooms.map((x: { roomId: string; junkReason: string }) => [x.roomId, x.junkReason]), [[call.roomId, 'marked']]);

    await page.getByRole('link', { name: 'Junk', exact: true }).click();
    await page.getByRole('heading', { level: 2, name: 'Junk' }).waitFor();
    const junk = page.locator('.table-wrap[aria-label="Junk rooms"]');
    await junk.getByRole('cell', { name: 'marked by you' }).waitFor();
    await c.shot('conversations-junk');
    await page.getByRole('button', { name: `Not junk: ${name}` }).click();
    await page.getByText('No room is in the junk inbox.').waitFor();
    room = await h.call('GET', '/api/v2/conversations', { token: org.token });
    assert.deepEqual(room.body.rooms.map((x: { roomId: string; junk: boolean; junkOverride: boolean | null }) => [x.roomId, x.junk, x.junkOverride]), [[call.roomId, false, false]]);
  });

  it('searches the logs', async () => {
    assert.ok(call, 'the call of the first test');
    const { page } = c;
    await c.open('/logs', 'Logs');
    await page.getByLabel('Channel').selectOption('sip');
    await page.getByRole('button', { name: 'Search' }).click();
    const logs = page.locator('.table-wrap[aria-label="Conversation logs"]');
    await logs.locator('tbody tr').first().waitFor();
    assert.equal(await logs.locator('tbody tr').count(), 1);
    await page.getByText('1 found.').waitFor();
    await c.shot('conversations-logs');
    await page.getByLabel('Channel').selectOption('sms');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('No conversation started in that window with those filters.').waitFor();
  });

  it('signed in as the reseller, follows the organization chosen at the top, and fits 320 CSS px', async () => {
    assert.ok(call, 'the call of the first test');
    const { page } = c;
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API token').waitFor();
    await c.signIn(reseller.token);
    await page.getByLabel('Organization').selectOption(String(org.id));
    await c.open('/conversations', 'Conversations');
    // The room is the organization's: the page asked with targetAccountId.
    await page.locator('.table-wrap[aria-label="Rooms"]').getByRole('link', { name: 'Jane Caller' }).waitFor();
    await c.open('/live', 'Live');
    await page.getByText('Connected: new lines appear as they are said.').waitFor();
    await page.setViewportSize({ width: 320, height: 640 });
    for (const [fragment, heading, shot] of [['/live', 'Live', 'live-320'], ['/conversations', 'Conversations', 'conversations-inbox-320'], ['/logs', 'Logs', 'conversations-logs-320']] as const) {
      await c.open(fragment, heading);
      if (fragment !== '/live') await page.locator('tbody tr').first().waitFor();
      const { scroll, width } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: window.innerWidth }));
      assert.ok(scroll <= width + 1, `${fragment} is ${scroll}px wide in a ${width}px window`);
      await c.shot(shot);
    }
    await page.setViewportSize({ width: 1280, height: 860 });
    // The one error the page's console saw is the live stream the test cut in the first test.
    assert.deepEqual(c.problems, ['console: Failed to load resource: net::ERR_INCOMPLETE_CHUNKED_ENCODING']);
  });
});
