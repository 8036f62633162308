// Small helpers shared by the queue tests: tenants from the harness, task rows inserted directly.
import type { Harness } from '../helpers/harness.ts';
import { openDatabase, type Database } from '../../src/db/index.ts';
import type { Db, NewTask } from '../../src/db/types.ts';
import { newId } from '../../src/lib/ids.ts';

export async function tenant(h: Harness) {
  const r = await h.reseller();
  const o = await h.organization(r.id);
  return { orgId: o.id, agentId: o.agentId };
}

export async function insertTasks(db: Db, t: { orgId: number; agentId: number }, specs: Partial<NewTask>[]): Promise<string[]> {
  const now = Date.now();
  const rows: NewTask[] = specs.map((s) => ({
    id: newId('tsk'), org_id: t.orgId, account_id: t.agentId, type: 'ping',
    run_at: now, created_at: now, updated_at: now, ...s,
  }));
  // One statement per row: in a multi-row insert Kysely writes NULL (not the default) on SQLite
  // for a column that only some rows name.
  await db.transaction().execute(async (tx) => {
    for (const row of rows) await tx.insertInto('tasks').values(row).execute();
  });
  return rows.map((r) => r.id);
}

export const task = (db: Db, id: string) => db.selectFrom('tasks').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

/** A clock the test moves by hand, so lease expiry and run_at are exact. */
export function manualClock(start = Date.now()) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

/**
 * A second connection pool on the same database for PostgreSQL. On SQLite the same Database:
 * a process has one writer connection (two better-sqlite3 connections in one process would block
 * each other's event loop on the file lock).
 */
export function secondDatabase(h: Harness): { database: Database; close: () => Promise<void> } {
  if (h.engine === 'sqlite') return { database: h.database, close: async () => {} };
  const database = openDatabase({ databaseUrl: h.config.databaseUrl, poolSize: 5 });
  return { database, close: () => database.close() };
}

export { sleep, waitFor } from '../helpers/wait.ts';
