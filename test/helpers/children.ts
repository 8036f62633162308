// The child processes of this test process, from /proc (Linux): to check that a program we
// started and stopped is gone, neither running nor left a zombie that nobody reaped. And how a
// program the tests started is stopped: on its exit, not after a fixed sleep.
import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { within } from './wait.ts';

export interface ChildProcessInfo {
  pid: number;
  /** The program's name as the kernel keeps it (at most 15 characters). */
  comm: string;
  /** R running, S sleeping, Z zombie, … */
  state: string;
}

/** The processes whose parent is `parent` (default: this process). */
export function childrenOf(parent = process.pid): ChildProcessInfo[] {
  const out: ChildProcessInfo[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${e}/stat`, 'utf8');
    } catch {
      continue; // it exited while we looked
    }
    // pid (comm) state ppid …; comm may hold spaces and parentheses, so split at the last ')'.
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    const [state, ppid] = stat.slice(close + 2).split(' ');
    if (Number(ppid) === parent) out.push({ pid: Number(e), comm, state: state ?? '?' });
  }
  return out;
}

/** Whether process `pid` still exists (running or a zombie). */
export function processExists(pid: number): boolean {
  try {
    readFileSync(`/proc/${pid}/stat`);
    return true;
  } catch {
    return false;
  }
}

/**
 * Stops a program the tests started and waits for its exit: SIGTERM, then SIGKILL if it has not
 * exited within `graceMs` (a program that ignores SIGTERM, or is slow to). Returns at once when it
 * has exited already. `signal` sends a signal (default: to the child; a detached child's whole
 * process group can be signalled instead).
 */
export async function stopChild(child: ChildProcess, graceMs: number, signal = (s: NodeJS.Signals) => { child.kill(s); }): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<true>((resolve) => child.once('exit', () => resolve(true)));
  signal('SIGTERM');
  if (await within(exited, graceMs, () => false)) return;
  signal('SIGKILL');
  await exited;
}
