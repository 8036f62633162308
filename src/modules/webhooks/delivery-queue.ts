// The webhook delivery queue of one process: a durable queue over webhook_deliveries (relayed
// provider events and our own events to subscriptions), and, in a worker, the runner that sends
// deliveries plus the outbox dispatcher that turns task events into them. Built once per process
// by src/platform.ts.
import type { Config } from '../../config.ts';
import type { QueueState } from '../../db/types.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { DurableQueue, endedStamp, type DurableQueueDeps } from '../../queue/durable-queue.ts';
import { QueueProducer } from '../../queue/producer.ts';
import { QueueEngine, type Cause } from '../../queue/engine.ts';
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

/** A rescued delivery says why it is sent again: the receiver may or may not have had the request (the same webhook-id). */
function stamp(t: { from: QueueState; to: QueueState; now: number; cause: Cause }) {
  const set = endedStamp(t);
  if (t.cause === 'rescue') set.last_error = 'worker lost its lease (crashed or stalled) during the attempt; delivery returned to the queue';
  return set;
}

export function createDeliveryEngine(opts: { workerId: string; leaseMs?: number; now?: () => number; serialWrites?: boolean }): QueueEngine<'webhook_deliveries'> {
  return new QueueEngine({
    table: DELIVERIES, workerId: opts.workerId, leaseMs: opts.leaseMs, now: opts.now, serialWrites: opts.serialWrites, stamp,
  });
}

/** Producers wake deliveries through the wake-up bus, and task changes wake the outbox dispatcher. */
export interface DeliveryQueueDeps extends DurableQueueDeps {
  config: Config;
  box: SecretBox;
  /** The task events the outbox dispatcher turns into deliveries (the tasks module's repository). */
  outbox: TaskEventOutbox;
  /** The retry schedule; tests pass a fast one. Default DESIGN §7's (retryDelayMs). */
  retryDelay?: RetryDelay;
  /** Longest the outbox dispatcher sleeps without a wakeup. Default 250 ms. */
  dispatchEveryMs?: number;
}

export type DeliveryQueue = DurableQueue<typeof DELIVERIES> & {
  /** Attempts a delivery gets (the retry schedule's). */
  readonly maxAttempts: number;
};

/**
 * The queue; in a worker, the runner sends deliveries and the outbox dispatcher turns task events
 * into them. On stop, deliveries in flight get `timeoutMs` (default 10 s) to finish, then their
 * attempts are abandoned and the rows go back to the queue, due at once, for any worker.
 */
export function deliveryQueue(deps: DeliveryQueueDeps): DeliveryQueue {
  const { config, box, log } = deps;
  const { db } = deps.database;
  const retryDelay = deps.retryDelay ?? retryDelayMs;
  const maxAttempts = deps.retryDelay ? attemptsAllowed(deps.retryDelay) : MAX_DELIVERY_ATTEMPTS;
  const queue: DurableQueue<typeof DELIVERIES> = new DurableQueue(deps, {
    producer: new QueueProducer(DELIVERIES, deps.wakeups), name: 'deliveries', leaseMs: config.deliveryLeaseMs, concurrency: config.deliveryConcurrency, engine: createDeliveryEngine,
    worker: (now) => {
      const http = guardedDispatcher(policyFromConfig(config), { log });
      const dispatcher = new OutboxDispatcher({
        db, outbox: deps.outbox, maxAttempts, everyMs: deps.dispatchEveryMs ?? 250, now, onDeliveries: () => queue.notify(), log,
      });
      let unsubscribe: (() => void) | undefined;
      return {
        handler: createDeliveryHandler({ db, box, dispatcher: http, retryDelay, now, log }),
        started: () => {
          unsubscribe = queue.wakeups.on(TASKS, () => dispatcher.notify());
          dispatcher.start();
        },
        stopping: async () => {
          unsubscribe?.();
          await dispatcher.stop();
        },
        stopped: () => http.close().catch(() => {}),
      };
    },
  });
  return Object.assign(queue, { maxAttempts });
}
