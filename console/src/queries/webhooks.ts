// An organization's webhooks: its event subscriptions and the log of what was sent to them
// (GET /api/v2/webhooks, …/deliveries), and its webhook relays, each one's configuration and log of
// forwards (GET /api/v2/webhookRelay, …/{type}, …/{type}/deliveries), and the relay types.
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { api, CallplaneError, ok } from '../api.ts';
import type { Acting } from '../session.tsx';

/** A page of a delivery log. */
export interface DeliveryPage { limit: number; offset: number; state?: string }

export const webhookKeys = {
  subscriptions: (orgId: number | undefined) => ['webhooks', orgId, 'subscriptions'] as const,
  deliveries: (orgId: number | undefined, page?: DeliveryPage) =>
    (page === undefined ? ['webhooks', orgId, 'deliveries'] as const : ['webhooks', orgId, 'deliveries', page] as const),
  relays: (orgId: number | undefined) => ['relays', orgId, 'list'] as const,
  relay: (orgId: number | undefined, type: string) => ['relays', orgId, 'one', type] as const,
  relayDeliveries: (orgId: number | undefined, type: string, page?: DeliveryPage) =>
    (page === undefined ? ['relays', orgId, 'deliveries', type] as const : ['relays', orgId, 'deliveries', type, page] as const),
  relayTypes: () => ['relays', 'types'] as const,
};

export const webhookQueries = {
  subscriptions: ({ orgId, target }: Acting) => queryOptions({
    queryKey: webhookKeys.subscriptions(orgId),
    queryFn: () => ok(api.GET('/api/v2/webhooks', { params: { query: { ...target } } })),
  }),
  /** Refreshed every 3 s. */
  deliveries: ({ orgId, target }: Acting, page: DeliveryPage) => queryOptions({
    queryKey: webhookKeys.deliveries(orgId, page),
    queryFn: () => ok(api.GET('/api/v2/webhooks/deliveries', { params: { query: { ...target, ...page } } })),
    refetchInterval: 3_000,
  }),
  /** The organization's relays; the contract answers 404 when it has none, an empty list here. */
  relays: ({ orgId, target }: Acting) => queryOptions({
    queryKey: webhookKeys.relays(orgId),
    queryFn: async () => {
      try { return (await ok(api.GET('/api/v2/webhookRelay', { params: { query: { ...target } } }))).configs; } catch (err) {
        if (err instanceof CallplaneError && err.status === 404) return [];
        throw err;
      }
    },
  }),
  relay: ({ orgId, target }: Acting, type: string) => queryOptions({
    queryKey: webhookKeys.relay(orgId, type),
    queryFn: () => ok(api.GET('/api/v2/webhookRelay/{type}', { params: { path: { type }, query: { ...target } } })),
  }),
  /** Refreshed every 3 s. */
  relayDeliveries: ({ orgId, target }: Acting, type: string, page: DeliveryPage) => queryOptions({
    queryKey: webhookKeys.relayDeliveries(orgId, type, page),
    queryFn: () => ok(api.GET('/api/v2/webhookRelay/{type}/deliveries', { params: { path: { type }, query: { ...target, ...page } } })),
    refetchInterval: 3_000,
  }),
  /** The same for everyone; kept 10 minutes. */
  relayTypes: () => queryOptions({
    queryKey: webhookKeys.relayTypes(),
    queryFn: () => ok(api.GET('/api/v2/webhookRelay/types')),
    staleTime: 600_000,
  }),
};

/** A subscription was added. */
export const subscriptionAdded = (client: QueryClient, orgId: number | undefined) =>
  client.invalidateQueries({ queryKey: webhookKeys.subscriptions(orgId) });
/** A subscription was removed: the list, and the log (its pending deliveries are dropped). */
export const subscriptionRemoved = (client: QueryClient, orgId: number | undefined) =>
  Promise.all([subscriptionAdded(client, orgId), client.invalidateQueries({ queryKey: webhookKeys.deliveries(orgId) })]);
/** A delivery was replayed. */
export const deliveriesChanged = (client: QueryClient, orgId: number | undefined) =>
  client.invalidateQueries({ queryKey: webhookKeys.deliveries(orgId) });
/** A relay was deleted: the list (its own page is left). */
export const relayDeleted = (client: QueryClient, orgId: number | undefined) =>
  client.invalidateQueries({ queryKey: webhookKeys.relays(orgId) });
/** A relay was configured: the list and its own page. */
export const relayChanged = (client: QueryClient, orgId: number | undefined, type: string) =>
  Promise.all([client.invalidateQueries({ queryKey: webhookKeys.relays(orgId) }), client.invalidateQueries({ queryKey: webhookKeys.relay(orgId, type) })]);
/** A relay's delivery was replayed. */
export const relayDeliveriesChanged = (client: QueryClient, orgId: number | undefined, type: string) =>
  client.invalidateQueries({ queryKey: webhookKeys.relayDeliveries(orgId, type) });
