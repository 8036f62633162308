// API tokens: random, shown once, stored as SHA-256 hashes, listed by prefix, deleted at once.
// One-time tokens are single-use and expire within minutes.
import type { Insertable } from 'kysely';
import type { AccountRow, Db, Executor, TokenRow, TokensTable } from '../../db/types.ts';
import { Invalid, NotFound, Unauthorized } from '../../http/errors.ts';
import type { Scope } from '../../http/auth.ts';
import { isEmail } from '../../lib/checks.ts';
import { hashToken, newToken, tokenPrefix, VISIBLE_PREFIX_LENGTH } from '../../lib/crypto.ts';
import { nowMs, toUnixSeconds } from '../../lib/time.ts';
import { accountRepo } from '../accounts/repository.ts';
import { memberRepo } from '../members/repository.ts';
import { tokenRepo } from './repository.ts';

export function presentToken(row: TokenRow, full?: string) {
  return {
    id: row.id,
    token: full ?? `${row.prefix}…`,
    description: row.description,
    type: row.type,
    timestamp: String(toUnixSeconds(row.created_at)),
    userId: row.account_id,
    ...(row.expires_at ? { expiresAt: toUnixSeconds(row.expires_at) } : {}),
  };
}

/** Inserts a new token, retrying in the (astronomically unlikely) case of a prefix collision. */
async function issue(db: Executor, account: AccountRow, fields: Pick<Insertable<TokensTable>, 'type' | 'description' | 'created_by' | 'expires_at' | 'origin_token_id'>, value?: string) {
  for (let attempt = 0; ; attempt++) {
    const token = value ?? newToken();
    try {
      const row = await tokenRepo.insert(db, {
        account_id: account.id, hash: hashToken(token), prefix: tokenPrefix(token),
        created_at: nowMs(), used_at: null, ...fields,
      });
      return { row, token };
    } catch (err) {
      if (value !== undefined || attempt >= 3) throw err;
    }
  }
}

