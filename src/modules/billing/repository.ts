// Queries on catalog_items (partners' and resellers' own plans and add-ons), subscriptions,
// org_addons (the add-ons organizations bought), usage_daily and usage_monthly (what organizations
// used per local day and month: written by other modules' write transactions), billing_systems and
// billing_events (the payment processors' configurations and the events they sent).
import type { BillingSystemRow, BillingSystemsTable, CatalogItemRow, Executor, OrgAddonRow, OrgAddonsTable, SubscriptionRow, SubscriptionsTable } from '../../db/types.ts';
import { sql, type Insertable, type Updateable } from 'kysely';
import { accountRepo } from '../accounts/repository.ts';
import { localDay } from '../limits/task-limits.ts';
import type { SpeechVendor } from '../../speech/vendors.ts';

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

  /** Subscriptions without a processor whose period ended by `now` (renewals.ts), the longest due first. */
  async dueForRenewal(db: Executor, now: number, limit: number): Promise<SubscriptionRow[]> {
    return db.selectFrom('subscriptions').selectAll().where('processor', 'is', null).where('state', '=', 'active')
      .where('period_end', '<=', now).orderBy('period_end').orderBy('id').limit(limit).execute();
  },

  /** The subscription in force of each of these organizations (as current), in one query. */
  async currentOf(db: Executor, orgIds: readonly number[]): Promise<Map<number, SubscriptionRow>> {
    const out = new Map<number, SubscriptionRow>();
    if (orgIds.length === 0) return out;
    const rows = await db.selectFrom('subscriptions').selectAll().where('org_id', 'in', orgIds).where('state', '=', 'active')
      .orderBy('started_at', 'desc').orderBy('id', 'desc').execute();
    for (const r of rows) if (!out.has(r.org_id)) out.set(r.org_id, r);
    return out;
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

export const addonRepo = {
  /** The add-ons of these organizations in force at some time in [fromMs, toMs) (all of them when no range), oldest first. */
  async of(db: Executor, orgIds: readonly number[], range?: { fromMs: number; toMs: number }): Promise<OrgAddonRow[]> {
    if (orgIds.length === 0) return [];
    let q = db.selectFrom('org_addons').selectAll().where('org_id', 'in', orgIds).where('state', '=', 'active');
    if (range) {
      q = q.where('added_at', '<', range.toMs)
        .where((eb) => eb.or([eb('removed_at', 'is', null), eb('removed_at', '>', range.fromMs)]));
    }
    return q.orderBy('added_at').orderBy('id').execute();
  },

  /** The organization's add-ons in force now, oldest first. */
  async inForce(db: Executor, orgId: number): Promise<OrgAddonRow[]> {
    return db.selectFrom('org_addons').selectAll().where('org_id', '=', orgId).where('state', '=', 'active').where('removed_at', 'is', null)
      .orderBy('added_at').orderBy('id').execute();
  },

  async insert(tx: Executor, row: Insertable<OrgAddonsTable>): Promise<void> {
    await tx.insertInto('org_addons').values(row).execute();
  },

  /** Ends the organization's add-on in force; the row as it is now, or undefined when none was in force. */
  async remove(tx: Executor, orgId: number, addonId: string, by: number, now: number): Promise<OrgAddonRow | undefined> {
    return tx.updateTable('org_addons').set({ removed_at: now, removed_by: by }).where('org_id', '=', orgId)
      .where('addon_id', '=', addonId).where('state', '=', 'active').where('removed_at', 'is', null).returningAll().executeTakeFirst();
  },

  /** The organization's purchase of `addonId` waiting for its processor checkout, if any. */
  async pending(db: Executor, orgId: number, addonId: string): Promise<OrgAddonRow | undefined> {
    return db.selectFrom('org_addons').selectAll().where('org_id', '=', orgId).where('addon_id', '=', addonId)
      .where('state', '=', 'pending').orderBy('added_at', 'desc').executeTakeFirst();
  },

  async find(db: Executor, id: string): Promise<OrgAddonRow | undefined> {
    return db.selectFrom('org_addons').selectAll().where('id', '=', id).executeTakeFirst();
  },

  /** A purchase paid through this billing account's processor, by our id or the processor's subscription id. */
  async findOnProcessor(db: Executor, billingAccountId: number, processor: string, ref: { id?: string; processorSubscriptionId?: string }): Promise<OrgAddonRow | undefined> {
    if (!ref.id && !ref.processorSubscriptionId) return undefined;
    let q = db.selectFrom('org_addons').selectAll().where('billing_account_id', '=', billingAccountId).where('processor', '=', processor);
    q = ref.id ? q.where('id', '=', ref.id) : q.where('processor_subscription_id', '=', ref.processorSubscriptionId!);
    return q.executeTakeFirst();
  },

  async update(tx: Executor, id: string, patch: Updateable<OrgAddonsTable>): Promise<void> {
    await tx.updateTable('org_addons').set(patch).where('id', '=', id).execute();
  },
};

/** 'YYYY-MM-DD' of the first day of `month` ('YYYY-MM') plus `n` months. */
function monthStart(month: string, n = 0): string {
  const [y, m] = month.split('-').map(Number) as [number, number];
  return new Date(Date.UTC(y, m - 1 + n, 1)).toISOString().slice(0, 10);
}

/** A speech vendor's use in its own unit: milliseconds of audio recognised, characters synthesized (speech-usage.ts). */
export type SpeechMetric = `speech:${SpeechVendor}:${'audioMs' | 'characters'}`;

/** A metric usage_daily counts (docs/billing.md, "Usage"). */
export type UsageMetric = 'calls' | 'callSeconds' | 'callMinutes' | 'texts' | 'tasks' | 'conversations' | 'modelTokens' | 'testConversations' | 'testTokens'
  | 'simulatedCallMinutes' | 'simulatedTexts' | 'simulatedTokens' | SpeechMetric;

export const usageRepo = {
  /**
   * Adds what one write used to the organization's rows for the local day and month of `at` (its
   * time zone, UTC without one), in the caller's transaction: one read of the zone, one upsert of
   * the day's rows and one of the month's.
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
    // The month's rows beside them, always after the day's (the same lock order everywhere).
    const month = day.slice(0, 7);
    await tx.insertInto('usage_monthly').values(entries.map(([metric, n]) => ({ org_id: orgId, month, metric, n })))
      .onConflict((oc) => oc.columns(['org_id', 'month', 'metric']).doUpdateSet({ n: sql`usage_monthly.n + excluded.n` }))
      .execute();
  },

  /**
   * Sums per organization, bucket and metric over the local days `fromDay` to `toDay` (both
   * included). A bucket is the day's first `bucketLength` characters: 10 a day, 7 a month, 4 a
   * year, 0 the whole range (the key is then ''). Unless by day, the months the range covers whole
   * are read from usage_monthly (one row per organization, month and metric) and only the days of
   * the months it covers in part from usage_daily: a year is then 12 rows per organization and
   * metric, not 365. `metrics` narrows what is read.
   */
  async sums(db: Executor, orgIds: number[], fromDay: string, toDay: string, bucketLength: 0 | 4 | 7 | 10, metrics?: readonly string[]): Promise<{ org_id: number; bucket: string; metric: string; n: number }[]> {
    if (orgIds.length === 0 || metrics?.length === 0) return [];
    // The whole months of the range: from the first month starting in it to the last ending in it.
    const firstWhole = fromDay.endsWith('-01') ? fromDay.slice(0, 7) : monthStart(fromDay.slice(0, 7), 1).slice(0, 7);
    const afterLast = monthStart(toDay.slice(0, 7), 1); // the day after toDay's month
    const lastWhole = afterLast === addDay(toDay) ? toDay.slice(0, 7) : monthStart(toDay.slice(0, 7), -1).slice(0, 7);
    const monthly = bucketLength !== 10 && firstWhole <= lastWhole;
    const bucket = (col: 'day' | 'month') => bucketLength === 0 ? sql<string>`''` : sql<string>`substr(${sql.ref(col)}, 1, ${sql.lit(bucketLength)})`;
    const daily = (from: string, to: string, below: boolean) => {
      let q = db.selectFrom('usage_daily')
        .select([bucket('day').as('bucket'), 'org_id', 'metric', (eb) => eb.fn.sum<number | string>('n').as('n')])
        .where('org_id', 'in', orgIds).where('day', '>=', from).where('day', below ? '<' : '<=', to);
      if (metrics) q = q.where('metric', 'in', metrics);
      return q.groupBy(['org_id', sql`1`, 'metric']).execute();
    };
    // One simple range per read: an OR of two ranges made SQLite walk every row of the organizations.
    const reads = [];
    if (!monthly) reads.push(daily(fromDay, toDay, false));
    else {
      // Only the days outside the whole months: before the first, after the last.
      if (fromDay < `${firstWhole}-01`) reads.push(daily(fromDay, `${firstWhole}-01`, true));
      const afterWhole = monthStart(lastWhole, 1);
      if (afterWhole <= toDay) reads.push(daily(afterWhole, toDay, false));
    }
    if (monthly) {
      let months = db.selectFrom('usage_monthly')
        .select([bucket('month').as('bucket'), 'org_id', 'metric', (eb) => eb.fn.sum<number | string>('n').as('n')])
        .where('org_id', 'in', orgIds).where('month', '>=', firstWhole).where('month', '<=', lastWhole);
      if (metrics) months = months.where('metric', 'in', metrics);
      reads.push(months.groupBy(['org_id', sql`1`, 'metric']).execute());
    }
    const merged = new Map<string, { org_id: number; bucket: string; metric: string; n: number }>();
    for (const rows of await Promise.all(reads)) {
      for (const r of rows) {
        const key = `${r.org_id}\u0000${String(r.bucket)}\u0000${r.metric}`;
        const have = merged.get(key);
        if (have) have.n += Number(r.n);
        else merged.set(key, { org_id: r.org_id, bucket: String(r.bucket), metric: r.metric, n: Number(r.n) });
      }
    }
    return [...merged.values()];
  },
};

/** The day after 'YYYY-MM-DD'. */
function addDay(day: string): string {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + 1);
  return d.toISOString().slice(0, 10);
}

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
