// Prepared statements on PostgreSQL. Kysely sends every statement as text with its parameters, so
// the server parses, analyzes and plans it at every execution; for the short statements of a
// submission or a claim that was most of the server's work. A pooled connection that sees the same
// text again sends it as a named statement (node-postgres's `name`): the server keeps it parsed,
// and after five executions may keep a generic plan for it (plan_cache_mode auto), which is where
// most of the saving is (docs/performance.md). Statements whose plan depends on a value, such as a
// claim reading the partial index of pending rows, put that value in the SQL as a literal
// (src/queue/engine.ts), so their generic plan is the good one.
//
// Bounded: a connection names at most MAX_NAMED statements and never one longer than MAX_TEXT
// (a 500-row insert would hold a large plan for a rare shape); the rest go unnamed as before.
// Transaction control and statements that name no parameters stay unnamed: nothing to save.
// PgBouncer in transaction mode before 1.21 cannot carry named statements across its server
// connections: set CALLPLANE_PG_PREPARED_STATEMENTS=false there (docs/configuration.md).
import type pg from 'pg';

/** Distinct statements one connection keeps prepared. */
export const MAX_NAMED = 400;
/** Longer statements are never prepared. */
export const MAX_TEXT = 16_384;
/** Texts a connection counts executions of. */
const MAX_SEEN = 4 * MAX_NAMED;
/** A text is prepared from its second execution on the connection (one-off statements stay unnamed). */
const PREPARE_FROM = 2;

/** PostgreSQL's answer when a schema change altered the columns a prepared statement returns. */
const STALE_PLAN = '0A000';

type Query = (...args: unknown[]) => Promise<unknown>;

/**
 * Makes `client.query(text, values)` use a named statement once the connection has seen `text`
 * before. Call on each new pooled connection, before anything else wraps its query.
 */
export function prepareRepeatedStatements(client: pg.PoolClient): void {
  const query = client.query.bind(client) as Query;
  /** text → executions so far (a number) or its statement name. */
  const seen = new Map<string, number | string>();
  let named = 0;
  let generation = 0;
  client.query = ((...args: unknown[]) => {
    const [text, values] = args;
    if (args.length !== 2 || typeof text !== 'string' || !Array.isArray(values) || values.length === 0 || text.length > MAX_TEXT) {
      return query(...args);
    }
    const entry = seen.get(text);
    if (typeof entry === 'string') {
      return query({ name: entry, text, values }).catch((err: { code?: string }) => {
        // A schema change since it was prepared: the next execution prepares it again, under a new name.
        if (err?.code === STALE_PLAN) seen.set(text, `cp${++generation}_${named}`);
        throw err;
      });
    }
    const count = (entry ?? 0) + 1;
    if (count >= PREPARE_FROM && named < MAX_NAMED) {
      const name = `cp${generation}_${named++}`;
      seen.set(text, name);
      return query({ name, text, values });
    }
    // Texts seen once are remembered up to a bound too (statements with a varying number of
    // parameters, such as IN lists, make many texts).
    if (entry !== undefined || seen.size < MAX_SEEN) seen.set(text, count);
    return query(...args);
  }) as typeof client.query;
}
