// The webhook delivery queue of one process: the engine over webhook_deliveries (relayed provider
// events and our own events to subscriptions), woken through the process's one wake-up bus, and,
// in a worker, the runner that sends deliveries plus the outbox dispatcher that turns task events
// into them. Built once per process by src/platform.ts.
import type { Dispatcher } from 'undici';
import type { Config } from '../../config.ts';
import type { QueueState } from '../../db/types.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { QueueEngine, type Cause } from '../../queue/engine.ts';
import { lastErrorPatch, newWorkerId, type QueueProcessDeps, QueueRunner } from '../../queue/runner.ts';
import type { Wakeups } from '../../queue/waker.ts';
import { MAX_DELIVERY_ATTEMPTS, retryDelayMs } from '../../webhooks/deliver.ts';
import { guardedDispatcher, policyFromConfig } from '../../webhooks/ssrf.ts';
import { createDeliveryHandler, type RetryDelay } from './send-delivery.ts';
import { DELIVERIES, OutboxDispatcher, type TaskEventOutbox } from './dispatcher.ts';

/** The queue name task transitions are announced on (src/modules/tasks/queue-hooks.ts). */
const TASKS = 'tasks';

/** Attempts a schedule allows: the first plus every retry it gives a delay for. */
export function attemptsAllowed(retryDelay: RetryDelay): number {
  let n = 1;
  while (n < 1000 && retryDelay(n) !== null) n++;
  return n;
}


function stamp({ to, now, cause }: { from: QueueState; to: QueueState; now: number; cause: Cause }) {
  const set: Record<string, unknown> = { updated_at: now };
  if (to === 'finished' || to === 'failed' || to === 'canceled') set.finished_at = now;
  // The receiver may or may not have had the request: it is sent again, with the same webhook-id.
  if (cause === 'rescue') set.last_error = 'worker lost its lease (crashed or stalled) during the attempt; delivery returned to the queue';
  return set;
}

export function createDeliveryEngine(opts: { workerId: string; leaseMs?: number; now?: () => number; serialWrites?: boolean }): QueueEngine<'webhook_deliveries'> {
  return new QueueEngine({
    table: DELIVERIES, workerId: opts.workerId, leaseMs: opts.leaseMs, now: opts.now, serialWrites: opts.serialWrites, stamp,
  });
}

/** Producers wake deliveries through the wake-up bus, and task changes wake the outbox dispatcher. */
export interface DeliveryQueueDeps extends QueueProcessDeps {
  config: Config;
  box: SecretBox;
  /** The task events the outbox dispatcher turns into deliveries (the tasks module's repository). */
  outbox: TaskEventOutbox;
  /** The retry schedule; tests pass a fast one. Default DESIGN §7's (retryDelayMs). */
  retryDelay?: RetryDelay;
  /** Longest the outbox dispatcher sleeps without a wakeup. Default 250 ms. */
  dispatchEveryMs?: number;
}

export class DeliveryQueue {
  readonly wakeups: Wakeups;
  readonly engine: QueueEngine<'webhook_deliveries'>;
  readonly workerId: string;
  readonly maxAttempts: number;
  #runner: QueueRunner<'webhook_deliveries'> | undefined;
  #dispatcher: OutboxDispatcher | undefined;
  #http: Dispatcher | undefined;
  #unsubscribe: (() => void)[] = [];

  constructor(readonly deps: DeliveryQueueDeps) {
    this.workerId = newWorkerId('deliveries');
    this.wakeups = deps.wakeups;
    this.engine = createDeliveryEngine({
      workerId: this.workerId, leaseMs: deps.leaseMs ?? deps.config.deliveryLeaseMs, now: deps.now,
      serialWrites: deps.database.serialWrites,
    });
    this.maxAttempts = deps.retryDelay ? attemptsAllowed(deps.retryDelay) : MAX_DELIVERY_ATTEMPTS;
  }

  get running(): number {
    return this.#runner?.running ?? 0;
  }

  /**
   * Starts sending deliveries and dispatching task events in this process.
   */
  async startWorker(): Promise<void> {
    if (this.#runner) return;
    const { database, config, box, log } = this.deps;
    const now = this.engine.now;
    this.#http = guardedDispatcher(policyFromConfig(config), { log });
    this.#runner = new QueueRunner({
      engine: this.engine,
      db: database.db,
      writers: database.concurrentWriters,
      handler: createDeliveryHandler({
        db: database.db, box, dispatcher: this.#http, retryDelay: this.deps.retryDelay ?? retryDelayMs, now, log,
      }),
      concurrency: config.deliveryConcurrency,
      wakeups: this.wakeups,
      heartbeatMs: this.deps.heartbeatMs,
      rescueEveryMs: this.deps.rescueEveryMs,
      errorPatch: lastErrorPatch,
      log,
    });
    this.#dispatcher = new OutboxDispatcher({
      db: database.db, outbox: this.deps.outbox, maxAttempts: this.maxAttempts,
      everyMs: this.deps.dispatchEveryMs ?? 250, now, onDeliveries: () => this.notify(), log,
    });
    const wakeDispatcher = () => this.#dispatcher?.notify();
    this.#unsubscribe.push(this.wakeups.on(TASKS, wakeDispatcher));
    this.#runner.start();
    this.#dispatcher.start();
  }

  /** New or rescheduled deliveries are due: wake this process's runner now. */
  notify(): void {
    this.wakeups.emit(DELIVERIES);
  }

  /**
   * Stops sending: deliveries in flight get `timeoutMs` (default 10 s) to finish, then their
   * attempts are abandoned and the rows go back to the queue, due at once, for any worker.
   */
  async stop(opts: { timeoutMs?: number } = {}): Promise<void> {
    for (const off of this.#unsubscribe) off();
    this.#unsubscribe = [];
    await this.#dispatcher?.stop();
    this.#dispatcher = undefined;
    await this.#runner?.stop(opts);
    this.#runner = undefined;
    await this.#http?.close().catch(() => {});
    this.#http = undefined;
  }
}
