// The activity-record export's SFTP server is pinned by its host key (docs/billing.md, "Activity
// records", The server's host key), against OpenSSH's sshd on loopback (test/helpers/sftp-server.ts):
// the right fingerprint ships; a wrong one fails before the login (sshd never hears of the user);
// trust-on-first-use records the key the first connection sees, then holds to it; the settings
// require a fingerprint for sftp and again when the server changes. And a slow but live upload
// (test/helpers/slow-link.ts) is ended by the overall time limit, to be tried again later.
// @lane wall
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, it } from 'node:test';
import { shipFile, type Destination, type TransferOptions } from '../../src/modules/adr/transfer.ts';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness, Reply } from '../helpers/harness.ts';
import { startSftpServer, type SftpServer } from '../helpers/sftp-server.ts';
import { startSlowLink, type SlowLink } from '../helpers/slow-link.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { ensureTransferUser, transferDir, TRANSFER_PASSWORD, TRANSFER_USER } from '../helpers/transfer-user.ts';
import { waitFor } from '../helpers/wait.ts';

const HOUR = 3_600_000;
/** What an operator sends to have the first connection record the key (docs/billing.md). */
const TRUST_ON_FIRST_USE = 'trust-on-first-use';
const skip = toolsSkip('openssh-server');
const userReady = skip ? null : ensureTransferUser();
const off = skip || userReady || false;
let offset = 0;
const clock = () => Date.now() + offset;

let sftp: SftpServer;
let other: SftpServer;
before(async () => {
  if (off) return;
  [sftp, other] = await Promise.all([startSftpServer(), startSftpServer()]);
});
after(async () => { await Promise.all([sftp?.stop(), other?.stop()]); });

const OPTS: TransferOptions = { policy: { allowPrivate: true }, timeoutMs: 5000 };
const WRONG = `SHA256:${crypto.createHash('sha256').update('not the key').digest('base64').replace(/=+$/, '')}`;

function localFile(bytes: number): { file: string; bytes: number } {
  const file = path.join(fs.mkdtempSync('/tmp/callplane-adr-hostkey-'), 'w.csv');
  fs.writeFileSync(file, Buffer.alloc(bytes, 120));
  return { file, bytes };
}

it('the pinned fingerprint ships; a wrong one fails naming both keys, before any login (sshd never sees the user); none pinned sends nothing', { skip: off }, async () => {
  const { file, bytes } = localFile(2000);
  const dir = transferDir(sftp.dir, 'pinned');
  // A login name of its own: sshd logs it ("Invalid user …") only when a client asks to log in as it.
  const probe = `probe${crypto.randomBytes(4).toString('hex')}`;
  const dest = (hostKeyFingerprint: string | null, username = TRANSFER_USER): Destination => ({
    protocol: 'sftp', host: '127.0.0.1', port: sftp.port, username, password: TRANSFER_PASSWORD, path: dir, hostKeyFingerprint,
  });
  assert.deepEqual(await shipFile(dest(sftp.hostKeyFingerprint), file, bytes, 'a.csv', OPTS), { outcome: 'shipped', remoteBytes: bytes });

  const wrong = await shipFile(dest(WRONG, probe), file, bytes, 'b.csv', OPTS).then(() => null, (e: Error) => e);
  assert.ok(wrong, 'refused');
  assert.ok(wrong.message.includes(`host key ${sftp.hostKeyFingerprint} does not match hostKeyFingerprint ${WRONG}`), wrong.message);
  assert.ok(!wrong.message.includes(TRANSFER_PASSWORD));
  const none = await shipFile(dest(null, probe), file, bytes, 'c.csv', OPTS).then(() => null, (e: Error) => e);
  assert.match(none!.message, /no host key is pinned/);
  // The same probe with the right key does reach the login (so the log would show it).
  const control = `probe${crypto.randomBytes(4).toString('hex')}`;
  await shipFile(dest(sftp.hostKeyFingerprint, control), file, bytes, 'd.csv', OPTS).then(() => null, (e: Error) => e);
  await waitFor('sshd to log the control login', async () => sftp.output().includes(control), 5000);
  assert.ok(!sftp.output().includes(probe), 'the refused connections never asked to log in');
  assert.deepEqual(fs.readdirSync(dir), ['a.csv']);
});

