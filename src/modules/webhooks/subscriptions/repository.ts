// Queries on webhooks (an organization's event subscriptions). Every query is bound to one
// organization.
import type { Insertable } from 'kysely';
import type { DB, Executor, QueueState, WebhookDeliveryRow, WebhookRow } from '../../../db/types.ts';

/** A subscription delivery with where it goes. */
export interface SubscriptionDelivery extends WebhookDeliveryRow {
  url: string;
  type: string;
}

export interface DeliveryFilter {
  url?: string;
  type?: string;
  state?: QueueState;
}

export const subscriptionRepo = {
  async list(db: Executor, orgId: number): Promise<WebhookRow[]> {
    return db.selectFrom('webhooks').selectAll().where('org_id', '=', orgId).orderBy('id').execute();
  },
  async count(db: Executor, orgId: number): Promise<number> {
    const r = await db.selectFrom('webhooks').select((eb) => eb.fn.countAll<number>().as('n'))
      .where('org_id', '=', orgId).executeTakeFirstOrThrow();
    return Number(r.n);
  },
  async findByUrlAndType(db: Executor, orgId: number, url: string, type: string): Promise<WebhookRow | undefined> {
    return db.selectFrom('webhooks').selectAll()
      .where('org_id', '=', orgId).where('url', '=', url).where('type', '=', type).executeTakeFirst();
  },
  async insert(db: Executor, row: Insertable<DB['webhooks']>): Promise<WebhookRow> {
    return db.insertInto('webhooks').values(row).returningAll().executeTakeFirstOrThrow();
  },
  /** Deletes the organization's subscriptions to `url` (of one type when given); pending deliveries go with them. */
  async removeByUrl(db: Executor, orgId: number, url: string, type?: string): Promise<number> {
    let q = db.deleteFrom('webhooks').where('org_id', '=', orgId).where('url', '=', url);
    if (type !== undefined) q = q.where('type', '=', type);
    const r = await q.executeTakeFirst();
    return Number(r.numDeletedRows);
  },

  /** The organization's subscription deliveries, newest first, with the subscription's url and type. */
  async deliveries(db: Executor, orgId: number, f: DeliveryFilter, limit: number, offset: number): Promise<{ total: number; rows: SubscriptionDelivery[] }> {
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
  async findDelivery(db: Executor, orgId: number, id: string): Promise<SubscriptionDelivery | undefined> {
    return db.selectFrom('webhook_deliveries as d').innerJoin('webhooks as w', 'w.id', 'd.webhook_id')
      .selectAll('d').select(['w.url', 'w.type'])
      .where('d.org_id', '=', orgId).where('d.kind', '=', 'webhook').where('w.org_id', '=', orgId).where('d.id', '=', id)
      .executeTakeFirst();
  },
};
