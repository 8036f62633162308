// The callplane command as an operator runs it: the compiled dist/main.js (what `npm start` and
// bin/callplane.js run; built first when stale), or `npm start` and `bin/callplane.js` themselves,
// on a temp DATA_DIR and a free port, spoken to over real HTTP and stopped with real signals. Every
// test sets up what it needs (its own DATA_DIR, its own first start), so any one runs alone.
// @lane wall
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ensureBuilt, DIST_MAIN, ROOT } from './helpers/dist.ts';
import { PG_URL } from './helpers/harness.ts';
import { createScratchPgDatabase } from './helpers/scratch-pg.ts';
import { freePort } from './helpers/wait.ts';

const TOKEN_RE = /cpl_[A-Za-z0-9_-]{43}/;
const dirs: string[] = [];
before(() => ensureBuilt());
after(() => { for (const d of dirs) fs.rmSync(d, { recursive: true, force: true }); });

function tempDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-proc-'));
  dirs.push(d);
  return d;
}

interface Proc {
  child: ChildProcess;
  port: number;
  /** stdout and stderr so far, interleaved. */
  output(): string;
  stdout(): string;
  stderr(): string;
  waitFor(re: RegExp, ms?: number): Promise<void>;
  exit(ms?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
}

const running = new Set<ChildProcess>();
after(() => { for (const c of running) c.kill('SIGKILL'); });

/**
 * Runs a command line (the compiled CLI, `npm start`, bin/callplane.js) in the checkout with a
 * clean environment: nothing leaks in from the test runner's. SIP listens on a free port.
 */
async function launch(argv: string[], env: Record<string, string>): Promise<Proc> {
  const port = await freePort();
  const child = spawn(argv[0], argv.slice(1), {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: os.tmpdir(), HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', CALLPLANE_METRICS_PORT: '0', CALLPLANE_SIP_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let out = '', so = '', se = '';
  child.stdout.on('data', (b) => { out += b; so += b; });
  child.stderr.on('data', (b) => { out += b; se += b; });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => { running.delete(child); resolve({ code, signal }); }));
  const exit = async (ms = 20_000) => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`no exit within ${ms} ms; output:\n${out}`)), ms); });
    try { return await Promise.race([exited, timeout]); } finally { clearTimeout(timer); }
  };
  return {
    child, port, exit,
    output: () => out, stdout: () => so, stderr: () => se,
    async waitFor(re, ms = 30_000) {
      const deadline = Date.now() + ms;
      while (!re.test(out)) {
        if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode} before ${re}; output:\n${out}`);
        if (Date.now() > deadline) throw new Error(`no ${re} within ${ms} ms; output:\n${out}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop() {
      const t0 = Date.now();
      child.kill('SIGTERM');
      const r = await exit(10_000);
      return { ...r, ms: Date.now() - t0 };
    },
  };
}

/** Starts the compiled CLI as `npm start` runs it. */
function start(args: string[], env: Record<string, string>): Promise<Proc> {
  return launch([process.execPath, '--enable-source-maps', DIST_MAIN, ...args], env);
}

/** Runs a command to completion. */
async function run(args: string[], env: Record<string, string>) {
  const p = await start(args, env);
  const { code } = await p.exit(60_000);
  return { code, stdout: p.stdout(), stderr: p.stderr(), output: p.output() };
}

const READY = /"msg":"ready"/;

async function get(port: number, pathAndQuery: string, headers: Record<string, string> = {}) {
  const res = await fetch(`http://127.0.0.1:${port}${pathAndQuery}`, { headers });
  const text = await res.text();
  let body: any = text;
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body, headers: res.headers };
}

/**
 * The first start on a fresh DATA_DIR: waits for ready, checks the token is printed exactly once
 * and returns it with the running process (the caller stops it).
 */
async function firstStart(dataDir: string): Promise<{ p: Proc; token: string }> {
  const p = await start(['serve'], { DATA_DIR: dataDir });
  await p.waitFor(READY);
  const printed = p.stdout().match(new RegExp(TOKEN_RE.source, 'g')) ?? [];
  assert.equal(printed.length, 1, `expected the token printed exactly once:\n${p.output()}`);
  return { p, token: printed[0] };
}

