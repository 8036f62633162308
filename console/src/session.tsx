// Who is signed in, and which organization the organization pages work on. The sign-in itself is
// an HttpOnly cookie (src/modules/console/routes.ts): the page only ever learns the account.
import { createContext, useContext, useMemo, useState, type ReactNode } from 'react';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { consoleRequest } from './api.ts';

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

/** The organization chosen below a reseller or partner is kept for the tab (an id, no secret). */
const ORG_KEY = 'callplane.console.org';

export function SessionProvider({ account, children }: { account: Account; children: ReactNode }) {
  const client = useQueryClient();
  const below = account.kind === 'partner' || account.kind === 'reseller';
  const [chosen, setChosen] = useState<number | undefined>(() => {
    const v = Number(window.sessionStorage.getItem(ORG_KEY));
    return below && Number.isSafeInteger(v) && v > 0 ? v : undefined;
  });
  const value = useMemo<SessionValue>(() => {
    const orgId = below ? chosen : account.kind === 'organization' ? account.id : undefined;
    return {
      account,
      orgId,
      setOrgId(id) {
        if (id === undefined) window.sessionStorage.removeItem(ORG_KEY);
        else window.sessionStorage.setItem(ORG_KEY, String(id));
        setChosen(id);
        client.removeQueries({ predicate: (q) => q.queryKey[0] !== SESSION_KEY[0] });
      },
      target: below && chosen !== undefined ? { targetAccountId: chosen } : {},
      async signOut() {
        await consoleRequest('DELETE', '/console/session').catch(() => undefined);
        window.sessionStorage.removeItem(ORG_KEY);
        client.clear();
        window.location.hash = '/sign-in';
        window.location.reload();
      },
    };
  }, [account, below, chosen, client]);
  return <SessionContext.Provider value={value}>{children}</SessionContext.Provider>;
}
