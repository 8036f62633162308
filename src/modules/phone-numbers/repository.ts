// Queries on phone_numbers: the numbers organizations hold.
import { sql } from 'kysely';
import type { Db, Executor, NumberReleaseRow, NumberReleasesTable, PhoneNumberRow, PhoneNumbersTable } from '../../db/types.ts';
import type { Insertable, Updateable } from 'kysely';

export const phoneNumberRepo = {
  /** Inserts the number's row; a unique violation means someone holds (or is buying) it. */
  async insert(db: Executor, row: Insertable<PhoneNumbersTable>): Promise<PhoneNumberRow> {
    return db.insertInto('phone_numbers').values(row).returningAll().executeTakeFirstOrThrow();
  },
  async update(db: Executor, id: number, patch: Updateable<PhoneNumbersTable>): Promise<void> {
    await db.updateTable('phone_numbers').set(patch).where('id', '=', id).execute();
  },
  async delete(db: Executor, id: number): Promise<void> {
    await db.deleteFrom('phone_numbers').where('id', '=', id).execute();
  },
  /** The organization's row for this number; `lock` takes a row lock (a no-op on SQLite). */
  async findInOrg(db: Executor, orgId: number, number: string, opts: { lock?: boolean } = {}): Promise<PhoneNumberRow | undefined> {
    const q = db.selectFrom('phone_numbers').selectAll().where('org_id', '=', orgId).where('number', '=', number);
    return (opts.lock ? q.forUpdate() : q).executeTakeFirst();
  },
  /** Who holds this number, whatever the organization (what an arriving call or text asks). */
  async findByNumber(db: Executor, number: string): Promise<PhoneNumberRow | undefined> {
    return db.selectFrom('phone_numbers').selectAll().where('number', '=', number).executeTakeFirst();
  },
  /** Which of these numbers somebody holds. */
  async heldAmong(db: Executor, numbers: string[]): Promise<Set<string>> {
    if (numbers.length === 0) return new Set();
    const rows = await db.selectFrom('phone_numbers').select('number').where('number', 'in', numbers).execute();
    return new Set(rows.map((r) => r.number));
  },
  /** Deletes the organization's rows (one agent's, when given): the numbers are unbound. */
  async deleteForHolder(db: Executor, orgId: number, agentId?: number): Promise<void> {
    let q = db.deleteFrom('phone_numbers').where('org_id', '=', orgId);
    if (agentId !== undefined) q = q.where('agent_id', '=', agentId);
    await q.execute();
  },
  /** The organization's numbers (one agent's, when given), oldest first. */
  async listForOrg(db: Executor, orgId: number, agentId?: number): Promise<PhoneNumberRow[]> {
    let q = db.selectFrom('phone_numbers').selectAll().where('org_id', '=', orgId);
    if (agentId !== undefined) q = q.where('agent_id', '=', agentId);
    return q.orderBy('id').execute();
  },
};

/** Queries on number_releases: a deleted holder's numbers to release at their provider (a queue). */
export const releaseRepo = {
  async insert(db: Executor, rows: Insertable<NumberReleasesTable>[]): Promise<void> {
    if (rows.length > 0) await db.insertInto('number_releases').values(rows).execute();
  },
  /** Records the provider's reference found by looking the number up, so a retry releases that one without looking again. */
  async setRef(db: Executor, id: string, providerRef: string, now: number): Promise<void> {
    await db.updateTable('number_releases').set({ provider_ref: providerRef, updated_at: now }).where('id', '=', id).execute();
  },
  /**
   * Deletes up to `batch` releases that ended (released, or nothing left to release) before
   * `before`; failed ones stay for an operator (the number may still be rented). The states are
   * literals, as the partial index number_releases_ended names them. Answers how many went.
   */
  async pruneEnded(db: Db, before: number, batch = 1000): Promise<number> {
    return db.transaction().execute(async (tx) => {
      const rows = await tx.selectFrom('number_releases').select('id')
        .where(sql.ref('state'), 'in', [sql.lit('finished'), sql.lit('canceled')]).where('finished_at', '<', before)
        .orderBy('finished_at').limit(batch).execute();
      if (rows.length === 0) return 0;
      await tx.deleteFrom('number_releases').where('id', 'in', rows.map((r) => r.id)).execute();
      return rows.length;
    });
  },
  /** The releases of an organization's numbers, oldest first (what an operator and the tests read). */
  async listForOrg(db: Executor, orgId: number): Promise<NumberReleaseRow[]> {
    return db.selectFrom('number_releases').selectAll().where('org_id', '=', orgId).orderBy('created_at').orderBy('id').execute();
  },
};
