// Queries on tasks and their counters. Every query is bound to one organization.
import type { Db, Executor, NewTask, QueueState, TaskRow, TaskType } from '../../db/types.ts';
import { bumpStateCount } from './queue.ts';
import { newId } from '../../lib/ids.ts';
import { presentTask } from './present.ts';

/** Rows per multi-row INSERT: ~35 columns each stays far below SQLite's 32,766 bound parameters. */
export const INSERT_BATCH = 500;
/** Finished tasks and their daily counters are kept this long by default (CALLPLANE_TASK_RETENTION_DAYS). */
export const DEFAULT_RETENTION_DAYS = 30;

export interface ListFilter {
  orgId: number;
  accountId?: number;
  state?: QueueState;
  type?: TaskType;
  since?: number;
  until?: number;
  sort: 'created_at' | 'updated_at' | 'scheduled_for';
  order: 'asc' | 'desc';
  limit: number;
  offset: number;
}

export const taskRepo = {
  /**
   * Inserts checked tasks with their pending counts and outbox events, in the caller's
   * transaction. Rows must name the same columns (they do: checkTask fills every one).
   */
  async insert(tx: Executor, rows: NewTask[], now: number): Promise<TaskRow[]> {
    const out: TaskRow[] = [];
    const perOrg = new Map<number, number>();
    for (let i = 0; i < rows.length; i += INSERT_BATCH) {
      const batch = rows.slice(i, i + INSERT_BATCH);
      const inserted = await tx.insertInto('tasks').values(batch).returningAll().execute();
      await tx.insertInto('task_events').values(inserted.map((row) => ({
        id: newId('evt', now), org_id: row.org_id, task_id: row.id, type: 'task.pending' as const,
        payload: JSON.stringify({ type: 'task.pending', task: presentTask(row) }), created_at: now,
      }))).execute();
      for (const row of inserted) perOrg.set(row.org_id, (perOrg.get(row.org_id) ?? 0) + 1);
      out.push(...inserted);
    }
    for (const [orgId, n] of perOrg) await bumpStateCount(tx, orgId, 'pending', n);
    return out;
  },

  async find(db: Executor, orgId: number, id: string): Promise<TaskRow | undefined> {
    return db.selectFrom('tasks').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
  },

  async findByIdempotencyKey(db: Executor, orgId: number, key: string): Promise<TaskRow | undefined> {
    return db.selectFrom('tasks').selectAll().where('org_id', '=', orgId).where('idempotency_key', '=', key).executeTakeFirst();
  },

  async releaseIdempotencyKey(db: Executor, id: string): Promise<void> {
    await db.updateTable('tasks').set({ idempotency_key: null, request_hash: null }).where('id', '=', id).execute();
  },

  async list(db: Executor, f: ListFilter): Promise<{ rows: TaskRow[]; total: number }> {
    let q = db.selectFrom('tasks').where('org_id', '=', f.orgId);
    if (f.accountId !== undefined) q = q.where('account_id', '=', f.accountId);
    if (f.state) q = q.where('state', '=', f.state);
    if (f.type) q = q.where('type', '=', f.type);
    if (f.since !== undefined) q = q.where('updated_at', '>=', f.since);
    if (f.until !== undefined) q = q.where('updated_at', '<=', f.until);
    const [rows, count] = await Promise.all([
      // Unscheduled tasks (scheduled_for null) last in either order: left to themselves, SQLite and
      // PostgreSQL put NULLs at opposite ends.
      q.selectAll().orderBy(f.sort, (ob) => (f.order === 'asc' ? ob.asc() : ob.desc()).nullsLast())
        .orderBy('id', f.order).limit(f.limit).offset(f.offset).execute(),
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    return { rows, total: Number(count.n) };
  },

  /** Deletes a task that is not running; false when it is running (or gone). */
  async delete(tx: Executor, row: TaskRow): Promise<boolean> {
    const res = await tx.deleteFrom('tasks').where('id', '=', row.id).where('state', '=', row.state)
      .where('state', '!=', 'running').executeTakeFirst();
    if (Number(res.numDeletedRows) === 0) return false;
    await bumpStateCount(tx, row.org_id, row.state, -1);
    return true;
  },

  async counts(db: Executor, orgId: number) {
    return db.selectFrom('org_task_counts').selectAll().where('org_id', '=', orgId).executeTakeFirst();
  },

  /**
   * Deletes up to `batch` tasks that ended before `before` (ms), with their events, keeping the
   * per-state counts right. Returns how many were deleted; call again while it returns `batch`.
   */
  async pruneFinished(db: Db, before: number, batch = 1000): Promise<number> {
    return db.transaction().execute(async (tx) => {
      const rows = await tx.selectFrom('tasks').select(['id', 'org_id', 'state'])
        .where('state', 'in', ['finished', 'failed', 'canceled']).where('finished_at', '<', before)
        .orderBy('finished_at').limit(batch).execute();
      if (rows.length === 0) return 0;
      await tx.deleteFrom('tasks').where('id', 'in', rows.map((r) => r.id)).execute();
      const per = new Map<string, { orgId: number; state: QueueState; n: number }>();
      for (const r of rows) {
        const key = `${r.org_id}:${r.state}`;
        const cur = per.get(key) ?? { orgId: r.org_id, state: r.state, n: 0 };
        cur.n++;
        per.set(key, cur);
      }
      for (const { orgId, state, n } of per.values()) await bumpStateCount(tx, orgId, state, -n);
      return rows.length;
    });
  },

  /** Daily counters of days long gone (they are read for today and for `date=` queries). */
  async pruneDailyCounters(db: Executor, beforeDay: string): Promise<number> {
    const res = await db.deleteFrom('org_daily_counters').where('day', '<', beforeDay).executeTakeFirst();
    return Number(res.numDeletedRows);
  },

  async daily(db: Executor, orgId: number, day: string): Promise<Record<string, number>> {
    const rows = await db.selectFrom('org_daily_counters').select(['kind', 'n'])
      .where('org_id', '=', orgId).where('day', '=', day).execute();
    return Object.fromEntries(rows.map((r) => [r.kind, Number(r.n)]));
  },
};
