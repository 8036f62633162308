// OpenSSH's sshd (Debian's openssh-server) as the tests' SFTP server: on 127.0.0.1 and a free high
// port, a throw-away host key and config in a temp dir, password authentication for the throw-away
// account of transfer-user.ts only, and nothing but SFTP (internal-sftp). It can be stopped and
// started again on the same port (a server that is down for a while).
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { TRANSFER_USER } from './transfer-user.ts';
import { freePort, sleep } from './wait.ts';

export const SSHD = '/usr/sbin/sshd';

export interface SftpServer {
  port: number;
  dir: string;
  /** What sshd wrote (its log goes to stderr). */
  output(): string;
  /** The listening sshd's process id (its sessions are its descendants), while it runs. */
  pid(): number | undefined;
  stop(): Promise<void>;
  start(): Promise<void>;
}

async function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

export async function startSftpServer(): Promise<SftpServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-sshd-'));
  fs.chmodSync(dir, 0o755); // the account reaches its upload directory inside
  const port = await freePort();
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(dir, 'host_ed25519')]);
  fs.mkdirSync('/run/sshd', { recursive: true }); // privilege separation directory
  fs.writeFileSync(path.join(dir, 'sshd_config'), [
    `Port ${port}`, 'ListenAddress 127.0.0.1', `HostKey ${dir}/host_ed25519`, `PidFile ${dir}/sshd.pid`,
    'PasswordAuthentication yes', 'KbdInteractiveAuthentication no', 'PubkeyAuthentication no', 'UsePAM no',
    'PermitRootLogin no', `AllowUsers ${TRANSFER_USER}`, 'StrictModes no',
    'Subsystem sftp internal-sftp', 'ForceCommand internal-sftp', 'AllowTcpForwarding no', 'X11Forwarding no',
    'LogLevel INFO', '',
  ].join('\n'));
  let child: ChildProcess | undefined;
  let out = '';
  const server: SftpServer = {
    port, dir,
    output: () => out,
    pid: () => child?.pid,
    async start() {
      if (child) return;
      const c = spawn(SSHD, ['-D', '-e', '-f', path.join(dir, 'sshd_config')], { stdio: ['ignore', 'pipe', 'pipe'] });
      child = c;
      c.stdout!.on('data', (b) => { out += b; });
      c.stderr!.on('data', (b) => { out += b; });
      c.once('exit', () => { if (child === c) child = undefined; });
      const deadline = Date.now() + 10_000;
      while (!(await listening(port))) {
        if (c.exitCode !== null) throw new Error(`sshd exited with ${c.exitCode}:\n${out}`);
        if (Date.now() > deadline) throw new Error(`sshd not listening within 10 s:\n${out}`);
        await sleep(25);
      }
    },
    async stop() {
      const c = child;
      if (!c) return;
      child = undefined;
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      await exited;
      // Sessions sshd had forked end with their connections; wait until the port is free.
      while (await listening(port)) await sleep(25);
    },
  };
  await server.start();
  return server;
}
