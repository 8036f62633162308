// Queries on users: the people (members and admin users) invited to an account.
import { ANCESTOR_COLUMN, type AccountRow, type Executor, type UserRow } from '../../db/types.ts';

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
  /** The account of the first user with this email within `within`'s subtree. */
  async firstAccountIdByEmail(db: Executor, within: Pick<AccountRow, 'id' | 'kind'>, email: string): Promise<number | undefined> {
    const match = await db.selectFrom('users').innerJoin('accounts', 'accounts.id', 'users.account_id')
      .select('users.account_id').where('users.email', '=', email)
      .where(`accounts.${ANCESTOR_COLUMN[within.kind]}`, '=', within.id)
      .orderBy('users.id').executeTakeFirst();
    return match?.account_id;
  },
  async update(db: Executor, id: number, patch: Partial<Omit<UserRow, 'id'>>): Promise<UserRow | undefined> {
    return db.updateTable('users').set(patch).where('id', '=', id).returningAll().executeTakeFirst();
  },
  async delete(db: Executor, accountId: number, id: number): Promise<number> {
    const r = await db.deleteFrom('users').where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows);
  },
};
