// Every page of the console: where it is, its title, who sees it in the navigation, and its code
// (loaded when first visited, so the first screen carries only what it shows). A page area adds
// its entries here and its code under pages/.
import { lazy, type ComponentType, type LazyExoticComponent } from 'react';
import Overview from './overview.tsx';
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
  component: LazyExoticComponent<ComponentType<PageProps>> | ComponentType<PageProps>;
}

const ORG_AND_ABOVE: AccountKind[] = ['partner', 'reseller', 'organization'];

export const PAGES: PageDef[] = [
  // The first screen comes with the entry script rather than after it (docs/performance.md, bench/console).
  { path: '/', title: 'Overview', nav: true, component: Overview },
  // Partners and resellers: every organization below them at once (not an organization page).
  { path: '/overview', title: 'Across organizations', nav: true, kinds: ['partner', 'reseller'], component: lazy(() => import('./across/across.tsx')) },
  { path: '/accounts', title: 'Accounts', nav: true, kinds: ORG_AND_ABOVE, component: lazy(() => import('./accounts/accounts.tsx')) },
  { path: '/agents', title: 'Agents', nav: true, kinds: ORG_AND_ABOVE, needsOrg: true, component: lazy(() => import('./agents/agents.tsx')) },
  { path: '/agents/:agentId', title: 'Agent', needsOrg: true, component: lazy(() => import('./agents/agent.tsx')) },
  { path: '/live', title: 'Live', nav: true, kinds: ORG_AND_ABOVE, needsOrg: true, component: lazy(() => import('./conversations/live.tsx')) },
  { path: '/conversations', title: 'Conversations', nav: true, kinds: ORG_AND_ABOVE, needsOrg: true, component: lazy(() => import('./conversations/inbox.tsx')) },
  { path: '/conversations/:roomId', title: 'Room', needsOrg: true, component: lazy(() => import('./conversations/room.tsx')) },
  { path: '/conversations/:roomId/:uuid', title: 'Conversation', needsOrg: true, component: lazy(() => import('./conversations/conversation.tsx')) },
  { path: '/logs', title: 'Logs', nav: true, kinds: ORG_AND_ABOVE, needsOrg: true, component: lazy(() => import('./conversations/logs.tsx')) },
  { path: '/tasks', title: 'Tasks', nav: true, kinds: ORG_AND_ABOVE, needsOrg: true, component: lazy(() => import('./tasks/list.tsx')) },
  { path: '/tasks/import', title: 'Import tasks from CSV', needsOrg: true, component: lazy(() => import('./tasks/import.tsx')) },
  { path: '/tasks/daily', title: 'Daily counts and limits', needsOrg: true, component: lazy(() => import('./tasks/daily.tsx')) },
  { path: '/tasks/:taskId', title: 'Task', needsOrg: true, component: lazy(() => import('./tasks/detail.tsx')) },
  { path: '/webhooks', title: 'Webhooks', nav: true, kinds: ORG_AND_ABOVE, needsOrg: true, component: lazy(() => import('./webhooks/subscriptions.tsx')) },
  { path: '/webhooks/relays', title: 'Webhook relays', needsOrg: true, component: lazy(() => import('./webhooks/relays.tsx')) },
  { path: '/webhooks/relays/:type', title: 'Webhook relay', needsOrg: true, component: lazy(() => import('./webhooks/relay.tsx')) },
  { path: '/sip', title: 'SIP', nav: true, kinds: ORG_AND_ABOVE, needsOrg: true, component: lazy(() => import('./sip/sip.tsx')) },
  { path: '/numbers', title: 'Numbers', nav: true, kinds: ORG_AND_ABOVE, needsOrg: true, component: lazy(() => import('./numbers/numbers.tsx')) },
  { path: '/do-not-call', title: 'Do-not-call list', nav: true, kinds: ORG_AND_ABOVE, needsOrg: true, component: lazy(() => import('./compliance/do-not-call.tsx')) },
  { path: '/settings', title: 'Settings', nav: true, kinds: ORG_AND_ABOVE, needsOrg: true, component: lazy(() => import('./settings/settings.tsx')) },
  { path: '/plans', title: 'Plans and billing', nav: true, kinds: ['partner', 'reseller'], component: lazy(() => import('./reseller/reseller.tsx')) },
  { path: '/billing', title: 'Billing', nav: true, kinds: ORG_AND_ABOVE, needsOrg: true, component: lazy(() => import('./billing/billing.tsx')) },
];

export { ORG_AND_ABOVE };
