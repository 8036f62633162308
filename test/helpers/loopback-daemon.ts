// A server program the tests run on a loopback port (sshd, vsftpd): started, waited for until it
// listens, stopped (on its exit, SIGKILL after a short grace) and waited for until its port is free (sessions it forked end with their
// connections), and restarted as often as a test wants (a server down for a while).
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { stopChild } from './children.ts';
import { sleep } from './wait.ts';

export interface LoopbackDaemon {
  start: () => Promise<void>;
  stop: () => Promise<void>;
  /** What it wrote to stdout and stderr so far. */
  output: () => string;
  /** The listening process's id, while it runs. */
  pid: () => number | undefined;
}

export async function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

export function loopbackDaemon(name: string, command: string, args: string[], port: number): LoopbackDaemon {
  let child: ChildProcess | undefined;
  let out = '';
  return {
    output: () => out,
    pid: () => child?.pid,
    start: async () => {
      if (child) return;
      const c = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      child = c;
      c.stdout!.on('data', (b) => { out += b; });
      c.stderr!.on('data', (b) => { out += b; });
      c.once('exit', () => { if (child === c) child = undefined; });
      const deadline = Date.now() + 10_000;
      while (!(await listening(port))) {
        if (c.exitCode !== null) throw new Error(`${name} exited with ${c.exitCode}:\n${out}`);
        if (Date.now() > deadline) throw new Error(`${name} not listening within 10 s:\n${out}`);
        await sleep(25);
      }
    },
    stop: async () => {
      const c = child;
      if (!c) return;
      child = undefined;
      await stopChild(c, 3000);
      // Its port free again (bounded: a session it forked may hold it a moment).
      const deadline = Date.now() + 5000;
      while (await listening(port)) {
        if (Date.now() > deadline) throw new Error(`${name} exited but port ${port} still answers`);
        await sleep(25);
      }
    },
  };
}
