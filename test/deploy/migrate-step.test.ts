// Migrations as a deploy step (issue 39): `callplane migrate` exits 0 whether it applied anything
// or not; `serve` with CALLPLANE_AUTO_MIGRATE=false refuses a schema older than its release with a
// line saying what to do, and serves once it is current; on PostgreSQL several `migrate`
// processes started together all succeed and apply each migration once.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { openDatabase } from '../../src/db/index.ts';
import { createScratchPgDatabase } from '../helpers/scratch-pg.ts';
import { killServes, startServe, stopServe } from '../helpers/serve-process.ts';
import { ROOT } from '../helpers/dist.ts';

const PG_URL = process.env.TEST_DATABASE_URL;

/** `callplane <args>` from the checkout's src/ with a clean environment: its exit code and output. */
function run(args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], {
      cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: os.tmpdir(), LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (b) => { out += b; });
    child.stderr.on('data', (b) => { out += b; });
    child.once('exit', (code) => resolve({ code, out }));
  });
}

/** The newest migration of this checkout (the last file in src/db/migrations). */
const LAST = fs.readdirSync(path.join(import.meta.dirname, '../../src/db/migrations')).filter((f) => /^\d{4}-.*\.ts$/.test(f)).sort().at(-1)!.replace(/\.ts$/, '');

describe('migrations as a step', () => {
  after(() => killServes());

  it('SQLite: serve refuses an unmigrated database without CALLPLANE_AUTO_MIGRATE; migrate exits 0 twice; then serve starts', { timeout: 60_000 }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-migrate-step-'));
    const env = { DATA_DIR: dir, CALLPLANE_AUTO_MIGRATE: 'false', CALLPLANE_SIP_ENABLED: 'false', PORT: '0', HOST: '127.0.0.1' };
    const refused = await run(['serve', '--role', 'api'], env);
    assert.equal(refused.code, 1, refused.out);
    assert.match(refused.out, new RegExp(`callplane: the database schema is older than this release: \\d+ migration\\(s\\) pending \\(0001-foundation, .*${LAST}\\)\\. Run \`callplane migrate\` first, or set CALLPLANE_AUTO_MIGRATE=true`));
    const first = await run(['migrate'], env);
    assert.equal(first.code, 0, first.out);
    assert.match(first.out, new RegExp(`^applied: 0001-foundation, .*${LAST}$`, 'm'));
    const again = await run(['migrate'], env);
    assert.deepEqual([again.code, again.out.trim()], [0, 'database is up to date']);
    const serve = await startServe('api', env);
    await stopServe(serve);
    assert.equal((await serve.exited).code, 0);
  });

  it('PostgreSQL: four migrate processes at once all exit 0, and each migration is applied once', { skip: !PG_URL && 'needs TEST_DATABASE_URL', timeout: 90_000 }, async () => {
    const scratch = await createScratchPgDatabase(PG_URL!, 'callplane_migrate');
    try {
      const env = { DATABASE_URL: scratch.url, DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-migrate-pg-')) };
      const results = await Promise.all(Array.from({ length: 4 }, () => run(['migrate'], env)));
      for (const r of results) assert.equal(r.code, 0, r.out);
      // One of them applied everything; the others waited on the lock and found nothing left.
      assert.equal(results.filter((r) => /^applied: /m.test(r.out)).length, 1, results.map((r) => r.out).join('\n---\n'));
      assert.equal(results.filter((r) => /database is up to date/.test(r.out)).length, 3);
      const db = openDatabase({ databaseUrl: scratch.url, poolSize: 1 });
      try {
        const rows = await db.db.selectFrom('kysely_migration' as never).select('name' as never).execute() as { name: string }[];
        assert.equal(new Set(rows.map((r) => r.name)).size, rows.length);
        assert.ok(rows.some((r) => r.name === '0040-job-leases'));
      } finally {
        await db.close();
      }
    } finally {
      await scratch.drop();
    }
  });
});
