// The task queue: the generic engine (src/queue/) bound to the tasks table, with the hooks that
// make it a task queue. In the claim transaction: the organization's limits (semaphore, daily caps,
// business hours, cooldowns). On every state change: the semaphore release, the per-state counts
// and the outbox event, all in the transaction of the change itself.
import { sql, type Transaction } from 'kysely';
import type { DB, Dialect, Executor, QueueState, TaskRow } from '../../db/types.ts';
import { newId } from '../../lib/ids.ts';
import { ADMIT, deferUntil, NOT_NOW, QueueEngine, type Admission, type Cause } from '../../queue/engine.ts';
import { notifyQueue } from '../../queue/waker.ts';
import { admission, dayTimeZone, DEFAULT_LIMITS, localDay, type TaskLimits } from './limits.ts';
import { presentTask } from './present.ts';

export const TASKS = 'tasks';
/** A claim holds a task this long without a heartbeat; the runner beats every third of it. */
export const TASK_LEASE_MS = 30_000;

const PLURAL = { call: 'calls', text: 'texts' } as const;

/** The limits in force for an organization (defaults where nothing was set). */
export async function loadLimits(db: Executor, orgId: number): Promise<TaskLimits> {
  const row = await db.selectFrom('org_task_limits').select('config').where('org_id', '=', orgId).executeTakeFirst();
  return row ? { ...DEFAULT_LIMITS, ...(JSON.parse(row.config) as Partial<TaskLimits>) } : { ...DEFAULT_LIMITS };
}

/** Adds `delta` to the organization's count of tasks in `state` (creating the row on first use). */
export async function bumpStateCount(db: Executor, orgId: number, state: QueueState, delta: number): Promise<void> {
  await db.insertInto('org_task_counts').values({ org_id: orgId, [state]: Math.max(delta, 0) })
    .onConflict((oc) => oc.column('org_id').doUpdateSet({ [state]: sql`org_task_counts.${sql.ref(state)} + ${delta}` }))
    .execute();
}

/** The outbox row for a task's state change, written by whoever made the change. */
export async function writeTaskEvent(db: Executor, row: TaskRow, type: DB['task_events']['type'], now: number): Promise<void> {
  await db.insertInto('task_events').values({
    id: newId('evt', now), org_id: row.org_id, task_id: row.id, type,
    payload: JSON.stringify({ type, task: presentTask(row) }), created_at: now,
  }).execute();
}

/**
 * Admission of one due call or text, inside the claim transaction. The organization's semaphore
 * row is locked first, so every check below sees the counts as they are and no other claim (on
 * any process) can change them before this transaction commits.
 */
async function admit(tx: Transaction<DB>, dialect: Dialect, row: TaskRow, now: number): Promise<Admission> {
  if (row.type === 'ping') return ADMIT;
  const kind = row.type;
  const limits = await loadLimits(tx, row.org_id);
  await tx.insertInto('org_semaphores').values({ org_id: row.org_id, running: 0, max_running: limits.concurrencyPerRun })
    .onConflict((oc) => oc.column('org_id').doNothing()).execute();
  let semQuery = tx.selectFrom('org_semaphores').select(['running', 'max_running']).where('org_id', '=', row.org_id);
  if (dialect === 'postgres') semQuery = semQuery.forUpdate();
  const sem = await semQuery.executeTakeFirstOrThrow();
  if (sem.max_running !== limits.concurrencyPerRun) {
    await tx.updateTable('org_semaphores').set({ max_running: limits.concurrencyPerRun }).where('org_id', '=', row.org_id).execute();
  }
  const org = await tx.selectFrom('accounts').select('timezone').where('id', '=', row.org_id).executeTakeFirst();
  const dayTz = dayTimeZone(org?.timezone, limits);
  const day = localDay(now, dayTz);
  const plural = PLURAL[kind];
  const counters = await tx.selectFrom('org_daily_counters').select(['kind', 'n'])
    .where('org_id', '=', row.org_id).where('day', '=', day).where('kind', 'in', [plural, 'tasks']).execute();
  const today: Partial<Record<'calls' | 'texts' | 'tasks', number>> = {};
  for (const c of counters) today[c.kind as 'calls' | 'texts' | 'tasks'] = Number(c.n);
  let lastAttemptAt: number | null = null;
  if (limits.cooldowns[plural] && row.target) {
    const last = await tx.selectFrom('target_cooldowns').select('last_at')
      .where('org_id', '=', row.org_id).where('kind', '=', plural).where('target', '=', row.target).executeTakeFirst();
    lastAttemptAt = last ? Number(last.last_at) : null;
  }
  const verdict = admission(kind, now, limits, { today, dayTimezone: dayTz, running: Number(sem.running), lastAttemptAt });
  if (!verdict.admit) {
    // Only the semaphore stands in the way (any other limit ends sooner): leave the task due. The
    // claim filter skips the organization while its semaphore is full, and the release notifies
    // the runners, so the task starts as soon as a slot frees instead of after a fixed recheck.
    return verdict.code === 'concurrency' ? NOT_NOW : deferUntil(verdict.until);
  }

  await tx.updateTable('org_semaphores').set({ running: sql`running + 1` }).where('org_id', '=', row.org_id).execute();
  for (const k of [plural, 'tasks']) {
    await tx.insertInto('org_daily_counters').values({ org_id: row.org_id, day, kind: k, n: 1 })
      .onConflict((oc) => oc.columns(['org_id', 'day', 'kind']).doUpdateSet({ n: sql`org_daily_counters.n + 1` })).execute();
  }
  if (row.target) {
    // Recorded whether or not a cooldown is set now, so one set later applies to recent attempts.
    await tx.insertInto('target_cooldowns').values({ org_id: row.org_id, kind: plural, target: row.target, last_at: now })
      .onConflict((oc) => oc.columns(['org_id', 'kind', 'target']).doUpdateSet({ last_at: now })).execute();
  }
  return ADMIT;
}

