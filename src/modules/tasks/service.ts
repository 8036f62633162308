// Task operations: submit (one, many, idempotent), read, update, cancel, delete, statistics,
// daily counts and limits. The organization a request acts on is the caller's own (an agent acts
// on its organization, restricted to its own tasks), or, for a reseller or partner, the
// organization or agent named by targetAccountId.
import crypto from 'node:crypto';
import type { AccountRow, Db, QueueState, TaskRow, TaskType } from '../../db/types.ts';
import { QUEUE_STATES } from '../../db/types.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { Scope } from '../../http/auth.ts';
import { Conflict, Forbidden, HttpError, Invalid, NotFound } from '../../http/errors.ts';
import { GroupCommit } from '../../db/group-commit.ts';
import { StampedCache } from '../../db/stamped-cache.ts';
import { username } from '../accounts/present.ts';
import { accountRepo } from '../accounts/repository.ts';
import { checkTask, isUsernameTarget, type ItemContext, type RawTask } from './validation.ts';
import { dayTimeZone, localDay, mergeLimits, RESTRICTED_LIMIT_FIELDS, validateLimits } from '../limits/task-limits.ts';
import { presentLimits, presentTask } from './present.ts';
import { limitRepo, taskRepo } from './repository.ts';
import type { TaskQueue } from './task-queue.ts';
import { normalizeScheduledFor, normalizeSpacing } from './schedule.ts';
import { doNotCallRefusals } from './do-not-call.ts';
import { storedCampaign } from './attempts.ts';
import type { HeldTasks } from '../agents/service.ts';

/** How long an Idempotency-Key holds its first answer. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 3600_000;
export const MAX_IDEMPOTENCY_KEY = 255;
/** Items one agent queueing request may carry (larger batches: POST /tasks/csv). */
export const MAX_BATCH = 1000;
/** Tasks added by one commit from which the planner's statistics are refreshed (see added()). */
export const BULK_ROWS = 1000;

export interface TaskServiceDeps {
  db: Db;
  /** Database.refreshStatistics: run after a bulk insert (BULK_ROWS or more), so claims keep a good plan. */
  refreshStatistics?: (tables: readonly string[]) => Promise<void>;
  log?: { warn(obj: object, msg: string): void };
  /** The process's task queue: transitions (cancel) and wakeups of its runner. */
  queue: TaskQueue;
}

/** The organization a request acts on and, for an agent's token, the agent it is limited to. */
export interface TaskTenant {
  org: AccountRow;
  agent?: AccountRow;
}

const SORT = { createdAt: 'created_at', updatedAt: 'updated_at', scheduledFor: 'scheduled_for' } as const;

export interface ListQuery {
  targetAccountId?: number;
  limit?: number;
  offset?: number;
  since?: number;
  until?: number;
  sort?: string;
  order?: string;
  state?: string;
  type?: string;
  accountId?: number;
}

export interface UpdateBody {
  state?: unknown;
  context?: unknown;
  taskContext?: unknown;
  greeting?: unknown;
  content?: unknown;
  waitToGreet?: unknown;
  scheduledFor?: unknown;
  /** A call's own voicemail choice `{action, message}`; null goes back to the agent's (docs/tasks.md). */
  voicemail?: unknown;
  /** The task's own calling window; null: none (extension; docs/campaigns.md). */
  callingWindow?: unknown;
  /** A call's own retry rules; null: none, the organization's retries (extension; docs/campaigns.md). */
  retryRules?: unknown;
}

export interface BatchBody extends RawTask {
  targets?: unknown;
  agentId?: unknown;
  scheduleSpacingSec?: unknown;
}

const UPDATABLE = ['context', 'taskContext', 'greeting', 'content', 'waitToGreet', 'voicemail', 'scheduledFor', 'callingWindow', 'retryRules'] as const;
const FINAL: readonly QueueState[] = ['finished', 'failed', 'canceled'];

/** A YYYY-MM-DD string naming a day that exists (2026-02-30 does not). */
function isCalendarDay(date: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(date);
  if (!m) return false;
  const d = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return d.getUTCFullYear() === Number(m[1]) && d.getUTCMonth() === Number(m[2]) - 1 && d.getUTCDate() === Number(m[3]);
}

