// The conversation-turn queue of one process (a durable queue over conversation_turns): in a
// worker, the runner runs turns (run-turn.ts). Its producer is made first (the conversation
// service queues turns with it), the queue last, on that producer; both by src/platform.ts.
import type { Config } from '../../config.ts';
import { DurableQueue, type DurableQueueDeps } from '../../queue/durable-queue.ts';
import { QueueProducer } from '../../queue/producer.ts';
import type { Wakeups } from '../../queue/waker.ts';
import { createTurnHandler, type TurnHandlerDeps } from './run-turn.ts';

/** The queue name of conversation turns (its table, wake-up bus and NOTIFY payload). */
const TURNS = 'conversation_turns';

export type TurnProducer = QueueProducer<typeof TURNS>;

/** What queues turns and wakes their runners (the conversation service is given it). */
export function turnProducer(wakeups: Wakeups): TurnProducer {
  return new QueueProducer(TURNS, wakeups);
}

export interface TurnQueueDeps extends DurableQueueDeps {
  config: Pick<Config, 'turnConcurrency' | 'taskLeaseMs'>;
  /** The producer the conversation service was given (turnProducer, on the same wake-up bus). */
  producer: TurnProducer;
  /** What the job runs with (the conversation service, the turn runner, the text carrier). */
  handler: Omit<TurnHandlerDeps, 'now'>;
}

export type TurnQueue = DurableQueue<typeof TURNS>;

export function turnQueue(deps: TurnQueueDeps): TurnQueue {
  return new DurableQueue(deps, {
    producer: deps.producer, name: 'turns', leaseMs: deps.config.taskLeaseMs, concurrency: deps.config.turnConcurrency,
    worker: (now) => ({ handler: createTurnHandler({ ...deps.handler, now }) }),
  });
}
