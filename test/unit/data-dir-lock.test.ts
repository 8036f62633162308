// DATA_DIR's serve lock (src/lib/data-dir-lock.ts): a lock the kernel holds for the process, so a
// second holder is refused, and a process that dies, however, leaves it free, even when a child it
// started lives on. test/process.test.ts covers the same through the real `serve`.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { DataDirLocked, lockDataDir } from '../../src/lib/data-dir-lock.ts';

const dirs: string[] = [];
after(() => { for (const d of dirs) fs.rmSync(d, { recursive: true, force: true }); });
function tempDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-lock-'));
  dirs.push(d);
  return d;
}
const LOCK_MODULE = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../src/lib/data-dir-lock.ts');

describe('the DATA_DIR serve lock', () => {
  it('is refused to a second holder, naming the first, and free again once released', () => {
    const dir = tempDir();
    const first = lockDataDir(dir);
    assert.equal(fs.readFileSync(path.join(dir, 'serve.pid'), 'utf8').trim(), String(process.pid));
    assert.throws(() => lockDataDir(dir, { waitMs: 0 }), (err: Error) =>
      err instanceof DataDirLocked && err.message.startsWith(`another callplane process (pid ${process.pid}) is serving ${dir}`));
    first.release();
    assert.ok(!fs.existsSync(path.join(dir, 'serve.pid')), 'a release removes the pid file');
    lockDataDir(dir, { waitMs: 0 }).release();
  });

  it('a pid file alone, naming a live process, holds nothing', () => {
    const dir = tempDir();
    fs.writeFileSync(path.join(dir, 'serve.pid'), '1\n');
    lockDataDir(dir, { waitMs: 0 }).release();
  });

  it('is free the moment its holder is killed with SIGKILL, though a child the holder started lives on', async () => {
    const dir = tempDir();
    const script = `
      const { lockDataDir } = await import(${JSON.stringify(LOCK_MODULE)});
      const { spawn } = await import('node:child_process');
      lockDataDir(${JSON.stringify(dir)});
      const child = spawn('sleep', ['120'], { detached: true, stdio: 'ignore' });
      child.unref();
      console.log('locked child=' + child.pid);
      setInterval(() => {}, 1000);`;
    const holder = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    holder.stdout.on('data', (b) => { out += b; });
    let grandchild = 0;
    try {
      const deadline = Date.now() + 60_000;
      while (!/locked child=(\d+)/.test(out)) {
        assert.ok(Date.now() < deadline && holder.exitCode === null, `the holder did not lock: ${out}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      grandchild = Number(/locked child=(\d+)/.exec(out)![1]);
      assert.throws(() => lockDataDir(dir, { waitMs: 0 }), DataDirLocked);
      const exited = new Promise((r) => holder.once('exit', r));
      holder.kill('SIGKILL');
      await exited;
      process.kill(grandchild, 0); // the child the holder started is still running
      lockDataDir(dir, { waitMs: 0 }).release();
    } finally {
      holder.kill('SIGKILL');
      if (grandchild) try { process.kill(grandchild, 'SIGKILL'); } catch { /* gone */ }
    }
  });
});
