// The web chat of an agent URL (GET /a/<slug>, GET and POST /a/<slug>/messages), on both engines,
// against the fake model server on loopback: the page shows the live title and nothing of the
// organization, its headers; the visitor cookie; replies from the LIVE configuration; the
// visitor's own transcript; limits; the welcome message; end_conversation; model failures; and a
// real browser (Debian's Chromium through playwright-core) typing into the page of a listening
// server, with markup in a message shown as text.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { chromium } from 'playwright-core';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { ENGINE_SKIP_REASON, ENGINES, SKIPPED_ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { toolsSkip, which } from '../helpers/system-tools.ts';

const run = `${process.pid.toString(36)}${Date.now().toString(36)}`;
let n = 0;
const unique = (base: string) => `${base}-${run}-${++n}`;
/** A client address of its own per use, so the per-address limits of one test never touch another's. */
let addresses = 0;
const address = () => `10.${(++addresses >> 8) & 255}.${addresses & 255}.7`;

/** Debian's Chromium (the browser test skips without it locally, fails under CI: test/helpers/system-tools.ts). */
const chromiumPath = () => which('chromium', ['/usr/bin'])!;

interface Page { status: number; body: string; headers: Record<string, unknown>; visitor?: string }
interface Json { status: number; body: any; headers: Record<string, unknown> }

function visitorIn(headers: Record<string, unknown>): string | undefined {
  const raw = headers['set-cookie'];
  const line = Array.isArray(raw) ? raw.find((c: string) => c.startsWith('cp_visitor=')) : typeof raw === 'string' ? raw : undefined;
  return line ? /^cp_visitor=([^;]+)/.exec(line)?.[1] : undefined;
}

