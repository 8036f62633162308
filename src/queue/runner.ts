// Runs a queue: claims up to its free capacity, runs one handler per row with an AbortSignal,
// keeps leases alive while handlers run, settles each row, rescues expired leases, and sleeps
// until woken (notify, a LISTEN hint, the earliest future run_at, or the poll interval).
import crypto from 'node:crypto';
import os from 'node:os';
import type { Transaction } from 'kysely';
import type { Database } from '../db/index.ts';
import type { DB, Db, Executor } from '../db/types.ts';
import { whileDatabaseAway } from '../db/errors.ts';
import { GroupCommit } from '../db/group-commit.ts';
import { within } from '../lib/time.ts';
import { QueueEngine, exponentialBackoff, type Completion, type FinalState, type Patch, type QueueRow, type QueueTable } from './engine.ts';
import { Waker, type Wakeups } from './waker.ts';

export type AbortCause = 'canceled' | 'lease-lost' | 'shutdown';

/** Longest a claim waits for half the slots to be free while rows still run (see #run). */
export const CLAIM_LINGER_MS = 10;

/** The reason on a handler's aborted signal. */
export class QueueAbortError extends Error {
  constructor(readonly kind: AbortCause) {
    super(`queue: ${kind}`);
    this.name = 'QueueAbortError';
  }
}

/** What a handler asks for; returning nothing means finished. */
export type Outcome<Row> = (
  | { kind: 'complete'; state: FinalState; set?: Patch<Row> }
  | { kind: 'retry'; runAt?: number; set?: Patch<Row>; uncounted?: boolean }
) & {
  /**
   * Writes that must commit with the settle or not at all (a delivery's attempt log): run in the
   * settle's transaction with the row as written, only when this worker still held the row.
   */
  after?: (tx: Transaction<DB>, row: Row) => Promise<void>;
  /** Runs once the settle has committed (wakes a consumer of what `after` wrote). */
  settled?: () => void;
};

/** A completion with the writes that must commit with it. */
type Settling<Row> = Completion<Row> & { after?: Outcome<Row>['after'] };

export interface HandlerContext {
  /** Aborted with a QueueAbortError when the row is canceled, its lease is lost, or the runner stops. */
  signal: AbortSignal;
}

