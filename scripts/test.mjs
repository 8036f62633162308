// `npm test`: runs every test file under test/ with node's test runner (via tsx), one process per
// file, and ends with one line the CI runner reads: "N passed, N failed, N skipped".
// Tests and suites skipped because a system tool is missing (their skip reason is
// `needs <tool>: apt-get install <package> …`, test/helpers/system-tools.ts) are counted on the
// line before it, with the Debian packages to install.
//
// Files are scheduled here, in two lanes side by side (docs/testing.md, "How npm test runs"):
// - the CPU lane (TEST_CPU_CONCURRENCY, default: the machine's cores): files that keep a core busy;
// - the wall lane (TEST_WALL_CONCURRENCY, default 3): files marked `// @lane wall`, which wait on
//   real time (SIP and RTP peers, espeak-ng and pocketsphinx, Chromium, sshd, child processes) and
//   use a fraction of a core meanwhile.
// In each lane the files that took longest last time start first (times kept in the OS's temporary
// folder), so the run does not end waiting on one long file started last.
// PostgreSQL: a file runs its suites on both engines (when TEST_DATABASE_URL is set) unless it is
// marked `// @engines sqlite` (above the repositories, where engines cannot differ); then its
// PostgreSQL half is reported skipped, and TEST_ENGINES=all runs it anyway.
// At the end: each file's wall time, slowest first, and the files that stayed alive after their
// last test (a leftover timer or socket).
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

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
const files = [...new Set(only.length
  ? only.flatMap((f) => (fs.statSync(path.resolve(f)).isDirectory() ? collect(path.resolve(f)) : [path.resolve(f)]))
  : collect(path.join(root, 'test')))].sort();
if (!process.env.TEST_DATABASE_URL) {
  console.log('note: TEST_DATABASE_URL is not set; PostgreSQL suites are skipped (.ci/run sets it).');
}
const allEngines = process.env.TEST_ENGINES === 'all';
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

