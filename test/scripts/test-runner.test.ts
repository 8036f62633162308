// `npm test` (scripts/test.mjs) on a machine without the system programs some tests drive: those
// tests skip (test/helpers/system-tools.ts), the summary says how many were skipped for a missing
// tool and which Debian packages to install, the final "N passed, N failed, N skipped" line stays
// last, and the run passes, quickly, instead of failing or waiting on a timeout. The machine that
// runs this has the tools; CALLPLANE_TEST_HIDE_TOOLS makes the helper treat them as missing.
// @lane wall
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { describe, it } from 'node:test';
import { hasTool, toolsSkip } from '../helpers/system-tools.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

function runTests(files: string[], env: Record<string, string>): Promise<{ code: number; out: string; ms: number }> {
  const clean = { ...process.env };
  // Not requiring the tools (as .ci/run does), and SQLite only: the PostgreSQL halves would only make it slower.
  for (const k of ['CALLPLANE_TEST_REQUIRE_TOOLS', 'TEST_DATABASE_URL', 'NODE_TEST_CONTEXT', 'CALLPLANE_TEST_HIDE_TOOLS']) delete clean[k];
  const t0 = Date.now();
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(ROOT, 'scripts/test.mjs'), ...files], { cwd: ROOT, env: { ...clean, ...env }, timeout: 300_000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr, ms: Date.now() - t0 });
    });
  });
}

describe('npm test without the system tools', () => {
  it('skips what needs a missing tool, names the packages to install, and passes', async () => {
    // The red team's two failures (Chromium, Kamailio's presence modules) and two more kinds.
    const r = await runTests(['test/modules/sip-presence.test.ts', 'test/modules/web-chat.test.ts', 'test/speech/espeak.test.ts', 'test/sip/endpoint.test.ts'],
      { CALLPLANE_TEST_HIDE_TOOLS: 'chromium,kamailio-presence,espeak-ng,openssl' });
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /# needs kamailio-presence: apt-get install kamailio-presence-modules$/m, 'the skipped suite says what to install');
    assert.match(r.out, /# needs chromium: apt-get install chromium$/m, 'a skipped test too');
    assert.match(r.out, /# needs openssl: apt-get install openssl$/m);
    const line = /^(\d+) tests or suites skipped because a system tool is missing: apt-get install (.+)$/m.exec(r.out);
    assert.ok(line, r.out);
    // The presence suite, the browser test (SQLite only here), the espeak-ng suite, the TLS test of the SIP endpoint.
    assert.equal(line[1], '4');
    assert.deepEqual(line[2].split(' ').sort(), ['chromium', 'espeak-ng', 'kamailio-presence-modules', 'openssl']);
    const lines = r.out.trimEnd().split('\n');
    assert.match(lines[lines.length - 1], /^\d+ passed, 0 failed, \d+ skipped$/, 'the final line stays last');
    // The presence suite used to be cancelled after 120 s; a skip takes no time. A generous bound for a busy machine.
    assert.ok(r.ms < 110_000, `took ${r.ms} ms`);
  });

  it('with every tool there, prints no such line', { skip: toolsSkip('espeak-ng') }, async () => {
    const r = await runTests(['test/speech/espeak.test.ts'], {});
    assert.equal(r.code, 0, r.out);
    assert.doesNotMatch(r.out, /because a system tool is missing/);
    assert.doesNotMatch(r.out, /# needs /);
  });

  it('a run where everything was skipped for a missing tool still passes', async () => {
    const r = await runTests(['test/modules/sip-presence.test.ts'], { CALLPLANE_TEST_HIDE_TOOLS: 'kamailio' });
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /^1 test or suite skipped because a system tool is missing: apt-get install kamailio$/m);
  });
});

describe('toolsSkip', () => {
  it('names the tools and their packages; CI=true alone still skips; under CALLPLANE_TEST_REQUIRE_TOOLS=1 never, so a missing tool fails there', () => {
    const saved = { require: process.env.CALLPLANE_TEST_REQUIRE_TOOLS, CI: process.env.CI, hide: process.env.CALLPLANE_TEST_HIDE_TOOLS };
    try {
      delete process.env.CALLPLANE_TEST_REQUIRE_TOOLS;
      process.env.CI = 'true';
      process.env.CALLPLANE_TEST_HIDE_TOOLS = 'chromium,pocketsphinx';
      assert.equal(toolsSkip('chromium'), 'needs chromium: apt-get install chromium');
      assert.equal(toolsSkip('pocketsphinx', 'chromium'), 'needs pocketsphinx, chromium: apt-get install pocketsphinx pocketsphinx-en-us chromium');
      assert.equal(toolsSkip('openssl'), hasTool('openssl') ? false : 'needs openssl: apt-get install openssl');
      process.env.CALLPLANE_TEST_REQUIRE_TOOLS = '1';
      assert.equal(toolsSkip('chromium'), false);
    } finally {
      if (saved.CI === undefined) delete process.env.CI; else process.env.CI = saved.CI;
      if (saved.require === undefined) delete process.env.CALLPLANE_TEST_REQUIRE_TOOLS; else process.env.CALLPLANE_TEST_REQUIRE_TOOLS = saved.require;
      if (saved.hide === undefined) delete process.env.CALLPLANE_TEST_HIDE_TOOLS; else process.env.CALLPLANE_TEST_HIDE_TOOLS = saved.hide;
    }
  });
});
