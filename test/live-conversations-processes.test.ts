// The live feed across processes on PostgreSQL, with real `serve` processes (src/main.ts under
// tsx): a `--role api` process streams GET /api/v2/conversations/live; the agent's reply is
// written by a `--role worker` process (the turn queue runs only there), and reaches the API
// process's stream through NOTIFY within about a second of being stored. SIGTERM to the API
// process ends the open stream with a `closed` event and the process stops promptly. A token
// deleted, or a console session signed out, through one API process ends the streams it opened on
// another within a second (the tokens table's change trigger, not the 15 s recheck). SQLite has
// one process per DATA_DIR, so there is nothing to test there (the in-process path is
// test/modules/live-conversations.test.ts).
// @lane wall
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { PG_URL } from './helpers/harness.ts';
import { openLive } from './helpers/live-feed.ts';
import { startReceiver, type Receiver } from './helpers/receiver.ts';
import { createScratchPgDatabase } from './helpers/scratch-pg.ts';
import { killServes, serveRequest, startServe } from './helpers/serve-process.ts';

const ADMIN = `live-admin-${crypto.randomBytes(12).toString('hex')}`;
const closers: Array<() => Promise<void>> = [];
after(async () => {
  killServes();
  for (const close of closers) await close();
});

describe('the live feed across processes [postgres]', { skip: PG_URL ? false : 'TEST_DATABASE_URL is not set' }, () => {
  it('a line the worker process stores reaches the API process\'s stream within a second; SIGTERM ends the stream and the process promptly', async () => {
    const scratch = await createScratchPgDatabase(PG_URL!, 'callplane_live');
    closers.push(() => scratch.drop());
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-live-'));
    closers.push(async () => fs.rmSync(dataDir, { recursive: true, force: true }));
    const hook: Receiver = await startReceiver();
    closers.push(() => hook.close());
    const env = {
      DATA_DIR: dataDir, DATABASE_URL: scratch.url, CALLPLANE_ADMIN_TOKEN: ADMIN,
      CALLPLANE_SECRET_KEY: crypto.randomBytes(32).toString('base64'), CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
      CALLPLANE_SIP_HOST: '127.0.0.1', CALLPLANE_SIP_PORT: '0',
    };
    const api = await startServe('api', env);
    const worker = await startServe('worker', env);
    const request = (method: string, url: string, body?: unknown, token = ADMIN) => serveRequest(api.port, token, method, url, body);

    const me = await request('GET', '/api/v2/account');
    const reseller = await request('POST', `/api/v2/createReseller?targetPartnerId=${me.body.id}`, { resellerName: 'Live reseller' });
    assert.equal(reseller.status, 201, JSON.stringify(reseller.body));
    const org = await request('POST', `/api/v2/createOrganization?targetResellerId=${reseller.body.reseller.id}`, { orgName: 'Live org' });
    assert.equal(org.status, 201, JSON.stringify(org.body));
    const agentId: number = org.body.organization.defaultAccountId;
    const token = await request('POST', `/api/v2/tokens?targetAccountId=${org.body.organization.id}`, { type: 'admin', description: 'live' });
    const orgToken: string = token.body.token.token;

    const stream = await openLive(`http://127.0.0.1:${api.port}`, orgToken);
    assert.equal(stream.status, 200);
    await stream.next('snapshot', (e) => e.event === 'snapshot');
    const sent = await request('POST', '/api/v2/agent/receiveMessage', {
      targetAgent: String(agentId), sourceAddress: 'visitor-7', message: 'anyone there?', outboundMessageWebhookUrl: `${hook.url}/r`,
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const inbound = await stream.next('the person\'s line', (e) => e.event === 'message' && e.data.message.uuid === sent.body.messageUuid);
    assert.equal(inbound.data.message.direction, 'inbound');
    // The reply is the worker's: the API process runs no turns.
    const reply = await stream.next('the agent\'s line', (e) => e.event === 'message' && e.data.message.direction === 'outbound', 20_000);
    assert.match(reply.data.message.message, /You said: "anyone there\?"/);
    const storedAt = Date.parse(reply.data.message.date);
    assert.ok(reply.at - storedAt < 1500, `the line arrived ${reply.at - storedAt} ms after it was stored`);
    assert.match(worker.output(), /"msg":"ready"/);

    // Shutdown: the stream is ended (with a `closed` event), and the process does not wait for it.
    const t0 = Date.now();
    api.child.kill('SIGTERM');
    const closed = await stream.next('closed', (e) => e.event === 'closed', 10_000);
    assert.match(closed.data.message, /shutting down/);
    const exit = await api.exited;
    assert.equal(exit.code, 0, api.output().slice(-2000));
    assert.ok(Date.now() - t0 < 5000, `the API process took ${Date.now() - t0} ms to stop`);
    await stream.ended;
    worker.child.kill('SIGTERM');
    await worker.exited;
  });

  it('deleting a token or signing out through one API process ends its streams on another within a second', async () => {
    const scratch = await createScratchPgDatabase(PG_URL!, 'callplane_live');
    closers.push(() => scratch.drop());
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-live-'));
    closers.push(async () => fs.rmSync(dataDir, { recursive: true, force: true }));
    const env = {
      DATA_DIR: dataDir, DATABASE_URL: scratch.url, CALLPLANE_ADMIN_TOKEN: ADMIN,
      CALLPLANE_SECRET_KEY: crypto.randomBytes(32).toString('base64'), CALLPLANE_SIP_HOST: '127.0.0.1', CALLPLANE_SIP_PORT: '0',
    };
    const one = await startServe('api', env);
    const two = await startServe('api', env);
    const request = (method: string, url: string, body?: unknown, token = ADMIN) => serveRequest(one.port, token, method, url, body);
    const me = await request('GET', '/api/v2/account');
    const reseller = await request('POST', `/api/v2/createReseller?targetPartnerId=${me.body.id}`, { resellerName: 'Live reseller' });
    const org = await request('POST', `/api/v2/createOrganization?targetResellerId=${reseller.body.reseller.id}`, { orgName: 'Live org' });
    assert.equal(org.status, 201, JSON.stringify(org.body));
    const mint = async () => (await request('POST', `/api/v2/tokens?targetAccountId=${org.body.organization.id}`, { type: 'admin', description: 'live' })).body.token.token as string;

    // A token deleted through process one; its stream is on process two.
    const token = await mint();
    const stream = await openLive(`http://127.0.0.1:${two.port}`, token);
    assert.equal(stream.status, 200);
    await stream.next('snapshot', (e) => e.event === 'snapshot');
    let t0 = Date.now();
    const del = await request('DELETE', '/api/v2/tokens', { token });
    assert.equal(del.status, 200, JSON.stringify(del.body));
    const closed = await stream.next('closed', (e) => e.event === 'closed', 5000);
    assert.ok(closed.at - t0 < 1000, `closed ${closed.at - t0} ms after the deletion on the other process`);
    assert.match(closed.data.message, /deleted token/);

    // A console session opened and signed out on process one; its stream is on process two.
    const signIn = await fetch(`http://127.0.0.1:${one.port}/console/session`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: await mint() }),
    });
    assert.equal(signIn.status, 200);
    const headers = { cookie: signIn.headers.getSetCookie()[0]!.split(';')[0]!, 'x-callplane-console': '1' };
    const session = await openLive(`http://127.0.0.1:${two.port}`, '', {}, false, headers);
    assert.equal(session.status, 200, JSON.stringify(session.body));
    await session.next('snapshot', (e) => e.event === 'snapshot');
    t0 = Date.now();
    const out = await fetch(`http://127.0.0.1:${one.port}/console/session`, { method: 'DELETE', headers });
    assert.equal(out.status, 200);
    const ended = await session.next('closed', (e) => e.event === 'closed', 5000);
    assert.ok(ended.at - t0 < 1000, `closed ${ended.at - t0} ms after signing out on the other process`);
    for (const p of [one, two]) p.child.kill('SIGTERM');
    await Promise.all([one.exited, two.exited]);
  });
});