it('a slow but live upload is ended by the overall time limit, under its final name never', { skip: off, timeout: 60_000 }, async () => {
  let link: SlowLink | undefined;
  try {
    link = await startSlowLink({ host: '127.0.0.1', port: sftp.port }, 4096);
    const dir = transferDir(sftp.dir, 'slow');
    const { file, bytes } = localFile(200_000); // about 50 s at 4 KB/s
    const dest: Destination = {
      protocol: 'sftp', host: '127.0.0.1', port: link.port, username: TRANSFER_USER, password: TRANSFER_PASSWORD, path: dir, hostKeyFingerprint: sftp.hostKeyFingerprint,
    };
    const started = Date.now();
    // Each answer of the server comes in time (the keepalives go on): only the overall limit ends it.
    const err = await shipFile(dest, file, bytes, 'slow.csv', { ...OPTS, maxMs: 4000 }).then(() => null, (e: Error) => e);
    const took = Date.now() - started;
    assert.ok(err, 'the attempt failed');
    assert.match(err.message, /took longer than 4 s in all/);
    assert.ok(took >= 3900 && took < 10_000, `ended after ${took} ms`);
    assert.ok(!fs.readdirSync(dir).includes('slow.csv'));
    // Without the limit the same link does ship (it is slow, not dead): a small file through it.
    const small = localFile(3000);
    assert.equal((await shipFile(dest, small.file, small.bytes, 'small.csv', { ...OPTS, maxMs: 20_000 })).outcome, 'shipped');
  } finally {
    await link?.close();
  }
});

