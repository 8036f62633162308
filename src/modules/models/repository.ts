// Queries on llm_providers: an organization's own language-model providers (bring your own key).
// Every query is bound to one organization.
import type { Executor, LlmProviderRow } from '../../db/types.ts';

export interface LlmProviderWrite {
  base_url: string;
  /** Sealed, or null for a provider that takes no key. */
  api_key: string | null;
  /** JSON array of model ids. */
  models: string;
}

export const llmProviderRepo = {
  /** The organization's providers, oldest first (the order resolution tries them in). */
  async list(db: Executor, orgId: number): Promise<LlmProviderRow[]> {
    return db.selectFrom('llm_providers').selectAll().where('org_id', '=', orgId).orderBy('id').execute();
  },
  async find(db: Executor, orgId: number, name: string): Promise<LlmProviderRow | undefined> {
    return db.selectFrom('llm_providers').selectAll().where('org_id', '=', orgId).where('name', '=', name).executeTakeFirst();
  },
  async count(db: Executor, orgId: number): Promise<number> {
    const r = await db.selectFrom('llm_providers').select((eb) => eb.fn.countAll<number>().as('n'))
      .where('org_id', '=', orgId).executeTakeFirstOrThrow();
    return Number(r.n);
  },
  async insert(db: Executor, orgId: number, name: string, row: LlmProviderWrite, now: number): Promise<LlmProviderRow> {
    return db.insertInto('llm_providers').values({ org_id: orgId, name, ...row, created_at: now, updated_at: now })
      .returningAll().executeTakeFirstOrThrow();
  },
  async update(db: Executor, id: number, row: LlmProviderWrite, now: number): Promise<LlmProviderRow> {
    return db.updateTable('llm_providers').set({ ...row, updated_at: now }).where('id', '=', id)
      .returningAll().executeTakeFirstOrThrow();
  },
  /** Deletes one provider; the number of rows deleted (0 or 1). */
  async remove(db: Executor, orgId: number, name: string): Promise<number> {
    const r = await db.deleteFrom('llm_providers').where('org_id', '=', orgId).where('name', '=', name).executeTakeFirst();
    return Number(r.numDeletedRows);
  },
};
