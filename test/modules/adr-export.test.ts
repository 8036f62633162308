// Activity-record (ADR) export (issue 26): POST/GET/DELETE /api/v2/billing/adrExportConfig
// (validation, the password sealed, masked and bound to its server, the address policy, tenancy),
// and the worker shipping one file per rotation window to REAL servers on loopback: OpenSSH's
// sshd (SFTP) and vsftpd (FTP and explicit FTPS), started by the tests. The rows are checked
// against the tasks and conversations made here; a server down for a while gets its window once
// it is back, once, with every window in order. The export's clock is moved forward so windows end
// without waiting for them.
// @lane wall
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, it } from 'node:test';
import { parse } from 'csv-parse/sync';
import { conversationService } from '../../src/modules/conversations/service.ts';
import { ADR_COLUMNS } from '../../src/modules/adr/csv.ts';
import { shipFile, type Destination } from '../../src/modules/adr/transfer.ts';
import { PAGE } from '../../src/modules/adr/build-file.ts';
import type { NewTask } from '../../src/db/types.ts';
import { newId } from '../../src/lib/ids.ts';
import { policyFromConfig } from '../../src/webhooks/ssrf.ts';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness, Reply } from '../helpers/harness.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startSftpServer, type SftpServer } from '../helpers/sftp-server.ts';
import { startFtpServer, type FtpServer } from '../helpers/ftp-server.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { ensureTransferUser, transferDir, TRANSFER_PASSWORD, TRANSFER_USER } from '../helpers/transfer-user.ts';
import { waitFor } from '../helpers/wait.ts';
import { childrenOf } from '../helpers/children.ts';

const FINAL = ['finished', 'failed', 'canceled'];
const HOUR = 3_600_000;
const phone = (n: number) => `+1500555${String(2000 + n).padStart(4, '0')}`;
const skip = toolsSkip('openssh-server', 'vsftpd', 'openssl');
/** The export's clock: real time plus what the tests move it by. */
let offset = 0;
const clock = () => Date.now() + offset;

function ok(res: Reply, label = ''): any {
  assert.equal(res.status, 200, `${label} ${JSON.stringify(res.body)}`);
  return res.body;
}

const userReady = skip ? null : ensureTransferUser();
let sftp: SftpServer; let ftp: FtpServer; let ftps: FtpServer; let hook: Receiver;
const ca = () => ftps.caFile!;

before(async () => {
  if (skip || userReady) return;
  [sftp, ftp, ftps, hook] = await Promise.all([startSftpServer(), startFtpServer(), startFtpServer({ tls: true }), startReceiver()]);
  // Before the harnesses start: their workers read CALLPLANE_ADR_TLS_CA_FILE when they start.
  fs.copyFileSync(ca(), caFile);
});
after(async () => { await Promise.all([sftp?.stop(), ftp?.stop(), ftps?.stop(), hook?.close()]); });

/** The FTPS server's certificate, trusted by the export's worker (copied here once the server made it). */
const caFile = path.join(fs.mkdtempSync('/tmp/callplane-adr-ca-'), 'ca.pem');
const env = {
  CALLPLANE_ALLOW_PRIVATE_TARGETS: '127.0.0.1/32', CALLPLANE_ADR_DELAY_SECONDS: '0', CALLPLANE_ADR_TLS_CA_FILE: caFile,
  // The records below are those these tests make; a SIMULATED call's own conversation (channel
  // simulated, docs/tasks.md "Simulated calls") would be one more, and is proven elsewhere.
  CALLPLANE_SIMULATED_CALL_CONVERSATIONS: 'false',
};
fs.writeFileSync(caFile, '');

