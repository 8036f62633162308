// An activity-record window whose worker is killed (SIGKILL) mid-upload, with real
// `node --import tsx src/main.ts serve --role all` processes and a real sshd (SFTP) on loopback
// behind a slow link (test/helpers/slow-link.ts: what the worker sends goes through at 4 KB/s), so
// the kill lands while the file is going up under its temporary name. The window holds 200 more
// ended tasks, written to the database as the task queue leaves them: its file (about 50 KB) takes
// over ten seconds to go up. (vsftpd's own rate limit was tried first: it did not slow every
// transfer.) A new process on the same database rescues the window once its lease has expired and
// ships it again to the same name: afterwards exactly one file per window, each shipped once,
// complete (its checksum), no window skipped. On both engines (SQLite: the same DATA_DIR).
// @lane wall
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { openDatabase } from '../src/db/index.ts';
import type { NewTask } from '../src/db/types.ts';
import { newId } from '../src/lib/ids.ts';
import { startSftpServer, type SftpServer } from './helpers/sftp-server.ts';
import { startSlowLink, type SlowLink } from './helpers/slow-link.ts';
import { ENGINES, PG_URL } from './helpers/harness.ts';
import { createScratchPgDatabase } from './helpers/scratch-pg.ts';
import { killServes, serveRequest, startServe, stopServe, type ServeProcess } from './helpers/serve-process.ts';
import { toolsSkip } from './helpers/system-tools.ts';
import { ensureTransferUser, transferDir, TRANSFER_PASSWORD, TRANSFER_USER } from './helpers/transfer-user.ts';
import { sleep, waitFor } from './helpers/wait.ts';

