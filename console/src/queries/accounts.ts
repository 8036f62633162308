// The account tree: a partner's resellers, a reseller's organizations and an organization's agents
// (listResellers, listOrganizations, listAccounts). One key per list, whichever page shows it: the
// organization picker, the Accounts page, the agents page and every agent chooser share them.
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { api, ok } from '../api.ts';

export const accountKeys = {
  resellers: (partnerId: number | undefined) => ['accounts', 'resellers', partnerId] as const,
  organizations: (resellerId: number | undefined) => ['accounts', 'organizations', resellerId] as const,
  agents: (orgId: number | undefined) => ['accounts', 'agents', orgId] as const,
};

export const accountQueries = {
  resellers: (partnerId: number | undefined) => queryOptions({
    queryKey: accountKeys.resellers(partnerId),
    queryFn: () => ok(api.GET('/api/v2/listResellers', { params: { query: { targetPartnerId: partnerId! } } })),
  }),
  organizations: (resellerId: number | undefined) => queryOptions({
    queryKey: accountKeys.organizations(resellerId),
    queryFn: () => ok(api.GET('/api/v2/listOrganizations', { params: { query: { targetResellerId: resellerId! } } })),
  }),
  /** An organization's agents (its accounts). */
  agents: (orgId: number | undefined) => queryOptions({
    queryKey: accountKeys.agents(orgId),
    queryFn: () => ok(api.GET('/api/v2/listAccounts', { params: { query: { targetOrganizationId: orgId! } } })),
  }),
};

/** A partner's resellers changed (one was created). */
export const resellersChanged = (client: QueryClient, partnerId: number) =>
  client.invalidateQueries({ queryKey: accountKeys.resellers(partnerId) });
/** A reseller's organizations changed (created, renamed, suspended, deleted). */
export const organizationsChanged = (client: QueryClient, resellerId: number) =>
  client.invalidateQueries({ queryKey: accountKeys.organizations(resellerId) });
/** An organization's agents changed (created, switched on or off, deleted). */
export const agentsChanged = (client: QueryClient, orgId: number) =>
  client.invalidateQueries({ queryKey: accountKeys.agents(orgId) });
