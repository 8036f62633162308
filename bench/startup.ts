// Startup: how long `npm start` (or another command) takes from spawn to a 200 from /healthz on a
// fresh SQLite DATA_DIR, and how much memory the idle service holds (the resident set of every
// process in its tree, and of the one that listens). Then SIGTERM to the command, and a check
// that every process of the tree is gone.
//
//   npm run bench:startup                      # `npm start`, 5 runs
//   npm run bench:startup -- --runs 10 -- node bin/callplane.js serve
//   BENCH_SERVER_DIR=/other/checkout npm run bench:startup   # the same against another checkout
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, SERVER_DIR } from './lib.ts';

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

interface Run { readyMs: number; processes: string; treeRssMb: number; serverRssMb: number; exit: string; leftOver: number[] }

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

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

console.log(`startup of \`${command.join(' ')}\` in ${SERVER_DIR}, fresh SQLite DATA_DIR, ${runs} runs (load average ${os.loadavg()[0].toFixed(2)})`);
const results: Run[] = [];
for (let i = 0; i < runs; i++) {
  const r = await once();
  results.push(r);
  console.log(`  run ${i + 1}: ready in ${r.readyMs.toFixed(0)} ms; ${r.processes}; RSS tree ${r.treeRssMb.toFixed(1)} MB, server ${r.serverRssMb.toFixed(1)} MB; SIGTERM → exit ${r.exit}; left running: ${r.leftOver.length ? r.leftOver.join(', ') : 'none'}`);
}
console.log(`median: ready in ${median(results.map((r) => r.readyMs)).toFixed(0)} ms; idle RSS ${median(results.map((r) => r.treeRssMb)).toFixed(1)} MB for the whole tree, ${median(results.map((r) => r.serverRssMb)).toFixed(1)} MB for the server process`);
if (results.some((r) => r.leftOver.length)) {
  console.log('some processes were left running after SIGTERM (killed now)');
  process.exitCode = 1;
}
