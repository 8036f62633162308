// The task queue: the generic engine (src/queue/) bound to the tasks table, with the hooks that
// make it a task queue. In the claim transaction: the organization's limits (semaphore, daily caps,
// business hours, cooldowns, the calling window in the recipient's time: attempts.ts) and its plan's included amounts. On every state change: the semaphore release, the per-state counts
// and the outbox event, all in the transaction of the change itself.
import type { ExpressionBuilder, Transaction } from 'kysely';
import type { DB, Executor, QueueState, TaskRow } from '../../db/types.ts';
import { ADMIT, deferUntil, QueueEngine, type Admission, type Cause } from '../../queue/engine.ts';
import { notifyQueue } from '../../queue/waker.ts';
import { accountRepo } from '../accounts/repository.ts';
import { admission, dayTimeZone, localDay } from '../limits/task-limits.ts';
import { firstStartedAt, limitRepo, taskRepo, type TaskEventType } from './repository.ts';
import type { TaskSubscribers } from './subscribers.ts';
import { taskWindow } from './attempts.ts';
import { SIMULATED } from '../../providers/simulated.ts';

export const TASKS = 'tasks';
/** A claim holds a task this long without a heartbeat; the runner beats every third of it. */
export const TASK_LEASE_MS = 30_000;

const PLURAL = { call: 'calls', text: 'texts' } as const;

/** What tasks that ended used, by metric (docs/billing.md, "Usage"). */
export type TaskUsage = Partial<Record<'tasks' | 'calls' | 'texts' | 'callSeconds' | 'callMinutes' | 'simulatedTexts' | 'simulatedCallMinutes', number>>;

/**
 * What an organization's plan lets its calls and texts use, asked in the claim's transaction
 * (docs/billing.md, "Included amounts"), and where what ended tasks used is added up, in the
 * transaction of their end: the billing module's (planAllowance, src/modules/billing/entitlements.ts),
 * handed in because billing sits above tasks (docs/architecture.md, "The order of modules").
 */
export interface PlanAllowance {
  /** Why a call or text must wait for an included amount (until: null, parked until a running task ends), or null: it may start. */
  hold(tx: Executor, orgId: number, kind: 'call' | 'text', running: number, at: number): Promise<{ until: number | null; reason: string } | null>;
  addUsage(tx: Executor, orgId: number, at: number, used: TaskUsage): Promise<void>;
}

/** What admission reads of a due task: the claim selects only these (QueueHooks.candidateColumns). */
const CANDIDATE_COLUMNS = ['org_id', 'account_id', 'type', 'target', 'campaign'] as const;
type TaskCandidate = Pick<TaskRow, 'id' | 'run_at' | (typeof CANDIDATE_COLUMNS)[number]>;

/**
 * How far ahead a task waiting for a concurrency slot is parked. Every release (a task leaving
 * running: finished, canceled, rescued) brings parked tasks back at once, as many as it frees, and
 * raising concurrencyPerRun brings them all back; this only bounds the wait if a slot were freed
 * outside callplane.
 */
export const PARK_MS = 60_000;

/** Organizations a claim transaction found at their concurrency (and why): their slots cannot free before it ends. */
const full = new WeakMap<Transaction<DB>, Map<number, string>>();

/** Out of the due range until a slot frees: every claim would otherwise walk past it. */
const park = (now: number, reason: string) => deferUntil(now + PARK_MS, { parked: 1, held_reason: reason });

/**
 * Admission of one due call or text, inside the claim transaction. The organization's semaphore
 * row is locked first, so every check below sees the counts as they are and no other claim (on
 * any process) can change them before this transaction commits.
 */
