// The claim's order (src/queue/engine.ts: due pending rows by run_at, then id) from an index: with
// tasks_claim on (state, run_at) alone, rows due at the same moment (a batch submitted together,
// every task of a CSV) had to be read and sorted by id in full before the first fifty could be
// taken, so each claim cost more as the backlog grew (4 ms per claim with 20,000 due). A partial
// index on (run_at, id) over pending rows hands the claim its rows in order and stops at its limit;
// it also serves nextRunAt (the smallest run_at), so it replaces tasks_claim.
import { sql, type Kysely } from 'kysely';

export function claimOrderIndex() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createIndex('tasks_claim_order').on('tasks').columns(['run_at', 'id'])
        .where(sql.ref('state'), '=', 'pending').execute();
      await db.schema.dropIndex('tasks_claim').execute();
    },
  };
}
