// Authentication (the `token` query parameter) and the tenant scope every service works in.
// The ladder is partner → reseller → organization → agent; a token acts on its own account and
// everything below it. Anything outside that subtree is reported as not found, so ids of other
// tenants cannot be probed.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type {} from '@fastify/cookie';
import { ANCESTOR_COLUMN, type AccountKind, type AccountRow, type Db, type Suspended, type TokenRow, type TokenWithAccount } from '../db/types.ts';
import { changeStamp, type ChangeStamp } from '../db/index.ts';
import { StampedCache } from '../db/stamped-cache.ts';
import { hashToken } from '../lib/crypto.ts';
import { Forbidden, NotFound, Unauthorized } from './errors.ts';
import { MAX_ACCOUNT_ID } from './schemas.ts';

export const KIND_LEVEL: Record<AccountKind, number> = { partner: 0, reseller: 1, organization: 2, agent: 3 };
export const KIND_LABEL: Record<AccountKind, string> = {
  partner: 'Partner', reseller: 'Reseller', organization: 'Organization', agent: 'Account',
};

/** What a suspended account answers: "Organization 12 is suspended". */
export function suspendedMessage(s: Suspended): string {
  return `${KIND_LABEL[s.kind]} ${s.id} is suspended`;
}

/**
 * Whether an operation may act on a suspended account below the actor. Only the accounts module's
 * own management of an account does (read it, change its settings, reactivate it, delete it):
 * anything else on a suspended account, or on anything below one, is refused with 403.
 */
export interface TargetOptions { suspended?: 'allow' }

/**
 * What authentication and the tenant scope read from storage, handed to registerAuth by buildApp:
 * the tokens module implements it (src/modules/tokens/lookup.ts, built in src/platform.ts), so
 * the HTTP layer imports no module.
 */
export interface TokenLookup {
  /** The token with this hash, its account and whether that account is out of service, in one read. */
  token(hash: string): Promise<TokenWithAccount | undefined>;
  /** Marks a one-time token used; false when another request used it first. */
  consume(tokenId: number, now: number): Promise<boolean>;
  /** Records that a console session was used now (for its listing; written at most once a minute). */
  touchSession(tokenId: number, now: number): Promise<void>;
  /** An account and whether it is out of service (itself or an ancestor suspended). */
  account(id: number): Promise<{ account: AccountRow; suspended: Suspended | null } | undefined>;
}

export class Scope {
  constructor(readonly lookup: TokenLookup, readonly actor: AccountRow, readonly token: Pick<TokenRow, 'id' | 'type'>) {}

  /** True when `target` is the actor itself or lies below it on the ladder. */
  contains(target: AccountRow): boolean {
    return target[ANCESTOR_COLUMN[this.actor.kind]] === this.actor.id;
  }

  /**
   * An account within the actor's subtree; 404 for a missing id and for another tenant's; 403 when
   * it or an account between it and the actor is suspended (unless `opts.suspended` allows it).
   */
  async account(id: number, kinds?: readonly AccountKind[], field = 'targetAccountId', opts: TargetOptions = {}): Promise<AccountRow> {
    // Ids no account can have (beyond PostgreSQL's integer column) are simply not found, rather
    // than reaching the database as an out-of-range parameter. The actor itself is in service:
    // authenticate() refused its token otherwise.
    const found = id === this.actor.id ? { account: this.actor, suspended: null }
      : Number.isSafeInteger(id) && id >= 1 && id <= MAX_ACCOUNT_ID ? await this.lookup.account(id) : undefined;
    const row = found?.account;
    if (!row || !this.contains(row)) throw new NotFound(`${field} ${id} was not found`);
    if (kinds && !kinds.includes(row.kind)) {
      throw new NotFound(`${field} ${id} is not ${kinds.map((k) => articleFor(KIND_LABEL[k])).join(' or ')}`);
    }
    // The actor and its ancestors are active, so a suspended account on the target's ladder lies
    // between the actor (exclusive) and the target (inclusive).
    if (found.suspended && opts.suspended !== 'allow') {
      const message = suspendedMessage(found.suspended);
      throw new Forbidden(found.suspended.id === row.id ? `${field} ${id}: ${message}` : `${field} ${id} is out of service: ${message}`);
    }
    return row;
  }

