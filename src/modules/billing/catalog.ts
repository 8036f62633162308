// The product catalog's shape, the default catalog that ships with the service, and how a
// catalog is layered: the default catalog, under the partner's own items, under the reseller's.
// Pure: no storage here (the rows are read by repository.ts, the layers put together by service.ts).
//
// The default catalog is code, not rows a migration seeds: it is the bottom layer of every
// partner's catalog, partners created after the migration included, it changes with the release
// that documents it (docs/billing.md), and nobody can edit or delete it. A partner or reseller
// changes what it sells by putting its own item under the same id (an override, which may also
// withdraw the plan with `available: false`) or a new id.
import type { LimitsPatch } from '../limits/task-limits.ts';

export interface Included {
  /** Call minutes, texts, tasks, conversations and model tokens included per month; null = unlimited. */
  callMinutes: number | null; texts: number | null; tasks: number | null; conversations: number | null; modelTokens: number | null;
}
export interface Overage {
  /** Price per unit past the included amount, in the plan's currency; null = not sold past the included amount. */
  callMinute: number | null; text: number | null; task: number | null; conversation: number | null; modelTokensPer1k: number | null;
}
export interface PlanLimits {
  concurrencyPerRun: number;
  daily: { calls: number | null; texts: number | null; tasks: number | null };
}
export interface Plan {
  productPlanId: string;
  name: string;
  description: string;
  currency: string;
  monthlyPrice: number;
  yearlyPrice: number;
  included: Included;
  overage: Overage;
  limits: PlanLimits;
  /** Whether organizations may subscribe to it; a withdrawn plan stays readable for those on it. */
  available: boolean;
}
export interface Addon {
  addonId: string;
  name: string;
  description: string;
  currency: string;
  monthlyPrice: number;
  yearlyPrice: number;
  /** Amounts it adds to the plan's included ones each month. */
  adds: { callMinutes: number; texts: number; tasks: number; conversations: number; modelTokens: number };
  /** Plans it may be added to; empty = every plan. */
  plans: string[];
  available: boolean;
}

export type Source = 'default' | 'partner' | 'reseller';
export interface Layered<T> { item: T; source: Source }
export interface Catalog { plans: Layered<Plan>[]; addons: Layered<Addon>[] }

export const PLAN_ID = /^pplan-[a-z0-9][a-z0-9-]{0,62}$/;
export const ADDON_ID = /^addon-[a-z0-9][a-z0-9-]{0,62}$/;
/** The plan an ended subscription falls back to when nothing else is set (fallback-plan.ts). */
export const FREE_PLAN_ID = 'pplan-free';
/**
 * The plan of an organization nobody chose one for (CALLPLANE_DEFAULT_PLAN_ID's default): nothing
 * is held back by included amounts, so a self-hosted service that bills nobody just works. Not
 * offered for subscription; a reseller that sells plans sets its `sellPlanId`.
 */
export const UNMETERED_PLAN_ID = 'pplan-unmetered';

/** A plan whose included amounts are all unlimited: nothing it includes is ever used up. */
export function unmetered(p: Pick<Plan, 'included'>): boolean {
  return Object.values(p.included).every((v) => v === null);
}

const UNLIMITED_DAILY = { calls: null, texts: null, tasks: null };

function plan(p: Omit<Plan, 'description' | 'currency' | 'available'> & { description: string }): Plan {
  return { currency: 'USD', available: true, ...p };
}

/**
 * The default catalog. The unmetered plan's limits are the task queue's own defaults (5 at once,
 * no daily caps) and it includes everything without limit, so an organization created without a
 * plan runs as it did before plans were real.
 */
