// Agents (issue 12): one agent configuration per agent account, in two slots (staging, edited by
// POST /api/v2/agent, and live, the contract's "default"), and the stored version snapshots.
import type { Kysely } from 'kysely';
import type { Dialect } from '../types.ts';
import { withId } from './0001-foundation.ts';

export function agents(dialect: Dialect) {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('agents')
        // The agent account this configuration belongs to; created on the first write.
        .addColumn('account_id', 'integer', (c) => c.primaryKey().references('accounts.id').onDelete('cascade'))
        .addColumn('org_id', 'integer', (c) => c.notNull())
        // JSON: the agent configuration (docs/agents.md).
        .addColumn('staging', 'text', (c) => c.notNull())
        .addColumn('live', 'text', (c) => c.notNull())
        .addColumn('published_at', 'bigint')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await withId(db.schema.createTable('agent_versions'), dialect)
        .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        // The contract's versionId: an epoch-ms score, unique per agent (bumped past the last one).
        .addColumn('version_id', 'bigint', (c) => c.notNull())
        .addColumn('title', 'text', (c) => c.notNull())
        // JSON: a full agent configuration.
        .addColumn('snapshot', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('agent_versions_agent_version').on('agent_versions')
        .columns(['account_id', 'version_id']).unique().execute();
    },
  };
}
