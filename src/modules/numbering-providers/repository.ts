// Queries on numbering_providers and integrations (settings that hang off an account).
import type { Executor, IntegrationRow, NumberingProviderRow } from '../../db/types.ts';

export const numberingRepo = {
  async listForOrg(db: Executor, orgId: number): Promise<NumberingProviderRow[]> {
    return db.selectFrom('numbering_providers').selectAll().where('org_id', '=', orgId).orderBy('id').execute();
  },
  /** The organization's enabled providers, its default first. */
  async listEnabled(db: Executor, orgId: number): Promise<NumberingProviderRow[]> {
    return db.selectFrom('numbering_providers').selectAll()
      .where('org_id', '=', orgId).where('enabled', '=', 1).orderBy('is_default', 'desc').orderBy('id').execute();
  },
  /** `lock` takes a row lock (a no-op on SQLite, whose single writer serialises writes). */
  async find(db: Executor, orgId: number, providerId: string, opts: { lock?: boolean } = {}): Promise<NumberingProviderRow | undefined> {
    const q = db.selectFrom('numbering_providers').selectAll().where('org_id', '=', orgId).where('provider_id', '=', providerId);
    return (opts.lock ? q.forUpdate() : q).executeTakeFirst();
  },
  async insert(db: Executor, row: Omit<NumberingProviderRow, 'id'>): Promise<NumberingProviderRow> {
    return db.insertInto('numbering_providers').values(row).returningAll().executeTakeFirstOrThrow();
  },
  async update(db: Executor, id: number, patch: Partial<Omit<NumberingProviderRow, 'id'>>): Promise<void> {
    await db.updateTable('numbering_providers').set(patch).where('id', '=', id).execute();
  },
  /**
   * Providers whose settings name a phone number ending in `lastDigits` (a coarse filter: the
   * caller compares the numbers), of every organization.
   */
  async withPhoneNumberEnding(db: Executor, lastDigits: string): Promise<Array<Pick<NumberingProviderRow, 'org_id' | 'config'>>> {
    return db.selectFrom('numbering_providers').select(['org_id', 'config'])
      .where('config', 'like', '%"phoneNumber"%').where('config', 'like', `%${lastDigits.replace(/[%_\\]/g, '')}%`).execute();
  },
  /**
   * Enabled providers of every organization, counted by provider and non-secret settings
   * (`callplane doctor` says which carriers the deployment uses).
   */
  async enabledSummary(db: Executor): Promise<Array<{ provider_id: string; config: string; organizations: number }>> {
    const rows = await db.selectFrom('numbering_providers').select(['provider_id', 'config', (eb) => eb.fn.countAll<number | string>().as('organizations')])
      .where('enabled', '=', 1).groupBy(['provider_id', 'config']).execute();
    return rows.map((r) => ({ provider_id: r.provider_id, config: r.config, organizations: Number(r.organizations) }));
  },
  /** Only one provider of an organization is its default. */
  async clearDefault(db: Executor, orgId: number, exceptId: number): Promise<void> {
    await db.updateTable('numbering_providers').set({ is_default: 0 })
      .where('org_id', '=', orgId).where('id', '!=', exceptId).execute();
  },
};

export const integrationRepo = {
  async listForAccount(db: Executor, accountId: number): Promise<IntegrationRow[]> {
    return db.selectFrom('integrations').selectAll().where('account_id', '=', accountId).orderBy('id').execute();
  },
  async insert(db: Executor, row: Omit<IntegrationRow, 'id'>): Promise<IntegrationRow> {
    return db.insertInto('integrations').values(row).returningAll().executeTakeFirstOrThrow();
  },
  /** An account's integration by app id; `lock` takes a row lock (a no-op on SQLite). */
  async find(db: Executor, accountId: number, appId: string, opts: { lock?: boolean } = {}): Promise<IntegrationRow | undefined> {
    const q = db.selectFrom('integrations').selectAll().where('account_id', '=', accountId).where('app_id', '=', appId);
    return (opts.lock ? q.forUpdate() : q).executeTakeFirst();
  },
  async updateData(db: Executor, id: number, appData: string, updatedAt: number): Promise<IntegrationRow> {
    return db.updateTable('integrations').set({ app_data: appData, updated_at: updatedAt })
      .where('id', '=', id).returningAll().executeTakeFirstOrThrow();
  },
};
