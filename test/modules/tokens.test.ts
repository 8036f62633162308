// Authorization operations on /api/v2/tokens and the first-start admin bootstrap, on both engines.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import { PG_URL, type Engine, type Harness } from '../helpers/harness.ts';
import { openDatabase, type Database } from '../../src/db/index.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { bootstrapAdmin } from '../../src/modules/tokens/service.ts';
import { createScratchPgDatabase } from '../helpers/scratch-pg.ts';

const sha256 = (s: string) => crypto.createHash('sha256').update(s, 'utf8').digest('hex');

async function createToken(h: Harness, token: string, targetAccountId?: number, description = 'Main app') {
  return h.call('POST', '/api/v2/tokens', { token, query: { targetAccountId }, body: { type: 'admin', description } });
}

/** The id of the account a token authenticates as, or the failing status. */
async function whoAmI(h: Harness, token: string): Promise<number | string> {
  const r = await h.call('GET', '/api/v2/account', { token });
  return r.status === 200 ? r.body.id : `status ${r.status}`;
}

async function tokenRowCount(h: Harness): Promise<number> {
  const r = await h.database.db.selectFrom('tokens').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(r.n);
}

forEachEngine('tokens', (h) => {
  it('creating a token returns the full token once with the contract fields and status 200', async () => {
    const r = await h().reseller();
    const before = Math.floor(Date.now() / 1000);
    const res = await createToken(h(), r.token, undefined, '  Main app  ');
    assert.equal(res.status, 200);
    assert.equal(res.body.success, true);
    assert.equal(res.body.message, 'Token created successfully');
    const t = res.body.token;
    assert.match(t.token, /^cpl_[A-Za-z0-9_-]{43}$/);
    assert.equal(t.description, 'Main app');
    assert.equal(t.type, 'admin');
    assert.equal(typeof t.timestamp, 'string');
    assert.ok(Number(t.timestamp) >= before && Number(t.timestamp) <= Math.floor(Date.now() / 1000) + 1);
    assert.equal(t.userId, r.id);
    assert.equal(await whoAmI(h(), t.token), r.id);
  });

  it('two created tokens differ and both authenticate', async () => {
    const r = await h().reseller();
    const a = (await createToken(h(), r.token)).body.token.token;
    const b = (await createToken(h(), r.token)).body.token.token;
    assert.notEqual(a, b);
    assert.equal(await whoAmI(h(), a), r.id);
    assert.equal(await whoAmI(h(), b), r.id);
  });

  it('type defaults to admin when omitted', async () => {
    const r = await h().reseller();
    const res = await h().call('POST', '/api/v2/tokens', { token: r.token, body: { description: 'no type' } });
    assert.equal(res.status, 200);
    assert.equal(res.body.token.type, 'admin');
  });

  it('a type other than admin is a 400 naming type, and creates nothing', async () => {
    const r = await h().reseller();
    const before = await tokenRowCount(h());
    for (const type of ['read', 'ADMIN', '', 'one-time']) {
      const res = await h().call('POST', '/api/v2/tokens', { token: r.token, body: { type, description: 'x' } });
      assert.equal(res.status, 400, type);
      assert.equal(res.body.success, false);
      assert.match(res.body.message, /\btype\b/);
    }
    const bad = await h().call('POST', '/api/v2/tokens', { token: r.token, body: { type: 5, description: 'x' } });
    assert.equal(bad.status, 400);
    assert.match(bad.body.message, /^type /);
    assert.equal(await tokenRowCount(h()), before);
  });

  it('description is required, must not be blank and is bounded', async () => {
    const r = await h().reseller();
    const cases: [unknown, RegExp][] = [
      [{ type: 'admin' }, /^description is required$/],
      [{ type: 'admin', description: '' }, /^description must not be empty$/],
      [{ type: 'admin', description: '   ' }, /^description must not be empty$/],
      [{ type: 'admin', description: 'x'.repeat(201) }, /^description must be at most 200 characters long$/],
    ];
    for (const [body, message] of cases) {
      const res = await h().call('POST', '/api/v2/tokens', { token: r.token, body });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.body.success, false);
      assert.match(res.body.message, message);
    }
    const none = await h().call('POST', '/api/v2/tokens', { token: r.token });
    assert.equal(none.status, 400);
    assert.equal(none.body.success, false);
  });

  it('listing shows each token by a prefix ending in … and never the full token', async () => {
    const r = await h().reseller();
    const created = [r.token];
    for (const d of ['one', 'two']) created.push((await createToken(h(), r.token, undefined, d)).body.token.token);
    const res = await h().call('GET', '/api/v2/tokens', { token: r.token });
    assert.equal(res.status, 200);
    assert.equal(res.body.success, true);
    assert.equal(res.body.tokens.length, 3);
    const text = JSON.stringify(res.body);
    for (const full of created) {
      assert.ok(!text.includes(full), 'a full token appears in the listing');
      assert.ok(!text.includes(full.slice(0, 20)), 'more than the prefix appears in the listing');
    }
    for (const [i, t] of res.body.tokens.entries()) {
      assert.ok(t.token.endsWith('…'), t.token);
      const prefix = t.token.slice(0, -1);
      assert.ok(prefix.length >= 8 && prefix.length < created[i]!.length / 2, t.token);
      assert.ok(created[i]!.startsWith(prefix));
      assert.equal(t.type, 'admin');
      assert.equal(t.userId, r.id);
      assert.match(t.timestamp, /^\d+$/);
    }
    assert.deepEqual(res.body.tokens.map((t: any) => t.description), ['test', 'one', 'two']);
  });

  it("an organization's listing holds only its own tokens, not its reseller's or a sibling's", async () => {
    const r = await h().reseller();
    const o1 = await h().organization(r.id);
    const o2 = await h().organization(r.id);
    const res = await h().call('GET', '/api/v2/tokens', { token: o1.token });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.tokens.map((t: any) => t.userId), [o1.id]);
    assert.ok(o1.token.startsWith(res.body.tokens[0].token.slice(0, -1)));
    for (const id of [r.id, o2.id, h().partnerId]) {
      const other = await h().call('GET', '/api/v2/tokens', { token: o1.token, query: { targetAccountId: id } });
      assert.equal(other.status, 404, `targetAccountId ${id}`);
      assert.equal(other.body.success, false);
    }
  });

  it('a reseller lists the tokens of its organization with targetAccountId', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const res = await h().call('GET', '/api/v2/tokens', { token: r.token, query: { targetAccountId: o.id } });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.tokens.map((t: any) => t.userId), [o.id]);
  });

  it('the tokens table stores only the SHA-256 hash: no column of any row holds a plaintext token', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const mine = (await createToken(h(), o.token)).body.token.token as string;
    const plaintexts = [h().adminToken, r.token, o.token, mine];
    const rows = await h().database.db.selectFrom('tokens').selectAll().execute();
    assert.ok(rows.length >= plaintexts.length);
    for (const row of rows) {
      for (const value of Object.values(row)) {
        for (const p of plaintexts) assert.ok(!String(value).includes(p), `a column holds plaintext ${p.slice(0, 12)}…`);
      }
    }
    const row = rows.find((x) => x.hash === sha256(mine));
    assert.ok(row, 'no row holds the SHA-256 hash of the token');
    assert.equal(row.account_id, o.id);
    assert.equal(row.created_by, o.id);
    assert.equal(row.hash, sha256(mine));
  });

  it('POST with targetAccountId creates a token for a descendant that authenticates as that descendant', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const a = await h().agent(o.id);
    const forOrg = await createToken(h(), r.token, o.id);
    assert.equal(forOrg.status, 200);
    assert.equal(forOrg.body.token.userId, o.id);
    assert.equal(await whoAmI(h(), forOrg.body.token.token), o.id);
    const forAgent = await createToken(h(), r.token, a.id);
    assert.equal(forAgent.status, 200);
    assert.equal(forAgent.body.token.userId, a.id);
    assert.equal(await whoAmI(h(), forAgent.body.token.token), a.id);
    // A token made for a descendant cannot climb back up to its maker.
    const up = await h().call('GET', '/api/v2/account', { token: forAgent.body.token.token, query: { targetAccountId: r.id } });
    assert.equal(up.status, 404);
  });

  it('a descendant cannot create a token for its ancestor, a sibling or another tenant (404, nothing created)', async () => {
    const r = await h().reseller();
    const r2 = await h().reseller();
    const o = await h().organization(r.id);
    const sibling = await h().organization(r.id);
    const a = await h().agent(o.id);
    const a2 = await h().agent(o.id);
    const before = await tokenRowCount(h());
    const attempts: [string, string, number][] = [
      ['organization → its reseller', o.token, r.id],
      ['organization → the partner', o.token, h().partnerId],
      ['organization → sibling organization', o.token, sibling.id],
      ['organization → sibling\'s default agent', o.token, sibling.agentId],
      ['agent → its organization', a.token, o.id],
      ['agent → sibling agent', a.token, a2.id],
      ['reseller → the partner', r.token, h().partnerId],
      ['reseller → another reseller', r.token, r2.id],
    ];
    for (const [what, token, target] of attempts) {
      const res = await createToken(h(), token, target);
      assert.equal(res.status, 404, what);
      assert.equal(res.body.success, false, what);
      assert.equal(res.body.message, `targetAccountId ${target} was not found`, what);
    }
    assert.equal(await tokenRowCount(h()), before);
  });

  it('DELETE by the full token removes it and it stops working at once', async () => {
    const r = await h().reseller();
    const victim = (await createToken(h(), r.token)).body.token.token as string;
    assert.equal(await whoAmI(h(), victim), r.id);
    const del = await h().call('DELETE', '/api/v2/tokens', { token: r.token, body: { token: victim } });
    assert.equal(del.status, 200);
    assert.deepEqual({ success: del.body.success, message: del.body.message }, { success: true, message: 'Token deleted successfully' });
    const after = await h().call('GET', '/api/v2/account', { token: victim });
    assert.equal(after.status, 401);
    assert.equal(after.body.success, false);
    assert.equal(await whoAmI(h(), r.token), r.id, 'the caller\'s own token must keep working');
    const rows = await h().database.db.selectFrom('tokens').select('id').where('hash', '=', sha256(victim)).execute();
    assert.equal(rows.length, 0);
  });

  it('DELETE by the listed prefix (with or without the ellipsis) removes exactly that token', async () => {
    const r = await h().reseller();
    const first = (await createToken(h(), r.token, undefined, 'first')).body.token.token as string;
    const second = (await createToken(h(), r.token, undefined, 'second')).body.token.token as string;
    const listed = (await h().call('GET', '/api/v2/tokens', { token: r.token })).body.tokens as any[];
    const p1 = listed.find((t) => t.description === 'first').token as string;
    const p2 = listed.find((t) => t.description === 'second').token as string;

    const del1 = await h().call('DELETE', '/api/v2/tokens', { token: r.token, body: { token: p1 } });
    assert.equal(del1.status, 200);
    assert.equal((await h().call('GET', '/api/v2/account', { token: first })).status, 401);
    assert.equal(await whoAmI(h(), second), r.id);

    const del2 = await h().call('DELETE', '/api/v2/tokens', { token: r.token, body: { token: p2.slice(0, -1) } });
    assert.equal(del2.status, 200);
    assert.equal((await h().call('GET', '/api/v2/account', { token: second })).status, 401);
    assert.equal(await whoAmI(h(), r.token), r.id);
    const left = (await h().call('GET', '/api/v2/tokens', { token: r.token })).body.tokens as any[];
    assert.deepEqual(left.map((t) => t.description), ['test']);
  });

  it('a token that deletes itself is refused on its very next request', async () => {
    const r = await h().reseller();
    const self = (await createToken(h(), r.token)).body.token.token as string;
    const del = await h().call('DELETE', '/api/v2/tokens', { token: self, body: { token: self } });
    assert.equal(del.status, 200);
    const next = await h().call('GET', '/api/v2/tokens', { token: self });
    assert.equal(next.status, 401);
  });

  it('deleting the same token twice is a 404 the second time', async () => {
    const r = await h().reseller();
    const t = (await createToken(h(), r.token)).body.token.token as string;
    assert.equal((await h().call('DELETE', '/api/v2/tokens', { token: r.token, body: { token: t } })).status, 200);
    const again = await h().call('DELETE', '/api/v2/tokens', { token: r.token, body: { token: t } });
    assert.equal(again.status, 404);
    assert.equal(again.body.success, false);
    assert.ok(!again.body.message.includes(t), 'the token is echoed in the error');
  });

  it("deleting another tenant's token is a 404 by full token, by prefix and by targetAccountId, and it keeps working", async () => {
    const r1 = await h().reseller();
    const r2 = await h().reseller();
    const o1 = await h().organization(r1.id);
    const o2 = await h().organization(r2.id);
    const prefixOf = async (token: string, targetAccountId?: number) => {
      const list = await h().call('GET', '/api/v2/tokens', { token, query: { targetAccountId } });
      return list.body.tokens[0].token as string;
    };
    const o2Prefix = await prefixOf(o2.token);
    const r2Prefix = await prefixOf(r2.token);
    const attempts: [string, string, string, number?][] = [
      ['org → other reseller\'s org, full token', o1.token, o2.token],
      ['org → other reseller\'s org, prefix', o1.token, o2Prefix],
      ['org → other reseller\'s org, prefix with its targetAccountId', o1.token, o2Prefix, o2.id],
      ['reseller → other reseller, full token', r1.token, r2.token],
      ['reseller → other reseller, prefix', r1.token, r2Prefix],
      ['reseller → other reseller\'s org, full token', r1.token, o2.token],
      ['reseller → other reseller\'s org, full token with own org as target', r1.token, o2.token, o1.id],
      ['org → its own reseller, full token', o1.token, r1.token],
      ['org → its own reseller, prefix with targetAccountId', o1.token, await prefixOf(r1.token), r1.id],
    ];
    for (const [what, caller, value, targetAccountId] of attempts) {
      const res = await h().call('DELETE', '/api/v2/tokens', { token: caller, query: { targetAccountId }, body: { token: value } });
      assert.equal(res.status, 404, what);
      assert.equal(res.body.success, false, what);
      assert.ok(!JSON.stringify(res.body).includes(value.replace(/…$/, '')), `${what}: the value is echoed`);
    }
    assert.equal(await whoAmI(h(), o2.token), o2.id);
    assert.equal(await whoAmI(h(), r2.token), r2.id);
    assert.equal(await whoAmI(h(), r1.token), r1.id);
  });

  it("a reseller deletes its organization's token by full value, or by prefix with targetAccountId", async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const t1 = (await createToken(h(), r.token, o.id, 'one')).body.token.token as string;
    const t2 = (await createToken(h(), r.token, o.id, 'two')).body.token.token as string;
    const byFull = await h().call('DELETE', '/api/v2/tokens', { token: r.token, body: { token: t1 } });
    assert.equal(byFull.status, 200);
    assert.equal((await h().call('GET', '/api/v2/account', { token: t1 })).status, 401);

    const listed = (await h().call('GET', '/api/v2/tokens', { token: r.token, query: { targetAccountId: o.id } })).body.tokens as any[];
    const p2 = listed.find((t) => t.description === 'two').token as string;
    // Without targetAccountId the prefix is looked up among the caller's own tokens only.
    const wrongPlace = await h().call('DELETE', '/api/v2/tokens', { token: r.token, body: { token: p2 } });
    assert.equal(wrongPlace.status, 404);
    assert.equal(await whoAmI(h(), t2), o.id);
    const byPrefix = await h().call('DELETE', '/api/v2/tokens', { token: r.token, query: { targetAccountId: o.id }, body: { token: p2 } });
    assert.equal(byPrefix.status, 200);
    assert.equal((await h().call('GET', '/api/v2/account', { token: t2 })).status, 401);
    assert.equal(await whoAmI(h(), o.token), o.id);
  });

  it('DELETE needs a token value that is at least a prefix (400 naming token)', async () => {
    const r = await h().reseller();
    const cases: [unknown, RegExp][] = [
      [{}, /^token is required$/],
      [{ token: '' }, /^token must not be empty$/],
      [{ token: 'cpl_' }, /^token must be/],
      [{ token: '…' }, /^token must be/],
      [{ token: { value: 'x' } }, /^token must be a string$/],
    ];
    for (const [body, message] of cases) {
      const res = await h().call('DELETE', '/api/v2/tokens', { token: r.token, body });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(res.body.message, message);
    }
    assert.equal(await whoAmI(h(), r.token), r.id);
  });

  it('deleting an unknown token or prefix is a 404', async () => {
    const r = await h().reseller();
    for (const token of ['cpl_zzzzzzzz…', `cpl_${'z'.repeat(43)}`]) {
      const res = await h().call('DELETE', '/api/v2/tokens', { token: r.token, body: { token } });
      assert.equal(res.status, 404, token);
      assert.deepEqual(Object.keys(res.body).filter((k) => k !== 'requestId').sort(), ['message', 'success']);
    }
  });
});

