// The queue of analyses after conversations in one process (a durable queue over
// conversation_analyses): in a worker, the runner runs them (run-analysis.ts). Its producer is
// made first (the conversation service queues an analysis with it when a conversation ends), the
// queue last, on that producer; both by src/platform.ts.
import type { Config } from '../../config.ts';
import { DurableQueue, type DurableQueueDeps } from '../../queue/durable-queue.ts';
import { QueueProducer } from '../../queue/producer.ts';
import type { Wakeups } from '../../queue/waker.ts';
import { createAnalysisHandler, type AnalysisHandlerDeps } from './run-analysis.ts';

/** The queue name of the analyses after conversations (its table, wake-up bus and NOTIFY payload). */
const ANALYSES = 'conversation_analyses';

export type AnalysisProducer = QueueProducer<typeof ANALYSES>;

/** What queues analyses and wakes their runners (the conversation service is given it). */
export function analysisProducer(wakeups: Wakeups): AnalysisProducer {
  return new QueueProducer(ANALYSES, wakeups);
}

/** Analyses one worker runs at once: each waits on a model for seconds, and none is urgent. */
export const ANALYSIS_CONCURRENCY = 4;

export interface AnalysisQueueDeps extends DurableQueueDeps {
  config: Pick<Config, 'taskLeaseMs'>;
  /** The producer the conversation service was given (analysisProducer, on the same wake-up bus). */
  producer: AnalysisProducer;
  handler: Omit<AnalysisHandlerDeps, 'now'>;
  /** The wait before attempt n + 1 after a failure (tests shorten it); default exponentialBackoff (1 s, 2 s, 4 s …). */
  backoff?: (attempt: number) => number;
}

export type AnalysisQueue = DurableQueue<typeof ANALYSES>;

export function analysisQueue(deps: AnalysisQueueDeps): AnalysisQueue {
  return new DurableQueue(deps, {
    producer: deps.producer, name: 'analyses', leaseMs: deps.config.taskLeaseMs, concurrency: ANALYSIS_CONCURRENCY, backoff: deps.backoff,
    worker: (now) => ({ handler: createAnalysisHandler({ ...deps.handler, now }) }),
  });
}
