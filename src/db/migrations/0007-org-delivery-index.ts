// GET /api/v2/webhooks/deliveries lists one organization's subscription deliveries newest first:
// without an index on (org_id, kind, created_at) each page read the organization's deliveries
// through the subscription index and sorted them.
import type { Kysely } from 'kysely';

export function orgDeliveryIndex() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createIndex('webhook_deliveries_org').on('webhook_deliveries').columns(['org_id', 'kind', 'created_at']).execute();
    },
  };
}
