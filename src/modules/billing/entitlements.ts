// What an organization's plan and add-ons include in its current billing period, and the rule the
// task queue applies with it when it is about to start a call or text (docs/billing.md, "Included
// amounts"): past an included amount of tasks, call minutes or texts whose overage is not sold
// (null), the task stays pending until the next period, a plan change, an add-on or a new period.
//
// The entitlement (plan, add-ons, period) is read from five tables that change rarely and kept per
// organization in this process while they stay unchanged (src/db/stamped-cache.ts: accounts,
// subscriptions, billing_periods, catalog_items, org_addons) and until its period ends. What was
// used is read in the claim transaction, from the rollups of the period (usage_monthly for its
// whole months, usage_daily for the rest), and only for organizations with an amount enforced.
import type { Db, Executor, OrgAddonRow } from '../../db/types.ts';
import { StampedCache } from '../../db/stamped-cache.ts';
import { accountRepo } from '../accounts/repository.ts';
import type { PlanAllowance } from '../tasks/queue-hooks.ts';
import type { Addon, Plan } from './catalog.ts';
import { catalogOwners, findPlan } from './catalogs.ts';
import { nextMonthStart, periodOf } from './periods.ts';
import { addonRepo, periodRepo, subscriptionRepo, usageRepo } from './repository.ts';

/** The amounts a task may be held back for: what it uses. */
export type EnforcedItem = 'tasks' | 'callMinutes' | 'texts';
const ENFORCED: readonly EnforcedItem[] = ['tasks', 'callMinutes', 'texts'];
const RATE_OF: Record<EnforcedItem, keyof Plan['overage']> = { tasks: 'task', callMinutes: 'callMinute', texts: 'text' };
const USES: Record<'call' | 'text', readonly EnforcedItem[]> = { call: ['tasks', 'callMinutes'], text: ['tasks', 'texts'] };
const NOUN: Record<EnforcedItem, string> = { tasks: 'tasks', callMinutes: 'call minutes', texts: 'texts' };

/**
 * A period that ended with no next one set (a set period, or a subscription the maintenance job has
 * not renewed yet: renewals.ts) stays the current one; tasks it holds are looked at again this
 * often, and at once when a period is set or renewed.
 */
export const STALE_PERIOD_RECHECK_MS = 5 * 60_000;

export interface Entitlement {
  /** The plan's id, or null when the organization is on no plan of its catalog (nothing is enforced). */
  planId: string | null;
  /** Per enforced item with no overage sold: what the period includes (the plan's and its add-ons' amounts × months). */
  caps: Partial<Record<EnforcedItem, number>>;
  /** The period's local days. */
  fromDay: string;
  lastDay: string;
  /** When the period ends (the next begins), or when to look again for a period that already ended. */
  until: number;
  /** Whether `until` is the end of the period (false: a stale period's recheck). */
  ends: boolean;
}

/** An add-on bought for an organization, as stored, if it fits `plan` (an add-on bought for an earlier plan does not apply). */
export function addonsFitting(rows: readonly OrgAddonRow[], planId: string | null): Addon[] {
  return rows.map((r) => JSON.parse(r.addon) as Addon).filter((a) => a.plans.length === 0 || (planId !== null && a.plans.includes(planId)));
}

/** Reads an organization's entitlement at `at` (uncached). */
export async function readEntitlement(db: Executor, orgId: number, at: number): Promise<Entitlement | undefined> {
  const org = await accountRepo.findById(db, orgId);
  if (!org) return undefined;
  const zone = org.timezone || 'UTC';
  const [sub, set, addonRows] = await Promise.all([
    subscriptionRepo.current(db, orgId), periodRepo.lastTwo(db, orgId, at), addonRepo.inForce(db, orgId),
  ]);
  const plan: Plan | null = sub ? JSON.parse(sub.plan) as Plan
    : org.product_plan_id ? (await findPlan(db, catalogOwners(org), org.product_plan_id))?.item ?? null : null;
  const period = periodOf('current', set, sub, at, zone);
  const end = period.end ?? nextMonthStart(at, zone);
  const ends = end > at;
  const caps: Partial<Record<EnforcedItem, number>> = {};
  if (plan) {
    const months = sub?.term === 'year' ? 12 : 1;
    const addons = addonsFitting(addonRows, plan.productPlanId);
    for (const item of ENFORCED) {
      const included = plan.included[item];
      if (included === null || plan.overage[RATE_OF[item]] !== null) continue;
      caps[item] = (included + addons.reduce((n, a) => n + (a.adds[item] ?? 0), 0)) * months;
    }
  }
  return {
    planId: plan?.productPlanId ?? null, caps, fromDay: period.fromDay, lastDay: period.lastDay,
    until: ends ? end : at + STALE_PERIOD_RECHECK_MS, ends,
  };
}

