// Recognises constraint violations from either engine.
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string } | undefined;
  return e?.code === '23505' || e?.code === 'SQLITE_CONSTRAINT_UNIQUE' || e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/** Socket errors of a connection to the database server that could not be made or was cut. */
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
/**
 * SQLSTATEs of a server that is not there to answer: class 08 (connection exception), 57P01–57P03
 * (the server is shutting down, crashed, or is starting up / recovering), 53300 (too many
 * connections).
 */
const UNAVAILABLE_SQLSTATES = /^(08...|57P0[123]|53300)$/;
/** What the `pg` driver and its pool say, in words only, when a connection is gone or cannot be had. */
const PG_CONNECTION_MESSAGES = /^(Connection terminated|Client has encountered a connection error|Client was closed|timeout exceeded when trying to connect|Connection terminated due to connection timeout)/;

/**
 * Whether a failed query failed because the database server could not be reached (PostgreSQL
 * stopped, restarting or recovering, the network cut), as opposed to a problem with the statement:
 * the request may succeed when retried shortly, so the API answers 503, not 500. Looks through
 * `cause` chains and AggregateErrors (Node reports a refused dual-stack connect as one).
 */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 5) return false;
  const e = err as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string' && (CONNECTION_CODES.has(e.code) || UNAVAILABLE_SQLSTATES.test(e.code))) return true;
  if (typeof e.message === 'string' && PG_CONNECTION_MESSAGES.test(e.message)) return true;
  if (Array.isArray(e.errors) && e.errors.some((x) => isDatabaseUnavailable(x, depth + 1))) return true;
  return isDatabaseUnavailable(e.cause, depth + 1);
}

/**
 * Runs `step` and, while it fails because the database is away, runs it again (100 ms doubling to
 * 1 s) until it succeeds or `giveUp()` says to stop; any other failure, or one after giving up,
 * is thrown. For work that must be recorded once it has happened (a call placed, a task finished):
 * the worker keeps its lease meanwhile, so waiting beats letting another worker do the work again.
 */
export async function whileDatabaseAway<T>(step: () => Promise<T>, o: { giveUp: () => boolean; onFirstWait?: (err: unknown) => void }): Promise<T> {
  for (let wait = 100; ; wait = Math.min(wait * 2, 1000)) {
    try {
      return await step();
    } catch (err) {
      if (!isDatabaseUnavailable(err) || o.giveUp()) throw err;
      if (wait === 100) o.onFirstWait?.(err);
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}
