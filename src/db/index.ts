// Opens the database for either engine: the embedded SQLite file (default) or PostgreSQL.
import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import type { DB, Db, Dialect } from './types.ts';

// int8 (counts, unix-ms timestamps) as JS numbers: every value we store fits in 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

export interface Database {
  readonly db: Db;
  readonly dialect: Dialect;
  /** Where the data lives, without credentials (for logs). */
  readonly description: string;
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  databaseUrl?: string;
  sqliteFile?: string;
  poolSize?: number;
}

export function openDatabase(opts: DatabaseOptions): Database {
  if (opts.databaseUrl) {
    const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.poolSize ?? 10 });
    // An idle client losing its connection must not crash the process; the pool replaces it.
    pool.on('error', () => {});
    const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
    const url = new URL(opts.databaseUrl);
    return {
      db,
      dialect: 'postgres',
      description: `postgres://${url.host}${url.pathname}`,
      ping: async () => void (await sql`select 1`.execute(db)),
      close: () => db.destroy(),
    };
  }
  const file = opts.sqliteFile ?? ':memory:';
  if (file !== ':memory:') fs.mkdirSync(path.dirname(file), { recursive: true });
  const sqlite = new SQLite(file);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  const db = new Kysely<DB>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
  return {
    db,
    dialect: 'sqlite',
    description: `sqlite:${file}`,
    ping: async () => void (await sql`select 1`.execute(db)),
    close: () => db.destroy(),
  };
}

/**
 * Kysely prepares every query afresh; compiling the SQL was the largest cost of a simple
 * authenticated read. Statements are reusable (we never stream), so keep the most recent ones.
 */
function withStatementCache(sqlite: SQLite.Database, size = 500) {
  const cache = new Map<string, SQLite.Statement>();
  return {
    close: () => void sqlite.close(),
    prepare(source: string) {
      let stmt = cache.get(source);
      if (stmt) {
        cache.delete(source); // re-insert: most recently used last
      } else {
        stmt = sqlite.prepare(source);
        if (cache.size >= size) cache.delete(cache.keys().next().value!);
      }
      cache.set(source, stmt);
      return stmt;
    },
  };
}
