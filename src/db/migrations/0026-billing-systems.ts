// Issue 26, payment processors: `billing_systems` holds a reseller's (or partner's) billing system,
// Stripe or Chargebee, with its keys sealed (SecretBox); `billing_events` records each processor
// event handled, by the processor's own event id, so a replayed webhook changes nothing; a
// subscription started through a processor remembers whose billing system it runs on
// (`billing_account_id`), so only that account's signed webhooks may move it.
import type { Kysely } from 'kysely';

export function billingSystems() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('billing_systems')
        .addColumn('owner_id', 'integer', (c) => c.primaryKey().references('accounts.id').onDelete('cascade'))
        .addColumn('type', 'text', (c) => c.notNull()) // 'stripe' | 'chargebee'
        // Chargebee: the site's name (<site>.chargebee.com); null for Stripe
        .addColumn('site', 'text')
        // Chargebee: the basic-auth user name its webhooks carry (not a secret; shown)
        .addColumn('webhook_username', 'text')
        // SecretBox-sealed JSON: apiKey, publishableKey, webhookSigningKey (Stripe), webhookPassword (Chargebee)
        .addColumn('secrets', 'text', (c) => c.notNull())
        // when the processor last accepted the apiKey (checked on every save)
        .addColumn('verified_at', 'bigint', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createTable('billing_events')
        .addColumn('owner_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('processor', 'text', (c) => c.notNull())
        .addColumn('event_id', 'text', (c) => c.notNull())
        .addColumn('type', 'text', (c) => c.notNull())
        // what the event did: the subscription it moved and how, or why it was ignored
        .addColumn('outcome', 'text', (c) => c.notNull())
        .addColumn('received_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('billing_events_pk', ['owner_id', 'processor', 'event_id'])
        .execute();
      await db.schema.alterTable('subscriptions').addColumn('billing_account_id', 'integer').execute();
      await db.schema.createIndex('subscriptions_processor_sub').on('subscriptions').columns(['processor_subscription_id']).execute();
    },
  };
}
