// The API reference page (/docs, Swagger UI) shares the console's origin and session cookie
// (issue 33): it gets the console's framing and script rules, its "Try it out" calls the page's own
// origin whatever host name it was opened on, and the console's cookie is `__Host-` prefixed over
// https (Secure, Path=/, no Domain), the only name read there.
// @lane wall
// @engines sqlite
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { openConsole, type ConsoleBrowser } from '../helpers/console-browser.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

const HEADER = { 'x-callplane-console': '1' };

function assertStrictPage(headers: Record<string, unknown>, what: string): void {
  const csp = String(headers['content-security-policy']);
  for (const rule of ["default-src 'self'", "script-src 'self'", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'"]) {
    assert.ok(csp.split('; ').includes(rule), `${what}: ${rule} in ${csp}`);
  }
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, what);
  assert.equal(headers['x-frame-options'], 'DENY', what);
  assert.equal(headers['x-content-type-options'], 'nosniff', what);
  assert.equal(headers['referrer-policy'], 'no-referrer', what);
}

for (const engine of ENGINES) {
  describe(`the reference page's rules and the console cookie over https (${engine})`, () => {
    let h: Harness;
    before(async () => { h = await startHarness(engine, { CALLPLANE_PUBLIC_URL: 'https://callplane.example' }); });
    after(async () => h.close());

    it('serves /docs, its script and its document with the console\'s framing and script rules', async () => {
      const page = await h.app.inject({ method: 'GET', url: '/docs/' });
      assert.equal(page.statusCode, 200);
      assertStrictPage(page.headers, '/docs/');
      assert.doesNotMatch(page.body, /<script>(?!\s*<\/script>)|<script\s+(?![^>]*\bsrc=)[^>]*>/, 'no inline script in the page');
      const bare = await h.app.inject({ method: 'GET', url: '/docs' });
      assertStrictPage(bare.headers, '/docs');
      const init = await h.app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' });
      assert.equal(init.statusCode, 200);
      assertStrictPage(init.headers, 'swagger-initializer.js');
      const bundle = await h.app.inject({ method: 'GET', url: '/docs/static/swagger-ui-bundle.js' });
      assert.equal(bundle.statusCode, 200);
      assert.equal(bundle.headers['x-content-type-options'], 'nosniff');
    });

    it('hands the reference page a document whose server is the page\'s own origin; the API\'s document keeps the public URL', async () => {
      const shown = await h.app.inject({ method: 'GET', url: '/docs/json' });
      assert.equal(shown.statusCode, 200);
      assert.deepEqual(shown.json().servers.map((s: { url: string }) => s.url), ['/']);
      const api = await h.app.inject({ method: 'GET', url: '/api/v2/openapi.json' });
      assert.deepEqual(api.json().servers.map((s: { url: string }) => s.url), ['https://callplane.example']);
    });

    it('names the console cookie __Host-callplane_console over https (Secure, Path=/, no Domain) and reads only that name', async () => {
      const org = await h.organization((await h.reseller()).id);
      const res = await h.app.inject({ method: 'POST', url: '/console/session', payload: { token: org.token } });
      assert.equal(res.statusCode, 200, res.body);
      const line = ([] as string[]).concat(res.headers['set-cookie'] as string[] | string).find((c) => c.startsWith('__Host-callplane_console='));
      assert.ok(line, JSON.stringify(res.headers['set-cookie']));
      assert.match(line, /; Secure/);
      assert.match(line, /; Path=\/(;|$)/);
      assert.doesNotMatch(line, /; Domain=/i);
      const value = line.slice('__Host-callplane_console='.length).split(';')[0];
      const ok = await h.app.inject({ method: 'GET', url: '/console/session', headers: { ...HEADER, cookie: `__Host-callplane_console=${value}` } });
      assert.equal(ok.statusCode, 200, ok.body);
      // The unprefixed name could be set by another host (a sibling subdomain): not read over https.
      const plain = await h.app.inject({ method: 'GET', url: '/console/session', headers: { ...HEADER, cookie: `callplane_console=${value}` } });
      assert.equal(plain.statusCode, 401, plain.body);
      const out = await h.app.inject({ method: 'DELETE', url: '/console/session', headers: { ...HEADER, cookie: `__Host-callplane_console=${value}` } });
      assert.equal(out.statusCode, 200);
      assert.match(String(out.headers['set-cookie']), /__Host-callplane_console=;.*Secure/);
    });
  });
}

describe('the reference page in Chromium, opened on another host name than CALLPLANE_PUBLIC_URL', { skip: toolsSkip('chromium') }, () => {
  let h: Harness;
  let c: ConsoleBrowser;
  before(async () => {
    // The page is opened on 127.0.0.1; the public URL names another host.
    h = await startHarness('sqlite', { CALLPLANE_PUBLIC_URL: 'http://localhost:9' });
    c = await openConsole(h);
  });
  after(async () => {
    await c?.close();
    await h?.close();
  });

  it('renders under its content policy and "Try it out" reaches this origin', async () => {
    const sent: string[] = [];
    c.page.on('request', (r) => { if (r.url().includes('/api/v2/tokens')) sent.push(r.url()); });
    await c.page.goto(`${c.base}/docs/`);
    const operation = c.page.locator('#operations-Authorization-listTokens');
    await operation.locator('.opblock-summary').first().click();
    await operation.getByRole('button', { name: 'Try it out' }).click();
    await operation.getByRole('button', { name: 'Execute' }).click();
    const status = operation.locator('.live-responses-table tr.response .response-col_status').first();
    await status.waitFor({ timeout: 15_000 });
    const code = (await status.innerText()).trim();
    assert.match(code, /^401\b/, `${code}: ${await operation.locator('.responses-wrapper').innerText()}`);
    assert.ok(sent.length > 0 && sent.every((u) => u.startsWith(`${c.base}/api/v2/tokens`)), JSON.stringify(sent));
    await c.shot('docs-try-it-out');
    assert.deepEqual(c.problems, [], 'no content-policy violation or other error on the page');
  });
});
