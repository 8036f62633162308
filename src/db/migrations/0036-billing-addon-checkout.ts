// Issue 33: under a payment processor a priced add-on is bought through the processor's checkout.
// The purchase is recorded `pending` (it adds nothing) until the processor's signed webhook confirms
// the payment (`active`); a checkout that is abandoned or expires ends it `abandoned` (it never
// counted). Rows before this migration, and every add-on granted without a checkout, are `active`
// (docs/billing.md, "Add-ons through a payment processor").
import type { Kysely } from 'kysely';

export function billingAddonCheckout() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('org_addons').addColumn('state', 'text', (c) => c.notNull().defaultTo('active')).execute();
      await db.schema.alterTable('org_addons').addColumn('processor', 'text').execute();
      await db.schema.alterTable('org_addons').addColumn('billing_account_id', 'integer').execute();
      await db.schema.alterTable('org_addons').addColumn('processor_subscription_id', 'text').execute();
      await db.schema.alterTable('org_addons').addColumn('checkout_session_id', 'text').execute();
      await db.schema.alterTable('org_addons').addColumn('term', 'text').execute();
      await db.schema.alterTable('org_addons').addColumn('success_url', 'text').execute();
      await db.schema.alterTable('org_addons').addColumn('cancel_url', 'text').execute();
    },
  };
}
