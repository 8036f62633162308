// Catalog items and subscriptions as the API shows them (times in unix seconds).
import type { OrgAddonRow, SubscriptionRow } from '../../db/types.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import { priceOf, type Addon, type Layered, type Plan } from './catalog.ts';

/** A plan and the catalog layer it comes from ('default', 'partner' or 'reseller'). */
export function presentPlan({ item, source }: Layered<Plan>) {
  return { ...item, source };
}

export function presentAddon({ item, source }: Layered<Addon>) {
  return { ...item, source };
}

export function presentSubscription(row: SubscriptionRow) {
  const plan = JSON.parse(row.plan) as Plan;
  return {
    subscriptionId: row.id,
    productPlanId: row.plan_id,
    planName: plan.name,
    term: row.term,
    state: row.state,
    price: priceOf(plan, row.term),
    currency: plan.currency,
    periodStart: toUnixSeconds(row.period_start)!,
    periodEnd: toUnixSeconds(row.period_end)!,
    startedAt: toUnixSeconds(row.started_at)!,
    endedAt: toUnixSeconds(row.ended_at),
    cancelReason: row.cancel_reason,
    cancelDetails: row.cancel_details,
    checkoutType: row.checkout_type,
    billingSystem: row.processor,
  };
}

/** An add-on an organization bought: the add-on as bought, when, and whether it counts for its current plan. */
export function presentOrgAddon(row: OrgAddonRow, appliesToPlan: boolean) {
  const addon = JSON.parse(row.addon) as Addon;
  return {
    addonId: row.addon_id,
    name: addon.name,
    currency: addon.currency,
    monthlyPrice: addon.monthlyPrice,
    yearlyPrice: addon.yearlyPrice,
    adds: addon.adds,
    plans: addon.plans,
    appliesToPlan,
    subscriptionId: row.subscription_id,
    periodStart: toUnixSeconds(row.period_start),
    periodEnd: toUnixSeconds(row.period_end),
    addedAt: toUnixSeconds(row.added_at)!,
    removedAt: toUnixSeconds(row.removed_at),
    state: row.state,
  };
}
