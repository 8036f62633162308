// The number-release queue of one process: the engine over number_releases, woken through the
// process's wake-up bus, and, in a worker, the runner that releases numbers (release-number.ts).
// Built once per process by src/platform.ts.
import type { QueueState } from '../../db/types.ts';
import { QueueEngine } from '../../queue/engine.ts';
import { lastErrorPatch, newWorkerId, type QueueProcessDeps, QueueRunner } from '../../queue/runner.ts';
import type { Wakeups } from '../../queue/waker.ts';
import { createReleaseHandler, type ReleaseHandlerDeps } from './release-number.ts';
import { NUMBER_RELEASES } from './releases.ts';

function stamp({ to, now }: { from: QueueState; to: QueueState; now: number }) {
  const set: Record<string, unknown> = { updated_at: now };
  if (to === 'finished' || to === 'failed' || to === 'canceled') set.finished_at = now;
  return set;
}

export interface NumberReleaseQueueDeps extends QueueProcessDeps {
  /** What the job runs with (the providers' settings and adapters); `now` is the queue's clock. */
  handler: Omit<ReleaseHandlerDeps, 'now'>;
  /** Releases run at once by one process. Default 2. */
  concurrency?: number;
}

export class NumberReleaseQueue {
  readonly wakeups: Wakeups;
  readonly engine: QueueEngine<typeof NUMBER_RELEASES>;
  #runner: QueueRunner<typeof NUMBER_RELEASES> | undefined;

  constructor(readonly deps: NumberReleaseQueueDeps) {
    this.wakeups = deps.wakeups;
    this.engine = new QueueEngine({
      table: NUMBER_RELEASES, workerId: newWorkerId('number-releases'), leaseMs: deps.leaseMs ?? 60_000, now: deps.now, stamp,
      serialWrites: deps.database.serialWrites,
    });
  }

  /** Starts releasing numbers in this process (worker roles). */
  startWorker(): void {
    if (this.#runner) return;
    const { database, log, handler } = this.deps;
    this.#runner = new QueueRunner({
      engine: this.engine,
      db: database.db,
      writers: database.concurrentWriters,
      handler: createReleaseHandler({ ...handler, now: this.engine.now }),
      concurrency: this.deps.concurrency ?? 2,
      wakeups: this.wakeups,
      heartbeatMs: this.deps.heartbeatMs,
      rescueEveryMs: this.deps.rescueEveryMs,
      errorPatch: lastErrorPatch,
      log,
    });
    this.#runner.start();
  }

  notify(): void {
    this.wakeups.emit(NUMBER_RELEASES);
  }

  async stop(opts: { timeoutMs?: number } = {}): Promise<void> {
    await this.#runner?.stop(opts);
    this.#runner = undefined;
  }
}
