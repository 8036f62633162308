// The turns of the periodic jobs that every worker process schedules (src/maintenance.ts): a job's
// turn is taken by moving its row's due_at past now in one statement, which only one process can
// do for a given period, on SQLite as on PostgreSQL (the table of migration 0040).
import type { Db } from './types.ts';

/**
 * Takes the turn of job `name` for `holder` when it is due (or has never run): true when this
 * caller runs it now, and no other process will until `now + everyMs`.
 */
export async function takeJobTurn(db: Db, name: string, holder: string, now: number, everyMs: number): Promise<boolean> {
  const row = await db.insertInto('job_leases')
    .values({ name, holder, due_at: now + everyMs })
    .onConflict((oc) => oc.column('name')
      .doUpdateSet((eb) => ({ holder: eb.ref('excluded.holder'), due_at: eb.ref('excluded.due_at') }))
      .where('job_leases.due_at', '<=', now))
    .returning('name')
    .executeTakeFirst();
  return row !== undefined;
}

/** Who last took each job's turn and when the next is due (for tests and operators). */
export async function jobTurns(db: Db): Promise<{ name: string; holder: string; dueAt: number }[]> {
  const rows = await db.selectFrom('job_leases').selectAll().orderBy('name').execute();
  return rows.map((r) => ({ name: r.name, holder: r.holder, dueAt: Number(r.due_at) }));
}
