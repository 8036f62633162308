// Opens the database for either engine: the embedded SQLite file (default) or PostgreSQL.
import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, SqliteQueryCompiler, sql, type SelectModifierNode } from 'kysely';
import { PgChangeWatch, WriteCounter, writeTargets, type ChangeStamp } from './change-stamps.ts';
import { listenOn, type Listener } from './notifications.ts';
import { pgDriver } from './pg-driver.ts';
import { prepareRepeatedStatements } from './prepared-statements.ts';
import type { DB, Db, Dialect } from './types.ts';

export type { Listener } from './notifications.ts';
export { notify } from './notifications.ts';

export interface Database {
  readonly db: Db;
  readonly dialect: Dialect;
  /** Where the data lives, without credentials (for logs). */
  readonly description: string;
  /**
   * How many write transactions may usefully run at once: 1 on SQLite (one writer connection),
   * the pool's size on PostgreSQL. Group commits size their concurrency from it.
   */
  readonly concurrentWriters: number;
  /**
   * Every write transaction on this database, from any process, runs one at a time, so two never
   * wait on each other's row locks: SQLite (one writer; one serving process per DATA_DIR). Never on
   * PostgreSQL, even with a pool of one: other processes may share the database.
   */
  readonly serialWrites: boolean;
  /**
   * Hears NOTIFYs on `channel` from every process sharing the database (PostgreSQL: a dedicated
   * LISTEN connection that reconnects and then calls `onReconnect`, since notifications sent while
   * it was away are gone). SQLite: one process per DATA_DIR, so only this process's own
   * notifications, heard at once (even before the writing transaction ends: a read made on hearing
   * one waits for the one connection, so it finds what was committed).
   */
  listen(channel: string, opts: { onNotify(payload: string | undefined): void; onReconnect(): void; log?: { warn(obj: object, msg: string): void } }): Promise<Listener>;
  /**
   * Refreshes the query planner's statistics of `tables` after a bulk write. PostgreSQL: ANALYZE
   * (autovacuum would, but up to a minute later; until then a plan made for the table as it was,
   * say empty, reads and sorts every due task at each claim). SQLite: ANALYZE of each table, with
   * the analysis limit set at open (a millisecond or so).
   */
  refreshStatistics(tables: readonly string[]): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  databaseUrl?: string;
  sqliteFile?: string;
  poolSize?: number;
  /** PostgreSQL: prepare statements a connection runs repeatedly (src/db/prepared-statements.ts). Default true. */
  preparedStatements?: boolean;
  /** Where the change listener (PostgreSQL) reports losing its connection or a change marker. */
  log?: { warn(obj: object, msg: string): void };
}

export function openDatabase(opts: DatabaseOptions): Database {
  if (opts.databaseUrl) {
    // A connection that cannot be had within 10 s (the server is unreachable without refusing, or
    // every pooled connection is busy that long) fails the query instead of holding it forever; the
    // API answers that as 503 (isDatabaseUnavailable).
    const pool = new (pgDriver().Pool)({ connectionString: opts.databaseUrl, max: opts.poolSize ?? 10, connectionTimeoutMillis: 10_000 });
    // An idle client losing its connection must not crash the process; the pool replaces it.
    pool.on('error', () => {});
    // Nor a client in use (a transaction between statements, a worker holding one) when the server
    // stops or restarts: pg emits 'error' on it, and the pool listens only while it is idle, so an
    // unheard event would kill the process. The statement in flight, or the next one, fails on its
    // own (the API answers 503, workers retry), and the pool drops the client when it comes back.
    const watch = new PgChangeWatch(opts.databaseUrl, opts.log);
    const prepare = opts.preparedStatements ?? true;
    pool.on('connect', (client) => {
      client.on('error', () => {});
      if (prepare) prepareRepeatedStatements(client);
      watch.follow(client);
    });
    const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
    changeWatches.set(db, (tables) => watch.stampOf(tables));
    const url = new URL(opts.databaseUrl);
    const databaseUrl = opts.databaseUrl;
    return {
      db,
      dialect: 'postgres',
      description: `postgres://${url.host}${url.pathname}`,
      concurrentWriters: opts.poolSize ?? 10,
      serialWrites: false,
      listen: (channel, o) => listenOn({ databaseUrl, channel, ...o }),
      refreshStatistics: async (tables) => void (await sql`analyze ${sql.join(tables.map((t) => sql.table(t)))}`.execute(db)),
      ping: async () => void (await sql`select 1`.execute(db)),
      close: async () => {
        await watch.close();
        await db.destroy();
      },
    };
  }
  const file = opts.sqliteFile ?? ':memory:';
  if (file !== ':memory:') fs.mkdirSync(path.dirname(file), { recursive: true });
  const sqlite = new SQLite(file);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  // Planner statistics: ANALYZE reads at most ~1,000 rows of each index (a millisecond or so on a
  // large table), and a start analyzes what has never been or has changed a lot since, so plans
  // follow the tables as they grow (refreshStatistics does the same after a bulk insert).
  sqlite.pragma('analysis_limit = 1000');
  sqlite.pragma('optimize = 0x10002');
  // pg_notify tells other processes of a change (a queue's work, src/queue/waker.ts; a
  // conversation's line, the live feed). A DATA_DIR has one serving process, so on SQLite the only
  // listeners are this process's own (listen below): they hear it at once, from a microtask. What
  // they read then waits for the one connection, which the writing transaction holds until it
  // ends, so they find its rows committed (or, rolled back, not at all).
  const heard = new Map<string, Set<(payload: string | undefined) => void>>();
  sqlite.function('pg_notify', { deterministic: false, varargs: true }, (channel: unknown, payload: unknown) => {
    const listeners = typeof channel === 'string' ? heard.get(channel) : undefined;
    if (listeners?.size) {
      const p = typeof payload === 'string' && payload !== '' ? payload : undefined;
      queueMicrotask(() => { for (const fn of listeners) fn(p); });
    }
    return null;
  });
  // Likewise pg_advisory_xact_lock: SQLite's one writer connection already runs write transactions
  // one at a time, so a transaction-scoped lock has nothing left to exclude.
  sqlite.function('pg_advisory_xact_lock', { deterministic: false, varargs: true }, () => null);
  const writes = new WriteCounter(sqlite);
  const db = new Kysely<DB>({ dialect: new SqliteWithoutRowLocks({ database: withStatementCache(sqlite, writes) }) });
  changeWatches.set(db, (tables) => () => writes.stamp(tables));
  return {
    db,
    dialect: 'sqlite',
    description: `sqlite:${file}`,
    concurrentWriters: 1,
    serialWrites: true,
    listen: async (channel, o) => {
      const fn = (payload: string | undefined) => o.onNotify(payload);
      let listeners = heard.get(channel);
      if (!listeners) heard.set(channel, (listeners = new Set()));
      listeners.add(fn);
      return { close: async () => void listeners.delete(fn) };
    },
    refreshStatistics: async (tables) => {
      for (const t of tables) await sql`analyze ${sql.table(t)}`.execute(db);
    },
    ping: async () => void (await sql`select 1`.execute(db)),
    close: () => db.destroy(),
  };
}

