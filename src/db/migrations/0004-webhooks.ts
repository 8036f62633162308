// Webhook relays (provider webhooks received at an unguessable ingress URL and forwarded to the
// customer), event subscriptions (`/api/v2/webhooks`), and the delivery queue both go through,
// with a log of every attempt. Task events gain a dispatch mark so the outbox can be drained.
import type { Kysely } from 'kysely';
import type { Dialect } from '../types.ts';
import { withId } from './0001-foundation.ts';

export function webhooks(dialect: Dialect) {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await withId(db.schema.createTable('webhook_relays'), dialect)
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('type', 'text', (c) => c.notNull())
        // The secret part of the ingress URL: 32 random bytes, base64url. Looked up on every ingress.
        .addColumn('ingress_id', 'text', (c) => c.notNull().unique())
        .addColumn('url', 'text', (c) => c.notNull())
        .addColumn('timeout_ms', 'integer', (c) => c.notNull())
        // AES-256-GCM sealed JSON: [{name: value}] as configured (values may be credentials).
        .addColumn('headers', 'text', (c) => c.notNull())
        .addColumn('success_status_codes', 'text', (c) => c.notNull())
        // Sealed: our Standard Webhooks signing secret for forwarded requests (whsec_…).
        .addColumn('signing_secret', 'text', (c) => c.notNull())
        // Sealed: what the provider signs with, when the relay holds it (Stripe's endpoint secret,
        // Chargebee's basic-auth credentials); Twilio's auth token comes from the numbering provider.
        .addColumn('provider_secret', 'text')
        .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addUniqueConstraint('webhook_relays_org_type', ['org_id', 'type'])
        .execute();

      // What a provider posted, stored before we answer it.
      await db.schema.createTable('relay_events')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('relay_id', 'integer', (c) => c.notNull().references('webhook_relays.id').onDelete('cascade'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        // The provider's own id of the event (MessageSid+status, Stripe event id …): duplicates are dropped.
        .addColumn('provider_event_id', 'text')
        .addColumn('content_type', 'text')
        .addColumn('headers', 'text', (c) => c.notNull())
        // base64 of the raw body, so any bytes survive on both engines.
        .addColumn('body', 'text', (c) => c.notNull())
        .addColumn('received_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('relay_events_dedupe').unique().on('relay_events')
        .columns(['relay_id', 'provider_event_id']).execute();

      await withId(db.schema.createTable('webhooks'), dialect)
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('url', 'text', (c) => c.notNull())
        .addColumn('label', 'text')
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('signing_secret', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('webhooks_org_type').on('webhooks').columns(['org_id', 'type']).execute();

      // One row per message to deliver, and its queue entry (src/queue/engine.ts columns).
      await db.schema.createTable('webhook_deliveries')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('kind', 'text', (c) => c.notNull()) // 'relay' | 'webhook'
        .addColumn('relay_id', 'integer', (c) => c.references('webhook_relays.id').onDelete('cascade'))
        .addColumn('relay_event_id', 'text', (c) => c.references('relay_events.id').onDelete('cascade'))
        .addColumn('webhook_id', 'integer', (c) => c.references('webhooks.id').onDelete('cascade'))
        // Stable across retries and replays: the Standard Webhooks `webhook-id`.
        .addColumn('event_id', 'text', (c) => c.notNull())
        .addColumn('event_type', 'text')
        // For subscriptions: the JSON payload to send (relays send the stored raw body).
        .addColumn('payload', 'text')
        .addColumn('state', 'text', (c) => c.notNull().defaultTo('pending'))
        .addColumn('run_at', 'bigint', (c) => c.notNull())
        .addColumn('attempt', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('max_attempts', 'integer', (c) => c.notNull().defaultTo(9))
        .addColumn('lease_owner', 'text')
        .addColumn('lease_expires_at', 'bigint')
        .addColumn('last_status', 'integer')
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addColumn('finished_at', 'bigint')
        .execute();
      await db.schema.createIndex('webhook_deliveries_claim').on('webhook_deliveries').columns(['state', 'run_at'])
        .where('state', '=', 'pending').execute();
      await db.schema.createIndex('webhook_deliveries_rescue').on('webhook_deliveries').columns(['state', 'lease_expires_at']).execute();
      await db.schema.createIndex('webhook_deliveries_relay').on('webhook_deliveries').columns(['relay_id', 'created_at']).execute();

      await withId(db.schema.createTable('delivery_attempts'), dialect)
        .addColumn('delivery_id', 'text', (c) => c.notNull().references('webhook_deliveries.id').onDelete('cascade'))
        .addColumn('attempt', 'integer', (c) => c.notNull())
        .addColumn('started_at', 'bigint', (c) => c.notNull())
        .addColumn('duration_ms', 'integer', (c) => c.notNull())
        .addColumn('status_code', 'integer')
        .addColumn('error', 'text')
        .addColumn('response_excerpt', 'text')
        .addColumn('next_attempt_at', 'bigint')
        .execute();
      await db.schema.createIndex('delivery_attempts_delivery').on('delivery_attempts').columns(['delivery_id', 'attempt']).execute();

      // The outbox cursor: task events not yet turned into deliveries.
      await db.schema.alterTable('task_events').addColumn('dispatched', 'integer', (c) => c.notNull().defaultTo(0)).execute();
      await db.schema.createIndex('task_events_undispatched').on('task_events').columns(['dispatched', 'id'])
        .where('dispatched', '=', 0).execute();
    },
  };
}
