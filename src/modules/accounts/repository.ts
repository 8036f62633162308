// Queries on the accounts table (every level of the tenancy ladder). Queries only: scoping
// decisions are made by the caller and passed in as ids.
import { sql, type Expression, type ExpressionBuilder, type SqlBool } from 'kysely';
import { ANCESTOR_COLUMN, type AccountKind, type AccountRow, type AccountUpdate, type DB, type Executor, type NewAccount, type Suspended } from '../../db/types.ts';

/** The active flags of an account's ancestors, as the joins below select them (null: no such level). */
export interface LadderFlags { partner_active: number | null; reseller_active: number | null; org_active: number | null }

/**
 * The highest suspended account on `account`'s ladder (partner, reseller, organization, then the
 * account itself), or null when every level is active. Each row names itself in its own kind's
 * ancestor column, so an organization's `org_active` is its own flag (and a reseller's
 * `reseller_active`); a level the account does not have (a partner's reseller) reads null.
 */
export function suspensionOf(account: AccountRow, flags: LadderFlags): Suspended | null {
  if (flags.partner_active === 0 && account.partner_id !== null) return { id: account.partner_id, kind: 'partner' };
  if (flags.reseller_active === 0 && account.reseller_id !== null) return { id: account.reseller_id, kind: 'reseller' };
  if (flags.org_active === 0 && account.org_id !== null) return { id: account.org_id, kind: 'organization' };
  if (account.active === 0) return { id: account.id, kind: account.kind };
  return null;
}

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

export interface SearchFilter {
  kind: AccountKind;
  /** Only descendants of this account (by its kind's ancestor column). */
  within: Pick<AccountRow, 'id' | 'kind'>;
  /** Case-insensitive substring of the name, email or externalAccountId (no wildcards). */
  text?: string;
  /** Columns that must hold exactly these values. */
  equal: Partial<AccountRow>;
  /** Canceled (canceled_at set) or not. */
  canceled?: boolean;
  /** Inclusive bounds by column (unix ms for times). */
  ranges: Partial<Record<keyof AccountRow, { min?: number; max?: number }>>;
  limit?: number;
  offset?: number;
}

/**
 * The key of the advisory lock that serialises first starts (bootstrapAdmin) of processes sharing
 * one PostgreSQL database.
 */
const FIRST_START_LOCK = 7214001;

