// Ships one file to an export's server, exactly once: SFTP (ssh2-sftp-client), FTP and explicit
// FTPS (basic-ftp, AUTH TLS). The host passes the address policy at connect time (resolved here
// once, every address checked, the connection made to the checked address; FTP data connections
// go to that address only). The file goes up under a temporary name and is renamed to its final
// name once complete (a rename is atomic on the server), so a file under its final name is always
// whole: an attempt that finds it there (an earlier attempt's, whose worker died before recording
// it) uploads nothing. The password is never part of a message (`scrub`).
import dns from 'node:dns';
import fs from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import type * as BasicFtp from 'basic-ftp';
import type SftpClientClass from 'ssh2-sftp-client';
import type { AdrProtocol } from '../../db/types.ts';
import { addressRefusal, TargetRefusedError, type RefusalLog, type TargetPolicy } from '../../webhooks/ssrf.ts';
import { partName } from './windows.ts';

// The transfer clients are loaded by the first shipment (about 20 MB and 0.1 s a process that
// ships nothing would pay at start).
let sftpModule: Promise<typeof SftpClientClass> | undefined;
let ftpModule: Promise<typeof BasicFtp> | undefined;
const sftpLib = () => (sftpModule ??= import('ssh2-sftp-client').then((m) => m.default));
const ftpLib = () => (ftpModule ??= import('basic-ftp'));

export interface Destination {
  protocol: AdrProtocol;
  host: string;
  port: number;
  username: string;
  password: string;
  /** The folder; null: where the login starts (the account's home). */
  path: string | null;
}

export interface TransferOptions {
  policy: TargetPolicy;
  /** Extra certificate authorities FTPS servers may be signed by (CALLPLANE_ADR_TLS_CA_FILE), besides the system's. */
  tlsCa?: string;
  /** Longest wait for the connection and for each answer of the server. */
  timeoutMs: number;
  log?: RefusalLog;
}

export interface ShipOutcome {
  /** shipped: uploaded now; found: already there under its final name (an earlier attempt's). */
  outcome: 'shipped' | 'found';
  /** The file's size on the server. */
  remoteBytes: number;
}

/** The message of an error with the password taken out, in case a server or library echoes it. */
export function scrub(message: string, password: string): string {
  return password.length > 0 ? message.split(password).join('****') : message;
}

/** The address to connect to: the host resolved once, every address checked by the policy. */
async function checkedAddress(host: string, policy: TargetPolicy, log?: RefusalLog): Promise<string> {
  if (isIP(host) !== 0) {
    const refused = addressRefusal(host, policy);
    if (refused) throw new TargetRefusedError(refused, host);
    return host;
  }
  const found = await dns.promises.lookup(host, { all: true, order: 'verbatim' });
  for (const a of found) {
    const refused = addressRefusal(a.address, policy, host, log);
    if (refused) throw new TargetRefusedError(refused, a.address);
  }
  if (found.length === 0) throw new Error(`could not resolve ${host}`);
  return found[0]!.address;
}

const remotePath = (dir: string | null, name: string) => (dir ? path.posix.join(dir, name) : name);

async function shipSftp(dest: Destination, address: string, file: string, bytes: number, name: string, opts: TransferOptions, signal?: AbortSignal): Promise<ShipOutcome> {
  const sftp = new (await sftpLib())('adr');
  const stop = () => void sftp.end().catch(() => {});
  signal?.addEventListener('abort', stop, { once: true });
  try {
    await sftp.connect({
      host: address, port: dest.port, username: dest.username, password: dest.password,
      readyTimeout: opts.timeoutMs, retries: 0,
      // A server that stops answering mid-upload (the put itself has no time limit): three
      // unanswered keepalives, about timeoutMs, end the connection and the attempt.
      keepaliveInterval: Math.max(100, Math.ceil(opts.timeoutMs / 3)), keepaliveCountMax: 3,
    });
    const final = remotePath(dest.path, name);
    if ((await sftp.exists(final)) === '-') return { outcome: 'found', remoteBytes: (await sftp.stat(final)).size };
    const part = remotePath(dest.path, partName(name));
    await sftp.put(fs.createReadStream(file), part);
    await sftp.rename(part, final);
    const size = (await sftp.stat(final)).size;
    if (size !== bytes) throw new Error(`the server holds ${size} bytes of ${final} after the upload; ${bytes} were sent`);
    return { outcome: 'shipped', remoteBytes: size };
  } finally {
    signal?.removeEventListener('abort', stop);
    await sftp.end().catch(() => {});
  }
}

async function shipFtp(dest: Destination, address: string, file: string, bytes: number, name: string, opts: TransferOptions, signal?: AbortSignal): Promise<ShipOutcome> {
  // Data connections only to the control connection's address (no PASV address of the server's choosing).
  const { Client: FtpClient, FTPError } = await ftpLib();
  const client = new FtpClient(opts.timeoutMs, { allowSeparateTransferHost: false });
  const stop = () => client.close();
  signal?.addEventListener('abort', stop, { once: true });
  try {
    const secure = dest.protocol === 'ftps';
    await client.access({
      host: address, port: dest.port, user: dest.username, password: dest.password, secure,
      secureOptions: secure ? {
        // The certificate is checked against the name configured (the connection goes to its checked address).
        servername: isIP(dest.host) === 0 ? dest.host : undefined,
        ...(opts.tlsCa ? { ca: [...tls.rootCertificates, opts.tlsCa] } : {}),
      } : undefined,
    });
    const final = remotePath(dest.path, name);
    const existing = await client.size(final).catch((err: unknown) => {
      if (err instanceof FTPError && err.code === 550) return null; // no such file
      throw err;
    });
    if (existing !== null) return { outcome: 'found', remoteBytes: existing };
    const part = remotePath(dest.path, partName(name));
    await client.uploadFrom(fs.createReadStream(file), part);
    await client.rename(part, final);
    const size = await client.size(final);
    if (size !== bytes) throw new Error(`the server holds ${size} bytes of ${final} after the upload; ${bytes} were sent`);
    return { outcome: 'shipped', remoteBytes: size };
  } finally {
    signal?.removeEventListener('abort', stop);
    client.close();
  }
}

/** Uploads `file` (`bytes` long) as `name` into the destination's folder, unless it is there already. */
export async function shipFile(dest: Destination, file: string, bytes: number, name: string, opts: TransferOptions, signal?: AbortSignal): Promise<ShipOutcome> {
  try {
    const address = await checkedAddress(dest.host, opts.policy, opts.log);
    return dest.protocol === 'sftp'
      ? await shipSftp(dest, address, file, bytes, name, opts, signal)
      : await shipFtp(dest, address, file, bytes, name, opts, signal);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(scrub(message, dest.password).slice(0, 1000), { cause: err });
  }
}
