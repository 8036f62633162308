// The Billing operations of the contract for the catalog and subscriptions (no payment processor
// yet), and the catalog editing extensions. docs/billing.md and docs/api.md describe them.
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Obj, Security, Nullable } from '../../http/schemas.ts';
import { MAX_CONCURRENCY, MAX_DAILY_CAP } from '../limits/task-limits.ts';
import type { BillingService } from './service.ts';

const tags = ['Billing'];
/**
 * A number or null in a request body: `nullable` rather than a union, which type coercion would
 * read as its first member (null sent for "not sold" would become 0).
 */
const NullableNumber = (opts: Parameters<typeof Type.Number>[0]) => Type.Unsafe<number | null>({ ...Type.Number(opts), nullable: true });
const NullableInteger = (opts: Parameters<typeof Type.Integer>[0]) => Type.Unsafe<number | null>({ ...Type.Integer(opts), nullable: true });
const TargetQuery = Type.Object({
  targetAccountId: Type.Optional(AccountId('The account to act on (an ancestor acting for it); default: the token\'s own')),
});
const Money = (description: string) => Type.Number({ minimum: 0, maximum: 1e9, description });
const Amount = (description: string) => NullableInteger({ minimum: 0, maximum: 1e15, description });
const Rate = (description: string) => NullableNumber({ minimum: 0, maximum: 1e6, description });
const Cap = (description: string) => Type.Optional(NullableInteger({ minimum: 0, maximum: MAX_DAILY_CAP, description }));

const IncludedProps = {
  callMinutes: Amount('Call minutes included per month; null = unlimited'),
  texts: Amount('Texts included per month; null = unlimited'),
  tasks: Amount('Tasks included per month; null = unlimited'),
  conversations: Amount('Conversations included per month; null = unlimited'),
  modelTokens: Amount('Model tokens included per month; null = unlimited'),
};
const OverageProps = {
  callMinute: Rate('Price per call minute past the included ones; null = not sold'),
  text: Rate('Price per text past the included ones; null = not sold'),
  task: Rate('Price per task past the included ones; null = not sold'),
  conversation: Rate('Price per conversation past the included ones; null = not sold'),
  modelTokensPer1k: Rate('Price per 1,000 model tokens past the included ones; null = not sold'),
};
const LimitsProps = {
  concurrencyPerRun: Type.Integer({ minimum: 1, maximum: MAX_CONCURRENCY, description: 'Tasks of the organization running at once' }),
  daily: Type.Optional(Type.Object({
    calls: Cap('Calls a day; null = no cap'), texts: Cap('Texts a day; null = no cap'), tasks: Cap('Tasks a day; null = no cap'),
  })),
};
const Source = Type.String({ description: 'The catalog layer it comes from: default, partner or reseller' });

