// An account's API tokens and its console sessions (GET /api/v2/tokens, GET /api/v2/tokens/sessions).
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { api, ok } from '../api.ts';

/** `{}` for the signed-in account itself, `{ targetAccountId }` for one below it. */
type Target = { targetAccountId?: number };

export const tokenKeys = {
  all: (accountId: number) => ['tokens', accountId] as const,
  list: (accountId: number) => ['tokens', accountId, 'list'] as const,
  sessions: (accountId: number) => ['tokens', accountId, 'sessions'] as const,
};

export const tokenQueries = {
  list: (accountId: number, target: Target) => queryOptions({
    queryKey: tokenKeys.list(accountId),
    queryFn: () => ok(api.GET('/api/v2/tokens', { params: { query: target } })),
  }),
  sessions: (accountId: number, target: Target) => queryOptions({
    queryKey: tokenKeys.sessions(accountId),
    queryFn: () => ok(api.GET('/api/v2/tokens/sessions', { params: { query: target } })),
  }),
};

/** A token was made: the list. */
export const tokensChanged = (client: QueryClient, accountId: number) =>
  client.invalidateQueries({ queryKey: tokenKeys.list(accountId) });
/** A token was deleted: the list and the sessions (deleting a token ends the sessions made from it). */
export const tokenDeleted = (client: QueryClient, accountId: number) =>
  client.invalidateQueries({ queryKey: tokenKeys.all(accountId) });
/** A session was ended. */
export const sessionsChanged = (client: QueryClient, accountId: number) =>
  client.invalidateQueries({ queryKey: tokenKeys.sessions(accountId) });
