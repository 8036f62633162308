// Subscriptions through a payment processor: subscribe records a `pending` subscription and starts
// the processor's hosted checkout; the processor's signed webhooks make it `active` (its plan and
// limits then apply), `past_due` when a payment fails, and end it (`unpaid` or `canceled`, the
// organization falling back as on cancel) when the processor gives up or it is cancelled. Each
// processor event is handled once (its id is recorded in the same transaction as its effect).
// docs/billing.md, "Payment processors".
import type Stripe from 'stripe';
import type { AccountRow, Db, Executor, OrgAddonRow, SubscriptionRow } from '../../db/types.ts';
import { Conflict, Forbidden, Invalid, Unauthorized } from '../../http/errors.ts';
import { newId } from '../../lib/ids.ts';
import { nowMs } from '../../lib/time.ts';
import { accountRepo } from '../accounts/repository.ts';
import { verifyBasicAuth } from '../webhooks/relays/providers.ts';
import type { TaskLimits } from '../limits/task-limits.ts';
import { periodEnd, type Addon, type Plan } from './catalog.ts';
import type { BillingSystem, BillingSystemService } from './billing-systems.ts';
import { fallbackPlan } from './fallback-plan.ts';
import { periodOf } from './periods.ts';
import { applyPlanLimits, releaseHeldTasks } from './plans.ts';
import { idempotencyKey, processorAnswered, stripeLib, type Checkout, type ProcessorType } from './processors.ts';
import { addonRepo, billingEventRepo, periodRepo, subscriptionRepo } from './repository.ts';

/** Largest webhook body read (a processor's event is a few kilobytes). */
export const MAX_WEBHOOK_BYTES = 1024 * 1024;
/** The one answer to a webhook that fails verification, whatever failed (no hint). */
const REFUSED = 'Webhook verification failed';

export interface ProcessorSubscriptionDeps {
  db: Db;
  systems: BillingSystemService;
  /** CALLPLANE_DEFAULT_PLAN_ID: part of the fallback when a subscription ends (fallback-plan.ts). */
  defaultPlanId: string;
  wakeTasks: () => void;
  log?: { warn: (obj: object, msg: string) => void };
}

export interface ProcessorCheckoutInput {
  org: AccountRow;
  plan: Plan;
  term: 'month' | 'year';
  checkoutType: 'embedded' | 'redirect';
  successUrl: string | null;
  cancelUrl: string | null;
}

export interface AddonCheckoutInput {
  org: AccountRow;
  addon: Addon;
  /** The plan in force (the add-on fits it) and its term: the add-on is billed by the same term. */
  plan: Plan;
  term: 'month' | 'year';
  /** The subscription in force, if any: the add-on is recorded with it. */
  subscriptionId: string | null;
  actorId: number;
  checkoutType: 'embedded' | 'redirect';
  successUrl: string | null;
  cancelUrl: string | null;
}

/** What an event asks of a subscription, processor-independent. */
type Effect =
  | { kind: 'activate'; ref: Ref; customerId: string | null; processorSubscriptionId: string | null }
  | { kind: 'past_due'; ref: Ref }
  | { kind: 'recovered'; ref: Ref }
  | { kind: 'end'; ref: Ref; state: 'canceled' | 'unpaid' }
  /** A checkout that ended unpaid (expired): ends what it was for only while that is still pending. */
  | { kind: 'abandon'; ref: Ref }
  | { kind: 'ignore'; why: string };
interface Ref { id?: string; processorSubscriptionId?: string }

