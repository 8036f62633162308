// Every statement on the webhooks module's shared tables: webhook_deliveries (relayed provider
// events and our own events to subscriptions alike), delivery_attempts (their attempt log) and
// relay_events (what relays received). The relays' own table (webhook_relays) and the
// subscriptions' (webhooks) have their repositories in relays/ and subscriptions/. Queries take
// the executor first (a transaction or the database).
import { sql, type Insertable } from 'kysely';
import type {
  DB, Db, DeliveryAttemptRow, Executor, QueueState, RelayEventRow, WebhookDeliveryRow,
} from '../../db/types.ts';
import { ENDED_ROWS } from '../../queue/engine.ts';
import { MAX_DELIVERY_ATTEMPTS } from '../../webhooks/deliver.ts';

type DeliveryInsert = Insertable<DB['webhook_deliveries']>;
type AttemptInsert = Insertable<DB['delivery_attempts']>;
type EventInsert = Insertable<DB['relay_events']>;

/** Multi-row inserts stay well under SQLite's and PostgreSQL's parameter limits. */
const INSERT_CHUNK = 200;
const ENDED = ['finished', 'failed', 'canceled'] as const;

/** A relay delivery with the received event it forwards. */
export interface RelayDelivery extends WebhookDeliveryRow {
  provider_event_id: string | null;
  received_at: number;
}

/** A subscription delivery with where it goes. */
export interface SubscriptionDelivery extends WebhookDeliveryRow {
  url: string;
  type: string;
}

export interface SubscriptionDeliveryFilter {
  url?: string;
  type?: string;
  state?: QueueState;
}

export const deliveryRepo = {
  /** One delivery; it allows the whole production retry schedule unless the row says otherwise. */
  async insert(db: Executor, row: DeliveryInsert): Promise<WebhookDeliveryRow> {
    return db.insertInto('webhook_deliveries').values({ max_attempts: MAX_DELIVERY_ATTEMPTS, ...row })
      .returningAll().executeTakeFirstOrThrow();
  },

  /**
   * Many deliveries, in chunks. Rows must name every column, so a multi-row insert never writes
   * NULL for a defaulted one.
   */
  async insertMany(db: Executor, rows: readonly DeliveryInsert[]): Promise<void> {
    for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
      await db.insertInto('webhook_deliveries').values(rows.slice(i, i + INSERT_CHUNK)).execute();
    }
  },

  async countForRelay(db: Executor, orgId: number, relayId: number): Promise<number> {
    const r = await db.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll<number>().as('n'))
      .where('org_id', '=', orgId).where('relay_id', '=', relayId).executeTakeFirstOrThrow();
    return Number(r.n);
  },

  /** A relay's deliveries, newest first, with the received event's provider id and time. */
  async pageForRelay(db: Executor, orgId: number, relayId: number, limit: number, offset: number): Promise<RelayDelivery[]> {
    return db.selectFrom('webhook_deliveries as d')
      .innerJoin('relay_events as e', 'e.id', 'd.relay_event_id')
      .selectAll('d').select(['e.provider_event_id', 'e.received_at'])
      .where('d.org_id', '=', orgId).where('d.relay_id', '=', relayId)
      .orderBy('d.created_at', 'desc').orderBy('d.id', 'desc')
      .limit(limit).offset(offset).execute();
  },

  async findForRelay(db: Executor, orgId: number, relayId: number, id: string): Promise<RelayDelivery | undefined> {
    return db.selectFrom('webhook_deliveries as d')
      .innerJoin('relay_events as e', 'e.id', 'd.relay_event_id')
      .selectAll('d').select(['e.provider_event_id', 'e.received_at'])
      .where('d.org_id', '=', orgId).where('d.relay_id', '=', relayId).where('d.id', '=', id)
      .executeTakeFirst();
  },

  /** The organization's subscription deliveries, newest first, with the subscription's url and type. */
  async pageForSubscriptions(
    db: Executor, orgId: number, f: SubscriptionDeliveryFilter, limit: number, offset: number,
  ): Promise<{ total: number; rows: SubscriptionDelivery[] }> {
    let q = db.selectFrom('webhook_deliveries as d').innerJoin('webhooks as w', 'w.id', 'd.webhook_id')
      .where('d.org_id', '=', orgId).where('d.kind', '=', 'webhook').where('w.org_id', '=', orgId);
    if (f.url !== undefined) q = q.where('w.url', '=', f.url);
    if (f.type !== undefined) q = q.where('w.type', '=', f.type);
    if (f.state !== undefined) q = q.where('d.state', '=', f.state);
    const [count, rows] = await Promise.all([
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
      q.selectAll('d').select(['w.url', 'w.type'])
        .orderBy('d.created_at', 'desc').orderBy('d.id', 'desc').limit(limit).offset(offset).execute(),
    ]);
    return { total: Number(count.n), rows };
  },

  async findForSubscriptions(db: Executor, orgId: number, id: string): Promise<SubscriptionDelivery | undefined> {
    return db.selectFrom('webhook_deliveries as d').innerJoin('webhooks as w', 'w.id', 'd.webhook_id')
      .selectAll('d').select(['w.url', 'w.type'])
      .where('d.org_id', '=', orgId).where('d.kind', '=', 'webhook').where('w.org_id', '=', orgId).where('d.id', '=', id)
      .executeTakeFirst();
  },

  /**
   * Subscription deliveries that ended before `before`, through the partial index
   * webhook_deliveries_ended (migration 0021-retention-indexes).
   */
  endedBefore(db: Executor, before: number, limit: number) {
    return db.selectFrom('webhook_deliveries').select('id')
      .where(ENDED_ROWS).where('finished_at', '<', before)
      .where('kind', 'in', ['webhook', 'message']).limit(limit);
  },

  /**
   * Retention: deletes up to `batch` subscription deliveries (of our own events and of agents'
   * replies; relayed events go with their event) that ended before `before` (unix ms), with their
   * attempt log (by cascade), in one short transaction. Returns how many were deleted; call again
   * while it returns `batch`.
   */
  async pruneEndedSubscriptionDeliveries(db: Db, before: number, batch = 1000): Promise<number> {
    return db.transaction().execute(async (tx) => {
      const rows = await deliveryRepo.endedBefore(tx, before, batch).execute();
      if (rows.length === 0) return 0;
      await tx.deleteFrom('webhook_deliveries').where('id', 'in', rows.map((r) => r.id)).execute();
      return rows.length;
    });
  },
};

