// The system programs some tests drive (Kamailio, sipp, tshark, Chromium, espeak-ng, pocketsphinx,
// openssl, PostgreSQL's server binaries), each with the Debian package that installs it. A test or
// suite that needs one passes `{ skip: toolsSkip('chromium') }`: false (it runs) when the tool is
// there; otherwise a skip reason of one form, `needs chromium: apt-get install chromium`, which
// scripts/test.mjs counts and lists at the end of `npm test` (so a fresh clone without them passes,
// saying what to install, and never waits on a timeout). Under CALLPLANE_TEST_REQUIRE_TOOLS=1 (.ci/run) never a skip: a missing tool
// then fails the test instead of passing silently (.ci/run installs every one of them).
// CALLPLANE_TEST_HIDE_TOOLS=chromium,kamailio-presence (read here only) treats those tools as
// missing, so the skip path can be tested on a machine that has them all.
import fs from 'node:fs';
import path from 'node:path';

/** The first `bin` on PATH or in `extra`, or null. */
export function which(bin: string, extra: string[] = []): string | null {
  for (const dir of [...(process.env.PATH ?? '').split(':'), ...extra]) {
    const p = path.join(dir, bin);
    if (dir && fs.existsSync(p)) return p;
  }
  return null;
}

const SBIN = ['/usr/sbin', '/usr/local/sbin', '/sbin'];

/** Where Debian puts Kamailio's modules (under the multiarch directory). */
export const KAMAILIO_MODULES = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib', '/usr/local/lib64', '/usr/local/lib']
  .map((d) => `${d}/kamailio/modules/`).find((d) => fs.existsSync(path.join(d, 'registrar.so'))) ?? '/usr/lib/x86_64-linux-gnu/kamailio/modules/';
/** Where Debian keeps the db_text table definitions (the presence tables among them). */
export const KAMAILIO_DBTEXT = '/usr/share/kamailio/dbtext/kamailio';
/** Where Debian's pocketsphinx-en-us puts the US English model. */
const POCKETSPHINX_MODEL = '/usr/share/pocketsphinx/model/en-us/en-us/mdef';

interface Tool { packages: string[]; present(): boolean }

const TOOLS = {
  /** Kamailio as a registrar, and kamcmd to read its tables. */
  kamailio: { packages: ['kamailio'], present: () => !!which('kamailio', SBIN) && !!which('kamcmd', SBIN) },
  /** Kamailio as a presence server: its presence, presence_xml and db_text modules and the tables' definitions. */
  'kamailio-presence': {
    packages: ['kamailio-presence-modules'],
    present: () => ['presence.so', 'presence_xml.so', 'db_text.so'].every((m) => fs.existsSync(path.join(KAMAILIO_MODULES, m)))
      && fs.existsSync(path.join(KAMAILIO_DBTEXT, 'presentity')),
  },
  sipp: { packages: ['sip-tester'], present: () => !!which('sipp', ['/usr/bin', '/usr/local/bin']) },
  tshark: { packages: ['tshark'], present: () => !!which('tshark', ['/usr/bin', '/usr/local/bin']) },
  chromium: { packages: ['chromium'], present: () => !!which('chromium', ['/usr/bin']) },
  'espeak-ng': { packages: ['espeak-ng'], present: () => !!which('espeak-ng') },
  /** pocketsphinx_continuous and the US English model it listens with. */
  pocketsphinx: { packages: ['pocketsphinx', 'pocketsphinx-en-us'], present: () => !!which('pocketsphinx_continuous') && fs.existsSync(POCKETSPHINX_MODEL) },
  openssl: { packages: ['openssl'], present: () => !!which('openssl') },
  /** OpenSSH's server (sshd) and ssh-keygen: the SFTP server of the activity-record export tests. */
  'openssh-server': { packages: ['openssh-server'], present: () => !!which('sshd', SBIN) && !!which('ssh-keygen') },
  /** vsftpd: the FTP and FTPS server of the activity-record export tests. */
  vsftpd: { packages: ['vsftpd'], present: () => !!which('vsftpd', SBIN) },
  /** PostgreSQL's server binaries (initdb, pg_ctl) for a private cluster. */
  'postgresql-server': { packages: ['postgresql'], present: () => postgresBinDir() !== undefined },
} satisfies Record<string, Tool>;

export type ToolName = keyof typeof TOOLS;

/** Where Debian's PostgreSQL server binaries are (the newest version installed), or undefined. */
export function postgresBinDir(): string | undefined {
  const base = '/usr/lib/postgresql';
  if (!fs.existsSync(base)) return undefined;
  const versions = fs.readdirSync(base).filter((v) => fs.existsSync(path.join(base, v, 'bin', 'initdb')) && fs.existsSync(path.join(base, v, 'bin', 'pg_ctl')));
  versions.sort((a, b) => Number(b) - Number(a));
  return versions.length ? path.join(base, versions[0], 'bin') : undefined;
}

function hidden(): Set<string> {
  return new Set((process.env.CALLPLANE_TEST_HIDE_TOOLS ?? '').split(',').map((s) => s.trim()).filter(Boolean));
}

/** Whether the tool is installed here (and not hidden by CALLPLANE_TEST_HIDE_TOOLS). */
export function hasTool(name: ToolName): boolean {
  return !hidden().has(name) && TOOLS[name].present();
}

/**
 * Set by .ci/run (which installs every tool): a missing tool then fails its tests instead of
 * skipping them, so CI cannot pass without them. Not CI=true, which many machines set for their
 * own reasons, where a newcomer's `npm test` should still skip.
 */
export const requireTools = (): boolean => process.env.CALLPLANE_TEST_REQUIRE_TOOLS === '1';

/**
 * `skip` option for a test or suite needing these tools: false when all are there, or when
 * CALLPLANE_TEST_REQUIRE_TOOLS=1 (a missing one then fails); else
 * `needs <tool>[, <tool>]: apt-get install <package> …`.
 */
export function toolsSkip(...names: ToolName[]): false | string {
  const missing = names.filter((n) => !hasTool(n));
  if (missing.length === 0 || requireTools()) return false;
  const packages = [...new Set(missing.flatMap((n) => TOOLS[n].packages))];
  return `needs ${missing.join(', ')}: apt-get install ${packages.join(' ')}`;
}
