// Whether an organization's calls go out over SIP, and how: its outbound routes (oldest first),
// its registration's AOR as the caller, and for each route the credentials that may answer its
// challenges. A secret answers only its own host (docs/sip.md, "Credentials"): a route's own
// credentials are bound to its next hop; the registration's password goes only to a route whose
// next hop is the registrar, and only for the realm the registrar challenged with once known.
import type { Db, SipOutboundRouteRow, SipRegistrationRow } from '../../db/types.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import type { SipCallPlan } from '../../providers/sip-call-plan.ts';
import type { SipCredentials } from '../../sip/call.ts';
import { parseAor } from './parse.ts';
import { registrarOf } from './registrations.ts';
import { sipRepo } from './repository.ts';

/** The organization's SIP plan, or null when it has no outbound route (its calls use its carrier). */
export async function sipCallPlan(db: Db, box: SecretBox, orgId: number): Promise<SipCallPlan | null> {
  const routes = await sipRepo.routes(db, orgId);
  if (routes.length === 0) return null;
  const reg = await sipRepo.registrationOf(db, orgId);
  const aor = reg ? parseAor(reg.aor) : undefined;
  return {
    orgId,
    routes: routes.map((r) => {
      const credentials = routeCredentials(r, reg, box);
      return {
        text: r.route, host: r.host, ...(r.port ? { port: r.port } : {}), transport: r.transport,
        ...(r.proxy_host ? { proxy: { host: r.proxy_host, ...(r.proxy_port ? { port: r.proxy_port } : {}) } } : {}),
        ...(credentials ? { credentials } : {}),
      };
    }),
    from: aor?.ok ? aor.value.key : 'callplane',
  };
}

/** The host a route's INVITEs go to, whose challenges its credentials answer: its proxy, else its host. */
export const routeNextHop = (r: Pick<SipOutboundRouteRow, 'host' | 'proxy_host'>): string => (r.proxy_host ?? r.host).toLowerCase();

/**
 * The credentials a route's calls may answer challenges with: the route's own (bound to its next
 * hop); else the registration's, when the route's next hop is the registrar's host (bound to it,
 * and to the realm it challenged with once known); else none.
 */
function routeCredentials(r: SipOutboundRouteRow, reg: SipRegistrationRow | undefined, box: SecretBox): SipCredentials | undefined {
  const host = routeNextHop(r);
  if (r.username !== null && r.password !== null) return { username: r.username, password: box.open(r.password), host };
  if (!reg) return undefined;
  let registrar: string;
  try { registrar = registrarOf(reg).host.toLowerCase(); } catch { return undefined; }
  if (registrar !== host) return undefined;
  return {
    username: reg.username, ...(reg.auth_username ? { authUsername: reg.auth_username } : {}), password: box.open(reg.password), host,
    ...(reg.challenge_realm ? { realm: reg.challenge_realm } : {}),
  };
}