/** Why a call or text must wait, and until when (null: until a running task of the organization ends). */
export interface Hold { until: number | null; reason: string }

export interface Entitlements {
  /** The organization's entitlement at `at`, read through `tx` when not cached. */
  of(tx: Executor, orgId: number, at: number): Promise<Entitlement | undefined>;
}

/** Reads every time: for one-off engines (tests, benchmarks) and where no change stamp exists. */
export const uncachedEntitlements: Entitlements = { of: readEntitlement };

/** Entitlements kept per organization while their tables stay unchanged and their period lasts. */
export function cachedEntitlements(db: Db): Entitlements {
  const cache = StampedCache.for<number, Entitlement | undefined>(db, ['accounts', 'subscriptions', 'billing_periods', 'catalog_items', 'org_addons']);
  if (!cache) return uncachedEntitlements;
  return {
    async of(tx, orgId, at) {
      const stamp = cache.stamp();
      if (cache.has(orgId, stamp)) {
        const known = cache.get(orgId, stamp);
        if (!known || at < known.until) return known;
      }
      const read = await readEntitlement(tx, orgId, at);
      cache.set(orgId, read, stamp);
      return read;
    },
  };
}

/**
 * Whether a call or text of the organization must wait for an included amount: `running` is how
 * many of its tasks run now (each will count one task, and a call at least a minute of a call that
 * was answered). Past an amount already used: until the period ends. Reached only with the tasks
 * running: parked until one of them ends (its end may or may not use the rest). Null: it may start.
 */
export async function includedHold(tx: Executor, entitlements: Entitlements, orgId: number, kind: 'call' | 'text', running: number, at: number): Promise<Hold | null> {
  const e = await entitlements.of(tx, orgId, at);
  if (!e) return null;
  const items = USES[kind].filter((m) => e.caps[m] !== undefined);
  if (items.length === 0) return null;
  const rows = await usageRepo.sums(tx, [orgId], e.fromDay, e.lastDay, 0, items);
  const used = new Map(rows.map((r) => [r.metric, r.n]));
  let parked: Hold | null = null;
  for (const m of items) {
    const cap = e.caps[m]!;
    const n = used.get(m) ?? 0;
    const what = `the ${cap} ${NOUN[m]} its plan ${e.planId} includes in the billing period ${e.fromDay} to ${e.lastDay}`;
    if (n >= cap) {
      const next = e.ends ? `the next period (${new Date(e.until).toISOString()})` : 'the next billing period';
      return { until: e.until, reason: `included amount used: ${n} of ${what}, and no overage is sold; waits for ${next}, a plan change or an add-on` };
    }
    if (!parked && n + running >= cap) {
      parked = { until: null, reason: `included amount nearly used: ${n} of ${what}, with ${running} task(s) running; waits for one to end` };
    }
  }
  return parked;
}

/**
 * The task queue's PlanAllowance (src/modules/tasks/queue-hooks.ts): a call or text waits for an
 * included amount as includedHold says, and what ended tasks used is added to usage_daily.
 */
export function planAllowance(entitlements: Entitlements): PlanAllowance {
  return {
    hold: (tx, orgId, kind, running, at) => includedHold(tx, entitlements, orgId, kind, running, at),
    addUsage: (tx, orgId, at, used) => usageRepo.add(tx, orgId, at, used),
  };
}
