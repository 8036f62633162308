// The durable queue: claim / lease / heartbeat / complete / retry / rescue over any table that has
// the queue columns (tasks now, webhook deliveries next). Owners plug in through hooks that run in
// the same transaction as the state change (admission limits, semaphores, outbox events, counters).
import { sql, type Expression, type ExpressionBuilder, type Kysely, type Selectable, type SqlBool, type Transaction } from 'kysely';
import type { DB, Executor, QueueState } from '../db/types.ts';

/** The columns a table needs to be a queue. */
export interface QueueColumns {
  id: string;
  state: QueueState;
  run_at: number;
  attempt: number;
  max_attempts: number;
  lease_owner: string | null;
  lease_expires_at: number | null;
}

/** Tables of DB whose rows carry the queue columns (checked at compile time). */
export type QueueTable = { [K in keyof DB]: Selectable<DB[K]> extends QueueColumns ? K : never }[keyof DB];
// The intersection changes nothing for a concrete table; it lets generic code see the queue columns.
export type QueueRow<T extends QueueTable> = Selectable<DB[T]> & QueueColumns;

/** Extra column values for a transition: plain values or SQL expressions (e.g. coalesce). */
export type Patch<Row> = { [K in keyof Row]?: Row[K] | Expression<unknown> };

/** What a worker holds after a claim; any claimed row is one. The owner is the engine's worker id. */
export interface Lease {
  id: string;
  attempt: number;
}

export type FinalState = 'finished' | 'failed' | 'canceled';

/** One held row to move to a final state (engine.completeMany). */
export interface Completion<Row> {
  lease: Lease;
  state: FinalState;
  set?: Patch<Row>;
}
/** Why a transition happened; `transition` is an owner-independent move made with transition(). */
export type Cause = 'claim' | 'complete' | 'retry' | 'rescue' | 'transition';

export type Admission =
  | { admit: true }
  | { admit: false; until: number; set?: Record<string, string | number | null> }
  | { admit: false; until: null };
export const ADMIT: Admission = Object.freeze({ admit: true });
/** The row stays pending with run_at moved to `until` (ms), and the owner's columns `set` written with it. */
export const deferUntil = (until: number, set?: Record<string, string | number | null>): Admission =>
  (set ? { admit: false, until, set } : { admit: false, until });
/**
 * Not in this claim, and the row is left as it is (still due). Only for a refusal that the
 * claimFilter then keeps out of claims until something changes and wakes the runners: a deferral
 * would leave what frees idle until the deferral ends. (The tasks' semaphore parks its rows instead,
 * a deferral that the release undoes: rows left due are walked past by every claim.)
 */
export const NOT_NOW: Admission = Object.freeze({ admit: false, until: null });

/**
 * What a claim reads of a due row before admitting it: its id and run_at, and the columns the
 * owner's hooks name in candidateColumns (every column when they name none).
 */
export type Candidate<Row> = Pick<QueueColumns, 'id' | 'run_at'> & Partial<Row>;

export interface QueueHooks<Row> {
  /**
   * The columns admit() and admitOrder() read besides id and run_at. A claim then selects only
   * those for its candidates (the admitted rows come back whole from the claim's update): reading
   * every column of every candidate was half the cost of a claim on SQLite (docs/performance.md).
   * Unset: candidates carry every column.
   */
  candidateColumns?: readonly (keyof Row & string)[];
  /**
   * Decides, inside the claim transaction, whether a due row may start now (semaphore free, daily
   * cap not reached, business hours, cooldown). Side effects (taking a semaphore slot) commit or
   * roll back with the claim. A refusal defers the row to a time, or (NOT_NOW) leaves it due when
   * claimFilter keeps it out until the blocking resource is released.
   */
  admit?: (tx: Transaction<DB>, row: Candidate<Row>, now: number) => Promise<Admission>;
  /**
   * The order in which one claim runs admit() over its candidates (default run_at, id). When
   * admit() locks shared rows (a semaphore per organization), order by that key so two workers
   * take those locks in the same order instead of deadlocking on PostgreSQL.
   */
  admitOrder?: (a: Candidate<Row>, b: Candidate<Row>) => number;
  /**
   * Narrows the claim's candidates with SQL, before admit() runs: rows that certainly cannot start
   * (the tasks of a suspended account) are then never selected, locked or deferred one by one.
   * admit() stays the authority; this only saves work. Rows it keeps out stay in the due range, so
   * every claim walks past them: a filter that can hold back many rows for long should be an
   * admission that defers them instead (the tasks' full semaphore parks its rows).
   */
  claimFilter?: (eb: ExpressionBuilder<any, any>) => Expression<SqlBool>;
  /**
   * Runs after every state change, in its transaction, with the row as written. Throwing rolls the
   * change back. Every exit from `running` comes through here, so it is where semaphores are released.
   */
  onTransition?: (tx: Transaction<DB>, row: Row, from: QueueState, to: QueueState, cause: Cause) => Promise<void>;
  /**
   * The same for several rows making the same change in one transaction (a claim's batch), when
   * the owner can do it in fewer statements than row by row; onTransition is used otherwise.
   */
  onTransitions?: (tx: Transaction<DB>, rows: Row[], from: QueueState, to: QueueState, cause: Cause) => Promise<void>;
  /** Extra columns to write with a transition (updated_at, started_at, finished_at, error …). */
  stamp?: (t: { from: QueueState; to: QueueState; now: number; cause: Cause }) => Patch<Row>;
}

