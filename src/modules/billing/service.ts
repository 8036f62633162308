// Billing: the catalog (read and edited by partners and resellers), what an organization may
// subscribe to, its current plan, and subscribing and cancelling. Without a billing system they
// take effect at once (the plan's limits become the organization's task limits in the same
// transaction); with one (billing-systems.ts) subscribing starts the processor's checkout and its
// webhooks decide (processor-subscriptions.ts). docs/billing.md describes the rules.
import type { Config } from '../../config.ts';
import type { AccountRow, Db, Executor } from '../../db/types.ts';
import { Conflict, Invalid, NotFound } from '../../http/errors.ts';
import type { Scope } from '../../http/auth.ts';
import { newId } from '../../lib/ids.ts';
import { nowMs } from '../../lib/time.ts';
import { accountRepo } from '../accounts/repository.ts';
import { limitRepo } from '../tasks/repository.ts';
import { presentLimits } from '../tasks/present.ts';
import { ADDON_ID, DEFAULT_PLANS, PLAN_ID, periodEnd, type Addon, type Plan } from './catalog.ts';
import { addonsFitting } from './entitlements.ts';
import { periodOf } from './periods.ts';
import { applyPlanLimits, catalogOf, catalogOwners, findPlan, releaseHeldTasks } from './plans.ts';
import { presentAddon, presentOrgAddon, presentPlan, presentSubscription } from './present.ts';
import { addonRepo, catalogRepo, periodRepo, subscriptionRepo } from './repository.ts';
import type { BillingSystemService } from './billing-systems.ts';
import { fallbackPlan } from './fallback-plan.ts';
import type { ProcessorSubscriptions } from './processor-subscriptions.ts';

export type PlanInput = Omit<Plan, 'productPlanId' | 'description' | 'currency' | 'available' | 'limits'> & {
  description?: string; currency?: string; available?: boolean;
  limits: { concurrencyPerRun: number; daily?: Partial<Plan['limits']['daily']> };
};
export type AddonInput = Omit<Addon, 'addonId' | 'description' | 'currency' | 'available' | 'plans'>
  & { description?: string; currency?: string; available?: boolean; plans?: string[] };

export interface SubscribeInput { productPlanId: string; term: string; checkoutType?: string; successUrl?: string; cancelUrl?: string }
export interface CancelInput { reason?: string; details?: string }
export interface AddonPurchaseInput { checkoutType?: string; successUrl?: string; cancelUrl?: string }

export interface BillingServiceDeps {
  db: Db;
  config: Pick<Config, 'defaultPlanId'>;
  /** Wakes this process's task runners (a plan's new limits may let pending tasks start). */
  wakeTasks: () => void;
  /** Resellers' and partners' billing systems (Stripe, Chargebee). */
  systems: BillingSystemService;
  /** Subscriptions through a billing system: checkout, cancel at the processor. */
  processors: ProcessorSubscriptions;
}

const TERMS = ['month', 'year'] as const;
/** "embedded" (the processor's embedded checkout) or "redirect" (its hosted page): used once a billing system is configured. */
const CHECKOUT_TYPES = ['embedded', 'redirect'] as const;

function checkUrl(value: string | undefined, field: string): string | null {
  if (value === undefined || value === '') return null;
  let url: URL;
  try { url = new URL(value); } catch { throw new Invalid(`${field} must be an absolute http or https URL`); }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Invalid(`${field} must be an absolute http or https URL`);
  if (value.length > 2048) throw new Invalid(`${field} must be at most 2048 characters`);
  return value;
}

function checkCurrency(value: string | undefined): string {
  const c = (value ?? 'USD').trim().toUpperCase();
  if (!/^[A-Z]{3}$/.test(c)) throw new Invalid('currency must be a three-letter ISO 4217 code such as USD');
  return c;
}

/** Refuses keys a part of a plan does not have: a typo ("call" for "calls") would otherwise leave a limit unset. */
function onlyKeys(value: object | undefined, keys: readonly string[], field: string): void {
  for (const key of Object.keys(value ?? {})) {
    if (!keys.includes(key)) throw new Invalid(`${field}.${key} is not allowed (known: ${keys.join(', ')})`);
  }
}

