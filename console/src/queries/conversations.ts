// An organization's conversations: the inbox (priority or junk), a room's messages, one
// conversation and its recording, and the logs' search (GET /api/v2/conversations,
// /api/v2/junkConversations, /api/v2/messages/{roomId}, /api/v2/conversation/{roomId}/{uuid},
// …/recording, /api/v2/logs).
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { api, CallplaneError, ok } from '../api.ts';
import type { Acting } from '../session.tsx';

export const INBOX_PAGE_SIZE = 20;
export const LOGS_PAGE_SIZE = 25;

/** The logs' search as the page's form holds it. */
export interface LogFilters { days: string; channel: string; outcome: string; counterpart: string }

export const conversationKeys = {
  inbox: (orgId: number | undefined, junk?: boolean, page?: number) =>
    (junk === undefined ? ['conversations', orgId, 'inbox'] as const : ['conversations', orgId, 'inbox', junk, page] as const),
  room: (orgId: number | undefined, roomId: string) => ['conversations', orgId, 'room', roomId] as const,
  one: (orgId: number | undefined, roomId: string, uuid: string) => ['conversations', orgId, 'one', roomId, uuid] as const,
  recording: (orgId: number | undefined, roomId: string, uuid: string) => ['conversations', orgId, 'recording', roomId, uuid] as const,
  logs: (orgId: number | undefined, filters: LogFilters, page: number) => ['conversations', orgId, 'logs', filters, page] as const,
};

function readInbox(junk: boolean, target: Acting['target'], page: number) {
  const query = { ...target, page, pageSize: INBOX_PAGE_SIZE };
  return junk
    ? ok(api.GET('/api/v2/junkConversations', { params: { query } }))
    : ok(api.GET('/api/v2/conversations', { params: { query } }));
}

/** One page of an inbox. */
export type InboxPage = Awaited<ReturnType<typeof readInbox>>;

async function readConversation(roomId: string, uuid: string, target: Acting['target']) {
  const [c] = await ok(api.GET('/api/v2/conversation/{roomId}/{uuid}', { params: { path: { roomId, uuid }, query: { ...target } } }));
  if (!c) throw new Error('The service answered no conversation.');
  return c;
}

/** One conversation as the page shows it. */
export type Conversation = Awaited<ReturnType<typeof readConversation>>;

/** The recording as a Blob (fetched with the console's header: a plain link would lack it); null when there is none. */
async function readRecording(roomId: string, uuid: string, target: Acting['target']) {
  const { data, error, response } = await api.GET('/api/v2/conversation/{roomId}/{uuid}/recording', {
    params: { path: { roomId, uuid }, query: { ...target } }, parseAs: 'blob',
  });
  if (response.status === 404) return null;
  if (!response.ok || !data) throw new CallplaneError(response.status, { success: false, message: (error as { message?: string } | undefined)?.message ?? `${response.status} ${response.statusText}` });
  return data;
}

export const conversationQueries = {
  inbox: ({ orgId, target }: Acting, junk: boolean, page: number) => queryOptions({
    queryKey: conversationKeys.inbox(orgId, junk, page),
    queryFn: () => readInbox(junk, target, page),
    refetchInterval: 10_000,
  }),
  /** A room's latest messages; reading them marks the room read (see roomRead). */
  room: ({ orgId, target }: Acting, roomId: string) => queryOptions({
    queryKey: conversationKeys.room(orgId, roomId),
    queryFn: () => ok(api.GET('/api/v2/messages/{roomId}', { params: { path: { roomId }, query: { ...target } } })),
    refetchInterval: 10_000,
  }),
  /** Refreshed every 5 s until it has ended and its analysis is done. */
  one: ({ orgId, target }: Acting, roomId: string, uuid: string) => queryOptions({
    queryKey: conversationKeys.one(orgId, roomId, uuid),
    queryFn: () => readConversation(roomId, uuid, target),
    refetchInterval: (q) => (q.state.data && q.state.data.outcome !== 'open' && q.state.data.analysisStatus !== 'pending' ? false : 5_000),
  }),
  recording: ({ orgId, target }: Acting, roomId: string, uuid: string) => queryOptions({
    queryKey: conversationKeys.recording(orgId, roomId, uuid),
    queryFn: () => readRecording(roomId, uuid, target),
    staleTime: Infinity,
  }),
  /** Conversations started in the last `filters.days` days (counted when the search runs). */
  logs: ({ orgId, target }: Acting, filters: LogFilters, page: number) => queryOptions({
    queryKey: conversationKeys.logs(orgId, filters, page),
    queryFn: () => {
      const end = Math.floor(Date.now() / 1000);
      const start = end - Math.max(1, Number(filters.days) || 7) * 86_400;
      return ok(api.GET('/api/v2/logs', {
        params: {
          query: {
            ...target, start, end, page, pageSize: LOGS_PAGE_SIZE,
            ...(filters.channel ? { channel: filters.channel } : {}),
            ...(filters.outcome ? { outcome: filters.outcome } : {}),
            ...(filters.counterpart.trim() ? { counterpart: filters.counterpart.trim() } : {}),
          },
        },
      }));
    },
  }),
};

/**
 * A room was read (its unread count is now zero) or moved to or from junk: every page of both
 * inboxes. Not the room itself, which reading it would then read again.
 */
export const inboxChanged = (client: QueryClient, orgId: number | undefined) =>
  client.invalidateQueries({ queryKey: conversationKeys.inbox(orgId) });
