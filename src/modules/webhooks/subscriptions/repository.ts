// Queries on webhooks (an organization's event subscriptions). Every query but the delivery
// worker's is bound to one organization (or, for the outbox dispatcher, to the organizations of a
// batch of events). Their deliveries and attempt logs are in ../repository.ts.
import type { Insertable } from 'kysely';
import type { DB, Executor, WebhookRow } from '../../../db/types.ts';

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
  /** The delivery worker's lookup of the subscription a delivery goes to. */
  async findById(db: Executor, id: number): Promise<WebhookRow | undefined> {
    return db.selectFrom('webhooks').selectAll().where('id', '=', id).executeTakeFirst();
  },
  /** The subscriptions of one type of these organizations, by id: whether their events are written, and where they go. */
  async ofType(db: Executor, orgIds: readonly number[], type: string): Promise<Pick<WebhookRow, 'id' | 'org_id'>[]> {
    if (orgIds.length === 0) return [];
    return db.selectFrom('webhooks').select(['id', 'org_id'])
      .where('type', '=', type).where('org_id', 'in', orgIds).orderBy('id').execute();
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
  /** Deletes one subscription (its receiver answered 410 Gone); pending deliveries go with it. */
  async remove(db: Executor, id: number): Promise<void> {
    await db.deleteFrom('webhooks').where('id', '=', id).execute();
  },
};