function checkName(value: string): string {
  const name = value.trim();
  if (!name) throw new Invalid('name must not be empty');
  return name;
}

export function billingService(deps: BillingServiceDeps) {
  const { db } = deps;

  /** The organization an operation is about: the target (an organization, or an agent's organization). */
  async function organizationOf(scope: Scope, targetAccountId: number | undefined): Promise<AccountRow> {
    const account = await scope.target(targetAccountId, ['organization', 'agent']);
    if (account.kind === 'organization') return account;
    const org = await accountRepo.findById(db, account.org_id!);
    if (!org) throw new NotFound(`organization of account ${account.id} was not found`);
    return org;
  }

  /** The partner or reseller whose own catalog is edited. */
  async function catalogOwner(scope: Scope, targetAccountId: number | undefined, what: string): Promise<AccountRow> {
    scope.requireActor(['partner', 'reseller'], what);
    return scope.target(targetAccountId, ['partner', 'reseller']);
  }

  /** The plan an organization falls back to when its subscription ends: its reseller's sell plan, else the service's default. */
  const fallbackPlanOf = (org: AccountRow) => fallbackPlan(db, org, deps.config.defaultPlanId);

  async function deleteItem(scope: Scope, targetAccountId: number | undefined, id: string, kind: 'plan' | 'addon') {
    const owner = await catalogOwner(scope, targetAccountId, `delete a ${kind === 'plan' ? 'plan' : 'add-on'} of its catalog`);
    const field = kind === 'plan' ? 'productPlanId' : 'addonId';
    const own = await catalogRepo.find(db, owner.id, id);
    if (!own || own.kind !== kind) {
      const inherited = kind === 'plan' ? (await findPlan(db, catalogOwners(owner), id)) !== undefined
        : (await catalogOf(db, catalogOwners(owner))).addons.some((a) => a.item.addonId === id);
      throw new NotFound(inherited
        ? `${field} '${id}' is inherited, not in this account's own catalog: put it with "available": false to withdraw it`
        : `${field} '${id}' was not found in this catalog`);
    }
    if (kind === 'plan') {
      // Without this account's item, would the id still name a plan (a lower layer's)? If not, no
      // account below may still name it.
      const owners = catalogOwners(owner);
      const lower = owner.kind === 'reseller' ? await findPlan(db, { partnerId: owners.partnerId, resellerId: null }, id)
        : DEFAULT_PLANS.find((p) => p.productPlanId === id);
      if (!lower) {
        const users = await accountRepo.countUsingPlan(db, owner, id);
        if (users > 0) throw new Conflict(`productPlanId '${id}' is the plan (product, offered or sell plan) of ${users} account(s); move them to another plan first`);
      }
    }
    await db.transaction().execute((tx) => catalogRepo.delete(tx, owner.id, id));
    return { success: true, message: kind === 'plan' ? 'Plan deleted' : 'Add-on deleted' };
  }

  return {
    async productCatalog(scope: Scope, targetAccountId: number | undefined) {
      scope.requireActor(['partner', 'reseller'], 'view a product catalog');
      const owner = await scope.target(targetAccountId, ['partner', 'reseller']);
      const catalog = await catalogOf(db, catalogOwners(owner));
      return {
        success: true, message: 'Success', accountId: owner.id,
        plans: catalog.plans.map(presentPlan), addons: catalog.addons.map(presentAddon),
      };
    },

    async productPlan(scope: Scope, targetAccountId: number | undefined, planId: string) {
      const account = await scope.target(targetAccountId);
      const found = await findPlan(db, catalogOwners(account), planId);
      // An organization sees the plans it may subscribe to and the one it is on, nothing withdrawn beside.
      const org = account.kind === 'organization' ? account : account.kind === 'agent' ? await accountRepo.findById(db, account.org_id!) : undefined;
      if (!found || (org && !found.item.available && org.product_plan_id !== planId)) {
        throw new NotFound(`productPlanId '${planId}' was not found in your catalog`);
      }
      return { success: true, message: 'Success', plan: presentPlan(found) };
    },

    async allAvailablePlans(scope: Scope, targetAccountId: number | undefined) {
      const account = await scope.target(targetAccountId);
      const catalog = await catalogOf(db, catalogOwners(account));
      return { success: true, message: 'Success', plans: catalog.plans.filter((p) => p.item.available).map(presentPlan) };
    },

    async offeredPlan(scope: Scope, targetAccountId: number | undefined) {
      const org = await organizationOf(scope, targetAccountId);
      const id = org.offered_product_plan_id;
      const found = id ? await findPlan(db, catalogOwners(org), id) : undefined;
      return { success: true, message: 'Success', productPlanId: id, plan: found ? presentPlan(found) : null };
    },

    async currentPlan(scope: Scope, targetAccountId: number | undefined) {
      const org = await organizationOf(scope, targetAccountId);
      const id = org.product_plan_id;
      const [found, current, limits, addons] = await Promise.all([
        id ? findPlan(db, catalogOwners(org), id) : undefined,
        subscriptionRepo.current(db, org.id),
        limitRepo.load(db, org.id),
        addonRepo.inForce(db, org.id),
      ]);
      const planId = current?.plan_id ?? id;
      const fitting = new Set(addonsFitting(addons, planId).map((a) => a.addonId));
      return {
        success: true, message: 'Success', organizationId: org.id, productPlanId: id, productPlanTerm: org.product_plan_term,
        subscribed: current !== undefined, plan: found ? presentPlan(found) : null,
        subscription: current ? presentSubscription(current) : null, limits: presentLimits(limits),
        addons: addons.map((a) => presentOrgAddon(a, fitting.has(a.addon_id))),
      };
    },

    async availableAddons(scope: Scope, targetAccountId: number | undefined) {
      const org = await organizationOf(scope, targetAccountId);
      const catalog = await catalogOf(db, catalogOwners(org));
      const plan = org.product_plan_id;
      const addons = catalog.addons.filter((a) => a.item.available && (a.item.plans.length === 0 || (plan !== null && a.item.plans.includes(plan))));
      return { success: true, message: 'Success', productPlanId: plan, addons: addons.map(presentAddon) };
    },

    /**
     * Buys an add-on for the organization (or an ancestor for it): an available add-on of its
     * catalog that fits its current plan, in the plan's currency, one of each at a time. Recorded
     * with the subscription and billing period in force; its amounts are added to what the plan
     * includes at once, so tasks an included amount held back are looked at again.
     */
    async addAddon(scope: Scope, targetAccountId: number | undefined, addonId: string, input: AddonPurchaseInput = {}) {
      const org = await scope.target(targetAccountId, ['organization']);
      if (!ADDON_ID.test(addonId)) throw new Invalid('addonId must look like addon-<lowercase letters, digits and dashes> (see GET /api/v2/addon/available)');
      const checkoutType = input.checkoutType === undefined || input.checkoutType === '' ? null : input.checkoutType.trim().toLowerCase();
      if (checkoutType !== null && !(CHECKOUT_TYPES as readonly string[]).includes(checkoutType)) {
        throw new Invalid(`checkoutType must be one of: ${CHECKOUT_TYPES.join(', ')}`);
      }
      const successUrl = checkUrl(input.successUrl, 'successUrl');
      const cancelUrl = checkUrl(input.cancelUrl, 'cancelUrl');
      const owners = catalogOwners(org);
      const found = (await catalogOf(db, owners)).addons.find((a) => a.item.addonId === addonId);
      if (!found) throw new NotFound(`addonId '${addonId}' was not found in this organization's catalog (see GET /api/v2/addon/available)`);
      const addon = found.item;
      if (!addon.available) throw new Invalid(`addonId '${addonId}' is no longer offered`);
      /** The plan the add-on must fit (the subscription's in force, else the account's plan). */
      const planFor = async (tx: Executor) => {
        const current = await subscriptionRepo.current(tx, org.id);
        const fresh = (await accountRepo.findById(tx, org.id))!;
        const planId = current?.plan_id ?? fresh.product_plan_id;
        const plan = current ? JSON.parse(current.plan) as Plan : planId ? (await findPlan(tx, owners, planId))?.item : undefined;
        if (!plan) throw new Invalid('The organization is on no plan of its catalog: subscribe to a plan before adding an add-on');
        if (addon.plans.length > 0 && !addon.plans.includes(plan.productPlanId)) {
          throw new Invalid(`addonId '${addonId}' does not fit the organization's plan '${plan.productPlanId}' (it fits: ${addon.plans.join(', ')})`);
        }
        if (addon.currency !== plan.currency) throw new Invalid(`addonId '${addonId}' is priced in ${addon.currency}, the plan '${plan.productPlanId}' in ${plan.currency}`);
        return { current, fresh, plan };
      };
      // Under a payment processor the organization buys a priced add-on through the processor's
      // checkout, as it subscribes to a plan: pending until the processor's webhook confirms the
      // payment. Its reseller or partner, who runs the billing system, may still grant it at once.
      const priced = addon.monthlyPrice > 0 || addon.yearlyPrice > 0;
      const system = priced && (scope.actor.kind === 'organization' || scope.actor.kind === 'agent') ? await deps.systems.forOrganization(org) : null;
      if (system) {
        const { current, plan } = await planFor(db);
        const term = (current?.term === 'year' ? 'year' : 'month') as 'month' | 'year';
        const { row, checkout } = await deps.processors.checkoutAddon(system, {
          org, addon, plan, term, subscriptionId: current?.id ?? null, actorId: scope.actor.id,
          checkoutType: (checkoutType ?? 'redirect') as 'embedded' | 'redirect', successUrl, cancelUrl,
        });
        return {
          success: true, message: 'Checkout started: the add-on takes effect when the payment is confirmed',
          addon: presentOrgAddon(row, true), checkoutUrl: checkout.checkoutUrl, clientSecret: checkout.clientSecret,
        };
      }
      const now = nowMs();
      const row = await db.transaction().execute(async (tx) => {
        await accountRepo.lock(tx, org.id);
        const { current, fresh } = await planFor(tx);
        const inForce = await addonRepo.inForce(tx, org.id);
        if (inForce.some((a) => a.addon_id === addonId)) throw new Conflict(`The organization already has add-on '${addonId}'; remove it first to buy it again`);
        const period = periodOf('current', await periodRepo.lastTwo(tx, org.id, now), current, now, fresh.timezone || 'UTC');
        const id = newId('oad', now);
        await addonRepo.insert(tx, {
          id, org_id: org.id, addon_id: addonId, addon: JSON.stringify(addon), subscription_id: current?.id ?? null,
          period_start: period.start, period_end: period.end, added_at: now, added_by: scope.actor.id, removed_at: null, removed_by: null,
        });
        await releaseHeldTasks(tx, org.id, now);
        return (await addonRepo.inForce(tx, org.id)).find((a) => a.id === id)!;
      });
      deps.wakeTasks();
      return { success: true, message: 'Add-on added', addon: presentOrgAddon(row, true), checkoutUrl: null, clientSecret: null };
    },

    /** Ends an add-on the organization has: its amounts no longer count from now on (a range it was in force in still counts them). */
    async removeAddon(scope: Scope, targetAccountId: number | undefined, addonId: string) {
      const org = await scope.target(targetAccountId, ['organization']);
      // One paid through a processor is cancelled there first, so it is never ended here while still charged there.
      const paid = (await addonRepo.inForce(db, org.id)).find((a) => a.addon_id === addonId);
      if (paid) await deps.processors.cancelAddonAtProcessor(paid);
      const row = await db.transaction().execute(async (tx) => {
        await accountRepo.lock(tx, org.id);
        return addonRepo.remove(tx, org.id, addonId, scope.actor.id, nowMs());
      });
      if (!row) throw new NotFound(`The organization has no add-on '${addonId}' in force`);
      return { success: true, message: 'Add-on removed', addon: presentOrgAddon(row, false) };
    },

    async subscribe(scope: Scope, targetAccountId: number | undefined, input: SubscribeInput) {
      const org = await scope.target(targetAccountId, ['organization']);
      const term = input.term.trim().toLowerCase();
      if (!(TERMS as readonly string[]).includes(term)) throw new Invalid(`term must be one of: ${TERMS.join(', ')}`);
      const checkoutType = input.checkoutType === undefined || input.checkoutType === '' ? null : input.checkoutType.trim().toLowerCase();
      if (checkoutType !== null && !(CHECKOUT_TYPES as readonly string[]).includes(checkoutType)) {
        throw new Invalid(`checkoutType must be one of: ${CHECKOUT_TYPES.join(', ')}`);
      }
      const successUrl = checkUrl(input.successUrl, 'successUrl');
      const cancelUrl = checkUrl(input.cancelUrl, 'cancelUrl');
      const planId = input.productPlanId.trim();
      const found = await findPlan(db, catalogOwners(org), planId);
      if (!found) throw new Invalid(`productPlanId '${planId}' is not a plan of this organization's catalog (see GET /api/v2/product/allAvailablePlans)`);
      if (!found.item.available) throw new Invalid(`productPlanId '${planId}' is no longer offered`);
      const plan = found.item;
      // With a billing system: pending until the processor's webhook confirms the checkout.
      const system = await deps.systems.forOrganization(org);
      if (system) {
        const { row, checkout } = await deps.processors.subscribe(system, {
          org, plan, term: term as 'month' | 'year', checkoutType: (checkoutType ?? 'redirect') as 'embedded' | 'redirect', successUrl, cancelUrl,
        });
        return {
          success: true, message: 'Checkout started: the subscription starts when the payment is confirmed', subscription: presentSubscription(row),
          checkoutUrl: checkout.checkoutUrl, clientSecret: checkout.clientSecret, limits: presentLimits(await limitRepo.load(db, org.id)),
        };
      }
      const now = nowMs();
      const { row, limits } = await db.transaction().execute(async (tx) => {
        await accountRepo.lock(tx, org.id);
        const current = await subscriptionRepo.current(tx, org.id);
        if (current && current.plan_id === plan.productPlanId && current.term === term) {
          throw new Conflict(`The organization is already subscribed to '${plan.productPlanId}' by the ${term}`);
        }
        // A change of plan or term ends the subscription in force and starts a new period now.
        if (current) await subscriptionRepo.update(tx, current.id, { state: 'replaced', ended_at: now, updated_at: now });
        const id = newId('sub', now);
        await subscriptionRepo.insert(tx, {
          id, org_id: org.id, plan_id: plan.productPlanId, plan: JSON.stringify(plan), term: term as 'month' | 'year', state: 'active',
          period_start: now, period_end: periodEnd(now, term as 'month' | 'year'), started_at: now, ended_at: null,
          cancel_reason: null, cancel_details: null, canceled_by: null, checkout_type: checkoutType, success_url: successUrl, cancel_url: cancelUrl,
          processor: null, processor_customer_id: null, processor_subscription_id: null, checkout_session_id: null,
          billing_account_id: null, created_at: now, updated_at: now,
        });
        await accountRepo.update(tx, org.id, {
          product_plan_id: plan.productPlanId, product_plan_term: term, subscribed: 1, billing_subscription_id: id,
          canceled_at: null, updated_at: now,
        });
        const limits = await applyPlanLimits(tx, org.id, plan, now);
        return { row: (await subscriptionRepo.find(tx, id))!, limits };
      });
      deps.wakeTasks();
      return {
        success: true, message: 'Subscribed', subscription: presentSubscription(row),
        checkoutUrl: null, clientSecret: null, limits: presentLimits(limits),
      };
    },

    async cancel(scope: Scope, targetAccountId: number | undefined, input: CancelInput) {
      const org = await scope.target(targetAccountId, ['organization']);
      const fallback = await fallbackPlanOf(org);
      // A processor's subscription is cancelled there first (idempotent); a failure there changes nothing here.
      const inForce = await subscriptionRepo.current(db, org.id);
      if (inForce?.processor) await deps.processors.cancelAtProcessor(inForce);
      const now = nowMs();
      const { row, limits } = await db.transaction().execute(async (tx) => {
        await accountRepo.lock(tx, org.id);
        const current = await subscriptionRepo.current(tx, org.id);
        if (!current) throw new Invalid('Unable to cancel subscription: the organization has no subscription in force');
        await subscriptionRepo.update(tx, current.id, {
          state: 'canceled', ended_at: now, cancel_reason: input.reason?.trim() || null, cancel_details: input.details?.trim() || null,
          canceled_by: scope.actor.id, updated_at: now,
        });
        await accountRepo.update(tx, org.id, {
          product_plan_id: fallback.productPlanId, product_plan_term: null, subscribed: 0, canceled_at: now, updated_at: now,
        });
        const limits = await applyPlanLimits(tx, org.id, fallback, now);
        return { row: (await subscriptionRepo.find(tx, current.id))!, limits };
      });
      deps.wakeTasks();
      return {
        success: true, message: 'Subscription cancelled', subscription: presentSubscription(row),
        productPlanId: fallback.productPlanId, limits: presentLimits(limits),
      };
    },

    async putPlan(scope: Scope, targetAccountId: number | undefined, planId: string, input: PlanInput) {
      const owner = await catalogOwner(scope, targetAccountId, 'edit a product catalog');
      if (!PLAN_ID.test(planId)) throw new Invalid(`productPlanId must look like pplan-<lowercase letters, digits and dashes> (at most 64 characters after pplan-)`);
      onlyKeys(input.included, ['callMinutes', 'texts', 'tasks', 'conversations', 'modelTokens'], 'included');
      onlyKeys(input.overage, ['callMinute', 'text', 'task', 'conversation', 'modelTokensPer1k'], 'overage');
      onlyKeys(input.limits, ['concurrencyPerRun', 'daily'], 'limits');
      onlyKeys(input.limits.daily, ['calls', 'texts', 'tasks'], 'limits.daily');
      const plan: Plan = {
        productPlanId: planId, name: checkName(input.name), description: input.description?.trim() ?? '',
        currency: checkCurrency(input.currency), monthlyPrice: input.monthlyPrice, yearlyPrice: input.yearlyPrice,
        included: { ...input.included }, overage: { ...input.overage },
        limits: { concurrencyPerRun: input.limits.concurrencyPerRun, daily: { calls: null, texts: null, tasks: null, ...input.limits.daily } },
        available: input.available !== false,
      };
      const created = await catalogRepo.put(db, { owner_id: owner.id, item_id: planId, kind: 'plan', body: JSON.stringify(plan) }, nowMs());
      const found = await findPlan(db, catalogOwners(owner), planId);
      return { success: true, message: created ? 'Plan created' : 'Plan updated', created, plan: presentPlan(found!) };
    },

    deletePlan: (scope: Scope, targetAccountId: number | undefined, planId: string) => deleteItem(scope, targetAccountId, planId, 'plan'),

    async putAddon(scope: Scope, targetAccountId: number | undefined, addonId: string, input: AddonInput) {
      const owner = await catalogOwner(scope, targetAccountId, 'edit a product catalog');
      if (!ADDON_ID.test(addonId)) throw new Invalid(`addonId must look like addon-<lowercase letters, digits and dashes> (at most 64 characters after addon-)`);
      onlyKeys(input.adds, ['callMinutes', 'texts', 'tasks', 'conversations', 'modelTokens'], 'adds');
      const plans = [...new Set(input.plans ?? [])];
      plans.forEach((p, i) => { if (!PLAN_ID.test(p)) throw new Invalid(`plans[${i}] '${p}' is not a productPlanId`); });
      const addon: Addon = {
        addonId, name: checkName(input.name), description: input.description?.trim() ?? '', currency: checkCurrency(input.currency),
        monthlyPrice: input.monthlyPrice, yearlyPrice: input.yearlyPrice, adds: { ...input.adds }, plans, available: input.available !== false,
      };
      const created = await catalogRepo.put(db, { owner_id: owner.id, item_id: addonId, kind: 'addon', body: JSON.stringify(addon) }, nowMs());
      const found = (await catalogOf(db, catalogOwners(owner))).addons.find((a) => a.item.addonId === addonId);
      return { success: true, message: created ? 'Add-on created' : 'Add-on updated', created, addon: presentAddon(found!) };
    },

    deleteAddon: (scope: Scope, targetAccountId: number | undefined, addonId: string) => deleteItem(scope, targetAccountId, addonId, 'addon'),
  };
}

export type BillingService = ReturnType<typeof billingService>;
