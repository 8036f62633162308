// Calls and texts that cannot start because their organization's concurrency is full are parked:
// moved out of the due range (run_at a while ahead, `parked` set) until a slot frees, when the
// release brings back as many as it freed (src/modules/tasks/queue-hooks.ts). Left due, every claim
// of every organization walked past them in the claim-order index to reach the rows behind: 4.2 ms
// a claim with 30,000 waiting (docs/performance.md). The index finds an organization's parked rows
// in their order for that release.
import { sql, type Kysely } from 'kysely';

export function parkedTasks() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('tasks').addColumn('parked', 'integer', (c) => c.notNull().defaultTo(0)).execute();
      await db.schema.createIndex('tasks_parked').on('tasks').columns(['org_id', 'run_at', 'id'])
        .where(sql.ref('parked'), '=', 1).execute();
    },
  };
}