const EVENT_FOR: Record<QueueState, DB['task_events']['type']> = {
  pending: 'task.retrying', running: 'task.running', finished: 'task.finished', failed: 'task.failed', canceled: 'task.canceled',
};

async function onTransition(tx: Transaction<DB>, dialect: Dialect, row: TaskRow, from: QueueState, to: QueueState, now: number): Promise<void> {
  await onTransitions(tx, dialect, [row], from, to, now);
}

/**
 * The task hooks for rows making the same change in one transaction (a claim's batch, or one
 * row): semaphore slots given back, the outbox events, and the per-state counts. The counts row
 * of an organization is written by every transition of its tasks, so it is updated last (its lock
 * is then held only until the commit), once per organization, in organization order (as the
 * semaphores are locked by admission, so two transactions never wait on each other in a cycle).
 */
async function onTransitions(tx: Transaction<DB>, dialect: Dialect, rows: TaskRow[], from: QueueState, to: QueueState, now: number): Promise<void> {
  const perOrg = new Map<number, { n: number; slots: number }>();
  for (const row of rows) {
    const o = perOrg.get(row.org_id) ?? { n: 0, slots: 0 };
    o.n++;
    if (from === 'running' && row.type !== 'ping') o.slots++;
    perOrg.set(row.org_id, o);
  }
  const orgs = [...perOrg.keys()].sort((a, b) => a - b);
  let released = false;
  for (const orgId of orgs) {
    const { slots } = perOrg.get(orgId)!;
    if (slots === 0) continue;
    await tx.updateTable('org_semaphores')
      .set({ running: sql`case when running > ${slots} then running - ${slots} else 0 end` })
      .where('org_id', '=', orgId).where('running', '>', 0).execute();
    released = true;
  }
  // A slot is free: runners in other processes need not wait for their next poll.
  if (released) await notifyQueue(tx, dialect, TASKS);
  const type = EVENT_FOR[to];
  await tx.insertInto('task_events').values(rows.map((row) => ({
    id: newId('evt', now), org_id: row.org_id, task_id: row.id, type,
    payload: JSON.stringify({ type, task: presentTask(row) }), created_at: now,
  }))).execute();
  for (const orgId of orgs) {
    const { n } = perOrg.get(orgId)!;
    await tx.updateTable('org_task_counts')
      .set({ [from]: sql`${sql.ref(from)} - ${n}`, [to]: sql`${sql.ref(to)} + ${n}` })
      .where('org_id', '=', orgId).execute();
  }
}

function stamp({ to, now, cause }: { from: QueueState; to: QueueState; now: number; cause: Cause }) {
  const set: Record<string, unknown> = { updated_at: now };
  if (to === 'running') set.started_at = sql`coalesce(started_at, ${now})`;
  if (to === 'finished' || to === 'failed' || to === 'canceled') set.finished_at = now;
  if (cause === 'rescue') set.error = 'worker lost its lease (crashed or stalled); task returned to the queue';
  return set;
}

export interface TaskEngineOptions {
  dialect: Dialect;
  workerId: string;
  leaseMs?: number;
  now?(): number;
}

/** The queue engine over the tasks table with the task hooks. */
export function createTaskEngine(opts: TaskEngineOptions): QueueEngine<'tasks'> {
  const { dialect } = opts;
  const now = opts.now ?? Date.now;
  return new QueueEngine({
    table: 'tasks',
    dialect,
    workerId: opts.workerId,
    leaseMs: opts.leaseMs ?? TASK_LEASE_MS,
    now,
    admit: (tx, row, at) => admit(tx, dialect, row, at),
    // Semaphore locks are taken in organization order, so two claims never wait on each other in a cycle.
    admitOrder: (a, b) => a.org_id - b.org_id || (a.run_at - b.run_at) || (a.id < b.id ? -1 : 1),
    claimFilter: (eb) => eb.or([
      eb('type', '=', 'ping'),
      eb.not(eb.exists(eb.selectFrom('org_semaphores as s').select(eb.lit(1).as('one'))
        .whereRef('s.org_id', '=', 'tasks.org_id').whereRef('s.running', '>=', 's.max_running'))),
    ]),
    onTransition: (tx, row, from, to) => onTransition(tx, dialect, row, from, to, now()),
    onTransitions: (tx, rows, from, to) => onTransitions(tx, dialect, rows, from, to, now()),
    stamp,
  });
}
