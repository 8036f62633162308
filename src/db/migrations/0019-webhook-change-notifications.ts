// PostgreSQL: the change trigger of migration 0016 on `webhooks` too, so every process can cache
// which organizations have a task subscription (src/modules/tasks/subscribers.ts): each transaction
// that changes tasks asked it of the database, a sixth of the statements of a busy queue
// (docs/performance.md), for rows that change only when a subscription is added or removed.
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../types.ts';

export function webhookChangeNotifications(dialect: Dialect) {
  return {
    async up(db: Kysely<any>): Promise<void> {
      if (dialect !== 'postgres') return;
      await sql`create trigger webhooks_changed after insert or update or delete or truncate on webhooks
        for each statement execute function callplane_changed()`.execute(db);
    },
  };
}