async function admit(tx: Transaction<DB>, row: TaskCandidate, now: number, allowance: PlanAllowance): Promise<Admission> {
  // Tasks of a suspended agent, organization or ancestor never get here: the claim filter
  // (limitRepo.mayStart) leaves them out of the claim's own SELECT until reactivation wakes the runners.
  if (row.type === 'ping') return ADMIT;
  const fullReason = full.get(tx)?.get(row.org_id);
  if (fullReason) return park(now, fullReason);
  const kind = row.type;
  const limits = await limitRepo.load(tx, row.org_id);
  const sem = await limitRepo.lockSemaphore(tx, row.org_id, limits.concurrencyPerRun);
  const dayTz = dayTimeZone(await accountRepo.timezoneOf(tx, row.org_id), limits);
  const day = localDay(now, dayTz);
  const plural = PLURAL[kind];
  const today = await limitRepo.countsOn(tx, row.org_id, day, [plural, 'tasks']);
  const lastAttemptAt = limits.cooldowns[plural] && row.target
    ? await limitRepo.lastAttemptAt(tx, row.org_id, plural, row.target) : null;
  // The calling window in the recipient's time (docs/campaigns.md): the task's, its agent's or the organization's.
  const window = await taskWindow(tx, row, limits, dayTz, now);
  const verdict = admission(kind, now, limits, { today, dayTimezone: dayTz, running: sem.running, lastAttemptAt }, window);
  if (!verdict.admit) {
    if (verdict.code !== 'concurrency') return deferUntil(verdict.until, { held_reason: verdict.reason });
    // Only the semaphore stands in the way (any other limit ends sooner): parked, and the release
    // of a slot (onTransitions) brings back as many as it frees and notifies the runners, so the
    // task starts as soon as a slot frees. The rest of this claim's rows of the organization are
    // parked without asking again: the semaphore is locked by this transaction.
    let orgs = full.get(tx);
    if (!orgs) full.set(tx, (orgs = new Map<number, string>()));
    orgs.set(row.org_id, verdict.reason);
    return park(now, verdict.reason);
  }
  // What the plan includes (docs/billing.md, "Included amounts"): read under the semaphore's lock,
  // so two claims never both take the last of an amount. Past it: until the period ends; reached
  // only with tasks running: parked, as for concurrency, until one of them ends.
  const hold = await allowance.hold(tx, row.org_id, kind, sem.running, now);
  if (hold) return hold.until === null ? park(now, hold.reason) : deferUntil(hold.until, { held_reason: hold.reason });

  await limitRepo.takeSlot(tx, row.org_id);
  for (const k of [plural, 'tasks'] as const) await limitRepo.countOne(tx, row.org_id, day, k);
  // Recorded whether or not a cooldown is set now, so one set later applies to recent attempts.
  if (row.target) await limitRepo.recordAttempt(tx, row.org_id, plural, row.target, now);
  return ADMIT;
}

const EVENT_FOR: Record<QueueState, TaskEventType> = {
  pending: 'task.retrying', running: 'task.running', finished: 'task.finished', failed: 'task.failed', canceled: 'task.canceled',
};

async function onTransition(tx: Transaction<DB>, row: TaskRow, from: QueueState, to: QueueState, now: number, subscribers: TaskSubscribers, allowance: PlanAllowance): Promise<void> {
  await onTransitions(tx, [row], from, to, now, subscribers, allowance);
}

/**
 * The task hooks for rows making the same change in one transaction (a claim's batch, or one
 * row): semaphore slots given back, the outbox events, and the per-state counts. The counts row
 * of an organization is written by every transition of its tasks, so it is updated last (its lock
 * is then held only until the commit), once per organization, in organization order (as the
 * semaphores are locked by admission, so two transactions never wait on each other in a cycle).
 */
async function onTransitions(tx: Transaction<DB>, rows: TaskRow[], from: QueueState, to: QueueState, now: number, subscribers: TaskSubscribers, allowance: PlanAllowance): Promise<void> {
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
    await limitRepo.releaseSlots(tx, orgId, slots);
    await taskRepo.unpark(tx, orgId, slots, now);
    released = true;
  }
  // A slot is free: runners in other processes need not wait for their next poll.
  if (released) await notifyQueue(tx, TASKS);
  await taskRepo.writeEvents(tx, rows, EVENT_FOR[to], now, subscribers);
  if (from === 'running' && to !== 'pending' && to !== 'running') await countUsage(tx, rows, to, now, allowance);
  for (const orgId of orgs) await taskRepo.moveStateCounts(tx, orgId, from, to, perOrg.get(orgId)!.n);
}

/**
 * What tasks that ran and ended used, added to usage_daily in the transaction of their end
 * (docs/billing.md, "Usage"): every call or text that ran is a task; a finished text is a text; a
 * finished call is a call; a call's seconds (from its outcome's durationSeconds, whatever its end)
 * count as seconds and as minutes, each call rounded up to the whole minute. Pings are not counted.
 */
