// Every statement on the agents, agent_versions and agent_urls tables.
import type { Selectable } from 'kysely';
import type { AgentsTable, AgentVersionsTable, Executor } from '../../db/types.ts';

export type AgentRow = Selectable<AgentsTable>;
export type AgentVersionRow = Selectable<AgentVersionsTable>;

export const agentRepo = {
  async find(db: Executor, accountId: number): Promise<AgentRow | undefined> {
    return db.selectFrom('agents').selectAll().where('account_id', '=', accountId).executeTakeFirst();
  },

  /**
   * The agent's row, created with `initial` in both slots when missing, and locked for the rest
   * of the transaction (a publish and an edit of the same agent run one after the other).
   */
  async lockOrCreate(tx: Executor, accountId: number, orgId: number, initial: string, now: number): Promise<AgentRow> {
    await tx.insertInto('agents')
      .values({ account_id: accountId, org_id: orgId, staging: initial, live: initial, published_at: null, created_at: now, updated_at: now })
      .onConflict((oc) => oc.column('account_id').doNothing()).execute();
    return tx.selectFrom('agents').selectAll().where('account_id', '=', accountId).forUpdate().executeTakeFirstOrThrow();
  },

  async update(tx: Executor, accountId: number, patch: Partial<Pick<AgentRow, 'staging' | 'live' | 'published_at'>>, now: number): Promise<void> {
    await tx.updateTable('agents').set({ ...patch, updated_at: now }).where('account_id', '=', accountId).execute();
  },
};

export const versionRepo = {
  async list(db: Executor, accountId: number, withSnapshot: boolean): Promise<Array<Pick<AgentVersionRow, 'version_id' | 'title' | 'created_at' | 'updated_at'> & { snapshot?: string }>> {
    const q = db.selectFrom('agent_versions').select(['version_id', 'title', 'created_at', 'updated_at'])
      .where('account_id', '=', accountId).orderBy('version_id', 'desc');
    return withSnapshot ? q.select('snapshot').execute() : q.execute();
  },

  async find(db: Executor, accountId: number, versionId: number): Promise<AgentVersionRow | undefined> {
    return db.selectFrom('agent_versions').selectAll()
      .where('account_id', '=', accountId).where('version_id', '=', versionId).executeTakeFirst();
  },

  /** The largest versionId of the agent (0 when none). Call with the agent row locked. */
  async lastVersionId(tx: Executor, accountId: number): Promise<number> {
    const row = await tx.selectFrom('agent_versions').select((eb) => eb.fn.max('version_id').as('last'))
      .where('account_id', '=', accountId).executeTakeFirst();
    return Number(row?.last ?? 0);
  },

  async insert(tx: Executor, row: Omit<AgentVersionRow, 'id'>): Promise<void> {
    await tx.insertInto('agent_versions').values(row).execute();
  },

  async update(tx: Executor, accountId: number, versionId: number, patch: Partial<Pick<AgentVersionRow, 'title' | 'snapshot'>>, now: number): Promise<number> {
    const r = await tx.updateTable('agent_versions').set({ ...patch, updated_at: now })
      .where('account_id', '=', accountId).where('version_id', '=', versionId).executeTakeFirst();
    return Number(r.numUpdatedRows);
  },
};

export const urlRepo = {
  async slugOf(db: Executor, accountId: number): Promise<string | undefined> {
    const r = await db.selectFrom('agent_urls').select('slug').where('account_id', '=', accountId).executeTakeFirst();
    return r?.slug;
  },

  /** The agent account holding the slug, if any. */
  async holder(db: Executor, slug: string): Promise<number | undefined> {
    const r = await db.selectFrom('agent_urls').select('account_id').where('slug', '=', slug).executeTakeFirst();
    return r?.account_id;
  },

  /**
   * Sets the agent's slug in one statement (the old one is freed by the same write). A slug held
   * by another agent raises a unique violation from the `agent_urls_slug` index.
   */
  async set(db: Executor, accountId: number, slug: string, now: number): Promise<void> {
    await db.insertInto('agent_urls').values({ account_id: accountId, slug, created_at: now, updated_at: now })
      .onConflict((oc) => oc.column('account_id').doUpdateSet({ slug, updated_at: now })).execute();
  },
};
