// The throw-away local account the SFTP and FTP servers of the tests log in as (sshd and vsftpd
// check passwords against the system's accounts: neither has a user list of its own). Created when
// missing (root only: useradd), with /tmp as its home (vsftpd refuses a login whose home it cannot enter), its password set to a fixed throw-away
// one each time. The servers only listen on loopback, only for this user, and sshd only offers SFTP.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

export const TRANSFER_USER = 'callplane-adr';
export const TRANSFER_PASSWORD = 'adr-Throwaway-Pass-1';

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