export interface QueueOptions<T extends QueueTable> extends QueueHooks<QueueRow<T>> {
  table: T;
  /** Unique per process (and per runner when one process runs several for one table). */
  workerId: string;
  /** How long a claim holds a row without a heartbeat. Default 30 s. */
  leaseMs?: number;
  /** Delay before attempt `attempt + 1` when retry() is given no time. Default exponentialBackoff. */
  backoff?: (attempt: number) => number;
  /** The clock (unix ms); tests pass their own. */
  now?: () => number;
  /**
   * Write transactions on this database run one at a time (Database.serialWrites: SQLite), so two
   * of them never wait on each other: the SELECT … FOR UPDATE that orders the row locks of a
   * multi-row update (heartbeat, completeMany) has nothing to order and is left out.
   */
  serialWrites?: boolean;
}

/**
 * The states that the queue tables' partial indexes cover (due pending rows, leases of running
 * ones), as literals in the statements that read those indexes: a statement prepared once on
 * PostgreSQL (src/db/prepared-statements.ts) then gets a generic plan that uses the index, which
 * a parameter would not allow (the plan must hold for any state); on SQLite a parameter there has
 * the statement compiled again at every execution, to decide whether the index may be used.
 */
const PENDING = sql.lit('pending');
const RUNNING = sql.lit('running');
/**
 * Rows in a final state, in the words of the partial indexes of ended rows (migration
 * 0021-retention-indexes) that the owners' retention searches read, and for the same reason.
 */
export const ENDED_ROWS = sql<boolean>`state in ('finished', 'failed', 'canceled')`;

/** 1 s, 2 s, 4 s … capped, with ±jitter so failures that happened together do not retry together. */
export function exponentialBackoff(attempt: number, opts: { baseMs?: number; maxMs?: number; jitter?: number } = {}): number {
  const { baseMs = 1000, maxMs = 3_600_000, jitter = 0.2 } = opts;
  const raw = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.max(0, Math.round(raw * (1 + jitter * (2 * Math.random() - 1))));
}

/** Runs `fn` in the caller's transaction when given one, otherwise in a new one. */
export function inTransaction<R>(ex: Executor, fn: (tx: Transaction<DB>) => Promise<R>): Promise<R> {
  return ex.isTransaction ? fn(ex as Transaction<DB>) : ex.transaction().execute(fn);
}

export class QueueEngine<T extends QueueTable> {
  readonly table: T;
  readonly workerId: string;
  readonly leaseMs: number;
  readonly now: () => number;
  readonly #opts: QueueOptions<T>;
  /** Queries go through Kysely<any>: the table is generic, its queue columns are checked by QueueTable. */
  readonly #t: string;

  constructor(opts: QueueOptions<T>) {
    if (!opts.workerId) throw new Error('queue: workerId is required');
    this.#opts = opts;
    this.table = opts.table;
    this.#t = opts.table;
    this.workerId = opts.workerId;
    this.leaseMs = opts.leaseMs ?? 30_000;
    this.now = opts.now ?? Date.now;
  }

