// Issue 38 (part C), a reseller's overview across its organizations: the success rate counts each
// organization's finished analyses in a window (src/modules/conversations/repository.ts
// `analysisOutcomes`), read by organization and finish time through this index instead of a scan.
import type { Kysely } from 'kysely';

export function overviewIndex() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createIndex('conversation_analyses_org_finished').on('conversation_analyses').columns(['org_id', 'finished_at']).execute();
    },
  };
}
