// Wakeups for idle runners: an in-process signal, PostgreSQL LISTEN/NOTIFY as a hint between
// processes, and the sleep primitive runners wait on. Hints may be lost (a dropped LISTEN
// connection); runners also poll, so a lost hint only costs latency, never work.
import pg from 'pg';
import { sql } from 'kysely';
import type { Dialect, Executor } from '../db/types.ts';

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
 * before the rows are visible. SQLite has no other process to tell.
 */
export async function notifyQueue(ex: Executor, dialect: Dialect, queue: string): Promise<void> {
  if (dialect !== 'postgres') return;
  await sql`select pg_notify(${QUEUE_CHANNEL}, ${queue})`.execute(ex);
}

export interface QueueListener {
  close(): Promise<void>;
}

/**
 * LISTENs on a dedicated connection (a pooled one would drop the subscription when returned) and
 * forwards each notification to `wakeups`. Reconnects after a failure and then wakes every queue,
 * since notifications sent while disconnected are gone.
 */
export async function listenForWakeups(opts: {
  databaseUrl: string;
  wakeups: Wakeups;
  channel?: string;
  reconnectMs?: number;
  log?: { warn(obj: object, msg: string): void };
}): Promise<QueueListener> {
  const channel = opts.channel ?? QUEUE_CHANNEL;
  let client: pg.Client | undefined;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;

  const connect = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: opts.databaseUrl });
    c.on('notification', (msg) => opts.wakeups.emit(msg.payload || undefined));
    c.on('error', (err) => {
      opts.log?.warn({ err }, 'queue listener connection failed; reconnecting');
      void c.end().catch(() => {});
      if (client === c) client = undefined;
      schedule();
    });
    c.on('end', () => {
      if (client === c) client = undefined;
      schedule();
    });
    await c.connect();
    await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
    if (closed) {
      await c.end().catch(() => {});
      return;
    }
    client = c;
  };
  const schedule = () => {
    if (closed || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      connect().then(() => opts.wakeups.emit(), (err) => {
        opts.log?.warn({ err }, 'queue listener reconnect failed');
        schedule();
      });
    }, opts.reconnectMs ?? 1000);
    timer.unref();
  };

  await connect();
  return {
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      const c = client;
      client = undefined;
      await c?.end().catch(() => {});
    },
  };
}
