// Queries on context_notes (notes about one person, per organization).
import type { ContextNoteRow, Executor } from '../../db/types.ts';

export const contextRepo = {
  /** The person's notes, oldest first. */
  async list(db: Executor, orgId: number, target: string): Promise<ContextNoteRow[]> {
    return db.selectFrom('context_notes').selectAll()
      .where('org_id', '=', orgId).where('target', '=', target).orderBy('seq').execute();
  },
  /** The highest place taken for the person (0 when none). */
  async lastSeq(db: Executor, orgId: number, target: string): Promise<number> {
    const row = await db.selectFrom('context_notes').select((eb) => eb.fn.max('seq').as('last'))
      .where('org_id', '=', orgId).where('target', '=', target).executeTakeFirst();
    return Number(row?.last ?? 0);
  },
  /** Fails with a unique violation when `seq` was taken meanwhile (the caller retries). */
  async insert(db: Executor, row: Omit<ContextNoteRow, 'id'>): Promise<void> {
    await db.insertInto('context_notes').values(row).execute();
  },
};
