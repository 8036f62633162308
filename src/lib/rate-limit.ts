// Rate limits kept in this process's memory: fixed-window counters per key, bounded in how many
// keys they track. A deployment of several processes behind a load balancer gives each process
// its own counters, so the effective limit is the limit times the number of processes.
import ipaddr from 'ipaddr.js';

export type Admission = { ok: true } | { ok: false; retryAfterMs: number };

export class FixedWindowLimiter {
  /** Per key: when its window started and how many events it counted. In order of window start. */
  readonly #windows = new Map<string, { start: number; count: number }>();

  /**
   * At most `limit` events per key in each window of `windowMs`. At most `maxKeys` keys are
   * tracked: when full, expired windows are dropped first, then the oldest (which forgets that
   * key's count: memory stays bounded under a flood of keys, each of which is itself limited).
   */
  constructor(readonly limit: number, readonly windowMs: number, readonly maxKeys = 10_000) {
    if (limit < 1 || windowMs < 1 || maxKeys < 1) throw new Error('a limiter needs a positive limit, window and size');
  }

  /** How long until `key` may count one more event (0: now), without counting it. */
  wait(key: string, now: number): number {
    const w = this.#windows.get(key);
    if (!w || now - w.start >= this.windowMs || w.count < this.limit) return 0;
    return w.start + this.windowMs - now;
  }

  /** Counts one event for `key`, or refuses it (uncounted) when the key's window is full. */
  take(key: string, now: number): Admission {
    const wait = this.wait(key, now);
    if (wait > 0) return { ok: false, retryAfterMs: wait };
    let w = this.#windows.get(key);
    if (!w || now - w.start >= this.windowMs) {
      this.#windows.delete(key);
      this.#makeRoom(now);
      w = { start: now, count: 0 };
      this.#windows.set(key, w);
    }
    w.count++;
    return { ok: true };
  }

  /** Keys tracked now (for tests and metrics). */
  get size(): number {
    return this.#windows.size;
  }

  /** Windows are kept in order of start: expired ones are at the front, then the oldest live ones. */
  #makeRoom(now: number): void {
    if (this.#windows.size < this.maxKeys) return;
    for (const [key, w] of this.#windows) {
      if (now - w.start < this.windowMs && this.#windows.size < this.maxKeys) break;
      this.#windows.delete(key);
    }
  }
}

/**
 * Counts one event on every (limiter, key) pair, or on none: refused when any of them is full,
 * with the longest wait among the full ones.
 */
export function admitAll(now: number, ...checks: Array<[FixedWindowLimiter, string]>): Admission {
  const wait = Math.max(0, ...checks.map(([l, k]) => l.wait(k, now)));
  if (wait > 0) return { ok: false, retryAfterMs: wait };
  for (const [l, k] of checks) l.take(k, now);
  return { ok: true };
}

/**
 * The bucket a client address counts in: an IPv4 address itself (IPv4-mapped IPv6 included), an
 * IPv6 address's /64 (one subscriber usually holds a whole /64, so single addresses would be free).
 */
export function addressBucket(ip: string): string {
  try {
    let addr = ipaddr.parse(ip);
    if (addr instanceof ipaddr.IPv6 && addr.isIPv4MappedAddress()) addr = addr.toIPv4Address();
    if (addr instanceof ipaddr.IPv6) return `${addr.toNormalizedString().split(':').slice(0, 4).join(':')}::/64`;
    return addr.toString();
  } catch {
    return ip;
  }
}
