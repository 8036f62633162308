// An organization's phone numbers, each with the agent holding it (GET /api/v2/phoneNumbers). The
// agents to choose from are the account tree's list (queries/accounts.ts).
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { api, ok } from '../api.ts';
import type { Acting } from '../session.tsx';

export const numberKeys = {
  list: (orgId: number | undefined) => ['numbers', orgId, 'list'] as const,
};

export const numberQueries = {
  /** Refreshed every 3 s while a number is being bought (reserved) or needs attention: it changes without us. */
  list: ({ orgId, target }: Acting) => queryOptions({
    queryKey: numberKeys.list(orgId),
    queryFn: () => ok(api.GET('/api/v2/phoneNumbers', { params: { query: { ...target } } })),
    refetchInterval: (q) => (q.state.data?.phoneNumbers.some((n) => n.state !== 'active') ? 3_000 : false),
  }),
};

/** A number was bought, brought or returned. */
export const numbersChanged = (client: QueryClient, orgId: number | undefined) =>
  client.invalidateQueries({ queryKey: numberKeys.list(orgId) });