it('an attempt that finds the window\'s file under its final name (an earlier attempt\'s, whose worker died before recording it) uploads nothing', { skip: skip || userReady || false }, async () => {
  const local = path.join(fs.mkdtempSync('/tmp/callplane-adr-file-'), 'w.csv');
  fs.writeFileSync(local, 'recordType,recordId\r\ncall,tsk_1\r\n');
  const bytes = fs.statSync(local).size;
  const opts = { policy: { allowPrivate: false, allowCidrs: ['127.0.0.1/32'] }, timeoutMs: 5000, tlsCa: fs.readFileSync(ca(), 'utf8') };
  for (const [server, protocol] of [[sftp, 'sftp'], [ftp, 'ftp'], [ftps, 'ftps']] as const) {
    const dir = transferDir(server.dir, `found-${protocol}`);
    const dest: Destination = {
      protocol, host: '127.0.0.1', port: server.port, username: TRANSFER_USER, password: TRANSFER_PASSWORD, path: dir,
      hostKeyFingerprint: protocol === 'sftp' ? sftp.hostKeyFingerprint : null,
    };
    const first = await shipFile(dest, local, bytes, 'adr-1-20260101T0000Z-60.csv', opts);
    assert.deepEqual(first, { outcome: 'shipped', remoteBytes: bytes });
    const mtime = fs.statSync(path.join(dir, 'adr-1-20260101T0000Z-60.csv')).mtimeMs;
    const again = await shipFile(dest, local, bytes, 'adr-1-20260101T0000Z-60.csv', opts);
    assert.deepEqual(again, { outcome: 'found', remoteBytes: bytes }, protocol);
    assert.deepEqual(fs.readdirSync(dir), ['adr-1-20260101T0000Z-60.csv']);
    assert.equal(fs.statSync(path.join(dir, 'adr-1-20260101T0000Z-60.csv')).mtimeMs, mtime);
    if (protocol !== 'sftp') {
      const stores = (server as FtpServer).log().split('\n').filter((l) => /"STOR .*adr-1-20260101T0000Z-60\.csv\.part"/.test(l));
      assert.equal(stores.length, 1, `one upload (${protocol})`);
    }
  }
  // The address policy holds at connect time too: a name that resolves to a refused address is not reached.
  const refused = await shipFile({ protocol: 'sftp', host: 'localhost', port: sftp.port, username: TRANSFER_USER, password: TRANSFER_PASSWORD, path: null },
    local, bytes, 'x.csv', { policy: { allowPrivate: false }, timeoutMs: 5000 }).then(() => null, (err: Error) => err);
  assert.match(refused!.message, /localhost: the address policy refused the target/);
  assert.ok(!refused!.message.includes(TRANSFER_PASSWORD));
});

/** Every process below `pid`. */
const descendants = (pid: number): number[] => childrenOf(pid).flatMap((c) => [c.pid, ...descendants(c.pid)]);

it('an SFTP server that stops answering mid-upload fails the attempt instead of holding the window', { skip: skip || userReady || false, timeout: 60_000 }, async () => {
  const dir = transferDir(sftp.dir, 'stall');
  const local = path.join(fs.mkdtempSync('/tmp/callplane-adr-stall-'), 'w.csv');
  const bytes = 30_000_000;
  fs.writeFileSync(local, Buffer.alloc(bytes, 120));
  const dest: Destination = {
    protocol: 'sftp', host: '127.0.0.1', port: sftp.port, username: TRANSFER_USER, password: TRANSFER_PASSWORD, path: dir, hostKeyFingerprint: sftp.hostKeyFingerprint,
  };
  const shipping = shipFile(dest, local, bytes, 'adr-1-20260101T0000Z-60.csv', { policy: { allowPrivate: true }, timeoutMs: 1500 }).then(() => null, (e: Error) => e);
  await waitFor('the upload to start', async () => fs.readdirSync(dir).some((f) => f.endsWith('.part')), 10_000, 1);
  // The server's session processes stop: the connection stays open, nothing answers.
  const stopped = descendants(sftp.pid()!);
  for (const pid of stopped) process.kill(pid, 'SIGSTOP');
  const since = Date.now();
  try {
    const err = await shipping;
    assert.ok(err, 'the attempt failed');
    assert.ok(Date.now() - since < 20_000, `it failed after ${Date.now() - since} ms`);
    assert.ok(!fs.readdirSync(dir).includes('adr-1-20260101T0000Z-60.csv'), 'never under its final name');
  } finally {
    for (const pid of stopped) { try { process.kill(pid, 'SIGCONT'); } catch { /* gone */ } }
    fs.rmSync(path.dirname(local), { recursive: true, force: true });
  }
});

