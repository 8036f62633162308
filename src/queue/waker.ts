// Wakeups for idle runners: an in-process signal, PostgreSQL LISTEN/NOTIFY as a hint between
// processes, and the sleep primitive runners wait on. Hints may be lost (a dropped LISTEN
// connection); runners also poll, so a lost hint only costs latency, never work.
import { notify, type Database, type Listener } from '../db/index.ts';
import type { Executor } from '../db/types.ts';

export const QUEUE_CHANNEL = 'callplane_queue';

/**
 * One sleeper's alarm clock. A notify() that arrives while nobody waits is remembered, so a row
 * inserted between a runner's claim and its next wait() is not missed.
 */
export class Waker {
  #pending = false;
  #wake: (() => void) | undefined;

  notify(): void {
    this.#pending = true;
    this.#wake?.();
  }

  /** Resolves on notify() (or one already pending) or after `ms`, whichever comes first. */
  wait(ms: number): Promise<'notified' | 'timeout'> {
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve('notified');
    }
    return new Promise((resolve) => {
      const finish = (why: 'notified' | 'timeout') => {
        clearTimeout(timer);
        this.#wake = undefined;
        this.#pending = false;
        resolve(why);
      };
      const timer = setTimeout(() => finish('timeout'), Math.max(0, Math.min(ms, 2 ** 31 - 1)));
      this.#wake = () => finish('notified');
    });
  }
}

/**
 * The process-wide fan-out: producers say "queue X has due work" and every runner of X wakes.
 * Runners subscribe with the queue's table name.
 */
export class Wakeups {
  readonly #subscribers = new Map<string, Set<() => void>>();

  on(queue: string, fn: () => void): () => void {
    let set = this.#subscribers.get(queue);
    if (!set) this.#subscribers.set(queue, (set = new Set()));
    set.add(fn);
    return () => void set.delete(fn);
  }

  /** Wakes the runners of `queue`, or of every queue when none is named. */
  emit(queue?: string): void {
    const sets = queue ? [this.#subscribers.get(queue)] : [...this.#subscribers.values()];
    for (const set of sets) for (const fn of set ?? []) fn();
  }
}

/**
 * Tells other processes that `queue` has due work. Call it inside the transaction that inserted
 * or rescheduled the rows: PostgreSQL delivers NOTIFY only on commit, so listeners never wake
 * before the rows are visible. On SQLite (one process) it reaches only this process's own listener,
 * which wakes runners the in-process signal has already woken: a spare wake-up, never a lost one
 * (src/db/index.ts).
 */
export async function notifyQueue(ex: Executor, queue: string): Promise<void> {
  await notify(ex, QUEUE_CHANNEL, queue);
}

/**
 * Forwards the database's queue notifications from other processes to `wakeups`, and wakes every
 * queue after a reconnect (hints sent meanwhile are lost).
 */
export function listenForWakeups(database: Pick<Database, 'listen'>, wakeups: Wakeups, log?: { warn(obj: object, msg: string): void }): Promise<Listener> {
  return database.listen(QUEUE_CHANNEL, {
    onNotify: (payload) => wakeups.emit(payload),
    onReconnect: () => wakeups.emit(),
    log,
  });
}