/**
 * A stamp of some tables that changes whenever they may have changed: a cache of rows of those
 * tables (the token and account every request authenticates with) stays valid while the stamp is
 * the same (src/db/change-stamps.ts says how, per engine). On PostgreSQL only tables with a change
 * trigger (WATCHED_TABLES) can be watched.
 *
 * A write by this process is counted against the table it names (INSERT INTO / UPDATE / DELETE
 * FROM); rows that foreign keys cascade into other tables are not, so watch the parent tables too
 * (accounts for tokens). Schema changes change every stamp.
 */
export type { ChangeStamp } from './change-stamps.ts';
const changeWatches = new WeakMap<Db, (tables: readonly string[]) => ChangeStamp>();

export function changeStamp(db: Db, tables: readonly string[]): ChangeStamp | undefined {
  return changeWatches.get(db)?.(tables);
}

/**
 * Kysely prepares every query afresh; compiling the SQL was the largest cost of a simple
 * authenticated read. Statements are reusable (we never stream), so keep the most recent ones.
 * Kysely prepares each statement right before running it, so this is also where writes are counted.
 */
function withStatementCache(sqlite: SQLite.Database, writes: WriteCounter, size = 500) {
  const cache = new Map<string, { stmt: SQLite.Statement; targets: string[] | 'schema' }>();
  return {
    close: () => void sqlite.close(),
    prepare(source: string) {
      let entry = cache.get(source);
      if (entry) {
        cache.delete(source); // re-insert: most recently used last
      } else {
        entry = { stmt: sqlite.prepare(source), targets: writeTargets(source) };
        if (cache.size >= size) cache.delete(cache.keys().next().value!);
      }
      cache.set(source, entry);
      if (entry.targets === 'schema' || entry.targets.length > 0) writes.count(entry.targets);
      return entry.stmt;
    },
  };
}

/**
 * Repositories lock the rows a transaction will change with `.forUpdate()` (and claims skip rows
 * others hold with `.skipLocked()`) on both engines. SQLite has no row locks and no such syntax:
 * its one writer connection already runs write transactions one at a time, so the compiler leaves
 * these modifiers out and every other modifier as it is.
 */
const ROW_LOCKS = new Set(['ForUpdate', 'ForNoKeyUpdate', 'ForShare', 'ForKeyShare', 'NoWait', 'SkipLocked']);

class SqliteCompilerWithoutRowLocks extends SqliteQueryCompiler {
  protected override visitSelectModifier(node: SelectModifierNode): void {
    if (node.modifier && ROW_LOCKS.has(node.modifier)) return;
    super.visitSelectModifier(node);
  }
}

class SqliteWithoutRowLocks extends SqliteDialect {
  override createQueryCompiler(): SqliteQueryCompiler {
    return new SqliteCompilerWithoutRowLocks();
  }
}
