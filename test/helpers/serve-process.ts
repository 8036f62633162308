// `callplane serve` as a real child process (under tsx, from the checkout's src/), for the tests
// that kill and restart the service: started with a clean environment, ready once it logs so.
import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, sleep } from './wait.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const READY = /"msg":"ready"/;
const live = new Set<ChildProcess>();

export interface ServeProcess {
  child: ChildProcess;
  port: number;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** `serve --role <role>` with only PATH, HOME, HOST, PORT, LOG_LEVEL and `env`; resolves once it logs its ready line. */
export async function startServe(role: 'all' | 'api' | 'worker', env: Record<string, string>): Promise<ServeProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve', '--role', role], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: os.tmpdir(), HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', CALLPLANE_METRICS_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  let out = '';
  child.stdout!.on('data', (b) => { out += b; });
  child.stderr!.on('data', (b) => { out += b; });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => { live.delete(child); resolve({ code, signal }); }));
  const deadline = Date.now() + 30_000;
  while (!READY.test(out)) {
    if (child.exitCode !== null) throw new Error(`${role} exited with ${child.exitCode} before ready:\n${out}`);
    if (Date.now() > deadline) throw new Error(`${role} not ready within 30 s:\n${out}`);
    await sleep(50);
  }
  return { child, port, output: () => out, exited };
}

/** SIGTERM, and waits until it has exited (nothing when it already has). */
export async function stopServe(p: ServeProcess): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  p.child.kill('SIGTERM');
  await p.exited;
}

/** SIGKILLs every serve process still running (a test's `after`). */
export function killServes(): void {
  for (const c of live) c.kill('SIGKILL');
}

/** A JSON request to the process's API with a bearer token; the body parsed when it is JSON. */
export async function serveRequest(port: number, token: string, method: string, url: string, body?: unknown) {
  const res = await fetch(`http://127.0.0.1:${port}${url}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any = text;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body: json };
}
