// Tasks (one row is one task and its queue entry), their event outbox, and the per-organization
// limit state the claim checks in its transaction: semaphores, daily counters, target cooldowns.
import type { Kysely } from 'kysely';
import type { Dialect } from '../types.ts';

export function tasks(_dialect: Dialect) {
  return {
    async up(db: Kysely<any>): Promise<void> {
      // String ids on both engines, so no dialect branch is needed for keys here.
      await db.schema.createTable('tasks')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull().defaultTo('pending'))
        .addColumn('target', 'text')
        .addColumn('context', 'text')
        .addColumn('greeting', 'text')
        .addColumn('wait_to_greet', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('meta', 'text')
        .addColumn('external_task_id', 'text')
        .addColumn('scheduled_for', 'bigint')
        .addColumn('run_at', 'bigint', (c) => c.notNull())
        .addColumn('attempt', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('max_attempts', 'integer', (c) => c.notNull().defaultTo(3))
        .addColumn('lease_owner', 'text')
        .addColumn('lease_expires_at', 'bigint')
        .addColumn('cancel_requested_at', 'bigint')
        .addColumn('idempotency_key', 'text')
        .addColumn('request_hash', 'text')
        .addColumn('provider', 'text')
        .addColumn('provider_ref', 'text')
        .addColumn('result', 'text')
        .addColumn('error', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addColumn('started_at', 'bigint')
        .addColumn('finished_at', 'bigint')
        .execute();
      // The claim scans only due pending rows: a partial index keeps it small however many
      // finished rows are retained (graphile-worker's trick).
      await db.schema.createIndex('tasks_claim').on('tasks').columns(['state', 'run_at'])
        .where('state', '=', 'pending').execute();
      await db.schema.createIndex('tasks_org_created').on('tasks').columns(['org_id', 'created_at']).execute();
      await db.schema.createIndex('tasks_org_updated').on('tasks').columns(['org_id', 'updated_at']).execute();
      await db.schema.createIndex('tasks_rescue').on('tasks').columns(['state', 'lease_expires_at']).execute();
      // NULL keys are distinct on both engines, so only keyed submissions are deduplicated.
      await db.schema.createIndex('tasks_idempotency').unique().on('tasks')
        .columns(['org_id', 'idempotency_key']).execute();

      await db.schema.createTable('task_events')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.id').onDelete('cascade'))
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('payload', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('task_events_task').on('task_events').columns(['task_id', 'id']).execute();

      await db.schema.createTable('org_task_limits')
        .addColumn('org_id', 'integer', (c) => c.primaryKey().references('accounts.id').onDelete('cascade'))
        .addColumn('config', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();

      await db.schema.createTable('org_semaphores')
        .addColumn('org_id', 'integer', (c) => c.primaryKey().references('accounts.id').onDelete('cascade'))
        .addColumn('running', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();

      await db.schema.createTable('org_daily_counters')
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('day', 'text', (c) => c.notNull())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('n', 'integer', (c) => c.notNull().defaultTo(0))
        .addPrimaryKeyConstraint('org_daily_counters_pk', ['org_id', 'day', 'kind'])
        .execute();

      await db.schema.createTable('target_cooldowns')
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('target', 'text', (c) => c.notNull())
        .addColumn('last_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('target_cooldowns_pk', ['org_id', 'kind', 'target'])
        .execute();
    },
  };
}
