// Issue 25: the phone numbers an organization holds (bought at its numbering provider, or brought
// from elsewhere), each bound to one agent. The number is unique across the table: a row is the
// number's one holder, so of two concurrent assigns exactly one inserts it (the other gets a
// 409) and nothing is bought twice. A returned number's row is deleted.
import type { Kysely } from 'kysely';
import type { Dialect } from '../types.ts';
import { withId } from './0001-foundation.ts';

export function phoneNumbers(dialect: Dialect) {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await withId(db.schema.createTable('phone_numbers'), dialect)
        // E.164.
        .addColumn('number', 'text', (c) => c.notNull().unique())
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('agent_id', 'integer', (c) => c.references('accounts.id').onDelete('set null'))
        // 'bought' (at `provider`, released there on return) | 'byo' (only unbound on return)
        .addColumn('kind', 'text', (c) => c.notNull())
        // 'reserved' (being bought) | 'active' | 'attention' (the provider's answer was lost or
        // its webhooks were not set: an operator reconciles it, docs/numbers.md)
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('provider', 'text')
        .addColumn('provider_ref', 'text')
        .addColumn('simulated', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('country', 'text')
        .addColumn('locality', 'text')
        .addColumn('region', 'text')
        // JSON {voice, sms, mms}, when known.
        .addColumn('capabilities', 'text')
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('phone_numbers_org').on('phone_numbers').columns(['org_id', 'agent_id']).execute();
    },
  };
}
