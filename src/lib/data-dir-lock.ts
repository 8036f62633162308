// The embedded SQLite engine serves from one process: its queue claims and leases rely on a
// single writer. `serve` on SQLite holds an exclusive lock on DATA_DIR/serve.lock, a small SQLite
// database of its own kept in an open `BEGIN EXCLUSIVE` transaction: SQLite holds it as a POSIX
// record lock (fcntl), which the kernel drops the moment the process dies, however it dies
// (SIGKILL, OOM, a crash), and which a child process never inherits. A second `serve` on the same
// directory finds the lock taken (SQLITE_BUSY at once) and refuses to start; a restart after a
// crash finds it free, whatever pid is alive now (a reused pid, a zombie nobody reaped).
// DATA_DIR/serve.pid names the holder, for the refusal's message only: it decides nothing.
// Nothing in this process may open serve.lock by other means: closing any descriptor of the file
// would drop a POSIX lock (SQLite guards against that only for its own connections).
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';

export class DataDirLocked extends Error {}

/** The file locked, beside the pid file that only informs. */
export const LOCK_FILE = 'serve.lock';
export const PID_FILE = 'serve.pid';

/**
 * How long a start waits for a lock that is taken: a process killed a moment ago may still be
 * torn down by the kernel (its locks go with it). A live holder is refused after this.
 */
const WAIT_MS = 1500;
const RETRY_MS = 50;

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function holder(pidFile: string): number | null {
  try {
    const pid = Number(fs.readFileSync(pidFile, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** Takes DATA_DIR's serve lock for this process's life, or throws DataDirLocked naming the holder. */
export function lockDataDir(dataDir: string, opts: { waitMs?: number } = {}): { release(): void } {
  fs.mkdirSync(dataDir, { recursive: true });
  const lockFile = path.join(dataDir, LOCK_FILE);
  const pidFile = path.join(dataDir, PID_FILE);
  const deadline = Date.now() + (opts.waitMs ?? WAIT_MS);
  for (;;) {
    // timeout 0: a taken lock is SQLITE_BUSY at once, never a wait inside SQLite.
    const db = new Database(lockFile, { timeout: 0 });
    try {
      db.exec('BEGIN EXCLUSIVE');
    } catch (err) {
      db.close();
      if ((err as { code?: string }).code !== 'SQLITE_BUSY') throw new DataDirLocked(`cannot lock ${lockFile}: ${(err as Error).message}`);
      if (Date.now() < deadline) {
        sleepSync(RETRY_MS);
        continue;
      }
      const pid = holder(pidFile);
      throw new DataDirLocked(`another callplane process${pid ? ` (pid ${pid})` : ''} is serving ${dataDir} (it holds ${lockFile}); the embedded SQLite engine runs in one process — stop it, or use PostgreSQL (DATABASE_URL) to run several`);
    }
    fs.writeFileSync(pidFile, `${process.pid}\n`, { mode: 0o600 });
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      process.removeListener('exit', release);
      try {
        if (holder(pidFile) === process.pid) fs.unlinkSync(pidFile);
      } catch { /* already gone */ }
      try {
        db.exec('ROLLBACK');
      } catch { /* nothing to roll back */ }
      db.close();
    };
    process.once('exit', release);
    return { release };
  }
}