export interface WebhookRequest {
  accountId: number;
  type: ProcessorType;
  headers: Record<string, string | undefined>;
  rawBody: Buffer;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const obj = (v: unknown): Record<string, unknown> => (v && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : {});

/** Stripe's events, as docs/billing.md lists them. */
function stripeEffect(event: Stripe.Event): Effect {
  const o = obj(event.data.object);
  const metaRef = (): Ref => ({ id: str(obj(o.metadata).callplaneSubscriptionId), processorSubscriptionId: str(o.id) });
  switch (event.type) {
    case 'checkout.session.completed':
    case 'checkout.session.async_payment_succeeded': {
      if (o.mode !== 'subscription') return { kind: 'ignore', why: 'not a subscription checkout' };
      // An asynchronous payment (a bank debit) is not paid yet: async_payment_succeeded follows.
      if (o.payment_status === 'unpaid') return { kind: 'ignore', why: 'checkout completed, payment still pending' };
      const sub = typeof o.subscription === 'string' ? o.subscription : str(obj(o.subscription).id);
      const customer = typeof o.customer === 'string' ? o.customer : str(obj(o.customer).id);
      return { kind: 'activate', ref: { id: str(o.client_reference_id) }, customerId: customer ?? null, processorSubscriptionId: sub ?? null };
    }
    case 'checkout.session.expired':
      // The customer never paid: the subscription (or add-on) it was for ends unpaid, if still pending.
      return { kind: 'abandon', ref: { id: str(o.client_reference_id) } };
    case 'customer.subscription.created':
    case 'customer.subscription.updated':
    case 'customer.subscription.resumed': {
      const status = str(o.status);
      if (status === 'active' || status === 'trialing') {
        const customer = typeof o.customer === 'string' ? o.customer : str(obj(o.customer).id);
        return { kind: 'activate', ref: metaRef(), customerId: customer ?? null, processorSubscriptionId: str(o.id) ?? null };
      }
      if (status === 'past_due') return { kind: 'past_due', ref: metaRef() };
      if (status === 'unpaid') return { kind: 'end', ref: metaRef(), state: 'unpaid' };
      if (status === 'canceled' || status === 'incomplete_expired') return { kind: 'end', ref: metaRef(), state: 'canceled' };
      return { kind: 'ignore', why: `subscription status ${status ?? 'unknown'}` };
    }
    case 'customer.subscription.deleted':
      return { kind: 'end', ref: metaRef(), state: 'canceled' };
    case 'invoice.payment_failed':
    case 'invoice.paid': {
      // The invoice's subscription: `parent.subscription_details` in current API versions, `subscription` before.
      const details = obj(obj(o.parent).subscription_details);
      const sub = str(details.subscription) ?? str(obj(details.subscription).id) ?? str(o.subscription);
      const ref = { id: str(obj(details.metadata).callplaneSubscriptionId), processorSubscriptionId: sub };
      if (!ref.id && !ref.processorSubscriptionId) return { kind: 'ignore', why: 'invoice of no subscription' };
      return event.type === 'invoice.payment_failed' ? { kind: 'past_due', ref } : { kind: 'recovered', ref };
    }
    default:
      return { kind: 'ignore', why: 'event type not handled' };
  }
}

/** Chargebee's events, as docs/billing.md lists them. */
function chargebeeEffect(eventType: string, content: Record<string, unknown>): Effect {
  const sub = obj(content.subscription);
  const invoice = obj(content.invoice);
  const ref: Ref = { id: str(sub.id) ?? str(invoice.subscription_id) };
  switch (eventType) {
    case 'subscription_created':
    case 'subscription_activated':
    case 'subscription_reactivated': {
      const status = str(sub.status);
      if (status !== 'active' && status !== 'in_trial' && status !== 'non_renewing') return { kind: 'ignore', why: `subscription status ${status ?? 'unknown'}` };
      return { kind: 'activate', ref, customerId: str(sub.customer_id) ?? str(obj(content.customer).id) ?? null, processorSubscriptionId: str(sub.id) ?? null };
    }
    case 'payment_failed':
      return ref.id ? { kind: 'past_due', ref } : { kind: 'ignore', why: 'payment of no subscription' };
    case 'payment_succeeded':
      return ref.id ? { kind: 'recovered', ref } : { kind: 'ignore', why: 'payment of no subscription' };
    case 'subscription_cancelled':
      // Chargebee cancels for non-payment when its dunning ends: cancel_reason not_paid.
      return { kind: 'end', ref, state: str(sub.cancel_reason) === 'not_paid' ? 'unpaid' : 'canceled' };
    case 'subscription_deleted':
      return { kind: 'end', ref, state: 'canceled' };
    default:
      return { kind: 'ignore', why: 'event type not handled' };
  }
}

export function processorSubscriptions(deps: ProcessorSubscriptionDeps) {
  const { db, systems } = deps;

  /** Puts `sub` in force for its organization: the one in force before is replaced, the plan's limits apply. */
  async function putInForce(tx: Executor, sub: SubscriptionRow, fields: { customerId: string | null; processorSubscriptionId: string | null }, now: number) {
    const current = await subscriptionRepo.current(tx, sub.org_id);
    let replaced: SubscriptionRow | undefined;
    if (current && current.id !== sub.id) {
      await subscriptionRepo.update(tx, current.id, { state: 'replaced', ended_at: now, updated_at: now });
      replaced = current;
    }
    const plan = JSON.parse(sub.plan) as Plan;
    await subscriptionRepo.update(tx, sub.id, {
      state: 'active', period_start: now, period_end: periodEnd(now, sub.term), started_at: now, updated_at: now,
      processor_customer_id: fields.customerId ?? sub.processor_customer_id,
      processor_subscription_id: fields.processorSubscriptionId ?? sub.processor_subscription_id,
    });
    await accountRepo.update(tx, sub.org_id, {
      product_plan_id: plan.productPlanId, product_plan_term: sub.term, subscribed: 1, billing_subscription_id: sub.id,
      canceled_at: null, updated_at: now,
    });
    await applyPlanLimits(tx, sub.org_id, plan, now);
    return replaced;
  }

  /** Ends `sub` (in force) with `state`: the organization falls back to `fallback` and its limits. */
  async function endInForce(tx: Executor, sub: SubscriptionRow, state: 'canceled' | 'unpaid', fallback: Plan, now: number, extra: { reason?: string | null; details?: string | null; by?: number | null } = {}): Promise<TaskLimits> {
    await subscriptionRepo.update(tx, sub.id, {
      state, ended_at: now, updated_at: now,
      ...(extra.reason !== undefined ? { cancel_reason: extra.reason } : {}),
      ...(extra.details !== undefined ? { cancel_details: extra.details } : {}),
      ...(extra.by !== undefined ? { canceled_by: extra.by } : {}),
    });
    await accountRepo.update(tx, sub.org_id, {
      product_plan_id: fallback.productPlanId, product_plan_term: null, subscribed: 0, canceled_at: now, updated_at: now,
    });
    return applyPlanLimits(tx, sub.org_id, fallback, now);
  }

  /** Cancels a replaced processor subscription at its processor (after the commit; a failure is logged, the replacement stands). */
  async function cancelReplaced(system: BillingSystem, replaced: SubscriptionRow | undefined): Promise<void> {
    if (!replaced?.processor_subscription_id || replaced.billing_account_id !== system.row.owner_id) return;
    try {
      await system.processor.cancel(replaced.processor_subscription_id, idempotencyKey('cancel', replaced.id));
    } catch (err) {
      deps.log?.warn({ subscriptionId: replaced.id, err: (err as Error).message }, 'replaced subscription could not be cancelled at its processor');
    }
  }

  /**
   * A processor's event about an add-on bought through its checkout: paid, it is in force from now
   * (recorded with the billing period in force; tasks an included amount held back are looked at
   * again); ended there, it ends here; an abandoned or expired checkout leaves it `abandoned`.
   */
  async function applyToAddon(tx: Executor, target: OrgAddonRow, effect: Exclude<Effect, { kind: 'ignore' }>, now: number): Promise<{ changed: boolean; outcome: string }> {
    await accountRepo.lock(tx, target.org_id);
    const row = (await addonRepo.find(tx, target.id))!;
    const state = row.removed_at !== null ? 'removed' : row.state;
    if (effect.kind === 'activate') {
      if (row.state !== 'pending') return { changed: false, outcome: `no change: add-on ${row.id} is ${state}` };
      const org = (await accountRepo.findById(tx, row.org_id))!;
      const current = await subscriptionRepo.current(tx, row.org_id);
      const period = periodOf('current', await periodRepo.lastTwo(tx, row.org_id, now), current, now, org.timezone || 'UTC');
      await addonRepo.update(tx, row.id, {
        state: 'active', added_at: now, period_start: period.start, period_end: period.end, subscription_id: current?.id ?? row.subscription_id,
        processor_subscription_id: effect.processorSubscriptionId ?? row.processor_subscription_id,
      });
      await releaseHeldTasks(tx, row.org_id, now);
      return { changed: true, outcome: `activated add-on ${row.id}` };
    }
    if (effect.kind === 'end' || effect.kind === 'abandon') {
      if (row.state === 'pending') {
        await addonRepo.update(tx, row.id, { state: 'abandoned', removed_at: now });
        return { changed: false, outcome: `checkout abandoned add-on ${row.id}` };
      }
      if (effect.kind === 'end' && row.state === 'active' && row.removed_at === null) {
        await addonRepo.update(tx, row.id, { removed_at: now });
        return { changed: false, outcome: `${effect.state} add-on ${row.id}` };
      }
    }
    // A failed or recovered renewal payment changes nothing here: the processor's dunning ends it if it gives up.
    return { changed: false, outcome: `no change: add-on ${row.id} is ${state}` };
  }

  /** Verifies the request as the processor signs it and reads its event; null when it fails (no hint why). */
  async function readEvent(system: BillingSystem, req: WebhookRequest): Promise<{ id: string; type: string; effect: Effect } | null> {
    if (req.type === 'stripe') {
      const secret = system.keys.webhookSigningKey;
      const header = req.headers['stripe-signature'];
      if (!secret || !header) return null;
      const StripeLib = await stripeLib();
      let event: Stripe.Event;
      try {
        event = StripeLib.webhooks.constructEvent(req.rawBody, header, secret);
      } catch {
        return null;
      }
      if (typeof event?.id !== 'string' || typeof event.type !== 'string' || !event.data) throw new Invalid('The webhook body is not a Stripe event (id, type and data are required)');
      return { id: event.id, type: event.type, effect: stripeEffect(event) };
    }
    const username = system.row.webhook_username;
    const password = system.keys.webhookPassword;
    if (!username || !password || !verifyBasicAuth(username, password, req.headers.authorization).ok) return null;
    let body: Record<string, unknown>;
    try {
      body = obj(JSON.parse(req.rawBody.toString('utf8')));
    } catch {
      throw new Invalid('The webhook body is not a JSON Chargebee event');
    }
    const id = str(body.id);
    const type = str(body.event_type);
    if (!id || !type) throw new Invalid('The webhook body is not a Chargebee event (id and event_type are required)');
    return { id, type, effect: chargebeeEffect(type, obj(body.content)) };
  }

  return {
    /**
     * Subscribes through the processor: a `pending` subscription (or the one a retry left pending
     * for the same plan and term: its checkout is asked again under the same idempotency key, so
     * the processor answers the same checkout) and the processor's checkout for it.
     */
    async subscribe(system: BillingSystem, input: ProcessorCheckoutInput) {
      const { org, plan, term, checkoutType } = input;
      if (!input.successUrl) throw new Invalid(`successUrl is required with a billing system (${system.row.type}): the checkout returns there`);
      const now = nowMs();
      const row = await db.transaction().execute(async (tx) => {
        await accountRepo.lock(tx, org.id);
        const current = await subscriptionRepo.current(tx, org.id);
        if (current && current.plan_id === plan.productPlanId && current.term === term) {
          throw new Conflict(`The organization is already subscribed to '${plan.productPlanId}' by the ${term}`);
        }
        const waiting = await subscriptionRepo.pending(tx, org.id, plan.productPlanId, term);
        if (waiting && waiting.processor === system.row.type && waiting.billing_account_id === system.row.owner_id) {
          await subscriptionRepo.update(tx, waiting.id, { checkout_type: checkoutType, success_url: input.successUrl, cancel_url: input.cancelUrl, updated_at: now });
          return (await subscriptionRepo.find(tx, waiting.id))!;
        }
        const id = newId('sub', now);
        await subscriptionRepo.insert(tx, {
          id, org_id: org.id, plan_id: plan.productPlanId, plan: JSON.stringify(plan), term, state: 'pending',
          period_start: now, period_end: periodEnd(now, term), started_at: now, ended_at: null,
          cancel_reason: null, cancel_details: null, canceled_by: null, checkout_type: checkoutType, success_url: input.successUrl, cancel_url: input.cancelUrl,
          processor: system.row.type, processor_customer_id: null, processor_subscription_id: null, checkout_session_id: null,
          billing_account_id: system.row.owner_id, created_at: now, updated_at: now,
        });
        return (await subscriptionRepo.find(tx, id))!;
      });
      // Outside the transaction: the processor may take seconds. Without an answer the row stays
      // pending and subscribing again reuses it and its idempotency key (the processor answers the
      // checkout it may have made); a refusal ends it, so the next attempt is a new checkout.
      let checkout: Checkout;
      try {
        checkout = await system.processor.checkout({
          subscriptionId: row.id, organizationId: org.id, plan: JSON.parse(row.plan) as Plan, term, checkoutType,
          successUrl: input.successUrl, cancelUrl: input.cancelUrl,
        });
      } catch (err) {
        if (processorAnswered(err)) {
          await db.transaction().execute((tx) => subscriptionRepo.update(tx, row.id, {
            state: 'canceled', ended_at: nowMs(), cancel_reason: 'checkout refused by the processor', cancel_details: (err as Error).message.slice(0, 500), updated_at: nowMs(),
          }));
        }
        throw err;
      }
      await db.transaction().execute((tx) => subscriptionRepo.update(tx, row.id, { checkout_session_id: checkout.sessionId, updated_at: nowMs() }));
      return { row: (await subscriptionRepo.find(db, row.id))!, checkout };
    },

    /**
     * Buys a priced add-on through the processor: a `pending` purchase (or the one a retry left
     * pending: its checkout is asked again under the same idempotency key) and the processor's
     * checkout for it. It adds nothing until the processor's webhook confirms the payment.
     */
    async checkoutAddon(system: BillingSystem, input: AddonCheckoutInput) {
      const { org, addon, term, checkoutType } = input;
      if (!input.successUrl) throw new Invalid(`successUrl is required with a billing system (${system.row.type}): the checkout returns there`);
      const now = nowMs();
      const row = await db.transaction().execute(async (tx) => {
        await accountRepo.lock(tx, org.id);
        if ((await addonRepo.inForce(tx, org.id)).some((a) => a.addon_id === addon.addonId)) {
          throw new Conflict(`The organization already has add-on '${addon.addonId}'; remove it first to buy it again`);
        }
        const waiting = await addonRepo.pending(tx, org.id, addon.addonId);
        if (waiting && waiting.processor === system.row.type && waiting.billing_account_id === system.row.owner_id && waiting.term === term) {
          await addonRepo.update(tx, waiting.id, { success_url: input.successUrl, cancel_url: input.cancelUrl });
          return (await addonRepo.find(tx, waiting.id))!;
        }
        if (waiting) await addonRepo.update(tx, waiting.id, { state: 'abandoned', removed_at: now });
        const id = newId('oad', now);
        await addonRepo.insert(tx, {
          id, org_id: org.id, addon_id: addon.addonId, addon: JSON.stringify(addon), subscription_id: input.subscriptionId,
          period_start: null, period_end: null, added_at: now, added_by: input.actorId, removed_at: null, removed_by: null,
          state: 'pending', processor: system.row.type, billing_account_id: system.row.owner_id, processor_subscription_id: null,
          checkout_session_id: null, term, success_url: input.successUrl, cancel_url: input.cancelUrl,
        });
        return (await addonRepo.find(tx, id))!;
      });
      let checkout: Checkout;
      try {
        checkout = await system.processor.checkout({
          subscriptionId: row.id, organizationId: org.id, plan: input.plan, addon: JSON.parse(row.addon) as Addon, term, checkoutType,
          successUrl: input.successUrl, cancelUrl: input.cancelUrl,
        });
      } catch (err) {
        // Refused: the next attempt is a new purchase (and idempotency key). No answer: it stays pending and is reused.
        if (processorAnswered(err)) await db.transaction().execute((tx) => addonRepo.update(tx, row.id, { state: 'abandoned', removed_at: nowMs() }));
        throw err;
      }
      await db.transaction().execute((tx) => addonRepo.update(tx, row.id, { checkout_session_id: checkout.sessionId }));
      return { row: (await addonRepo.find(db, row.id))!, checkout };
    },

    /** Cancels a paid add-on's subscription at its processor (idempotent; already gone counts as done). Nothing to do for one granted without a checkout. */
    async cancelAddonAtProcessor(row: OrgAddonRow): Promise<void> {
      if (!row.processor || !row.processor_subscription_id || row.billing_account_id === null) return;
      const system = await systems.ofAccount(row.billing_account_id);
      if (!system || system.row.type !== row.processor) {
        throw new Invalid(`The add-on is paid through a ${row.processor} billing system that is no longer configured; cancel it at the processor`);
      }
      await system.processor.cancel(row.processor_subscription_id, idempotencyKey('cancel', row.id));
    },

    /** Cancels a processor's subscription there (idempotent: the same key on a retry; already gone counts as done). */
    async cancelAtProcessor(sub: SubscriptionRow): Promise<void> {
      if (!sub.processor || !sub.processor_subscription_id || sub.billing_account_id === null) return;
      const system = await systems.ofAccount(sub.billing_account_id);
      if (!system || system.row.type !== sub.processor) {
        throw new Invalid(`The subscription runs on a ${sub.processor} billing system that is no longer configured; cancel it at the processor`);
      }
      await system.processor.cancel(sub.processor_subscription_id, idempotencyKey('cancel', sub.id));
    },

    endInForce,

    /**
     * A processor's webhook for a billing account: verified (401/403, the same answer whatever
     * failed), recorded once by the processor's event id, and applied in the same transaction.
     */
    async receive(req: WebhookRequest): Promise<{ duplicate: boolean; outcome: string }> {
      const refuse = () => (req.type === 'stripe' ? new Forbidden(REFUSED) : new Unauthorized(REFUSED));
      const system = await systems.ofAccount(req.accountId);
      if (!system || system.row.type !== req.type) throw refuse();
      const event = await readEvent(system, req);
      if (!event) throw refuse();
      const { effect } = event;
      const ownerId = system.row.owner_id;
      const now = nowMs();
      // The subscription and its organization (for the fallback plan) are read first; the
      // transaction locks the organization and reads the subscription again.
      const target = effect.kind === 'ignore' ? undefined : await subscriptionRepo.findOnProcessor(db, ownerId, req.type, effect.ref);
      // Not a subscription: an add-on bought through this processor's checkout (its own subscription there).
      const addonTarget = effect.kind === 'ignore' || target ? undefined : await addonRepo.findOnProcessor(db, ownerId, req.type, effect.ref);
      const org = target ? await accountRepo.findById(db, target.org_id) : undefined;
      const fallback = org && effect.kind === 'end' ? await fallbackPlan(db, org, deps.defaultPlanId) : undefined;
      let replaced: SubscriptionRow | undefined;
      let changed = false;
      const result = await db.transaction().execute(async (tx) => {
        const record = (outcome: string) => billingEventRepo.record(tx, { owner_id: ownerId, processor: req.type, event_id: event.id.slice(0, 255), type: event.type.slice(0, 100), outcome, received_at: now });
        if (effect.kind === 'ignore' || (!target && !addonTarget)) {
          const outcome = effect.kind === 'ignore' ? `ignored: ${effect.why}` : 'ignored: no subscription of this billing account';
          return { duplicate: !(await record(outcome)), outcome };
        }
        if (!(await record('received'))) return { duplicate: true, outcome: 'duplicate' };
        if (!target) {
          const done = await applyToAddon(tx, addonTarget!, effect, now);
          changed = done.changed;
          await billingEventRepo.setOutcome(tx, ownerId, req.type, event.id.slice(0, 255), done.outcome);
          return { duplicate: false, outcome: done.outcome };
        }
        await accountRepo.lock(tx, target.org_id);
        const sub = (await subscriptionRepo.find(tx, target.id))!;
        let outcome: string;
        if (effect.kind === 'activate') {
          if (sub.state === 'pending') {
            replaced = await putInForce(tx, sub, effect, now);
            changed = true;
            outcome = `activated ${sub.id}`;
          } else if (sub.state === 'past_due') {
            // The processor collected the payment it was retrying.
            await subscriptionRepo.update(tx, sub.id, { state: 'active', updated_at: now });
            outcome = `active again ${sub.id}`;
          } else outcome = `no change: ${sub.id} is ${sub.state}`;
        } else if (effect.kind === 'past_due') {
          if (sub.state === 'active') {
            await subscriptionRepo.update(tx, sub.id, { state: 'past_due', updated_at: now });
            outcome = `past_due ${sub.id}`;
          } else outcome = `no change: ${sub.id} is ${sub.state}`;
        } else if (effect.kind === 'recovered') {
          if (sub.state === 'past_due') {
            await subscriptionRepo.update(tx, sub.id, { state: 'active', updated_at: now });
            outcome = `active again ${sub.id}`;
          } else outcome = `no change: ${sub.id} is ${sub.state}`;
        } else if (effect.kind === 'abandon') {
          if (sub.state === 'pending') {
            await subscriptionRepo.update(tx, sub.id, { state: 'canceled', ended_at: now, cancel_reason: 'checkout expired', updated_at: now });
            outcome = `checkout abandoned ${sub.id}`;
          } else outcome = `no change: ${sub.id} is ${sub.state}`;
        } else if (sub.state === 'active' || sub.state === 'past_due') {
          await endInForce(tx, sub, effect.state, fallback!, now, effect.state === 'unpaid' ? { reason: 'unpaid' } : {});
          changed = true;
          outcome = `${effect.state} ${sub.id}`;
        } else if (sub.state === 'pending') {
          await subscriptionRepo.update(tx, sub.id, { state: 'canceled', ended_at: now, updated_at: now });
          outcome = `checkout abandoned ${sub.id}`;
        } else outcome = `no change: ${sub.id} is ${sub.state}`;
        await billingEventRepo.setOutcome(tx, ownerId, req.type, event.id.slice(0, 255), outcome);
        return { duplicate: false, outcome };
      });
      if (changed) deps.wakeTasks();
      await cancelReplaced(system, replaced);
      return result;
    },
  };
}

export type ProcessorSubscriptions = ReturnType<typeof processorSubscriptions>;
