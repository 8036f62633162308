// Queries on webhook_relays (an organization's relay per provider type). Every query but the
// ingress lookup and the delivery worker's is bound to one organization. What relays received and
// forward (relay_events, webhook_deliveries, delivery_attempts) is in ../repository.ts.
import type { Insertable, Updateable } from 'kysely';
import type { DB, Executor, WebhookRelayRow } from '../../../db/types.ts';

type RelayInsert = Insertable<DB['webhook_relays']>;
type RelayUpdate = Updateable<DB['webhook_relays']>;

export const relayRepo = {
  async find(db: Executor, orgId: number, type: string, opts: { lock?: boolean } = {}): Promise<WebhookRelayRow | undefined> {
    const q = db.selectFrom('webhook_relays').selectAll().where('org_id', '=', orgId).where('type', '=', type);
    return (opts.lock ? q.forUpdate() : q).executeTakeFirst();
  },
  async list(db: Executor, orgId: number): Promise<WebhookRelayRow[]> {
    return db.selectFrom('webhook_relays').selectAll().where('org_id', '=', orgId).orderBy('id').execute();
  },
  /** The delivery worker's lookup of the relay a delivery forwards to. */
  async findById(db: Executor, id: number): Promise<WebhookRelayRow | undefined> {
    return db.selectFrom('webhook_relays').selectAll().where('id', '=', id).executeTakeFirst();
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
  /** Switches the relay off (its receiver answered 410 Gone) until it is configured again. */
  async disable(db: Executor, id: number, now: number): Promise<void> {
    await db.updateTable('webhook_relays').set({ enabled: 0, updated_at: now }).where('id', '=', id).execute();
  },
  /** Deletes the relay; its events, deliveries and attempts go with it (foreign keys cascade). */
  async remove(db: Executor, orgId: number, type: string): Promise<boolean> {
    const r = await db.deleteFrom('webhook_relays').where('org_id', '=', orgId).where('type', '=', type).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  },
};