for (const engine of ENGINES) {
  describe(`web chat [${engine}]`, () => {
    let h: Harness;
    let llm: FakeLlm;
    before(async () => {
      llm = await startFakeLlm({ models: ['fake-model'] });
      h = await startHarness(engine, {
        CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0',
      });
    });
    after(async () => { await h?.close(); await llm?.close(); });

    async function page(slug: string, ip: string, visitor?: string, headers: Record<string, string> = {}): Promise<Page> {
      const res = await h.app.inject({ method: 'GET', url: `/a/${slug}`, remoteAddress: ip, headers: { ...headers, ...(visitor ? { cookie: `other=1; cp_visitor=${visitor}` } : {}) } });
      return { status: res.statusCode, body: res.body, headers: res.headers, visitor: visitorIn(res.headers) };
    }
    async function transcript(slug: string, ip: string, visitor?: string): Promise<Json> {
      const res = await h.app.inject({ method: 'GET', url: `/a/${slug}/messages`, remoteAddress: ip, headers: visitor ? { cookie: `cp_visitor=${visitor}` } : {} });
      return { status: res.statusCode, body: res.json(), headers: res.headers };
    }
    async function say(slug: string, ip: string, visitor: string | undefined, body: unknown, headers: Record<string, string> = {}): Promise<Json> {
      const res = await h.app.inject({
        method: 'POST', url: `/a/${slug}/messages`, remoteAddress: ip,
        headers: { 'content-type': 'application/json', ...(visitor ? { cookie: `cp_visitor=${visitor}` } : {}), ...headers },
        payload: typeof body === 'string' ? body : JSON.stringify(body),
      });
      let parsed: any = res.body;
      try { parsed = res.json(); } catch { /* not JSON */ }
      return { status: res.statusCode, body: parsed, headers: res.headers };
    }
    /** A fresh visitor of the slug, from a fresh address unless one is given. */
    async function visitor(slug: string, ip = address()): Promise<{ ip: string; id: string }> {
      const p = await page(slug, ip);
      assert.equal(p.status, 200, p.body);
      assert.ok(p.visitor, 'the first GET issues a visitor cookie');
      return { ip, id: p.visitor };
    }

    /** An organization with a published agent (title, instructions, welcome) and a slug. */
    async function chatAgent(config: Record<string, unknown> = {}) {
      const r = await h.reseller();
      const orgName = unique('Zebulon Widgets Holding');
      const email = `${unique('owner')}@zebulon.example`;
      const o = await h.organization(r.id, { orgName, email });
      const agentToken = await h.tokenFor(o.agentId);
      const live = {
        title: 'Ada at the front desk', agentInstructions: `LIVE-INSTRUCTIONS ${unique('secret')}: you are Ada.`,
        welcomeMessage: 'Hi! I am Ada. How can I help?', ...config,
      };
      assert.equal((await h.call('POST', '/api/v2/agent', { token: agentToken, body: live })).status, 200);
      assert.equal((await h.call('POST', '/api/v2/agent/publish', { token: agentToken })).status, 200);
      const slug = unique('ada');
      const set = await h.call('POST', '/api/v2/agentUrl', { token: agentToken, body: { slug } });
      assert.equal(set.status, 200, JSON.stringify(set.body));
      return { r, o, agentToken, slug, live, orgName, email };
    }

    it('the page shows the live title and welcome and nothing of the organization, with strict headers and the visitor cookie', async () => {
      const a = await chatAgent();
      // A staged title never shows before it is published.
      assert.equal((await h.call('POST', '/api/v2/agent', { token: a.agentToken, body: { title: 'STAGED TITLE' } })).status, 200);
      const p = await page(a.slug, address());
      assert.equal(p.status, 200, p.body);
      assert.match(String(p.headers['content-type']), /^text\/html; charset=utf-8/);
      assert.match(p.body, /<title>Ada at the front desk<\/title>/);
      assert.match(p.body, /<h1>Ada at the front desk<\/h1>/);
      assert.match(p.body, /data-welcome="Hi! I am Ada\. How can I help\?"/);
      assert.match(p.body, new RegExp(`data-endpoint="/a/${a.slug}/messages"`));
      assert.doesNotMatch(p.body, /STAGED TITLE/);
      for (const secret of [a.orgName, a.email, a.live.agentInstructions, 'LIVE-INSTRUCTIONS', `camp${a.o.agentId}`, `account-${a.o.agentId}`, 'Zebulon']) {
        assert.ok(!p.body.includes(secret), `the page must not contain ${secret}`);
      }
      const markup = p.body.replace(/<style>[\s\S]*<\/style>/, '');
      for (const id of [a.o.id, a.o.agentId]) {
        assert.doesNotMatch(markup, new RegExp(`["'=/:#]${id}(?!\\d)`), `the page must not carry id ${id}`);
      }
      // Headers: a CSP that allows only the page's own inline script and style, by hash.
      const csp = String(p.headers['content-security-policy']);
      assert.match(csp, /default-src 'none'/);
      assert.match(csp, /frame-ancestors 'none'/);
      assert.match(csp, /connect-src 'self'/);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|\*/);
      const script = /<script>([\s\S]*)<\/script>/.exec(p.body)![1]!;
      const style = /<style>([\s\S]*)<\/style>/.exec(p.body)![1]!;
      const hash = (s: string) => `'sha256-${crypto.createHash('sha256').update(s).digest('base64')}'`;
      assert.ok(csp.includes(`script-src ${hash(script)}`), 'the script is allowed by its hash');
      assert.ok(csp.includes(`style-src ${hash(style)}`), 'the style is allowed by its hash');
      assert.equal((p.body.match(/<script/g) ?? []).length, 1, 'one script, inline');
      assert.doesNotMatch(p.body, /\bsrc=|\bhref=/, 'nothing loaded from anywhere');
      assert.doesNotMatch(script, /innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
      assert.equal(p.headers['x-content-type-options'], 'nosniff');
      assert.equal(p.headers['referrer-policy'], 'no-referrer');
      assert.equal(p.headers['x-frame-options'], 'DENY');
      assert.equal(p.headers['cache-control'], 'no-store');
      // The visitor cookie: opaque, HttpOnly, SameSite=Strict, scoped to this page.
      const setCookie = String(p.headers['set-cookie']);
      assert.match(setCookie, new RegExp(`^cp_visitor=v1\\.[A-Za-z0-9_-]{22}\\.[A-Za-z0-9_-]{43}; Path=/a/${a.slug}; Max-Age=2592000; HttpOnly; SameSite=Strict$`));
      // A second visit with the cookie keeps it; a cross-site navigation (sent without it) is not given another.
      assert.equal((await page(a.slug, address(), p.visitor)).headers['set-cookie'], undefined);
      assert.equal((await page(a.slug, address(), undefined, { 'sec-fetch-site': 'cross-site' })).headers['set-cookie'], undefined);
      // Title and welcome are text: markup in them is escaped.
      assert.equal((await h.call('POST', '/api/v2/agent', { token: a.agentToken, body: { title: '<b>"Bold"</b> & co', welcomeMessage: '"><script>alert(1)</script>' } })).status, 200);
      assert.equal((await h.call('POST', '/api/v2/agent/publish', { token: a.agentToken })).status, 200);
      const escaped = await page(a.slug, address());
      assert.match(escaped.body, /<h1>&#60;b&#62;&#34;Bold&#34;&#60;\/b&#62; &#38; co<\/h1>/);
      assert.match(escaped.body, /data-welcome="&#34;&#62;&#60;script&#62;alert\(1\)&#60;\/script&#62;"/);
      assert.equal((escaped.body.match(/<script/g) ?? []).length, 1);
    });

    it('an unknown, invalid or reserved slug, and a suspended organization\'s, is a 404 page; the slug is case-insensitive', async () => {
      const a = await chatAgent();
      for (const slug of [unique('nobody'), 'x', 'api', 'a', 'no_such', '%3Cscript%3E']) {
        const p = await page(slug, address());
        assert.equal(p.status, 404, `${slug}: ${p.body}`);
        assert.match(String(p.headers['content-type']), /^text\/html/);
        assert.match(p.body, /There is no chat at this address\./);
        assert.equal(p.headers['x-content-type-options'], 'nosniff');
        assert.ok(p.headers['content-security-policy']);
        assert.equal(p.headers['set-cookie'], undefined);
      }
      const unknown = await transcript(unique('nobody'), address());
      assert.equal(unknown.status, 404);
      // Another spelling of the slug redirects to the one the cookie's path names; the API under it takes any.
      const upper = await page(a.slug.toUpperCase(), address());
      assert.equal(upper.status, 308);
      assert.equal(upper.headers.location, `/a/${a.slug}`);
      const v = await visitor(a.slug);
      llm.script.push({ text: 'Hello from Ada.' });
      const res = await say(a.slug.toUpperCase(), v.ip, v.id, { text: 'hi' });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.reply, 'Hello from Ada.');
      // A suspended organization's chat is gone, the same 404.
      const off = await h.call('POST', '/api/v2/updateOrganization', { token: a.r.token, query: { targetOrganizationId: a.o.id }, body: { active: false } });
      assert.equal(off.status, 200, JSON.stringify(off.body));
      assert.equal((await page(a.slug, address())).status, 404);
      assert.equal((await say(a.slug, v.ip, v.id, { text: 'still there?' })).status, 404);
    });

    it('a message needs the visitor cookie this agent issued: none, a forged one, or another agent\'s is refused', async () => {
      const a = await chatAgent();
      const b = await chatAgent();
      const ip = address();
      const none = await say(a.slug, ip, undefined, { text: 'hello?' });
      assert.equal(none.status, 401);
      assert.equal(none.body.success, false);
      assert.match(none.body.message, /reload the page/);
      const forged = `v1.${crypto.randomBytes(16).toString('base64url')}.${crypto.randomBytes(32).toString('base64url')}`;
      assert.equal((await say(a.slug, ip, forged, { text: 'hello?' })).status, 401);
      assert.equal((await say(a.slug, ip, 'not-a-visitor', { text: 'hello?' })).status, 401);
      const ofB = await visitor(b.slug);
      assert.equal((await say(a.slug, ofB.ip, ofB.id, { text: 'hello?' })).status, 401, 'a visitor of one agent is nobody to another');
      // The transcript issues a visitor id where there is none (and answers an empty one).
      const t = await transcript(a.slug, address());
      assert.equal(t.status, 200);
      assert.deepEqual(t.body, { success: true, messages: [], ended: false });
      assert.ok(visitorIn(t.headers));
      assert.equal(llm.requests.filter((r) => JSON.stringify(r.body).includes('hello?')).length, 0, 'no refused message reached the model');
    });

    it('the agent\'s aiDisclosure comes first: on the page and in the recorded opening, before the welcome (issue 37)', async () => {
      const a = await chatAgent({ aiDisclosure: 'You are chatting with an AI assistant.' });
      const p = await page(a.slug, address());
      assert.match(p.body, /data-welcome="You are chatting with an AI assistant\.\n\nHi! I am Ada\. How can I help\?"/);
      const v = await visitor(a.slug);
      llm.script.push({ text: 'Sure.' });
      const first = await say(a.slug, v.ip, v.id, { text: 'hello' });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.equal(first.body.welcome, 'You are chatting with an AI assistant.\n\nHi! I am Ada. How can I help?');
      assert.equal(llm.requests.at(-1)!.body.messages[1]!.content, 'You are chatting with an AI assistant.\n\nHi! I am Ada. How can I help?');
    });

    it('the reply comes from the model with the LIVE configuration; the welcome message opens the conversation; bad input is a 400', async () => {
      const a = await chatAgent();
      assert.equal((await h.call('POST', '/api/v2/agent', { token: a.agentToken, body: { agentInstructions: 'STAGING ONLY: talk like a pirate.' } })).status, 200);
      const v = await visitor(a.slug);
      llm.script.push({ text: 'Of course, what day suits you?' });
      const first = await say(a.slug, v.ip, v.id, { text: '  I need a cleaning  ' });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.deepEqual(first.body, { success: true, reply: 'Of course, what day suits you?', ended: false, welcome: 'Hi! I am Ada. How can I help?' });
      const req = llm.requests.at(-1)!;
      assert.match(req.body.messages[0]!.content!, new RegExp(a.live.agentInstructions.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
      assert.doesNotMatch(req.body.messages[0]!.content!, /pirate/);
      assert.match(req.body.messages[0]!.content!, /a chat on the agent's web page/);
      assert.deepEqual(req.body.messages.slice(1).map((m) => `${m.role}:${m.content}`), ['assistant:Hi! I am Ada. How can I help?', 'user:I need a cleaning']);
      llm.script.push({ text: 'Tuesday at 9 it is.' });
      const second = await say(a.slug, v.ip, v.id, { text: 'Tuesday?' });
      assert.deepEqual(second.body, { success: true, reply: 'Tuesday at 9 it is.', ended: false });
      assert.deepEqual(llm.requests.at(-1)!.body.messages.slice(1).map((m) => m.role), ['assistant', 'user', 'assistant', 'user']);
      // Bounds: 1–2000 characters after trimming, a string, JSON of at most 8 KB.
      const requests = llm.requests.length;
      const long = await say(a.slug, v.ip, v.id, { text: 'x'.repeat(2001) });
      assert.equal(long.status, 400);
      assert.match(long.body.message, /text must be 1–2000 characters/);
      assert.equal((await say(a.slug, v.ip, v.id, { text: '   ' })).status, 400);
      assert.equal((await say(a.slug, v.ip, v.id, { text: 42 })).status, 400);
      assert.equal((await say(a.slug, v.ip, v.id, {})).status, 400);
      assert.equal((await say(a.slug, v.ip, v.id, { text: 'a\u0000b' })).status, 400);
      assert.equal((await say(a.slug, v.ip, v.id, JSON.stringify({ text: 'x', pad: 'y'.repeat(9000) }))).status, 413);
      assert.equal((await say(a.slug, v.ip, v.id, 'text=hi', { 'content-type': 'application/x-www-form-urlencoded' })).status, 415);
      assert.equal(llm.requests.length, requests, 'refused messages never reach the model');
      const max = await say(a.slug, v.ip, v.id, { text: 'é'.repeat(2000) });
      assert.equal(max.status, 200, JSON.stringify(max.body));
    });

    it('the transcript shows the visitor their own messages only; another visitor sees none of them', async () => {
      const a = await chatAgent();
      const first = await visitor(a.slug);
      llm.script.push({ text: 'Reply one.' }, { text: 'Reply two.' });
      assert.equal((await say(a.slug, first.ip, first.id, { text: 'first visitor, message one' })).status, 200);
      assert.equal((await say(a.slug, first.ip, first.id, { text: 'first visitor, message two' })).status, 200);
      const mine = await transcript(a.slug, first.ip, first.id);
      assert.equal(mine.status, 200);
      assert.equal(mine.headers['cache-control'], 'no-store');
      assert.equal(mine.body.ended, false);
      assert.deepEqual(mine.body.messages.map((m: any) => `${m.from}:${m.text}`), [
        'agent:Hi! I am Ada. How can I help?', 'visitor:first visitor, message one', 'agent:Reply one.',
        'visitor:first visitor, message two', 'agent:Reply two.',
      ]);
      for (const m of mine.body.messages) assert.deepEqual(Object.keys(m).sort(), ['at', 'from', 'text']);
      const second = await visitor(a.slug, first.ip);
      const theirs = await transcript(a.slug, second.ip, second.id);
      assert.deepEqual(theirs.body, { success: true, messages: [], ended: false });
      llm.script.push({ text: 'Hello, second.' });
      assert.equal((await say(a.slug, second.ip, second.id, { text: 'second visitor here' })).status, 200);
      const prompt = JSON.stringify(llm.requests.at(-1)!.body.messages);
      assert.doesNotMatch(prompt, /first visitor/, 'the model is not told another visitor\'s messages');
      assert.deepEqual((await transcript(a.slug, second.ip, second.id)).body.messages.map((m: any) => m.text), ['Hi! I am Ada. How can I help?', 'second visitor here', 'Hello, second.']);
      assert.equal((await transcript(a.slug, first.ip, first.id)).body.messages.length, 5);
      // The same visitor id at another agent of another organization is a stranger there.
      const b = await chatAgent();
      const t = await transcript(b.slug, first.ip, first.id);
      assert.deepEqual(t.body.messages, []);
      assert.ok(visitorIn(t.headers), 'and is issued an id of that agent');
    });

    it('limits: 10 messages a minute per visitor, 30 per address per agent, 60 new visitors per address per hour: 429 with Retry-After', async () => {
      const a = await chatAgent({ welcomeMessage: '' });
      const v = await visitor(a.slug);
      for (let i = 0; i < 10; i++) assert.equal((await say(a.slug, v.ip, v.id, { text: `m${i}` })).status, 200);
      const limited = await say(a.slug, v.ip, v.id, { text: 'one too many' });
      assert.equal(limited.status, 429);
      assert.match(limited.body.message, /Too many messages/);
      const retry = Number(limited.headers['retry-after']);
      assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${String(limited.headers['retry-after'])}`);
      assert.equal(limited.body.retryAfter, retry);
      // Dropping the cookie does not help: the address's limit counts every visitor (20 more here).
      for (let i = 0; i < 2; i++) {
        const other = await visitor(a.slug, v.ip);
        for (let j = 0; j < 10; j++) assert.equal((await say(a.slug, v.ip, other.id, { text: `o${i}.${j}` })).status, 200);
      }
      const fresh = await visitor(a.slug, v.ip);
      const byAddress = await say(a.slug, v.ip, fresh.id, { text: 'from a fresh cookie' });
      assert.equal(byAddress.status, 429);
      assert.ok(Number(byAddress.headers['retry-after']) >= 1);
      // Another address is not limited by this one; another agent neither.
      const elsewhere = await visitor(a.slug);
      assert.equal((await say(a.slug, elsewhere.ip, elsewhere.id, { text: 'hello' })).status, 200);
      const b = await chatAgent();
      const atB = await visitor(b.slug, v.ip);
      assert.equal((await say(b.slug, v.ip, atB.id, { text: 'hello b' })).status, 200);
      // New visitor ids: 60 an hour per address, then the page is a 429.
      const ip = address();
      for (let i = 0; i < 60; i++) assert.equal((await page(a.slug, ip)).status, 200);
      const p = await page(a.slug, ip);
      assert.equal(p.status, 429);
      assert.match(String(p.headers['content-type']), /^text\/html/);
      assert.ok(Number(p.headers['retry-after']) > 60, 'an hour\'s window');
      assert.equal(p.headers['set-cookie'], undefined);
      const t = await transcript(a.slug, ip);
      assert.equal(t.status, 429);
      assert.ok(Number(t.headers['retry-after']) >= 1);
    });

    it('one message at a time per visitor: a second while the first is answered is a 409', async () => {
      const a = await chatAgent({ welcomeMessage: '' });
      const v = await visitor(a.slug);
      llm.script.push({ text: 'slow answer', delayMs: 400 });
      const slow = say(a.slug, v.ip, v.id, { text: 'first' });
      await new Promise((r) => setTimeout(r, 100));
      const busy = await say(a.slug, v.ip, v.id, { text: 'second' });
      assert.equal(busy.status, 409);
      assert.match(busy.body.message, /still answering/);
      assert.equal((await slow).body.reply, 'slow answer');
    });

    it('end_conversation ends the conversation and the answer and transcript say so; the next message opens a new one', async () => {
      const a = await chatAgent({ actions: ['hangup'] });
      const v = await visitor(a.slug);
      llm.script.push({ text: 'Goodbye!', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'done' } }] });
      const bye = await say(a.slug, v.ip, v.id, { text: 'that is all, bye' });
      assert.equal(bye.status, 200, JSON.stringify(bye.body));
      assert.equal(bye.body.reply, 'Goodbye!');
      assert.equal(bye.body.ended, true);
      assert.deepEqual(llm.requests.at(-1)!.body.tools?.map((t) => t.function.name), ['end_conversation']);
      const t = await transcript(a.slug, v.ip, v.id);
      assert.equal(t.body.ended, true);
      assert.deepEqual(t.body.messages.map((m: any) => m.text), ['Hi! I am Ada. How can I help?', 'that is all, bye', 'Goodbye!']);
      llm.script.push({ text: 'Welcome back.' });
      const again = await say(a.slug, v.ip, v.id, { text: 'one more thing' });
      assert.equal(again.body.ended, false);
      assert.equal(again.body.welcome, 'Hi! I am Ada. How can I help?', 'a new conversation opens with the welcome message');
      assert.equal((await transcript(a.slug, v.ip, v.id)).body.ended, false);
    });

    it('a model failure is a 502 with a friendly message, never the provider\'s error', async () => {
      const a = await chatAgent();
      const v = await visitor(a.slug);
      llm.script.push({ status: 500 });
      const res = await say(a.slug, v.ip, v.id, { text: 'are you there?' });
      assert.equal(res.status, 502);
      assert.equal(res.body.success, false);
      assert.equal(res.body.message, 'The agent could not answer just now. Please try again.');
      assert.deepEqual(Object.keys(res.body).sort(), ['message', 'requestId', 'success'], 'nothing of the provider\'s error');
      llm.script.push({ text: 'Back again.' });
      assert.equal((await say(a.slug, v.ip, v.id, { text: 'hello?' })).body.reply, 'Back again.');
    });

    it('in Chromium: the page served by a listening server sends a message, shows the model\'s reply, and shows markup as text', { skip: toolsSkip('chromium') }, async () => {
      const executablePath = chromiumPath();
      const a = await chatAgent();
      await h.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = h.app.server.address() as AddressInfo;
      const browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
      try {
        const context = await browser.newContext();
        const tab = await context.newPage();
        const dialogs: string[] = [];
        const problems: string[] = [];
        tab.on('dialog', (d) => { dialogs.push(d.message()); void d.dismiss(); });
        tab.on('pageerror', (e) => problems.push(e.message));
        tab.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
        const res = await tab.goto(`http://127.0.0.1:${port}/a/${a.slug}`);
        assert.equal(res?.status(), 200);
        assert.equal(await tab.textContent('h1'), 'Ada at the front desk');
        // The script ran (CSP allowed it by hash): the welcome bubble is shown.
        await tab.waitForSelector('#log li.agent');
        assert.equal(await tab.textContent('#log li.agent'), 'Hi! I am Ada. How can I help?');
        const cookies = await context.cookies();
        const cookie = cookies.find((c) => c.name === 'cp_visitor');
        assert.ok(cookie?.httpOnly && cookie.sameSite === 'Strict' && cookie.path === `/a/${a.slug}`, JSON.stringify(cookies));

        llm.script.push({ text: 'Happy to help: what day suits you?' });
        await tab.fill('#text', 'I would like an appointment');
        await tab.click('#go');
        await tab.waitForSelector('#log li.reply');
        assert.equal(await tab.textContent('#log li.reply'), 'Happy to help: what day suits you?');
        assert.equal(await tab.textContent('#log li.visitor'), 'I would like an appointment');

        const markup = '<img src=x onerror=alert(1)>';
        await tab.fill('#text', markup);
        await tab.press('#text', 'Enter');
        await tab.waitForFunction(() => document.querySelectorAll('#log li.reply').length === 2);
        const texts = await tab.$$eval('#log li.msg', (els) => els.map((e) => `${e.className}|${e.textContent ?? ''}`));
        assert.deepEqual(texts, [
          'msg agent|Hi! I am Ada. How can I help?',
          'msg visitor|I would like an appointment', 'msg agent reply|Happy to help: what day suits you?',
          `msg visitor|${markup}`, `msg agent reply|reply to: ${markup}`,
        ]);
        assert.equal(await tab.locator('#log img').count(), 0, 'no element was created from the text');
        assert.equal(await tab.locator('#log li *').count(), 0, 'bubbles hold text only');
        assert.deepEqual(dialogs, []);
        assert.deepEqual(problems, []);

        // A reload shows the history, from the transcript.
        await tab.reload();
        await tab.waitForFunction(() => document.querySelectorAll('#log li.msg').length === 5);
        assert.equal(await tab.locator('#log img').count(), 0);
        assert.equal(await tab.textContent('#log li.msg:nth-child(4)'), markup);
      } finally {
        await browser.close();
      }
    });
  });
}
for (const engine of SKIPPED_ENGINES) describe(`web chat [${engine}]`, { skip: ENGINE_SKIP_REASON }, () => {});