/** A stable fingerprint of a request body: keys sorted at every level. */
export function requestHash(body: unknown): string {
  const canon = (v: unknown): unknown => Array.isArray(v) ? v.map(canon)
    : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canon((v as Record<string, unknown>)[k])])) : v;
  return crypto.createHash('sha256').update(JSON.stringify(canon(body ?? null))).digest('hex');
}

export function taskService(deps: TaskServiceDeps) {
  const { db, queue } = deps;

  async function tenant(scope: Scope, targetAccountId: number | undefined): Promise<TaskTenant> {
    const account = await scope.target(targetAccountId, ['organization', 'agent']);
    if (account.kind === 'organization') return { org: account };
    const org = await accountRepo.findById(db, account.org_id!);
    if (!org) throw new NotFound(`organization of account ${account.id} was not found`);
    return { org, agent: account };
  }

  /** Each organization's default agent, kept while accounts are unchanged (src/db/stamped-cache.ts). */
  const defaultAgents = StampedCache.for<number, number | null>(db, ['accounts']);
  async function defaultAgentId(orgId: number): Promise<number | null> {
    const stamp = defaultAgents?.stamp();
    if (defaultAgents?.has(orgId, stamp!)) return defaultAgents.get(orgId, stamp!) ?? null;
    const id = await accountRepo.firstAgentId(db, orgId);
    defaultAgents?.set(orgId, id, stamp!);
    return id;
  }

  /** What checkTask needs to know about the organization, for the accounts a batch names. */
  async function itemContext(t: TaskTenant, items: RawTask[], now: number): Promise<Omit<ItemContext, 'field' | 'index' | 'spacingSec'>> {
    const defaultAccountId = t.agent?.id ?? (await defaultAgentId(t.org.id));
    if (defaultAccountId === null) throw new Invalid(`organization ${t.org.id} has no agent account to run tasks; create one first`);
    const named = new Set<number>();
    for (const item of items) {
      const id = typeof item.accountId === 'number' ? item.accountId : typeof item.accountId === 'string' ? Number(item.accountId) : NaN;
      if (Number.isSafeInteger(id) && id > 0 && id <= 2_147_483_647) named.add(id);
    }
    let agents = new Set<number>();
    if (t.agent) agents = new Set([t.agent.id]);
    else if (named.size > 0) agents = await accountRepo.agentIdsIn(db, t.org.id, [...named]);
    const usernames = await agentUsernames(t, items);
    return {
      orgId: t.org.id, defaultAccountId, allowedAccount: (id) => agents.has(id), now,
      agentByUsername: (name) => usernames.get(name.toLowerCase()),
    };
  }

  /**
   * The agents that username targets of these items name (lowercased username → agent), among
   * those the caller may name: an agent's token names only itself.
   */
  async function agentUsernames(t: TaskTenant, items: RawTask[]): Promise<Map<string, { id: number; username: string }>> {
    const names = new Set(items.map((i) => i.target).filter(isUsernameTarget).map((n) => n.trim().toLowerCase()));
    const found = new Map<string, { id: number; username: string }>();
    if (names.size === 0) return found;
    const ids = [...names].map((n) => /^account-(\d{1,10})$/.exec(n)?.[1]).filter((id) => id !== undefined).map(Number)
      .filter((id) => id <= 2_147_483_647);
    const rows = await accountRepo.agentsByEmailOrId(db, t.org.id, [...names].filter((n) => n.includes('@')), ids);
    for (const row of rows) {
      if (t.agent && row.id !== t.agent.id) continue;
      const name = username(row);
      if (names.has(name.toLowerCase())) found.set(name.toLowerCase(), { id: row.id, username: name });
    }
    return found;
  }

  /**
   * After a commit that added many tasks, the planner's statistics are refreshed in the background
   * (one refresh at a time; another bulk insert meanwhile asks for one more after it).
   */
  let refreshing: Promise<void> | undefined;
  let refreshAgain = false;
  function added(n: number): void {
    if (n < BULK_ROWS || !deps.refreshStatistics) return;
    if (refreshing) { refreshAgain = true; return; }
    refreshing = deps.refreshStatistics(['tasks', 'task_events'])
      .catch((err: unknown) => deps.log?.warn({ err }, 'refreshing the planner statistics of tasks failed'))
      .finally(() => {
        refreshing = undefined;
        if (refreshAgain) { refreshAgain = false; added(BULK_ROWS); }
      });
  }

  /** Inserts checked rows in one transaction and wakes the runners. */
  async function insert(rows: TaskRow[], now: number): Promise<TaskRow[]> {
    if (rows.length === 0) return [];
    await queue.enqueue(db, async (tx) => {
      await taskRepo.insert(tx, rows, now, queue.subscribers);
      return true;
    });
    added(rows.length);
    return rows;
  }

  /**
   * Submissions through the API (one request's rows each) share their transaction with the
   * others in flight (src/db/group-commit.ts): all of a request's rows or none, as before, but
   * one commit, one statement per table and one wakeup for the whole group. One group at a time
   * on either engine: on PostgreSQL concurrent groups only queued on the organization's counts row
   * (locked until commit), and one at a time makes each group carry every request that arrived
   * meanwhile (POST ping CPU per request 220 → 145 µs, docs/performance.md).
   */
  let groupRows = 0; // of the group being written (one at a time)
  const submissions = new GroupCommit<TaskRow[], TaskRow[]>({
    db,
    concurrency: 1,
    size: (rows) => rows.length,
    write: async (tx, jobs) => {
      const rows = jobs.flat();
      await taskRepo.insert(tx, rows, Date.now(), queue.subscribers);
      groupRows = rows.length;
      await queue.announce(tx);
      return jobs;
    },
    committed: () => {
      queue.notify();
      added(groupRows);
    },
  });
  const submit = (rows: TaskRow[]): Promise<TaskRow[]> => rows.length === 0 ? Promise.resolve([]) : submissions.submit(rows);

  async function find(t: TaskTenant, id: string): Promise<TaskRow> {
    const row = id.length <= 64 ? await taskRepo.find(db, t.org.id, id) : undefined;
    if (!row || (t.agent && row.account_id !== t.agent.id)) throw new NotFound(`Task ${id} was not found`);
    return row;
  }

  async function cancel(row: TaskRow): Promise<{ row: TaskRow; message: string }> {
    const now = Date.now();
    if (row.state === 'pending') {
      const moved = await queue.engine.transition(db, row.id, ['pending'], 'canceled', { error: null });
      if (moved) return { row: moved, message: 'Task canceled.' };
      row = (await taskRepo.find(db, row.org_id, row.id)) ?? row; // claimed meanwhile
    }
    if (row.state === 'running') {
      const updated = await taskRepo.requestCancel(db, row.id, row.cancel_requested_at ?? now, now);
      if (updated) {
        queue.cancel(row.id);
        return { row: updated, message: 'Cancel requested: the running task is being ended; it becomes canceled when the carrier confirms.' };
      }
      row = (await taskRepo.find(db, row.org_id, row.id)) ?? row;
    }
    if (row.state === 'canceled') return { row, message: 'Task was already canceled.' };
    throw new Conflict(`Task ${row.id} is already ${row.state} and cannot be canceled`);
  }

  async function idempotent(t: TaskTenant, key: string, hash: string, make: () => Promise<TaskRow>): Promise<{ row: TaskRow; replayed: boolean }> {
    const now = Date.now();
    for (let tries = 0; tries < 2; tries++) {
      const existing = await taskRepo.findByIdempotencyKey(db, t.org.id, key);
      if (existing && existing.created_at > now - IDEMPOTENCY_WINDOW_MS) {
        // An agent's token sees only its own tasks: another agent's task under the organization's
        // key is neither replayed nor named.
        const visible = !t.agent || existing.account_id === t.agent.id;
        if (!visible || existing.request_hash !== hash) {
          throw new HttpError(422, `Idempotency-Key '${key}' was already used within 24 hours with a different request` +
            `${visible ? ` body (task ${existing.id})` : ''}; send a new key for a new task`);
        }
        return { row: existing, replayed: true };
      }
      if (existing) await taskRepo.releaseIdempotencyKey(db, existing.id);
      try {
        return { row: await make(), replayed: false };
      } catch (err) {
        if (!isUniqueViolation(err)) throw err; // a concurrent request with the same key won: answer as it did
      }
    }
    throw new Conflict(`Idempotency-Key '${key}' is being used by a concurrent request; retry`);
  }

  return {
    tenant,

    /**
     * A task an agent queues itself during a conversation (its send_text and queue_follow_up
     * tools): no caller's token, so it acts for the agent's own organization, checked like any task.
     */
    async createForAgent(orgId: number, agentAccountId: number, body: RawTask, idempotencyKey?: string) {
      const org = await accountRepo.findById(db, orgId);
      const agent = await accountRepo.findById(db, agentAccountId);
      if (!org || !agent || agent.org_id !== org.id) throw new NotFound(`agent account ${agentAccountId} was not found in organization ${orgId}`);
      // The key names one tool call of one turn (turn.ts): a retried turn finds the task its first
      // attempt made, whatever the clock says now (a follow-up's time moves with it), so no hash check.
      const existing = idempotencyKey ? await taskRepo.findByIdempotencyKey(db, org.id, idempotencyKey) : undefined;
      if (existing) return presentTask(existing);
      const checked = checkTask(body, await itemContext({ org, agent }, [body], Date.now()));
      if (!checked.ok) throw new Invalid(checked.message);
      const listed = (await doNotCallRefusals(db, org, [checked.task])).get(0);
      if (listed) throw new HttpError(422, listed, { number: checked.task.target });
      if (idempotencyKey) {
        checked.task.idempotency_key = idempotencyKey;
        checked.task.request_hash = requestHash(body);
      }
      try {
        const [row] = await submit([checked.task]);
        return presentTask(row!);
      } catch (err) {
        const raced = idempotencyKey && isUniqueViolation(err) ? await taskRepo.findByIdempotencyKey(db, org.id, idempotencyKey) : undefined;
        if (raced) return presentTask(raced);
        throw err;
      }
    },

    async create(scope: Scope, targetAccountId: number | undefined, body: RawTask, idempotencyKey: string | undefined) {
      const t = await tenant(scope, targetAccountId);
      const now = Date.now();
      if (idempotencyKey !== undefined && (idempotencyKey === '' || idempotencyKey.length > MAX_IDEMPOTENCY_KEY)) {
        throw new Invalid(`Idempotency-Key header must be 1 to ${MAX_IDEMPOTENCY_KEY} characters`);
      }
      const checked = checkTask(body, await itemContext(t, [body], now));
      if (!checked.ok) throw new Invalid(checked.message);
      const task = checked.task;
      const listed = (await doNotCallRefusals(db, t.org, [task])).get(0);
      if (listed) throw new HttpError(422, listed, { number: task.target });
      const make = async () => (await submit([task]))[0];
      let row: TaskRow;
      let replayed = false;
      if (idempotencyKey) {
        task.idempotency_key = idempotencyKey;
        task.request_hash = requestHash(body);
        ({ row, replayed } = await idempotent(t, idempotencyKey, task.request_hash, make));
      } else {
        row = await make();
      }
      return {
        replayed,
        body: {
          success: true,
          message: replayed ? 'Task already created with this Idempotency-Key.' : 'Task created successfully.',
          task: presentTask(row),
          ...(checked.notes.length && !replayed ? { warnings: checked.notes } : {}),
        },
      };
    },

    /** The agent queueing operations: one `target` or many `targets`, all accepted or none. */
    async queueBatch(scope: Scope, targetAccountId: number | undefined, body: BatchBody, type: 'call' | 'text') {
      const t = await tenant(scope, targetAccountId);
      const now = Date.now();
      const { targets, agentId, scheduleSpacingSec, ...common } = body;
      const shared: RawTask = { ...common, accountId: common.accountId ?? agentId };
      let raws: { raw: RawTask; field: string }[];
      if (targets === undefined || targets === null) {
        if (body.target === undefined || body.target === null) throw new Invalid('target or targets is required');
        raws = [{ raw: shared, field: '' }];
      } else {
        if (!Array.isArray(targets)) throw new Invalid('targets must be an array of phone numbers or of objects with a target');
        if (targets.length === 0) throw new Invalid('targets must not be empty');
        if (targets.length > MAX_BATCH) throw new Invalid(`targets may hold at most ${MAX_BATCH} items; upload larger batches with POST /api/v2/tasks/csv`);
        if (body.target !== undefined) throw new Invalid('send either target or targets, not both');
        raws = targets.map((item, i) => {
          const field = `targets[${i}].`;
          if (typeof item === 'string') return { raw: { ...shared, target: item }, field };
          if (item && typeof item === 'object' && !Array.isArray(item)) {
            const { agentId: itemAgent, ...rest } = item as Record<string, unknown>;
            const own: RawTask = { ...rest };
            if (itemAgent !== undefined && own.accountId === undefined) own.accountId = itemAgent;
            return { raw: { ...shared, ...own }, field };
          }
          throw new Invalid(`targets[${i}] must be a phone number or an object with a target`);
        });
      }
      const spacing = normalizeSpacing(scheduleSpacingSec);
      if (!spacing.ok) throw new Invalid(spacing.message);
      const ctx = await itemContext(t, raws.map((r) => r.raw), now);
      const rows: TaskRow[] = [];
      const warnings: string[] = [];
      for (const [index, { raw, field }] of raws.entries()) {
        // A per-item scheduledFor is that item's own time; the stagger applies to the shared one.
        const ownTime = raw.scheduledFor !== shared.scheduledFor;
        const checked = checkTask({ ...raw, type }, { ...ctx, field, index: ownTime ? 0 : index, spacingSec: spacing.spacingSec });
        if (!checked.ok) throw new Invalid(checked.message);
        rows.push(checked.task);
        warnings.push(...checked.notes);
      }
      // A listed number refuses its own item only (docs/campaigns.md, "Do-not-call").
      const listed = await doNotCallRefusals(db, t.org, rows);
      const inserted = await submit(rows.filter((_, i) => !listed.has(i)));
      const refused = [...listed].map(([index, message]) => ({ index, target: rows[index]!.target!, message }));
      return {
        success: true,
        message: (type === 'call' ? 'Outbound call initiated.' : 'Outbound SMS initiated.') + (refused.length ? ` ${refused.length} refused (see refused).` : ''),
        inserted: inserted.length,
        tasks: inserted.map(presentTask),
        ...(warnings.length ? { warnings: warnings.slice(0, 100) } : {}),
        ...(refused.length ? { refused } : {}),
      };
    },

    /** Inserts rows already checked (the CSV import); one transaction per call. */
    insertChecked: insert,
    itemContext,
    /** Which of an organization's checked rows go to a number on a do-not-call list, with why (by index). */
    doNotCallRefusals: (org: AccountRow, rows: readonly TaskRow[]) => doNotCallRefusals(db, org, rows),

    async list(scope: Scope, q: ListQuery) {
      const t = await tenant(scope, q.targetAccountId);
      const sort = q.sort ?? 'createdAt';
      if (!Object.hasOwn(SORT, sort)) throw new Invalid(`sort must be one of ${Object.keys(SORT).join(', ')}`);
      const order = (q.order ?? 'desc').toLowerCase();
      if (order !== 'asc' && order !== 'desc') throw new Invalid('order must be asc or desc');
      if (q.state !== undefined && !QUEUE_STATES.includes(q.state as QueueState)) throw new Invalid(`state must be one of ${QUEUE_STATES.join(', ')}`);
      if (q.type !== undefined && !['call', 'text', 'ping'].includes(q.type)) throw new Invalid('type must be one of call, text, ping');
      if (q.since !== undefined && q.until !== undefined && q.since > q.until) throw new Invalid('since must not be after until');
      let accountId = q.accountId;
      if (t.agent) {
        if (accountId !== undefined && accountId !== t.agent.id) throw new NotFound(`accountId ${accountId} was not found`);
        accountId = t.agent.id;
      }
      const limit = q.limit ?? 100;
      const offset = q.offset ?? 0;
      const { rows, total } = await taskRepo.list(db, {
        orgId: t.org.id, accountId, state: q.state as QueueState | undefined, type: q.type as TaskType | undefined,
        since: q.since === undefined ? undefined : q.since * 1000,
        until: q.until === undefined ? undefined : q.until * 1000 + 999,
        sort: SORT[sort as keyof typeof SORT], order, limit, offset,
      });
      return { success: true, total, limit, offset, tasks: rows.map(presentTask) };
    },

    async get(scope: Scope, targetAccountId: number | undefined, id: string) {
      const t = await tenant(scope, targetAccountId);
      return { success: true, task: presentTask(await find(t, id)) };
    },

    async update(scope: Scope, targetAccountId: number | undefined, id: string, body: UpdateBody) {
      const t = await tenant(scope, targetAccountId);
      let row = await find(t, id);
      const { state, ...fields } = body;
      if (state !== undefined && state !== 'canceled') {
        throw new Invalid(`state can only be set to "canceled" (got ${JSON.stringify(state)}); the queue moves tasks through the other states`);
      }
      // Only the fields that can change count: unknown keys are ignored, as everywhere in the API
      // (otherwise `{state: "canceled", reason: "…"}` would be refused for a running task).
      const given = UPDATABLE.filter((k) => fields[k] !== undefined);
      if (given.length === 0 && state === undefined) {
        throw new Invalid('nothing to update: send state "canceled", or context, taskContext, greeting, content, waitToGreet, voicemail, scheduledFor, callingWindow or retryRules');
      }
      let message = 'Task updated successfully.';
      if (given.length > 0) {
        if (row.state !== 'pending') throw new Conflict(`Task ${id} is ${row.state}; only a pending task can be changed`);
        const now = Date.now();
        // The stored task re-checked with the changes applied: the same rules as a new one.
        const merged: RawTask = {
          type: row.type, target: row.target, accountId: row.account_id,
          context: fields.context !== undefined ? fields.context : row.context,
          taskContext: fields.taskContext !== undefined ? fields.taskContext : row.task_context,
          greeting: fields.greeting !== undefined ? fields.greeting : row.greeting,
          content: fields.content !== undefined ? fields.content : row.content,
          waitToGreet: fields.waitToGreet !== undefined ? fields.waitToGreet : row.wait_to_greet === 1,
          voicemail: fields.voicemail !== undefined ? fields.voicemail : row.voicemail,
          // The campaign rules it set (docs/campaigns.md), with those sent now in their place.
          ...storedCampaign(row.campaign),
          ...(fields.callingWindow !== undefined ? { callingWindow: fields.callingWindow } : {}),
          ...(fields.retryRules !== undefined ? { retryRules: fields.retryRules } : {}),
        };
        const checked = checkTask(merged, { orgId: t.org.id, defaultAccountId: row.account_id, allowedAccount: (a) => a === row.account_id, now });
        if (!checked.ok) throw new Invalid(checked.message);
        const set: Partial<TaskRow> = {
          context: checked.task.context, task_context: checked.task.task_context, greeting: checked.task.greeting,
          content: checked.task.content, wait_to_greet: checked.task.wait_to_greet, voicemail: checked.task.voicemail,
          campaign: checked.task.campaign, updated_at: now,
        };
        // A task held back by a limit is looked at again at once under its new rules (admission
        // holds it anew, or lets it go), not at the opening its old window named.
        const recheck = checked.task.campaign !== row.campaign && fields.scheduledFor === undefined;
        if (fields.scheduledFor !== undefined) {
          const sched = normalizeScheduledFor(fields.scheduledFor, now);
          if (!sched.ok) throw new Invalid(sched.message);
          set.scheduled_for = sched.scheduledForMs;
          set.run_at = sched.runAtMs;
        }
        const { updated, woken } = await db.transaction().execute(async (tx) => {
          let r = await taskRepo.updatePending(tx, row.id, set);
          const rechecked = r !== undefined && recheck && (await taskRepo.recheckHeld(tx, { orgId: t.org.id, id: row.id }, now)) > 0;
          if (rechecked) r = await taskRepo.find(tx, t.org.id, row.id);
          const wake = r !== undefined && (set.run_at !== undefined || rechecked);
          if (wake) await queue.announce(tx);
          return { updated: r, woken: wake };
        });
        if (!updated) throw new Conflict(`Task ${id} started running meanwhile; only a pending task can be changed`);
        if (woken) queue.notify();
        row = updated;
      }
      if (state === 'canceled') ({ row, message } = await cancel(row));
      return { success: true, message, task: presentTask(row) };
    },

    async remove(scope: Scope, targetAccountId: number | undefined, id: string) {
      const t = await tenant(scope, targetAccountId);
      const row = await find(t, id);
      if (row.state === 'running') {
        throw new Conflict(`Task ${id} is running; cancel it first (POST with state "canceled"), then delete it`);
      }
      const deleted = await db.transaction().execute((tx) => taskRepo.delete(tx, row));
      if (!deleted) throw new Conflict(`Task ${id} changed state meanwhile; read it again`);
      return { success: true, message: 'Task deleted successfully.' };
    },

    async stats(scope: Scope, targetAccountId: number | undefined) {
      const t = await tenant(scope, targetAccountId);
      const c = await taskRepo.counts(db, t.org.id);
      const byState = Object.fromEntries(QUEUE_STATES.map((s) => [s, Number(c?.[s] ?? 0)])) as Record<QueueState, number>;
      const total = QUEUE_STATES.reduce((sum, s) => sum + byState[s], 0);
      // The contract's description calls failed tasks "errored"; both names are given.
      return { success: true, total, byState: { ...byState, errored: byState.failed } };
    },

    async dailyCounts(scope: Scope, targetAccountId: number | undefined, date: string | undefined) {
      const t = await tenant(scope, targetAccountId);
      const limits = await limitRepo.load(db, t.org.id);
      const timezone = dayTimeZone(t.org.timezone, limits);
      if (date !== undefined && !isCalendarDay(date)) throw new Invalid(`date must be a calendar day as YYYY-MM-DD (got '${date}')`);
      const day = date ?? localDay(Date.now(), timezone);
      const n = await taskRepo.daily(db, t.org.id, day);
      return {
        success: true,
        counts: { calls: n.calls ?? 0, texts: n.texts ?? 0, tasks: n.tasks ?? 0, date: day, timezone },
        limits: presentLimits(limits).daily,
      };
    },

    async getLimits(scope: Scope, targetAccountId: number | undefined) {
      const t = await tenant(scope, targetAccountId);
      return { success: true, limits: presentLimits(await limitRepo.load(db, t.org.id)) };
    },

    async setLimits(scope: Scope, targetAccountId: number | undefined, body: unknown) {
      const t = await tenant(scope, targetAccountId);
      if (t.agent) throw new Forbidden('An agent account cannot change its organization\'s task limits');
      const checked = validateLimits(body);
      if (!checked.ok) throw new Invalid(checked.message);
      const restricted = RESTRICTED_LIMIT_FIELDS.filter((k) => checked.limits[k] !== undefined);
      if (restricted.length > 0 && !scope.isAncestorOf(t.org)) {
        throw new Forbidden(`Only a reseller or partner (with targetAccountId) may change ${restricted.join(' and ')}; an organization may change businessHours and cooldowns`);
      }
      const now = Date.now();
      const limits = await db.transaction().execute(async (tx) => {
        await limitRepo.lock(tx, t.org.id);
        const merged = mergeLimits(await limitRepo.load(tx, t.org.id), checked.limits);
        await limitRepo.save(tx, t.org.id, merged, now);
        // Tasks a limit had put off are looked at again under the new limits.
        await taskRepo.undeferPending(tx, t.org.id, now);
        await queue.announce(tx);
        return merged;
      });
      queue.notify();
      return { success: true, message: 'Task limits updated successfully.', limits: presentLimits(limits) };
    },
  };
}

export type TaskService = ReturnType<typeof taskService>;

/**
 * The agents service's port for an agent whose live calling window changed (agents is below
 * tasks): its calls and texts held back by a limit are due again at once, in the transaction that
 * published the change, and admission holds them anew under the new window or lets them go.
 */
export function agentHeldTasks(queue: Pick<TaskQueue, 'announce' | 'notify'>): HeldTasks {
  return {
    async recheck(tx, agent, now) {
      if (agent.org_id === null) return;
      if ((await taskRepo.recheckHeld(tx, { orgId: agent.org_id, accountId: agent.id }, now)) > 0) await queue.announce(tx);
    },
    wake: () => queue.notify(),
  };
}
export { FINAL as FINAL_STATES };