const Plan = Obj({
  productPlanId: Type.String({ description: 'pplan-…' }),
  name: Type.String(), description: Type.String(), currency: Type.String({ description: 'ISO 4217' }),
  monthlyPrice: Type.Number(), yearlyPrice: Type.Number(),
  included: Obj(IncludedProps), overage: Obj(OverageProps),
  limits: Obj({ concurrencyPerRun: Type.Integer(), daily: Obj({ calls: Nullable(Type.Integer()), texts: Nullable(Type.Integer()), tasks: Nullable(Type.Integer()) }) },
    'The task limits an organization on this plan gets (GET /api/v2/tasks/limits)'),
  available: Type.Boolean({ description: 'Whether organizations may subscribe to it' }),
  source: Source,
}, 'A product plan');
const AddsProps = {
  callMinutes: Type.Integer({ minimum: 0, maximum: 1e15 }), texts: Type.Integer({ minimum: 0, maximum: 1e15 }),
  tasks: Type.Integer({ minimum: 0, maximum: 1e15 }), conversations: Type.Integer({ minimum: 0, maximum: 1e15 }),
  modelTokens: Type.Integer({ minimum: 0, maximum: 1e15 }),
};
const Addon = Obj({
  addonId: Type.String({ description: 'addon-…' }), name: Type.String(), description: Type.String(), currency: Type.String(),
  monthlyPrice: Type.Number(), yearlyPrice: Type.Number(), adds: Obj(AddsProps, 'Amounts added to the plan\'s included ones each month'),
  plans: Type.Array(Type.String(), { description: 'Plans it may be added to; empty = every plan' }),
  available: Type.Boolean(), source: Source,
}, 'An add-on');
const Subscription = Obj({
  subscriptionId: Type.String({ description: 'sub_ + a time-sortable id' }), productPlanId: Type.String(), planName: Type.String(),
  term: Type.String({ description: 'month or year' }),
  state: Type.String({ description: 'active, replaced (by a later subscription) or canceled' }),
  price: Type.Number({ description: 'The price of one term, as subscribed' }), currency: Type.String(),
  periodStart: Type.Number({ description: 'Unix seconds' }), periodEnd: Type.Number({ description: 'Unix seconds' }),
  startedAt: Type.Number(), endedAt: Nullable(Type.Number()),
  cancelReason: Nullable(Type.String()), cancelDetails: Nullable(Type.String()), checkoutType: Nullable(Type.String()),
  billingSystem: Nullable(Type.String({ description: 'null: recorded directly, no billing system configured' })),
}, 'A subscription; times are unix seconds');
const Limits = Obj({}, 'The organization\'s task limits now in force (as GET /api/v2/tasks/limits)');
const OrgAddon = Obj({
  addonId: Type.String(), name: Type.String(), currency: Type.String(), monthlyPrice: Type.Number(), yearlyPrice: Type.Number(),
  adds: Obj(AddsProps, 'Amounts added to the plan\'s included ones each month'),
  plans: Type.Array(Type.String(), { description: 'Plans it fits; empty = every plan' }),
  appliesToPlan: Type.Boolean({ description: 'Whether it fits the organization\'s current plan (an add-on bought for an earlier plan adds nothing)' }),
  subscriptionId: Nullable(Type.String({ description: 'The subscription in force when it was bought' })),
  periodStart: Nullable(Type.Number({ description: 'The billing period it was bought in (unix seconds); null for a calendar month' })),
  periodEnd: Nullable(Type.Number()),
  addedAt: Type.Number(), removedAt: Nullable(Type.Number()),
  state: Type.String({ description: 'active (counts while removedAt is null); pending (bought through a payment processor\'s checkout, adds nothing until the processor confirms the payment); abandoned (the checkout ended unpaid, it never counted)' }),
}, 'An add-on the organization bought (callplane extension)');
const AddonPurchaseBody = Type.Object({
  successUrl: Type.Optional(Type.String({ description: 'With a billing system (a priced add-on the organization buys): where the checkout returns when payment succeeded; required then' })),
  cancelUrl: Type.Optional(Type.String({ description: 'With a billing system: where the checkout returns when payment is canceled' })),
  checkoutType: Type.Optional(Type.String({ description: 'embedded or redirect (with a billing system); default redirect' })),
});

const PlanBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200 }),
  description: Type.Optional(Type.String({ maxLength: 2000 })),
  currency: Type.Optional(Type.String({ description: 'ISO 4217 code; default USD' })),
  monthlyPrice: Money('Price of a month'), yearlyPrice: Money('Price of a year'),
  included: Type.Object(IncludedProps),
  overage: Type.Object(OverageProps),
  limits: Type.Object(LimitsProps),
  available: Type.Optional(Type.Boolean({ description: 'Default true; false withdraws it (organizations on it keep it)' })),
});
const AddonBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200 }),
  description: Type.Optional(Type.String({ maxLength: 2000 })),
  currency: Type.Optional(Type.String()),
  monthlyPrice: Money('Price of a month'), yearlyPrice: Money('Price of a year'),
  adds: Type.Object(AddsProps),
  plans: Type.Optional(Type.Array(Type.String({ maxLength: 80 }), { maxItems: 200 })),
  available: Type.Optional(Type.Boolean()),
});
const PlanParam = Type.Object({ productPlanId: Type.String({ minLength: 1, maxLength: 80, description: 'Product Plan Id' }) });
const AddonParam = Type.Object({ addonId: Type.String({ minLength: 1, maxLength: 80, description: 'Add-on id' }) });

