// The web console in a real browser: Debian's Chromium driven by playwright-core against a harness
// that listens on loopback. Screenshots go to test-artifacts/console/<name>.png (kept by CI as the
// test's artifacts; the README's picture is one of them). Tests that use this pass
// `{ skip: toolsSkip('chromium') }`.
import fs from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { Harness } from './harness.ts';
import { which } from './system-tools.ts';

export const ARTIFACTS = path.resolve(import.meta.dirname, '..', '..', 'test-artifacts', 'console');

export interface ConsoleBrowser {
  /** http://127.0.0.1:<port> of the harness. */
  base: string;
  browser: Browser;
  context: BrowserContext;
  page: Page;
  /** Errors the page printed or threw: a test ends by asserting there were none. */
  problems: string[];
  /** Signs in on the sign-in form with this token and waits for the first screen. */
  signIn(token: string): Promise<void>;
  /** Opens a console page by its fragment path (`/tasks`) and waits for its heading. */
  open(fragment: string, heading?: string | RegExp): Promise<void>;
  /** A full-page screenshot in test-artifacts/console/<name>.png; answers its path. */
  shot(name: string): Promise<string>;
  close(): Promise<void>;
}

/** Where the harness listens, listening first if it does not yet. */
export async function listening(h: Harness): Promise<string> {
  if (!h.app.server.listening) await h.app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = h.app.server.address() as AddressInfo;
  return `http://127.0.0.1:${port}`;
}

export async function openConsole(h: Harness, opts: { width?: number; height?: number; args?: string[] } = {}): Promise<ConsoleBrowser> {
  const base = await listening(h);
  const browser = await chromium.launch({
    executablePath: which('chromium', ['/usr/bin'])!,
    // No background connections: this machine's network is closed, and they only add noise.
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', ...(opts.args ?? [])],
  });
  const context = await browser.newContext({ viewport: { width: opts.width ?? 1280, height: opts.height ?? 860 } });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    // A 4xx the page asked for on purpose shows as a failed resource; those are the tests' to check.
    if (m.type() === 'error' && !/Failed to load resource: the server responded with a status of 4\d\d/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const self: ConsoleBrowser = {
    base, browser, context, page, problems,
    async signIn(token) {
      await page.goto(`${base}/console/#/sign-in`);
      await page.getByLabel('API token').fill(token);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    },
    async open(fragment, heading) {
      await page.goto(`${base}/console/#${fragment}`);
      if (heading) await page.getByRole('heading', { level: 1, name: heading }).waitFor();
    },
    async shot(name) {
      const file = path.join(ARTIFACTS, `${name}.png`);
      await page.screenshot({ path: file, fullPage: true });
      return file;
    },
    async close() {
      await context.close().catch(() => undefined);
      await browser.close().catch(() => undefined);
    },
  };
  return self;
}
