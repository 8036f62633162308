// The PostgreSQL driver, loaded the first time a PostgreSQL database is opened: a process on the
// embedded SQLite default never loads it (about 35 ms of CPU at start-up, docs/performance.md).
// `pg` is CommonJS, so it is required synchronously and openDatabase() stays synchronous.
import { createRequire } from 'node:module';
import type Pg from 'pg';

let driver: typeof Pg | undefined;

export function pgDriver(): typeof Pg {
  if (!driver) {
    driver = createRequire(import.meta.url)('pg') as typeof Pg;
    // int8 (counts, unix-ms timestamps) as JS numbers: every value we store fits in 2^53.
    driver.types.setTypeParser(20, (v) => Number(v));
  }
  return driver;
}