const ADMIN = `adr-crash-admin-${crypto.randomBytes(12).toString('hex')}`;
/** Ended calls added to the window besides the three texts the API sends. */
const EXTRA = 200;
const skip = toolsSkip('openssh-server') || ensureTransferUser() || false;
const dirs: string[] = [];
const servers: Array<SftpServer | SlowLink> = [];
after(async () => {
  killServes();
  for (const s of servers) await ('stop' in s ? s.stop() : s.close());
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

describe('adr export: a worker killed mid-upload', { skip }, () => {
  for (const engine of ENGINES) {
    it(`[${engine}] leaves exactly one complete file per window, each shipped once`, { timeout: 240_000 }, async () => {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-adr-crash-'));
      dirs.push(dataDir);
      const scratch = engine === 'postgres' ? await createScratchPgDatabase(PG_URL!, 'callplane_adr_crash') : undefined;
      const sftp = await startSftpServer();
      servers.push(sftp);
      const link = await startSlowLink({ host: '127.0.0.1', port: sftp.port }, 4096);
      servers.push(link);
      const dir = transferDir(sftp.dir, 'adr');
      const env: Record<string, string> = {
        DATA_DIR: dataDir, CALLPLANE_ADMIN_TOKEN: ADMIN, CALLPLANE_SECRET_KEY: crypto.randomBytes(32).toString('base64'),
        CALLPLANE_ALLOW_PRIVATE_TARGETS: '127.0.0.1/32', CALLPLANE_ADR_DELAY_SECONDS: '1', CALLPLANE_DELIVERY_LEASE_MS: '3000',
        CALLPLANE_SIMULATED_CALL_SECONDS: '0.2', CALLPLANE_SIP_HOST: '127.0.0.1', CALLPLANE_SIP_PORT: '0',
        ...(scratch ? { DATABASE_URL: scratch.url } : {}),
      };
      const request = (p: ServeProcess, method: string, url: string, body?: unknown) => serveRequest(p.port, ADMIN, method, url, body);
      let proc = await startServe('all', env);
      const me = await request(proc, 'GET', '/api/v2/account');
      const reseller = await request(proc, 'POST', `/api/v2/createReseller?targetPartnerId=${me.body.id}`, { resellerName: 'ADR crash' });
      const org = await request(proc, 'POST', `/api/v2/createOrganization?targetResellerId=${reseller.body.reseller.id}`, { orgName: 'ADR crash org' });
      assert.equal(org.status, 201, JSON.stringify(org.body));
      const orgId: number = org.body.organization.id;
      // The records and the export's first window in one minute: not too close to its end.
      if (Date.now() % 60_000 > 40_000) await sleep(60_000 - (Date.now() % 60_000) + 500);
      for (let i = 0; i < 3; i++) {
        const t = await request(proc, 'POST', `/api/v2/tasks?targetAccountId=${orgId}`, { type: 'text', target: `+1500555300${i}`, content: `text ${i}` });
        assert.equal(t.status, 201, JSON.stringify(t.body));
      }
      const agentId: number = org.body.organization.defaultAccountId;
      const db = openDatabase(scratch ? { databaseUrl: scratch.url, poolSize: 1 } : { sqliteFile: path.join(dataDir, 'callplane.db') });
      try {
        const now = Date.now();
        const rows: NewTask[] = Array.from({ length: EXTRA }, (_, i) => ({
          id: newId('tsk', now), org_id: orgId, account_id: agentId, type: 'call', target: `+1500555${String(4000 + i)}`, state: 'finished',
          run_at: now, created_at: now, updated_at: now, started_at: now - 60_000, finished_at: now, attempt: 1, provider: 'simulated',
          result: JSON.stringify({ status: 'completed', durationSeconds: 42 }), external_task_id: `crash-test-call-${i}-${'x'.repeat(40)}`,
        }));
        await db.db.transaction().execute(async (tx) => { for (const row of rows) await tx.insertInto('tasks').values(row).execute(); });
      } finally {
        await db.close();
      }
      const saved = await request(proc, 'POST', `/api/v2/billing/adrExportConfig?targetAccountId=${orgId}`, {
        deliveryProtocol: 'sftp', rotationMinutes: '1', host: '127.0.0.1', port: link.port, username: TRANSFER_USER, password: TRANSFER_PASSWORD, path: dir,
        hostKeyFingerprint: sftp.hostKeyFingerprint,
      });
      assert.equal(saved.status, 200, JSON.stringify(saved.body));
      const exports = async (p: ServeProcess) => {
        const e = await request(p, 'GET', `/api/v2/billing/adrExports?targetAccountId=${orgId}&limit=500`);
        assert.equal(e.status, 200, JSON.stringify(e.body));
        return e.body as { windows: any[]; shipments: any[] };
      };

      // The first window's file starts going up (within a minute and a few seconds): kill the process then.
      const part = await waitFor('an upload under way', async () => fs.readdirSync(dir).find((f) => f.endsWith('.part')), 90_000, 10)
        .catch(async (err: Error) => {
          throw new Error(`${err.message}; in ${dir}: ${fs.readdirSync(dir).join(', ')}; exports: ${JSON.stringify(await exports(proc))}`);
        });
      proc.child.kill('SIGKILL');
      assert.equal((await proc.exited).signal, 'SIGKILL');
      const killedFile = part.replace(/\.part$/, '');
      assert.ok(!fs.existsSync(path.join(dir, killedFile)), 'killed before the rename');

      proc = await startServe('all', env);
      const done = await waitFor('the killed window to ship', async () => {
        const e = await exports(proc);
        const w = e.windows.find((x) => x.fileName === killedFile);
        return w?.state === 'finished' && e;
      }, 90_000, 200);
      await stopServe(proc);

      const killed = done.windows.find((x) => x.fileName === killedFile)!;
      assert.equal(killed.attempts, 2, 'the killed attempt and the one that shipped');
      const body = fs.readFileSync(path.join(dir, killedFile));
      assert.equal(body.length, killed.bytes);
      assert.equal(killed.checksum, `sha256:${crypto.createHash('sha256').update(body).digest('hex')}`);
      assert.equal(body.toString().split('\r\n').filter(Boolean).length, 1 + 3 + EXTRA, 'the header, the three texts and the calls');
      // Exactly one file per shipped window, each shipped once; windows contiguous from the first.
      const finished = done.windows.filter((w) => w.state === 'finished');
      const files = fs.readdirSync(dir).filter((f) => !f.endsWith('.part')).sort();
      assert.deepEqual(files, finished.map((w) => w.fileName).sort());
      for (const w of finished) {
        assert.equal(done.shipments.filter((s) => s.windowId === w.windowId && s.outcome !== 'failed').length, 1, w.fileName);
      }
      const ordered = [...done.windows].sort((a, b) => a.windowStart - b.windowStart);
      for (let i = 1; i < ordered.length; i++) assert.equal(ordered[i].windowStart, ordered[i - 1].windowEnd);
      assert.equal(ordered[0].fileName, killedFile);
      await scratch?.drop();
    });
  }
});