forEachEngine('adr export', (h) => {
  const call = (method: string, url: string, opts?: Parameters<Harness['call']>[2]) => h().call(method, url, opts);
  const db = () => h().database.db;

  async function runTasks(token: string, bodies: Record<string, unknown>[]): Promise<string[]> {
    const ids: string[] = [];
    for (const body of bodies) {
      const res = await call('POST', '/api/v2/tasks', { token, body });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      ids.push(res.body.task.id);
    }
    await waitFor(`${ids.length} task(s) to end`, async () => {
      const rows = await db().selectFrom('tasks').select('state').where('id', 'in', ids).execute();
      return rows.every((r) => FINAL.includes(r.state));
    }, 30_000);
    return ids;
  }

  async function conversation(resellerToken: string, agentId: number): Promise<string> {
    const res = await call('POST', '/api/v2/agent/receiveMessage', {
      token: resellerToken, body: { targetAgent: String(agentId), sourceAddress: `visitor-${Math.random()}@example.com`, message: 'Hello, what are your opening hours?', outboundMessageWebhookUrl: hook.url },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const uuid = res.body.messageUuid as string;
    const id = await waitFor('the turn to run', async () => {
      const m = await db().selectFrom('conversation_messages').select('conversation_id').where('id', '=', uuid).executeTakeFirst();
      if (!m) return false;
      const c = await db().selectFrom('conversations').selectAll().where('id', '=', m.conversation_id).executeTakeFirstOrThrow();
      return Number(c.model_calls) > 0 && c.id;
    }, 15_000);
    const deps = {
      db: db(), config: h().config, policy: policyFromConfig(h().config),
      agents: h().services.agents,
      turns: h().turns.producer, analyses: h().analyses.producer, wakeDeliveries: () => {},
    };
    assert.equal(await conversationService(deps as never).end(id, 'completed', null), true);
    return id;
  }

  const destination = (server: { port: number }, protocol: string, dir: string, extra: Record<string, unknown> = {}) => ({
    deliveryProtocol: protocol, rotationMinutes: '60', host: '127.0.0.1', port: server.port, username: TRANSFER_USER, password: TRANSFER_PASSWORD, path: dir,
    ...(protocol === 'sftp' ? { hostKeyFingerprint: sftp.hostKeyFingerprint } : {}), ...extra,
  });

  /**
   * Moves the export's clock past the end of the window holding it now. Exports are configured
   * after the records are made: the clock may already be ahead of real time (earlier tests moved
   * it), and a window it calls ended would be shipped while records were still being written in it.
   */
  async function advance() {
    const target = Math.floor(clock() / HOUR) * HOUR + HOUR;
    offset += Math.max(0, target - clock()) + 1000;
    await h().adr.makeWindows();
  }

  /** Waits until the account's windows are all shipped; its exports answer. */
  async function shipped(token: string, query: Record<string, unknown> = {}) {
    return waitFor('the windows to be shipped', async () => {
      const e = ok(await call('GET', '/api/v2/billing/adrExports', { token, query }));
      return e.windows.length > 0 && e.windows.every((w: any) => w.state === 'finished') && e;
    }, 30_000, 100);
  }

  async function shipThrough(token: string) {
    await advance();
    return shipped(token);
  }

  it('checks the settings, seals and masks the password, binds it to its server, and applies the address policy', { skip: skip || userReady || false }, async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const base = destination({ port: 2222 }, 'sftp', '/upload');
    const bad = async (body: Record<string, unknown>, field: string) => {
      const res = await call('POST', '/api/v2/billing/adrExportConfig', { token: o.token, body });
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.equal(res.body.success, false);
      assert.match(res.body.message, new RegExp(field), res.body.message);
    };
    await bad({ ...base, password: undefined }, 'password');
    await bad({ ...base, deliveryProtocol: 'scp' }, 'deliveryProtocol');
    await bad({ ...base, rotationMinutes: '7' }, 'rotationMinutes');
    await bad({ ...base, rotationMinutes: 'somekey' }, 'rotationMinutes');
    await bad({ ...base, port: 70000 }, 'port');
    await bad({ ...base, host: 'bad host!' }, 'host');
    await bad({ ...base, host: '10.0.0.7' }, 'host');
    await bad({ ...base, host: '169.254.169.254' }, 'host');
    await bad({ ...base, username: 'a\r\nDELE x' }, 'username');
    assert.equal((await db().selectFrom('adr_configs').selectAll().where('account_id', '=', o.id).execute()).length, 0);

    const saved = ok(await call('POST', '/api/v2/billing/adrExportConfig', { token: o.token, body: { ...base, rotationMinutes: 15 } }));
    assert.equal(saved.config.password, `****${TRANSFER_PASSWORD.slice(-4)}`);
    assert.equal(saved.config.rotationMinutes, '15');
    const stored = await db().selectFrom('adr_configs').selectAll().where('account_id', '=', o.id).executeTakeFirstOrThrow();
    assert.ok(!stored.password.includes(TRANSFER_PASSWORD));
    assert.equal(h().box.open(stored.password), TRANSFER_PASSWORD);
    const got = ok(await call('GET', '/api/v2/billing/adrExportSettings', { token: o.token }));
    assert.equal(got.config.password, `****${TRANSFER_PASSWORD.slice(-4)}`);
    assert.ok(!JSON.stringify(got).includes(TRANSFER_PASSWORD));

    // The password is bound to protocol, host, port and login.
    const { password: _omit, ...noPassword } = base;
    for (const change of [{ port: 2223 }, { host: 'localhost' }, { deliveryProtocol: 'ftp' }, { username: 'someone' }]) {
      const res = await call('POST', '/api/v2/billing/adrExportConfig', { token: o.token, body: { ...noPassword, ...change } });
      assert.equal(res.status, 400, JSON.stringify(change));
      assert.match(res.body.message, /password is required/);
    }
    ok(await call('POST', '/api/v2/billing/adrExportConfig', { token: o.token, body: { ...noPassword, path: '/elsewhere', rotationMinutes: '30' } }));
    const moved = ok(await call('POST', '/api/v2/billing/adrExportConfig', { token: o.token, body: { ...base, port: 2223, password: 'another-password-9' } }));
    assert.equal(moved.config.port, 2223);
    assert.equal(moved.config.password, '****rd-9');

    // Tenancy: another organization never sees it (404), its reseller does, an agent may not configure.
    const other = await h().organization(r.id);
    const res = await call('GET', '/api/v2/billing/adrExportSettings', { token: other.token, query: { targetAccountId: o.id } });
    assert.equal(res.status, 404);
    assert.equal((await call('GET', '/api/v2/billing/adrExportSettings', { token: other.token })).status, 404);
    assert.equal((await call('POST', '/api/v2/billing/adrExportConfig', { token: other.token, query: { targetAccountId: o.id }, body: base })).status, 404);
    const agent = await h().agent(o.id);
    assert.equal((await call('POST', '/api/v2/billing/adrExportConfig', { token: agent.token, body: base })).status, 403);
    assert.equal(ok(await call('GET', '/api/v2/billing/adrExportSettings', { token: r.token, query: { targetAccountId: o.id } })).config.accountId, o.id);
    assert.equal((await call('GET', '/api/v2/billing/adrExports', { token: other.token, query: { targetAccountId: o.id } })).status, 404);

    const off = ok(await call('DELETE', '/api/v2/billing/adrExportSettings', { token: o.token }));
    assert.equal(off.config.enabled, false);
  });

  it('ships one file per window over SFTP with one row per call, text, task and conversation, as recorded', { skip: skip || userReady || false }, async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const dir = transferDir(sftp.dir, `sftp-${h().engine}-${o.id}`);
    const taskIds = await runTasks(o.token, [
      { type: 'call', target: phone(1) }, { type: 'call', target: phone(2) }, { type: 'text', target: phone(3), content: 'hi, =1+1' }, { type: 'ping' },
    ]);
    const conversationId = await conversation(r.token, o.agentId);
    ok(await call('POST', '/api/v2/billing/adrExportConfig', { token: o.token, body: destination(sftp, 'sftp', dir) }));
    const e = await shipThrough(o.token);
    const files = fs.readdirSync(dir).sort();
    assert.deepEqual(files, e.windows.map((w: any) => w.fileName).sort(), 'one file per window, no temporary file left');
    const first = e.windows.at(-1);
    assert.match(first.fileName, new RegExp(`^adr-${o.id}-\\d{8}T\\d{4}Z-60\\.csv$`));
    const body = fs.readFileSync(path.join(dir, first.fileName));
    assert.equal(body.length, first.bytes);
    assert.equal(first.checksum, `sha256:${crypto.createHash('sha256').update(body).digest('hex')}`);
    const rows = parse(body, { columns: true }) as Record<string, string>[];
    assert.deepEqual(Object.keys(rows[0]!), [...ADR_COLUMNS]);
    assert.equal(first.records, rows.length);

    // Every record of the window, checked against its row in the database.
    const tasks = await db().selectFrom('tasks').selectAll().where('id', 'in', taskIds).execute();
    const conv = await db().selectFrom('conversations').selectAll().where('id', '=', conversationId).executeTakeFirstOrThrow();
    assert.deepEqual(rows.map((x) => x.recordId).sort(), [...taskIds, conversationId].sort());
    const iso = (ms: number | null) => (ms === null ? '' : new Date(Number(ms)).toISOString());
    for (const t of tasks) {
      const row = rows.find((x) => x.recordId === t.id)!;
      const seconds = t.type === 'call' ? Math.ceil(Number(JSON.parse(t.result!).durationSeconds)) : 0;
      assert.deepEqual(row, {
        recordType: t.type, recordId: t.id, organizationId: String(o.id), agentId: String(t.account_id), channel: t.provider ?? '',
        direction: 'outbound', counterpart: t.target ? `'${t.target}` : '', taskId: t.id, externalTaskId: '',
        startedAt: iso(t.started_at), endedAt: iso(t.finished_at), durationSeconds: t.type === 'call' ? String(seconds) : '',
        outcome: t.state, outcomeDetail: row.outcomeDetail,
        callSeconds: String(seconds), callMinutes: String(Math.ceil(seconds / 60)), texts: t.type === 'text' ? '1' : '0',
        tasks: t.type === 'ping' ? '0' : '1', conversations: '0', modelTokens: '0',
        // pplan-free: overage not sold, so nothing costs anything past the included amounts.
        currency: 'USD', cost: '0.00',
      }, t.type);
    }
    const c = rows.find((x) => x.recordType === 'conversation')!;
    assert.deepEqual(c, {
      recordType: 'conversation', recordId: conv.id, organizationId: String(o.id), agentId: String(conv.account_id), channel: conv.channel,
      direction: conv.direction, counterpart: conv.counterpart, taskId: '', externalTaskId: '', startedAt: iso(conv.started_at), endedAt: iso(conv.ended_at),
      durationSeconds: String(Number(conv.duration_ms) / 1000), outcome: 'completed', outcomeDetail: '',
      callSeconds: '0', callMinutes: '0', texts: '0', tasks: '0', conversations: '1', modelTokens: String(Number(conv.tokens_in) + Number(conv.tokens_out)),
      currency: 'USD', cost: '0.00',
    });
    assert.ok(Number(c.modelTokens) > 0);
    // Costs at the plan's overage rates: a plan that sells them.
    assert.equal(e.shipments.filter((s: any) => s.outcome === 'shipped').length, e.windows.length);
  });

  it('a reseller\'s export holds its organizations\' records, costed at each one\'s plan; FTP and explicit FTPS deliver complete files', { skip: skip || userReady || false }, async () => {
    const r = await h().reseller();
    ok(await call('PUT', '/api/v2/product/catalog/plan/pplan-rated', { token: r.token, body: {
      name: 'Rated', monthlyPrice: 10, yearlyPrice: 100, currency: 'USD',
      included: { callMinutes: 1, texts: 1, tasks: 1, conversations: 0, modelTokens: 0 },
      overage: { callMinute: 0.05, text: 0.02, task: 0.01, conversation: 0.02, modelTokensPer1k: 1.5 }, limits: { concurrencyPerRun: 5 },
    } }));
    const a = await h().organization(r.id, { productPlanId: 'pplan-rated' });
    const b = await h().organization(r.id);
    const ftpDir = transferDir(ftp.dir, `ftp-${h().engine}-${r.id}`);
    const ftpsDir = transferDir(ftps.dir, `ftps-${h().engine}-${a.id}`);
    const [call1, text1] = await runTasks(a.token, [{ type: 'call', target: phone(5) }, { type: 'text', target: phone(6), content: 'x' }]);
    const [textB] = await runTasks(b.token, [{ type: 'text', target: phone(7), content: 'y' }]);
    ok(await call('POST', '/api/v2/billing/adrExportConfig', { token: r.token, body: destination(ftp, 'ftp', ftpDir) }));
    ok(await call('POST', '/api/v2/billing/adrExportConfig', { token: r.token, query: { targetAccountId: a.id }, body: destination(ftps, 'ftps', ftpsDir) }));
    await advance();
    await shipped(r.token);
    await shipped(a.token);
    // The maker runs on its own too: both read once every window it made so far has shipped.
    const byReseller = await shipped(r.token);
    const byOrg = await shipped(a.token);
    const read = (dir: string, e: any) => {
      assert.deepEqual(fs.readdirSync(dir).sort(), e.windows.map((w: any) => w.fileName).sort());
      const w = e.windows.find((x: any) => x.records > 0) ?? e.windows.at(-1);
      const body = fs.readFileSync(path.join(dir, w.fileName));
      assert.equal(w.checksum, `sha256:${crypto.createHash('sha256').update(body).digest('hex')}`);
      return parse(body, { columns: true }) as Record<string, string>[];
    };
    const all = read(ftpDir, byReseller);
    assert.deepEqual(all.map((x) => x.recordId).sort(), [call1, text1, textB].sort());
    assert.deepEqual(new Set(all.map((x) => x.organizationId)), new Set([String(a.id), String(b.id)]));
    const own = read(ftpsDir, byOrg);
    assert.deepEqual(own.map((x) => x.recordId).sort(), [call1, text1].sort());
    // One call minute at 0.05 and one task at 0.01; one text at 0.02 and one task at 0.01.
    assert.equal(own.find((x) => x.recordId === call1)!.cost, '0.06');
    assert.equal(own.find((x) => x.recordId === text1)!.cost, '0.03');
    assert.equal(all.find((x) => x.recordId === textB)!.cost, '0.00');
  });

  it('a server down for a while: the window fails with the server\'s message, ships once it is back, and no window is skipped', { skip: skip || userReady || false }, async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const dir = transferDir(sftp.dir, `outage-${h().engine}-${o.id}`);
    await runTasks(o.token, [{ type: 'text', target: phone(8), content: 'during the outage' }]);
    await sftp.stop();
    try {
      ok(await call('POST', '/api/v2/billing/adrExportConfig', { token: o.token, body: destination(sftp, 'sftp', dir) }));
      await advance();
      await waitFor('failed attempts to be logged', async () => {
        const e = ok(await call('GET', '/api/v2/billing/adrExports', { token: o.token }));
        return e.shipments.filter((s: any) => s.outcome === 'failed').length >= 2 && e;
      }, 30_000, 100);
      assert.deepEqual(fs.readdirSync(dir), []);
    } finally {
      await sftp.start();
    }
    const e = await shipThrough(o.token);
    const failed = e.shipments.filter((s: any) => s.outcome === 'failed');
    assert.match(failed[0].message, /ECONNREFUSED|connect/i);
    assert.ok(!JSON.stringify(e).includes(TRANSFER_PASSWORD));
    assert.ok(failed.every((s: any) => s.nextAttemptAt !== null));
    // Each window shipped exactly once, in order, none skipped.
    const windows = [...e.windows].sort((x: any, y: any) => x.windowStart - y.windowStart);
    for (let i = 1; i < windows.length; i++) assert.equal(windows[i].windowStart, windows[i - 1].windowEnd, 'contiguous windows');
    assert.ok(windows.length >= 2);
    // Delivered once each: `shipped`, or `found` when an attempt cut short after its rename (a loaded
    // machine) left the finished file for the retry to find; never both, never twice.
    const delivered = (w: any) => e.shipments.filter((s: any) => s.windowId === w.windowId && (s.outcome === 'shipped' || s.outcome === 'found'));
    for (const w of windows) assert.equal(delivered(w).length, 1, JSON.stringify(e.shipments.filter((s: any) => s.windowId === w.windowId)));
    assert.deepEqual(fs.readdirSync(dir).sort(), windows.map((w: any) => w.fileName).sort());
    const rows = parse(fs.readFileSync(path.join(dir, windows[0].fileName)), { columns: true }) as Record<string, string>[];
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.recordType, 'text');
  });

  it('a window of more records than a page holds each exactly once, ties of end time across pages included', { skip: skip || userReady || false }, async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const dir = transferDir(sftp.dir, `pages-${h().engine}-${o.id}`);
    // Rows as the task queue leaves ended tasks, 2.4 pages of them, seven at each end time.
    const now = Date.now();
    const n = PAGE * 2 + 203;
    const rows: NewTask[] = Array.from({ length: n }, (_, i) => ({
      id: newId('tsk', now), org_id: o.id, account_id: o.agentId, type: 'text', target: phone(i % 50), state: 'finished',
      run_at: now, created_at: now, updated_at: now, started_at: now - 10_000, finished_at: now - 5_000 + Math.floor(i / 7), attempt: 1,
      provider: 'simulated', result: JSON.stringify({ status: 'sent' }),
    }));
    await db().transaction().execute(async (tx) => { for (const row of rows) await tx.insertInto('tasks').values(row).execute(); });
    ok(await call('POST', '/api/v2/billing/adrExportConfig', { token: o.token, body: destination(sftp, 'sftp', dir) }));
    const e = await shipThrough(o.token);
    const w = e.windows.find((x: any) => x.records > 0);
    const got = (parse(fs.readFileSync(path.join(dir, w.fileName)), { columns: true }) as Record<string, string>[]).map((x) => x.recordId);
    assert.equal(got.length, n);
    assert.deepEqual([...got].sort(), rows.map((x) => x.id).sort());
  });

  it('a change of rotation goes on from the next window, aligned; an export turned off makes no windows', { skip: skip || userReady || false }, async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const dir = transferDir(sftp.dir, `rotation-${h().engine}-${o.id}`);
    const body = destination(sftp, 'sftp', dir);
    ok(await call('POST', '/api/v2/billing/adrExportConfig', { token: o.token, body }));
    const before = await shipThrough(o.token);
    const { password: _kept, ...keep } = body;
    ok(await call('POST', '/api/v2/billing/adrExportConfig', { token: o.token, body: { ...keep, rotationMinutes: '15' } }));
    const e = await shipThrough(o.token);
    const windows = [...e.windows].sort((x: any, y: any) => x.windowStart - y.windowStart);
    assert.ok(windows.length >= before.windows.length + 4, 'an hour of 15-minute windows');
    for (let i = 1; i < windows.length; i++) assert.equal(windows[i].windowStart, windows[i - 1].windowEnd, 'contiguous windows');
    const after = windows.slice(before.windows.length);
    for (const w of after) {
      assert.equal(w.windowEnd - w.windowStart, 900);
      assert.equal(w.windowStart % 900, 0, 'aligned to the rotation');
      assert.match(w.fileName, /-15\.csv$/);
    }
    assert.deepEqual(fs.readdirSync(dir).sort(), windows.map((w: any) => w.fileName).sort());

    ok(await call('DELETE', '/api/v2/billing/adrExportSettings', { token: o.token }));
    await advance();
    await advance();
    const off = ok(await call('GET', '/api/v2/billing/adrExports', { token: o.token }));
    assert.equal(off.windows.length, windows.length, 'no windows while turned off');
    const on = ok(await call('POST', '/api/v2/billing/adrExportConfig', { token: o.token, body: keep }));
    assert.equal(on.config.enabled, true);
  });
}, env, { worker: true, turns: true, adr: true, adrRuntime: { now: clock, makeEveryMs: 100, retryDelay: () => 200, transferTimeoutMs: 5000 } });
