// The assignment race between processes (issue 25, docs/numbers.md "One holder"): two real
// `callplane serve --role api` processes (node --import tsx src/main.ts) on one PostgreSQL
// database, and several organizations, each with its own Twilio provider (the fake in
// test/helpers/fake-twilio.ts, which records every request), assigning the same numbers at once
// through both. Of each number's assigns exactly one wins and the others are 409; Twilio is asked
// to sell each number once; one row holds it. PostgreSQL only: SQLite is one process's file.
// @lane wall
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { openDatabase } from '../src/db/index.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { PG_URL } from './helpers/harness.ts';
import { createScratchPgDatabase } from './helpers/scratch-pg.ts';
import { killServes, serveRequest, startServe, stopServe, type ServeProcess } from './helpers/serve-process.ts';

const ADMIN = `numbers-race-admin-${crypto.randomBytes(12).toString('hex')}`;
const ORGS = 6;
const NUMBERS = ['+12165550101', '+12165550102', '+15125550104'];

const closers: Array<() => Promise<void>> = [];
after(async () => {
  killServes();
  for (const close of closers.reverse()) await close().catch(() => {});
});

describe('two serve processes on one PostgreSQL database assigning the same numbers', { skip: PG_URL ? false : 'set TEST_DATABASE_URL=postgres://… (two processes share a database only on PostgreSQL)' }, () => {
  it('each number: exactly one organization wins, the others get 409, Twilio sells it once, one row holds it', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-numbers-race-'));
    closers.push(async () => fs.rmSync(dataDir, { recursive: true, force: true }));
    const scratch = await createScratchPgDatabase(PG_URL!, 'callplane_numbers_race');
    closers.push(() => scratch.drop());
    const fake: FakeTwilio = await startFakeTwilio();
    closers.push(() => fake.close());
    const env = {
      DATA_DIR: dataDir, DATABASE_URL: scratch.url, CALLPLANE_ADMIN_TOKEN: ADMIN,
      CALLPLANE_SECRET_KEY: crypto.randomBytes(32).toString('base64'), CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
      CALLPLANE_PUBLIC_URL: 'https://numbers-race.callplane.test', CALLPLANE_SIP_ENABLED: 'false',
      CALLPLANE_RATE_LIMIT_PER_TOKEN: '1000000', CALLPLANE_RATE_LIMIT_PER_ADDRESS: '1000000',
    };
    // One after the other: the first migrates the database, the second finds it migrated.
    const a: ServeProcess = await startServe('api', env);
    const b: ServeProcess = await startServe('api', env);
    closers.push(async () => { await stopServe(a); await stopServe(b); });
    const req = (p: ServeProcess, method: string, url: string, body?: unknown, token = ADMIN) => serveRequest(p.port, token, method, url, body);

    const me = await req(a, 'GET', '/api/v2/account');
    assert.equal(me.status, 200, JSON.stringify(me.body));
    const reseller = await req(a, 'POST', `/api/v2/createReseller?targetPartnerId=${me.body.id}`, { resellerName: 'Race reseller' });
    assert.equal(reseller.status, 201, JSON.stringify(reseller.body));
    const tokens: string[] = [];
    for (let i = 0; i < ORGS; i++) {
      const org = await req(i % 2 ? b : a, 'POST', `/api/v2/createOrganization?targetResellerId=${reseller.body.reseller.id}`, {
        orgName: `Race org ${i}`,
        numberingProviders: [{ providerId: 'twilio', config: { accountSid: fake.accountSid, authToken: fake.authToken, apiBaseUrl: fake.url } }],
      });
      assert.equal(org.status, 201, JSON.stringify(org.body));
      const token = await req(a, 'POST', `/api/v2/tokens?targetAccountId=${org.body.organization.id}`, { type: 'admin', description: 'race' });
      assert.equal(token.status, 200, JSON.stringify(token.body));
      tokens.push(token.body.token.token as string);
    }

    for (const number of NUMBERS) {
      const from = fake.requests.length;
      // Every organization at once, alternately through each process.
      const replies = await Promise.all(tokens.map((token, i) => req(i % 2 ? b : a, 'POST', '/api/v2/phoneNumber/assign', { number, country: 'US' }, token)));
      const won = replies.filter((r) => r.status === 200);
      assert.equal(won.length, 1, `${number}: ${JSON.stringify(replies.map((r) => [r.status, r.body.message]))}`);
      for (const r of replies.filter((x) => x.status !== 200)) {
        assert.equal(r.status, 409, JSON.stringify(r.body));
        assert.ok(String(r.body.message).includes(number), r.body.message);
      }
      const purchases = fake.requests.slice(from).filter((r) => r.method === 'POST' && r.path.endsWith('/IncomingPhoneNumbers.json'));
      assert.deepEqual(purchases.map((r) => r.form.get('PhoneNumber')), [number], 'Twilio was asked to sell it once');
      assert.equal([...fake.incoming.values()].filter((x) => x.phoneNumber === number).length, 1);
    }
    const db = openDatabase({ databaseUrl: scratch.url, poolSize: 1 });
    try {
      const rows = await db.db.selectFrom('phone_numbers').select(['number', 'state']).orderBy('number').execute();
      assert.deepEqual(rows, [...NUMBERS].sort().map((number) => ({ number, state: 'active' })));
    } finally {
      await db.close();
    }
  });
});
