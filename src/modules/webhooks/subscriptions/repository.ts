// Queries on webhooks (an organization's event subscriptions). Every query is bound to one
// organization.
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
};
