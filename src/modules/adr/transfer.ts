// Ships one file to an export's server, exactly once: SFTP (ssh2-sftp-client), FTP and explicit
// FTPS (basic-ftp, AUTH TLS). The host passes the address policy at connect time (resolved here
// once, every address checked, the connection made to the checked address; FTP data connections
// go to that address only). The file goes up under a temporary name and is renamed to its final
// name once complete (a rename is atomic on the server), so a file under its final name is always
// whole: an attempt that finds it there (an earlier attempt's, whose worker died before recording
// it) uploads nothing. The password is never part of a message (`scrub`).
import crypto from 'node:crypto';
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
  /**
   * SFTP: the server's host key the export is pinned to, as OpenSSH prints it (`SHA256:<base64>`),
   * or TRUST_ON_FIRST_USE (the key of the first server that lets the login in is recorded through
   * TransferOptions.recordHostKey). None (an export configured before pinning): nothing is sent.
   */
  hostKeyFingerprint?: string | null;
}

/** What an operator sets to have the first connection record the SFTP server's host key. */
export const TRUST_ON_FIRST_USE = 'trust-on-first-use';

/** A host key (the SSH wire form ssh2 hands the verifier) as OpenSSH prints it: `SHA256:` and unpadded base64. */
export function hostKeyFingerprint(key: Buffer): string {
  return `SHA256:${crypto.createHash('sha256').update(key).digest('base64').replace(/=+$/, '')}`;
}

export interface TransferOptions {
  policy: TargetPolicy;
  /** Extra certificate authorities FTPS servers may be signed by (CALLPLANE_ADR_TLS_CA_FILE), besides the system's. */
  tlsCa?: string;
  /** Longest wait for the connection and for each answer of the server. */
  timeoutMs: number;
  /**
   * Longest one shipment may take in all, connecting, uploading and renaming
   * (CALLPLANE_ADR_TRANSFER_MAX_SECONDS): a slow but live server is cut off then, and the window is
   * tried again on the queue's schedule. None: no overall limit.
   */
  maxMs?: number;
  /**
   * SFTP with TRUST_ON_FIRST_USE: records the fingerprint of the key the server showed (once its
   * login succeeded) and answers the fingerprint the export is pinned to afterwards (another
   * attempt's may have been recorded first).
   */
  recordHostKey?: (fingerprint: string) => Promise<string | null>;
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
  const pinned = dest.hostKeyFingerprint;
  if (!pinned) {
    throw new Error(`no host key is pinned for the SFTP server ${dest.host}: nothing was sent; set hostKeyFingerprint (SHA256:… as ssh-keygen -lf prints it, or "${TRUST_ON_FIRST_USE}")`);
  }
  const sftp = new (await sftpLib())('adr');
  const stop = () => void sftp.end().catch(() => {});
  signal?.addEventListener('abort', stop, { once: true });
  // The server's key is checked in the key exchange, before the login: a server that shows another
  // key never sees the password.
  let seen: string | undefined;
  try {
    try {
      await sftp.connect({
        host: address, port: dest.port, username: dest.username, password: dest.password,
        readyTimeout: opts.timeoutMs, retries: 0,
        hostVerifier: (key: Buffer) => {
          seen = hostKeyFingerprint(key);
          return pinned === TRUST_ON_FIRST_USE || seen === pinned;
        },
        // A server that stops answering mid-upload (the put itself has no time limit): three
        // unanswered keepalives, about timeoutMs, end the connection and the attempt.
        keepaliveInterval: Math.max(100, Math.ceil(opts.timeoutMs / 3)), keepaliveCountMax: 3,
      });
    } catch (err) {
      if (seen !== undefined && pinned !== TRUST_ON_FIRST_USE && seen !== pinned) {
        throw new Error(`the SFTP server's host key ${seen} does not match hostKeyFingerprint ${pinned}: the connection was ended before logging in (if the server's key was changed, set hostKeyFingerprint again)`, { cause: err });
      }
      throw err;
    }
    if (pinned === TRUST_ON_FIRST_USE) {
      if (!seen || !opts.recordHostKey) throw new Error('the SFTP server\'s host key could not be recorded');
      const now = await opts.recordHostKey(seen);
      if (now !== seen) throw new Error(`the SFTP server's host key ${seen} is not the one recorded meanwhile (${now ?? 'none'}): nothing was sent`);
      opts.log?.warn({ host: dest.host, hostKeyFingerprint: seen }, 'adr: the SFTP server\'s host key was recorded on first use');
    }
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
  // The overall limit ends the connection (as the caller's abort does) and fails the attempt at
  // once, whatever the client is still waiting for.
  const ended = new AbortController();
  const onAbort = () => ended.abort(signal?.reason);
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const overall = opts.maxMs === undefined ? undefined : new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      ended.abort(new Error('overall time limit'));
      reject(new Error(`the transfer took longer than ${opts.maxMs! / 1000} s in all (CALLPLANE_ADR_TRANSFER_MAX_SECONDS): it was ended, and is tried again later`));
    }, opts.maxMs);
  });
  try {
    const work = (async () => {
      const address = await checkedAddress(dest.host, opts.policy, opts.log);
      return dest.protocol === 'sftp'
        ? await shipSftp(dest, address, file, bytes, name, opts, ended.signal)
        : await shipFtp(dest, address, file, bytes, name, opts, ended.signal);
    })();
    if (!overall) return await work;
    work.catch(() => {}); // settled after the limit: its failure is the limit's
    return await Promise.race([work, overall]);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(scrub(message, dest.password).slice(0, 1000), { cause: err });
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}
