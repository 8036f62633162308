// Queries on the tokens table. Only hashes are stored; the prefix is what listings show.
import type { Executor, TokenRow, TokenWithAccount } from '../../db/types.ts';
import { suspensionOf } from '../accounts/repository.ts';

export const tokenRepo = {
  async findByHash(db: Executor, hash: string): Promise<TokenRow | undefined> {
    return db.selectFrom('tokens').selectAll().where('hash', '=', hash).executeTakeFirst();
  },

  /**
   * The token, the account it belongs to and whether that account is suspended (itself or an
   * ancestor: its partner, reseller and organization are joined by id), in one round trip (this
   * runs on every request).
   */
  async findWithAccountByHash(db: Executor, hash: string): Promise<TokenWithAccount | undefined> {
    const row = await db.selectFrom('tokens').innerJoin('accounts', 'accounts.id', 'tokens.account_id')
      .leftJoin('accounts as lp', 'lp.id', 'accounts.partner_id')
      .leftJoin('accounts as lr', 'lr.id', 'accounts.reseller_id')
      .leftJoin('accounts as lo', 'lo.id', 'accounts.org_id')
      .selectAll('accounts')
      .select(['tokens.id as token_id', 'tokens.type as token_type', 'tokens.expires_at as token_expires_at', 'tokens.used_at as token_used_at'])
      .select(['lp.active as partner_active', 'lr.active as reseller_active', 'lo.active as org_active'])
      .where('tokens.hash', '=', hash).executeTakeFirst();
    if (!row) return undefined;
    const { token_id, token_type, token_expires_at, token_used_at, partner_active, reseller_active, org_active, ...account } = row;
    return {
      token: { id: token_id, type: token_type, expires_at: token_expires_at, used_at: token_used_at },
      account,
      suspended: suspensionOf(account, { partner_active, reseller_active, org_active }),
    };
  },

  /** Whether a token shows this prefix already (prefixes are unique). */
  async prefixInUse(db: Executor, prefix: string): Promise<boolean> {
    return (await db.selectFrom('tokens').select('id').where('prefix', '=', prefix).executeTakeFirst()) !== undefined;
  },

  async insert(db: Executor, row: Omit<TokenRow, 'id'>): Promise<TokenRow> {
    return db.insertInto('tokens').values(row).returningAll().executeTakeFirstOrThrow();
  },

  /** Marks a one-time token used; false when another request used it first. */
  async consume(db: Executor, id: number, now: number): Promise<boolean> {
    const r = await db.updateTable('tokens').set({ used_at: now })
      .where('id', '=', id).where('used_at', 'is', null).executeTakeFirst();
    return Number(r.numUpdatedRows) === 1;
  },

  async listForAccount(db: Executor, accountId: number): Promise<TokenRow[]> {
    return db.selectFrom('tokens').selectAll().where('account_id', '=', accountId)
      .where('type', '=', 'admin').orderBy('id').execute();
  },

  async deleteForAccount(db: Executor, accountId: number, by: { hash?: string; prefix?: string }): Promise<number> {
    let q = db.deleteFrom('tokens').where('account_id', '=', accountId);
    if (by.hash) q = q.where('hash', '=', by.hash);
    else if (by.prefix) q = q.where('prefix', '=', by.prefix);
    else return 0;
    const r = await q.executeTakeFirst();
    return Number(r.numDeletedRows);
  },

  async deleteById(db: Executor, id: number): Promise<number> {
    const r = await db.deleteFrom('tokens').where('id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows);
  },

  async pruneExpired(db: Executor, now: number): Promise<number> {
    const r = await db.deleteFrom('tokens').where('type', 'in', ['one-time', 'console']).where('expires_at', '<', now).executeTakeFirst();
    return Number(r.numDeletedRows);
  },
};
