// Every page of the console: where it is, its title, who sees it in the navigation, and its code
// (loaded when first visited, so the first screen carries only what it shows). A page area adds
// its entries here and its code under pages/.
import { lazy, type ComponentType, type LazyExoticComponent } from 'react';
import type { AccountKind } from '../session.tsx';

export interface PageProps { params: Record<string, string>; query: URLSearchParams }

export interface PageDef {
  /** `/agents/:agentId`: matched against the fragment's path. */
  path: string;
  title: string;
  /** Shown in the navigation (only pages without parameters). */
  nav?: boolean;
  /** Account kinds that see it in the navigation; all when absent. */
  kinds?: readonly AccountKind[];
  /** Needs an organization to act on (chosen at the top when signed in above one). */
  needsOrg?: boolean;
  component: LazyExoticComponent<ComponentType<PageProps>>;
}

const ORG_AND_ABOVE: AccountKind[] = ['partner', 'reseller', 'organization'];

export const PAGES: PageDef[] = [
  { path: '/', title: 'Overview', nav: true, component: lazy(() => import('./overview.tsx')) },
  { path: '/accounts', title: 'Accounts', nav: true, kinds: ORG_AND_ABOVE, component: lazy(() => import('./accounts/accounts.tsx')) },
  { path: '/agents', title: 'Agents', nav: true, kinds: ORG_AND_ABOVE, needsOrg: true, component: lazy(() => import('./agents/agents.tsx')) },
  { path: '/agents/:agentId', title: 'Agent', needsOrg: true, component: lazy(() => import('./agents/agent.tsx')) },
];

export { ORG_AND_ABOVE };