export function tokenService(deps: { db: Db; oneTimeTokenTtlSeconds: number }) {
  const { db } = deps;
  return {
    async list(scope: Scope, targetAccountId?: number) {
      // An ancestor may see and revoke a suspended account's tokens (not issue new ones).
      const account = await scope.target(targetAccountId, undefined, { suspended: 'allow' });
      const rows = await tokenRepo.listForAccount(db, account.id);
      return { success: true, message: 'Success', tokens: rows.map((r) => presentToken(r)) };
    },

    async create(scope: Scope, input: { type: string; description: string }, targetAccountId?: number) {
      if (input.type !== 'admin') throw new Invalid("type must be 'admin' (the only permission currently supported)");
      if (!input.description.trim()) throw new Invalid('description must not be empty');
      const account = await scope.target(targetAccountId);
      const { row, token } = await issue(db, account, {
        type: 'admin', description: input.description.trim(), created_by: scope.actor.id, expires_at: null,
      });
      return { success: true, message: 'Token created successfully', token: presentToken(row, token) };
    },

    /** Deletes by the full token (anywhere in the caller's subtree) or by its listed prefix. */
    async remove(scope: Scope, value: string, targetAccountId?: number) {
      const given = value.trim().replace(/…$|\.\.\.$/, '');
      if (given.length < VISIBLE_PREFIX_LENGTH) throw new Invalid('token must be a full token or the prefix shown by GET /api/v2/tokens');
      let deleted = 0;
      if (given.length > VISIBLE_PREFIX_LENGTH) {
        const row = await tokenRepo.findByHash(db, hashToken(given));
        if (row) {
          // Only "not in your subtree" becomes a 404; a database failure stays a failure.
          const owner = await scope.account(row.account_id, undefined, 'token', { suspended: 'allow' }).catch((err) => { if (err instanceof NotFound) return undefined; throw err; });
          if (owner && (targetAccountId === undefined || owner.id === targetAccountId)) {
            deleted = await tokenRepo.deleteForAccount(db, owner.id, { hash: row.hash });
          }
        }
      } else {
        const account = await scope.target(targetAccountId, undefined, { suspended: 'allow' });
        deleted = await tokenRepo.deleteForAccount(db, account.id, { prefix: given });
      }
      if (deleted === 0) throw new NotFound('token was not found');
      return { success: true, message: 'Token deleted successfully' };
    },

    async oneTime(scope: Scope, q: { email: string; externalAccountId?: string; customerId?: string }) {
      scope.requireActor(['partner', 'reseller'], 'generate a one-time auth token');
      const email = q.email.trim().toLowerCase();
      if (!isEmail(email)) throw new Invalid('email must be a valid email address');
      let account: AccountRow | undefined;
      if (q.customerId !== undefined) {
        if (!/^\d+$/.test(q.customerId)) throw new Invalid('customerId must be an account id');
        account = await scope.account(Number(q.customerId), undefined, 'customerId');
      } else if (q.externalAccountId !== undefined) {
        [account] = await accountRepo.findByExternalId(db, scope.actor, q.externalAccountId);
        if (!account) throw new NotFound(`No account found with externalAccountId '${q.externalAccountId}'`);
      } else {
        const accountId = await memberRepo.firstAccountIdByEmail(db, scope.actor, email);
        if (accountId === undefined) throw new NotFound(`No account found for email ${email}`);
        account = await scope.account(accountId);
      }
      const memberHolder = account.kind === 'agent' ? await scope.account(account.org_id!) : account;
      const member = await memberRepo.findByEmail(db, memberHolder.id, email);
      if (!member) {
        if (q.externalAccountId === undefined) throw new NotFound(`${email} is not a member of account ${memberHolder.id}`);
        const now = nowMs();
        await memberRepo.insert(db, {
          account_id: memberHolder.id, email, role: 'admin', permitted_account_ids: '[]', redirect_url: null,
          send_welcome_email: 0, status: 'active', created_at: now, updated_at: now,
        });
      }
      const { row, token } = await issue(db, account, {
        type: 'one-time', description: `one-time for ${email}`, created_by: scope.actor.id,
        expires_at: nowMs() + deps.oneTimeTokenTtlSeconds * 1000,
      });
      return { success: true, message: 'Auth token created', authToken: token, accountId: account.id, expiresAt: toUnixSeconds(row.expires_at) };
    },

    /**
     * A web console sign-in (docs/console.md): a token of type `console` for the scope's account,
     * expiring after `ttlSeconds` or with the token it was made from, whichever comes first, which
     * the console route puts in an HttpOnly cookie. The token it was made with (an API token, or a
     * one-time token, which authentication has just spent) is never kept by the browser. The
     * session's row names that token (`origin_token_id`, ON DELETE CASCADE): deleting it deletes the
     * session. A one-time token is spent, and pruned minutes later, so a session made from one
     * keeps only its prefix. A console session is not traded for another (it would renew itself).
     * Console tokens are not listed by GET /api/v2/tokens, but by GET /api/v2/tokens/sessions.
     */
    async openConsoleSession(scope: Scope, ttlSeconds: number) {
      const origin = await tokenRepo.findById(db, scope.token.id);
      if (!origin) throw new Unauthorized('Unauthorized: unknown or deleted token');
      if (origin.type === 'console') throw new Invalid('token must be an API token or a one-time token: a console session cannot be traded for another');
      const now = nowMs();
      const linked = origin.type !== 'one-time';
      const expiresAt = Math.min(now + ttlSeconds * 1000, linked && origin.expires_at !== null ? origin.expires_at : Infinity);
      try {
        const { row, token } = await db.transaction().execute(async (tx) => {
          const issued = await issue(tx, scope.actor, {
            type: 'console', description: 'web console sign-in', created_by: scope.actor.id,
            expires_at: expiresAt, origin_token_id: linked ? origin.id : null,
          });
          await tokenRepo.insertSession(tx, {
            token_id: issued.row.id, account_id: scope.actor.id, origin_prefix: origin.prefix, origin_type: origin.type, last_used_at: now,
          });
          return issued;
        });
        return { token, expiresAt: toUnixSeconds(row.expires_at), maxAgeSeconds: Math.max(0, Math.floor((expiresAt - now) / 1000)) };
      } catch (err) {
        // Deleted while it was being traded: the session's reference to it failed.
        if (linked && !(await tokenRepo.findById(db, origin.id))) throw new Unauthorized('Unauthorized: unknown or deleted token');
        throw err;
      }
    },

    /** Signs the console out: its session token stops working at once (any other kind is left alone). */
    async closeConsoleSession(scope: Scope) {
      if (scope.token.type === 'console') await tokenRepo.deleteById(db, scope.token.id);
    },

    /** Ends the console session with this token value, if it is one (the browser's previous sign-in, replaced). */
    async closeConsoleSessionByValue(value: string) {
      const row = await tokenRepo.findByHash(db, hashToken(value));
      if (row?.type === 'console') await tokenRepo.deleteById(db, row.id);
    },

    /** The console sessions of the account (or of a descendant), newest first (docs/console.md, "Sessions"). */
    async sessions(scope: Scope, targetAccountId?: number) {
      const account = await scope.target(targetAccountId, undefined, { suspended: 'allow' });
      const rows = await tokenRepo.listSessions(db, account.id);
      const now = nowMs();
      return {
        success: true, message: 'Success',
        sessions: rows.filter((r) => r.expires_at === null || r.expires_at > now).map((r) => ({
          sessionId: r.id,
          accountId: r.account_id,
          origin: `${r.origin_prefix}…`,
          originType: r.origin_type,
          createdAt: toUnixSeconds(r.created_at),
          lastUsedAt: toUnixSeconds(r.last_used_at),
          expiresAt: toUnixSeconds(r.expires_at),
          current: r.id === scope.token.id,
        })),
      };
    },

    /** Ends a console session of the account or of an account below it: it stops working at once. */
    async endSession(scope: Scope, sessionId: number, targetAccountId?: number) {
      const missing = new NotFound(`sessionId ${sessionId} was not found`);
      const row = Number.isSafeInteger(sessionId) ? await tokenRepo.findSession(db, sessionId) : undefined;
      if (!row) throw missing;
      const owner = await scope.account(row.account_id, undefined, 'sessionId', { suspended: 'allow' })
        .catch((err) => { if (err instanceof NotFound) return undefined; throw err; });
      if (!owner || (targetAccountId !== undefined && owner.id !== targetAccountId)) throw missing;
      if ((await tokenRepo.deleteById(db, row.id)) === 0) throw missing;
      return { success: true, message: 'Session ended' };
    },
  };
}

