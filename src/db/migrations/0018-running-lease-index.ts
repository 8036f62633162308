// The rescuer's index (src/queue/engine.ts rescue: running rows whose lease expired, oldest
// first) covers running rows only. On (state, lease_expires_at) over every row it was written at
// each task's insert, claim and end, for a search that only ever asks for running rows; and SQLite,
// before it had statistics, took it for the claim's `state = 'pending'` and sorted every pending
// row at each claim (2.1 ms a claim with 10,000 pending, against 0.4 ms through the partial
// claim-order index of migration 0017). Partial, it is touched at claim and end only, and the claim
// has one index that fits.
import { sql, type Kysely } from 'kysely';

export function runningLeaseIndex() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createIndex('tasks_running_lease').on('tasks').column('lease_expires_at')
        .where(sql.ref('state'), '=', 'running').execute();
      await db.schema.dropIndex('tasks_rescue').execute();
    },
  };
}
