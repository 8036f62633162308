// Indexes on the delivery queue's foreign keys to events and subscriptions: deleting a
// subscription (DELETE /api/v2/webhooks, a receiver's 410) or a relay event (relay deletion,
// retention) cascades through webhook_deliveries by these columns, and without an index each
// deleted row scanned the whole queue table.
import type { Kysely } from 'kysely';

export function deliveryIndexes() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createIndex('webhook_deliveries_event').on('webhook_deliveries').column('relay_event_id').execute();
      await db.schema.createIndex('webhook_deliveries_webhook').on('webhook_deliveries').column('webhook_id').execute();
    },
  };
}
