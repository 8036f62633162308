// The retention jobs' indexes (src/maintenance.ts): each prune reads the rows of a queue table
// that ended before the retention period, a thousand at a time. Without an index every batch read
// the whole table (tasks: 140 ms for 300,000 retained on SQLite, whose one connection answers
// nothing else meanwhile; deliveries and turns alike), every ten minutes and again per thousand
// rows to prune. Partial, over ended rows only: each row adds its entry once, when it ends. The
// prunes write the ended states as literals (as the partial indexes name them), so both engines
// see that an index fits.
//
// Relayed events are pruned by when they were received (with every delivery of theirs ended): an
// index on received_at, which each event enters once, at its arrival.
//
// Deliveries and turns also get the rescuer's index tasks got in migration 0018: over running rows
// only, on lease_expires_at, instead of (state, lease_expires_at) over every row. That one was
// written at each insert, claim and end for a search that only asks for running rows, and SQLite
// took it for the prune's `state in (…)`, reading every ended row through it.
import { sql, type Kysely } from 'kysely';

const ENDED = [sql.lit('finished'), sql.lit('failed'), sql.lit('canceled')];

export function retentionIndexes() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      for (const table of ['tasks', 'webhook_deliveries', 'conversation_turns']) {
        await db.schema.createIndex(`${table}_ended`).on(table).column('finished_at')
          .where(sql.ref('state'), 'in', ENDED).execute();
      }
      await db.schema.createIndex('relay_events_received').on('relay_events').column('received_at').execute();
      for (const table of ['webhook_deliveries', 'conversation_turns']) {
        await db.schema.createIndex(`${table}_running_lease`).on(table).column('lease_expires_at')
          .where(sql.ref('state'), '=', sql.lit('running')).execute();
        await db.schema.dropIndex(`${table}_rescue`).execute();
      }
    },
  };
}
