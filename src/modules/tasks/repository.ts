// Every statement on the tasks module's tables: tasks, task_events (the outbox), org_task_counts,
// org_task_limits, org_semaphores, org_daily_counters and target_cooldowns. Queries take the
// executor first (a transaction or the database); `lock` options take row locks (no-ops on SQLite,
// whose one writer already serialises write transactions: src/db/index.ts).
import { sql, type Expression, type ExpressionBuilder, type SqlBool } from 'kysely';
import type { DB, Db, Executor, QueueState, TaskEventRow, TaskRow, TaskType } from '../../db/types.ts';
import { newId } from '../../lib/ids.ts';
import { ENDED_ROWS } from '../../queue/engine.ts';
import { DEFAULT_LIMITS, type TaskLimits } from '../limits/task-limits.ts';
import { presentTask } from './present.ts';
import { accountRepo } from '../accounts/repository.ts';
import type { TaskSubscribers } from './subscribers.ts';
import { readJsonObject } from '../../db/json-columns.ts';

export type TaskEventType = DB['task_events']['type'];
export type CounterKind = 'calls' | 'texts' | 'tasks';
/** Parked rows, as a literal so both engines (and a prepared statement's plan) use their partial index. */
const PARKED = sql.lit(1);

/**
 * Task events the outbox dispatcher has not turned into deliveries yet. A literal (not a
 * parameter), so both engines use the partial index on undispatched events.
 */
const UNDISPATCHED = sql<boolean>`dispatched = 0`;