export type TokenService = ReturnType<typeof tokenService>;

/**
 * The visible prefix for an operator-chosen token. Prefixes are unique (DELETE finds a token by
 * its prefix), and a rotated CALLPLANE_ADMIN_TOKEN often shares its first characters with the
 * previous one; then a prefix derived from the hash is shown instead, which reveals nothing.
 */
async function freePrefix(db: Executor, token: string, hash: string): Promise<string> {
  // Every prefix is exactly VISIBLE_PREFIX_LENGTH long: DELETE tells prefixes from tokens by length.
  const step = VISIBLE_PREFIX_LENGTH - 'adm_'.length;
  const candidates = [tokenPrefix(token)];
  for (let i = 0; i + step <= hash.length; i += step) candidates.push(`adm_${hash.slice(i, i + step)}`);
  for (const prefix of candidates) {
    if (!(await tokenRepo.prefixInUse(db, prefix))) return prefix;
  }
  throw new Error('no free prefix for the admin token');
}

/**
 * First start: creates the partner (root) account and its token. With CALLPLANE_ADMIN_TOKEN the
 * given value is registered (idempotently); otherwise a new token is returned once, for printing.
 */
export async function bootstrapAdmin(db: Db, adminToken: string | undefined): Promise<{ partnerId: number; newToken?: string }> {
  return db.transaction().execute(async (tx) => {
    await accountRepo.lockFirstStart(tx);
    let partner = await accountRepo.findRootPartner(tx);
    const created = !partner;
    if (!partner) {
      const now = nowMs();
      partner = await accountRepo.create(tx, 'partner', null, { name: 'Partner' }, now);
    }
    const base = { type: 'admin' as const, created_by: null, expires_at: null, used_at: null, created_at: nowMs(), account_id: partner.id };
    if (adminToken) {
      const hash = hashToken(adminToken);
      if (!(await tokenRepo.findByHash(tx, hash))) {
        await tokenRepo.insert(tx, { ...base, hash, prefix: await freePrefix(tx, adminToken, hash), description: 'CALLPLANE_ADMIN_TOKEN' });
      }
      return { partnerId: partner.id };
    }
    if (!created) return { partnerId: partner.id };
    const token = newToken();
    await tokenRepo.insert(tx, { ...base, hash: hashToken(token), prefix: tokenPrefix(token), description: 'bootstrap admin token' });
    return { partnerId: partner.id, newToken: token };
  });
}
