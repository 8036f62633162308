// Issue 25: numbers to release at their provider because the organization or agent holding them
// was deleted (docs/numbers.md, "Deleting an organization or agent"). A durable job per number,
// written in the deletion's transaction: the holder's rows are gone, so each row keeps what the
// release needs — the number's provider and its reference there, and a copy of that provider's
// settings (its secrets still sealed) in case the organization's own went with it. No foreign key
// to accounts: the organization may no longer exist. A row the provider would not release after
// its last attempt stays, state 'failed' with last_error, for an operator.
import type { Kysely } from 'kysely';

export function numberReleases() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('number_releases')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('number', 'text', (c) => c.notNull())
        .addColumn('org_id', 'integer', (c) => c.notNull())
        .addColumn('agent_id', 'integer')
        // 'organization deleted' | 'agent deleted'
        .addColumn('reason', 'text', (c) => c.notNull())
        .addColumn('provider', 'text', (c) => c.notNull())
        // Its reference there (Twilio's PN… sid); null until found when the purchase never settled.
        .addColumn('provider_ref', 'text')
        // The provider's settings when the holder was deleted: plain config (JSON) and sealed secrets.
        .addColumn('provider_config', 'text')
        .addColumn('provider_secrets', 'text')
        .addColumn('state', 'text', (c) => c.notNull().defaultTo('pending'))
        .addColumn('run_at', 'bigint', (c) => c.notNull())
        .addColumn('attempt', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('max_attempts', 'integer', (c) => c.notNull().defaultTo(10))
        .addColumn('lease_owner', 'text')
        .addColumn('lease_expires_at', 'bigint')
        .addColumn('last_error', 'text')
        // When the provider let it go (or said it no longer had it); null while pending or failed.
        .addColumn('released_at', 'bigint')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addColumn('finished_at', 'bigint')
        .execute();
      await db.schema.createIndex('number_releases_claim').on('number_releases').columns(['state', 'run_at'])
        .where('state', '=', 'pending').execute();
      await db.schema.createIndex('number_releases_rescue').on('number_releases').columns(['state', 'lease_expires_at']).execute();
    },
  };
}
