// Which organizations have a `task` subscription: asked by every transaction that changes tasks,
// since only those organizations get outbox events (taskRepo.writeEvents). Subscriptions change
// when one is added or removed, tasks change all the time, so each organization's answer is kept
// while the webhooks and accounts tables are unchanged (src/db/stamped-cache.ts: this process's
// writes move the stamp as they commit; another process's on PostgreSQL as its change
// notification arrives, and a subscription saved through the API is answered only once the
// notification went out). Without a stamp (none yet on PostgreSQL) every call asks the database.
import type { Db, Executor } from '../../db/types.ts';
import { StampedCache } from '../../db/stamped-cache.ts';
import { subscriptionRepo } from '../webhooks/subscriptions/repository.ts';

export interface TaskSubscribers {
  /** Those of `orgIds` with a task subscription; what is not cached is read through `tx`. */
  among(tx: Executor, orgIds: readonly number[]): Promise<ReadonlySet<number>>;
}

/** Asks the database every time: what the cache below reads through, and for one-off writers (a benchmark's bulk insert). */
export const uncachedSubscribers: TaskSubscribers = {
  async among(tx, orgIds) {
    return new Set((await subscriptionRepo.ofType(tx, orgIds, 'task')).map((s) => s.org_id));
  },
};

export function taskSubscribers(db: Db): TaskSubscribers {
  // accounts too: deleting an organization deletes its subscriptions by cascade, unseen by a stamp of webhooks.
  const cache = StampedCache.for<number, boolean>(db, ['webhooks', 'accounts']);
  return {
    async among(tx, orgIds) {
      const stamp = cache?.stamp();
      const subscribed = new Set<number>();
      const unknown: number[] = [];
      for (const id of orgIds) {
        const known = cache?.get(id, stamp!);
        if (known === undefined) unknown.push(id);
        else if (known) subscribed.add(id);
      }
      if (unknown.length === 0) return subscribed;
      const found = await uncachedSubscribers.among(tx, unknown);
      for (const id of unknown) {
        cache?.set(id, found.has(id), stamp!);
        if (found.has(id)) subscribed.add(id);
      }
      return subscribed;
    },
  };
}