/** What a process's queue (tasks, deliveries) is built from, besides its own settings. */
export interface QueueProcessDeps {
  database: Database;
  /** The process's one wake-up bus (src/queue/waker.ts), shared with every other queue. */
  wakeups: Wakeups;
  log?: { error(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  /** Tests shorten leases, heartbeats and rescues; production uses the configuration and defaults. */
  leaseMs?: number;
  heartbeatMs?: number;
  rescueEveryMs?: number;
  /** The queue's clock (unix ms) for claims and leases; tests move it. */
  now?: () => number;
}

/** A worker id unique to this process (and to `suffix` when one process runs several queues). */
export function newWorkerId(suffix?: string): string {
  return `${os.hostname()}:${process.pid}:${crypto.randomBytes(4).toString('hex')}${suffix ? `:${suffix}` : ''}`;
}

export interface RunnerOptions<T extends QueueTable> {
  engine: QueueEngine<T>;
  db: Db;
  /** Write transactions that may run at once (Database.concurrentWriters); settles are batched by up to 2. Default 1. */
  writers?: number;
  handler: (row: QueueRow<T>, ctx: HandlerContext) => Promise<Outcome<QueueRow<T>> | void>;
  /** Rows run at once by this runner. Default 10. */
  concurrency?: number;
  /** Longest sleep without a wakeup. Default 1000 ms. */
  pollMs?: number;
  /** Lease renewal interval. Default a third of the engine's lease. */
  heartbeatMs?: number;
  /** How often this runner returns expired leases to pending; 0 disables. Default 5000 ms. */
  rescueEveryMs?: number;
  /** Subscribes the runner to wakeups for its table (in-process notify and LISTEN hints). */
  wakeups?: Wakeups;
  /** Checked on each heartbeat's fresh copy of a row: true aborts its handler as canceled. */
  isCancelRequested?: (row: QueueRow<T>) => boolean;
  /** Columns to record when a handler throws (e.g. the error message). */
  errorPatch?: (err: unknown, row: QueueRow<T>) => Patch<QueueRow<T>>;
  /** Delay before retrying a row whose handler threw. Default exponentialBackoff(attempt). */
  backoff?: (row: QueueRow<T>, err: unknown) => number;
  log?: { error(obj: object, msg: string): void };
}

interface InFlight<Row> {
  row: Row;
  controller: AbortController;
  done: Promise<void>;
}

/** What a handler's error says, bounded: the message (or the thrown value), at most 1,000 characters. */
export function errorText(err: unknown): string {
  return err instanceof Error ? err.message.slice(0, 1000) : String(err).slice(0, 1000);
}

/** The errorPatch of queues whose rows keep the last error in `last_error`. */
export const lastErrorPatch = (err: unknown): { last_error: string } => ({ last_error: errorText(err) });

export class QueueRunner<T extends QueueTable> {
  readonly #o: Required<Pick<RunnerOptions<T>, 'concurrency' | 'pollMs' | 'heartbeatMs' | 'rescueEveryMs'>> & RunnerOptions<T>;
  readonly #waker = new Waker();
  readonly #inFlight = new Map<string, InFlight<QueueRow<T>>>();
  #loop: Promise<void> | undefined;
  #stopping = false;
  #timers: NodeJS.Timeout[] = [];
  #beating = false;
  #rescuing = false;
  #unsubscribe: (() => void) | undefined;

  constructor(opts: RunnerOptions<T>) {
    this.#o = {
      ...opts,
      concurrency: opts.concurrency ?? 10,
      pollMs: opts.pollMs ?? 1000,
      heartbeatMs: opts.heartbeatMs ?? Math.max(10, Math.floor(opts.engine.leaseMs / 3)),
      rescueEveryMs: opts.rescueEveryMs ?? 5000,
    };
    if (!(this.#o.concurrency >= 1)) throw new Error('queue runner: concurrency must be at least 1');
    const { engine, db } = this.#o;
    // Rows finishing together settle in one transaction (src/db/group-commit.ts): one commit, and
    // the owner's per-transition rows (an organization's counts) written once for the group. Each
    // row's `after` writes (a delivery's attempt log) follow in the same transaction, for the rows
    // this worker still held; one that fails has the group written again row by row.
    this.#completions = new GroupCommit({
      db,
      concurrency: Math.min(2, this.#o.writers ?? 1),
      write: async (tx, jobs) => {
        const written = await engine.completeMany(tx, jobs);
        for (let i = 0; i < jobs.length; i++) {
          const row = written[i];
          if (row && jobs[i].after) await jobs[i].after!(tx, row);
        }
        return written;
      },
    });
  }

  readonly #completions: GroupCommit<Settling<QueueRow<T>>, QueueRow<T> | undefined>;

  /** Rows this runner is running now. */
  get running(): number {
    return this.#inFlight.size;
  }

  start(): void {
    if (this.#loop) return;
    this.#unsubscribe = this.#o.wakeups?.on(this.#o.engine.table, () => this.#waker.notify());
    this.#timers.push(setInterval(() => void this.#heartbeat(), this.#o.heartbeatMs));
    if (this.#o.rescueEveryMs > 0) {
      this.#timers.push(setInterval(() => void this.#rescue(), this.#o.rescueEveryMs));
      void this.#rescue(); // rows a crashed predecessor held need not wait a whole interval
    }
    this.#loop = this.#run();
  }

  /** Due work may exist: look now instead of at the next poll. */
  notify(): void {
    this.#waker.notify();
  }

  /** Aborts the handler of a row this runner is running; false when it is not running here. */
  cancel(id: string): boolean {
    const job = this.#inFlight.get(id);
    if (!job) return false;
    job.controller.abort(new QueueAbortError('canceled'));
    return true;
  }

  /**
   * The row was settled by someone else (a carrier's callback moved it to its final state): stop
   * its handler now rather than at the next heartbeat, freeing the slot. False when not running here.
   */
  release(id: string): boolean {
    const job = this.#inFlight.get(id);
    if (!job) return false;
    job.controller.abort(new QueueAbortError('lease-lost'));
    return true;
  }

  /**
   * Stops claiming and waits for running handlers (their leases kept alive meanwhile). After
   * `timeoutMs` the rest are aborted as 'shutdown' and get `graceMs` more; a handler still running
   * after that keeps its row until the lease expires and a rescuer takes it.
   */
  async stop(opts: { timeoutMs?: number; graceMs?: number } = {}): Promise<void> {
    const { timeoutMs = 10_000, graceMs = 2000 } = opts;
    this.#stopping = true;
    this.#unsubscribe?.();
    this.#waker.notify();
    await this.#loop;
    const drained = () => Promise.allSettled([...this.#inFlight.values()].map((j) => j.done)).then(() => true);
    if (!(await within(drained(), timeoutMs, () => false))) {
      for (const job of this.#inFlight.values()) job.controller.abort(new QueueAbortError('shutdown'));
      await within(drained(), graceMs, () => false);
    }
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    this.#loop = undefined;
  }

  async #run(): Promise<void> {
    const { engine, db, concurrency, pollMs } = this.#o;
    const half = Math.ceil(concurrency / 2);
    /** Since when slots have been free while others still run (0: not waiting). */
    let freeSince = 0;
    while (!this.#stopping) {
      let sleep = pollMs;
      const free = concurrency - this.#inFlight.size;
      // A few slots free while the rest still run: wait a moment for more before claiming (up to
      // CLAIM_LINGER_MS), so one claim (a statement, its hooks and a commit) starts many rows rather
      // than one claim per finished row. Nothing waits for longer than a few milliseconds.
      if (free > 0 && free < half && this.#inFlight.size > 0) {
        const now = Date.now();
        freeSince ||= now;
        if (now - freeSince < CLAIM_LINGER_MS) {
          await this.#waker.wait(CLAIM_LINGER_MS - (now - freeSince));
          continue;
        }
      }
      freeSince = 0;
      if (free > 0) {
        try {
          const rows = await engine.claim(db, free);
          if (this.#stopping) {
            // Claimed while stop() was called: still run them, stop() drains them like the rest.
            for (const row of rows) this.#start(row);
            break;
          }
          for (const row of rows) this.#start(row);
          if (rows.length === free) continue; // a full batch: more may be due right now
          const next = await engine.nextRunAt(db);
          if (next !== null) {
            const wait = next - engine.now();
            // A due row we could not claim is locked by another worker's claim or just deferred;
            // look again shortly rather than spinning.
            sleep = Math.min(pollMs, wait > 0 ? wait + 1 : 20);
          }
        } catch (err) {
          this.#o.log?.error({ err, queue: engine.table }, 'queue claim failed');
        }
      }
      await this.#waker.wait(sleep);
    }
  }

  #start(row: QueueRow<T>): void {
    const controller = new AbortController();
    const job: InFlight<QueueRow<T>> = { row, controller, done: Promise.resolve() };
    this.#inFlight.set(row.id, job);
    job.done = this.#execute(job).finally(() => {
      this.#inFlight.delete(row.id);
      this.#waker.notify(); // a slot is free
    });
  }

  async #execute(job: InFlight<QueueRow<T>>): Promise<void> {
    const { engine, db, handler } = this.#o;
    const { row, controller } = job;
    let outcome: Outcome<QueueRow<T>>;
    try {
      outcome = (await handler(row, { signal: controller.signal })) ?? { kind: 'complete', state: 'finished' };
    } catch (err) {
      outcome = this.#onThrow(row, err, controller.signal);
    }
    // The engine ignores a stale lease, so a handler that outlived its lease changes nothing.
    const settled = outcome;
    const write = async () => {
      if (settled.kind === 'complete') {
        await this.#completions.submit({ lease: row, state: settled.state, set: settled.set, after: settled.after });
        return;
      }
      const retry = (ex: Executor) => engine.retry(ex, row, { runAt: settled.runAt, set: settled.set, uncounted: settled.uncounted });
      const after = settled.after;
      if (!after) await retry(db);
      else await db.transaction().execute(async (tx) => {
        const written = await retry(tx);
        if (written) await after(tx, written);
      });
    };
    // The database is away (restarting, unreachable): the work is done, so keep trying to record it
    // while the row is still ours. The job stays in flight meanwhile, so the heartbeat renews its
    // lease as soon as the database answers again; letting the lease expire instead would have
    // another worker run the finished work a second time. Given up when the heartbeat finds the
    // lease gone, or on shutdown (then the rescuer returns the row after the lease).
    const leaseLost = () => controller.signal.reason instanceof QueueAbortError && controller.signal.reason.kind === 'lease-lost';
    try {
      await whileDatabaseAway(write, {
        giveUp: () => leaseLost() || this.#stopping,
        onFirstWait: (err) => this.#o.log?.error({ err, queue: engine.table, id: row.id }, 'queue settle failed: database unavailable; retrying'),
      });
      outcome.settled?.();
    } catch (err) {
      // The lease expires and the rescuer returns the row; nothing is lost.
      this.#o.log?.error({ err, queue: engine.table, id: row.id }, 'queue settle failed');
    }
  }

  #onThrow(row: QueueRow<T>, err: unknown, signal: AbortSignal): Outcome<QueueRow<T>> {
    const set = this.#o.errorPatch?.(err, row);
    const cause = signal.aborted && signal.reason instanceof QueueAbortError ? signal.reason.kind : undefined;
    if (cause === 'canceled') return { kind: 'complete', state: 'canceled', set };
    if (cause === 'shutdown') return { kind: 'retry', runAt: this.#o.engine.now(), set };
    const delay = this.#o.backoff ? this.#o.backoff(row, err) : exponentialBackoff(row.attempt);
    return { kind: 'retry', runAt: this.#o.engine.now() + delay, set };
  }

  async #heartbeat(): Promise<void> {
    if (this.#beating || this.#inFlight.size === 0) return;
    this.#beating = true;
    try {
      const jobs = [...this.#inFlight.values()];
      const held = await this.#o.engine.heartbeat(this.#o.db, jobs.map((j) => j.row));
      const fresh = new Map(held.map((r) => [r.id, r]));
      for (const job of jobs) {
        const row = fresh.get(job.row.id);
        if (!row) {
          // Only abort if the job is still the one we asked about (it may have just finished).
          if (this.#inFlight.get(job.row.id) === job) job.controller.abort(new QueueAbortError('lease-lost'));
        } else if (this.#o.isCancelRequested?.(row)) {
          job.controller.abort(new QueueAbortError('canceled'));
        }
      }
    } catch (err) {
      this.#o.log?.error({ err, queue: this.#o.engine.table }, 'queue heartbeat failed');
    } finally {
      this.#beating = false;
    }
  }

  async #rescue(): Promise<void> {
    if (this.#rescuing || this.#stopping) return;
    this.#rescuing = true;
    try {
      const rows = await this.#o.engine.rescue(this.#o.db);
      if (rows.length > 0) this.#waker.notify();
    } catch (err) {
      this.#o.log?.error({ err, queue: this.#o.engine.table }, 'queue rescue failed');
    } finally {
      this.#rescuing = false;
    }
  }
}
