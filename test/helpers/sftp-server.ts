// OpenSSH's sshd (Debian's openssh-server) as the tests' SFTP server: on 127.0.0.1 and a free high
// port, a throw-away host key and config in a temp dir, password authentication for the throw-away
// account of transfer-user.ts only, and nothing but SFTP (internal-sftp). It can be stopped and
// started again on the same port (a server that is down for a while).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TRANSFER_USER } from './transfer-user.ts';
import { loopbackDaemon } from './loopback-daemon.ts';
import { freePort } from './wait.ts';

export const SSHD = '/usr/sbin/sshd';

export interface SftpServer {
  port: number;
  dir: string;
  /** Its host key's fingerprint as OpenSSH prints it (`ssh-keygen -lf`): `SHA256:…`. */
  hostKeyFingerprint: string;
  /** What sshd wrote (its log goes to stderr). */
  output(): string;
  /** The listening sshd's process id (its sessions are its descendants), while it runs. */
  pid(): number | undefined;
  stop(): Promise<void>;
  start(): Promise<void>;
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
  const hostKeyFingerprint = execFileSync('ssh-keygen', ['-l', '-f', path.join(dir, 'host_ed25519.pub')], { encoding: 'utf8' }).split(' ')[1]!;
  const daemon = loopbackDaemon('sshd', SSHD, ['-D', '-e', '-f', path.join(dir, 'sshd_config')], port);
  const server: SftpServer = {
    port, dir, hostKeyFingerprint,
    output: daemon.output,
    pid: daemon.pid,
    start: daemon.start,
    stop: daemon.stop,
  };
  await server.start();
  return server;
}
