// The task queue of one process, in two parts that src/platform.ts builds apart:
// - TaskQueueCore: the engine the API uses for transitions (cancel, carrier status callbacks), the
//   cache of who gets task events, the process's wake-up bus it signals on insert, and this
//   process's runner once one runs (so that a cancel or a status callback reaches the task it
//   runs). The task service and the Twilio callbacks take this part.
// - TaskQueue: the core with what a claimed task does (its carrier, what a sent text does); a
//   worker process starts the runner through it.
// They are two because a task's carriers need what is built on the core: a SIP call talks through
// the agent, and the agent's tools add tasks through the task service (docs/architecture.md,
// "Construction").
import type { Config } from '../../config.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import type { CarrierOptions } from '../../providers/index.ts';
import type { QueueEngine } from '../../queue/engine.ts';
import { errorText, newWorkerId, QueueRunner, type QueueProcessDeps, type RunnerOptions } from '../../queue/runner.ts';
import type { Wakeups } from '../../queue/waker.ts';
import { createTaskHandler, type TaskHandlerDeps } from './run-task.ts';
import { createTaskEngine, TASKS, type PlanAllowance } from './queue-hooks.ts';
import { taskSubscribers, type TaskSubscribers } from './subscribers.ts';

export interface TaskQueueCoreDeps extends QueueProcessDeps {
  config: Config;
  /** What organizations' plans let their tasks use, read in every claim (billing's planAllowance over its cached entitlements). */
  allowance: PlanAllowance;
  /** Longest the runner sleeps without a wakeup (default 1 s); tests lengthen it to prove wakeups work. */
  pollMs?: number;
}

export class TaskQueueCore {
  readonly wakeups: Wakeups;
  readonly engine: QueueEngine<'tasks'>;
  readonly workerId: string;
  /** Which organizations get task events, cached for every transaction of this process (./subscribers.ts). */
  readonly subscribers: TaskSubscribers;
  #runner: QueueRunner<'tasks'> | undefined;

  constructor(readonly deps: TaskQueueCoreDeps) {
    this.wakeups = deps.wakeups;
    this.workerId = newWorkerId();
    this.subscribers = taskSubscribers(deps.database.db);
    this.engine = createTaskEngine({
      workerId: this.workerId, subscribers: this.subscribers, leaseMs: deps.leaseMs ?? deps.config.taskLeaseMs, now: deps.now,
      serialWrites: deps.database.serialWrites, allowance: deps.allowance,
    });
  }

  get running(): number {
    return this.#runner?.running ?? 0;
  }

  /** Starts claiming tasks in this process, each run by `handler` (TaskQueue.startWorker). */
  start(handler: RunnerOptions<'tasks'>['handler']): void {
    if (this.#runner) return;
    const { database, config, log } = this.deps;
    this.#runner = new QueueRunner({
      engine: this.engine,
      db: database.db,
      writers: database.concurrentWriters,
      handler,
      concurrency: config.workerConcurrency,
      wakeups: this.wakeups,
      heartbeatMs: this.deps.heartbeatMs,
      rescueEveryMs: this.deps.rescueEveryMs,
      pollMs: this.deps.pollMs,
      isCancelRequested: (row) => row.cancel_requested_at !== null,
      errorPatch: (err) => ({ error: errorText(err) }),
      log,
    });
    this.#runner.start();
  }

  /** New or rescheduled tasks are due: wake this process's runner now. */
  notify(): void {
    this.wakeups.emit(TASKS);
  }

  /** Ends a task this process is running (a cancel request); false when it runs elsewhere or not at all. */
  cancelLocal(id: string): boolean {
    return this.#runner?.cancel(id) ?? false;
  }

  /** A task this process may be running was settled elsewhere (a carrier callback): free its slot now. */
  settled(id: string): boolean {
    return this.#runner?.release(id) ?? false;
  }

  async stop(): Promise<void> {
    await this.#runner?.stop();
    this.#runner = undefined;
  }
}

export interface TaskQueueDeps {
  box: SecretBox;
  carrierOptions?: CarrierOptions;
  /** What the job does with a text its carrier accepted (records it in the person's conversation). */
  textSent?: TaskHandlerDeps['textSent'];
  /** What a call task does when a voicemail answers. */
  voicemailPlan?: TaskHandlerDeps['voicemailPlan'];
  /** Writes a text task's text when it has no content (the agent's model). */
  composeText?: TaskHandlerDeps['composeText'];
}

export class TaskQueue {
  constructor(readonly core: TaskQueueCore, readonly deps: TaskQueueDeps) {}

  get engine(): QueueEngine<'tasks'> {
    return this.core.engine;
  }

  get running(): number {
    return this.core.running;
  }

  /** Starts claiming and running tasks in this process. */
  async startWorker(): Promise<void> {
    const { database, config, log } = this.core.deps;
    this.core.start(createTaskHandler({
      db: database.db, box: this.deps.box, config, carrierOptions: this.deps.carrierOptions, textSent: this.deps.textSent, voicemailPlan: this.deps.voicemailPlan, composeText: this.deps.composeText, log,
    }));
  }

  /** New or rescheduled tasks are due: wake this process's runner now. */
  notify(): void {
    this.core.notify();
  }

  async stop(): Promise<void> {
    await this.core.stop();
  }
}