export const DEFAULT_PLANS: readonly Plan[] = Object.freeze([
  {
    productPlanId: UNMETERED_PLAN_ID, name: 'Unmetered', currency: 'USD', available: false,
    description: 'Self-hosted use that bills nobody: nothing is counted against included amounts. Assigned, never subscribed to.',
    monthlyPrice: 0, yearlyPrice: 0,
    included: { callMinutes: null, texts: null, tasks: null, conversations: null, modelTokens: null },
    overage: { callMinute: null, text: null, task: null, conversation: null, modelTokensPer1k: null },
    limits: { concurrencyPerRun: 5, daily: UNLIMITED_DAILY },
  },
  plan({
    productPlanId: FREE_PLAN_ID, name: 'Free', description: 'Try the platform: small included amounts, nothing sold past them.',
    monthlyPrice: 0, yearlyPrice: 0,
    included: { callMinutes: 60, texts: 200, tasks: 500, conversations: 500, modelTokens: 1_000_000 },
    overage: { callMinute: null, text: null, task: null, conversation: null, modelTokensPer1k: null },
    limits: { concurrencyPerRun: 5, daily: UNLIMITED_DAILY },
  }),
  plan({
    productPlanId: 'pplan-starter', name: 'Starter', description: 'A small business answering and calling its own customers.',
    monthlyPrice: 29, yearlyPrice: 290,
    included: { callMinutes: 500, texts: 2_000, tasks: 5_000, conversations: 5_000, modelTokens: 10_000_000 },
    overage: { callMinute: 0.05, text: 0.02, task: 0.01, conversation: 0.02, modelTokensPer1k: 0.002 },
    limits: { concurrencyPerRun: 5, daily: UNLIMITED_DAILY },
  }),
  plan({
    productPlanId: 'pplan-business', name: 'Business', description: 'Teams running campaigns and several agents.',
    monthlyPrice: 99, yearlyPrice: 990,
    included: { callMinutes: 2_500, texts: 10_000, tasks: 25_000, conversations: 25_000, modelTokens: 50_000_000 },
    overage: { callMinute: 0.04, text: 0.015, task: 0.008, conversation: 0.015, modelTokensPer1k: 0.0015 },
    limits: { concurrencyPerRun: 20, daily: UNLIMITED_DAILY },
  }),
  plan({
    productPlanId: 'pplan-enterprise', name: 'Enterprise', description: 'High volume, many calls at once.',
    monthlyPrice: 499, yearlyPrice: 4_990,
    included: { callMinutes: 15_000, texts: 50_000, tasks: 150_000, conversations: 150_000, modelTokens: 300_000_000 },
    overage: { callMinute: 0.03, text: 0.01, task: 0.005, conversation: 0.01, modelTokensPer1k: 0.001 },
    limits: { concurrencyPerRun: 100, daily: UNLIMITED_DAILY },
  }),
]);

export const DEFAULT_ADDONS: readonly Addon[] = Object.freeze([
  {
    addonId: 'addon-minutes-1000', name: '1,000 call minutes', description: 'One thousand more call minutes each month.',
    currency: 'USD', monthlyPrice: 40, yearlyPrice: 400,
    adds: { callMinutes: 1_000, texts: 0, tasks: 0, conversations: 0, modelTokens: 0 },
    plans: ['pplan-starter', 'pplan-business', 'pplan-enterprise'], available: true,
  },
  {
    addonId: 'addon-texts-5000', name: '5,000 texts', description: 'Five thousand more texts each month.',
    currency: 'USD', monthlyPrice: 60, yearlyPrice: 600,
    adds: { callMinutes: 0, texts: 5_000, tasks: 0, conversations: 0, modelTokens: 0 },
    plans: [], available: true,
  },
]);

/** Items of one kind, each id taken from the highest layer that has it, in the default catalog's order then by id. */
export function layer<T>(idOf: (item: T) => string, layers: [Source, readonly T[]][]): Layered<T>[] {
  const byId = new Map<string, Layered<T>>();
  for (const [source, items] of layers) for (const item of items) byId.set(idOf(item), { item, source });
  return [...byId.values()];
}

/** What the task limits become under a plan: its concurrency and daily caps, the rest as it was. */
export function limitsOf(plan: Plan): LimitsPatch {
  return { concurrencyPerRun: plan.limits.concurrencyPerRun, daily: { ...plan.limits.daily } };
}

/** The price of a term. */
export function priceOf(plan: Pick<Plan, 'monthlyPrice' | 'yearlyPrice'>, term: 'month' | 'year'): number {
  return term === 'year' ? plan.yearlyPrice : plan.monthlyPrice;
}

/** The end of a period of one `term` starting at `startMs`: the same day and time a month or year later (UTC), clamped to the month's last day. */
export function periodEnd(startMs: number, term: 'month' | 'year'): number {
  const d = new Date(startMs);
  const months = term === 'year' ? 12 : 1;
  const y = d.getUTCFullYear() + Math.floor((d.getUTCMonth() + months) / 12);
  const m = (d.getUTCMonth() + months) % 12;
  const lastDay = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
  return Date.UTC(y, m, Math.min(d.getUTCDate(), lastDay), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds());
}
