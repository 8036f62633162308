// An organization's billing: its plan, what it used (now, and as a series by day or month), the
// plans and add-ons on offer (GET /api/v2/product/currentPlan, /api/v2/stats/usage,
// …/allAvailablePlans, …/offeredPlan, /api/v2/addon/available). Its tasks held back for an included
// amount are the tasks' own list (queries/tasks.ts).
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { api, ok } from '../api.ts';
import type { Acting } from '../session.tsx';
import { taskKeys } from './tasks.ts';

export const billingKeys = {
  all: (orgId: number | undefined) => ['billing', orgId] as const,
  plan: (orgId: number | undefined) => ['billing', orgId, 'plan'] as const,
  usageNow: (orgId: number | undefined) => ['billing', orgId, 'usage-now'] as const,
  usage: (orgId: number | undefined, frequency: 'day' | 'month', period: 'current' | 'previous') => ['billing', orgId, 'usage', frequency, period] as const,
  plans: (orgId: number | undefined) => ['billing', orgId, 'plans'] as const,
  offered: (orgId: number | undefined) => ['billing', orgId, 'offered'] as const,
  addons: (orgId: number | undefined) => ['billing', orgId, 'addons'] as const,
};

export const billingQueries = {
  plan: ({ orgId, target }: Acting) => queryOptions({
    queryKey: billingKeys.plan(orgId),
    queryFn: () => ok(api.GET('/api/v2/product/currentPlan', { params: { query: { ...target } } })),
  }),
  /** What the current billing period has used so far, refreshed every 10 s. */
  usageNow: ({ orgId, target }: Acting) => queryOptions({
    queryKey: billingKeys.usageNow(orgId),
    queryFn: () => ok(api.GET('/api/v2/stats/usage', { params: { query: { ...target, billingPeriod: 'current' } } })),
    refetchInterval: 10_000,
  }),
  /** Every item's use as a series, refreshed every 15 s. */
  usage: ({ orgId, target }: Acting, frequency: 'day' | 'month', period: 'current' | 'previous') => queryOptions({
    queryKey: billingKeys.usage(orgId, frequency, period),
    queryFn: () => ok(api.GET('/api/v2/stats/usage', { params: { query: { ...target, timeseries: true, allItems: true, frequency, billingPeriod: period } } })),
    refetchInterval: 15_000,
  }),
  plans: ({ orgId, target }: Acting) => queryOptions({
    queryKey: billingKeys.plans(orgId),
    queryFn: () => ok(api.GET('/api/v2/product/allAvailablePlans', { params: { query: { ...target } } })),
  }),
  offered: ({ orgId, target }: Acting) => queryOptions({
    queryKey: billingKeys.offered(orgId),
    queryFn: () => ok(api.GET('/api/v2/product/offeredPlan', { params: { query: { ...target } } })),
  }),
  addons: ({ orgId, target }: Acting) => queryOptions({
    queryKey: billingKeys.addons(orgId),
    queryFn: () => ok(api.GET('/api/v2/addon/available', { params: { query: { ...target } } })),
  }),
};

/**
 * A subscription, an add-on or the billing period changed: everything billing shows, and the
 * organization's tasks (one held back for an included amount may start now, or be held).
 */
export const billingChanged = (client: QueryClient, orgId: number | undefined) =>
  Promise.all([client.invalidateQueries({ queryKey: billingKeys.all(orgId) }), client.invalidateQueries({ queryKey: taskKeys.all(orgId) })]);
