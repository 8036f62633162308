// An organization's knowledge bases and each one's documents (GET /api/v2/kb/knowledgebase,
// …/{kbId}/documents/list).
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { api, ok } from '../api.ts';
import type { Acting } from '../session.tsx';

export const knowledgeKeys = {
  bases: (orgId: number | undefined) => ['knowledge', orgId, 'bases'] as const,
  documents: (orgId: number | undefined, kbId: string) => ['knowledge', orgId, 'documents', kbId] as const,
};

export const knowledgeQueries = {
  bases: ({ orgId, target }: Acting) => queryOptions({
    queryKey: knowledgeKeys.bases(orgId),
    queryFn: () => ok(api.GET('/api/v2/kb/knowledgebase', { params: { query: { ...target } } })),
  }),
  documents: ({ orgId, target }: Acting, kbId: string) => queryOptions({
    queryKey: knowledgeKeys.documents(orgId, kbId),
    queryFn: () => ok(api.GET('/api/v2/kb/knowledgebase/{kbId}/documents/list', { params: { path: { kbId }, query: { ...target } } })),
  }),
};

/** A base was created or deleted. */
export const basesChanged = (client: QueryClient, orgId: number | undefined) =>
  client.invalidateQueries({ queryKey: knowledgeKeys.bases(orgId) });
/** A document was uploaded or deleted: its base's documents, and the bases (which count them). */
export const documentsChanged = (client: QueryClient, orgId: number | undefined, kbId: string) =>
  Promise.all([client.invalidateQueries({ queryKey: knowledgeKeys.documents(orgId, kbId) }), basesChanged(client, orgId)]);