/** Adds `delta` to the organization's count of tasks in `state` (creating the row on first use). */
async function bumpStateCount(db: Executor, orgId: number, state: QueueState, delta: number): Promise<void> {
  await db.insertInto('org_task_counts').values({ org_id: orgId, [state]: Math.max(delta, 0) })
    .onConflict((oc) => oc.column('org_id').doUpdateSet({ [state]: sql`org_task_counts.${sql.ref(state)} + ${delta}` }))
    .execute();
}

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
   * transaction. The rows name every column (checkTask fills each one), so they are what was
   * stored and nothing is read back (RETURNING * cost as much as a tenth of a submission).
   */
  async insert(tx: Executor, rows: readonly TaskRow[], now: number, subscribers: TaskSubscribers): Promise<void> {
    const perOrg = new Map<number, number>();
    for (let i = 0; i < rows.length; i += INSERT_BATCH) {
      const batch = rows.slice(i, i + INSERT_BATCH);
      await tx.insertInto('tasks').values(batch).execute();
      await taskRepo.writeEvents(tx, batch, 'task.pending', now, subscribers);
      for (const row of batch) perOrg.set(row.org_id, (perOrg.get(row.org_id) ?? 0) + 1);
    }
    for (const [orgId, n] of perOrg) await bumpStateCount(tx, orgId, 'pending', n);
  },

  /**
   * The outbox rows for tasks' state changes, written by whoever made the change in the same
   * transaction; the dispatcher (src/modules/webhooks/dispatcher.ts) turns them into deliveries.
   * Only for organizations with a `task` subscription (`subscribers`, cached while subscriptions
   * are unchanged: ./subscribers.ts): an event nobody subscribed to would be written, dispatched to
   * no one and marked, three times per task. A new subscription therefore receives the changes made
   * after it was saved, not earlier ones.
   */
  async writeEvents(tx: Executor, rows: readonly TaskRow[], type: TaskEventType, now: number, subscribers: TaskSubscribers): Promise<void> {
    if (rows.length === 0) return;
    const orgIds = new Set(rows.map((row) => row.org_id));
    const subscribed = await subscribers.among(tx, [...orgIds]);
    if (subscribed.size === 0) return;
    const wanted = subscribed.size === orgIds.size ? rows : rows.filter((row) => subscribed.has(row.org_id));
    await tx.insertInto('task_events').values(wanted.map((row) => ({
      id: newId('evt', now), org_id: row.org_id, task_id: row.id, type,
      payload: JSON.stringify({ type, task: presentTask(row) }), created_at: now,
    }))).execute();
  },

  /** Moves `n` of an organization's tasks from one per-state count to another. */
  async moveStateCounts(tx: Executor, orgId: number, from: QueueState, to: QueueState, n: number): Promise<void> {
    await tx.updateTable('org_task_counts')
      .set({ [from]: sql`${sql.ref(from)} - ${n}`, [to]: sql`${sql.ref(to)} + ${n}` })
      .where('org_id', '=', orgId).execute();
  },

  async find(db: Executor, orgId: number, id: string): Promise<TaskRow | undefined> {
    return db.selectFrom('tasks').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
  },

  /**
   * A task by id alone, for callers that carry no tenant (a carrier's callback, which proves
   * itself with the organization's provider credentials afterwards).
   */
  async findAnyOrg(db: Executor, id: string): Promise<TaskRow | undefined> {
    return db.selectFrom('tasks').selectAll().where('id', '=', id).executeTakeFirst();
  },

  /** A running task's result and carrier reference (locked with `lock`), or nothing when it is not running. */
  async findRunning(db: Executor, id: string, opts: { lock?: boolean } = {}): Promise<Pick<TaskRow, 'result' | 'provider_ref'> | undefined> {
    const q = db.selectFrom('tasks').select(['result', 'provider_ref']).where('id', '=', id).where('state', '=', 'running');
    return (opts.lock ? q.forUpdate() : q).executeTakeFirst();
  },

  /** Changes columns of a task while it is running (and, given `attempt`, still on that attempt). */
  /**
   * Keeps `text` as a running text task's content unless it has one already, and answers the
   * content it has: the first text written for the task is the one every attempt sends.
   */
  async keepContent(db: Executor, id: string, text: string, now: number): Promise<string | null> {
    await db.updateTable('tasks').set({ content: text, updated_at: now }).where('id', '=', id).where('content', 'is', null).execute();
    const row = await db.selectFrom('tasks').select('content').where('id', '=', id).executeTakeFirst();
    return row?.content ?? null;
  },

  async updateRunning(db: Executor, id: string, set: Partial<TaskRow>, opts: { attempt?: number } = {}): Promise<void> {
    let q = db.updateTable('tasks').set(set as never).where('id', '=', id).where('state', '=', 'running');
    if (opts.attempt !== undefined) q = q.where('attempt', '=', opts.attempt);
    await q.execute();
  },

  /**
   * Keeps who answered a running call task's call in its result (`answeredBy`, the first word
   * stands), so that the call's final status says `voicemail` when a machine answered
   * (callOutcome in src/providers/carrier.ts). Twilio's answering-machine detection
   * (twilio/task-callbacks.ts) and the audio screen of a streamed Twilio call (twilio/media-streams.ts) both
   * note it here. False when the task is not running or already had a verdict.
   */
  async noteAnsweredBy(db: Db, id: string, answeredBy: string, now: number): Promise<boolean> {
    return db.transaction().execute(async (tx) => {
      const row = await taskRepo.findRunning(tx, id, { lock: true });
      if (!row) return false;
      // A result that is not an object is replaced.
      const result = readJsonObject(row.result);
      if (typeof result.answeredBy === 'string') return false;
      await taskRepo.updateRunning(tx, id, { result: JSON.stringify({ ...result, answeredBy }), updated_at: now });
      return true;
    });
  },

  /** Marks a running task for cancellation (its worker ends it); undefined when it is no longer running. */
  async requestCancel(db: Executor, id: string, requestedAt: number, now: number): Promise<TaskRow | undefined> {
    return db.updateTable('tasks').set({ cancel_requested_at: requestedAt, updated_at: now })
      .where('id', '=', id).where('state', '=', 'running').returningAll().executeTakeFirst();
  },

  /** Changes a pending task; undefined when it is no longer pending. */
  async updatePending(db: Executor, id: string, set: Partial<TaskRow>): Promise<TaskRow | undefined> {
    return db.updateTable('tasks').set(set).where('id', '=', id).where('state', '=', 'pending').returningAll().executeTakeFirst();
  },

  /**
   * Pending first attempts of an organization that a limit had put off, every task parked for its
   * concurrency and every task a limit holds back (held_reason) are due again at `now` (never
   * before their own schedule; retries otherwise keep their backoff).
   */
  async undeferPending(db: Executor, orgId: number, now: number): Promise<void> {
    await db.updateTable('tasks')
      .set((eb) => ({ run_at: eb.fn('coalesce', [eb.ref('scheduled_for'), eb.val(now)]), parked: 0, held_reason: null }))
      .where('org_id', '=', orgId).where('state', '=', 'pending')
      .where((eb) => eb.or([eb('attempt', '=', 0), eb('parked', '=', 1), eb('held_reason', 'is not', null)]))
      .where('run_at', '>', now).where((eb) => eb.or([eb('scheduled_for', 'is', null), eb('scheduled_for', '<', eb.ref('run_at'))]))
      .execute();
  },

  /**
   * Calls and texts held back by a limit (held_reason set, not parked for a concurrency slot) are
   * due again at `now`, to be admitted or held anew under campaign rules that changed: one task's
   * (`id`) or an agent's (`accountId`). Their held_reason stays until admission decides again.
   * Answers how many were moved.
   */
  async recheckHeld(db: Executor, which: { orgId: number; id?: string; accountId?: number }, now: number): Promise<number> {
    let q = db.updateTable('tasks').set({ run_at: now })
      .where('org_id', '=', which.orgId).where('state', '=', 'pending')
      .where('held_reason', 'is not', null).where('parked', '=', 0).where('run_at', '>', now)
      .where('type', 'in', ['call', 'text']);
    if (which.id !== undefined) q = q.where('id', '=', which.id);
    if (which.accountId !== undefined) q = q.where('account_id', '=', which.accountId);
    const res = await q.executeTakeFirst();
    return Number(res.numUpdatedRows);
  },

  /**
   * The `n` longest parked tasks of an organization (parked for its concurrency: queue-hooks.ts)
   * are due again at `now`: a release freed as many slots. Through the partial index of parked rows.
   */
  async unpark(tx: Executor, orgId: number, n: number, now: number): Promise<void> {
    if (n <= 0) return;
    await tx.updateTable('tasks').set({ run_at: now, parked: 0, held_reason: null })
      .where('id', 'in', (eb) => eb.selectFrom('tasks').select('id').where('org_id', '=', orgId).where('parked', '=', PARKED)
        .orderBy('run_at').orderBy('id').limit(n))
      .where('state', '=', 'pending').execute();
  },

  /** One round trip that reads tasks: the check of the store the queue depends on, for the pings running together. */
  async probe(db: Executor, ids: readonly string[]): Promise<void> {
    await db.selectFrom('tasks').select('id').where('id', 'in', ids).execute();
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
   * Tasks that ended before `before`, oldest end first: the partial index tasks_ended (migration
   * 0021-retention-indexes) in its order.
   */
  endedBefore(db: Executor, before: number, limit: number) {
    return db.selectFrom('tasks').select(['id', 'org_id', 'state'])
      .where(ENDED_ROWS).where('finished_at', '<', before)
      .orderBy('finished_at').limit(limit);
  },

  /**
   * Deletes up to `batch` tasks that ended before `before` (ms), with their events, keeping the
   * per-state counts right. Returns how many were deleted; call again while it returns `batch`.
   */
  async pruneFinished(db: Db, before: number, batch = 1000): Promise<number> {
    return db.transaction().execute(async (tx) => {
      const rows = await taskRepo.endedBefore(tx, before, batch).execute();
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

  /**
   * Whether any task event waits for the outbox dispatcher (src/modules/webhooks/dispatcher.ts):
   * most polls find none, so it looks without a transaction first.
   */
  async hasUndispatchedEvents(db: Executor, after?: string): Promise<boolean> {
    let q = db.selectFrom('task_events').select('id').where(UNDISPATCHED);
    if (after !== undefined) q = q.where('id', '>', after);
    return (await q.limit(1).executeTakeFirst()) !== undefined;
  },

  /**
   * Up to `limit` undispatched task events, oldest first (after the id `after`, when given: the
   * dispatcher's cursor while it drains a backlog). `lock` locks them and skips those another
   * dispatcher holds (SKIP LOCKED), so dispatchers of several workers take disjoint batches
   * (no-ops on SQLite, whose one writer serialises write transactions).
   */
  async undispatchedEvents(tx: Executor, limit: number, opts: { lock?: boolean; after?: string } = {}): Promise<Pick<TaskEventRow, 'id' | 'org_id' | 'type' | 'payload' | 'created_at'>[]> {
    let q = tx.selectFrom('task_events').select(['id', 'org_id', 'type', 'payload', 'created_at'])
      .where(UNDISPATCHED).orderBy('id').limit(limit);
    if (opts.after !== undefined) q = q.where('id', '>', opts.after);
    return (opts.lock ? q.forUpdate().skipLocked() : q).execute();
  },

  /** Marks events dispatched (their deliveries, if any, were written in the same transaction). */
  async markEventsDispatched(tx: Executor, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await tx.updateTable('task_events').set({ dispatched: 1 }).where('id', 'in', ids).execute();
  },
};

/** The started_at a claim writes: the first start's time, kept across retries. */
export const firstStartedAt = (now: number) => sql<number>`coalesce(started_at, ${now})`;

/** The per-organization limits and the counters admission checks them against. */
export const limitRepo = {
  /**
   * A claim filter on tasks: tasks of agents in service (neither the agent, its organization nor
   * an ancestor suspended: suspended ones stay pending, and reactivation wakes the runners).
   * Calls and texts of an organization whose semaphore is full are not filtered here: admission
   * parks them (queue-hooks.ts), which takes them out of the due range instead of leaving every
   * claim to walk past them.
   */
  mayStart(eb: ExpressionBuilder<DB, 'tasks'>): Expression<SqlBool> {
    return accountRepo.inService(eb, 'tasks.org_id', 'tasks.account_id');
  },

  /** The limits in force for an organization (defaults where nothing was set). */
  async load(db: Executor, orgId: number): Promise<TaskLimits> {
    const row = await db.selectFrom('org_task_limits').select('config').where('org_id', '=', orgId).executeTakeFirst();
    return row ? { ...DEFAULT_LIMITS, ...(JSON.parse(row.config) as Partial<TaskLimits>) } : { ...DEFAULT_LIMITS };
  },

  /** Locks the organization's limits row (when there is one) for a read-modify-write. */
  async lock(tx: Executor, orgId: number): Promise<void> {
    await tx.selectFrom('org_task_limits').select('org_id').where('org_id', '=', orgId).forUpdate().executeTakeFirst();
  },

  async save(tx: Executor, orgId: number, limits: TaskLimits, now: number): Promise<void> {
    const config = JSON.stringify(limits);
    await tx.insertInto('org_task_limits').values({ org_id: orgId, config, updated_at: now })
      .onConflict((oc) => oc.column('org_id').doUpdateSet({ config, updated_at: now })).execute();
    await tx.insertInto('org_semaphores').values({ org_id: orgId, running: 0, max_running: limits.concurrencyPerRun })
      .onConflict((oc) => oc.column('org_id').doUpdateSet({ max_running: limits.concurrencyPerRun })).execute();
  },

  /**
   * The organization's semaphore (running tasks and the most allowed), created on first use and
   * locked until the transaction ends, with its bound brought up to `maxRunning`.
   */
  async lockSemaphore(tx: Executor, orgId: number, maxRunning: number): Promise<{ running: number }> {
    await tx.insertInto('org_semaphores').values({ org_id: orgId, running: 0, max_running: maxRunning })
      .onConflict((oc) => oc.column('org_id').doNothing()).execute();
    const sem = await tx.selectFrom('org_semaphores').select(['running', 'max_running']).where('org_id', '=', orgId)
      .forUpdate().executeTakeFirstOrThrow();
    if (sem.max_running !== maxRunning) {
      await tx.updateTable('org_semaphores').set({ max_running: maxRunning }).where('org_id', '=', orgId).execute();
    }
    return { running: Number(sem.running) };
  },

  async takeSlot(tx: Executor, orgId: number): Promise<void> {
    await tx.updateTable('org_semaphores').set({ running: sql`running + 1` }).where('org_id', '=', orgId).execute();
  },

  async releaseSlots(tx: Executor, orgId: number, slots: number): Promise<void> {
    await tx.updateTable('org_semaphores')
      .set({ running: sql`case when running > ${slots} then running - ${slots} else 0 end` })
      .where('org_id', '=', orgId).where('running', '>', 0).execute();
  },

  /** Today's counts of the named kinds for an organization's local day. */
  async countsOn(tx: Executor, orgId: number, day: string, kinds: CounterKind[]): Promise<Partial<Record<CounterKind, number>>> {
    const rows = await tx.selectFrom('org_daily_counters').select(['kind', 'n'])
      .where('org_id', '=', orgId).where('day', '=', day).where('kind', 'in', kinds).execute();
    const out: Partial<Record<CounterKind, number>> = {};
    for (const c of rows) out[c.kind as CounterKind] = Number(c.n);
    return out;
  },

  async countOne(tx: Executor, orgId: number, day: string, kind: CounterKind): Promise<void> {
    await tx.insertInto('org_daily_counters').values({ org_id: orgId, day, kind, n: 1 })
      .onConflict((oc) => oc.columns(['org_id', 'day', 'kind']).doUpdateSet({ n: sql`org_daily_counters.n + 1` })).execute();
  },

  async lastAttemptAt(tx: Executor, orgId: number, kind: 'calls' | 'texts', target: string): Promise<number | null> {
    const last = await tx.selectFrom('target_cooldowns').select('last_at')
      .where('org_id', '=', orgId).where('kind', '=', kind).where('target', '=', target).executeTakeFirst();
    return last ? Number(last.last_at) : null;
  },

  async recordAttempt(tx: Executor, orgId: number, kind: 'calls' | 'texts', target: string, at: number): Promise<void> {
    await tx.insertInto('target_cooldowns').values({ org_id: orgId, kind, target, last_at: at })
      .onConflict((oc) => oc.columns(['org_id', 'kind', 'target']).doUpdateSet({ last_at: at })).execute();
  },
};

/** A page position in records read by end time: the last row's end time and id. */
export interface EndedAfter { at: number; id: string }

export const taskRecordRepo = {
  /**
   * The organization's tasks that ended in [from, to), by end time then id, after `after`, at
   * most `limit` (the activity-record export reads a window page by page; the partial index
   * tasks_org_ended of migration 0027 serves it).
   */
  async endedBetween(db: Executor, orgId: number, from: number, to: number, after: EndedAfter | null, limit: number): Promise<TaskRow[]> {
    let q = db.selectFrom('tasks').selectAll().where('org_id', '=', orgId).where(ENDED_ROWS)
      .where('finished_at', '>=', from).where('finished_at', '<', to);
    if (after) {
      // The range on the index's column first (an OR alone had the page start from the window's beginning every time).
      q = q.where('finished_at', '>=', after.at)
        .where((eb) => eb.or([eb('finished_at', '>', after.at), eb('id', '>', after.id)]));
    }
    return q.orderBy('finished_at').orderBy('id').limit(limit).execute();
  },
};