export const accountRepo = {
  async findById(db: Executor, id: number): Promise<AccountRow | undefined> {
    return db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
  },

  /**
   * The account and whether it is out of service (itself or an ancestor suspended: suspensionOf),
   * in one round trip: its ancestors are joined by their ids.
   */
  async findWithSuspension(db: Executor, id: number): Promise<{ account: AccountRow; suspended: Suspended | null } | undefined> {
    const row = await db.selectFrom('accounts')
      .leftJoin('accounts as lp', 'lp.id', 'accounts.partner_id')
      .leftJoin('accounts as lr', 'lr.id', 'accounts.reseller_id')
      .leftJoin('accounts as lo', 'lo.id', 'accounts.org_id')
      .selectAll('accounts')
      .select(['lp.active as partner_active', 'lr.active as reseller_active', 'lo.active as org_active'])
      .where('accounts.id', '=', id).executeTakeFirst();
    if (!row) return undefined;
    const { partner_active, reseller_active, org_active, ...account } = row;
    return { account, suspended: suspensionOf(account, { partner_active, reseller_active, org_active }) };
  },

  /**
   * A filter for rows of another table that belong to an organization and one of its agents
   * (a task's org_id and account_id): true unless the agent, the organization or an ancestor of
   * it is suspended. Used in the task queue's claim filter, so its subqueries do not refer to the
   * row: each runs once per claim (the few suspended accounts, and the organizations under them)
   * and is then a lookup per candidate, however many candidates the plan reads.
   */
  inService<T extends keyof DB>(eb: ExpressionBuilder<DB, T>, orgRef: string, agentRef: string): Expression<SqlBool> {
    const b = eb as unknown as ExpressionBuilder<DB, 'accounts'>;
    const suspendedOrgs = b.selectFrom('accounts as so')
      .innerJoin('accounts as sa', (j) => j.on((e) => e.or([
        e('sa.id', '=', e.ref('so.id')),
        e('sa.id', '=', e.ref('so.reseller_id')),
        e('sa.id', '=', e.ref('so.partner_id')),
      ])))
      .select('so.id').where('sa.active', '=', 0);
    const suspended = b.selectFrom('accounts as sx').select('sx.id').where('sx.active', '=', 0);
    return b.and([
      b(sql.ref<number>(orgRef), 'not in', suspendedOrgs),
      b(sql.ref<number>(agentRef), 'not in', suspended),
    ]);
  },

  /**
   * Locks the account's row until the transaction ends, so read-modify-writes of what hangs off it
   * (an organization's subscriptions) are serialised (a no-op on SQLite, whose one writer already
   * serialises write transactions).
   */
  async lock(tx: Executor, id: number): Promise<void> {
    await tx.selectFrom('accounts').select('id').where('id', '=', id).forUpdate().execute();
  },

  /** The root partner (the first start's), if there is one yet. */
  async findRootPartner(db: Executor): Promise<AccountRow | undefined> {
    return db.selectFrom('accounts').selectAll().where('kind', '=', 'partner').where('parent_id', 'is', null)
      .orderBy('id').executeTakeFirst();
  },

  /**
   * Holds, until the transaction ends, the lock that serialises first starts: processes starting
   * at once on one PostgreSQL database would each find no partner and create one. SQLite needs
   * none (one serving process per DATA_DIR, one writer connection): there the function does
   * nothing (src/db/index.ts).
   */
  async lockFirstStart(tx: Executor): Promise<void> {
    await sql`select pg_advisory_xact_lock(${sql.lit(FIRST_START_LOCK)})`.execute(tx);
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

  /**
   * Stores the organization's message signing secret (sealed) unless it has one; the one it has
   * afterwards (two first replies racing agree on one secret).
   */
  async ensureMessageSecret(db: Executor, orgId: number, sealed: string): Promise<string | null> {
    await db.updateTable('accounts').set({ message_signing_secret: sealed })
      .where('id', '=', orgId).where('message_signing_secret', 'is', null).execute();
    const row = await db.selectFrom('accounts').select('message_signing_secret').where('id', '=', orgId).executeTakeFirst();
    return row?.message_signing_secret ?? null;
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

  /** Accounts below `within` (itself included) whose product, offered or sell plan is `planId` (issue 26: a plan in use is not deleted). */
  async countUsingPlan(db: Executor, within: Pick<AccountRow, 'id' | 'kind'>, planId: string): Promise<number> {
    const r = await db.selectFrom('accounts').select((eb) => eb.fn.countAll<number>().as('n'))
      .where(ANCESTOR_COLUMN[within.kind], '=', within.id)
      .where((eb) => eb.or([eb('product_plan_id', '=', planId), eb('offered_product_plan_id', '=', planId), eb('sell_plan_id', '=', planId)]))
      .executeTakeFirstOrThrow();
    return Number(r.n);
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

  /** Agents of the organization with one of these (lowercased) emails or ids: what usernames name. */
  async agentsByEmailOrId(db: Executor, orgId: number, emails: string[], ids: number[]): Promise<AccountRow[]> {
    if (emails.length === 0 && ids.length === 0) return [];
    return db.selectFrom('accounts').selectAll()
      .where('org_id', '=', orgId).where('kind', '=', 'agent')
      .where((eb) => eb.or([
        ...(emails.length ? [eb('email', 'in', emails)] : []),
        ...(ids.length ? [eb('id', 'in', ids)] : []),
      ]))
      .execute();
  },

  /** Agent accounts (anywhere) whose email is this (lowercased) one: callers keep those in their scope. */
  async agentsByEmail(db: Executor, email: string): Promise<AccountRow[]> {
    return db.selectFrom('accounts').selectAll().where('kind', '=', 'agent').where('email', '=', email).orderBy('id').limit(100).execute();
  },

  async timezoneOf(db: Executor, id: number): Promise<string | null | undefined> {
    const r = await db.selectFrom('accounts').select('timezone').where('id', '=', id).executeTakeFirst();
    return r?.timezone;
  },

  /** Accounts of one kind within a subtree that match a search, by id, and how many match in all. */
  async search(db: Executor, f: SearchFilter): Promise<{ rows: AccountRow[]; total: number }> {
    let q = db.selectFrom('accounts').where('kind', '=', f.kind).where(ANCESTOR_COLUMN[f.within.kind], '=', f.within.id);
    if (f.text) {
      const like = `%${f.text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
      // ESCAPE is spelled out: SQLite's LIKE has no escape character by default, so '_' and '%'
      // in the search text would otherwise be wildcards there.
      const matches = (col: 'name' | 'email' | 'external_account_id') => sql<SqlBool>`lower(${sql.ref(col)}) like ${like} escape '\\'`;
      q = q.where((eb) => eb.or([matches('name'), matches('email'), matches('external_account_id')]));
    }
    for (const [col, v] of Object.entries(f.equal)) {
      if (v !== undefined) q = q.where(col as keyof AccountRow, '=', v as never);
    }
    if (f.canceled !== undefined) q = q.where('canceled_at', f.canceled ? 'is not' : 'is', null);
    for (const [col, range] of Object.entries(f.ranges) as [keyof AccountRow, { min?: number; max?: number }][]) {
      if (range.min !== undefined) q = q.where(col, '>=', range.min as never);
      if (range.max !== undefined) q = q.where(col, '<=', range.max as never);
    }
    const { n } = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    let rows = q.selectAll().orderBy('id');
    if (f.limit !== undefined) rows = rows.limit(f.limit).offset(f.offset ?? 0);
    return { rows: await rows.execute(), total: Number(n) };
  },

  async findByExternalId(db: Executor, within: Pick<AccountRow, 'id' | 'kind'>, externalAccountId: string): Promise<AccountRow[]> {
    return db.selectFrom('accounts').selectAll()
      .where(ANCESTOR_COLUMN[within.kind], '=', within.id)
      .where('external_account_id', '=', externalAccountId)
      .orderBy('id').execute();
  },
};