forEachEngine('adr export host key', (h) => {
  const call = (method: string, url: string, opts?: Parameters<Harness['call']>[2]) => h().call(method, url, opts);
  const configure = (token: string, body: Record<string, unknown>) => call('POST', '/api/v2/billing/adrExportConfig', { token, body });
  const ok = (res: Reply) => { assert.equal(res.status, 200, JSON.stringify(res.body)); return res.body; };
  const refused = (res: Reply, words: RegExp) => {
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.equal(res.body.success, false);
    assert.match(res.body.message, words);
  };
  const base = (server: SftpServer, dir: string) => ({
    deliveryProtocol: 'sftp', rotationMinutes: '60', host: '127.0.0.1', port: server.port, username: TRANSFER_USER, password: TRANSFER_PASSWORD, path: dir,
  });
  async function advance() {
    const target = Math.floor(clock() / HOUR) * HOUR + HOUR;
    offset += Math.max(0, target - clock()) + 1000;
    await h().adr.makeWindows();
  }
  const exportsOf = async (token: string) => ok(await call('GET', '/api/v2/billing/adrExports', { token }));

  it('settings: sftp requires hostKeyFingerprint (OpenSSH form or trust-on-first-use), again when the server changes; FTP takes none', { skip: off }, async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const body = base(sftp, '/upload');
    refused(await configure(o.token, body), /hostKeyFingerprint is required for sftp/);
    refused(await configure(o.token, { ...body, hostKeyFingerprint: 'MD5:aa:bb' }), /hostKeyFingerprint must be a SHA256 fingerprint/);
    refused(await configure(o.token, { ...body, deliveryProtocol: 'ftp', hostKeyFingerprint: sftp.hostKeyFingerprint }), /hostKeyFingerprint applies to deliveryProtocol sftp only/);
    const saved = ok(await configure(o.token, { ...body, hostKeyFingerprint: `${sftp.hostKeyFingerprint}=` }));
    assert.equal(saved.config.hostKeyFingerprint, sftp.hostKeyFingerprint, 'stored without padding, as OpenSSH prints it');
    // Kept on an update that keeps the server; required again (with the password) when it changes.
    assert.equal(ok(await configure(o.token, { ...body, path: '/elsewhere' })).config.hostKeyFingerprint, sftp.hostKeyFingerprint);
    refused(await configure(o.token, { ...body, port: other.port }), /hostKeyFingerprint is required again when deliveryProtocol, host, port or username changes/);
    const moved = ok(await configure(o.token, { ...body, port: other.port, hostKeyFingerprint: TRUST_ON_FIRST_USE }));
    assert.equal(moved.config.hostKeyFingerprint, TRUST_ON_FIRST_USE);
    const ftp = ok(await configure(o.token, { ...body, deliveryProtocol: 'ftp', port: 21 }));
    assert.equal(ftp.config.hostKeyFingerprint, null);
  });

  it('a window to a server whose key is not the pinned one fails naming both keys and is retried; trust-on-first-use records the key and ships', { skip: off, timeout: 60_000 }, async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const dir = transferDir(sftp.dir, `tofu-${h().engine}-${o.id}`);
    // Pinned to the other server's key: this one is refused.
    ok(await configure(o.token, { ...base(sftp, dir), hostKeyFingerprint: other.hostKeyFingerprint }));
    await advance();
    const failed = await waitFor('a failed attempt', async () => {
      const e = await exportsOf(o.token);
      return e.shipments.find((s: any) => s.outcome === 'failed');
    }, 30_000, 100);
    assert.ok(failed.message.includes(`host key ${sftp.hostKeyFingerprint} does not match hostKeyFingerprint ${other.hostKeyFingerprint}`), failed.message);
    assert.ok(failed.nextAttemptAt !== null, 'tried again later');
    assert.deepEqual(fs.readdirSync(dir), []);

    // The operator asks for trust on first use (the password again, as for any change of the key's server it keeps).
    ok(await configure(o.token, { ...base(sftp, dir), hostKeyFingerprint: TRUST_ON_FIRST_USE }));
    const shipped = await waitFor('the windows shipped', async () => {
      const e = await exportsOf(o.token);
      return e.windows.length > 0 && e.windows.every((w: any) => w.state === 'finished') && e;
    }, 30_000, 100);
    assert.deepEqual(fs.readdirSync(dir).sort(), shipped.windows.map((w: any) => w.fileName).sort());
    const now = ok(await call('GET', '/api/v2/billing/adrExportSettings', { token: o.token }));
    assert.equal(now.config.hostKeyFingerprint, sftp.hostKeyFingerprint, 'the key the first connection saw, recorded');

    // From then on it holds: the same settings pointed (through the same address) at another
    // server are refused by the recorded key. The port is part of the server, so the export is
    // moved with the recorded key given explicitly, as an operator who reads it would.
    const elsewhere = transferDir(other.dir, `tofu-${h().engine}-${o.id}`);
    ok(await configure(o.token, { ...base(other, elsewhere), hostKeyFingerprint: sftp.hostKeyFingerprint }));
    await advance();
    const refusedThere = await waitFor('the other server refused', async () => {
      const e = await exportsOf(o.token);
      return e.shipments.find((s: any) => s.outcome === 'failed' && s.message.includes(`host key ${other.hostKeyFingerprint} does not match`));
    }, 30_000, 100);
    assert.ok(refusedThere);
    assert.deepEqual(fs.readdirSync(elsewhere), []);
  });
}, { CALLPLANE_ALLOW_PRIVATE_TARGETS: '127.0.0.1/32', CALLPLANE_ADR_DELAY_SECONDS: '0' },
{ worker: true, adr: true, adrRuntime: { now: clock, makeEveryMs: 100, retryDelay: () => 200, transferTimeoutMs: 5000 } });
