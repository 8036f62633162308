// The console's shell: the sign-in gate, the header (who, which organization, sign out), the
// navigation, and the page the fragment names.
import { Suspense, useEffect, useRef, useState } from 'react';
import { useQuery } from '@tanstack/react-query';
import { CallplaneError } from './api.ts';
import { accountQueries } from './queries/accounts.ts';
import { Link, match, navigate, setActingOrg, useRoute, type Route } from './router.tsx';
import { lastOrg, SessionProvider, useSession, useSessionQuery, type Account } from './session.tsx';
import { PAGES, type PageDef } from './pages/index.ts';
import SignIn from './pages/sign-in.tsx';
import { Button, ErrorNote, Loading, Note } from './ui/parts.tsx';

export function App() {
  const route = useRoute();
  const oneTime = route.path === '/sign-in' ? route.query.get('ott') : null;
  // Not asked while a one-time link is being traded: its answer would race the new cookie.
  const session = useSessionQuery(!oneTime);
  if (oneTime) return <SignIn oneTime={oneTime} />;
  if (session.isPending) return <Loading what="Opening the console" />;
  if (session.error) {
    if (session.error instanceof CallplaneError && (session.error.status === 401 || session.error.status === 403)) return <SignIn />;
    return <main id="main"><ErrorNote error={session.error} /></main>;
  }
  return (
    <SessionProvider account={session.data.account} addressOrg={route.orgId}>
      <Shell route={route} />
    </SessionProvider>
  );
}

function findPage(path: string): { page: PageDef; params: Record<string, string> } | undefined {
  for (const page of PAGES) {
    const params = match(page.path, path);
    if (params) return { page, params };
  }
  return undefined;
}

/** The overview and every page that acts on an organization carry it in the address. */
const isOrgPage = (path: string) => path === '/' || !!findPage(path)?.page.needsOrg;

function Shell({ route }: { route: Route }) {
  const { account, orgId, signOut } = useSession();
  const found = findPage(route.path === '/sign-in' ? '/' : route.path);
  // Links and navigate() of the pages below keep the organization in the address (router.tsx).
  setActingOrg(orgId, isOrgPage);
  const below = account.kind === 'partner' || account.kind === 'reseller';
  const foreign = account.kind === 'organization' && route.orgId !== undefined && route.orgId !== account.id;
  const heading = useRef<string>('');
  const nav = PAGES.filter((p) => p.nav && (!p.kinds || p.kinds.includes(account.kind)));

  useEffect(() => {
    // A new page: its title in the tab, and focus on its heading so a screen reader starts there.
    const title = found?.page.title ?? 'Not found';
    document.title = `${title} · callplane`;
    if (heading.current && heading.current !== route.path) document.getElementById('page-title')?.focus();
    heading.current = route.path;
  }, [found?.page.title, route.path]);

  return (
    <div className="shell">
      <a className="skip" href="#main" onClick={(e) => { e.preventDefault(); document.getElementById('main')?.focus(); }}>Skip to content</a>
      <header className="top">
        <span className="brand">callplane</span>
        <span className="who" aria-label="Signed in as">{account.label} <strong>{account.name}</strong> <span className="muted">#{account.id}</span></span>
        {account.kind === 'partner' || account.kind === 'reseller' ? <OrgPicker account={account} /> : null}
        <Button onClick={() => void signOut()}>Sign out</Button>
      </header>
      <nav aria-label="Console" className="side">
        <ul>
          {nav.map((p) => {
            const current = p.path === '/' ? route.path === '/' : route.path === p.path || route.path.startsWith(`${p.path}/`);
            return <li key={p.path}><Link to={p.path} aria-current={current ? 'page' : undefined}>{p.title}</Link></li>;
          })}
        </ul>
      </nav>
      <main id="main" tabIndex={-1}>
        <Suspense fallback={<Loading />}>
          {!found ? <Note>There is no page at {route.path}.</Note>
            : foreign ? <Note>This link is for organization #{route.orgId}; you are signed in as organization {account.name} (#{account.id}). Sign in as that organization, or its reseller, to open it.</Note>
              : found.page.needsOrg && orgId === undefined && below ? <FindOrganization route={route} title={found.page.title} params={found.params} />
                : found.page.needsOrg && orgId === undefined ? <Note>Choose an organization at the top to see its {found.page.title.toLowerCase()}.</Note>
                  : <found.page.component params={found.params} query={route.query} />}
        </Suspense>
      </main>
    </div>
  );
}

/**
 * An organization page opened without an organization in its address (an old link, `#/agents/4`,
 * or a click in the navigation): the agent's own organization when the page names an agent, else
 * the last one opened in this tab; the address is replaced with the one that names it.
 */
function FindOrganization({ route, title, params }: { route: Route; title: string; params: Record<string, string> }) {
  const agentId = route.path.startsWith('/agents/') && /^(camp)?\d+$/.test(params.agentId ?? '') ? Number(params.agentId.replace(/^camp/, '')) : undefined;
  const agent = useQuery({ ...accountQueries.account(agentId), enabled: agentId !== undefined });
  const found = agentId !== undefined ? agent.data?.organizationId : lastOrg();
  useEffect(() => {
    if (found === undefined) return;
    const qs = route.query.toString();
    navigate(`/o/${found}${route.path}${qs ? `?${qs}` : ''}`, { replace: true, raw: true });
  }, [found, route.path, route.query]);
  if (agentId !== undefined && agent.isPending) return <Loading what="Finding the agent's organization" />;
  if (agentId !== undefined && agent.error) return <ErrorNote error={agent.error} />;
  if (found !== undefined) return <Loading what="Opening the organization" />;
  return <Note>Choose an organization at the top to see its {title.toLowerCase()}, or open one on the <Link to="/accounts">Accounts</Link> page.</Note>;
}

/** Signed in above organizations: which one the organization pages act on (the one in the address). */
function OrgPicker({ account }: { account: Account }) {
  const { orgId, setOrgId } = useSession();
  // The reseller shown: the one of the organization in the address, else the one picked here.
  const [picked, setPicked] = useState<number | undefined>(undefined);
  const org = useQuery({ ...accountQueries.account(orgId), enabled: account.kind === 'partner' && orgId !== undefined });
  const resellerId = account.kind === 'reseller' ? account.id : orgId !== undefined ? org.data?.resellerId : picked;
  const resellers = useQuery({ ...accountQueries.resellers(account.id), enabled: account.kind === 'partner' });
  const orgs = useQuery({ ...accountQueries.organizations(resellerId), enabled: resellerId !== undefined });
  return (
    <div className="picker">
      {account.kind === 'partner' ? (
        <label>Reseller{' '}
          <select value={resellerId ?? ''} onChange={(e) => { setPicked(e.target.value ? Number(e.target.value) : undefined); setOrgId(undefined); }}>
            <option value="">Choose…</option>
            {(resellers.data?.resellers ?? []).map((r) => <option key={r.id} value={r.id}>{r.name} (#{r.id})</option>)}
          </select>
        </label>
      ) : null}
      <label>Organization{' '}
        <select value={orgs.data && orgId !== undefined ? orgId : ''} onChange={(e) => setOrgId(e.target.value ? Number(e.target.value) : undefined)} disabled={resellerId === undefined}>
          <option value="">Choose…</option>
          {(orgs.data?.organizations ?? []).map((o) => <option key={o.id} value={o.id}>{o.name} (#{o.id})</option>)}
        </select>
      </label>
      <ErrorNote error={resellers.error ?? orgs.error ?? org.error} />
    </div>
  );
}
