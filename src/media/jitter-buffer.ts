// The receive side's reorder buffer: packets come back in sequence order, duplicates and packets
// that arrive after their turn are dropped, and a missing packet is waited for only briefly.
//
// There is no playout clock here: what a call's audio feeds is a recognizer, not a loudspeaker,
// so a packet in order is released at once (no added delay) and only a gap holds the packets
// behind it — until `depth` of them are waiting or the oldest has waited `maxWaitMs`, after which
// the gap is given up as lost.
import { seqDiff } from './rtp.ts';

/** A jump this far ahead or back is a new sequence (a restarted sender), not loss or misorder. */
const MAX_JUMP = 1000;

export interface JitterStats {
  /** Released in order. */
  released: number;
  /** Arrived after its turn had passed (played or given up). */
  late: number;
  /** Arrived twice while held. */
  duplicate: number;
  /** Never arrived in time (the gaps given up). */
  lost: number;
}

export class JitterBuffer<T> {
  readonly depth: number;
  readonly maxWaitMs: number;
  readonly stats: JitterStats = { released: 0, late: 0, duplicate: 0, lost: 0 };
  private next: number | undefined;
  private readonly held = new Map<number, { item: T; at: number }>();

  /** `depth`: how many packets may wait behind a gap (1–16); `maxWaitMs`: how long the oldest may. */
  constructor(o: { depth: number; maxWaitMs: number }) {
    if (!Number.isInteger(o.depth) || o.depth < 1 || o.depth > 16) throw new RangeError(`jitter buffer depth ${o.depth} is not 1-16`);
    this.depth = o.depth;
    this.maxWaitMs = o.maxWaitMs;
  }

  /** How many packets wait behind a gap now. */
  get size(): number {
    return this.held.size;
  }

  /** Takes a packet; returns those now ready, in order. */
  push(seq: number, item: T, now = Date.now()): T[] {
    const out: T[] = [];
    if (this.next === undefined) this.next = seq;
    const d = seqDiff(seq, this.next);
    if (d < -MAX_JUMP || d > MAX_JUMP) {
      // A new sequence: what waited is released as it is, and counting starts again here.
      this.drain(out);
      this.next = seq;
    } else if (d < 0) {
      this.stats.late++;
      return out;
    }
    if (this.held.has(seq)) {
      this.stats.duplicate++;
      return out;
    }
    this.held.set(seq, { item, at: now });
    this.releaseInOrder(out);
    while (this.held.size > this.depth) this.skipGap(out);
    return out;
  }

  /** Gives up gaps the oldest waiting packet has waited out; returns what that releases. */
  poll(now = Date.now()): T[] {
    const out: T[] = [];
    while (this.held.size > 0 && Math.min(...[...this.held.values()].map((h) => h.at)) <= now - this.maxWaitMs) this.skipGap(out);
    return out;
  }

  /** Forgets everything (a new stream: another SSRC, a moved peer). */
  reset(): void {
    this.held.clear();
    this.next = undefined;
  }

  private releaseInOrder(out: T[]): void {
    while (this.next !== undefined && this.held.has(this.next)) {
      out.push(this.held.get(this.next)!.item);
      this.held.delete(this.next);
      this.stats.released++;
      this.next = (this.next + 1) & 0xffff;
    }
  }

  /** Moves past the gap before the earliest held packet and releases what follows it in order. */
  private skipGap(out: T[]): void {
    if (this.next === undefined || this.held.size === 0) return;
    const base = this.next;
    let first = -1;
    let firstD = Infinity;
    for (const s of this.held.keys()) {
      const d = seqDiff(s, base);
      if (d < firstD) { firstD = d; first = s; }
    }
    this.stats.lost += Math.max(0, firstD);
    this.next = first;
    this.releaseInOrder(out);
  }

  /** Releases everything held, in order, counting the gaps between as lost. */
  private drain(out: T[]): void {
    while (this.held.size > 0) this.skipGap(out);
  }
}
