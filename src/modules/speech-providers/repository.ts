// Queries on speech_providers: an organization's own speech provider keys, one per vendor. Every
// query is bound to one organization.
import type { Executor, SpeechProviderRow } from '../../db/types.ts';

export interface SpeechProviderWrite {
  /** Sealed. */
  api_key: string;
  /** Null: the vendor's own URL. */
  base_url: string | null;
  enabled: 0 | 1;
}

export const speechProviderRepo = {
  /** The organization's providers, in vendor order. */
  async list(db: Executor, orgId: number): Promise<SpeechProviderRow[]> {
    return db.selectFrom('speech_providers').selectAll().where('org_id', '=', orgId).orderBy('vendor').execute();
  },
  async find(db: Executor, orgId: number, vendor: string): Promise<SpeechProviderRow | undefined> {
    return db.selectFrom('speech_providers').selectAll().where('org_id', '=', orgId).where('vendor', '=', vendor).executeTakeFirst();
  },
  async insert(db: Executor, orgId: number, vendor: string, row: SpeechProviderWrite, now: number): Promise<SpeechProviderRow> {
    return db.insertInto('speech_providers').values({ org_id: orgId, vendor, ...row, created_at: now, updated_at: now })
      .returningAll().executeTakeFirstOrThrow();
  },
  async update(db: Executor, orgId: number, vendor: string, row: SpeechProviderWrite, now: number): Promise<SpeechProviderRow> {
    return db.updateTable('speech_providers').set({ ...row, updated_at: now }).where('org_id', '=', orgId).where('vendor', '=', vendor)
      .returningAll().executeTakeFirstOrThrow();
  },
  /** Deletes one; the number of rows deleted (0 or 1). */
  async remove(db: Executor, orgId: number, vendor: string): Promise<number> {
    const r = await db.deleteFrom('speech_providers').where('org_id', '=', orgId).where('vendor', '=', vendor).executeTakeFirst();
    return Number(r.numDeletedRows);
  },
};
