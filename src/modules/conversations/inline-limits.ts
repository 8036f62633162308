// What an organization's inline model turns may take (issue 33): the turns answered in the request
// that brought them (the staging test chat, the web chat page) run a model call at once, outside
// the turn queue and its per-process concurrency, so each organization is limited in how many run
// at once and how many start per minute (CALLPLANE_INLINE_TURNS_CONCURRENT,
// CALLPLANE_INLINE_TURNS_PER_MINUTE; docs/conversations.md, "Inline turns: limits"). A turn past a
// limit is refused with 429 and Retry-After before any model call. Kept per process: with several
// API processes each enforces the limits on the requests it serves.
import { TooManyRequests } from '../../http/errors.ts';
import { FixedWindowLimiter } from '../../lib/rate-limit.ts';

export interface InlineTurnLimitsOptions {
  /** Inline turns one organization may have running at once. */
  concurrent: number;
  /** Inline turns one organization may start per minute. */
  perMinute: number;
  /** Organizations tracked at most by the rate limiter. */
  trackedKeys?: number;
}

/** When a concurrency refusal asks the caller to try again (a turn takes seconds). */
const BUSY_RETRY_MS = 2000;

export class InlineTurnLimits {
  readonly #running = new Map<number, number>();
  readonly #rate: FixedWindowLimiter;

  constructor(readonly opts: InlineTurnLimitsOptions) {
    this.#rate = new FixedWindowLimiter(opts.perMinute, 60_000, opts.trackedKeys ?? 10_000);
  }

  /** Admits one inline turn of the organization (429 past a limit); the answer ends it. */
  admit(orgId: number, now: number): () => void {
    const running = this.#running.get(orgId) ?? 0;
    if (running >= this.opts.concurrent) {
      throw new TooManyRequests(`This organization already has ${running} inline model turn(s) running (at most ${this.opts.concurrent} at once): try again when one has answered`, BUSY_RETRY_MS);
    }
    const admitted = this.#rate.take(String(orgId), now);
    if (!admitted.ok) {
      throw new TooManyRequests(`This organization started ${this.opts.perMinute} inline model turns in the last minute (at most ${this.opts.perMinute} a minute): try again later`, admitted.retryAfterMs);
    }
    this.#running.set(orgId, running + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const n = (this.#running.get(orgId) ?? 1) - 1;
      if (n <= 0) this.#running.delete(orgId); else this.#running.set(orgId, n);
    };
  }
}
