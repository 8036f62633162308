// Startup: how long `npm start` (or another command) takes from spawn to a 200 from /healthz on a
// fresh SQLite DATA_DIR, and how much memory the idle service holds (the resident set of every
// process in its tree, and of the one that listens). Then SIGTERM to the command, and a check
// that every process of the tree is gone.
//
// Against a baseline in the same run, alternating with it: a bare Node HTTP server started the same
// way (spawned, polled on /healthz), so the ratio moves with our start-up and not with how busy
// the machine is. Also the CPU time the server process had used when it was ready (user + system,
// from /proc), which outside load moves much less than the wall-clock time.
//
//   npm run bench:startup                      # `npm start`, 5 runs
//   npm run bench:startup -- --runs 10 -- node bin/callplane.js serve
//   BENCH_SERVER_DIR=/other/checkout npm run bench:startup   # the same against another checkout
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { cpuSecondsOf, freePort, serveArgs, SERVER_DIR } from './lib.ts';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { runs: { type: 'string', default: '5' }, idle: { type: 'string', default: '3000' } } });
const runs = Number(values.runs);
const idleMs = Number(values.idle);
const command = positionals.length ? positionals : ['npm', 'start'];

/** pid → parent pid of every process on the machine (Linux /proc). */
function parents(): Map<number, number> {
  const out = new Map<number, number>();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      out.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch { /* gone meanwhile */ }
  }
  return out;
}

/** The pid and all its descendants. */
function tree(pid: number): number[] {
  const pp = parents();
  const found = [pid];
  for (let i = 0; i < found.length; i++) for (const [child, parent] of pp) if (parent === found[i]) found.push(child);
  return found.filter((p) => pp.has(p));
}

function status(pid: number): { name: string; rssKb: number } {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return { name: /^Name:\s+(.*)$/m.exec(text)?.[1] ?? '?', rssKb: Number(/^VmRSS:\s+(\d+)/m.exec(text)?.[1] ?? 0) };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function healthy(port: number): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    await res.arrayBuffer();
    return res.status === 200;
  } catch {
    return false;
  }
}

interface Run { readyMs: number; cpuMs: number; processes: string; treeRssMb: number; serverRssMb: number; exit: string; leftOver: number[] }

/** The baseline: a Node process that does nothing but answer /healthz. */
const BARE_SERVER = `require('node:http').createServer((q, s) => { s.statusCode = q.url === '/healthz' ? 200 : 404; s.end('{}'); })
  .listen(Number(process.env.PORT), '127.0.0.1'); process.on('SIGTERM', () => process.exit(0));`;

/** Spawn → the first 200 from /healthz of a bare Node server, ms. */
async function baseline(): Promise<number> {
  const port = await freePort();
  const t0 = performance.now();
  const child = spawn(process.execPath, ['-e', BARE_SERVER], { env: { ...process.env, PORT: String(port) }, stdio: 'ignore' });
  try {
    while (!(await healthy(port))) {
      if (child.exitCode !== null) throw new Error(`the bare server exited with ${child.exitCode}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    return performance.now() - t0;
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
  }
}

async function once(): Promise<Run> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-startup-'));
  const port = await freePort();
  const t0 = performance.now();
  const child = spawn(command[0], command.slice(1), {
    cwd: SERVER_DIR,
    env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', CALLPLANE_SIP_PORT: '0', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<string>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? String(code))));
  try {
    while (!(await healthy(port))) {
      if (child.exitCode !== null) throw new Error(`${command.join(' ')} exited with ${child.exitCode} before it was ready`);
      if (performance.now() - t0 > 60_000) throw new Error('not ready within 60 s');
      await new Promise((r) => setTimeout(r, 10));
    }
    const readyMs = performance.now() - t0;
    // The deepest process of the tree is the one that answered.
    const cpuMs = cpuSecondsOf(tree(child.pid!).at(-1)) * 1000;
    await new Promise((r) => setTimeout(r, idleMs));
    const pids = tree(child.pid!);
    const procs = pids.map((p) => ({ pid: p, ...status(p) }));
    // The process that answers HTTP is the deepest one (the end of the chain).
    const server = procs[procs.length - 1];
    child.kill('SIGTERM');
    const exit = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r('no exit in 20 s'), 20_000))]);
    await new Promise((r) => setTimeout(r, 500));
    const leftOver = pids.filter(alive);
    for (const p of leftOver) process.kill(p, 'SIGKILL');
    return {
      readyMs,
      cpuMs,
      processes: procs.map((p) => p.name).join(' → '),
      treeRssMb: procs.reduce((s, p) => s + p.rssKb, 0) / 1024,
      serverRssMb: server.rssKb / 1024,
      exit,
      leftOver,
    };
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

// dist/ built from the checkout's sources first (tsc, as the other benchmarks do), so the code measured is the code there.
serveArgs('all');

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

console.log(`startup of \`${command.join(' ')}\` in ${SERVER_DIR}, fresh SQLite DATA_DIR, ${runs} runs (load average ${os.loadavg()[0].toFixed(2)})`);
const results: Run[] = [];
const bases: number[] = [];
for (let i = 0; i < runs; i++) {
  const base = await baseline();
  bases.push(base);
  const r = await once();
  results.push(r);
  console.log(`  run ${i + 1}: ready in ${r.readyMs.toFixed(0)} ms (bare Node server: ${base.toFixed(0)} ms), server CPU at ready ${r.cpuMs.toFixed(0)} ms; ${r.processes}; RSS tree ${r.treeRssMb.toFixed(1)} MB, server ${r.serverRssMb.toFixed(1)} MB; SIGTERM → exit ${r.exit}; left running: ${r.leftOver.length ? r.leftOver.join(', ') : 'none'}`);
}
const readyMedian = median(results.map((r) => r.readyMs));
const baseMedian = median(bases);
console.log(`median: ready in ${readyMedian.toFixed(0)} ms, ${(readyMedian / baseMedian).toFixed(1)}× a bare Node server's ${baseMedian.toFixed(0)} ms (load average now ${os.loadavg()[0].toFixed(2)}); server CPU at ready ${median(results.map((r) => r.cpuMs)).toFixed(0)} ms; idle RSS ${median(results.map((r) => r.treeRssMb)).toFixed(1)} MB for the whole tree, ${median(results.map((r) => r.serverRssMb)).toFixed(1)} MB for the server process`);
if (results.some((r) => r.leftOver.length)) {
  console.log('some processes were left running after SIGTERM (killed now)');
  process.exitCode = 1;
}
