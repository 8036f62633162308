// Authentication (the `token` query parameter) and the tenant scope every service works in.
// The ladder is partner → reseller → organization → agent; a token acts on its own account and
// everything below it. Anything outside that subtree is reported as not found, so ids of other
// tenants cannot be probed.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AccountKind, AccountRow, Db, TokenRow } from '../db/types.ts';
import { ANCESTOR_COLUMN, accountRepo } from '../modules/accounts/repository.ts';
import { tokenRepo } from '../modules/tokens/repository.ts';
import { hashToken } from '../lib/crypto.ts';
import { Forbidden, NotFound, Unauthorized } from './errors.ts';
import { MAX_ACCOUNT_ID } from './schemas.ts';

export const KIND_LEVEL: Record<AccountKind, number> = { partner: 0, reseller: 1, organization: 2, agent: 3 };
export const KIND_LABEL: Record<AccountKind, string> = {
  partner: 'Partner', reseller: 'Reseller', organization: 'Organization', agent: 'Account',
};


export class Scope {
  constructor(readonly db: Db, readonly actor: AccountRow, readonly token: Pick<TokenRow, 'id' | 'type'>) {}

  /** True when `target` is the actor itself or lies below it on the ladder. */
  contains(target: AccountRow): boolean {
    return target[ANCESTOR_COLUMN[this.actor.kind]] === this.actor.id;
  }

  /** An account within the actor's subtree; 404 for a missing id and for another tenant's. */
  async account(id: number, kinds?: readonly AccountKind[], field = 'targetAccountId'): Promise<AccountRow> {
    // Ids no account can have (beyond PostgreSQL's integer column) are simply not found, rather
    // than reaching the database as an out-of-range parameter.
    const row = id === this.actor.id ? this.actor
      : Number.isSafeInteger(id) && id >= 1 && id <= MAX_ACCOUNT_ID ? await accountRepo.findById(this.db, id) : undefined;
    if (!row || !this.contains(row)) throw new NotFound(`${field} ${id} was not found`);
    if (kinds && !kinds.includes(row.kind)) {
      throw new NotFound(`${field} ${id} is not ${kinds.map((k) => articleFor(KIND_LABEL[k])).join(' or ')}`);
    }
    return row;
  }

  /** The account an operation acts on: `targetAccountId` when given, else the token's own. */
  async target(targetAccountId: number | undefined, kinds?: readonly AccountKind[]): Promise<AccountRow> {
    if (targetAccountId === undefined) {
      if (kinds && !kinds.includes(this.actor.kind)) {
        throw new Forbidden(`This operation needs ${kinds.map((k) => articleFor(KIND_LABEL[k].toLowerCase())).join(' or ')} (pass targetAccountId to act on one you own)`);
      }
      return this.actor;
    }
    return this.account(targetAccountId, kinds);
  }

  /** Refuses the operation unless the token's own account is of one of these kinds. */
  requireActor(kinds: readonly AccountKind[], what: string): void {
    if (!kinds.includes(this.actor.kind)) {
      throw new Forbidden(`${kinds.map((k) => KIND_LABEL[k]).join(' or ')} account required to ${what}`);
    }
  }

  /** True when the actor is a strict ancestor of `target`. */
  isAncestorOf(target: AccountRow): boolean {
    return target.id !== this.actor.id && this.contains(target);
  }
}

function articleFor(word: string): string {
  return /^[aeiouAEIOU]/.test(word) ? `an ${word}` : `a ${word}`;
}

declare module 'fastify' {
  interface FastifyRequest {
    scope: Scope;
  }
  interface FastifyContextConfig {
    /** Routes that need no token (health, docs, provider ingress). */
    public?: boolean;
  }
}

export function readToken(req: FastifyRequest): string | undefined {
  const q = req.query as Record<string, unknown> | undefined;
  const fromQuery = q && typeof q.token === 'string' ? q.token : undefined;
  if (fromQuery) return fromQuery;
  const header = req.headers.authorization;
  if (header && /^Bearer\s+/i.test(header)) return header.replace(/^Bearer\s+/i, '').trim();
  return undefined;
}

export async function authenticate(db: Db, token: string, now = Date.now()): Promise<Scope> {
  const found = await tokenRepo.findWithAccountByHash(db, hashToken(token));
  if (!found) throw new Unauthorized('Unauthorized: unknown or deleted token');
  const { token: row, account } = found;
  if (row.expires_at !== null && row.expires_at <= now) throw new Unauthorized('Unauthorized: token has expired');
  if (row.type === 'one-time' && !(await tokenRepo.consume(db, row.id, now))) {
    throw new Unauthorized('Unauthorized: one-time token has already been used');
  }
  return new Scope(db, account, row);
}

export function registerAuth(app: FastifyInstance, db: Db): void {
  app.decorateRequest('scope', null as unknown as Scope);
  app.addHook('onRequest', async (req) => {
    if (req.routeOptions.config?.public || !req.routeOptions.url) return;
    const token = readToken(req);
    if (!token) throw new Unauthorized('Unauthorized: the token query parameter is required');
    req.scope = await authenticate(db, token);
  });
}
