// The account tree: a partner's resellers, a reseller's organizations and an organization's agents
// (listResellers, listOrganizations, listAccounts). One key per list, whichever page shows it: the
// organization picker, the Accounts page, the agents page and every agent chooser share them.
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { api, ok } from '../api.ts';

export const accountKeys = {
  resellers: (partnerId: number | undefined) => ['accounts', 'resellers', partnerId] as const,
  organizations: (resellerId: number | undefined) => ['accounts', 'organizations', resellerId] as const,
  agents: (orgId: number | undefined) => ['accounts', 'agents', orgId] as const,
  account: (id: number | undefined) => ['accounts', 'one', id] as const,
};

/** What GET /api/v2/account says of an account (its `details`; the fields of its level). */
export interface AccountDetails {
  id: number; accountType: string; name: string; email?: string | null; active?: boolean;
  resellerId?: number; organizationId?: number; partnerId?: number; timezone?: string | null;
  outboundMessageWebhookUrl?: string | null; outboundMessageSigningSecretIssued?: boolean;
  phoneNumbers?: unknown[];
}

export const accountQueries = {
  resellers: (partnerId: number | undefined) => queryOptions({
    queryKey: accountKeys.resellers(partnerId),
    queryFn: () => ok(api.GET('/api/v2/listResellers', { params: { query: { targetPartnerId: partnerId! } } })),
  }),
  organizations: (resellerId: number | undefined) => queryOptions({
    queryKey: accountKeys.organizations(resellerId),
    queryFn: () => ok(api.GET('/api/v2/listOrganizations', { params: { query: { targetResellerId: resellerId! } } })),
  }),
  /** One account below the signed-in one (or itself): its name and where it sits (an agent's organization, an organization's reseller). */
  account: (id: number | undefined, self = false) => queryOptions({
    queryKey: accountKeys.account(id),
    queryFn: async () => (await ok(api.GET('/api/v2/account', { params: { query: self ? {} : { targetAccountId: id! } } }))).details as unknown as AccountDetails,
    staleTime: 60_000,
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
