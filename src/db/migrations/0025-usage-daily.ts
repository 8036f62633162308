// Issue 26, usage: `usage_daily` holds what each organization used, per local day (in the
// organization's time zone when the record was written) and metric, incremented in the same
// transaction as the record it counts (a task's end, a conversation's end, a model call). The usage
// query (GET /api/v2/stats/usage) reads these rows only, never the records themselves.
// `billing_periods` holds the periods an ancestor set (POST /api/v2/billing/billingPeriod): one row
// per period of an organization, each starting where the one before ended unless a gap was asked.
import type { Kysely } from 'kysely';

export function usageDaily() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('usage_daily')
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        // YYYY-MM-DD in the organization's time zone
        .addColumn('day', 'text', (c) => c.notNull())
        // src/modules/billing/usage.ts METRICS
        .addColumn('metric', 'text', (c) => c.notNull())
        .addColumn('n', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('usage_daily_pk', ['org_id', 'day', 'metric'])
        .execute();
      await db.schema.createTable('billing_periods')
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('start_at', 'bigint', (c) => c.notNull())
        .addColumn('end_at', 'bigint', (c) => c.notNull())
        .addColumn('set_by', 'integer')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('billing_periods_pk', ['org_id', 'start_at'])
        .execute();
    },
  };
}
