// Queries on the tokens table. Only hashes are stored; the prefix is what listings show.
import type { Insertable } from 'kysely';
import type { ConsoleSessionsTable, Executor, TokenRow, TokensTable, TokenWithAccount } from '../../db/types.ts';
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

  async findById(db: Executor, id: number): Promise<TokenRow | undefined> {
    return db.selectFrom('tokens').selectAll().where('id', '=', id).executeTakeFirst();
  },

  /** Whether a token shows this prefix already (prefixes are unique). */
  async prefixInUse(db: Executor, prefix: string): Promise<boolean> {
    return (await db.selectFrom('tokens').select('id').where('prefix', '=', prefix).executeTakeFirst()) !== undefined;
  },

  async insert(db: Executor, row: Insertable<TokensTable>): Promise<TokenRow> {
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

  /** A console session's own fields (its row in `tokens` is inserted first, in the same transaction). */
  async insertSession(db: Executor, row: ConsoleSessionsTable): Promise<void> {
    await db.insertInto('console_sessions').values(row).execute();
  },

  /** The console sessions of an account, newest first, with their token rows. */
  async listSessions(db: Executor, accountId: number): Promise<(TokenRow & { origin_prefix: string; origin_type: string; last_used_at: number })[]> {
    return db.selectFrom('tokens').innerJoin('console_sessions', 'console_sessions.token_id', 'tokens.id')
      .selectAll('tokens').select(['console_sessions.origin_prefix', 'console_sessions.origin_type', 'console_sessions.last_used_at'])
      .where('tokens.account_id', '=', accountId).where('tokens.type', '=', 'console')
      .orderBy('tokens.id', 'desc').execute();
  },

  /** A console session's token row by its id (undefined for any other kind of token). */
  async findSession(db: Executor, id: number): Promise<TokenRow | undefined> {
    return db.selectFrom('tokens').selectAll().where('id', '=', id).where('type', '=', 'console').executeTakeFirst();
  },

  /** Records a console session's use (at most once per `everyMs`: a no-op when written more recently). */
  async touchSession(db: Executor, tokenId: number, now: number, everyMs: number): Promise<void> {
    await db.updateTable('console_sessions').set({ last_used_at: now })
      .where('token_id', '=', tokenId).where('last_used_at', '<', now - everyMs).execute();
  },

  async pruneExpired(db: Executor, now: number): Promise<number> {
    const r = await db.deleteFrom('tokens').where('type', 'in', ['one-time', 'console']).where('expires_at', '<', now).executeTakeFirst();
    return Number(r.numDeletedRows);
  },
};