/** A migrated database nothing has been written to, on the given engine. */
async function freshDatabase(engine: Engine): Promise<{ database: Database; close: () => Promise<void> }> {
  if (engine === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-bootstrap-'));
    const database = openDatabase({ sqliteFile: path.join(dir, 'callplane.db') });
    await migrateToLatest(database);
    return { database, close: async () => { await database.close(); fs.rmSync(dir, { recursive: true, force: true }); } };
  }
  const scratch = await createScratchPgDatabase(PG_URL!, 'callplane_boot');
  const database = openDatabase({ databaseUrl: scratch.url, poolSize: 5 });
  await migrateToLatest(database);
  return { database, close: async () => { await database.close(); await scratch.drop(); } };
}

async function partners(database: Database) {
  return database.db.selectFrom('accounts').selectAll().where('kind', '=', 'partner').execute();
}

forEachEngine('bootstrapAdmin', (h) => {
  it('on a fresh database it creates the partner and returns a new token once; a second call returns none', async () => {
    const fresh = await freshDatabase(h().engine);
    try {
      const { db } = fresh.database;
      const first = await bootstrapAdmin(db, undefined);
      assert.equal(typeof first.newToken, 'string');
      assert.match(first.newToken!, /^cpl_/);
      const rows = await partners(fresh.database);
      assert.equal(rows.length, 1);
      assert.equal(rows[0]!.id, first.partnerId);
      assert.equal(rows[0]!.parent_id, null);
      assert.equal(rows[0]!.partner_id, first.partnerId, 'the partner names itself in its ancestor column');
      const tokens = await db.selectFrom('tokens').selectAll().execute();
      assert.equal(tokens.length, 1);
      assert.equal(tokens[0]!.hash, sha256(first.newToken!));
      assert.equal(tokens[0]!.account_id, first.partnerId);
      assert.equal(tokens[0]!.type, 'admin');

      const second = await bootstrapAdmin(db, undefined);
      assert.equal(second.newToken, undefined);
      assert.equal(second.partnerId, first.partnerId);
      assert.equal((await partners(fresh.database)).length, 1);
      assert.equal((await db.selectFrom('tokens').selectAll().execute()).length, 1);
    } finally {
      await fresh.close();
    }
  });

  it('concurrent first starts create exactly one partner and hand out exactly one token', async () => {
    const fresh = await freshDatabase(h().engine);
    try {
      const { db } = fresh.database;
      const results = await Promise.all([1, 2, 3, 4].map(() => bootstrapAdmin(db, undefined)));
      assert.equal(new Set(results.map((r) => r.partnerId)).size, 1);
      assert.equal(results.filter((r) => r.newToken !== undefined).length, 1);
      assert.equal((await partners(fresh.database)).length, 1);
      assert.equal((await db.selectFrom('tokens').selectAll().execute()).length, 1);
    } finally {
      await fresh.close();
    }
  });

  it('on a fresh database an explicit admin token is registered (not returned), once, however often it is called', async () => {
    const fresh = await freshDatabase(h().engine);
    try {
      const { db } = fresh.database;
      const value = `operator-chosen-${crypto.randomBytes(12).toString('hex')}`;
      const first = await bootstrapAdmin(db, value);
      assert.equal(first.newToken, undefined);
      const second = await bootstrapAdmin(db, value);
      assert.equal(second.newToken, undefined);
      assert.equal(second.partnerId, first.partnerId);
      assert.equal((await partners(fresh.database)).length, 1);
      const tokens = await db.selectFrom('tokens').selectAll().execute();
      assert.equal(tokens.length, 1);
      assert.equal(tokens[0]!.hash, sha256(value));
      assert.equal(tokens[0]!.account_id, first.partnerId);
      for (const v of Object.values(tokens[0]!)) assert.ok(!String(v).includes(value));
    } finally {
      await fresh.close();
    }
  });

  it('an explicit admin token registered on a running database authenticates as the partner, idempotently', async () => {
    const { db } = h().database;
    const value = `operator-chosen-${crypto.randomBytes(12).toString('hex')}`;
    assert.equal((await h().call('GET', '/api/v2/account', { token: value })).status, 401);
    const first = await bootstrapAdmin(db, value);
    const second = await bootstrapAdmin(db, value);
    assert.equal(first.partnerId, h().partnerId);
    assert.equal(second.partnerId, h().partnerId);
    assert.equal(first.newToken, undefined);
    const res = await h().call('GET', '/api/v2/account', { token: value });
    assert.equal(res.status, 200);
    assert.equal(res.body.id, h().partnerId);
    const rows = await db.selectFrom('tokens').select('id').where('hash', '=', sha256(value)).execute();
    assert.equal(rows.length, 1);
    assert.equal((await partners(h().database)).length, 1);
    // The harness's own bootstrap token keeps working alongside it.
    assert.equal((await h().call('GET', '/api/v2/account')).status, 200);
  });

  it('a changed admin token that shares its visible prefix with an earlier one is still registered', async () => {
    const { db } = h().database;
    const stem = `rotate-me-${crypto.randomBytes(4).toString('hex')}`;
    const older = `${stem}-first-value-000000`;
    const newer = `${stem}-second-value-11111`;
    await bootstrapAdmin(db, older);
    await bootstrapAdmin(db, newer);
    const res = await h().call('GET', '/api/v2/account', { token: newer });
    assert.equal(res.status, 200);
    assert.equal(res.body.id, h().partnerId);
    assert.equal((await h().call('GET', '/api/v2/account', { token: older })).status, 200);
    // Each listed prefix still names exactly one token, so deleting the newer one by its
    // prefix leaves the older one working.
    const listed = (await h().call('GET', '/api/v2/tokens')).body.tokens as any[];
    const prefixes = listed.map((t) => t.token as string);
    assert.equal(new Set(prefixes).size, prefixes.length);
    const row = await db.selectFrom('tokens').select('prefix').where('hash', '=', sha256(newer)).executeTakeFirstOrThrow();
    const del = await h().call('DELETE', '/api/v2/tokens', { body: { token: `${row.prefix}…` } });
    assert.equal(del.status, 200);
    assert.equal((await h().call('GET', '/api/v2/account', { token: newer })).status, 401);
    assert.equal((await h().call('GET', '/api/v2/account', { token: older })).status, 200);
  });
});
