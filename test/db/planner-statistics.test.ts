// How SQLite plans a claim (src/db/index.ts, migrations 0017 and 0018): due pending rows come in
// (run_at, id) order from the partial claim-order index, with or without planner statistics, never
// by sorting every pending row. And the statistics themselves: refreshStatistics() (called after a
// bulk insert) writes them, and a database opened again analyzes tables that never were.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { sql } from 'kysely';
import { openDatabase, type Database } from '../../src/db/index.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-stats-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The plan of a claim's core: due pending rows in (run_at, id) order, 50 of them. */
async function claimPlan(database: Database): Promise<string> {
  const q = database.db.selectFrom('tasks').selectAll().where('state', '=', 'pending').where('run_at', '<=', Date.now())
    .orderBy('run_at').orderBy('id').limit(50).compile();
  const plan = await database.db.executeQuery<{ detail: string }>({ ...q, sql: `explain query plan ${q.sql}` });
  return plan.rows.map((r) => r.detail).join(' | ');
}

async function analyzedTables(database: Database): Promise<string[]> {
  const exists = await sql<{ n: number }>`select count(*) as n from sqlite_master where name = 'sqlite_stat1'`.execute(database.db);
  if (Number(exists.rows[0].n) === 0) return [];
  const rows = await sql<{ tbl: string }>`select distinct tbl from sqlite_stat1 order by tbl`.execute(database.db);
  return rows.rows.map((r) => r.tbl);
}

/** 1,000 pending and 2,000 finished pings. */
async function fill(database: Database): Promise<void> {
  await database.db.insertInto('accounts').values({ id: 1, kind: 'partner', name: 'p', created_at: 0, updated_at: 0 } as never).execute();
  const rows = Array.from({ length: 3000 }, (_, i) => ({
    id: `tsk_${String(i).padStart(6, '0')}`, org_id: 1, account_id: 1, type: 'ping', state: i < 1000 ? 'pending' : 'finished',
    wait_to_greet: 0, run_at: 1000 + i, attempt: 0, max_attempts: 3, created_at: 1000 + i, updated_at: 1000 + i,
  }));
  for (let i = 0; i < rows.length; i += 500) await database.db.insertInto('tasks').values(rows.slice(i, i + 500) as never).execute();
}

describe('SQLite claim plans and planner statistics', () => {
  it('a claim reads the claim-order index, before statistics and after refreshStatistics writes them', async () => {
    const database = openDatabase({ sqliteFile: path.join(dir, 'a.db') });
    try {
      await migrateToLatest(database);
      await fill(database);
      assert.ok(!(await analyzedTables(database)).includes('tasks'));
      for (const stage of ['without statistics', 'with statistics']) {
        if (stage === 'with statistics') {
          await database.refreshStatistics(['tasks']);
          assert.ok((await analyzedTables(database)).includes('tasks'), 'refreshStatistics analyzed tasks');
        }
        const plan = await claimPlan(database);
        assert.match(plan, /tasks_claim_order/, `${stage}: ${plan}`);
        assert.doesNotMatch(plan, /TEMP B-TREE/, `${stage}: ${plan}`);
      }
    } finally {
      await database.close();
    }
  });

  it('a database opened again analyzes the tables that never were', async () => {
    const file = path.join(dir, 'b.db');
    let database = openDatabase({ sqliteFile: file });
    await migrateToLatest(database);
    await fill(database);
    assert.ok(!(await analyzedTables(database)).includes('tasks'));
    await database.close();
    database = openDatabase({ sqliteFile: file });
    try {
      assert.ok((await analyzedTables(database)).includes('tasks'));
    } finally {
      await database.close();
    }
  });
});