  /**
   * Claims up to `n` due pending rows, oldest run_at first, and returns them as running with
   * attempt + 1 and a lease owned by this worker. Rows the admit hook defers get their run_at
   * moved instead; further candidates are then tried so a few deferred rows do not starve the batch.
   *
   * PostgreSQL: SELECT … FOR UPDATE SKIP LOCKED, so concurrent workers claim disjoint rows.
   * SQLite: one connection per process serialises transactions (Kysely's connection mutex).
   */
  async claim(ex: Executor, n: number): Promise<QueueRow<T>[]> {
    if (!(n > 0)) return [];
    // A deadlock between admit hooks of two workers aborts one claim; nothing was written, so
    // try again (only when the claim owns its transaction).
    for (let tries = 1; ; tries++) {
      try {
        return await this.#claim(ex, n);
      } catch (err) {
        if (ex.isTransaction || tries >= 3 || (err as { code?: string }).code !== '40P01') throw err;
      }
    }
  }

  async #claim(ex: Executor, n: number): Promise<QueueRow<T>[]> {
    const { admit, admitOrder } = this.#opts;
    return inTransaction(ex, async (tx) => {
      const now = this.now();
      const q = tx as unknown as Kysely<any>;
      const claimed: QueueRow<T>[] = [];
      /** Rows refused with NOT_NOW: still due, so kept out of this claim's later rounds by id. */
      const passed: string[] = [];
      // Bounded: each round claims, defers or passes over every candidate (deferred rows leave the due set).
      for (let round = 0; round < 4 && claimed.length < n; round++) {
        const want = n - claimed.length;
        let select = this.#candidates(q)
          .where('state', '=', PENDING).where('run_at', '<=', now)
          .orderBy('run_at').orderBy('id').limit(want);
        if (this.#opts.claimFilter) select = select.where(this.#opts.claimFilter);
        if (passed.length > 0) select = select.where('id', 'not in', passed);
        const candidates = (await select.forUpdate().skipLocked().execute()) as Candidate<QueueRow<T>>[];
        if (candidates.length === 0) break;

        const admitted: string[] = [];
        /** Deferrals alike (the same time and columns), by their patch as JSON. */
        const deferred = new Map<string, { patch: Record<string, unknown>; ids: string[] }>();
        const admissionOrder = admitOrder ? [...candidates].sort(admitOrder) : candidates;
        for (const row of admissionOrder) {
          const a = admit ? await admit(tx, row, now) : ADMIT;
          if (a.admit) {
            admitted.push(row.id);
          } else if (a.until === null) {
            passed.push(row.id);
          } else {
            // Never defer into the past: the row would be selected again in this very loop.
            const patch = { ...a.set, run_at: Math.max(Math.ceil(a.until), now + 1) };
            const key = JSON.stringify(patch);
            const alike = deferred.get(key);
            if (alike) alike.ids.push(row.id);
            else deferred.set(key, { patch, ids: [row.id] });
          }
        }
        // Rows deferred alike move in one statement.
        for (const { patch, ids } of deferred.values()) {
          await q.updateTable(this.#t).set(patch).where('id', 'in', ids).execute();
        }
        if (admitted.length > 0) {
          const rows = (await q.updateTable(this.#t)
            .set({
              ...this.#stamp('pending', 'running', now, 'claim'),
              state: 'running',
              attempt: sql`attempt + 1`,
              lease_owner: this.workerId,
              lease_expires_at: now + this.leaseMs,
            })
            .where('id', 'in', admitted).where('state', '=', 'pending')
            .returningAll().execute()) as QueueRow<T>[];
          const order = new Map<string, number>(candidates.map((r, i) => [r.id, i]));
          rows.sort((a, b) => order.get(a.id)! - order.get(b.id)!);
          await this.#transitioned(tx, rows, 'pending', 'running', 'claim');
          claimed.push(...rows);
        }
        if (candidates.length < want) break;
      }
      return claimed;
    });
  }

  /** A select of the columns a claim reads of its candidates (see candidateColumns). */
  #candidates(q: Kysely<any>) {
    const { candidateColumns } = this.#opts;
    return candidateColumns
      ? q.selectFrom(this.#t).select(['id', 'run_at', ...candidateColumns])
      : q.selectFrom(this.#t).selectAll();
  }

  /**
   * Extends the leases this worker still holds; returns those rows (as stored, so the caller can
   * see e.g. a cancel request). A lease missing from the result was lost: stop working on it.
   */
  async heartbeat(ex: Executor, leases: readonly Lease[]): Promise<QueueRow<T>[]> {
    if (leases.length === 0) return [];
    const held = this.#heldMany(leases);
    const update = (q: Kysely<any>) => q.updateTable(this.#t).set({ lease_expires_at: this.now() + this.leaseMs })
      .where(held).returningAll().execute() as Promise<QueueRow<T>[]>;
    // Row locks in id order, as completeMany takes them: one UPDATE of many rows locks them in
    // whatever order its plan reads them, which deadlocked against a batch of completions. Left
    // out where writes are serial (serialWrites: SQLite's one writer), as it would lock nothing.
    if (this.#opts.serialWrites) return update(ex as unknown as Kysely<any>);
    return inTransaction(ex, async (tx) => {
      const q = tx as unknown as Kysely<any>;
      await q.selectFrom(this.#t).select('id').where(held).orderBy('id').forUpdate().execute();
      return update(q);
    });
  }

  /**
   * Moves a held row to a final state. Returns the row, or undefined when this worker no longer
   * holds that attempt (rescued, reclaimed, or finished elsewhere): then nothing is changed.
   */
  async complete(ex: Executor, lease: Lease, outcome: { state: FinalState; set?: Patch<QueueRow<T>> }): Promise<QueueRow<T> | undefined> {
    return inTransaction(ex, (tx) => this.#leave(tx, lease, outcome.state, 'complete', outcome.set ?? {}));
  }

  /**
   * complete() for several held rows in one transaction, each guarded as complete() guards it
   * (undefined in its place when its lease is no longer held). The hooks then run once per final
   * state for all the rows that moved (onTransitions), so the rows an owner updates on every
   * transition (per-state counts) are written once for the batch instead of once per row.
   */
  async completeMany(ex: Executor, items: readonly Completion<QueueRow<T>>[]): Promise<(QueueRow<T> | undefined)[]> {
    return inTransaction(ex, async (tx) => {
      const out = new Array<QueueRow<T> | undefined>(items.length);
      // Every row of the group is locked first, in id order, as heartbeat() locks them: the updates
      // below go state by state, and locking that way would let a heartbeat and a group finishing
      // in two states wait on each other in a cycle.
      if (items.length > 1 && !this.#opts.serialWrites) {
        await (tx as unknown as Kysely<any>).selectFrom(this.#t).select('id').where(this.#heldMany(items.map((i) => i.lease)))
          .orderBy('id').forUpdate().execute();
      }
      const byState = new Map<FinalState, number[]>();
      items.forEach((item, i) => byState.set(item.state, [...(byState.get(item.state) ?? []), i]));
      for (const [state, indexes] of byState) {
        const moved = await this.#moveMany(tx, indexes.map((i) => items[i]), state, 'complete');
        indexes.forEach((i, k) => { out[i] = moved[k]; });
        const rows = moved.filter((r): r is QueueRow<T> => r !== undefined);
        await this.#transitioned(tx, rows, 'running', state, 'complete');
      }
      return out;
    });
  }

  /**
   * Returns a held row to pending at `runAt` (default now + backoff(attempt)), or to failed when
   * its attempts are spent. Undefined (and no change) when the lease is no longer held.
   * `uncounted`: the attempt never really happened (abandoned before an answer while the worker
   * stopped), so it is given back and cannot be the one that fails the row.
   */
  async retry(ex: Executor, lease: Lease, opts: { runAt?: number; set?: Patch<QueueRow<T>>; uncounted?: boolean } = {}): Promise<QueueRow<T> | undefined> {
    return inTransaction(ex, async (tx) => {
      const q = tx as unknown as Kysely<any>;
      const current = (await this.#held(q, lease)
        .select(['attempt', 'max_attempts']).executeTakeFirst()) as { attempt: number; max_attempts: number } | undefined;
      if (!current) return undefined;
      if (!opts.uncounted && current.attempt >= current.max_attempts) return this.#leave(tx, lease, 'failed', 'retry', opts.set ?? {});
      const now = this.now();
      const runAt = opts.runAt ?? now + (this.#opts.backoff ?? exponentialBackoff)(current.attempt);
      return this.#leave(tx, lease, 'pending', 'retry', {
        ...opts.set, run_at: Math.max(0, Math.round(runAt)), ...(opts.uncounted ? { attempt: Math.max(0, current.attempt - 1) } : {}),
      } as Patch<QueueRow<T>>);
    });
  }

  /**
   * Returns running rows whose lease expired (their worker died or stalled) to pending, due now,
   * or to failed when their attempts are spent. Any worker may rescue any row.
   */
  async rescue(ex: Executor, limit = 100): Promise<QueueRow<T>[]> {
    const { onTransition } = this.#opts;
    return inTransaction(ex, async (tx) => {
      const now = this.now();
      const q = tx as unknown as Kysely<any>;
      const select = q.selectFrom(this.#t).selectAll()
        .where('state', '=', RUNNING).where('lease_expires_at', '<', now)
        .orderBy('lease_expires_at').limit(limit).forUpdate().skipLocked();
      const expired = (await select.execute()) as QueueRow<T>[];
      const out: QueueRow<T>[] = [];
      for (const row of expired) {
        const to: QueueState = row.attempt >= row.max_attempts ? 'failed' : 'pending';
        const updated = (await q.updateTable(this.#t)
          .set({
            ...this.#stamp('running', to, now, 'rescue'),
            ...(to === 'pending' ? { run_at: now } : {}),
            state: to,
            lease_owner: null,
            lease_expires_at: null,
          })
          .where('id', '=', row.id).where('state', '=', 'running').where('attempt', '=', row.attempt)
          .returningAll().executeTakeFirst()) as QueueRow<T> | undefined;
        if (!updated) continue;
        await onTransition?.(tx, updated, 'running', to, 'rescue');
        out.push(updated);
      }
      return out;
    });
  }

  /**
   * Moves a row from one of `from` to `to` whoever holds it, with the hooks: cancelling a pending
   * row, or finishing a row from outside its worker (a carrier's status callback). Undefined when
   * the row is not in one of `from`.
   */
  async transition(ex: Executor, id: string, from: readonly QueueState[], to: QueueState,
    set: Patch<QueueRow<T>> = {}): Promise<QueueRow<T> | undefined> {
    const { onTransition } = this.#opts;
    return inTransaction(ex, async (tx) => {
      const q = tx as unknown as Kysely<any>;
      const select = q.selectFrom(this.#t).select('state').where('id', '=', id).where('state', 'in', from).forUpdate();
      const current = (await select.executeTakeFirst()) as { state: QueueState } | undefined;
      if (!current) return undefined;
      const updated = (await q.updateTable(this.#t)
        .set({
          ...this.#stamp(current.state, to, this.now(), 'transition'),
          ...set,
          state: to,
          ...(to !== 'running' ? { lease_owner: null, lease_expires_at: null } : {}),
        })
        .where('id', '=', id).where('state', '=', current.state)
        .returningAll().executeTakeFirst()) as QueueRow<T> | undefined;
      if (updated) await onTransition?.(tx, updated, current.state, to, 'transition');
      return updated;
    });
  }

  /** The earliest run_at among pending rows the claim would consider (due or not), or null. */
  async nextRunAt(ex: Executor): Promise<number | null> {
    const q = ex as unknown as Kysely<any>;
    let select = q.selectFrom(this.#t).select((eb) => eb.fn.min('run_at').as('next'))
      .where('state', '=', PENDING);
    // Rows the claim would not select (a suspended account's) do not make anything due: their
    // release (a reactivation) wakes the runners instead.
    if (this.#opts.claimFilter) select = select.where(this.#opts.claimFilter);
    const row = (await select.executeTakeFirst()) as { next: number | string | null } | undefined;
    const next = row?.next;
    return next === null || next === undefined ? null : Number(next);
  }

  #held(q: Kysely<any>, lease: Lease) {
    return q.selectFrom(this.#t)
      .where('id', '=', lease.id).where('state', '=', 'running')
      .where('lease_owner', '=', this.workerId).where('attempt', '=', lease.attempt);
  }

  /** Rows this worker holds at exactly these attempts (one statement's condition for many leases). */
  #heldMany(leases: readonly Lease[]) {
    return (eb: ExpressionBuilder<any, any>) => eb.and([
      eb('id', 'in', leases.map((l) => l.id)), eb('state', '=', 'running'), eb('lease_owner', '=', this.workerId),
      eb('attempt', '=', sql`case ${sql.ref('id')} ${sql.join(leases.map((l) => sql`when ${l.id} then cast(${l.attempt} as integer)`), sql` `)} end`),
    ]);
  }

  /** The guarded exit from running: only the holder of this exact attempt may move the row. */
  async #leave(tx: Transaction<DB>, lease: Lease, to: QueueState, cause: Cause, set: Patch<QueueRow<T>>): Promise<QueueRow<T> | undefined> {
    const row = await this.#move(tx, lease, to, cause, set);
    if (row) await this.#opts.onTransition?.(tx, row, 'running', to, cause);
    return row;
  }

  /** The guarded update of #leave, without the hooks. */
  async #move(tx: Transaction<DB>, lease: Lease, to: QueueState, cause: Cause, set: Patch<QueueRow<T>>): Promise<QueueRow<T> | undefined> {
    const q = tx as unknown as Kysely<any>;
    return (await q.updateTable(this.#t)
      .set({ ...this.#stamp('running', to, this.now(), cause), ...set, state: to, lease_owner: null, lease_expires_at: null })
      .where('id', '=', lease.id).where('state', '=', 'running')
      .where('lease_owner', '=', this.workerId).where('attempt', '=', lease.attempt)
      .returningAll().executeTakeFirst()) as QueueRow<T> | undefined;
  }

  /**
   * #move for several held rows in one statement (the batch of a group commit): a column every row
   * sets alike is one value, a column whose values differ is a CASE on the id (text or integer, as
   * its values are; rows not setting it keep theirs). The caller has locked the rows (completeMany).
   * A patch holding an SQL expression, or a column mixing kinds of value, is moved row by row instead.
   */
  async #moveMany(tx: Transaction<DB>, items: readonly { lease: Lease; set?: Patch<QueueRow<T>> }[], to: QueueState, cause: Cause): Promise<(QueueRow<T> | undefined)[]> {
    const q = tx as unknown as Kysely<any>;
    const stamp = this.#stamp('running', to, this.now(), cause);
    const patches = items.map((item) => ({ ...stamp, ...(item.set ?? {}) }) as Record<string, unknown>);
    const columns = new Set(patches.flatMap((p) => Object.keys(p)));
    const kindOf = (v: unknown) => (v === null || v === undefined ? 'null' : typeof v);
    const set: Record<string, unknown> = {};
    let oneByOne = items.length < 2;
    for (const col of oneByOne ? [] : columns) {
      const values = patches.map((p) => p[col]);
      const kinds = new Set(values.filter((v) => v !== undefined && v !== null).map(kindOf));
      if ([...kinds].some((k) => k !== 'string' && k !== 'number') || kinds.size > 1) { oneByOne = true; break; }
      if (values.every((v) => v === values[0]) && values[0] !== undefined) { set[col] = values[0]; continue; }
      const type = kinds.has('number') ? 'bigint' : 'text';
      set[col] = sql`case ${sql.ref('id')} ${sql.join(items.flatMap((item, i) => values[i] === undefined ? []
        : [sql`when ${item.lease.id} then ${values[i] === null ? sql`null` : sql`cast(${values[i]} as ${sql.raw(type)})`}`]), sql` `)} else ${sql.ref(col)} end`;
    }
    if (oneByOne) {
      const out: (QueueRow<T> | undefined)[] = [];
      for (const item of items) out.push(await this.#move(tx, item.lease, to, cause, item.set ?? {}));
      return out;
    }
    const ids = items.map((item) => item.lease.id);
    const rows = (await q.updateTable(this.#t)
      .set({ ...set, state: to, lease_owner: null, lease_expires_at: null })
      .where(this.#heldMany(items.map((item) => item.lease))).returningAll().execute()) as QueueRow<T>[];
    const byId = new Map(rows.map((r) => [r.id, r]));
    return ids.map((id) => byId.get(id));
  }

  async #transitioned(tx: Transaction<DB>, rows: QueueRow<T>[], from: QueueState, to: QueueState, cause: Cause): Promise<void> {
    const { onTransition, onTransitions } = this.#opts;
    if (rows.length === 0) return;
    if (onTransitions) await onTransitions(tx, rows, from, to, cause);
    else for (const row of rows) await onTransition?.(tx, row, from, to, cause);
  }

  #stamp(from: QueueState, to: QueueState, now: number, cause: Cause): Record<string, unknown> {
    return (this.#opts.stamp?.({ from, to, now, cause }) ?? {}) as Record<string, unknown>;
  }
}
