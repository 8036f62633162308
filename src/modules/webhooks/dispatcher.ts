// The outbox dispatcher: turns task events not yet dispatched into webhook deliveries, one per
// matching `task` subscription of the event's organization, and marks the events dispatched, in
// one transaction (so an event is delivered once per subscription, even across a crash).
import type { Insertable } from 'kysely';
import type { Db, Executor, TaskEventRow, WebhookDeliveriesTable } from '../../db/types.ts';
import { newId } from '../../lib/ids.ts';
import { notifyQueue, Waker } from '../../queue/waker.ts';
import { deliveryRepo } from './repository.ts';
import { subscriptionRepo } from './subscriptions/repository.ts';

export const DELIVERIES = 'webhook_deliveries';
/** Events taken per transaction. */
export const DISPATCH_BATCH = 500;

/**
 * The body a `task` subscription receives (Standard Webhooks' recommended shape):
 * `{type, timestamp, data}` with `data` the task as GET /api/v2/tasks/{id} shows it at that event.
 */
export function taskEventPayload(event: Pick<TaskEventRow, 'type' | 'payload' | 'created_at'>): string {
  const stored = JSON.parse(event.payload) as { task?: unknown };
  return JSON.stringify({ type: event.type, timestamp: new Date(event.created_at).toISOString(), data: stored.task ?? null });
}

/**
 * The outbox the dispatcher reads: task events, kept in the tasks module's task_events table and
 * written in the transaction of each task's change (taskRepo implements this). Declared here and
 * handed in by src/platform.ts because tasks sits above webhooks (docs/architecture.md, "The order
 * of modules").
 */
export interface TaskEventOutbox {
  hasUndispatchedEvents(db: Executor, after?: string): Promise<boolean>;
  /** Oldest first, after `after`; `lock`: FOR UPDATE SKIP LOCKED (on PostgreSQL). */
  undispatchedEvents(tx: Executor, limit: number, opts: { lock?: boolean; after?: string }): Promise<Pick<TaskEventRow, 'id' | 'org_id' | 'type' | 'payload' | 'created_at'>[]>;
  markEventsDispatched(tx: Executor, ids: readonly string[]): Promise<void>;
}

export interface DispatchResult {
  events: number;
  deliveries: number;
  /** The newest event of the batch (the cursor for the next batch of a backlog). */
  last?: string;
}

/**
 * Full batches the dispatcher takes after a cursor before it looks from the oldest event again
 * (an event committed late with an older id than the cursor waits at most this many batches).
 */
export const CURSOR_BATCHES = 20;

/**
 * Shortest time between the starts of two polls when wakeups come faster: every commit of tasks
 * wakes the dispatcher, and most of them wrote no event (organizations without a task
 * subscription write none), so a busy queue would have it look many hundred times a second.
 */
export const WAKE_GAP_MS = 20;

/**
 * One batch: up to `batch` undispatched events, oldest first, locked with SKIP LOCKED (on
 * PostgreSQL), so dispatchers of several workers take disjoint batches.
 */
export async function dispatchTaskEvents(db: Db, outbox: TaskEventOutbox, opts: { batch?: number; now?: number; maxAttempts: number; after?: string }): Promise<DispatchResult> {
  const batch = opts.batch ?? DISPATCH_BATCH;
  // Most polls find nothing: look without a transaction first.
  if (!(await outbox.hasUndispatchedEvents(db, opts.after))) return { events: 0, deliveries: 0 };
  return db.transaction().execute(async (tx) => {
    const events = await outbox.undispatchedEvents(tx, batch, { lock: true, after: opts.after });
    if (events.length === 0) return { events: 0, deliveries: 0 };

    const orgIds = [...new Set(events.map((e) => e.org_id))];
    const subs = await subscriptionRepo.ofType(tx, orgIds, 'task');
    const byOrg = new Map<number, number[]>();
    for (const s of subs) byOrg.set(s.org_id, [...(byOrg.get(s.org_id) ?? []), s.id]);

    const now = opts.now ?? Date.now();
    const rows: Insertable<WebhookDeliveriesTable>[] = [];
    for (const e of events) {
      const hooks = byOrg.get(e.org_id);
      if (!hooks) continue;
      const payload = taskEventPayload(e);
      for (const webhookId of hooks) {
        // Every column named, so a multi-row insert never writes NULL for a defaulted one.
        rows.push({
          id: newId('dlv', now), org_id: e.org_id, kind: 'webhook', relay_id: null, relay_event_id: null,
          webhook_id: webhookId, event_id: e.id, event_type: e.type, payload, state: 'pending', run_at: now,
          attempt: 0, max_attempts: opts.maxAttempts, lease_owner: null, lease_expires_at: null,
          last_status: null, last_error: null, created_at: now, updated_at: now, finished_at: null,
        });
      }
    }
    await deliveryRepo.insertMany(tx, rows);
    // Events of organizations without a subscription are marked too, so they never pile up.
    await outbox.markEventsDispatched(tx, events.map((e) => e.id));
    if (rows.length > 0) await notifyQueue(tx, DELIVERIES);
    return { events: events.length, deliveries: rows.length, last: events[events.length - 1].id };
  });
}

/**
 * The loop a worker runs: drain while batches come back full, then sleep until woken (a task
 * changed state) or `everyMs` passes. Calls `onDeliveries` when it created some, to wake runners.
 */
export class OutboxDispatcher {
  readonly #waker = new Waker();
  #loop: Promise<void> | undefined;
  #stopping = false;

  constructor(private readonly o: {
    db: Db;
    outbox: TaskEventOutbox;
    maxAttempts: number;
    everyMs: number;
    batch?: number;
    now?: () => number;
    onDeliveries?(): void;
    log?: { error(obj: object, msg: string): void };
  }) {}

  start(): void {
    if (this.#loop) return;
    this.#stopping = false;
    this.#loop = this.#run();
  }

  notify(): void {
    this.#waker.notify();
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    this.#waker.notify();
    await this.#loop;
    this.#loop = undefined;
  }

  async #run(): Promise<void> {
    const batch = this.o.batch ?? DISPATCH_BATCH;
    // While a backlog drains (full batches), each batch starts after the last one's newest event:
    // looking from the oldest every time would step over every event dispatched so far, and the
    // planner may well do that (once statistics say most events are undispatched, it walks the
    // primary key). Any batch that is not full, and every CURSOR_BATCHES full ones, start from the
    // oldest again, for events that committed after newer ones were dispatched.
    let after: string | undefined;
    let cursorBatches = 0;
    while (!this.#stopping) {
      let full = false;
      const cursor = after;
      const polledAt = Date.now();
      try {
        const r = await dispatchTaskEvents(this.o.db, this.o.outbox, { batch, now: this.o.now?.(), maxAttempts: this.o.maxAttempts, after: cursor });
        if (r.deliveries > 0) this.o.onDeliveries?.();
        full = r.events === batch;
        if (full && r.last && ++cursorBatches < CURSOR_BATCHES) {
          after = r.last;
        } else {
          after = undefined;
          cursorBatches = 0;
          // A short batch after a cursor may have left older events behind it: look again at once.
          if (!full && cursor !== undefined) full = true;
        }
      } catch (err) {
        after = undefined;
        cursorBatches = 0;
        this.o.log?.error({ err }, 'outbox dispatch failed');
      }
      if (!full && (await this.#waker.wait(this.o.everyMs)) === 'notified') {
        const since = Date.now() - polledAt;
        if (since < WAKE_GAP_MS && !this.#stopping) await new Promise((resolve) => setTimeout(resolve, WAKE_GAP_MS - since));
      }
    }
  }
}
