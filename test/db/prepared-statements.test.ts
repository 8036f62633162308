// Prepared statements on PostgreSQL (src/db/prepared-statements.ts), read back from the server's own
// pg_prepared_statements of the one pooled connection: a statement with parameters is named from
// its second execution on a connection and then reused; transaction control and statements without
// parameters never are; turned off, nothing is. And the claim's statement (src/queue/engine.ts)
// holds its state as a literal, so once prepared PostgreSQL can keep a generic plan for it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { openDatabase, type Database } from '../../src/db/index.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { QueueEngine } from '../../src/queue/engine.ts';
import { PG_URL } from '../helpers/harness.ts';
import { createScratchPgDatabase } from '../helpers/scratch-pg.ts';

interface Prepared { name: string; statement: string; generic_plans: number; custom_plans: number }

/** The named statements of the pool's connection (pool of one: every query uses the same one). */
async function prepared(database: Database): Promise<Prepared[]> {
  const r = await sql<Prepared>`select name, statement, generic_plans, custom_plans from pg_prepared_statements order by name`.execute(database.db);
  return r.rows.map((p) => ({ ...p, generic_plans: Number(p.generic_plans), custom_plans: Number(p.custom_plans) }));
}

describe('prepared statements on PostgreSQL', { skip: PG_URL ? false : 'set TEST_DATABASE_URL=postgres://… to run' }, () => {
  let scratch: Awaited<ReturnType<typeof createScratchPgDatabase>>;
  before(async () => {
    scratch = await createScratchPgDatabase(PG_URL!, 'callplane_prep');
    const database = openDatabase({ databaseUrl: scratch.url, poolSize: 1 });
    await migrateToLatest(database);
    await database.close();
  });
  after(async () => scratch?.drop());

  const open = (preparedStatements?: boolean) => openDatabase({ databaseUrl: scratch.url, poolSize: 1, preparedStatements });
  const byKind = (database: Database, kind: 'partner' | 'reseller') =>
    database.db.selectFrom('accounts').select('id').where('kind', '=', kind).execute();

  it('names a statement with parameters from its second execution on a connection, then reuses it', async () => {
    const database = open();
    try {
      assert.deepEqual(await byKind(database, 'partner'), []);
      const ours = (all: Prepared[]) => all.filter((p) => p.statement.includes('from "accounts"'));
      assert.equal(ours(await prepared(database)).length, 0, 'once: sent unnamed');
      for (let i = 0; i < 3; i++) assert.deepEqual(await byKind(database, 'partner'), []);
      const named = ours(await prepared(database));
      assert.equal(named.length, 1, 'the same text is prepared once');
      assert.match(named[0].name, /^cp\d+_\d+$/);
      // Reused with other values: still one statement, and the answers follow the values.
      await database.db.insertInto('accounts').values({ kind: 'partner', name: 'P', created_at: 0, updated_at: 0 } as never).execute();
      assert.equal((await byKind(database, 'partner')).length, 1);
      assert.equal((await byKind(database, 'reseller')).length, 0);
      assert.equal(ours(await prepared(database)).length, 1);
      // Transactions and statements without parameters stay unnamed however often they run.
      for (let i = 0; i < 3; i++) {
        await database.db.transaction().execute(async (tx) => void (await sql`select count(*) from accounts`.execute(tx)));
      }
      const all = await prepared(database);
      assert.ok(!all.some((p) => /^\s*(begin|commit)/i.test(p.statement) || p.statement.includes('count(*)')), JSON.stringify(all));
    } finally {
      await database.close();
    }
  });

  it('prepares nothing when turned off (CALLPLANE_PG_PREPARED_STATEMENTS=false)', async () => {
    const database = open(false);
    try {
      for (let i = 0; i < 4; i++) await byKind(database, 'partner');
      assert.deepEqual(await prepared(database), []);
    } finally {
      await database.close();
    }
  });

  it("a claim's statement carries its state as a literal, so PostgreSQL keeps a generic plan for it", async () => {
    const database = open();
    try {
      const engine = new QueueEngine<'tasks'>({ table: 'tasks', workerId: 'prep' });
      for (let i = 0; i < 8; i++) assert.deepEqual(await engine.claim(database.db, 10), []);
      const claim = (await prepared(database)).find((p) => /^select \* from "tasks" where "state" = 'pending'/.test(p.statement));
      assert.ok(claim, 'the claim was prepared with the literal state');
      assert.ok(claim.generic_plans > 0, `a generic plan was used (${claim.custom_plans} custom, ${claim.generic_plans} generic)`);
    } finally {
      await database.close();
    }
  });
});