export async function billingRoutes(app: App, deps: { billing: BillingService }) {
  const { billing } = deps;

  app.get('/api/v2/product/productCatalog', {
    schema: {
      operationId: 'productCatalog', tags, security: Security, summary: 'View Product Catalog',
      description: 'Reseller or partner: its catalog (the default catalog, under the partner\'s items, under the reseller\'s), withdrawn plans included.',
      querystring: TargetQuery,
      response: { 200: Envelope({ accountId: Type.Integer(), plans: Type.Array(Plan), addons: Type.Array(Addon) }), ...errors(403, 404) },
    },
  }, async (req) => billing.productCatalog(req.scope, req.query.targetAccountId));

  app.get('/api/v2/product/productPlan/:productPlanId', {
    schema: {
      operationId: 'productPlan', tags, security: Security, summary: 'Fetch a product plan details',
      params: PlanParam, querystring: TargetQuery,
      response: { 200: Envelope({ plan: Plan }), ...errors(403, 404) },
    },
  }, async (req) => billing.productPlan(req.scope, req.query.targetAccountId, req.params.productPlanId));

  app.put('/api/v2/product/catalog/plan/:productPlanId', {
    schema: {
      operationId: 'putProductPlan', tags, security: Security, summary: 'Create or replace a plan of your catalog (callplane extension)',
      description: 'Reseller or partner (a partner may name one of its resellers with targetAccountId). An id the catalog inherits is overridden for this account and below. Organizations already on the plan keep their limits until their plan next changes.',
      params: PlanParam, querystring: TargetQuery, body: PlanBody,
      response: { 200: Envelope({ created: Type.Boolean(), plan: Plan }), ...errors(400, 403, 404) },
    },
  }, async (req) => billing.putPlan(req.scope, req.query.targetAccountId, req.params.productPlanId, req.body));

  app.delete('/api/v2/product/catalog/plan/:productPlanId', {
    schema: {
      operationId: 'deleteProductPlan', tags, security: Security, summary: 'Delete a plan of your catalog (callplane extension)',
      description: 'Only the account\'s own items; an inherited plan is withdrawn with available: false instead. 409 while an account still names a plan that would then no longer exist.',
      params: PlanParam, querystring: TargetQuery,
      response: { 200: Envelope({}), ...errors(403, 404, 409) },
    },
  }, async (req) => billing.deletePlan(req.scope, req.query.targetAccountId, req.params.productPlanId));

  app.get('/api/v2/product/allAvailablePlans', {
    schema: {
      operationId: 'allAvailablePlans', tags, security: Security, summary: 'View Available Product Plans',
      description: 'The plans of the account\'s catalog that may be subscribed to (for an organization: its reseller\'s catalog).',
      querystring: TargetQuery,
      response: { 200: Envelope({ plans: Type.Array(Plan) }), ...errors(403, 404) },
    },
  }, async (req) => billing.allAvailablePlans(req.scope, req.query.targetAccountId));

  app.get('/api/v2/product/offeredPlan', {
    schema: {
      operationId: 'offeredPlan', tags, security: Security, summary: 'View Offered Product Plan',
      description: 'The plan the organization\'s reseller offers it (its offeredProductPlanId); null when none is offered.',
      querystring: TargetQuery,
      response: { 200: Envelope({ productPlanId: Nullable(Type.String()), plan: Nullable(Plan) }), ...errors(403, 404) },
    },
  }, async (req) => billing.offeredPlan(req.scope, req.query.targetAccountId));

  app.get('/api/v2/product/currentPlan', {
    schema: {
      operationId: 'currentPlan', tags, security: Security, summary: 'View Current Product Plan',
      querystring: TargetQuery,
      response: {
        200: Envelope({
          organizationId: Type.Integer(), productPlanId: Nullable(Type.String()), productPlanTerm: Nullable(Type.String()),
          subscribed: Type.Boolean(), plan: Nullable(Plan), subscription: Nullable(Subscription), limits: Limits,
          addons: Type.Array(OrgAddon, { description: 'The add-ons in force (callplane extension)' }),
        }),
        ...errors(403, 404),
      },
    },
  }, async (req) => billing.currentPlan(req.scope, req.query.targetAccountId));

  app.get('/api/v2/addon/available', {
    schema: {
      operationId: 'availableAddons', tags, security: Security, summary: 'View Available Add Ons',
      description: 'The add-ons of the organization\'s catalog for its current plan.',
      querystring: TargetQuery,
      response: { 200: Envelope({ productPlanId: Nullable(Type.String()), addons: Type.Array(Addon) }), ...errors(403, 404) },
    },
  }, async (req) => billing.availableAddons(req.scope, req.query.targetAccountId));

  app.post('/api/v2/addon/:addonId', {
    schema: {
      operationId: 'addAddon', tags, security: Security, summary: 'Add an add-on to the organization (callplane extension)',
      description: 'The organization, or an ancestor with targetAccountId. An available add-on of the organization\'s catalog that fits its current plan (GET /api/v2/addon/available), one of each at a time (409 otherwise). Recorded with the subscription and billing period in force; its adds raise the included amounts at once (usage costs and the tasks held back for them). When the organization buys a priced add-on itself and its reseller bills through a payment processor, it is bought through the processor\'s checkout like a plan: the answer is the add-on in state pending with checkoutUrl (redirect) or clientSecret (embedded), and it takes effect only when the processor\'s webhook confirms the payment. An ancestor\'s grant (targetAccountId) is in force at once.',
      params: AddonParam, querystring: TargetQuery, body: Type.Optional(AddonPurchaseBody),
      response: {
        200: Envelope({
          addon: OrgAddon,
          checkoutUrl: Nullable(Type.String({ description: 'Redirect checkout: the processor\'s hosted page; null when granted at once' })),
          clientSecret: Nullable(Type.String({ description: 'Embedded checkout: the processor\'s client secret; null otherwise' })),
        }),
        ...errors(400, 403, 404, 409),
      },
    },
    // The body is optional (a grant needs none): an absent one is an empty one.
    preValidation: async (req) => { req.body ??= {}; },
  }, async (req) => billing.addAddon(req.scope, req.query.targetAccountId, req.params.addonId, req.body ?? {}));

  app.delete('/api/v2/addon/:addonId', {
    schema: {
      operationId: 'removeAddon', tags, security: Security, summary: 'Remove an add-on from the organization (callplane extension)',
      description: 'Ends the add-on in force; ranges it was in force in keep counting it. One paid through a payment processor is cancelled there first (a refusal there is a 400/502 and it stays in force).',
      params: AddonParam, querystring: TargetQuery,
      response: { 200: Envelope({ addon: OrgAddon }), ...errors(400, 403, 404, 502) },
    },
  }, async (req) => billing.removeAddon(req.scope, req.query.targetAccountId, req.params.addonId));

  app.put('/api/v2/product/catalog/addon/:addonId', {
    schema: {
      operationId: 'putAddon', tags, security: Security, summary: 'Create or replace an add-on of your catalog (callplane extension)',
      params: AddonParam, querystring: TargetQuery, body: AddonBody,
      response: { 200: Envelope({ created: Type.Boolean(), addon: Addon }), ...errors(400, 403, 404) },
    },
  }, async (req) => billing.putAddon(req.scope, req.query.targetAccountId, req.params.addonId, req.body));

  app.delete('/api/v2/product/catalog/addon/:addonId', {
    schema: {
      operationId: 'deleteAddon', tags, security: Security, summary: 'Delete an add-on of your catalog (callplane extension)',
      params: AddonParam, querystring: TargetQuery,
      response: { 200: Envelope({}), ...errors(403, 404) },
    },
  }, async (req) => billing.deleteAddon(req.scope, req.query.targetAccountId, req.params.addonId));

  app.post('/api/v2/product/subscribe', {
    schema: {
      operationId: 'subscribe', tags, security: Security, summary: 'Subscribe to product plan',
      description: 'Without a billing system the subscription is recorded and in force at once, and its plan\'s limits apply at once; checkoutUrl and clientSecret are null. A change of plan or term replaces the subscription in force.',
      querystring: TargetQuery,
      body: Type.Object({
        productPlanId: Type.String({ minLength: 1, maxLength: 80, description: 'Product Plan Id to enable subscription' }),
        term: Type.String({ description: 'month or year' }),
        cancelUrl: Type.Optional(Type.String({ description: 'With a billing system: where the checkout returns when payment is canceled' })),
        successUrl: Type.Optional(Type.String({ description: 'With a billing system: where the checkout returns when payment succeeded' })),
        checkoutType: Type.Optional(Type.String({ description: 'embedded or redirect (with a billing system)' })),
      }),
      response: {
        200: Envelope({
          subscription: Subscription,
          checkoutUrl: Nullable(Type.String({ description: 'With a billing system and checkoutType redirect: the processor\'s checkout page' })),
          clientSecret: Nullable(Type.String({ description: 'With a billing system and checkoutType embedded: the embedded checkout\'s client secret' })),
          limits: Limits,
        }),
        ...errors(400, 403, 404, 409),
      },
    },
  }, async (req) => billing.subscribe(req.scope, req.query.targetAccountId, req.body));

  app.delete('/api/v2/product/cancel', {
    schema: {
      operationId: 'cancelSubscription', tags, security: Security, summary: 'Cancel product subscription',
      description: 'Ends the subscription in force at once; the organization falls back to its reseller\'s sell plan (else the service\'s default plan) and that plan\'s limits.',
      querystring: TargetQuery,
      // The body is optional (the contract says so): an absent one is an empty one.
      body: Type.Optional(Type.Object({
        reason: Type.Optional(Type.String({ maxLength: 500, description: 'Cancellation reason' })),
        details: Type.Optional(Type.String({ maxLength: 5000, description: 'Additional details' })),
      })),
      response: {
        200: Envelope({ subscription: Subscription, productPlanId: Type.String({ description: 'The plan the organization is on now' }), limits: Limits }),
        ...errors(400, 403, 404),
      },
    },
    preValidation: async (req) => { req.body ??= {}; },
  }, async (req) => billing.cancel(req.scope, req.query.targetAccountId, req.body ?? {}));
}
