// The embedded SQLite engine serves from one process: its queue claims and leases rely on a
// single writer. A pid file in DATA_DIR makes a second `serve` on the same directory refuse to
// start instead of silently sharing the file.
import fs from 'node:fs';
import path from 'node:path';

export class DataDirLocked extends Error {}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function lockDataDir(dataDir: string): { release(): void } {
  const file = path.join(dataDir, 'serve.pid');
  fs.mkdirSync(dataDir, { recursive: true });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
      const release = () => {
        try {
          if (fs.readFileSync(file, 'utf8').trim() === String(process.pid)) fs.unlinkSync(file);
        } catch { /* already gone */ }
      };
      process.once('exit', release);
      return { release };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number(fs.readFileSync(file, 'utf8').trim());
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) {
        throw new DataDirLocked(`another callplane process (pid ${pid}) is serving ${dataDir}; the embedded SQLite engine runs in one process — stop it, or use PostgreSQL (DATABASE_URL) to run several`);
      }
      fs.rmSync(file, { force: true }); // left by a process that died: take it over
    }
  }
  throw new DataDirLocked(`cannot lock ${file}`);
}
