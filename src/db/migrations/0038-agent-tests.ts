// Issue 36: agent tests (docs/testing-agents.md). A suite belongs to an agent account and holds
// its scenarios as one document (JSON, checked by src/modules/agent-tests/document.ts); every
// change bumps its version and keeps the earlier document in agent_test_suite_versions. A run is a
// durable job (agent_test_runs, a queue table) that talks the suite's scenarios through the agent
// configuration it froze at its start (its JSON and hash kept on the row: the publish gate compares
// the hash with the staging configuration's); each scenario's iteration is one result row, written
// once it is decided, so a run resumed after a crash skips what it already decided.
import type { Kysely } from 'kysely';

export function agentTests() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('agent_test_suites')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('version', 'integer', (c) => c.notNull())
        // JSON: the suite document (settings and scenarios) of this version.
        .addColumn('document', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('agent_test_suites_name').on('agent_test_suites').columns(['account_id', 'name']).unique().execute();
      await db.schema.createTable('agent_test_suite_versions')
        .addColumn('suite_id', 'text', (c) => c.notNull().references('agent_test_suites.id').onDelete('cascade'))
        .addColumn('version', 'integer', (c) => c.notNull())
        .addColumn('document', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('agent_test_suite_versions_pk', ['suite_id', 'version'])
        .execute();
      await db.schema.createTable('agent_test_runs')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('suite_id', 'text', (c) => c.notNull().references('agent_test_suites.id').onDelete('cascade'))
        .addColumn('suite_version', 'integer', (c) => c.notNull())
        // 'staging' | 'live' | 'version' (agent_version names which)
        .addColumn('target', 'text', (c) => c.notNull())
        .addColumn('agent_version', 'bigint')
        // The agent configuration the run talks to (JSON) and its hash (agents/config-hash.ts).
        .addColumn('config', 'text', (c) => c.notNull())
        .addColumn('config_hash', 'text', (c) => c.notNull())
        .addColumn('mode', 'text', (c) => c.notNull())
        .addColumn('iterations', 'integer', (c) => c.notNull())
        .addColumn('concurrency', 'integer', (c) => c.notNull())
        .addColumn('total', 'integer', (c) => c.notNull())
        .addColumn('done', 'integer', (c) => c.notNull().defaultTo(0))
        // 1 every scenario passed, 0 one did not; null until the run finished.
        .addColumn('passed', 'integer')
        .addColumn('state', 'text', (c) => c.notNull().defaultTo('pending'))
        .addColumn('run_at', 'bigint', (c) => c.notNull())
        .addColumn('attempt', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('max_attempts', 'integer', (c) => c.notNull().defaultTo(3))
        .addColumn('lease_owner', 'text')
        .addColumn('lease_expires_at', 'bigint')
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addColumn('finished_at', 'bigint')
        .execute();
      await db.schema.createIndex('agent_test_runs_claim').on('agent_test_runs').columns(['state', 'run_at'])
        .where('state', '=', 'pending').execute();
      await db.schema.createIndex('agent_test_runs_rescue').on('agent_test_runs').columns(['state', 'lease_expires_at']).execute();
      await db.schema.createIndex('agent_test_runs_agent').on('agent_test_runs').columns(['account_id', 'suite_id', 'created_at']).execute();
      await db.schema.createIndex('agent_test_runs_org').on('agent_test_runs').columns(['org_id', 'state']).execute();
      await db.schema.createTable('agent_test_results')
        .addColumn('run_id', 'text', (c) => c.notNull().references('agent_test_runs.id').onDelete('cascade'))
        .addColumn('scenario', 'integer', (c) => c.notNull())
        .addColumn('iteration', 'integer', (c) => c.notNull())
        .addColumn('scenario_name', 'text', (c) => c.notNull())
        // No foreign key: a deleted conversation leaves the verdict readable.
        .addColumn('conversation_id', 'text')
        .addColumn('passed', 'integer', (c) => c.notNull())
        // JSON: each check's verdict and reason; the judge's (labelled simulated when it did not decide).
        .addColumn('checks', 'text', (c) => c.notNull())
        .addColumn('turns', 'integer', (c) => c.notNull())
        .addColumn('error', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('agent_test_results_pk', ['run_id', 'scenario', 'iteration'])
        .execute();
    },
  };
}
