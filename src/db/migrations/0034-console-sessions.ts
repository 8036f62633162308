// Issue 33, console sessions that die with their token (docs/console.md, "Sessions"). A console
// session is a token row of type 'console'; `tokens.origin_token_id` names the token it was traded
// for, with ON DELETE CASCADE, so deleting that token (by the API, an account's deletion, or an
// operator's SQL) deletes its sessions' rows in the same statement, and everything that watches the
// tokens table (the auth caches, the live feed's streams) sees them go. A one-time token is spent
// and pruned minutes later, so a session made from one keeps no link (null). `console_sessions`
// holds what only a session has: its origin token's visible prefix and type (kept after a one-time
// origin is pruned) and when it was last used (written at most once a minute, in a table of its own
// so that use does not count as a change of the tokens table, which empties every process's cache
// of tokens).
import type { Kysely } from 'kysely';

export function consoleSessions() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('tokens')
        .addColumn('origin_token_id', 'integer', (c) => c.references('tokens.id').onDelete('cascade'))
        .execute();
      await db.schema.createIndex('tokens_origin').on('tokens').column('origin_token_id').execute();
      await db.schema.createTable('console_sessions')
        .addColumn('token_id', 'integer', (c) => c.primaryKey().references('tokens.id').onDelete('cascade'))
        .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('origin_prefix', 'text', (c) => c.notNull())
        // 'admin' | 'one-time'
        .addColumn('origin_type', 'text', (c) => c.notNull())
        .addColumn('last_used_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('console_sessions_account').on('console_sessions').column('account_id').execute();
    },
  };
}