  /** The account an operation acts on: `targetAccountId` when given, else the token's own. */
  async target(targetAccountId: number | undefined, kinds?: readonly AccountKind[], opts: TargetOptions = {}): Promise<AccountRow> {
    if (targetAccountId === undefined) {
      if (kinds && !kinds.includes(this.actor.kind)) {
        throw new Forbidden(`This operation needs ${kinds.map((k) => articleFor(KIND_LABEL[k].toLowerCase())).join(' or ')} (pass targetAccountId to act on one you own)`);
      }
      return this.actor;
    }
    return this.account(targetAccountId, kinds, 'targetAccountId', opts);
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
    /** What the request authenticated with (null on public routes). */
    credential: Credential | null;
  }
  interface FastifyContextConfig {
    /** Routes that need no token (health, docs, provider ingress). */
    public?: boolean;
    /** A public route that takes a token in its body (the console's sign-in): limited per address like the API. */
    limitByAddress?: boolean;
  }
}

/** The web console's sign-in: an HttpOnly, SameSite=Strict cookie holding a console session token (docs/console.md). */
export const CONSOLE_COOKIE = 'callplane_console';
/**
 * The cookie's name where the service is served over https: a `__Host-` cookie is accepted by a
 * browser only when Secure, Path=/ and without a Domain, so no other host (a sibling subdomain, or
 * the same name over plain http) can set or overwrite it. Only this name is read then.
 */
export function consoleCookieName(secure: boolean): string {
  return secure ? `__Host-${CONSOLE_COOKIE}` : CONSOLE_COOKIE;
}
/**
 * The console sends this header with every request. The session cookie counts only on requests
 * that carry it: a page on another site can make a browser send the cookie (were it not
 * SameSite=Strict) but cannot add a header without a CORS preflight we never grant.
 */
export const CONSOLE_HEADER = 'x-callplane-console';

/** Where a request's token came from: a console session counts only from `cookie` (docs/console.md). */
export type CredentialSource = 'query' | 'bearer' | 'cookie' | 'body';

export interface Credential { token: string; via: CredentialSource }

export function readCredential(req: FastifyRequest, cookieName = CONSOLE_COOKIE): Credential | undefined {
  const q = req.query as Record<string, unknown> | undefined;
  const fromQuery = q && typeof q.token === 'string' ? q.token : undefined;
  if (fromQuery) return { token: fromQuery, via: 'query' };
  const header = req.headers.authorization;
  if (header && /^Bearer\s+/i.test(header)) return { token: header.replace(/^Bearer\s+/i, '').trim(), via: 'bearer' };
  if (req.headers[CONSOLE_HEADER] !== undefined) {
    const cookie = req.cookies?.[cookieName];
    if (cookie) return { token: cookie, via: 'cookie' };
  }
  return undefined;
}

/** The token the request authenticated with (as the auth hook read it), else as read now. */
export function readToken(req: FastifyRequest): string | undefined {
  return req.credential?.token ?? readCredential(req)?.token;
}

/**
 * A console session token is accepted only as the console's cookie with its header: never as
 * `?token=` or a bearer (where a leaked cookie value would become an API token that carries no
 * CSRF guard), and never traded at POST /console/session for a new session (which would renew
 * it past its origin token).
 */
function refuseConsoleOutsideCookie(type: TokenRow['type'], via: CredentialSource): void {
  if (type !== 'console' || via === 'cookie') return;
  throw new Unauthorized(via === 'body'
    ? 'Unauthorized: token is a web console session, which cannot be traded for another; sign in with an API token or a one-time token'
    : 'Unauthorized: a web console session is accepted only as the console\'s cookie with its x-callplane-console header, not as the token parameter or a bearer token');
}

/**
 * The token → (token row, account) lookups of long-lived tokens, kept while no write to accounts
 * or tokens may have happened since (src/db/index.ts changeStamp: on SQLite this process sees
 * every write; on PostgreSQL every process hears of every commit through a trigger's NOTIFY, and a
 * write made here is answered only once the others have been sent it). One-time tokens are never
 * cached: each use must reach the database. Expiry is checked on every use, cached or not.
 */
export class AuthCache {
  readonly #cache: StampedCache<string, TokenWithAccount>;