/** The attempt log: one row per attempt of a delivery, written with the attempt's outcome. */
export const attemptRepo = {
  async insert(db: Executor, row: AttemptInsert): Promise<void> {
    await db.insertInto('delivery_attempts').values(row).execute();
  },

  /** The attempts of these deliveries, by delivery id, in attempt order. */
  async byDelivery(db: Executor, deliveryIds: readonly string[]): Promise<Map<string, DeliveryAttemptRow[]>> {
    const byDelivery = new Map<string, DeliveryAttemptRow[]>();
    if (deliveryIds.length === 0) return byDelivery;
    const rows = await db.selectFrom('delivery_attempts').selectAll()
      .where('delivery_id', 'in', deliveryIds).orderBy('delivery_id').orderBy('attempt').execute();
    for (const a of rows) {
      const list = byDelivery.get(a.delivery_id);
      if (list) list.push(a);
      else byDelivery.set(a.delivery_id, [a]);
    }
    return byDelivery;
  },
};

export const relayEventRepo = {
  /** Stores the event unless one with the same provider id exists for the relay (then undefined). */
  async insert(db: Executor, row: EventInsert): Promise<RelayEventRow | undefined> {
    return db.insertInto('relay_events').values(row)
      .onConflict((oc) => oc.columns(['relay_id', 'provider_event_id']).doNothing())
      .returningAll().executeTakeFirst();
  },

  async find(db: Executor, relayId: number, providerEventId: string): Promise<RelayEventRow | undefined> {
    return db.selectFrom('relay_events').selectAll()
      .where('relay_id', '=', relayId).where('provider_event_id', '=', providerEventId).executeTakeFirst();
  },

  /** What a delivery forwards: the stored body (base64) and its content type. */
  async findContent(db: Executor, id: string): Promise<Pick<RelayEventRow, 'body' | 'content_type'> | undefined> {
    return db.selectFrom('relay_events').select(['body', 'content_type']).where('id', '=', id).executeTakeFirst();
  },

  /**
   * Relayed events received before `before` whose every delivery ended before it too, through the
   * index relay_events_received (migration 0021-retention-indexes).
   */
  endedBefore(db: Executor, before: number, limit: number) {
    return db.selectFrom('relay_events as e').select('e.id')
      .where('e.received_at', '<', before)
      .where((eb) => eb.not(eb.exists(
        eb.selectFrom('webhook_deliveries as d').select(sql<number>`1`.as('one'))
          .whereRef('d.relay_event_id', '=', 'e.id')
          .where((inner) => inner.or([inner('d.state', 'not in', ENDED), inner('d.finished_at', '>=', before)])),
      )))
      .limit(limit);
  },

  /**
   * Retention: deletes up to `batch` relayed events received before `before` whose every
   * delivery (replays included) ended before it too; their deliveries and attempts go with them
   * (by cascade). One short transaction; call again while it returns `batch`.
   */
  async pruneEnded(db: Db, before: number, batch = 1000): Promise<number> {
    return db.transaction().execute(async (tx) => {
      const rows = await relayEventRepo.endedBefore(tx, before, batch).execute();
      if (rows.length === 0) return 0;
      await tx.deleteFrom('relay_events').where('id', 'in', rows.map((r) => r.id)).execute();
      return rows.length;
    });
  },
};
