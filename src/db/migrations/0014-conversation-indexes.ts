// Indexes for the conversation logs (GET /api/v2/logs, bench/logs.ts, docs/performance.md):
// - conversations_org_started_id (org_id, started_at, id) serves the logs' order (newest first,
//   ties by id) and the keyset cursor of the CSV stream from the index alone, and lets a deep page
//   skip its offset in the index without reading the skipped rows. It replaces
//   conversations_org_started (org_id, started_at), its prefix, which every query that used it
//   can use instead.
// - conversations_agent_started (org_id, account_id, started_at, id) serves an agent's own logs
//   (an agent token, targetAccountId naming an agent, agentId): its count and pages are a range
//   of the index instead of a filter over the whole organization's range.
import type { Kysely } from 'kysely';

export function conversationIndexes() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createIndex('conversations_org_started_id').on('conversations').columns(['org_id', 'started_at', 'id']).execute();
      await db.schema.dropIndex('conversations_org_started').execute();
      await db.schema.createIndex('conversations_agent_started').on('conversations').columns(['org_id', 'account_id', 'started_at', 'id']).execute();
    },
  };
}
