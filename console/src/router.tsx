// A small router over the URL's fragment (#/agents/12?tab=versions): the service serves one page,
// and a fragment never reaches a server or a Referer header (a one-time sign-in link's token is
// carried there for that reason).
import { useEffect, useState, type AnchorHTMLAttributes } from 'react';

export interface Route { path: string; query: URLSearchParams }

function read(): Route {
  const hash = window.location.hash.replace(/^#/, '') || '/';
  const q = hash.indexOf('?');
  return { path: q < 0 ? hash : hash.slice(0, q), query: new URLSearchParams(q < 0 ? '' : hash.slice(q + 1)) };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  const url = `${window.location.pathname}${window.location.search}#${to}`;
  if (opts.replace) {
    window.history.replaceState(null, '', url);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  } else {
    window.location.hash = to;
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
  return <a href={`#${to}`} {...rest} />;
}
