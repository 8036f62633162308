// Reading a task's history back from the outbox (task_events) and checking it: the events form a
// valid life (pending, then running/exit pairs, then the task's state), one running event per
// attempt, and no attempt started before the previous one ended. Shared by the run and crash tests.
import assert from 'node:assert/strict';
import type { Db, TaskRow } from '../../src/db/types.ts';
import type { Harness } from './harness.ts';

/**
 * Task events are written only for organizations with a `task` subscription (nobody else would
 * receive them), so a test that reads a task's history subscribes its organization first. The
 * receiver's address is never sent to unless the harness runs the delivery worker.
 */
export async function keepTaskHistory(h: Harness, org: { token: string }, url = 'https://task-history.example/events'): Promise<void> {
  const res = await h.call('POST', '/api/v2/webhooks', { token: org.token, body: { url, label: 'task history', type: 'task' } });
  assert.equal(res.status, 201, JSON.stringify(res.body));
}

export interface TaskEvent {
  id: string;
  taskId: string;
  type: string;
  /** created_at, unix ms. */
  at: number;
  /** The task's attempt number as written in the event's payload. */
  attempt: number;
  /** The task's error as written in the event's payload. */
  error: string | null;
}

export interface AttemptInterval {
  attempt: number;
  /** When the attempt was claimed (its task.running event). */
  start: number;
  /** When it left running (its exit event), or null while it still runs. */
  end: number | null;
  exit: string | null;
}

const EXITS = new Set(['task.retrying', 'task.finished', 'task.failed', 'task.canceled']);

/** Every event of the given tasks (all tasks when none are given), grouped by task in (created_at, id) order. */
export async function eventsByTask(db: Db, taskIds?: string[]): Promise<Map<string, TaskEvent[]>> {
  const rows: { id: string; task_id: string; type: string; created_at: number; payload: string }[] = [];
  const ids = taskIds ?? [undefined];
  for (let i = 0; i < ids.length; i += 500) {
    let q = db.selectFrom('task_events').select(['id', 'task_id', 'type', 'created_at', 'payload']);
    if (taskIds) q = q.where('task_id', 'in', taskIds.slice(i, i + 500));
    rows.push(...(await q.execute()));
  }
  const out = new Map<string, TaskEvent[]>();
  for (const r of rows) {
    const task = (JSON.parse(r.payload) as { task: { attempts: number; error: string | null } }).task;
    const e: TaskEvent = { id: r.id, taskId: r.task_id, type: r.type, at: Number(r.created_at), attempt: task.attempts, error: task.error };
    let list = out.get(r.task_id);
    if (!list) out.set(r.task_id, (list = []));
    list.push(e);
  }
  for (const list of out.values()) list.sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return out;
}

/**
 * The running intervals of a task's attempts, paired by attempt number (not by event order, so a
 * misordered history cannot hide an overlap). Problems: an attempt claimed twice or left twice,
 * an exit without a claim.
 */
export function attemptIntervals(events: TaskEvent[]): { intervals: AttemptInterval[]; problems: string[] } {
  const byAttempt = new Map<number, AttemptInterval>();
  const problems: string[] = [];
  for (const e of events) {
    if (e.type === 'task.running') {
      if (byAttempt.has(e.attempt)) problems.push(`attempt ${e.attempt} was claimed twice`);
      else byAttempt.set(e.attempt, { attempt: e.attempt, start: e.at, end: null, exit: null });
    }
  }
  for (const e of events) {
    if (!EXITS.has(e.type)) continue;
    const a = byAttempt.get(e.attempt);
    if (!a) {
      // A pending task canceled (or failed by a rescue of no attempt) has no running interval.
      if (e.attempt !== 0 && e.type !== 'task.canceled') problems.push(`${e.type} of attempt ${e.attempt}, which never ran`);
      continue;
    }
    if (a.end === null) { a.end = e.at; a.exit = e.type; continue; }
    // Returned to the queue, then canceled while pending: that cancel ends no running attempt.
    if (!(a.exit === 'task.retrying' && e.type === 'task.canceled')) problems.push(`attempt ${e.attempt} left running twice (${a.exit}, ${e.type})`);
  }
  return { intervals: [...byAttempt.values()].sort((x, y) => x.attempt - y.attempt), problems };
}

/** Pairs of attempts of one task that ran at the same time: a later attempt started before an earlier one ended. */
export function overlappingAttempts(intervals: AttemptInterval[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < intervals.length; i++) {
    for (let j = i + 1; j < intervals.length; j++) {
      const [a, b] = [intervals[i], intervals[j]];
      const aEnd = a.end ?? Infinity;
      const bEnd = b.end ?? Infinity;
      if (a.start < bEnd && b.start < aEnd) {
        out.push(`attempts ${a.attempt} [${a.start}, ${a.end ?? 'running'}] and ${b.attempt} [${b.start}, ${b.end ?? 'running'}] overlap`);
      }
    }
  }
  return out;
}

/**
 * Everything wrong with a task's history against its row: it must start with task.pending, each
 * claim must be followed by one exit before the next claim, attempts must be numbered 1, 2, …,
 * there must be one claim per attempt the row counts, the last event must match the row's state,
 * and no two attempts may overlap.
 */
export function historyProblems(row: Pick<TaskRow, 'id' | 'state' | 'attempt'>, events: TaskEvent[]): string[] {
  const problems: string[] = [];
  const types = events.map((e) => `${e.type.slice(5)}#${e.attempt}`).join(' ');
  const bad = (msg: string) => problems.push(`${row.id}: ${msg} (events: ${types})`);
  if (events.length === 0 || events[0].type !== 'task.pending') bad('does not start with task.pending');
  let state: string = 'pending';
  let attempt = 0;
  for (const e of events.slice(1)) {
    if (e.type === 'task.running') {
      if (state !== 'pending') bad(`claimed while ${state}`);
      if (e.attempt !== attempt + 1) bad(`claim numbered ${e.attempt} after attempt ${attempt}`);
      attempt = e.attempt;
      state = 'running';
    } else if (e.type === 'task.retrying') {
      if (state !== 'running') bad(`returned to the queue while ${state}`);
      state = 'pending';
    } else if (EXITS.has(e.type)) {
      if (state !== 'running' && state !== 'pending') bad(`${e.type} while ${state}`);
      state = e.type.slice(5);
    } else {
      bad(`unexpected ${e.type}`);
    }
  }
  if (state !== row.state) bad(`history ends ${state} but the task is ${row.state}`);
  const claims = events.filter((e) => e.type === 'task.running').length;
  if (claims !== row.attempt) bad(`${claims} claims for ${row.attempt} attempts`);
  const { intervals, problems: pairing } = attemptIntervals(events);
  for (const p of [...pairing, ...overlappingAttempts(intervals)]) bad(p);
  return problems;
}
