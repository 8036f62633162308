// vsftpd (Debian's vsftpd) as the tests' FTP and FTPS server: standalone on 127.0.0.1 and a free
// high port, a throw-away config in a temp dir, the throw-away local account of transfer-user.ts,
// and with `tls` explicit FTPS (AUTH TLS, required for the login and the data) over a throw-away
// certificate that openssl makes for 127.0.0.1. Its protocol log records every command (how many
// times a file was stored). It can be stopped and started again.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loopbackDaemon } from './loopback-daemon.ts';
import { freePort } from './wait.ts';

export const VSFTPD = '/usr/sbin/vsftpd';

export interface FtpServer {
  port: number;
  dir: string;
  /** The certificate clients must trust (tls only). */
  caFile?: string;
  /** vsftpd's protocol log so far. */
  log(): string;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startFtpServer(opts: { tls?: boolean } = {}): Promise<FtpServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-vsftpd-'));
  fs.chmodSync(dir, 0o755);
  const port = await freePort();
  const empty = path.join(dir, 'empty');
  fs.mkdirSync(empty, { mode: 0o755 });
  const logFile = path.join(dir, 'vsftpd.log');
  const lines = [
    'listen=YES', 'listen_ipv6=NO', 'listen_address=127.0.0.1', `listen_port=${port}`, 'background=NO',
    'anonymous_enable=NO', 'local_enable=YES', 'write_enable=YES', 'local_umask=022', 'pam_service_name=vsftpd',
    'seccomp_sandbox=NO', `secure_chroot_dir=${empty}`, 'chroot_local_user=NO', 'pasv_enable=YES', 'pasv_address=127.0.0.1',
    'userlist_enable=NO', 'check_shell=NO', `local_root=${dir}`, 'connect_from_port_20=NO', 'dirmessage_enable=NO',
    `vsftpd_log_file=${logFile}`, 'xferlog_enable=YES', 'xferlog_std_format=NO', 'log_ftp_protocol=YES',
  ];
  let caFile: string | undefined;
  if (opts.tls) {
    caFile = path.join(dir, 'cert.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=127.0.0.1',
      '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', path.join(dir, 'key.pem'), '-out', caFile], { stdio: 'pipe' });
    lines.push('ssl_enable=YES', `rsa_cert_file=${caFile}`, `rsa_private_key_file=${path.join(dir, 'key.pem')}`,
      'force_local_logins_ssl=YES', 'force_local_data_ssl=YES', 'ssl_tlsv1=NO', 'ssl_sslv2=NO', 'ssl_sslv3=NO',
      'require_ssl_reuse=NO', 'allow_anon_ssl=NO');
  }
  const conf = path.join(dir, 'vsftpd.conf');
  fs.writeFileSync(conf, `${lines.join('\n')}\n`, { mode: 0o600 });
  const daemon = loopbackDaemon('vsftpd', VSFTPD, [conf], port);
  const server: FtpServer = {
    port, dir, caFile,
    log: () => { try { return fs.readFileSync(logFile, 'utf8'); } catch { return ''; } },
    start: daemon.start,
    stop: daemon.stop,
  };
  await server.start();
  return server;
}