  constructor(readonly stamp: ChangeStamp, max = 10_000) {
    this.#cache = new StampedCache(stamp, max);
  }

  static for(db: Db): AuthCache | undefined {
    const stamp = changeStamp(db, ['accounts', 'tokens']);
    return stamp ? new AuthCache(stamp) : undefined;
  }

  get(hash: string, stamp: string): TokenWithAccount | undefined {
    return this.#cache.get(hash, stamp);
  }

  /** Keeps a lookup made at `stamp`, unless a write may have happened while it ran. */
  set(hash: string, found: TokenWithAccount, stamp: string): void {
    if (found.token.type === 'one-time') return;
    // Shared by every request with this token: nothing may change it.
    Object.freeze(found.token);
    Object.freeze(found.account);
    this.#cache.set(hash, found, stamp);
  }
}

/** `via`: where the token came from (a console session counts only from its cookie; the default refuses it). */
export async function authenticate(lookup: TokenLookup, token: string, now = Date.now(), cache?: AuthCache, via: CredentialSource = 'bearer'): Promise<Scope> {
  const found = await admitted(lookup, token, now, cache);
  const { token: row, account } = found;
  refuseConsoleOutsideCookie(row.type, via);
  if (row.type === 'one-time' && !(await lookup.consume(row.id, now))) {
    throw new Unauthorized('Unauthorized: one-time token has already been used');
  }
  return new Scope(lookup, account, row);
}

/**
 * Whose token this is, without using it: a one-time token is not spent (the console asks "sign in
 * as Y instead?" before trading a link while someone else is signed in). Refused as authenticate
 * refuses it, and a one-time token already used is refused too.
 */
export async function identify(lookup: TokenLookup, token: string, via: CredentialSource, now = Date.now()): Promise<AccountRow> {
  const found = await admitted(lookup, token, now, undefined);
  refuseConsoleOutsideCookie(found.token.type, via);
  if (found.token.type === 'one-time' && found.token.used_at !== null) throw new Unauthorized('Unauthorized: one-time token has already been used');
  return found.account;
}

/**
 * Checks again a token a long-lived request was admitted with (the live feed's streams, every few
 * seconds): refused, as authenticate refuses it, once it was deleted, has expired or its account
 * (or one above it) is suspended. A one-time token is not used up again: it was, on admission.
 */
export async function reauthenticate(lookup: TokenLookup, token: string, now = Date.now(), cache?: AuthCache): Promise<void> {
  await admitted(lookup, token, now, cache);
}

/** The token's row and account when it authenticates now (a one-time token not yet used up). */
async function admitted(lookup: TokenLookup, token: string, now: number, cache: AuthCache | undefined): Promise<TokenWithAccount> {
  const hash = hashToken(token);
  const stamp = cache?.stamp();
  let found = cache ? cache.get(hash, stamp!) : undefined;
  if (!found) {
    found = await lookup.token(hash);
    if (found && cache) cache.set(hash, found, stamp!);
  }
  if (!found) throw new Unauthorized('Unauthorized: unknown or deleted token');
  const row = found.token;
  if (row.expires_at !== null && row.expires_at <= now) throw new Unauthorized('Unauthorized: token has expired');
  // Checked before a one-time token is used up: it stays usable once the account is reactivated.
  if (found.suspended) throw new Forbidden(`${suspendedMessage(found.suspended)}: its tokens, and those of every account below it, are refused until it is reactivated`);
  return found;
}

/** `consoleCookie`: the console session cookie's name (consoleCookieName: `__Host-` over https). */
export function registerAuth(app: FastifyInstance, db: Db, lookup: TokenLookup, consoleCookie = CONSOLE_COOKIE): void {
  const cache = AuthCache.for(db);
  app.decorateRequest('scope', null as unknown as Scope);
  app.decorateRequest('credential', null);
  app.addHook('onRequest', async (req) => {
    if (req.routeOptions.config?.public || !req.routeOptions.url) return;
    const credential = readCredential(req, consoleCookie);
    if (!credential) throw new Unauthorized('Unauthorized: the token query parameter is required');
    req.credential = credential;
    const now = Date.now();
    req.scope = await authenticate(lookup, credential.token, now, cache, credential.via);
    if (req.scope.token.type === 'console') await lookup.touchSession(req.scope.token.id, now);
  });
}
