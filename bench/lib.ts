// Shared pieces of the benchmarks: start a real callplane process on a fresh database of either
// engine, and measure an HTTP route with autocannon from this (separate) process.
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { createScratchPgDatabase } from '../test/helpers/scratch-pg.ts';

export type Engine = 'sqlite' | 'postgres';
export const PG_URL = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL;
export const ENGINES: Engine[] = PG_URL ? ['sqlite', 'postgres'] : ['sqlite'];

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
  stop(): Promise<void>;
}

export async function startServer(engine: Engine, role = 'api', extraEnv: Record<string, string> = {}): Promise<Server> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-bench-'));
  const port = await freePort();
  const token = `cpl_bench_${crypto.randomBytes(24).toString('base64url')}`;
  let drop = async () => {};
  const env: Record<string, string> = {
    ...process.env as Record<string, string>, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1',
    CALLPLANE_ADMIN_TOKEN: token, LOG_LEVEL: 'warn', ...extraEnv,
  };
  delete env.DATABASE_URL;
  if (engine === 'postgres') {
    const scratch = await createScratchPgDatabase(PG_URL!, 'callplane_bench');
    drop = scratch.drop;
    env.DATABASE_URL = scratch.url;
  }
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve', '--role', role], {
    env, stdio: ['ignore', 'ignore', 'inherit'], cwd: path.resolve(import.meta.dirname, '..'),
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
    url, token, engine,
    async stop() {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      await drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
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
    requestsPerSec: result.requests.average, p50: result.latency.p50, p99: result.latency.p99,
    errors: result.errors + result.timeouts, non2xx: result.non2xx,
  };
}

export const fmt = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 0 });
