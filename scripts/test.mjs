// `npm test`: runs every test file under test/ with node's test runner (via tsx), once per
// engine inside each file, and ends with one line the CI runner reads: "N passed, N failed".
// Tests and suites skipped because a system tool is missing (their skip reason is
// `needs <tool>: apt-get install <package> …`, test/helpers/system-tools.ts) are counted on the
// line before it, with the Debian packages to install.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const only = process.argv.slice(2);
function collect(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? collect(p) : e.name.endsWith('.test.ts') ? [p] : [];
  });
}
// `npm test -- test/modules/tokens.test.ts test/sip`: those files, and the test files under those
// folders. A path that is neither is refused with the usage, instead of a run of nothing.
const missing = only.filter((f) => !fs.existsSync(path.resolve(f)));
if (missing.length > 0) {
  console.error(`no such test file or folder: ${missing.join(', ')}\n`
    + 'usage: npm test                                    every test file under test/\n'
    + '       npm test -- test/modules/tokens.test.ts     one file (or several, or a folder)\n'
    + '       TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm test -- <file>   on PostgreSQL too');
  process.exit(2);
}
const files = (only.length
  ? only.flatMap((f) => (fs.statSync(path.resolve(f)).isDirectory() ? collect(path.resolve(f)) : [path.resolve(f)]))
  : collect(path.join(root, 'test'))).sort();
if (!process.env.TEST_DATABASE_URL) {
  console.log('note: TEST_DATABASE_URL is not set; PostgreSQL suites are skipped (.ci/run sets it).');
}
// The web console's tests drive its built pages (dist/console): built here when missing or older
// than a source (console/, sdk/), so a changed page is never tested stale.
function newest(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).reduce((t, e) => {
    const p = path.join(dir, e.name);
    return Math.max(t, e.isDirectory() ? newest(p) : fs.statSync(p).mtimeMs);
  }, 0);
}
const consoleManifest = path.join(root, 'dist', 'console', '.vite', 'manifest.json');
const consoleBuiltAt = fs.existsSync(consoleManifest) ? fs.statSync(consoleManifest).mtimeMs : 0;
if (consoleBuiltAt < Math.max(newest(path.join(root, 'console')), newest(path.join(root, 'sdk')))) {
  console.log('building the web console (dist/console) for its tests…');
  const built = spawnSync(process.execPath, [path.join(root, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '--config', 'console/vite.config.mjs'], { stdio: 'inherit', cwd: root });
  if (built.status !== 0) process.exit(built.status ?? 1);
}
const tap = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-tap-')), 'out.tap');
const child = spawn(process.execPath, [
  '--import', 'tsx', '--test', '--test-concurrency=2',
  '--test-reporter=spec', '--test-reporter-destination=stdout',
  '--test-reporter=tap', `--test-reporter-destination=${tap}`,
  ...files,
], { stdio: 'inherit', cwd: root });
child.on('exit', (code) => {
  const out = fs.existsSync(tap) ? fs.readFileSync(tap, 'utf8') : '';
  const count = (k) => Number((out.match(new RegExp(`^# ${k} (\\d+)`, 'm')) ?? [])[1] ?? 0);
  const passed = count('pass');
  const failed = count('fail') + count('cancelled');
  const skipped = count('skipped');
  // One skip directive per test or suite skipped for a missing tool (a skipped suite's tests never run).
  const needs = [...out.matchAll(/# SKIP needs [^:\n]+: apt-get install ([^\n]+)$/gm)];
  const packages = [...new Set(needs.flatMap((m) => m[1].trim().split(/\s+/)))];
  if (needs.length > 0) {
    console.log(`\n${needs.length} ${needs.length === 1 ? 'test or suite' : 'tests or suites'} skipped because a system tool is missing: apt-get install ${packages.join(' ')}`);
  }
  console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
  process.exit(code === 0 && failed === 0 && passed + needs.length > 0 ? 0 : 1);
});
