// Keeps the delivery tables bounded: subscription deliveries that ended, and relayed events whose
// deliveries all ended, are deleted once older than the retention period (with their attempt log,
// by cascade). Run by the workers in small batches, so no run holds a long transaction.
import { sql } from 'kysely';
import type { Db } from '../../db/types.ts';

const ENDED = ['finished', 'failed', 'canceled'] as const;

/** Deletes up to `batch` subscription deliveries that ended before `before` (unix ms). */
export async function pruneSubscriptionDeliveries(db: Db, before: number, batch = 1000): Promise<number> {
  return db.transaction().execute(async (tx) => {
    const rows = await tx.selectFrom('webhook_deliveries').select('id')
      .where('kind', '=', 'webhook').where('state', 'in', ENDED).where('finished_at', '<', before)
      .limit(batch).execute();
    if (rows.length === 0) return 0;
    await tx.deleteFrom('webhook_deliveries').where('id', 'in', rows.map((r) => r.id)).execute();
    return rows.length;
  });
}

/**
 * Deletes up to `batch` relayed events received before `before` whose every delivery (replays
 * included) ended before it too; their deliveries and attempts go with them.
 */
export async function pruneRelayEvents(db: Db, before: number, batch = 1000): Promise<number> {
  return db.transaction().execute(async (tx) => {
    const rows = await tx.selectFrom('relay_events as e').select('e.id')
      .where('e.received_at', '<', before)
      .where(({ not, exists, selectFrom }) => not(exists(
        selectFrom('webhook_deliveries as d').select(sql<number>`1`.as('one'))
          .whereRef('d.relay_event_id', '=', 'e.id')
          .where((eb) => eb.or([eb('d.state', 'not in', ENDED), eb('d.finished_at', '>=', before)])),
      )))
      .limit(batch).execute();
    if (rows.length === 0) return 0;
    await tx.deleteFrom('relay_events').where('id', 'in', rows.map((r) => r.id)).execute();
    return rows.length;
  });
}
