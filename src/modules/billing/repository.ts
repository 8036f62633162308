// Queries on catalog_items (partners' and resellers' own plans and add-ons), subscriptions and
// usage_daily (what organizations used per local day: written by other modules' write transactions).
import type { BillingSystemRow, BillingSystemsTable, CatalogItemRow, Executor, SubscriptionRow, SubscriptionsTable } from '../../db/types.ts';
import { sql, type Insertable, type Updateable } from 'kysely';
import { accountRepo } from '../accounts/repository.ts';
import { localDay } from '../tasks/limits.ts';

export const catalogRepo = {
  /** The items of these owners (a partner and, when given, its reseller), oldest first. */
  async listFor(db: Executor, ownerIds: number[]): Promise<CatalogItemRow[]> {
    if (ownerIds.length === 0) return [];
    return db.selectFrom('catalog_items').selectAll().where('owner_id', 'in', ownerIds).orderBy('created_at').orderBy('item_id').execute();
  },

  async find(db: Executor, ownerId: number, itemId: string): Promise<CatalogItemRow | undefined> {
    return db.selectFrom('catalog_items').selectAll().where('owner_id', '=', ownerId).where('item_id', '=', itemId).executeTakeFirst();
  },

  /**
   * Creates or replaces the owner's item in one statement (two concurrent PUTs of a new id do not
   * collide); true when it was created (the row kept its created_at otherwise).
   */
  async put(tx: Executor, row: Omit<CatalogItemRow, 'created_at' | 'updated_at'>, now: number): Promise<boolean> {
    const written = await tx.insertInto('catalog_items').values({ ...row, created_at: now, updated_at: now })
      .onConflict((oc) => oc.columns(['owner_id', 'item_id']).doUpdateSet({ body: row.body, kind: row.kind, updated_at: now }))
      .returning('created_at').executeTakeFirstOrThrow();
    return Number(written.created_at) === now;
  },

  async delete(tx: Executor, ownerId: number, itemId: string): Promise<boolean> {
    const r = await tx.deleteFrom('catalog_items').where('owner_id', '=', ownerId).where('item_id', '=', itemId).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  },
};

export const subscriptionRepo = {
  /** The organization's subscription in force (active, or past_due while a processor retries a payment), newest first. */
  async current(db: Executor, orgId: number): Promise<SubscriptionRow | undefined> {
    return db.selectFrom('subscriptions').selectAll().where('org_id', '=', orgId).where('state', 'in', ['active', 'past_due'])
      .orderBy('started_at', 'desc').orderBy('id', 'desc').executeTakeFirst();
  },

  /** The organization's checkout still waiting for its processor for this plan and term (a retried subscribe). */
  async pending(db: Executor, orgId: number, planId: string, term: 'month' | 'year'): Promise<SubscriptionRow | undefined> {
    return db.selectFrom('subscriptions').selectAll().where('org_id', '=', orgId).where('state', '=', 'pending')
      .where('plan_id', '=', planId).where('term', '=', term).orderBy('id', 'desc').executeTakeFirst();
  },

  /** A subscription on this billing account's processor, by our id or the processor's. */
  async findOnProcessor(db: Executor, billingAccountId: number, processor: string, ref: { id?: string; processorSubscriptionId?: string }): Promise<SubscriptionRow | undefined> {
    if (!ref.id && !ref.processorSubscriptionId) return undefined;
    let q = db.selectFrom('subscriptions').selectAll().where('billing_account_id', '=', billingAccountId).where('processor', '=', processor);
    q = ref.id ? q.where('id', '=', ref.id) : q.where('processor_subscription_id', '=', ref.processorSubscriptionId!);
    return q.executeTakeFirst();
  },

  async insert(tx: Executor, row: Insertable<SubscriptionsTable>): Promise<void> {
    await tx.insertInto('subscriptions').values(row).execute();
  },

  async update(tx: Executor, id: string, patch: Updateable<SubscriptionsTable>): Promise<void> {
    await tx.updateTable('subscriptions').set(patch).where('id', '=', id).execute();
  },

  async find(db: Executor, id: string): Promise<SubscriptionRow | undefined> {
    return db.selectFrom('subscriptions').selectAll().where('id', '=', id).executeTakeFirst();
  },
};

export const billingSystemRepo = {
  async find(db: Executor, ownerId: number): Promise<BillingSystemRow | undefined> {
    return db.selectFrom('billing_systems').selectAll().where('owner_id', '=', ownerId).executeTakeFirst();
  },

  /** The first of these owners (in order) that has a billing system. */
  async firstOf(db: Executor, ownerIds: number[]): Promise<BillingSystemRow | undefined> {
    if (ownerIds.length === 0) return undefined;
    const rows = await db.selectFrom('billing_systems').selectAll().where('owner_id', 'in', ownerIds).execute();
    return ownerIds.map((id) => rows.find((r) => r.owner_id === id)).find((r) => r !== undefined);
  },

  async put(tx: Executor, row: BillingSystemsTable): Promise<void> {
    const { owner_id: _owner, created_at: _created, ...rest } = row;
    await tx.insertInto('billing_systems').values(row).onConflict((oc) => oc.column('owner_id').doUpdateSet(rest)).execute();
  },
};

