// Group commit: concurrent small writes of one kind share a transaction. Jobs submitted while a
// group is being written wait for the next one, and the next one starts as soon as the previous
// commits, so under load each commit carries every request that arrived meanwhile and, when idle,
// a lone job waits only for one turn of the event loop. On SQLite the commit (a WAL append, and
// the periodic checkpoint it triggers) is the largest cost of a small insert; on PostgreSQL each
// statement is a round trip and a hot counter row is locked until commit.
//
// A shared transaction must not let one job's failure fail the others: when a group fails, each
// of its jobs is written again alone, in its own transaction, and settles with its own outcome.
import type { Transaction } from 'kysely';
import type { DB, Db } from './types.ts';

export interface GroupCommitOptions<In, Out> {
  db: Db;
  /** Writes the jobs of one group in `tx`; returns one result per job, in the same order. */
  write(tx: Transaction<DB>, jobs: In[]): Promise<Out[]>;
  /** Called once after each successful commit (e.g. to wake workers). */
  committed?(): void;
  /** Groups written at once (1 on SQLite, where one connection serialises them anyway). */
  concurrency?: number;
  /** A job's size (e.g. its rows); default 1. */
  size?(job: In): number;
  /** A group takes jobs until their sizes add up to this (always at least one job). Default 1000. */
  maxSize?: number;
}

interface Pending<In, Out> {
  job: In;
  resolve(out: Out): void;
  reject(err: unknown): void;
}

export class GroupCommit<In, Out> {
  readonly #o: Required<Omit<GroupCommitOptions<In, Out>, 'committed' | 'size'>> & Pick<GroupCommitOptions<In, Out>, 'committed' | 'size'>;
  #queue: Pending<In, Out>[] = [];
  #inFlight = 0;
  #scheduled = false;

  constructor(opts: GroupCommitOptions<In, Out>) {
    this.#o = { concurrency: 1, maxSize: 1000, ...opts };
  }

  /** Writes `job` in the next group; resolves after its commit, with its result. */
  submit(job: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.#queue.push({ job, resolve, reject });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#o.concurrency || this.#queue.length === 0) return;
    this.#scheduled = true;
    // setImmediate, not a microtask: requests whose bodies were parsed in the same turn of the
    // event loop join this group.
    setImmediate(() => {
      this.#scheduled = false;
      if (this.#inFlight >= this.#o.concurrency || this.#queue.length === 0) return;
      const group = this.#take();
      this.#inFlight++;
      void this.#flush(group).finally(() => {
        this.#inFlight--;
        this.#schedule();
      });
      this.#schedule();
    });
  }

  #take(): Pending<In, Out>[] {
    const { size, maxSize } = this.#o;
    let n = 0;
    let total = 0;
    while (n < this.#queue.length) {
      const s = size ? size(this.#queue[n].job) : 1;
      if (n > 0 && total + s > maxSize) break;
      total += s;
      n++;
    }
    return this.#queue.splice(0, n);
  }

  async #flush(group: Pending<In, Out>[]): Promise<void> {
    let results: Out[];
    try {
      results = await this.#o.db.transaction().execute((tx) => this.#o.write(tx, group.map((p) => p.job)));
    } catch (err) {
      if (group.length === 1) return group[0].reject(err);
      // Nothing of the group was committed: each job alone, so only the failing ones fail.
      for (const p of group) await this.#flush([p]);
      return;
    }
    this.#o.committed?.();
    group.forEach((p, i) => p.resolve(results[i]));
  }
}
