// Context notes: what an organization tells its agents about one person (POST /api/v2/context).
// Integrations need no schema change: their sealed appData already lives in `integrations`
// (0001-foundation), which PUT /api/v2/integration/{slug}/{version} updates in place.
import type { Kysely } from 'kysely';
import type { Dialect } from '../types.ts';
import { withId } from './0001-foundation.ts';

export function contextIntegrations(dialect: Dialect) {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await withId(db.schema.createTable('context_notes'), dialect)
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        // The person: an E.164 number or a lowercased username.
        .addColumn('target', 'text', (c) => c.notNull())
        // 1, 2, … per (org_id, target): the unique constraint makes two concurrent appends take
        // different places, so the per-person bound cannot be overrun by a race.
        .addColumn('seq', 'integer', (c) => c.notNull())
        .addColumn('note', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addUniqueConstraint('context_notes_org_target_seq', ['org_id', 'target', 'seq'])
        .execute();
    },
  };
}
