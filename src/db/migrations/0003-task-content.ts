// What the first tasks migration lacked once the contract's queueing operations were wired: the
// body of a text (`content`), the per-task context the agent operations take (`taskContext`), and
// per-organization counts of tasks by state, so `GET /tasks/stats` reads one row instead of
// counting the table.
import type { Kysely } from 'kysely';
import type { Dialect } from '../types.ts';

export function taskContent(_dialect: Dialect) {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('tasks').addColumn('content', 'text').execute();
      await db.schema.alterTable('tasks').addColumn('task_context', 'text').execute();
      // One row per organization, so every state change of the organization's tasks locks one
      // row (never two rows in two orders, which could deadlock on PostgreSQL).
      await db.schema.createTable('org_task_counts')
        .addColumn('org_id', 'integer', (c) => c.primaryKey().references('accounts.id').onDelete('cascade'))
        .addColumn('pending', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('running', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('finished', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('failed', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('canceled', 'bigint', (c) => c.notNull().defaultTo(0))
        .execute();
      // The semaphore's bound next to its count, so a claim can skip the tasks of organizations
      // whose slots are all taken with one condition instead of trying them one by one.
      await db.schema.alterTable('org_semaphores')
        .addColumn('max_running', 'integer', (c) => c.notNull().defaultTo(5)).execute();
      // The task list filters by state and type within an organization.
      await db.schema.createIndex('tasks_org_state').on('tasks').columns(['org_id', 'state']).execute();
    },
  };
}
