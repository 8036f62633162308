// The producers' side of one durable queue: what tells its runners that rows are due, in every
// process. A service that adds rows to a queue built after it (the conversation service adds
// turns and analyses; their queues are built once the services their handlers use exist) is given
// the queue's producer, made first; the queue is then built on the same producer
// (DurableQueue's spec.producer), so the queue's name and its wake-up are written in one place.
import type { Transaction } from 'kysely';
import type { DB, Db } from '../db/types.ts';
import { notifyQueue, type Wakeups } from './waker.ts';

export class QueueProducer<T extends string = string> {
  constructor(readonly table: T, readonly wakeups: Wakeups) {}

  /**
   * Writes rows in one transaction and wakes the runners of every process: NOTIFY in the
   * transaction (delivered on commit), this process's bus after the commit. Nothing is woken
   * when `due` says the write added no due rows (default: `write` returned a falsy value).
   */
  async enqueue<R>(db: Db, write: (tx: Transaction<DB>) => Promise<R>, due: (written: R) => boolean = Boolean): Promise<R> {
    let added = false;
    const out = await db.transaction().execute(async (tx) => {
      const r = await write(tx);
      added = due(r);
      if (added) await this.announce(tx);
      return r;
    });
    if (added) this.notify();
    return out;
  }

  /** Tells other processes, in the transaction that added or rescheduled rows, that the queue has due work. */
  announce(tx: Transaction<DB>): Promise<void> {
    return notifyQueue(tx, this.table);
  }

  /** New or rescheduled rows are due: wake this process's runners now. */
  notify(): void {
    this.wakeups.emit(this.table);
  }
}
