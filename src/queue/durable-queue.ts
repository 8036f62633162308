// One durable queue of a process: its engine over one table, the wake-up of its runners (its
// producer, producer.ts: in this process through the wake-up bus, in others through NOTIFY in the
// writing transaction), and, in a worker, the runner with the queue's handler and whatever works
// beside it. Every module's queue
// (tasks, deliveries, turns, analyses, ADR windows, number releases) is one of these given a name,
// its settings and its worker; this layer knows no tenant and imports no module.
import type { Transaction } from 'kysely';
import type { DB, Db, QueueState } from '../db/types.ts';
import { QueueEngine, type Cause, type Patch, type QueueOptions, type QueueRow, type QueueTable } from './engine.ts';
import type { QueueProducer } from './producer.ts';
import { lastErrorPatch, newWorkerId, QueueRunner, type QueueProcessDeps, type RunnerOptions } from './runner.ts';
import type { Wakeups } from './waker.ts';

/** The columns a transition writes on queues whose rows carry updated_at and finished_at. */
export function endedStamp({ to, now }: { from: QueueState; to: QueueState; now: number; cause: Cause }): Record<string, unknown> {
  const set: Record<string, unknown> = { updated_at: now };
  if (to === 'finished' || to === 'failed' || to === 'canceled') set.finished_at = now;
  return set;
}

/** What the queue's engine is built with by this process. */
export interface EngineBase {
  workerId: string;
  leaseMs: number;
  now?: () => number;
  serialWrites: boolean;
}

/** What a worker runs: the handler of a claimed row and what runs beside the runner (made at start). */
export interface QueueWorker<T extends QueueTable> {
  handler: RunnerOptions<T>['handler'];
  /** After the runner has started (a timer, a dispatcher). */
  started?: () => void;
  /** Before the runner stops: what may still add rows ends first. */
  stopping?: () => Promise<void>;
  /** After the runner has stopped and its handlers ended (what they used is closed). */
  stopped?: () => Promise<void>;
}

export interface DurableQueueDeps extends QueueProcessDeps {
  /** Longest the runner sleeps without a wake-up (default 1 s); tests lengthen it to prove wake-ups work. */
  pollMs?: number;
}

export interface DurableQueueSpec<T extends QueueTable> {
  /**
   * What tells its runners that rows are due (producer.ts), named for the queue's table, which is
   * also what its runners are woken by (Wakeups, notifyQueue). Made by the queue's module, before
   * the queue when services built earlier add rows (the turn and analysis queues).
   */
  producer: QueueProducer<T>;
  /** Tells this queue's worker ids from those of the process's other queues. */
  name?: string;
  /** How long a claim holds a row without a heartbeat, unless the process's deps say otherwise. */
  leaseMs: number;
  /** Rows one worker runs at once. */
  concurrency: number;
  /** The engine of a queue with hooks (admission, transitions); default a plain one writing endedStamp. */
  engine?: (base: EngineBase) => QueueEngine<T>;
  /** The wait before attempt n + 1 after a failure, in the engine and the runner. Default exponentialBackoff. */
  backoff?: (attempt: number) => number;
  /** Columns written when a handler throws. Default the error's text in last_error. */
  errorPatch?: (err: unknown, row: QueueRow<T>) => Patch<QueueRow<T>>;
  /** Checked on each heartbeat's fresh row: true aborts its handler as canceled. */
  isCancelRequested?: (row: QueueRow<T>) => boolean;
  /** What a worker runs, made when it starts with the queue's clock (or joined later: DurableQueue.join). */
  worker?: WorkerFactory<T>;
}

export type WorkerFactory<T extends QueueTable> = (now: () => number) => QueueWorker<T>;

export class DurableQueue<T extends QueueTable> {
  readonly table: T;
  readonly engine: QueueEngine<T>;
  readonly workerId: string;
  readonly wakeups: Wakeups;
  /** What tells this queue's runners, in every process, that rows are due. */
  readonly producer: QueueProducer<T>;
  #makeWorker: WorkerFactory<T> | undefined;
  #runner: QueueRunner<T> | undefined;
  #worker: QueueWorker<T> | undefined;

