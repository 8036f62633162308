// The rate-limit counters every API process shares on PostgreSQL (the table of migration 0015),
// and the one place that decides whether a process has anyone to share them with: on SQLite a
// DATA_DIR has one serving process, so its limits are counted in that process's memory instead.
import { sql } from 'kysely';
import type { Database } from './index.ts';
import type { Db } from './types.ts';

export interface WindowCount {
  /** The key's count in `windowStart`'s window after this request's increment. */
  count: number;
  /** The window the count belongs to (a later one than asked for when another process's clock is ahead). */
  windowStart: number;
}

/**
 * Adds `n` to `key`'s count in the window starting at `windowStart` and returns the new count, in
 * one statement: a row of an earlier window starts over at `n`; a row already in a later window
 * (another process's clock runs ahead) is counted in that later window.
 */
export async function addToWindow(db: Db, key: string, windowStart: number, n: number): Promise<WindowCount> {
  const row = await db.insertInto('rate_limit_counters')
    .values({ key, window_start: windowStart, count: n })
    .onConflict((oc) => oc.column('key').doUpdateSet({
      count: sql<number>`case when rate_limit_counters.window_start < excluded.window_start then excluded.count else rate_limit_counters.count + excluded.count end`,
      window_start: sql<number>`case when rate_limit_counters.window_start < excluded.window_start then excluded.window_start else rate_limit_counters.window_start end`,
    }))
    .returning(['count', 'window_start'])
    .executeTakeFirstOrThrow();
  return { count: Number(row.count), windowStart: Number(row.window_start) };
}

/** Deletes up to `batch` rows whose window started before `before` (their windows have ended). */
export async function pruneEndedWindows(db: Db, before: number, batch: number): Promise<number> {
  const res = await db.deleteFrom('rate_limit_counters')
    .where('key', 'in', (qb) => qb.selectFrom('rate_limit_counters').select('key').where('window_start', '<', before).limit(batch))
    .executeTakeFirst();
  return Number(res.numDeletedRows);
}

/**
 * How this process counts toward rate limits shared with other processes: the database's table on
 * PostgreSQL (any number of API processes share one database); undefined on SQLite, where the one
 * serving process counts in memory.
 */
export function sharedRateLimitCounter(database: Database): ((key: string, windowStart: number, n: number) => Promise<WindowCount>) | undefined {
  if (database.dialect === 'sqlite') return undefined;
  return (key, windowStart, n) => addToWindow(database.db, key, windowStart, n);
}
