// Full-text search is where the engines differ most: SQLite's FTS5 (MATCH, bm25) and
// PostgreSQL's tsvector (@@, ts_rank). Repositories ask here which one an executor (the database
// or a transaction) runs on, and how to write a user's words as a query the engine cannot
// misread: only words (Unicode letters and digits) survive, so no FTS5 or tsquery syntax (quotes,
// NEAR, *, :, &, |, !, parentheses) can reach the engine and a query can never be a syntax error.
import { PostgresAdapter } from 'kysely';
import type { Dialect, Executor } from './types.ts';

/** Words kept from one query; the rest are dropped. */
export const MAX_QUERY_TERMS = 32;
/** A longer "word" is not a word anyone searches for (and tsvector ignores words over 2047 bytes). */
const MAX_TERM_CHARS = 64;

export function engineOf(db: Executor): Dialect {
  return db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite';
}

/** The distinct words of a user's query, lower-cased, in order, at most MAX_QUERY_TERMS. */
export function queryTerms(text: string): string[] {
  const words = text.normalize('NFKC').toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  return [...new Set(words.filter((w) => w.length <= MAX_TERM_CHARS))].slice(0, MAX_QUERY_TERMS);
}

/** FTS5: each word as a quoted string (a phrase of one token), any of them: `"a" OR "b"`. */
export function fts5Query(terms: readonly string[]): string {
  return terms.map((t) => `"${t}"`).join(' OR ');
}

/** to_tsquery: any of the words, `'a' | 'b'` (each word quoted; words hold no quote). */
export function tsQuery(terms: readonly string[]): string {
  return terms.map((t) => `'${t}'`).join(' | ');
}
