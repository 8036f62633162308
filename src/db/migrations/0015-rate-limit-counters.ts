// Rate-limit counters shared by every API process on PostgreSQL (src/db/rate-limit-counters.ts):
// one row per limited key (`a:<address bucket>`, `t:<token row id>`: nothing secret), the start of
// its current fixed window and how many requests that window has counted or reserved. Rows of
// windows that ended are deleted by the workers' maintenance. SQLite (one process) counts in
// memory and leaves the table empty.
import type { Kysely } from 'kysely';

export function rateLimitCounters() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('rate_limit_counters')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('window_start', 'bigint', (c) => c.notNull())
        .addColumn('count', 'integer', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('rate_limit_counters_window').on('rate_limit_counters').column('window_start').execute();
    },
  };
}
