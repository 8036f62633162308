// The conversation-turn queue of one process: the engine over conversation_turns, woken through
// the process's wake-up bus, and, in a worker, the runner that runs turns (run-turn.ts). Built
// once per process by src/platform.ts.
import type { Config } from '../../config.ts';
import type { QueueState } from '../../db/types.ts';
import { QueueEngine } from '../../queue/engine.ts';
import { lastErrorPatch, newWorkerId, type QueueProcessDeps, QueueRunner } from '../../queue/runner.ts';
import type { Wakeups } from '../../queue/waker.ts';
import { createTurnHandler, type TurnHandlerDeps } from './run-turn.ts';
import { TURNS } from './service.ts';

function stamp({ to, now }: { from: QueueState; to: QueueState; now: number }) {
  const set: Record<string, unknown> = { updated_at: now };
  if (to === 'finished' || to === 'failed' || to === 'canceled') set.finished_at = now;
  return set;
}

export interface TurnQueueDeps extends QueueProcessDeps {
  config: Pick<Config, 'turnConcurrency' | 'taskLeaseMs'>;
  /** What the job runs with (the conversation service, the turn runner, the text carrier). */
  handler: Omit<TurnHandlerDeps, 'now'>;
}

export class TurnQueue {
  readonly wakeups: Wakeups;
  readonly engine: QueueEngine<'conversation_turns'>;
  #runner: QueueRunner<'conversation_turns'> | undefined;

  constructor(readonly deps: TurnQueueDeps) {
    this.wakeups = deps.wakeups;
    this.engine = new QueueEngine({
      table: TURNS, workerId: newWorkerId('turns'), leaseMs: deps.leaseMs ?? deps.config.taskLeaseMs, now: deps.now, stamp,
      serialWrites: deps.database.serialWrites,
    });
  }

  /** Starts running turns in this process (worker roles). */
  startWorker(): void {
    if (this.#runner) return;
    const { database, config, log, handler } = this.deps;
    this.#runner = new QueueRunner({
      engine: this.engine,
      db: database.db,
      writers: database.concurrentWriters,
      handler: createTurnHandler({ ...handler, now: this.engine.now }),
      concurrency: config.turnConcurrency,
      wakeups: this.wakeups,
      heartbeatMs: this.deps.heartbeatMs,
      rescueEveryMs: this.deps.rescueEveryMs,
      errorPatch: lastErrorPatch,
      log,
    });
    this.#runner.start();
  }

  notify(): void {
    this.wakeups.emit(TURNS);
  }

  async stop(opts: { timeoutMs?: number } = {}): Promise<void> {
    await this.#runner?.stop(opts);
    this.#runner = undefined;
  }
}