/** A DATA_DIR that has had its first start (and a clean stop), and the admin token it printed. */
async function initializedDataDir(): Promise<{ dataDir: string; token: string }> {
  const dataDir = tempDir();
  const { p, token } = await firstStart(dataDir);
  assert.equal((await p.stop()).code, 0);
  return { dataDir, token };
}

describe('callplane serve (SQLite)', () => {
  it('on the first start prints the admin token once and writes it to DATA_DIR/admin-token with mode 0600', async () => {
    const dataDir = tempDir();
    const { p, token: firstToken } = await firstStart(dataDir);
    try {
      const file = path.join(dataDir, 'admin-token');
      assert.equal(fs.readFileSync(file, 'utf8').trim(), firstToken);
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      const res = await get(p.port, `/api/v2/account?token=${encodeURIComponent(firstToken)}`);
      assert.equal(res.status, 200);
      assert.equal(res.body.success, true);
      assert.equal(res.body.accountType, 'partner');
      const wrong = await get(p.port, `/api/v2/account?token=cpl_${'A'.repeat(43)}`);
      assert.equal(wrong.status, 401);
    } finally {
      const { code, signal } = await p.stop();
      assert.equal(signal, null);
      assert.equal(code, 0);
    }
  });

  it('once ready it prints where the web console, the API and the reference are, and the SIP port (README, "Run it")', async () => {
    const { p } = await firstStart(tempDir());
    try {
      await p.waitFor(/SIP: listening/);
      assert.match(p.stdout(), new RegExp(`web console: http://localhost:${p.port}/console/ +\\(API: http://localhost:${p.port}/api/v2, reference: http://localhost:${p.port}/docs\\)`));
      const sip = /SIP: listening on 0\.0\.0\.0:(\d+) \(UDP and TCP\)/.exec(p.stdout());
      assert.ok(sip && Number(sip[1]) > 0, `the SIP port it took (CALLPLANE_SIP_PORT=0):\n${p.stdout()}`);
      assert.match(p.output(), /"msg":"ready"/);
      assert.match(p.output(), new RegExp(`"console":"http://localhost:${p.port}/console/"`));
    } finally {
      assert.equal((await p.stop()).code, 0);
    }
  });

  it('npm test -- <a path that does not exist> prints the usage and fails instead of running nothing', async () => {
    const r = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'test.mjs'), 'test/no-such.test.ts'], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(r.status, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /no such test file or folder: test\/no-such\.test\.ts/);
    assert.match(r.stderr, /npm test -- test\/modules\/tokens\.test\.ts/);
  });

  it('a second start on the same DATA_DIR prints no token, keeps the file, and the first token still works', async () => {
    const { dataDir, token: firstToken } = await initializedDataDir();
    const before = fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8');
    const p = await start(['serve'], { DATA_DIR: dataDir });
    try {
      await p.waitFor(READY);
      assert.doesNotMatch(p.output(), TOKEN_RE);
      assert.doesNotMatch(p.output(), /admin token/i);
      assert.equal(fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8'), before);
      const res = await get(p.port, `/api/v2/account?token=${encodeURIComponent(firstToken)}`);
      assert.equal(res.status, 200);
    } finally {
      assert.equal((await p.stop()).code, 0);
    }
  });

  it('a second serve on the same SQLite DATA_DIR is refused while the first runs, and allowed after it stops', async () => {
    const dir = tempDir();
    const first = await start(['serve'], { DATA_DIR: dir });
    try {
      await first.waitFor(READY);
      assert.equal(fs.readFileSync(path.join(dir, 'serve.pid'), 'utf8').trim(), String(first.child.pid));
      const second = await run(['serve', '--role', 'worker'], { DATA_DIR: dir });
      assert.equal(second.code, 1, second.output);
      assert.match(second.stderr, new RegExp(`^callplane: another callplane process \\(pid ${first.child.pid}\\) is serving`, 'm'));
    } finally {
      assert.equal((await first.stop()).code, 0);
    }
    assert.ok(!fs.existsSync(path.join(dir, 'serve.pid')), 'the pid file is removed on a clean stop');
    // A pid file left by a process that no longer exists (as after SIGKILL) is taken over.
    fs.writeFileSync(path.join(dir, 'serve.pid'), '2147483646\n');
    const again = await start(['serve'], { DATA_DIR: dir });
    try {
      await again.waitFor(READY);
    } finally {
      assert.equal((await again.stop()).code, 0);
    }
  });

  it('kill -9 and a restart at once, ten times in a row, each start succeeds; a second serve on the live directory is still refused', async () => {
    // Each server runs under a parent that never reaps it (`exec sleep`, as `npm` or pid 1 in a
    // container may be): after kill -9 its pid stays taken (a zombie), and the pid file still names
    // it. The lock is the kernel's, so it is free the moment the process is gone.
    const dir = tempDir();
    const parents: Proc[] = [];
    const STARTED = /"msg":"ready"|^callplane: /m;
    try {
      let serverPid = 0;
      for (let i = 0; i < 10; i++) {
        const p = await launch(['sh', '-c', '"$0" --enable-source-maps "$1" serve & echo "server pid $!"; exec sleep 600', process.execPath, DIST_MAIN], { DATA_DIR: dir });
        parents.push(p);
        await p.waitFor(STARTED, 60_000);
        assert.match(p.output(), READY, `start ${i + 1} after kill -9 of pid ${serverPid}:\n${p.output()}`);
        serverPid = Number(/server pid (\d+)/.exec(p.output())![1]);
        assert.equal((await get(p.port, '/healthz')).status, 200);
        assert.equal(fs.readFileSync(path.join(dir, 'serve.pid'), 'utf8').trim(), String(serverPid));
        if (i === 9) break;
        process.kill(serverPid, 'SIGKILL');
        assert.ok(isAlive(serverPid), 'the killed server\'s pid is still taken (nobody reaps it)');
      }
      const second = await run(['serve'], { DATA_DIR: dir });
      assert.equal(second.code, 1, second.output);
      assert.match(second.stderr, new RegExp(`^callplane: another callplane process \\(pid ${serverPid}\\) is serving`, 'm'));
      process.kill(serverPid, 'SIGTERM');
    } finally {
      for (const p of parents) p.child.kill('SIGKILL');
    }
  });

  it('a pid file naming a live process that holds no lock does not block the start', async () => {
    const dir = tempDir();
    // This test runner is alive, and is not serving the directory (as a reused pid would be).
    fs.writeFileSync(path.join(dir, 'serve.pid'), `${process.pid}\n`);
    const p = await start(['serve'], { DATA_DIR: dir });
    try {
      await p.waitFor(/"msg":"ready"|^callplane: /m);
      assert.match(p.output(), READY);
      assert.equal(fs.readFileSync(path.join(dir, 'serve.pid'), 'utf8').trim(), String(p.child.pid));
    } finally {
      await p.stop();
    }
  });

  it('request logs never carry the token, however the query spells it', async () => {
    const { dataDir, token: firstToken } = await initializedDataDir();
    const p = await start(['serve'], { DATA_DIR: dataDir });
    try {
      await p.waitFor(READY);
      const t = encodeURIComponent(firstToken);
      const urls = [
        `/api/v2/account?token=${t}`,
        `/api/v2/account?targetAccountId=1&token=${t}`,
        `/api/v2/account?TOKEN=${t}`,
        `/api/v2/account?tok%65n=${t}`,
        `/api/v2/account?token=${t}&token=${t}`,
        `/api/v2/noSuchRoute?token=${t}`,
        `/api/v2/listResellers?token=${t}&targetPartnerId=abc`,
      ];
      const answers = [];
      for (const u of urls) answers.push((await get(p.port, u)).status);
      assert.equal(answers[3], 200, 'a percent-encoded key authenticates, so it must be redacted too');
      assert.equal((await get(p.port, '/api/v2/account', { authorization: `Bearer ${firstToken}` })).status, 200);
      await p.waitFor(/noSuchRoute/);
      await new Promise((r) => setTimeout(r, 200)); // let the last response lines flush
      assert.match(p.output(), /"url":"\/api\/v2\/account\?token=\[redacted\]"/, 'requests are logged, with the token redacted');
      assert.ok(!p.output().includes(firstToken), `the token appears in the output:\n${p.output()}`);
      assert.ok(!p.output().includes(t));
      assert.ok(!p.output().includes(firstToken.slice(4, 20)), 'not even a fragment of the token is logged');
    } finally {
      assert.equal((await p.stop()).code, 0);
    }
  });

  it('SIGTERM stops a serving process promptly with exit code 0, even with a request in flight', async () => {
    const { dataDir, token: firstToken } = await initializedDataDir();
    const p = await start(['serve'], { DATA_DIR: dataDir });
    await p.waitFor(READY);
    // A request whose body is only half sent when the signal arrives: surely in flight.
    const body = JSON.stringify({ description: 'in flight' });
    const req = http.request({
      host: '127.0.0.1', port: p.port, method: 'POST', path: `/api/v2/account?token=${encodeURIComponent(firstToken)}`,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    const inFlight = new Promise<{ status: number; text: string }>((resolve, reject) => {
      req.on('response', (res) => {
        let text = '';
        res.on('data', (c) => { text += c; });
        res.on('end', () => resolve({ status: res.statusCode!, text }));
      });
      req.on('error', reject);
    });
    req.write(body.slice(0, 5));
    await new Promise((r) => setTimeout(r, 200));
    const stopping = p.stop();
    await p.waitFor(/shutting down/);
    req.end(body.slice(5));
    const { code, signal, ms } = await stopping;
    assert.equal(code, 0, p.output());
    assert.equal(signal, null);
    assert.ok(ms < 10_000, `took ${ms} ms`);
    assert.match(p.output(), /shutting down/);
    const answer = await inFlight;
    assert.equal(answer.status, 200, `the request in flight is answered, not dropped: ${answer.text}`);
    assert.equal(JSON.parse(answer.text).success, true);
  });
});

/** The pid and its descendants, each with its command line (Linux /proc). */
function processTree(pid: number): { pid: number; cmd: string }[] {
  const parentOf = new Map<number, number>();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      parentOf.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch { /* exited meanwhile */ }
  }
  const pids = [pid];
  for (let i = 0; i < pids.length; i++) for (const [child, parent] of parentOf) if (parent === pids[i]) pids.push(child);
  return pids.filter((p) => parentOf.has(p)).map((p) => {
    let cmd = '';
    try { cmd = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').replaceAll('\0', ' ').trim(); } catch { /* exited meanwhile */ }
    return { pid: p, cmd };
  });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts `argv` (which must serve on its own), checks which process serves, sends SIGTERM to the
 * command itself and checks that the server stopped gracefully: exit code 0, "shutting down"
 * logged, the port closed, and not one process of its tree left running.
 */
async function sigtermStopsTheOneServer(argv: string[], expectedTree: RegExp[]) {
  const dataDir = tempDir();
  const p = await launch(argv, { DATA_DIR: dataDir });
  let tree: { pid: number; cmd: string }[] = [];
  try {
    await p.waitFor(READY);
    assert.equal((await get(p.port, '/healthz')).status, 200);
    tree = processTree(p.child.pid!);
    assert.equal(tree.length, expectedTree.length, `processes: ${JSON.stringify(tree)}`);
    tree.forEach((proc, i) => assert.match(proc.cmd, expectedTree[i], `processes: ${JSON.stringify(tree)}`));
    // The last process of the chain is the server: it holds the DATA_DIR's pid lock.
    const server = tree[tree.length - 1];
    assert.equal(fs.readFileSync(path.join(dataDir, 'serve.pid'), 'utf8').trim(), String(server.pid));
  } catch (err) {
    p.child.kill('SIGKILL');
    for (const proc of processTree(p.child.pid!)) process.kill(proc.pid, 'SIGKILL');
    throw err;
  }
  const { code, signal } = await p.stop();
  assert.equal(signal, null, p.output());
  assert.equal(code, 0, p.output());
  assert.match(p.output(), /"signal":"SIGTERM","msg":"shutting down"/);
  const left = tree.filter((proc) => isAlive(proc.pid));
  for (const proc of left) process.kill(proc.pid, 'SIGKILL');
  assert.deepEqual(left, [], 'no process of the tree is left running');
  await assert.rejects(get(p.port, '/healthz'), 'the port is closed');
  assert.ok(!fs.existsSync(path.join(dataDir, 'serve.pid')), 'the server stopped cleanly (it removed its pid file)');
}

describe('npm start and bin/callplane.js run the one server process', () => {
  it('SIGTERM to `npm start` stops the server gracefully, and nothing is left running', async () => {
    // npm runs the script through a shell; the script execs node, so the shell is not left in between:
    // the one process under npm is the script's command itself.
    const script = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
    assert.match(script, /^exec node .*dist\/main\.js serve$/);
    const server = new RegExp(`^${script.replace(/^exec /, '').replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}$`);
    await sigtermStopsTheOneServer(['npm', 'start', '--silent'], [/^npm start/, server]);
  });

  it('SIGTERM to `bin/callplane.js serve` stops the server, which is that same process', async () => {
    await sigtermStopsTheOneServer([process.execPath, path.join(ROOT, 'bin', 'callplane.js'), 'serve'], [/bin\/callplane\.js serve$/]);
  });
});

describe('callplane serve with CALLPLANE_ADMIN_TOKEN', () => {
  it('the given token works and is never printed, not even in request logs or errors', async () => {
    const dataDir = tempDir();
    const secret = `op-chosen-${crypto.randomBytes(16).toString('hex')}`;
    const p = await start(['serve'], { DATA_DIR: dataDir, CALLPLANE_ADMIN_TOKEN: secret });
    try {
      await p.waitFor(READY);
      const ok = await get(p.port, `/api/v2/account?token=${secret}`);
      assert.equal(ok.status, 200);
      assert.equal(ok.body.success, true);
      assert.equal((await get(p.port, `/api/v2/tokens?token=${secret}`)).status, 200);
      assert.equal((await get(p.port, `/api/v2/nope?token=${secret}`)).status, 404);
      assert.equal((await get(p.port, `/api/v2/account?token=${secret}x`)).status, 401);
      await new Promise((r) => setTimeout(r, 200));
      assert.doesNotMatch(p.output(), TOKEN_RE, 'no generated token is printed either');
      assert.ok(!fs.existsSync(path.join(dataDir, 'admin-token')), 'no token file is written');
    } finally {
      assert.equal((await p.stop()).code, 0);
    }
    assert.ok(!p.output().includes(secret), `the token appears in the output:\n${p.output()}`);
    assert.match(p.output(), /"msg":"ready"/);
  });

  it('a CALLPLANE_ADMIN_TOKEN shorter than 24 characters is refused with exit code 2, without echoing it', async () => {
    const r = await run(['serve'], { DATA_DIR: tempDir(), CALLPLANE_ADMIN_TOKEN: 'short-secret-1' });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /CALLPLANE_ADMIN_TOKEN must be at least 24 characters/);
    assert.ok(!r.output.includes('short-secret-1'));
  });
});

describe('callplane roles and commands', () => {
  it('--role api serves HTTP', async () => {
    const p = await start(['serve', '--role', 'api'], { DATA_DIR: tempDir() });
    try {
      await p.waitFor(READY);
      const res = await get(p.port, '/healthz');
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { status: 'ok' });
      assert.equal((await get(p.port, '/readyz')).body.status, 'ready');
    } finally {
      assert.equal((await p.stop()).code, 0);
    }
  });

  it('--role worker does not listen, and stops on SIGTERM with code 0', async () => {
    const p = await start(['serve', '--role', 'worker'], { DATA_DIR: tempDir() });
    try {
      await p.waitFor(READY);
      assert.match(p.output(), /"role":"worker"/);
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal(p.child.exitCode, null, `a worker keeps running until it is told to stop:\n${p.output()}`);
      await assert.rejects(get(p.port, '/healthz'), 'nothing listens on the port');
    } finally {
      const { code, ms } = await p.stop();
      assert.equal(code, 0);
      assert.ok(ms < 5000, `took ${ms} ms`);
    }
  });

  it('--role nope exits 2 and says which roles exist', async () => {
    const r = await run(['serve', '--role', 'nope'], { DATA_DIR: tempDir() });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--role must be api, worker or all/);
    assert.match(r.stderr, /nope/);
    assert.doesNotMatch(r.output, /\n\s+at /, 'no stack trace');
  });

  it('an unknown command exits 2 with the usage', async () => {
    const r = await run(['frobnicate'], { DATA_DIR: tempDir() });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /usage: callplane/);
  });

  it('migrate applies the migrations once, then reports the database up to date', async () => {
    const dataDir = tempDir();
    const first = await run(['migrate'], { DATA_DIR: dataDir });
    assert.equal(first.code, 0, first.output);
    assert.match(first.stdout, /applied: \S+/);
    assert.ok(fs.existsSync(path.join(dataDir, 'callplane.db')));
    const second = await run(['migrate'], { DATA_DIR: dataDir });
    assert.equal(second.code, 0, second.output);
    assert.match(second.stdout, /database is up to date/);
  });

  it('a DATABASE_URL that is not PostgreSQL, or not a URL, exits 2 with a clear message and no password', async () => {
    for (const url of ['mysql://root:hunter2pw@localhost/db', 'postgres://u:hunter2pw@[not-a-host/db']) {
      for (const cmd of [['serve'], ['migrate']]) {
        const r = await run(cmd, { DATA_DIR: tempDir(), DATABASE_URL: url });
        assert.equal(r.code, 2, `${url} ${cmd.join(' ')}: ${r.output}`);
        assert.match(r.stderr, /^callplane: DATABASE_URL (must start with postgres|is not a valid URL)/m);
        assert.ok(!r.output.includes('hunter2pw'), 'the password is not echoed');
        assert.doesNotMatch(r.output, /\n\s+at /, 'no stack trace');
      }
    }
  });

  it('an unreachable PostgreSQL exits non-zero with one line naming the database, without the password', async () => {
    const port = await freePort(); // nothing listens there
    const r = await run(['serve'], { DATA_DIR: tempDir(), DATABASE_URL: `postgres://u:hunter2pw@127.0.0.1:${port}/db` });
    assert.equal(r.code, 1, r.output);
    assert.match(r.stderr, new RegExp(`^callplane: cannot use the database postgres://127\\.0\\.0\\.1:${port}/db: .*ECONNREFUSED`, 'm'));
    assert.ok(!r.output.includes('hunter2pw'));
    assert.doesNotMatch(r.output, /\n\s+at /, 'no stack trace');
  });

  it('a port already in use exits 1 with a clear message', async () => {
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const r = await run(['serve', '--role', 'api'], { DATA_DIR: tempDir(), PORT: String(port) });
      assert.equal(r.code, 1, r.output);
      assert.match(r.stderr, new RegExp(`^callplane: cannot listen on 127\\.0\\.0\\.1:${port}: .*EADDRINUSE`, 'm'));
    } finally {
      blocker.close();
    }
  });
});

