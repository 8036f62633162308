// Queries on catalog_items (partners' and resellers' own plans and add-ons) and subscriptions.
import type { CatalogItemRow, Executor, SubscriptionRow, SubscriptionsTable } from '../../db/types.ts';
import type { Insertable, Updateable } from 'kysely';

export const catalogRepo = {
  /** The items of these owners (a partner and, when given, its reseller), oldest first. */
  async listFor(db: Executor, ownerIds: number[]): Promise<CatalogItemRow[]> {
    if (ownerIds.length === 0) return [];
    return db.selectFrom('catalog_items').selectAll().where('owner_id', 'in', ownerIds).orderBy('created_at').orderBy('item_id').execute();
  },

  async find(db: Executor, ownerId: number, itemId: string): Promise<CatalogItemRow | undefined> {
    return db.selectFrom('catalog_items').selectAll().where('owner_id', '=', ownerId).where('item_id', '=', itemId).executeTakeFirst();
  },

  /**
   * Creates or replaces the owner's item in one statement (two concurrent PUTs of a new id do not
   * collide); true when it was created (the row kept its created_at otherwise).
   */
  async put(tx: Executor, row: Omit<CatalogItemRow, 'created_at' | 'updated_at'>, now: number): Promise<boolean> {
    const written = await tx.insertInto('catalog_items').values({ ...row, created_at: now, updated_at: now })
      .onConflict((oc) => oc.columns(['owner_id', 'item_id']).doUpdateSet({ body: row.body, kind: row.kind, updated_at: now }))
      .returning('created_at').executeTakeFirstOrThrow();
    return Number(written.created_at) === now;
  },

  async delete(tx: Executor, ownerId: number, itemId: string): Promise<boolean> {
    const r = await tx.deleteFrom('catalog_items').where('owner_id', '=', ownerId).where('item_id', '=', itemId).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  },
};

export const subscriptionRepo = {
  /** The organization's subscription in force (active; later also pending or unpaid), newest first. */
  async current(db: Executor, orgId: number): Promise<SubscriptionRow | undefined> {
    return db.selectFrom('subscriptions').selectAll().where('org_id', '=', orgId).where('state', '=', 'active')
      .orderBy('started_at', 'desc').orderBy('id', 'desc').executeTakeFirst();
  },

  async insert(tx: Executor, row: Insertable<SubscriptionsTable>): Promise<void> {
    await tx.insertInto('subscriptions').values(row).execute();
  },

  async update(tx: Executor, id: string, patch: Updateable<SubscriptionsTable>): Promise<void> {
    await tx.updateTable('subscriptions').set(patch).where('id', '=', id).execute();
  },

  async find(db: Executor, id: string): Promise<SubscriptionRow | undefined> {
    return db.selectFrom('subscriptions').selectAll().where('id', '=', id).executeTakeFirst();
  },
};
