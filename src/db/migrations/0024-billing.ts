// Issue 26: billing, without a payment processor yet. `catalog_items` holds the plans and add-ons a
// partner or reseller put in its own catalog (over the default catalog that ships in
// src/modules/billing/catalog.ts); `subscriptions` records each organization's subscriptions, one
// row per subscription with its state, term and period. The processor columns stay null until a
// billing system (Stripe, Chargebee) is configured: a later migration's work, which these leave room
// for. Organizations created before this with the old default plan id ('standard') move to the
// default catalog's default plan.
import type { Kysely } from 'kysely';

export function billing() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('catalog_items')
        .addColumn('owner_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        // 'pplan-…' for a plan, 'addon-…' for an add-on
        .addColumn('item_id', 'text', (c) => c.notNull())
        .addColumn('kind', 'text', (c) => c.notNull()) // 'plan' | 'addon'
        // JSON: the plan or add-on as validated (src/modules/billing/catalog.ts)
        .addColumn('body', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('catalog_items_pk', ['owner_id', 'item_id'])
        .execute();

      await db.schema.createTable('subscriptions')
        .addColumn('id', 'text', (c) => c.primaryKey()) // sub_ + a time-sortable id
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('plan_id', 'text', (c) => c.notNull())
        // JSON: the plan as it was when subscribed (prices and included amounts the period is billed on)
        .addColumn('plan', 'text', (c) => c.notNull())
        .addColumn('term', 'text', (c) => c.notNull()) // 'month' | 'year'
        // 'active' | 'replaced' (by a later subscription) | 'canceled'; a processor adds 'pending' and 'unpaid'
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('period_start', 'bigint', (c) => c.notNull())
        .addColumn('period_end', 'bigint', (c) => c.notNull())
        .addColumn('started_at', 'bigint', (c) => c.notNull())
        .addColumn('ended_at', 'bigint')
        .addColumn('cancel_reason', 'text')
        .addColumn('cancel_details', 'text')
        .addColumn('canceled_by', 'integer')
        .addColumn('checkout_type', 'text')
        .addColumn('success_url', 'text')
        .addColumn('cancel_url', 'text')
        // null without a billing system; 'stripe' | 'chargebee' with one
        .addColumn('processor', 'text')
        .addColumn('processor_customer_id', 'text')
        .addColumn('processor_subscription_id', 'text')
        .addColumn('checkout_session_id', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('subscriptions_org').on('subscriptions').columns(['org_id', 'state']).execute();

      await db.updateTable('accounts').set({ product_plan_id: 'pplan-free' })
        .where('kind', '=', 'organization').where('product_plan_id', '=', 'standard').execute();
    },
  };
}
