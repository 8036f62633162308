// The conversation-turn queue of one process (a durable queue over conversation_turns): in a
// worker, the runner runs turns (run-turn.ts). Built once per process by src/platform.ts.
import type { Config } from '../../config.ts';
import { DurableQueue, type DurableQueueDeps } from '../../queue/durable-queue.ts';
import { createTurnHandler, type TurnHandlerDeps } from './run-turn.ts';
import { TURNS } from './service.ts';

export interface TurnQueueDeps extends DurableQueueDeps {
  config: Pick<Config, 'turnConcurrency' | 'taskLeaseMs'>;
  /** What the job runs with (the conversation service, the turn runner, the text carrier). */
  handler: Omit<TurnHandlerDeps, 'now'>;
}

export type TurnQueue = DurableQueue<typeof TURNS>;

export function turnQueue(deps: TurnQueueDeps): TurnQueue {
  return new DurableQueue(deps, {
    table: TURNS, name: 'turns', leaseMs: deps.config.taskLeaseMs, concurrency: deps.config.turnConcurrency,
    worker: (now) => ({ handler: createTurnHandler({ ...deps.handler, now }) }),
  });
}
