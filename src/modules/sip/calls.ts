// Whether an organization's calls go out over SIP, and how: its outbound routes (oldest first),
// its registration's AOR as the caller and its credentials for digest challenges.
import type { Db } from '../../db/types.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import type { SipCallPlan } from '../../providers/sip-call-plan.ts';
import { parseAor } from './parse.ts';
import { sipRepo } from './repository.ts';

/** The organization's SIP plan, or null when it has no outbound route (its calls use its carrier). */
export async function sipCallPlan(db: Db, box: SecretBox, orgId: number): Promise<SipCallPlan | null> {
  const routes = await sipRepo.routes(db, orgId);
  if (routes.length === 0) return null;
  const reg = await sipRepo.registrationOf(db, orgId);
  const aor = reg ? parseAor(reg.aor) : undefined;
  return {
    orgId,
    routes: routes.map((r) => ({
      text: r.route, host: r.host, ...(r.port ? { port: r.port } : {}), transport: r.transport,
      ...(r.proxy_host ? { proxy: { host: r.proxy_host, ...(r.proxy_port ? { port: r.proxy_port } : {}) } } : {}),
    })),
    from: aor?.ok ? aor.value.key : 'callplane',
    ...(reg ? { credentials: { username: reg.username, ...(reg.auth_username ? { authUsername: reg.auth_username } : {}), password: box.open(reg.password) } } : {}),
  };
}
