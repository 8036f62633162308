// PostgreSQL: a statement-level trigger on each table a process caches rows of (accounts and
// tokens, read by every authenticated request) NOTIFYs the change channel with the table's name
// when a change commits, so every process drops what it cached (src/db/change-stamps.ts). Writes
// from anywhere count: another callplane process, a CLI command, an operator's psql. SQLite has
// one process per DATA_DIR, which sees every write itself: nothing to add there.
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../types.ts';

const CHANNEL = 'callplane_changed';
const TABLES = ['accounts', 'tokens'];

export function changeNotifications(dialect: Dialect) {
  return {
    async up(db: Kysely<any>): Promise<void> {
      if (dialect !== 'postgres') return;
      await sql`create or replace function callplane_changed() returns trigger language plpgsql as $$
        begin
          perform pg_notify(${sql.lit(CHANNEL)}, tg_table_name);
          return null;
        end
      $$`.execute(db);
      for (const table of TABLES) {
        await sql`create trigger ${sql.id(`${table}_changed`)} after insert or update or delete or truncate on ${sql.table(table)}
          for each statement execute function callplane_changed()`.execute(db);
      }
    },
  };
}
