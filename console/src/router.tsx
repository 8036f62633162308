// A small router over the URL's fragment (#/o/7/agents/12?tab=versions): the service serves one
// page, and a fragment never reaches a server or a Referer header (a one-time sign-in link's token
// is carried there for that reason). An organization page carries its organization in the address
// (`/o/<orgId>` before the page's own path), so every one is a link someone can send; `path` is the
// page's path without it and `orgId` the organization it names.
import { useEffect, useState, type AnchorHTMLAttributes } from 'react';

export interface Route { path: string; query: URLSearchParams; orgId?: number }

/** `/o/7/agents/12` → the organization 7 and the page path `/agents/12`; any other path as it is. */
export function splitOrg(full: string): { orgId?: number; path: string } {
  const m = /^\/o\/(\d{1,15})(\/.*)?$/.exec(full);
  if (!m) return { path: full };
  return { orgId: Number(m[1]), path: m[2] && m[2] !== '/' ? m[2] : '/' };
}

function read(): Route {
  const hash = window.location.hash.replace(/^#/, '') || '/';
  const q = hash.indexOf('?');
  const { orgId, path } = splitOrg(q < 0 ? hash : hash.slice(0, q));
  return { path, orgId, query: new URLSearchParams(q < 0 ? '' : hash.slice(q + 1)) };
}

export function currentRoute(): Route { return read(); }

export function useRoute(): Route {
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

/**
 * Where links and navigate() of the organization pages go: the shell sets the organization acted
 * on and which paths are organization pages, and `withOrg('/agents/4')` answers `/o/7/agents/4`.
 */
let acting: { orgId?: number; isOrgPage: (path: string) => boolean } = { isOrgPage: () => false };

export function setActingOrg(orgId: number | undefined, isOrgPage: (path: string) => boolean): void {
  acting = { orgId, isOrgPage };
}

/** `to` with the organization acted on before it when `to` is an organization page (and names none yet). */
export function withOrg(to: string, orgId = acting.orgId): string {
  if (orgId === undefined || !to.startsWith('/') || to.startsWith('/o/')) return to;
  const q = to.indexOf('?');
  const path = q < 0 ? to : to.slice(0, q);
  if (!acting.isOrgPage(path)) return to;
  return `/o/${orgId}${path === '/' ? '' : path}${q < 0 ? '' : to.slice(q)}`;
}

/** Goes to `to` (with the organization acted on, unless `raw`). */
export function navigate(to: string, opts: { replace?: boolean; raw?: boolean } = {}): void {
  const target = opts.raw ? to : withOrg(to);
  const url = `${window.location.pathname}${window.location.search}#${target}`;
  if (opts.replace) {
    window.history.replaceState(null, '', url);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  } else {
    window.location.hash = target;
  }
}

/** The parameters of `pattern` (`/agents/:agentId`) in `path`, or null when it does not match. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split('/').filter(Boolean);
  const a = path.split('/').filter(Boolean);
  if (p.length !== a.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i].startsWith(':')) params[p[i].slice(1)] = decodeURIComponent(a[i]);
    else if (p[i] !== a[i]) return null;
  }
  return params;
}

export function Link({ to, ...rest }: { to: string } & AnchorHTMLAttributes<HTMLAnchorElement>) {
  return <a href={`#${withOrg(to)}`} {...rest} />;
}
