// The retention jobs' searches (taskRepo, deliveryRepo, relayEventRepo and turnRepo endedBefore, run every ten
// minutes and again per thousand rows pruned) read the partial indexes of ended rows (migration
// 0021-retention-indexes) on both engines, never the whole table: on SQLite that scan held the one
// connection, and so every request, for as long as it read the table.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { sql } from 'kysely';
import { openDatabase, type Database } from '../../src/db/index.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { turnRepo } from '../../src/modules/conversations/repository.ts';
import { taskRepo } from '../../src/modules/tasks/repository.ts';
import { deliveryRepo, relayEventRepo } from '../../src/modules/webhooks/repository.ts';
import { PG_URL } from '../helpers/harness.ts';
import { createScratchPgDatabase } from '../helpers/scratch-pg.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-retention-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** 3,000 pings: a third pending, the rest ended, half of those long ago. */
async function fill(database: Database): Promise<void> {
  await database.db.insertInto('accounts').values({ id: 1, kind: 'partner', name: 'p', created_at: 0, updated_at: 0 } as never).execute();
  const rows = Array.from({ length: 3000 }, (_, i) => ({
    id: `tsk_${String(i).padStart(6, '0')}`, org_id: 1, account_id: 1, type: 'ping', state: i < 1000 ? 'pending' : i % 2 ? 'finished' : 'canceled',
    wait_to_greet: 0, run_at: 1000 + i, attempt: 0, max_attempts: 3, created_at: 1000 + i, updated_at: 1000 + i,
    finished_at: i < 1000 ? null : i < 2000 ? 5000 + i : 10_000_000 + i,
  }));
  for (let i = 0; i < rows.length; i += 500) await database.db.insertInto('tasks').values(rows.slice(i, i + 500) as never).execute();
  await database.refreshStatistics(['tasks']);
}

type Explain = (q: { sql: string; parameters: readonly unknown[] }) => Promise<string>;

async function check(database: Database, explain: Explain): Promise<void> {
  await migrateToLatest(database);
  // Deliveries and turns with no rows yet: the plan shows whether their index fits the search.
  for (const [index, q] of [
    ['webhook_deliveries_ended', deliveryRepo.endedBefore(database.db, 9_000_000, 1000).compile()],
    ['conversation_turns_ended', turnRepo.endedBefore(database.db, 9_000_000, 1000).compile()],
    ['relay_events_received', relayEventRepo.endedBefore(database.db, 9_000_000, 1000).compile()],
  ] as const) {
    const plan = await explain(q);
    assert.match(plan, new RegExp(index), plan);
  }
  await fill(database);
  const plan = await explain(taskRepo.endedBefore(database.db, 9_000_000, 1000).compile());
  assert.match(plan, /tasks_ended/, plan);
  assert.doesNotMatch(plan, /TEMP B-TREE|Sort/, plan);
  const rows = await taskRepo.endedBefore(database.db, 9_000_000, 1000).execute();
  assert.equal(rows.length, 1000, 'the thousand tasks that ended long ago');
  assert.ok(rows.every((r) => r.state !== 'pending'));
}

describe('the retention jobs read the indexes of ended rows', () => {
  it('on SQLite', async () => {
    const database = openDatabase({ sqliteFile: path.join(dir, 'a.db') });
    try {
      await check(database, async (q) => {
        const plan = await database.db.executeQuery<{ detail: string }>({ ...q, sql: `explain query plan ${q.sql}` } as never);
        return plan.rows.map((r) => r.detail).join(' | ');
      });
    } finally {
      await database.close();
    }
  });

  it('on PostgreSQL', { skip: PG_URL ? false : 'set TEST_DATABASE_URL=postgres://… to run' }, async () => {
    const scratch = await createScratchPgDatabase(PG_URL!, 'callplane_retention');
    const database = openDatabase({ databaseUrl: scratch.url, poolSize: 1 });
    try {
      await check(database, async (q) => database.db.transaction().execute(async (tx) => {
        // A small table may be read whole more cheaply: ask whether the index fits at all.
        await sql`set local enable_seqscan = off`.execute(tx);
        const plan = await tx.executeQuery<{ 'QUERY PLAN': string }>({ ...q, sql: `explain ${q.sql}` } as never);
        return plan.rows.map((r) => r['QUERY PLAN']).join(' | ');
      }));
    } finally {
      await database.close();
      await scratch.drop();
    }
  });
});
