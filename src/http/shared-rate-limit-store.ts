// A store for @fastify/rate-limit whose counts are shared by every API process through the
// database (src/db/rate-limit-counters.ts), without a round trip on most requests.
//
// Fixed windows aligned to multiples of their length (every process agrees on where a window
// starts). A process does not ask the database once per request: it reserves a batch of slots of a
// key's window at once (one INSERT … ON CONFLICT DO UPDATE … RETURNING adds the batch to the
// shared count) and hands them out locally until they run out. A request is admitted only into a
// slot already counted in the database, so the limit is never exceeded across processes; what a
// process reserved and did not use is lost when the window ends. Batches are at most 2% of the
// limit and shrink to one slot as the count nears the limit, so each process can leave at most 2%
// of a key's limit unused: with P processes a key is refused after at least (1 − 0.02·P) × limit
// requests, never after more than the limit. Once a process has seen a key's window full it refuses
// the rest of that window without asking again (counts only grow within a window).
import type { WindowCount } from '../db/rate-limit-counters.ts';

export type AddToWindow = (key: string, windowStart: number, n: number) => Promise<WindowCount>;

interface Slots {
  windowStart: number;
  /** The last slot handed out (the key's count as far as this process has admitted). */
  next: number;
  /** The last slot reserved (next === end: none left). */
  end: number;
  /** The shared count reached the limit when it was last read: nothing more this window. */
  full: boolean;
  /** The reservation in flight, which concurrent requests for the key wait for. */
  reserving?: Promise<void>;
}

/** The largest batch, as a share of the limit. */
const BATCH_SHARE = 0.02;

/** How many slots to reserve of a window whose shared count was last seen at `known`. */
export function batchSize(max: number, known: number): number {
  return Math.max(1, Math.min(Math.floor(max * BATCH_SHARE), Math.floor((max - known) / 4)));
}

type Incr = (error: Error | null, result?: { current: number; ttl: number }) => void;

export class SharedRateLimitStore {
  readonly #keys = new Map<string, Slots>();

  constructor(readonly add: AddToWindow, readonly maxKeys = 10_000, readonly now: () => number = Date.now) {}

  /** The plugin's store interface: count one request for `key`, answer its position and the window's rest. */
  incr(key: string, cb: Incr, timeWindow: number, max: number): void {
    this.take(key, timeWindow, max).then((r) => cb(null, r), (err: unknown) => cb(err instanceof Error ? err : new Error(String(err))));
  }

  /** Every limiter shares this store: their keys differ by prefix. */
  child(): SharedRateLimitStore {
    return this;
  }

  async take(key: string, timeWindow: number, max: number): Promise<{ current: number; ttl: number }> {
    for (;;) {
      const now = this.now();
      const windowStart = Math.floor(now / timeWindow) * timeWindow;
      const ttl = windowStart + timeWindow - now;
      let s = this.#keys.get(key);
      if (!s || s.windowStart !== windowStart) {
        this.#keys.delete(key);
        this.#makeRoom(now, timeWindow);
        s = { windowStart, next: 0, end: 0, full: false };
        this.#keys.set(key, s);
      }
      if (s.next < s.end) return { current: ++s.next, ttl };
      if (s.full) return { current: max + 1, ttl };
      if (s.reserving) {
        await s.reserving;
        continue;
      }
      const slots = s;
      const n = batchSize(max, slots.end);
      let first = 0;
      let counted = 0;
      slots.reserving = this.add(key, windowStart, n).then((r) => {
        counted = r.count;
        first = r.count - n + 1;
        slots.full = r.count >= max;
        // Slots past the limit are never handed out. (When another process's clock runs ahead,
        // the slots were counted in its later window: still counted, so still safe to use.)
        if (first <= max) {
          slots.next = first;
          slots.end = Math.min(r.count, max);
        } else {
          slots.next = slots.end;
        }
      }).finally(() => { slots.reserving = undefined; });
      await slots.reserving;
      if (first >= 1 && first <= max && slots.next === first) return { current: first, ttl };
      return { current: Math.max(counted, max + 1), ttl };
    }
  }

  /** Keys tracked now (tests). */
  get size(): number {
    return this.#keys.size;
  }

  /** Keys are in order of their window's start: ended windows first, then the oldest. */
  #makeRoom(now: number, timeWindow: number): void {
    if (this.#keys.size < this.maxKeys) return;
    for (const [key, s] of this.#keys) {
      if (s.windowStart + timeWindow > now && this.#keys.size < this.maxKeys) break;
      if (!s.reserving) this.#keys.delete(key);
    }
  }
}
