// The queue of analyses after conversations in one process: the engine over conversation_analyses,
// woken through the process's wake-up bus, and, in a worker, the runner that runs them
// (run-analysis.ts). Built once per process by src/platform.ts.
import type { Config } from '../../config.ts';
import type { QueueState } from '../../db/types.ts';
import { exponentialBackoff, QueueEngine } from '../../queue/engine.ts';
import { lastErrorPatch, newWorkerId, type QueueProcessDeps, QueueRunner } from '../../queue/runner.ts';
import type { Wakeups } from '../../queue/waker.ts';
import { createAnalysisHandler, type AnalysisHandlerDeps } from './run-analysis.ts';
import { ANALYSES } from './service.ts';

/** Analyses one worker runs at once: each waits on a model for seconds, and none is urgent. */
export const ANALYSIS_CONCURRENCY = 4;

function stamp({ to, now }: { from: QueueState; to: QueueState; now: number }) {
  const set: Record<string, unknown> = { updated_at: now };
  if (to === 'finished' || to === 'failed' || to === 'canceled') set.finished_at = now;
  return set;
}

export interface AnalysisQueueDeps extends QueueProcessDeps {
  config: Pick<Config, 'taskLeaseMs'>;
  handler: Omit<AnalysisHandlerDeps, 'now'>;
  /** The wait before attempt n + 1 after a failure (tests shorten it); default exponentialBackoff (1 s, 2 s, 4 s …). */
  backoff?: (attempt: number) => number;
}

export class AnalysisQueue {
  readonly wakeups: Wakeups;
  readonly engine: QueueEngine<'conversation_analyses'>;
  #runner: QueueRunner<'conversation_analyses'> | undefined;

  constructor(readonly deps: AnalysisQueueDeps) {
    this.wakeups = deps.wakeups;
    this.engine = new QueueEngine({
      table: ANALYSES, workerId: newWorkerId('analyses'), leaseMs: deps.leaseMs ?? deps.config.taskLeaseMs, now: deps.now, stamp,
      serialWrites: deps.database.serialWrites, backoff: deps.backoff,
    });
  }

  /** Starts running analyses in this process (worker roles). */
  startWorker(): void {
    if (this.#runner) return;
    const { database, log, handler } = this.deps;
    const backoff = this.deps.backoff ?? exponentialBackoff;
    this.#runner = new QueueRunner({
      engine: this.engine,
      db: database.db,
      writers: database.concurrentWriters,
      handler: createAnalysisHandler({ ...handler, now: this.engine.now }),
      concurrency: ANALYSIS_CONCURRENCY,
      wakeups: this.wakeups,
      heartbeatMs: this.deps.heartbeatMs,
      rescueEveryMs: this.deps.rescueEveryMs,
      backoff: (row) => backoff(row.attempt),
      errorPatch: lastErrorPatch,
      log,
    });
    this.#runner.start();
  }

  notify(): void {
    this.wakeups.emit(ANALYSES);
  }

  async stop(opts: { timeoutMs?: number } = {}): Promise<void> {
    await this.#runner?.stop(opts);
    this.#runner = undefined;
  }
}
