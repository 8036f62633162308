// Queries on webhook_relays, relay_events and the relay rows of webhook_deliveries. Every query
// but the ingress lookup is bound to one organization.
import type { Insertable, Updateable } from 'kysely';
import type {
  DB, Executor, RelayEventRow, WebhookDeliveryRow, WebhookRelayRow,
} from '../../../db/types.ts';
import { MAX_DELIVERY_ATTEMPTS } from '../../../webhooks/deliver.ts';

type RelayInsert = Insertable<DB['webhook_relays']>;
type RelayUpdate = Updateable<DB['webhook_relays']>;
type EventInsert = Insertable<DB['relay_events']>;
type DeliveryInsert = Insertable<DB['webhook_deliveries']>;

export const relayRepo = {
  async find(db: Executor, orgId: number, type: string, opts: { lock?: boolean } = {}): Promise<WebhookRelayRow | undefined> {
    const q = db.selectFrom('webhook_relays').selectAll().where('org_id', '=', orgId).where('type', '=', type);
    return (opts.lock ? q.forUpdate() : q).executeTakeFirst();
  },
  async list(db: Executor, orgId: number): Promise<WebhookRelayRow[]> {
    return db.selectFrom('webhook_relays').selectAll().where('org_id', '=', orgId).orderBy('id').execute();
  },
  /** The ingress lookup: the id is the credential, so it is the only key. */
  async findByIngress(db: Executor, ingressId: string): Promise<WebhookRelayRow | undefined> {
    return db.selectFrom('webhook_relays').selectAll().where('ingress_id', '=', ingressId).executeTakeFirst();
  },
  /** Inserts unless the organization already has a relay of this type (then undefined). */
  async insert(db: Executor, row: RelayInsert): Promise<WebhookRelayRow | undefined> {
    return db.insertInto('webhook_relays').values(row)
      .onConflict((oc) => oc.columns(['org_id', 'type']).doNothing())
      .returningAll().executeTakeFirst();
  },
  async update(db: Executor, id: number, patch: RelayUpdate): Promise<WebhookRelayRow> {
    return db.updateTable('webhook_relays').set(patch).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
  },
  /** Deletes the relay; its events, deliveries and attempts go with it (foreign keys cascade). */
  async remove(db: Executor, orgId: number, type: string): Promise<boolean> {
    const r = await db.deleteFrom('webhook_relays').where('org_id', '=', orgId).where('type', '=', type).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
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
};

export interface RelayDelivery extends WebhookDeliveryRow {
  provider_event_id: string | null;
  received_at: number;
}

export const relayDeliveryRepo = {
  /** A new delivery allows the whole production retry schedule unless the row says otherwise. */
  async insert(db: Executor, row: DeliveryInsert): Promise<WebhookDeliveryRow> {
    return db.insertInto('webhook_deliveries').values({ max_attempts: MAX_DELIVERY_ATTEMPTS, ...row })
      .returningAll().executeTakeFirstOrThrow();
  },
  async count(db: Executor, orgId: number, relayId: number): Promise<number> {
    const r = await db.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll<number>().as('n'))
      .where('org_id', '=', orgId).where('relay_id', '=', relayId).executeTakeFirstOrThrow();
    return Number(r.n);
  },
  /** Newest first, with the received event's provider id and time. */
  async page(db: Executor, orgId: number, relayId: number, limit: number, offset: number): Promise<RelayDelivery[]> {
    return db.selectFrom('webhook_deliveries as d')
      .innerJoin('relay_events as e', 'e.id', 'd.relay_event_id')
      .selectAll('d').select(['e.provider_event_id', 'e.received_at'])
      .where('d.org_id', '=', orgId).where('d.relay_id', '=', relayId)
      .orderBy('d.created_at', 'desc').orderBy('d.id', 'desc')
      .limit(limit).offset(offset).execute();
  },
  async find(db: Executor, orgId: number, relayId: number, id: string): Promise<RelayDelivery | undefined> {
    return db.selectFrom('webhook_deliveries as d')
      .innerJoin('relay_events as e', 'e.id', 'd.relay_event_id')
      .selectAll('d').select(['e.provider_event_id', 'e.received_at'])
      .where('d.org_id', '=', orgId).where('d.relay_id', '=', relayId).where('d.id', '=', id)
      .executeTakeFirst();
  },
};
