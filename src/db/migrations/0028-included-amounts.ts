// Issue 26, enforcing what a plan includes:
// - `usage_monthly`: what each organization used per local month (YYYY-MM in its time zone, the
//   month of the usage_daily row) and metric, added in the same transaction as usage_daily by the
//   same writer (src/modules/billing/repository.ts usageRepo.add). A usage query reads whole months
//   of its range from it and only the days of a month it covers in part from usage_daily: a year of
//   a reseller's organizations was 365 rows per organization and metric, now at most 12 + 60.
//   Filled from usage_daily here.
// - `org_addons`: the add-ons an organization bought (POST /api/v2/addon/{addonId}), each with a
//   copy of the add-on as it was, the subscription and billing period it was bought in, and when
//   it ended (DELETE). One in force per add-on (a partial unique index).
// - `tasks.held_reason`: why a limit holds a pending task back (an included amount used up, a
//   daily cap, business hours …), shown as the task's `heldReason`; cleared when it changes state.
// - PostgreSQL: the change trigger of migration 0016 on the tables an organization's entitlement
//   is read from (src/modules/billing/entitlements.ts caches it per process).
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../types.ts';

const WATCHED = ['subscriptions', 'billing_periods', 'catalog_items', 'org_addons'];

export function includedAmounts(dialect: Dialect) {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('usage_monthly')
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        // YYYY-MM in the organization's time zone (the month of usage_daily's day)
        .addColumn('month', 'text', (c) => c.notNull())
        .addColumn('metric', 'text', (c) => c.notNull())
        .addColumn('n', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('usage_monthly_pk', ['org_id', 'month', 'metric'])
        .execute();
      await sql`insert into usage_monthly (org_id, month, metric, n)
        select org_id, substr(day, 1, 7), metric, sum(n) from usage_daily group by org_id, substr(day, 1, 7), metric`.execute(db);

      await db.schema.createTable('org_addons')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('addon_id', 'text', (c) => c.notNull())
        // JSON: the add-on as it was bought (src/modules/billing/catalog.ts Addon)
        .addColumn('addon', 'text', (c) => c.notNull())
        .addColumn('subscription_id', 'text')
        .addColumn('period_start', 'bigint')
        .addColumn('period_end', 'bigint')
        .addColumn('added_at', 'bigint', (c) => c.notNull())
        .addColumn('added_by', 'integer')
        .addColumn('removed_at', 'bigint')
        .addColumn('removed_by', 'integer')
        .execute();
      await db.schema.createIndex('org_addons_org').on('org_addons').columns(['org_id', 'added_at']).execute();
      await db.schema.createIndex('org_addons_in_force').on('org_addons').columns(['org_id', 'addon_id']).unique()
        .where(sql.ref('removed_at'), 'is', null).execute();

      await db.schema.alterTable('tasks').addColumn('held_reason', 'text').execute();

      if (dialect === 'postgres') {
        for (const table of WATCHED) {
          await sql`create trigger ${sql.id(`${table}_entitlement_changed`)} after insert or update or delete or truncate on ${sql.table(table)}
            for each statement execute function callplane_changed()`.execute(db);
        }
      }
    },
  };
}
