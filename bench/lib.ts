// Shared pieces of the benchmarks: start a real callplane process on a fresh database of either
// engine, and measure an HTTP route with autocannon from this (separate) process.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { createScratchPgDatabase } from '../test/helpers/scratch-pg.ts';

export type Engine = 'sqlite' | 'postgres';
/** The checkout whose callplane the benchmarks start (BENCH_SERVER_DIR compares another one, e.g. a worktree of an older commit). */
export const SERVER_DIR = path.resolve(process.env.BENCH_SERVER_DIR ?? path.join(import.meta.dirname, '..'));
export const PG_URL = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL;
export const ENGINES: Engine[] = PG_URL ? ['sqlite', 'postgres'] : ['sqlite'];

let built = false;
/**
 * The command line of `serve --role <role>` as `npm start` runs it: node with the start script's
 * flags (package.json) on the compiled dist/, which is built first (once per benchmark process),
 * so what is measured is the code of the checkout, started the way users start it.
 */
export function serveArgs(role: string): string[] {
  if (!built) {
    const tsc = spawnSync(process.execPath, [path.join(SERVER_DIR, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: SERVER_DIR, stdio: 'inherit' });
    if (tsc.status !== 0) throw new Error(`building ${SERVER_DIR} failed`);
    built = true;
  }
  const start = (JSON.parse(fs.readFileSync(path.join(SERVER_DIR, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
  const m = /\bnode\b(.*?)\bdist\/main\.js\s+serve\b/.exec(start);
  if (!m) throw new Error(`the start script does not run dist/main.js serve: ${start}`);
  return [...m[1].split(/\s+/).filter(Boolean), 'dist/main.js', 'serve', '--role', role];
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

export interface Server {
  url: string;
  token: string;
  engine: Engine;
  store: Store;
  /** CPU seconds (user + system) the server process has used so far (Linux; NaN elsewhere). */
  cpuSeconds(): number;
  /** The server process's id (its memory in /proc/<pid>/status). */
  pid: number | undefined;
  stop(): Promise<void>;
}

/** utime + stime of a process, from /proc (clock ticks of 1/100 s on Linux). */
export function cpuSecondsOf(pid: number | undefined): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

/** A fresh database of one engine (a DATA_DIR, plus a scratch PostgreSQL database) that several processes may share. */
export interface Store {
  engine: Engine;
  dataDir: string;
  databaseUrl?: string;
  /** The partner token every process of this store is started with. */
  token: string;
  /** The environment a callplane process on this store needs. */
  env: Record<string, string>;
  drop(): Promise<void>;
}

export async function createStore(engine: Engine): Promise<Store> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-bench-'));
  const token = `cpl_bench_${crypto.randomBytes(24).toString('base64url')}`;
  const env: Record<string, string> = {
    ...process.env as Record<string, string>, DATA_DIR: dataDir, HOST: '127.0.0.1', CALLPLANE_ADMIN_TOKEN: token,
    // Every process sharing a database needs the same key.
    CALLPLANE_SECRET_KEY: crypto.randomBytes(32).toString('hex'), LOG_LEVEL: 'warn',
    // Several processes run side by side and none of the benchmarks uses SIP: keep them off its port.
    CALLPLANE_SIP_ENABLED: 'false',
    // The benchmarks measure throughput from one address with one token, far past the default
    // rate limits; bench/rate-limit.ts sets its own.
    CALLPLANE_RATE_LIMIT_PER_TOKEN: '0', CALLPLANE_RATE_LIMIT_PER_ADDRESS: '0',
  };
  delete env.DATABASE_URL;
  let dropDb = async () => {};
  let databaseUrl: string | undefined;
  if (engine === 'postgres') {
    const scratch = await createScratchPgDatabase(PG_URL!, 'callplane_bench');
    dropDb = scratch.drop;
    env.DATABASE_URL = databaseUrl = scratch.url;
  }
  return {
    engine, dataDir, databaseUrl, token, env,
    async drop() {
      await dropDb();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface Proc {
  /** CPU seconds the process has used so far (Linux; NaN elsewhere). */
  cpuSeconds(): number;
  stop(): Promise<void>;
}

/** CPU seconds used so far by every local process named `postgres` (the server, when it runs on this machine). */
export function postgresCpuSeconds(): number {
  let total = 0;
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres') total += cpuSecondsOf(Number(pid));
    } catch { /* gone meanwhile */ }
  }
  return total;
}

/**
 * Starts `callplane serve --role worker` on a store; resolves once it logged 'ready' (the runner
 * has started). A worker logs at info only at start and for maintenance jobs, so info costs nothing.
 */
export async function startWorker(store: Store, extraEnv: Record<string, string> = {}): Promise<Proc> {
  const child: ChildProcess = spawn(process.execPath, serveArgs('worker'), {
    env: { ...store.env, LOG_LEVEL: 'info', ...extraEnv }, stdio: ['ignore', 'pipe', 'inherit'], cwd: SERVER_DIR,
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  await new Promise<void>((resolve, reject) => {
    let buffered = '';
    let ready = false;
    const timer = setTimeout(() => reject(new Error('serve --role worker did not start')), 30_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines) {
        if (!ready && line.includes('"msg":"ready"')) {
          ready = true;
          clearTimeout(timer);
          resolve();
        } else if (/"level":(40|50|60)/.test(line)) {
          process.stderr.write(`worker: ${line}\n`);
        }
      }
    });
    void exited.then((code) => {
      if (!ready) { clearTimeout(timer); reject(new Error(`serve --role worker exited with ${code}`)); }
    });
  });
  return {
    cpuSeconds: () => cpuSecondsOf(child.pid),
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * A callplane API process on a fresh database. The process logs at warn so request logging
 * costs nothing; readiness is polled on /readyz.
 */
export async function startServer(engine: Engine, role = 'api', extraEnv: Record<string, string> = {}, store?: Store): Promise<Server> {
  const own = !store;
  const s = store ?? await createStore(engine);
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, serveArgs(role), {
    env: { ...s.env, PORT: String(port), ...extraEnv }, stdio: ['ignore', 'ignore', 'inherit'], cwd: SERVER_DIR,
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) break;
    } catch { /* not up yet */ }
    if (i > 200) throw new Error('server did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url, token: s.token, engine: s.engine, store: s,
    cpuSeconds: () => cpuSecondsOf(child.pid),
    pid: child.pid,
    async stop() {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      if (own) await s.drop();
    },
  };
}

export interface Measured { requestsPerSec: number; p50: number; p99: number; errors: number; non2xx: number }

export async function measure(url: string, opts: { seconds?: number; connections?: number; method?: string; body?: string } = {}): Promise<Measured> {
  const result = await autocannon({
    url, duration: opts.seconds ?? 8, connections: opts.connections ?? 32, pipelining: 1,
    method: (opts.method ?? 'GET') as any, body: opts.body,
    headers: opts.body ? { 'content-type': 'application/json' } : undefined,
  });
  return {
    // Completed requests over the run (requests.average is a mean of per-second samples, coarse in short runs).
    requestsPerSec: result.requests.total / result.duration, p50: result.latency.p50, p99: result.latency.p99,
    errors: result.errors + result.timeouts, non2xx: result.non2xx,
  };
}

export const fmt = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 0 });

/** The p-th percentile (0–100) of values, nearest rank. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** One API call with a JSON body, as the bench's setup makes them; a non-2xx answer throws, naming it. */
export async function api(server: Server, method: string, url: string, query: Record<string, unknown>, body?: unknown, token = server.token) {
  const qs = new URLSearchParams({ token, ...Object.fromEntries(Object.entries(query).map(([k, v]) => [k, String(v)])) });
  const res = await fetch(`${server.url}${url}?${qs}`, {
    method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json() as any;
  if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}