async function countUsage(tx: Transaction<DB>, rows: TaskRow[], to: QueueState, now: number, allowance: PlanAllowance): Promise<void> {
  const perOrg = new Map<number, TaskUsage>();
  for (const row of rows) {
    if (row.type === 'ping') continue;
    const u = perOrg.get(row.org_id) ?? {};
    const add = (m: keyof TaskUsage, n: number) => { u[m] = (u[m] ?? 0) + n; };
    add('tasks', 1);
    // On the SIMULATED carrier nothing was carried: labelled as such (shown apart, of the totals).
    const simulated = row.provider === SIMULATED;
    if (row.type === 'text' && to === 'finished') { add('texts', 1); if (simulated) add('simulatedTexts', 1); }
    if (row.type === 'call') {
      if (to === 'finished') add('calls', 1);
      const seconds = callSeconds(row.result);
      if (seconds > 0) {
        add('callSeconds', seconds); add('callMinutes', Math.ceil(seconds / 60));
        if (simulated) add('simulatedCallMinutes', Math.ceil(seconds / 60));
      }
    }
    perOrg.set(row.org_id, u);
  }
  for (const orgId of [...perOrg.keys()].sort((a, b) => a - b)) await allowance.addUsage(tx, orgId, now, perOrg.get(orgId)!);
}

/** A call's whole seconds from its outcome (durationSeconds), 0 when it has none. */
function callSeconds(result: string | null): number {
  if (!result) return 0;
  try {
    const d = (JSON.parse(result) as { durationSeconds?: unknown }).durationSeconds;
    return typeof d === 'number' && Number.isFinite(d) && d > 0 ? Math.ceil(d) : 0;
  } catch { return 0; }
}

function stamp({ to, now, cause }: { from: QueueState; to: QueueState; now: number; cause: Cause }) {
  // A task leaves the parked set with any change of state (a claim, a cancel, a rescue).
  const set: Record<string, unknown> = { updated_at: now, parked: 0, held_reason: null };
  if (to === 'running') set.started_at = firstStartedAt(now);
  if (to === 'finished' || to === 'failed' || to === 'canceled') set.finished_at = now;
  if (cause === 'rescue') set.error = 'worker lost its lease (crashed or stalled); task returned to the queue';
  return set;
}

export interface TaskEngineOptions {
  workerId: string;
  /** Who gets the outbox events of the transitions (./subscribers.ts). */
  subscribers: TaskSubscribers;
  leaseMs?: number;
  now?: () => number;
  /** QueueOptions.serialWrites: the database runs write transactions one at a time. */
  serialWrites?: boolean;
  /** What organizations' plans let them use, and where usage is added up (billing's planAllowance). */
  allowance: PlanAllowance;
}

/** The queue engine over the tasks table with the task hooks. */
export function createTaskEngine(opts: TaskEngineOptions): QueueEngine<'tasks'> {
  const now = opts.now ?? Date.now;
  return new QueueEngine({
    table: 'tasks',
    workerId: opts.workerId,
    leaseMs: opts.leaseMs ?? TASK_LEASE_MS,
    now,
    serialWrites: opts.serialWrites,
    // Candidates carry CANDIDATE_COLUMNS (and id, run_at), which is what TaskCandidate names.
    candidateColumns: CANDIDATE_COLUMNS,
    admit: (tx, row, at) => admit(tx, row as TaskCandidate, at, opts.allowance),
    // Semaphore locks are taken in organization order, so two claims never wait on each other in a cycle.
    admitOrder: (a, b) => (a as TaskCandidate).org_id - (b as TaskCandidate).org_id || (a.run_at - b.run_at) || (a.id < b.id ? -1 : 1),
    claimFilter: (eb) => limitRepo.mayStart(eb as ExpressionBuilder<DB, 'tasks'>),
    onTransition: (tx, row, from, to) => onTransition(tx, row, from, to, now(), opts.subscribers, opts.allowance),
    onTransitions: (tx, rows, from, to) => onTransitions(tx, rows, from, to, now(), opts.subscribers, opts.allowance),
    stamp,
  });
}
