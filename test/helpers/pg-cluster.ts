// A private, throw-away PostgreSQL cluster for tests that must stop and start the server itself
// (never the shared one): Debian's initdb and pg_ctl, a data directory under os.tmpdir(), a free
// loopback port, trust authentication for the `postgres` user. PostgreSQL refuses to run as root,
// so when the tests run as root the cluster belongs to the `postgres` system user and its commands
// run through `runuser -u postgres --`.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { postgresBinDir, requireTools, toolsSkip } from './system-tools.ts';
import { freePort } from './wait.ts';

const BIN = postgresBinDir();
const IS_ROOT = process.getuid?.() === 0;

/** The uid and gid of the `postgres` system user, when there is one. */
function postgresUser(): { uid: number; gid: number } | undefined {
  const r = spawnSync('getent', ['passwd', 'postgres'], { encoding: 'utf8' });
  if (r.status !== 0) return undefined;
  const [, , uid, gid] = r.stdout.trim().split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/**
 * `skip` option for suites that need a private cluster: false when one can be made, else why not.
 * Under CALLPLANE_TEST_REQUIRE_TOOLS=1 (.ci/run) never a skip: a missing server then fails the suite instead of passing silently.
 */
export function pgClusterSkip(): false | string {
  if (requireTools()) return false;
  const tools = toolsSkip('postgresql-server');
  if (tools) return tools;
  if (IS_ROOT && !postgresUser()) return 'running as root and there is no postgres user to run initdb as (initdb refuses root)';
  if (IS_ROOT && !fs.existsSync('/usr/sbin/runuser') && !fs.existsSync('/sbin/runuser')) return 'running as root without runuser to run initdb as postgres';
  return false;
}

export interface PgCluster {
  port: number;
  /** Superuser URL of the cluster's `postgres` database. */
  url: string;
  /** URL of database `name` (create it with createDatabase first). */
  urlOf(name: string): string;
  createDatabase(name: string): Promise<void>;
  /** pg_ctl stop: `fast` disconnects sessions cleanly, `immediate` stops like a crash (recovery on the next start). */
  stop(mode?: 'fast' | 'immediate'): void;
  /** Starts it again on the same port and data directory, waiting until it accepts connections. */
  start(): void;
  running(): boolean;
  /** Stops it (immediately) if it runs and removes its directory; safe to call twice. */
  destroy(): void;
  /** The server's log so far (its last `chars` characters). */
  log(chars?: number): string;
}

/** Creates and starts a private cluster. Check pgClusterSkip() first. */
export async function startPgCluster(): Promise<PgCluster> {
  if (!BIN) throw new Error('initdb not found');
  const owner = IS_ROOT ? postgresUser() : undefined;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-pgc-'));
  const data = path.join(dir, 'data');
  const logFile = path.join(dir, 'server.log');
  if (owner) fs.chownSync(dir, owner.uid, owner.gid);
  const run = (bin: string, args: string[], timeoutMs = 60_000) => {
    const cmd = owner ? 'runuser' : path.join(BIN, bin);
    const argv = owner ? ['-u', 'postgres', '--', path.join(BIN, bin), ...args] : args;
    try {
      return execFileSync(cmd, argv, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string; message: string };
      const tail = fs.existsSync(logFile) ? `\nserver log:\n${fs.readFileSync(logFile, 'utf8').slice(-2000)}` : '';
      throw new Error(`${bin} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}${tail}`, { cause: err });
    }
  };
  let destroyed = false;
  let up = false;
  const port = await freePort();
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  try {
    run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const cluster: PgCluster = {
    port,
    url,
    urlOf: (name) => `postgres://postgres@127.0.0.1:${port}/${name}`,
    async createDatabase(name) {
      const pg = (await import('pg')).default;
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
    },
    stop(mode = 'fast') {
      if (!up) return;
      run('pg_ctl', ['-D', data, '-m', mode, '-w', 'stop']);
      up = false;
    },
    start() {
      if (up) return;
      run('pg_ctl', ['-D', data, '-l', logFile, '-o', options, '-w', '-t', '60', 'start']);
      up = true;
    },
    running: () => up,
    destroy() {
      if (destroyed) return;
      destroyed = true;
      try {
        if (up) run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch { /* gone already: remove what is left */ }
      up = false;
      fs.rmSync(dir, { recursive: true, force: true });
    },
    log: (chars = 4000) => (fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').slice(-chars) : ''),
  };
  try {
    cluster.start();
  } catch (err) {
    cluster.destroy();
    throw err;
  }
  // A test process that dies without its after() hooks must not leave a server running.
  process.once('exit', () => cluster.destroy());
  return cluster;
}
