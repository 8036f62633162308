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
  { path: '/live', title: 'Live', nav: true, kinds: ORG_AND_ABOVE, needsOrg: true, component: lazy(() => import('./conversations/live.tsx')) },
  { path: '/conversations', title: 'Conversations', nav: true, kinds: ORG_AND_ABOVE, needsOrg: true, component: lazy(() => import('./conversations/inbox.tsx')) },
  { path: '/conversations/:roomId', title: 'Room', needsOrg: true, component: lazy(() => import('./conversations/room.tsx')) },
  { path: '/conversations/:roomId/:uuid', title: 'Conversation', needsOrg: true, component: lazy(() => import('./conversations/conversation.tsx')) },
  { path: '/logs', title: 'Logs', nav: true, kinds: ORG_AND_ABOVE, needsOrg: true, component: lazy(() => import('./conversations/logs.tsx')) },
];

export { ORG_AND_ABOVE };
