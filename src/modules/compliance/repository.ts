// Queries on do_not_call (the numbers each partner's, reseller's and organization's list holds)
// and compliance_settings (an organization's HELP text and redaction), migration 0039.
import type { ComplianceSettingsRow, DoNotCallRow, Executor } from '../../db/types.ts';

/** Numbers asked about, or inserted, per statement. */
export const DNC_BATCH = 500;

export const doNotCallRepo = {
  /** Adds numbers to `ownerId`'s list; those already there keep their first entry. Answers how many were new. */
  async add(db: Executor, rows: DoNotCallRow[]): Promise<number> {
    let added = 0;
    for (let i = 0; i < rows.length; i += DNC_BATCH) {
      const res = await db.insertInto('do_not_call').values(rows.slice(i, i + DNC_BATCH))
        .onConflict((oc) => oc.columns(['owner_id', 'number']).doNothing()).executeTakeFirst();
      added += Number(res.numInsertedOrUpdatedRows ?? 0);
    }
    return added;
  },

  async remove(db: Executor, ownerId: number, number: string): Promise<boolean> {
    const res = await db.deleteFrom('do_not_call').where('owner_id', '=', ownerId).where('number', '=', number).executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  },

  async find(db: Executor, ownerId: number, number: string): Promise<DoNotCallRow | undefined> {
    return db.selectFrom('do_not_call').selectAll().where('owner_id', '=', ownerId).where('number', '=', number).executeTakeFirst();
  },

  /** One page of a list, newest first. */
  async list(db: Executor, ownerId: number, limit: number, offset: number): Promise<{ rows: DoNotCallRow[]; total: number }> {
    const rows = await db.selectFrom('do_not_call').selectAll().where('owner_id', '=', ownerId)
      .orderBy('created_at', 'desc').orderBy('number').limit(limit).offset(offset).execute();
    const count = await db.selectFrom('do_not_call').select((eb) => eb.fn.countAll<number | string>().as('n'))
      .where('owner_id', '=', ownerId).executeTakeFirst();
    return { rows, total: Number(count?.n ?? 0) };
  },

  /** A list in pages after `after` (created_at, number), oldest first: the export reads it so. */
  async page(db: Executor, ownerId: number, after: { createdAt: number; number: string } | null, limit: number): Promise<DoNotCallRow[]> {
    let q = db.selectFrom('do_not_call').selectAll().where('owner_id', '=', ownerId);
    if (after) {
      q = q.where((eb) => eb.or([
        eb('created_at', '>', after.createdAt),
        eb.and([eb('created_at', '=', after.createdAt), eb('number', '>', after.number)]),
      ]));
    }
    return q.orderBy('created_at').orderBy('number').limit(limit).execute();
  },

  /**
   * Which of `numbers` are on any of the `owners`' lists, with the entry that puts each there
   * (an owner listed first wins: the organization's own before its reseller's and partner's).
   */
  async blocked(db: Executor, owners: readonly number[], numbers: readonly string[]): Promise<Map<string, DoNotCallRow>> {
    const found = new Map<string, DoNotCallRow>();
    const unique = [...new Set(numbers)];
    if (owners.length === 0 || unique.length === 0) return found;
    for (let i = 0; i < unique.length; i += DNC_BATCH) {
      const rows = await db.selectFrom('do_not_call').selectAll()
        .where('owner_id', 'in', [...owners]).where('number', 'in', unique.slice(i, i + DNC_BATCH)).execute();
      rows.sort((a, b) => owners.indexOf(a.owner_id) - owners.indexOf(b.owner_id));
      for (const r of rows) if (!found.has(r.number)) found.set(r.number, r);
    }
    return found;
  },
};

export const complianceSettingsRepo = {
  async load(db: Executor, orgId: number): Promise<ComplianceSettingsRow | undefined> {
    return db.selectFrom('compliance_settings').selectAll().where('org_id', '=', orgId).executeTakeFirst();
  },

  async save(db: Executor, row: ComplianceSettingsRow): Promise<void> {
    const { org_id: _, ...set } = row;
    await db.insertInto('compliance_settings').values(row)
      .onConflict((oc) => oc.column('org_id').doUpdateSet(set)).execute();
  },
};
