// Every statement on agent_test_suites, agent_test_suite_versions, agent_test_runs and
// agent_test_results (docs/testing-agents.md).
import type { Selectable } from 'kysely';
import type { AgentTestResultsTable, AgentTestRunsTable, AgentTestSuitesTable, Executor } from '../../db/types.ts';

export type SuiteRow = Selectable<AgentTestSuitesTable>;
export type RunRow = Selectable<AgentTestRunsTable>;
export type ResultRow = Selectable<AgentTestResultsTable>;

/** The agent_test_runs queue's name (its table, wake-up bus and NOTIFY payload). */
export const AGENT_TEST_RUNS = 'agent_test_runs' as const;

const num = (v: unknown) => Number(v);
/** bigint columns come back as strings from PostgreSQL: numbers here. */
function runOf(r: RunRow): RunRow {
  return {
    ...r, agent_version: r.agent_version === null ? null : num(r.agent_version), run_at: num(r.run_at), created_at: num(r.created_at),
    updated_at: num(r.updated_at), finished_at: r.finished_at === null ? null : num(r.finished_at),
    lease_expires_at: r.lease_expires_at === null ? null : num(r.lease_expires_at),
  };
}
const suiteOf = (r: SuiteRow): SuiteRow => ({ ...r, created_at: num(r.created_at), updated_at: num(r.updated_at) });

export const suiteRepo = {
  async list(db: Executor, accountId: number): Promise<SuiteRow[]> {
    return (await db.selectFrom('agent_test_suites').selectAll().where('account_id', '=', accountId).orderBy('name').execute()).map(suiteOf);
  },

  async find(db: Executor, accountId: number, id: string): Promise<SuiteRow | undefined> {
    const r = await db.selectFrom('agent_test_suites').selectAll().where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    return r && suiteOf(r);
  },

  async byName(db: Executor, accountId: number, name: string): Promise<SuiteRow | undefined> {
    const r = await db.selectFrom('agent_test_suites').selectAll().where('account_id', '=', accountId).where('name', '=', name).executeTakeFirst();
    return r && suiteOf(r);
  },

  /** Locks the suite's row for the rest of the transaction (PostgreSQL; SQLite writes one at a time). */
  async lock(tx: Executor, accountId: number, id: string): Promise<SuiteRow | undefined> {
    const r = await tx.selectFrom('agent_test_suites').selectAll().where('account_id', '=', accountId).where('id', '=', id).forUpdate().executeTakeFirst();
    return r && suiteOf(r);
  },

  async insert(tx: Executor, row: SuiteRow): Promise<void> {
    await tx.insertInto('agent_test_suites').values(row).execute();
    await tx.insertInto('agent_test_suite_versions').values({ suite_id: row.id, version: row.version, document: row.document, created_at: row.created_at }).execute();
  },

  /** The suite's next version: its document, kept beside the earlier ones. */
  async update(tx: Executor, id: string, patch: { name: string; version: number; document: string }, now: number): Promise<void> {
    await tx.updateTable('agent_test_suites').set({ ...patch, updated_at: now }).where('id', '=', id).execute();
    await tx.insertInto('agent_test_suite_versions').values({ suite_id: id, version: patch.version, document: patch.document, created_at: now }).execute();
  },

  async remove(db: Executor, accountId: number, id: string): Promise<boolean> {
    const r = await db.deleteFrom('agent_test_suites').where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  },

  async versions(db: Executor, id: string): Promise<Array<{ version: number; created_at: number }>> {
    const rows = await db.selectFrom('agent_test_suite_versions').select(['version', 'created_at']).where('suite_id', '=', id).orderBy('version', 'desc').execute();
    return rows.map((r) => ({ version: num(r.version), created_at: num(r.created_at) }));
  },

  async version(db: Executor, id: string, version: number): Promise<string | undefined> {
    const r = await db.selectFrom('agent_test_suite_versions').select('document').where('suite_id', '=', id).where('version', '=', version).executeTakeFirst();
    return r?.document;
  },
};

