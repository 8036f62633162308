// The throw-away local account the SFTP and FTP servers of the tests log in as (sshd and vsftpd
// check passwords against the system's accounts: neither has a user list of its own). Created when
// missing (root only: useradd), with /tmp as its home (vsftpd refuses a login whose home it cannot enter), its password set each
// time to the machine's random one (below). The servers only listen on loopback, only for this user, and sshd only offers SFTP.
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';

export const TRANSFER_USER = 'callplane-adr';
/**
 * The account's password: random, made once per machine and kept in a root-only file, so that
 * every test process of a run agrees on it while nobody else can know it (the account is a real
 * login of this machine, which may run an sshd of its own). Not root: the tests skip, nothing is made.
 */
export const TRANSFER_PASSWORD = transferPassword();

function transferPassword(): string {
  if (process.getuid?.() !== 0) return 'unused-without-root';
  const dir = '/var/lib/callplane-test';
  const file = `${dir}/adr-password`;
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  try {
    fs.writeFileSync(file, `Adr-${crypto.randomBytes(18).toString('base64url')}`, { flag: 'wx', mode: 0o600 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  return fs.readFileSync(file, 'utf8').trim();
}

/** Why the account cannot be made here (not root), or null once it exists with the password. */
export function ensureTransferUser(): string | null {
  if (process.getuid?.() !== 0) return 'the SFTP/FTP tests log in as a local account they create: run them as root';
  const passwd = fs.readFileSync('/etc/passwd', 'utf8');
  if (!passwd.split('\n').some((l) => l.startsWith(`${TRANSFER_USER}:`))) {
    try {
      // /bin/sh: vsftpd's PAM stack (pam_shells) refuses accounts whose shell is not in /etc/shells.
      execFileSync('useradd', ['-M', '-d', '/tmp', '-s', '/bin/sh', TRANSFER_USER], { stdio: 'pipe' });
    } catch (err) {
      // Another test process created it meanwhile.
      if (!fs.readFileSync('/etc/passwd', 'utf8').includes(`${TRANSFER_USER}:`)) throw err;
    }
  }
  execFileSync('chpasswd', { input: `${TRANSFER_USER}:${TRANSFER_PASSWORD}\n`, stdio: ['pipe', 'pipe', 'pipe'] });
  return null;
}

/** A directory the account may write (uploads land there), world-readable for the test. */
export function transferDir(parent: string, name: string): string {
  const dir = `${parent}/${name}`;
  fs.mkdirSync(dir, { recursive: true });
  const uid = Number(execFileSync('id', ['-u', TRANSFER_USER]).toString().trim());
  const gid = Number(execFileSync('id', ['-g', TRANSFER_USER]).toString().trim());
  fs.chownSync(dir, uid, gid);
  fs.chmodSync(dir, 0o755);
  return dir;
}
