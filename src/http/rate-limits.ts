// Rate limits of the authenticated API (@fastify/rate-limit), so one tenant cannot starve the
// others: requests per window from one source address (checked before authentication, so a flood
// of bad tokens is refused before it reaches the token lookup) and per token (checked after it, by
// the token's row id: never the token itself, which appears in no key, row or log). A request
// without a valid token counts against its address only.
//
// Only routes that need a token are limited. Not limited here, on purpose:
// - /healthz, /readyz, /metrics: orchestrators and scrapers poll them from a few addresses, and
//   refusing them would take a healthy process out of service;
// - Twilio's callbacks and relay ingress (/api/v2/providers/…, /hooks/relay/…): they arrive from
//   the carrier's shared addresses on behalf of every tenant, so a per-address limit would let one
//   tenant's call volume starve another's callbacks; each is authenticated by its signature or
//   ingress id, and refusing one loses a call's state;
// - the web chat pages (/a/<slug>): they have their own per-address and per-chat limits
//   (src/modules/conversations/web-chat.ts, src/lib/rate-limit.ts);
// - /docs and /api/v2/openapi.json: static documents.
//
// Where the counts live is decided once, in src/db/rate-limit-counters.ts: in the database on
// PostgreSQL, shared by every API process (src/http/shared-rate-limit-store.ts); in this process's
// memory on SQLite, where one process serves a DATA_DIR.
import rateLimit from '@fastify/rate-limit';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { addressBucket } from '../lib/rate-limit.ts';
import { TooManyRequests } from './errors.ts';
import { SharedRateLimitStore, type AddToWindow } from './shared-rate-limit-store.ts';
import type { App } from './types.ts';

export interface RateLimitSettings {
  /** Requests per window from one token; 0: no limit. */
  perToken: number;
  /** Requests per window from one source address (an IPv6 /64); 0: no limit. */
  perAddress: number;
  windowSeconds: number;
  /** Counts shared with other processes (PostgreSQL); without it, counted in this process's memory. */
  shared?: AddToWindow;
}

/** Keys each limit tracks in memory (SQLite; on PostgreSQL the shared store bounds its own). */
const MEMORY_KEYS = 10_000;

type Hook = (req: FastifyRequest, reply: FastifyReply) => Promise<void>;

export interface RateLimitHooks {
  /** An onRequest hook to run before authentication (undefined: no address limit). */
  byAddress?: Hook;
  /** An onRequest hook to run after authentication (undefined: no token limit). */
  byToken?: Hook;
}

/** Whether a request is to a route that needs a token (everything else is left alone, see above). */
function limited(req: FastifyRequest): boolean {
  const config = req.routeOptions.config;
  return req.routeOptions.url !== undefined && (config?.public !== true || config.limitByAddress === true);
}

function windowWords(seconds: number): string {
  if (seconds === 60) return 'a minute';
  if (seconds === 3600) return 'an hour';
  return seconds === 1 ? 'a second' : `${seconds} seconds`;
}

/** Registers the plugin and returns the hooks to put around authentication. */
export async function registerRateLimits(app: App, s: RateLimitSettings): Promise<RateLimitHooks> {
  const timeWindow = s.windowSeconds * 1000;
  const store = s.shared ? new SharedRateLimitStore(s.shared) : undefined;
  await app.register(rateLimit, {
    // No route is limited by the plugin's own hook: ours run around authentication.
    global: false,
    timeWindow,
    // A database error while counting lets the request through (the limits protect; they must not
    // become an outage of their own). The request's own queries will report a database that is down.
    skipOnError: true,
    // The plugin constructs the store; ours is already built and shared by both limits.
    ...(store ? { store: function SharedStore() { return store; } as unknown as NonNullable<Parameters<typeof rateLimit>[1]['store']> } : {}),
  });

  const check = (max: number, kind: string, key: (req: FastifyRequest) => string | undefined): Hook | undefined => {
    if (max === 0) return undefined;
    // The key is made once per request, by the hook, and handed to the plugin through this map.
    const keys = new WeakMap<FastifyRequest, string>();
    const limit = app.createRateLimit({
      max, timeWindow, keyGenerator: (req) => keys.get(req) ?? '',
      // Counted in memory (SQLite): how many keys each limit tracks, least recently used forgotten
      // first. Each limit's store is made from these options (the plugin's own `cache` reaches
      // only its global store, which no route uses), though the type leaves it out.
      ...{ cache: MEMORY_KEYS },
    });
    const per = `${max} requests ${windowWords(s.windowSeconds)} ${kind}`;
    return async (req, reply) => {
      if (!limited(req)) return;
      const k = key(req);
      if (k === undefined) return;
      keys.set(req, k);
      const r = await limit(req);
      if (r.isAllowed) return;
      // Both limits report in the same headers: the one with fewer requests left wins.
      const shown = reply.getHeader('x-ratelimit-remaining');
      const remaining = r.isExceeded ? 0 : r.remaining;
      if (shown === undefined || remaining <= Number(shown)) {
        void reply.header('x-ratelimit-limit', r.max).header('x-ratelimit-remaining', remaining).header('x-ratelimit-reset', r.ttlInSeconds);
      }
      if (!r.isExceeded) return;
      // Retry-After is set by the error handler from the error (the same whole seconds, at least 1).
      const seconds = Math.max(1, Math.ceil(r.ttl / 1000));
      throw new TooManyRequests(`rate limit exceeded: more than ${per}, retry in ${seconds} s`, r.ttl);
    };
  };
  return {
    byAddress: check(s.perAddress, 'from one address', (req) => `a:${addressBucket(req.ip)}`),
    // A request that reaches this hook on a limited route has been authenticated.
    byToken: check(s.perToken, 'with one token', (req) => (req.scope ? `t:${req.scope.token.id}` : undefined)),
  };
}
