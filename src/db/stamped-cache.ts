// A bounded map whose entries hold while a change stamp of the tables they were read from
// (changeStamp in ./index.ts, per engine in ./change-stamps.ts) stays the same: rows read on nearly
// every request and rarely written.
import { changeStamp, type ChangeStamp } from './index.ts';
import type { Db } from './types.ts';

export class StampedCache<K, V> {
  readonly #entries = new Map<K, V>();
  #stamp = '';

  constructor(readonly stamp: ChangeStamp, readonly max = 10_000) {}

  static for<K, V>(db: Db, tables: readonly string[], max?: number): StampedCache<K, V> | undefined {
    const stamp = changeStamp(db, tables);
    return stamp ? new StampedCache<K, V>(stamp, max) : undefined;
  }

  /** The entry for `key` if nothing may have changed since it was stored; `stamp` is this.stamp(), taken now. */
  get(key: K, stamp: string): V | undefined {
    this.#renew(stamp);
    return this.#entries.get(key);
  }

  has(key: K, stamp: string): boolean {
    this.#renew(stamp);
    return this.#entries.has(key);
  }

  /** Keeps a value read at `stamp`, unless a write may have happened since (the read is then stale). */
  set(key: K, value: V, stamp: string): void {
    if (this.stamp() !== stamp) return;
    this.#renew(stamp);
    if (this.#entries.size >= this.max) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(key, value);
  }

  #renew(stamp: string): void {
    if (stamp === this.#stamp) return;
    this.#entries.clear();
    this.#stamp = stamp;
  }
}