// Transpiled once: every test file is bundled with what it imports of test/ and src/ (esbuild, one
// build for the whole run, shared code split into common chunks; packages stay imports of
// node_modules) into a fresh folder under .tmp/, and each test process runs its bundle with
// source maps. A process then loads plain JS instead of transpiling and resolving the platform's
// hundreds of modules through tsx's hooks (about half of a typical file's CPU time). Built from the
// sources of this run, so never stale; `import.meta.url` keeps naming the source file, so paths
// beside it (fixtures, workers, dist/) resolve as under tsx. Child processes and worker threads the
// tests start still run the sources through tsx. TEST_BUNDLE=0 runs the sources through tsx instead.
const bundled = process.env.TEST_BUNDLE !== '0';
let buildDir = null;
if (bundled) {
  fs.mkdirSync(path.join(root, '.tmp'), { recursive: true });
  buildDir = fs.mkdtempSync(path.join(root, '.tmp', 'test-build-'));
  const esbuild = await import('esbuild');
  const keepSourceUrl = {
    name: 'keep-import-meta-url',
    setup(build) {
      build.onLoad({ filter: /\.ts$/ }, async (args) => {
        let contents = await fs.promises.readFile(args.path, 'utf8');
        if (contents.includes('import.meta.')) {
          contents = contents.replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href))
            .replaceAll('import.meta.dirname', JSON.stringify(path.dirname(args.path)))
            .replaceAll('import.meta.filename', JSON.stringify(args.path));
        }
        return { contents, loader: 'ts' };
      });
    },
  };
  const t0 = Date.now();
  try {
    await esbuild.build({
      entryPoints: files, outdir: buildDir, outbase: root, outExtension: { '.js': '.mjs' },
      bundle: true, splitting: true, format: 'esm', platform: 'node', target: 'node20', packages: 'external',
      sourcemap: 'linked', plugins: [keepSourceUrl], logLevel: 'error',
    });
  } catch {
    fs.rmSync(buildDir, { recursive: true, force: true });
    console.log('\nthe test files did not build (above)\n\n0 passed, 1 failed, 0 skipped');
    process.exit(1);
  }
  console.log(`transpiled ${files.length} test ${files.length === 1 ? 'file' : 'files'} with what they import in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

// Each file's markers, read from its own text (so a moved file keeps them).
const plans = files.map((file) => {
  const text = fs.readFileSync(file, 'utf8');
  return {
    file,
    rel: path.relative(root, file),
    lane: /^\/\/ @lane wall\b/m.test(text) ? 'wall' : 'cpu',
    sqliteOnly: /^\/\/ @engines sqlite\b/m.test(text),
    size: text.length,
  };
});
const timesFile = path.join(os.tmpdir(), `callplane-test-times-${crypto.createHash('sha1').update(root).digest('hex').slice(0, 12)}.json`);
let lastTimes = {};
try { lastTimes = JSON.parse(fs.readFileSync(timesFile, 'utf8')); } catch { /* first run here */ }
// Longest first (last run's time; without one, the bigger file first).
const byExpected = (a, b) => (lastTimes[b.rel] ?? b.size / 1000) - (lastTimes[a.rel] ?? a.size / 1000);
const concurrency = {
  cpu: Math.max(1, Number(process.env.TEST_CPU_CONCURRENCY) || os.availableParallelism?.() || os.cpus().length),
  wall: Math.max(1, Number(process.env.TEST_WALL_CONCURRENCY) || 3),
};
const tapDir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-tap-'));
const live = plans.length === 1; // one file: its output as it comes
const children = new Set();
const results = [];

function runFile(plan, index) {
  return new Promise((resolve) => {
    const tap = path.join(tapDir, `${index}.tap`);
    const env = { ...process.env };
    if (plan.sqliteOnly && !allEngines) env.CALLPLANE_TEST_ENGINES = 'sqlite';
    const started = Date.now();
    // The time of the file's last output before its summary: the end of its last test.
    let lastOutputAt = started;
    let summaryBegun = false;
    let out = '';
    const child = spawn(process.execPath, [
      ...(bundled ? ['--enable-source-maps'] : ['--import', 'tsx']),
      '--test-reporter=spec', '--test-reporter-destination=stdout',
      '--test-reporter=tap', `--test-reporter-destination=${tap}`,
      bundled ? path.join(buildDir, plan.rel.replace(/\.ts$/, '.mjs')) : plan.file,
    ], { cwd: root, env, stdio: live ? ['ignore', 'pipe', 'inherit'] : ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    child.stdout.on('data', (chunk) => {
      const s = chunk.toString();
      if (live) process.stdout.write(s);
      out += s;
      // The summary (and the list of failures before it) is written when the process is about to exit;
      // a test's own lines may come in the same chunk, just before it.
      const summary = s.search(/^(ℹ tests \d+|✖ failing tests:)/m);
      if (!summaryBegun && (summary === -1 || s.slice(0, summary).trim() !== '')) lastOutputAt = Date.now();
      if (summary !== -1) summaryBegun = true;
    });
    child.stderr?.on('data', (chunk) => { out += chunk.toString(); });
    child.on('close', (code, signal) => {
      children.delete(child);
      const ended = Date.now();
      const result = { ...plan, code, signal, ms: ended - started, lingerMs: ended - lastOutputAt, tap: fs.existsSync(tap) ? fs.readFileSync(tap, 'utf8') : '' };
      if (!live) process.stdout.write(`\n══ ${plan.rel} (${(result.ms / 1000).toFixed(1)} s, ${plan.lane} lane)\n${out}`);
      results.push(result);
      resolve();
    });
  });
}

async function lane(name) {
  const queue = plans.filter((p) => p.lane === name).sort(byExpected);
  let next = 0;
  const worker = async () => {
    while (next < queue.length) {
      const i = next++;
      await runFile(queue[i], plans.indexOf(queue[i]));
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency[name], queue.length) }, worker));
}

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    for (const c of children) c.kill(sig);
    if (buildDir) fs.rmSync(buildDir, { recursive: true, force: true });
    process.exit(130);
  });
}
const t0 = Date.now();
await Promise.all([lane('cpu'), lane('wall')]);
const totalMs = Date.now() - t0;

const count = (out, k) => Number((out.match(new RegExp(`^# ${k} (\\d+)`, 'm')) ?? [])[1] ?? 0);
let passed = 0;
let failed = 0;
let skipped = 0;
const crashed = [];
for (const r of results) {
  passed += count(r.tap, 'pass');
  const f = count(r.tap, 'fail') + count(r.tap, 'cancelled');
  failed += f;
  skipped += count(r.tap, 'skipped');
  // A file that failed without a failed test (it did not load, it crashed, it was killed) is one failure.
  if ((r.code !== 0 || r.signal) && f === 0) {
    failed += 1;
    crashed.push(`${r.rel} exited with ${r.signal ?? `code ${r.code}`} without a failed test`);
  }
}
if (!only.length || results.length > 5) {
  const times = Object.fromEntries(results.map((r) => [r.rel, r.ms / 1000]));
  try { fs.writeFileSync(timesFile, JSON.stringify({ ...lastTimes, ...times })); } catch { /* a read-only tmp: no ordering next time */ }
}
fs.rmSync(tapDir, { recursive: true, force: true });
if (buildDir) fs.rmSync(buildDir, { recursive: true, force: true });

if (results.length > 1) {
  const sorted = [...results].sort((a, b) => b.ms - a.ms);
  const sum = results.reduce((s, r) => s + r.ms, 0);
  console.log(`\nTime per file, slowest first (${results.length} files, ${(sum / 1000).toFixed(0)} s summed, ${(totalMs / 1000).toFixed(0)} s wall; `
    + `lanes: cpu ×${concurrency.cpu}, wall ×${concurrency.wall}):`);
  for (const r of sorted) {
    const linger = r.lingerMs > 1000 ? `  (alive ${(r.lingerMs / 1000).toFixed(1)} s after its last test)` : '';
    console.log(`${(r.ms / 1000).toFixed(1).padStart(7)} s  ${r.lane.padEnd(4)}  ${r.rel}${linger}`);
  }
} else if (results.length === 1) {
  // One file (looking for what keeps it alive): its figure, however small.
  console.log(`\n${results[0].rel}: ${(results[0].ms / 1000).toFixed(1)} s, alive ${(results[0].lingerMs / 1000).toFixed(1)} s after its last test`);
}
for (const c of crashed) console.log(`\n${c}`);
// One skip directive per test or suite skipped for a missing tool (a skipped suite's tests never run).
const allTap = results.map((r) => r.tap).join('\n');
const needs = [...allTap.matchAll(/# SKIP needs [^:\n]+: apt-get install ([^\n]+)$/gm)];
const packages = [...new Set(needs.flatMap((m) => m[1].trim().split(/\s+/)))];
if (needs.length > 0) {
  console.log(`\n${needs.length} ${needs.length === 1 ? 'test or suite' : 'tests or suites'} skipped because a system tool is missing: apt-get install ${packages.join(' ')}`);
}
console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed === 0 && passed + needs.length > 0 ? 0 : 1);
