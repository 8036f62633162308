// The periodic jobs' turns (src/db/job-leases.ts): every worker schedules the same maintenance
// jobs, and a job runs in whichever process moves its row's due_at forward first, so any number
// of workers run each job once per period (docs/deploy.md, "No singletons").
import type { Kysely } from 'kysely';

export function jobLeases() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('job_leases')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('holder', 'text', (c) => c.notNull())
        .addColumn('due_at', 'bigint', (c) => c.notNull())
        .execute();
    },
  };
}