  constructor(readonly deps: DurableQueueDeps, readonly spec: DurableQueueSpec<T>) {
    this.producer = spec.producer;
    this.table = spec.producer.table;
    this.wakeups = deps.wakeups;
    // Its runners listen on the process's bus: a producer waking another would wake nobody here.
    if (spec.producer.wakeups !== deps.wakeups) throw new Error(`queue ${this.table}: its producer wakes another bus than its runners listen on`);
    this.workerId = newWorkerId(spec.name);
    this.#makeWorker = spec.worker;
    const base: EngineBase = {
      workerId: this.workerId, leaseMs: deps.leaseMs ?? spec.leaseMs, now: deps.now, serialWrites: deps.database.serialWrites,
    };
    // The queue's own engine, built once here (a module whose queue has hooks builds it instead).
    // The plain queues' tables all carry updated_at, finished_at and last_error (the defaults write them).
    this.engine = spec.engine ? spec.engine(base)
      : new QueueEngine<T>({ table: this.table, ...base, stamp: endedStamp as QueueOptions<T>['stamp'], backoff: spec.backoff });
  }

  /** Rows this process's runner is running now. */
  get running(): number {
    return this.#runner?.running ?? 0;
  }

  /** Writes rows in one transaction and wakes the runners of every process (QueueProducer.enqueue). */
  enqueue<R>(db: Db, write: (tx: Transaction<DB>) => Promise<R>, due?: (written: R) => boolean): Promise<R> {
    return this.producer.enqueue(db, write, due);
  }

  /** Tells other processes, in the transaction that added or rescheduled rows, that the queue has due work. */
  announce(tx: Transaction<DB>): Promise<void> {
    return this.producer.announce(tx);
  }

  /** New or rescheduled rows are due: wake this process's runners now. */
  notify(): void {
    this.producer.notify();
  }

  /**
   * Gives a queue built before its worker could be (the task queue: what runs a task is built on
   * what is built on the queue) what its worker runs. Returns the queue.
   */
  join(worker: WorkerFactory<T>): this {
    this.#makeWorker = worker;
    return this;
  }

  /** Starts claiming rows in this process, each run by the worker's handler. Once. */
  startWorker(): void {
    if (this.#runner) return;
    if (!this.#makeWorker) throw new Error(`queue ${this.table}: no worker to start`);
    const { database, log } = this.deps;
    const w = this.#makeWorker(this.engine.now);
    const { backoff } = this.spec;
    this.#worker = w;
    this.#runner = new QueueRunner({
      engine: this.engine,
      db: database.db,
      writers: database.concurrentWriters,
      handler: w.handler,
      concurrency: this.spec.concurrency,
      wakeups: this.wakeups,
      heartbeatMs: this.deps.heartbeatMs,
      rescueEveryMs: this.deps.rescueEveryMs,
      pollMs: this.deps.pollMs,
      isCancelRequested: this.spec.isCancelRequested,
      backoff: backoff ? (row) => backoff(row.attempt) : undefined,
      errorPatch: this.spec.errorPatch ?? (lastErrorPatch as unknown as RunnerOptions<T>['errorPatch']),
      log,
    });
    this.#runner.start();
    w.started?.();
  }

  /** Ends the handler of a row this process runs (a cancel request); false when it runs elsewhere or not at all. */
  cancel(id: string): boolean {
    return this.#runner?.cancel(id) ?? false;
  }

  /** A row this process may be running was settled elsewhere (a carrier callback): free its slot now. */
  release(id: string): boolean {
    return this.#runner?.release(id) ?? false;
  }

  /**
   * Stops the worker: what runs beside it first, then the runner, whose rows in flight get
   * `timeoutMs` (default 10 s) to finish before they are abandoned and go back to the queue.
   */
  async stop(opts: { timeoutMs?: number } = {}): Promise<void> {
    const worker = this.#worker;
    this.#worker = undefined;
    await worker?.stopping?.();
    await this.#runner?.stop(opts);
    this.#runner = undefined;
    await worker?.stopped?.();
  }
}
