// An organization's SIP: its registration, the IP whitelist, the outbound routes, and the captured
// messages (GET /api/v2/sip/registration, …/ipWhitelist, …/outboundRoutes, …/captures/calls,
// …/captures, the latter as pcap too).
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { api, CallplaneError, ok } from '../api.ts';
import type { Acting } from '../session.tsx';

export const sipKeys = {
  registration: (orgId: number | undefined) => ['sip', orgId, 'registration'] as const,
  whitelist: (orgId: number | undefined) => ['sip', orgId, 'whitelist'] as const,
  ingress: (orgId: number | undefined) => ['sip', orgId, 'ingress'] as const,
  routes: (orgId: number | undefined) => ['sip', orgId, 'routes'] as const,
  captureCalls: (orgId: number | undefined) => ['sip', orgId, 'capture-calls'] as const,
  /** `count`, the messages the call list last counted, is in the key: new messages of the same Call-ID are read again. */
  captures: (orgId: number | undefined, callId: string, count: number | undefined) => ['sip', orgId, 'captures', callId, count] as const,
  pcap: (orgId: number | undefined, callId: string, count: number) => ['sip', orgId, 'pcap', callId, count] as const,
};

/** The registration, or null when the organization has none (the API's 404). */
async function readRegistration(target: Acting['target']) {
  try {
    return (await ok(api.GET('/api/v2/sip/registration', { params: { query: { ...target } } }))).registration;
  } catch (err) {
    if (err instanceof CallplaneError && err.status === 404) return null;
    throw err;
  }
}
export type Registration = NonNullable<Awaited<ReturnType<typeof readRegistration>>>;

const readWhitelist = (target: Acting['target']) => ok(api.GET('/api/v2/sip/ipWhitelist', { params: { query: { ...target } } }));
const readRoutes = (target: Acting['target']) => ok(api.GET('/api/v2/sip/outboundRoutes', { params: { query: { ...target } } }));

export const sipQueries = {
  /** Where to send calls: the deployment's configuration, read once. */
  ingress: ({ orgId, target }: Acting) => queryOptions({
    queryKey: sipKeys.ingress(orgId),
    queryFn: () => ok(api.GET('/api/v2/sip/ingress', { params: { query: { ...target } } })).then((r) => r.ingress),
    staleTime: Infinity,
  }),
  /** Refreshed every 3 s: its status changes on its own. */
  registration: ({ orgId, target }: Acting) => queryOptions({
    queryKey: sipKeys.registration(orgId),
    queryFn: () => readRegistration(target),
    refetchInterval: 3_000,
  }),
  whitelist: ({ orgId, target }: Acting) => queryOptions({
    queryKey: sipKeys.whitelist(orgId),
    queryFn: () => readWhitelist(target),
  }),
  routes: ({ orgId, target }: Acting) => queryOptions({
    queryKey: sipKeys.routes(orgId),
    queryFn: () => readRoutes(target),
  }),
  /** The 50 newest Call-IDs captured, refreshed every 5 s. */
  captureCalls: ({ orgId, target }: Acting) => queryOptions({
    queryKey: sipKeys.captureCalls(orgId),
    queryFn: () => ok(api.GET('/api/v2/sip/captures/calls', { params: { query: { ...target, limit: 50 } } })),
    refetchInterval: 5_000,
  }),
  captures: ({ orgId, target }: Acting, callId: string, count: number | undefined) => queryOptions({
    queryKey: sipKeys.captures(orgId, callId, count),
    queryFn: () => ok(api.GET('/api/v2/sip/captures', { params: { query: { ...target, sipCallId: callId } } })),
  }),
  /** The capture as a pcap file, a Blob (fetched with the console's header: a plain link would lack it). */
  pcap: ({ orgId, target }: Acting, callId: string, count: number) => queryOptions({
    queryKey: sipKeys.pcap(orgId, callId, count),
    queryFn: async () => {
      const { data, response } = await api.GET('/api/v2/sip/captures', { params: { query: { ...target, sipCallId: callId, format: 'pcap' } }, parseAs: 'blob' });
      if (!response.ok || !data) throw new Error(`The pcap could not be fetched: ${response.status} ${response.statusText}`);
      return data as Blob;
    },
  }),
};

/** The registration was saved: its answer is the registration, and a REGISTER exchange is now being captured. */
export function registrationSaved(client: QueryClient, orgId: number | undefined, registration: Registration) {
  client.setQueryData(sipKeys.registration(orgId), registration);
  return client.invalidateQueries({ queryKey: sipKeys.captureCalls(orgId) });
}
export const registrationDeleted = (client: QueryClient, orgId: number | undefined) =>
  client.invalidateQueries({ queryKey: sipKeys.registration(orgId) });
/** An address was added: the answer is the whole new list. */
export const whitelistAdded = (client: QueryClient, orgId: number | undefined, answer: Awaited<ReturnType<typeof readWhitelist>>) =>
  client.setQueryData(sipKeys.whitelist(orgId), answer);
/** An address was removed: the list is read again. */
export const whitelistRemoved = (client: QueryClient, orgId: number | undefined) =>
  client.invalidateQueries({ queryKey: sipKeys.whitelist(orgId) });
/** A route was added: the answer is the whole new list. */
export const routeAdded = (client: QueryClient, orgId: number | undefined, answer: Awaited<ReturnType<typeof readRoutes>>) =>
  client.setQueryData(sipKeys.routes(orgId), answer);
/** A route was removed: the list is read again. */
export const routeRemoved = (client: QueryClient, orgId: number | undefined) =>
  client.invalidateQueries({ queryKey: sipKeys.routes(orgId) });
