// The task queue of one process: a durable queue over tasks with the task engine's hooks
// (queue-hooks.ts) and the cache of who gets task events. It is built first and its worker, what a
// claimed task does (its carrier, what a sent text does), is joined to it last (taskWorker): a
// task's carriers need what is built on the queue, since a SIP call talks through the agent and
// the agent's tools add tasks through the task service (docs/architecture.md, "Construction").
// A cancel or a carrier's status callback reaches the task this process runs through it.
import type { Config } from '../../config.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import type { CarrierOptions } from '../../providers/index.ts';
import type { Db } from '../../db/types.ts';
import { DurableQueue, type DurableQueueDeps, type WorkerFactory } from '../../queue/durable-queue.ts';
import { QueueProducer } from '../../queue/producer.ts';
import { errorText } from '../../queue/runner.ts';
import { createTaskHandler, type TaskHandlerDeps } from './run-task.ts';
import { createTaskEngine, TASKS, type PlanAllowance } from './queue-hooks.ts';
import { taskSubscribers, type TaskSubscribers } from './subscribers.ts';

export interface TaskQueueDeps extends DurableQueueDeps {
  config: Config;
  /** What organizations' plans let their tasks use, read in every claim (billing's planAllowance over its cached entitlements). */
  allowance: PlanAllowance;
}

export type TaskQueue = DurableQueue<typeof TASKS> & {
  /** Which organizations get task events, cached for every transaction of this process (./subscribers.ts). */
  readonly subscribers: TaskSubscribers;
};

export function taskQueue(deps: TaskQueueDeps): TaskQueue {
  const subscribers = taskSubscribers(deps.database.db);
  const queue = new DurableQueue(deps, {
    producer: new QueueProducer(TASKS, deps.wakeups), leaseMs: deps.config.taskLeaseMs, concurrency: deps.config.workerConcurrency,
    engine: (base) => createTaskEngine({ ...base, subscribers, allowance: deps.allowance }),
    isCancelRequested: (row) => row.cancel_requested_at !== null,
    errorPatch: (err) => ({ error: errorText(err) }),
  });
  return Object.assign(queue, { subscribers });
}

export interface TaskWorkerDeps {
  db: Db;
  config: Config;
  box: SecretBox;
  carrierOptions?: CarrierOptions;
  /** What the job does with a text its carrier accepted (records it in the person's conversation). */
  textSent?: TaskHandlerDeps['textSent'];
  /** What a call task does when a voicemail answers. */
  voicemailPlan?: TaskHandlerDeps['voicemailPlan'];
  /** Writes a text task's text when it has no content (the agent's model). */
  composeText?: TaskHandlerDeps['composeText'];
  /** The agent's AI disclosure, which starts a text task's text. */
  textDisclosure?: TaskHandlerDeps['textDisclosure'];
  /** The latest conversation of a task since a time: what an attempt records as its conversation. */
  conversationOf?: TaskHandlerDeps['conversationOf'];
  /** A SIMULATED call's conversation with a simulated caller. */
  simulatedCall?: TaskHandlerDeps['simulatedCall'];
  log?: TaskHandlerDeps['log'];
}

/** What a worker does with a claimed task (TaskQueue.join). */
export function taskWorker(deps: TaskWorkerDeps): WorkerFactory<typeof TASKS> {
  return (now) => ({ handler: createTaskHandler({ ...deps, now }) });
}
