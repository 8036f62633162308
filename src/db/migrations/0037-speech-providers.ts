// Issue 35: an organization's own speech provider keys (Deepgram, ElevenLabs, Cartesia, Google,
// OpenAI), one per vendor: the key sealed (SecretBox; Google's is a service account's JSON key),
// the base URL it is bound to (null: the vendor's own), and whether it is used. Speech usage goes
// to the existing rollups (usage_daily, usage_monthly) under metrics of its own; no table here
// (docs/billing.md, "Usage").
import type { Kysely } from 'kysely';

export function speechProviders() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('speech_providers')
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        // src/speech/vendors.ts SPEECH_VENDORS
        .addColumn('vendor', 'text', (c) => c.notNull())
        // Sealed.
        .addColumn('api_key', 'text', (c) => c.notNull())
        .addColumn('base_url', 'text')
        .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('speech_providers_pk', ['org_id', 'vendor'])
        .execute();
    },
  };
}
