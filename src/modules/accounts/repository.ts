// Queries on the accounts table (every level of the tenancy ladder). Queries only: scoping
// decisions are made by the caller and passed in as ids.
import type { AccountKind, AccountRow, AccountUpdate, Executor, NewAccount } from '../../db/types.ts';

/** The ancestor column that holds the id of an account of this kind (each row names itself too). */
export const ANCESTOR_COLUMN = {
  partner: 'partner_id',
  reseller: 'reseller_id',
  organization: 'org_id',
  agent: 'id',
} as const satisfies Record<AccountKind, string>;

export type NewAccountFields = Omit<NewAccount, 'kind' | 'parent_id' | 'partner_id' | 'reseller_id' | 'org_id' | 'details' | 'created_at' | 'updated_at'>
  & { details?: string };

export interface ListFilter {
  kind: AccountKind;
  /** Restrict to descendants of this account (by its kind's ancestor column). */
  within: Pick<AccountRow, 'id' | 'kind'>;
  parentId?: number;
  active?: boolean;
  limit?: number;
  offset?: number;
}

export const accountRepo = {
  async findById(db: Executor, id: number): Promise<AccountRow | undefined> {
    return db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
  },

  /**
   * Locks the account's row until the transaction ends, so read-modify-writes of what hangs off it
   * (an organization's subscriptions) are serialised (a no-op on SQLite, whose one writer already
   * serialises write transactions).
   */
  async lock(tx: Executor, id: number): Promise<void> {
    await tx.selectFrom('accounts').select('id').where('id', '=', id).forUpdate().execute();
  },

  /**
   * A new account of `kind` under `parent` (null: the root partner). The ancestor columns come
   * from the parent; settings not named keep their column defaults (NULL, 0 or '{}').
   */
  async create(db: Executor, kind: AccountKind, parent: AccountRow | null, fields: NewAccountFields, now: number): Promise<AccountRow> {
    const row: NewAccount = {
      details: '{}', ...fields, kind, created_at: now, updated_at: now,
      parent_id: parent?.id ?? null, partner_id: parent?.partner_id ?? null,
      reseller_id: parent?.reseller_id ?? null, org_id: parent?.org_id ?? null,
    };
    const inserted = await db.insertInto('accounts').values(row).returningAll().executeTakeFirstOrThrow();
    // Every row names itself in its own kind's ancestor column, so that "X is within P"
    // is always `X[column of P's kind] = P.id`.
    const self = ANCESTOR_COLUMN[inserted.kind];
    if (self === 'id') return inserted;
    return db.updateTable('accounts').set({ [self]: inserted.id }).where('id', '=', inserted.id)
      .returningAll().executeTakeFirstOrThrow();
  },

  async update(db: Executor, id: number, patch: AccountUpdate): Promise<AccountRow | undefined> {
    return db.updateTable('accounts').set(patch).where('id', '=', id).returningAll().executeTakeFirst();
  },

  /** Deletes the account; foreign keys cascade to its descendants, tokens, users and settings. */
  async delete(db: Executor, id: number): Promise<number> {
    const res = await db.deleteFrom('accounts').where('id', '=', id).executeTakeFirst();
    return Number(res.numDeletedRows);
  },

  async countDescendants(db: Executor, within: Pick<AccountRow, 'id' | 'kind'>): Promise<number> {
    const col = ANCESTOR_COLUMN[within.kind];
    const r = await db.selectFrom('accounts').select((eb) => eb.fn.countAll<number>().as('n'))
      .where(col, '=', within.id).where('id', '!=', within.id).executeTakeFirstOrThrow();
    return Number(r.n);
  },

  async list(db: Executor, f: ListFilter): Promise<{ rows: AccountRow[]; total: number }> {
    let q = db.selectFrom('accounts').where('kind', '=', f.kind).where(ANCESTOR_COLUMN[f.within.kind], '=', f.within.id);
    if (f.parentId !== undefined) q = q.where('parent_id', '=', f.parentId);
    if (f.active !== undefined) q = q.where('active', '=', f.active ? 1 : 0);
    const { n } = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    let rows = q.selectAll().orderBy('id');
    if (f.limit !== undefined) rows = rows.limit(f.limit).offset(f.offset ?? 0);
    return { rows: await rows.execute(), total: Number(n) };
  },

  /** The organization's oldest agent (the one created with it), without counting the others. */
  async firstAgentId(db: Executor, orgId: number): Promise<number | null> {
    const r = await db.selectFrom('accounts').select('id').where('org_id', '=', orgId).where('kind', '=', 'agent')
      .orderBy('id').limit(1).executeTakeFirst();
    return r?.id ?? null;
  },

  /** Which of `ids` are agents of the organization. */
  async agentIdsIn(db: Executor, orgId: number, ids: number[]): Promise<Set<number>> {
    if (ids.length === 0) return new Set();
    const rows = await db.selectFrom('accounts').select('id')
      .where('org_id', '=', orgId).where('kind', '=', 'agent').where('id', 'in', ids).execute();
    return new Set(rows.map((r) => r.id));
  },

  async timezoneOf(db: Executor, id: number): Promise<string | null | undefined> {
    const r = await db.selectFrom('accounts').select('timezone').where('id', '=', id).executeTakeFirst();
    return r?.timezone;
  },

  async findByExternalId(db: Executor, within: Pick<AccountRow, 'id' | 'kind'>, externalAccountId: string): Promise<AccountRow[]> {
    return db.selectFrom('accounts').selectAll()
      .where(ANCESTOR_COLUMN[within.kind], '=', within.id)
      .where('external_account_id', '=', externalAccountId)
      .orderBy('id').execute();
  },
};
