// The queue of analyses after conversations in one process (a durable queue over
// conversation_analyses): in a worker, the runner runs them (run-analysis.ts). Built once per
// process by src/platform.ts.
import type { Config } from '../../config.ts';
import { DurableQueue, type DurableQueueDeps } from '../../queue/durable-queue.ts';
import { createAnalysisHandler, type AnalysisHandlerDeps } from './run-analysis.ts';
import { ANALYSES } from './service.ts';

/** Analyses one worker runs at once: each waits on a model for seconds, and none is urgent. */
export const ANALYSIS_CONCURRENCY = 4;

export interface AnalysisQueueDeps extends DurableQueueDeps {
  config: Pick<Config, 'taskLeaseMs'>;
  handler: Omit<AnalysisHandlerDeps, 'now'>;
  /** The wait before attempt n + 1 after a failure (tests shorten it); default exponentialBackoff (1 s, 2 s, 4 s …). */
  backoff?: (attempt: number) => number;
}

export type AnalysisQueue = DurableQueue<typeof ANALYSES>;

export function analysisQueue(deps: AnalysisQueueDeps): AnalysisQueue {
  return new DurableQueue(deps, {
    table: ANALYSES, name: 'analyses', leaseMs: deps.config.taskLeaseMs, concurrency: ANALYSIS_CONCURRENCY, backoff: deps.backoff,
    worker: (now) => ({ handler: createAnalysisHandler({ ...deps.handler, now }) }),
  });
}
