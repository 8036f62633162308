// Who is signed in, and which organization the organization pages work on. The sign-in itself is
// an HttpOnly cookie (src/modules/console/routes.ts): the page only ever learns the account.
import { createContext, useContext, useEffect, useMemo, useRef, type ReactNode } from 'react';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { consoleRequest } from './api.ts';
import { currentRoute, navigate, withOrg } from './router.tsx';

export type AccountKind = 'partner' | 'reseller' | 'organization' | 'agent';
export interface Account { id: number; kind: AccountKind; label: string; name: string }

interface SessionValue {
  account: Account;
  /** The organization the organization pages act on: the signed-in one, or one chosen below a reseller or partner. */
  orgId: number | undefined;
  setOrgId: (id: number | undefined) => void;
  /** `{ targetAccountId }` when acting on an account below the signed-in one; `{}` otherwise. */
  target: { targetAccountId?: number };
  signOut: () => Promise<void>;
}

/** What a query reads on behalf of: the organization (its cache key) and the target its requests name (console/src/queries/). */
export type Acting = Pick<SessionValue, 'orgId' | 'target'>;

const SessionContext = createContext<SessionValue | null>(null);

export function useSession(): SessionValue {
  const v = useContext(SessionContext);
  if (!v) throw new Error('useSession outside <SessionProvider>');
  return v;
}

export const SESSION_KEY = ['console-session'] as const;

export function useSessionQuery(enabled = true) {
  return useQuery({
    enabled,
    queryKey: SESSION_KEY,
    queryFn: () => consoleRequest<{ account: Account }>('GET', '/console/session'),
    retry: false,
    staleTime: 60_000,
  });
}

/**
 * The organization a reseller or partner acts on is in the address (`#/o/<orgId>/…`, router.tsx):
 * a link names it, a reload keeps it. The last one opened is kept for the tab (an id, no secret) so
 * that an old link without it (`#/agents/4`) and the navigation's first click still find one.
 */
export const LAST_ORG_KEY = 'callplane.console.org';

export function lastOrg(): number | undefined {
  const v = Number(window.sessionStorage.getItem(LAST_ORG_KEY));
  return Number.isSafeInteger(v) && v > 0 ? v : undefined;
}

/** The page path of the address kept, or its section's first page when it names something of another organization. */
function sectionOf(path: string): string {
  const first = path.split('/').filter(Boolean)[0];
  return first ? `/${first}` : '/';
}

export function SessionProvider({ account, addressOrg, children }: { account: Account; addressOrg: number | undefined; children: ReactNode }) {
  const client = useQueryClient();
  const below = account.kind === 'partner' || account.kind === 'reseller';
  const orgId = below ? addressOrg : account.kind === 'organization' ? account.id : undefined;
  useEffect(() => {
    if (below && addressOrg !== undefined) window.sessionStorage.setItem(LAST_ORG_KEY, String(addressOrg));
  }, [below, addressOrg]);
  // Another organization: nothing read for the one before is shown for it.
  const previous = useRef(orgId);
  useEffect(() => {
    if (previous.current !== orgId && previous.current !== undefined) {
      client.removeQueries({ predicate: (q) => q.queryKey[0] !== SESSION_KEY[0] && q.queryKey[0] !== 'accounts' });
    }
    previous.current = orgId;
  }, [orgId, client]);
  const value = useMemo<SessionValue>(() => ({
    account,
    orgId,
    setOrgId(id) {
      const { path, query } = currentRoute();
      const section = sectionOf(path);
      const qs = query.toString();
      const rest = section === path ? `${path}${qs ? `?${qs}` : ''}` : section;
      if (id === undefined) return navigate(rest, { raw: true });
      // Kept at once, not after the next render: a link opened right after still finds it.
      window.sessionStorage.setItem(LAST_ORG_KEY, String(id));
      const to = withOrg(rest, id);
      // From a page of no organization (Accounts), to the organization's overview.
      navigate(to === rest ? `/o/${id}` : to, { raw: true });
    },
    target: below && orgId !== undefined ? { targetAccountId: orgId } : {},
    async signOut() {
      await consoleRequest('DELETE', '/console/session').catch(() => undefined);
      window.sessionStorage.removeItem(LAST_ORG_KEY);
      client.clear();
      window.location.hash = '/sign-in';
      window.location.reload();
    },
  }), [account, below, orgId, client]);
  return <SessionContext.Provider value={value}>{children}</SessionContext.Provider>;
}
