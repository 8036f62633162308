// Agent URL slugs (docs/agents.md "Agent URLs"): what a slug may be, and how one is normalised.
import { Invalid } from '../../http/errors.ts';

export const SLUG_MIN = 3;
export const SLUG_MAX = 40;
const SHAPE = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/**
 * First path segments we serve or may serve: a public page lives at `/<slug>`, so no slug may
 * shadow one of ours. Kept in docs/agents.md.
 */
export const RESERVED_SLUGS: ReadonlySet<string> = new Set([
  'api', 'docs', 'openapi', 'healthz', 'readyz', 'livez', 'metrics', 'status', 'hooks', 'webhooks',
  'chat', 'call', 'calls', 'conversation', 'conversations', 'agent', 'agents', 'admin', 'dashboard',
  'console', 'app', 'static', 'assets', 'public', 'media', 'files', 'uploads', 'download', 'downloads',
  'login', 'logout', 'signin', 'signup', 'register', 'auth', 'oauth', 'sso', 'account', 'accounts',
  'settings', 'billing', 'kb', 'knowledge', 'sip', 'twilio', 'providers', 'ws', 'wss', 'socket',
  'widget', 'embed', 'help', 'support', 'about', 'terms', 'privacy', 'legal', 'www', 'mail',
  'callplane', 'vida', 'system', 'root', 'null', 'undefined', 'new', 'edit',
  // The web chat's pages live under /a/<slug> (too short to be a slug, listed all the same).
  'a',
]);

/** Trims and lower-cases `raw`, then checks it: 400 naming `field` when it is not a usable slug. */
export function normaliseSlug(raw: string, field = 'slug'): string {
  const slug = raw.trim().toLowerCase();
  if (slug.length < SLUG_MIN || slug.length > SLUG_MAX) {
    throw new Invalid(`${field} must be ${SLUG_MIN}–${SLUG_MAX} characters long`);
  }
  if (!SHAPE.test(slug)) {
    throw new Invalid(`${field} may hold only a–z, 0–9 and single hyphens between them (case is ignored)`);
  }
  if (RESERVED_SLUGS.has(slug)) throw new Invalid(`${field} '${slug}' is reserved`);
  return slug;
}