describe('callplane serve (PostgreSQL)', { skip: PG_URL ? false : 'set TEST_DATABASE_URL=postgres://… to run the PostgreSQL half' }, () => {
  it('the first start on a fresh PostgreSQL database prints a token that authenticates; SIGTERM exits 0', async () => {
    const scratch = await createScratchPgDatabase(PG_URL!, 'callplane_proc');
    const url = scratch.url;
    try {
      const dataDir = tempDir();
      const p = await start(['serve'], { DATA_DIR: dataDir, DATABASE_URL: url.toString(), CALLPLANE_SECRET_KEY: crypto.randomBytes(32).toString('base64') });
      let token = '';
      try {
        await p.waitFor(READY);
        token = (p.stdout().match(TOKEN_RE) ?? [''])[0];
        assert.ok(token, `no token printed:\n${p.output()}`);
        const res = await get(p.port, `/api/v2/account?token=${token}`);
        assert.equal(res.status, 200);
        const ready = await get(p.port, '/readyz');
        assert.equal(ready.body.database, 'postgres');
      } finally {
        const { code } = await p.stop();
        assert.equal(code, 0);
      }
      assert.equal(p.output().split(token).length - 1, 1, 'the token is printed once and never logged');
      // A second process on the same database finds the partner and prints nothing.
      const again = await start(['serve', '--role', 'api'], { DATA_DIR: tempDir(), DATABASE_URL: url.toString(), CALLPLANE_SECRET_KEY: crypto.randomBytes(32).toString('base64') });
      try {
        await again.waitFor(READY);
        assert.doesNotMatch(again.output(), TOKEN_RE);
        assert.equal((await get(again.port, `/api/v2/account?token=${token}`)).status, 200);
      } finally {
        assert.equal((await again.stop()).code, 0);
      }
    } finally {
      await scratch.drop();
    }
  });
});