export const runRepo = {
  async insert(tx: Executor, row: Omit<RunRow, 'done' | 'passed' | 'state' | 'attempt' | 'max_attempts' | 'lease_owner' | 'lease_expires_at' | 'last_error' | 'finished_at'>): Promise<void> {
    await tx.insertInto('agent_test_runs').values({ ...row, passed: null, last_error: null, lease_owner: null, lease_expires_at: null, finished_at: null }).execute();
  },

  async find(db: Executor, id: string): Promise<RunRow | undefined> {
    const r = await db.selectFrom('agent_test_runs').selectAll().where('id', '=', id).executeTakeFirst();
    return r && runOf(r);
  },

  async list(db: Executor, accountId: number, suiteId: string | undefined, limit: number): Promise<RunRow[]> {
    let q = db.selectFrom('agent_test_runs').selectAll().where('account_id', '=', accountId);
    if (suiteId) q = q.where('suite_id', '=', suiteId);
    return (await q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute()).map(runOf);
  },

  /** The organization's runs not yet finished (queued or running). */
  async openCount(db: Executor, orgId: number): Promise<number> {
    const r = await db.selectFrom('agent_test_runs').select((eb) => eb.fn.countAll<number>().as('n'))
      .where('org_id', '=', orgId).where('state', 'in', ['pending', 'running']).executeTakeFirstOrThrow();
    return Number(r.n);
  },

  /**
   * The latest finished run of a suite on a target (and of a configuration's hash and a suite
   * version, when given), before `before` (a run's created_at and id) when given.
   */
  async latestFinished(db: Executor, suiteId: string, target: RunRow['target'], opts: { configHash?: string; suiteVersion?: number; before?: { at: number; id: string } } = {}): Promise<RunRow | undefined> {
    let q = db.selectFrom('agent_test_runs').selectAll().where('suite_id', '=', suiteId).where('target', '=', target).where('state', '=', 'finished');
    if (opts.configHash) q = q.where('config_hash', '=', opts.configHash);
    if (opts.suiteVersion !== undefined) q = q.where('suite_version', '=', opts.suiteVersion);
    if (opts.before) q = q.where((eb) => eb.or([eb('created_at', '<', opts.before!.at), eb.and([eb('created_at', '=', opts.before!.at), eb('id', '<', opts.before!.id)])]));
    const r = await q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(1).executeTakeFirst();
    return r && runOf(r);
  },

  /** The suite's runs not yet finished. */
  async openOfSuite(db: Executor, suiteId: string): Promise<number> {
    const r = await db.selectFrom('agent_test_runs').select((eb) => eb.fn.countAll<number>().as('n'))
      .where('suite_id', '=', suiteId).where('state', 'in', ['pending', 'running']).executeTakeFirstOrThrow();
    return Number(r.n);
  },

  async progress(db: Executor, id: string, done: number, now: number): Promise<void> {
    await db.updateTable('agent_test_runs').set({ done, updated_at: now }).where('id', '=', id).execute();
  },
};

export const resultRepo = {
  /** Records one scenario iteration's verdict once (a resumed run finds it and does not run it again). */
  async insert(db: Executor, row: ResultRow): Promise<void> {
    await db.insertInto('agent_test_results').values(row).onConflict((oc) => oc.columns(['run_id', 'scenario', 'iteration']).doNothing()).execute();
  },

  async ofRun(db: Executor, runId: string): Promise<ResultRow[]> {
    const rows = await db.selectFrom('agent_test_results').selectAll().where('run_id', '=', runId).orderBy('scenario').orderBy('iteration').execute();
    return rows.map((r) => ({ ...r, created_at: num(r.created_at) }));
  },

  async count(db: Executor, runId: string): Promise<number> {
    const r = await db.selectFrom('agent_test_results').select((eb) => eb.fn.countAll<number>().as('n')).where('run_id', '=', runId).executeTakeFirstOrThrow();
    return Number(r.n);
  },
};
