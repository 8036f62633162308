// The web console's first screen: from navigation to the Overview heading drawn with its figures,
// in Debian's Chromium, against a real `serve` on loopback (the built dist/, as `npm start` runs
// it), signed in (the session cookie set), in a new browser context each run so nothing is cached.
// The baseline, measured in the same run and browser: navigating to /healthz, a document of a few
// bytes, which is what any page of this server costs before its own work.
//
//   npm run bench:console                 # 15 runs
//   npm run bench:console -- --runs 30
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { median, percentile, startServer } from './lib.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '15' } } });
const runs = Number(values.runs);

const server = await startServer('sqlite', 'all');
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const signIn = await fetch(`${server.url}/console/session`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: server.token }),
  });
  const cookie = /callplane_console=([^;]+)/.exec(signIn.headers.get('set-cookie') ?? '')?.[1];
  if (!cookie) throw new Error(`sign-in failed: ${signIn.status}`);

  const time = async (url: string, ready: (page: import('playwright-core').Page) => Promise<unknown>) => {
    const context = await browser.newContext();
    await context.addCookies([{ name: 'callplane_console', value: cookie, url: server.url, httpOnly: true, sameSite: 'Strict' }]);
    const page = await context.newPage();
    const t0 = performance.now();
    await page.goto(url);
    await ready(page);
    const ms = performance.now() - t0;
    await context.close();
    return ms;
  };
  const firstScreen = (page: import('playwright-core').Page) => page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
  // One of each first, not counted: the browser's own first start.
  await time(`${server.url}/healthz`, async () => undefined);
  await time(`${server.url}/console/`, firstScreen);
  const base: number[] = [];
  const consoleMs: number[] = [];
  for (let i = 0; i < runs; i++) {
    base.push(await time(`${server.url}/healthz`, async () => undefined));
    consoleMs.push(await time(`${server.url}/console/`, firstScreen));
  }
  const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
  const b = median(base);
  const c = median(consoleMs);
  console.log(`console first screen, ${runs} runs, cold browser context each (loopback, SQLite, signed in)`);
  console.log(`  baseline /healthz navigation: median ${b.toFixed(0)} ms, p95 ${percentile(sorted(base), 95).toFixed(0)} ms`);
  console.log(`  console Overview drawn:       median ${c.toFixed(0)} ms, p95 ${percentile(sorted(consoleMs), 95).toFixed(0)} ms, max ${Math.max(...consoleMs).toFixed(0)} ms`);
  console.log(`  ratio console / baseline: ${(c / b).toFixed(2)}×; target: the first screen within 1000 ms (${c < 1000 ? 'met' : 'NOT met'})`);
} finally {
  await browser.close();
  await server.stop();
}
