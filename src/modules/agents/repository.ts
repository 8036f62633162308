// Every statement on the agents and agent_versions tables.
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
