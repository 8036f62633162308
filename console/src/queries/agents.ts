// One agent: its settings (live, with staging inside), its versions, the models it may choose and
// its answer times (GET /api/v2/agent/{agentId}, …/versions, /api/v2/models/supported,
// …/latency). Keyed by the agent's number, whichever page reads them.
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { api, ok } from '../api.ts';

export const agentKeys = {
  settings: (id: number) => ['agent', id, 'settings'] as const,
  versions: (id: number) => ['agent', id, 'versions'] as const,
  models: (id: number) => ['agent', id, 'models'] as const,
  latency: (id: number) => ['agent', id, 'latency'] as const,
};

export const agentQueries = {
  settings: (id: number) => queryOptions({
    queryKey: agentKeys.settings(id),
    queryFn: () => ok(api.GET('/api/v2/agent/{agentId}', { params: { path: { agentId: `camp${id}` } } })),
  }),
  versions: (id: number) => queryOptions({
    queryKey: agentKeys.versions(id),
    queryFn: () => ok(api.GET('/api/v2/agent/{agentId}/versions', { params: { path: { agentId: `camp${id}` }, query: { includeData: true } } })),
  }),
  /** The models the agent may choose; `below` when the signed-in account acts on the agent from above it. */
  models: (id: number, below: boolean) => queryOptions({
    queryKey: agentKeys.models(id),
    queryFn: () => ok(api.GET('/api/v2/models/supported', { params: { query: below ? { targetAccountId: id } : {} } })),
    staleTime: 60_000,
  }),
  /** Answer times of its spoken turns over the last 24 hours. */
  latency: (id: number) => queryOptions({
    queryKey: agentKeys.latency(id),
    queryFn: () => ok(api.GET('/api/v2/agent/{agentId}/latency', { params: { path: { agentId: `camp${id}` }, query: { windowHours: 24 } } })),
  }),
};

/** Its staging settings were saved. */
export const agentSaved = (client: QueryClient, id: number) =>
  client.invalidateQueries({ queryKey: agentKeys.settings(id) });
/** Published, reverted or restored: the settings and the versions. */
export const agentVersionsChanged = (client: QueryClient, id: number) =>
  Promise.all([agentSaved(client, id), client.invalidateQueries({ queryKey: agentKeys.versions(id) })]);
/** A version was renamed: the versions only. */
export const versionRenamed = (client: QueryClient, id: number) =>
  client.invalidateQueries({ queryKey: agentKeys.versions(id) });