export const billingEventRepo = {
  /** Records a processor event once; false when it was recorded before (a replay). */
  async record(tx: Executor, row: { owner_id: number; processor: string; event_id: string; type: string; outcome: string; received_at: number }): Promise<boolean> {
    const r = await tx.insertInto('billing_events').values(row).onConflict((oc) => oc.columns(['owner_id', 'processor', 'event_id']).doNothing())
      .returning('event_id').executeTakeFirst();
    return r !== undefined;
  },

  async setOutcome(tx: Executor, ownerId: number, processor: string, eventId: string, outcome: string): Promise<void> {
    await tx.updateTable('billing_events').set({ outcome }).where('owner_id', '=', ownerId).where('processor', '=', processor).where('event_id', '=', eventId).execute();
  },
};

/** A metric usage_daily counts (docs/billing.md, "Usage"). */
export type UsageMetric = 'calls' | 'callSeconds' | 'callMinutes' | 'texts' | 'tasks' | 'conversations' | 'modelTokens';

export const usageRepo = {
  /**
   * Adds what one write used to the organization's row for the local day of `at` (its time zone,
   * UTC without one), in the caller's transaction: one read of the zone, one upsert per metric.
   */
  async add(tx: Executor, orgId: number, at: number, amounts: Partial<Record<UsageMetric, number>>): Promise<void> {
    const entries = Object.entries(amounts).filter(([, n]) => n !== undefined && n > 0) as [UsageMetric, number][];
    if (entries.length === 0) return;
    const day = localDay(at, (await accountRepo.timezoneOf(tx, orgId)) || 'UTC');
    // Metrics in a fixed order, so two transactions lock an organization's rows in the same order.
    entries.sort(([a], [b]) => (a < b ? -1 : 1));
    // One statement for every metric of the record (a finished call adds three).
    await tx.insertInto('usage_daily').values(entries.map(([metric, n]) => ({ org_id: orgId, day, metric, n })))
      .onConflict((oc) => oc.columns(['org_id', 'day', 'metric']).doUpdateSet({ n: sql`usage_daily.n + excluded.n` }))
      .execute();
  },

  /**
   * Sums per organization, bucket and metric over the local days `fromDay` to `toDay` (both
   * included). A bucket is the day's first `bucketLength` characters: 10 a day, 7 a month, 4 a
   * year, 0 the whole range (the key is then '').
   */
  async sums(db: Executor, orgIds: number[], fromDay: string, toDay: string, bucketLength: 0 | 4 | 7 | 10): Promise<{ org_id: number; bucket: string; metric: string; n: number }[]> {
    if (orgIds.length === 0) return [];
    const bucket = bucketLength === 0 ? sql<string>`''` : sql<string>`substr(day, 1, ${sql.lit(bucketLength)})`;
    const rows = await db.selectFrom('usage_daily')
      .select([bucket.as('bucket'), 'org_id', 'metric', (eb) => eb.fn.sum<number | string>('n').as('n')])
      .where('org_id', 'in', orgIds).where('day', '>=', fromDay).where('day', '<=', toDay)
      .groupBy(['org_id', sql`1`, 'metric']).execute();
    return rows.map((r) => ({ org_id: r.org_id, bucket: String(r.bucket), metric: r.metric, n: Number(r.n) }));
  },
};

export const periodRepo = {
  /** The organization's last two periods starting at or before `at`, newest first. */
  async lastTwo(db: Executor, orgId: number, at: number): Promise<{ start_at: number; end_at: number }[]> {
    const rows = await db.selectFrom('billing_periods').select(['start_at', 'end_at']).where('org_id', '=', orgId).where('start_at', '<=', at)
      .orderBy('start_at', 'desc').limit(2).execute();
    return rows.map((r) => ({ start_at: Number(r.start_at), end_at: Number(r.end_at) }));
  },
  /** The organization's latest period (by start), locked in the caller's transaction on PostgreSQL by its account row lock. */
  async latest(db: Executor, orgId: number): Promise<{ start_at: number; end_at: number } | undefined> {
    const r = await db.selectFrom('billing_periods').select(['start_at', 'end_at']).where('org_id', '=', orgId)
      .orderBy('start_at', 'desc').limit(1).executeTakeFirst();
    return r ? { start_at: Number(r.start_at), end_at: Number(r.end_at) } : undefined;
  },
  async close(tx: Executor, orgId: number, startAt: number, endAt: number, now: number): Promise<void> {
    await tx.updateTable('billing_periods').set({ end_at: endAt, updated_at: now }).where('org_id', '=', orgId).where('start_at', '=', startAt).execute();
  },
  async insert(tx: Executor, orgId: number, startAt: number, endAt: number, setBy: number, now: number): Promise<void> {
    await tx.insertInto('billing_periods').values({ org_id: orgId, start_at: startAt, end_at: endAt, set_by: setBy, created_at: now, updated_at: now }).execute();
  },
};
