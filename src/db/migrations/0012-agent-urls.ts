// Agent URLs (issue 12): one public slug per agent account, unique across the deployment. The
// unique index is what makes claiming a slug race-free: the loser of two concurrent claims gets a
// unique violation (answered 409), never a shared slug. Deleting the account frees its slug.
import type { Kysely } from 'kysely';

export function agentUrls() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('agent_urls')
        .addColumn('account_id', 'integer', (c) => c.primaryKey().references('accounts.id').onDelete('cascade'))
        // Normalised (lower-case) slug, docs/agents.md "Agent URLs".
        .addColumn('slug', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('agent_urls_slug').on('agent_urls').column('slug').unique().execute();
    },
  };
}
