// Queries on users: the people (members and admin users) invited to an account.
import type { Executor, UserRow } from '../../db/types.ts';

export const memberRepo = {
  async insert(db: Executor, row: Omit<UserRow, 'id'>): Promise<UserRow> {
    return db.insertInto('users').values(row).returningAll().executeTakeFirstOrThrow();
  },
  async list(db: Executor, accountId: number, role?: string): Promise<UserRow[]> {
    let q = db.selectFrom('users').selectAll().where('account_id', '=', accountId);
    if (role) q = q.where('role', '=', role);
    return q.orderBy('id').execute();
  },
  async find(db: Executor, accountId: number, id: number): Promise<UserRow | undefined> {
    return db.selectFrom('users').selectAll().where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
  },
  async findByEmail(db: Executor, accountId: number, email: string): Promise<UserRow | undefined> {
    return db.selectFrom('users').selectAll().where('account_id', '=', accountId).where('email', '=', email.toLowerCase()).executeTakeFirst();
  },
  async update(db: Executor, id: number, patch: Partial<Omit<UserRow, 'id'>>): Promise<UserRow | undefined> {
    return db.updateTable('users').set(patch).where('id', '=', id).returningAll().executeTakeFirst();
  },
  async delete(db: Executor, accountId: number, id: number): Promise<number> {
    const r = await db.deleteFrom('users').where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows);
  },
};
