// The payment processors a reseller's billing system may be (Stripe, Chargebee), through their
// official clients: checking an API key, starting a hosted checkout for a subscription, cancelling
// a subscription. The clients talk to the hosts the operator configured (CALLPLANE_STRIPE_API_URL,
// CALLPLANE_CHARGEBEE_API_URL; the real ones by default). Every failure becomes a ProcessorError
// saying which side failed: our caller's key or request (400) or the processor (502).
// The clients are loaded on first use (`stripeLib`, `chargebeeLib`): together they cost a process
// that bills nobody about 20 MB and 0.2 s at start.
import type ChargebeeClient from 'chargebee';
import type StripeClient from 'stripe';
import { BadGateway, Invalid } from '../../http/errors.ts';
import { priceOf, type Addon, type Plan } from './catalog.ts';

let stripeModule: Promise<typeof StripeClient> | undefined;
let chargebeeModule: Promise<typeof ChargebeeClient> | undefined;
/** Stripe's client class, loaded once, when first needed. */
export const stripeLib = (): Promise<typeof StripeClient> => (stripeModule ??= import('stripe').then((m) => m.default));
const chargebeeLib = (): Promise<typeof ChargebeeClient> => (chargebeeModule ??= import('chargebee').then((m) => m.default));

/** A client made on first use and kept. */
function once<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () => (made ??= make());
}

export const PROCESSORS = ['stripe', 'chargebee'] as const;
export type ProcessorType = (typeof PROCESSORS)[number];
export const PROCESSOR_NAME: Record<ProcessorType, string> = { stripe: 'Stripe', chargebee: 'Chargebee' };

/** How long one request to a processor may take. */
const TIMEOUT_MS = 15_000;

export interface ProcessorKeys {
  apiKey: string;
  publishableKey: string;
  /** Stripe: the webhook endpoint's signing secret (whsec_…). */
  webhookSigningKey?: string;
  /** Chargebee: the basic-auth password its webhooks carry. */
  webhookPassword?: string;
}

export interface CheckoutRequest {
  /** Our subscription id (or add-on purchase id): the checkout's reference, and the key of its idempotency key. */
  subscriptionId: string;
  organizationId: number;
  plan: Plan;
  /** Set when the checkout sells this add-on (a subscription of its own at the processor) rather than the plan. */
  addon?: Addon;
  term: 'month' | 'year';
  checkoutType: 'embedded' | 'redirect';
  successUrl: string;
  cancelUrl: string | null;
}

export interface Checkout {
  /** The processor's id of the checkout (Stripe Checkout Session, Chargebee hosted page). */
  sessionId: string;
  checkoutUrl: string | null;
  clientSecret: string | null;
}

export interface Processor {
  readonly type: ProcessorType;
  /** One cheap authenticated call: the key is accepted, or a 400 (refused) or 502 (unreachable). */
  verify(): Promise<void>;
  checkout(req: CheckoutRequest): Promise<Checkout>;
  /** Cancels at once; a subscription already cancelled (or gone) there counts as done. */
  cancel(processorSubscriptionId: string, idempotencyKey: string): Promise<void>;
}

/** The idempotency key of an outside call made for our subscription: a retry sends the same one. */
export const idempotencyKey = (what: 'checkout' | 'cancel', subscriptionId: string) => `callplane-${what}-${subscriptionId}`;

/** The number of minor units (cents) of an amount in the currency's major unit. */
export function minorUnits(amount: number, currency: string): number {
  let digits = 2;
  try { digits = new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2; } catch { /* 2 */ }
  return Math.round(amount * 10 ** digits);
}

/** Errors made from an answer of the processor (as opposed to no answer at all). */
const ANSWERED = new WeakSet<Error>();
/**
 * True when the processor answered the request with an error: what was asked was refused, so a
 * retry must not reuse the request's idempotency key (the processor would repeat the refusal).
 * Without an answer the request may have been done there, and a retry reuses the key.
 */
export const processorAnswered = (err: unknown): boolean => err instanceof Error && ANSWERED.has(err);

/**
 * Our answer to a processor's failure: its refusal of the key (401/403) is the caller's 400 naming
 * apiKey; another refusal (4xx) a 400 saying what was refused; no answer or a 5xx a 502. The
 * processor's own message is kept only for a 4xx (it explains the caller's mistake), cut short.
 */
function failure(type: ProcessorType, doing: string, status: number | undefined, code: string | undefined, message: string | undefined): Error {
  const err = describeFailure(type, doing, status, code, message);
  if (status !== undefined) ANSWERED.add(err);
  return err;
}

function describeFailure(type: ProcessorType, doing: string, status: number | undefined, code: string | undefined, message: string | undefined): Error {
  const name = PROCESSOR_NAME[type];
  if (status === 401 || status === 403) return new Invalid(`apiKey was refused by ${name} (HTTP ${status}) while ${doing}: check the key and its mode (test or live)`);
  if (status !== undefined && status >= 400 && status < 500) {
    const detail = (message ?? '').replace(/\s+/g, ' ').slice(0, 300);
    return new Invalid(`${name} refused ${doing} (HTTP ${status}${code ? ` ${code}` : ''})${detail ? `: ${detail}` : ''}`);
  }
  return new BadGateway(status === undefined
    ? `${name} could not be reached while ${doing}; try again later`
    : `${name} failed while ${doing} (HTTP ${status}); try again later`);
}

export function stripeProcessor(apiUrl: string, keys: ProcessorKeys): Processor {
  const url = new URL(apiUrl);
  const protocol = url.protocol === 'http:' ? 'http' : 'https';
  const client = once(async () => {
    const Stripe = await stripeLib();
    const stripe = new Stripe(keys.apiKey, {
      host: url.hostname, port: url.port || (protocol === 'http' ? 80 : 443), protocol,
      // One retry on a dropped connection or a 5xx; our idempotency keys make it safe.
      maxNetworkRetries: 1, timeout: TIMEOUT_MS, telemetry: false,
    });
    const fail = (doing: string, err: unknown): Error => {
      if (!(err instanceof Stripe.errors.StripeError)) return failure('stripe', doing, undefined, undefined, undefined);
      return failure('stripe', doing, err.statusCode, err.code, err.message);
    };
    return { Stripe, stripe, fail };
  });
  return {
    type: 'stripe',
    async verify() {
      const { stripe, fail } = await client();
      try { await stripe.balance.retrieve(); } catch (err) { throw fail('checking the apiKey (retrieving the balance)', err); }
    },
    async checkout(req) {
      const { stripe, fail } = await client();
      const { plan, addon } = req;
      const embedded = req.checkoutType === 'embedded';
      const reference: Record<string, string> = { callplaneSubscriptionId: req.subscriptionId, organizationId: String(req.organizationId), productPlanId: plan.productPlanId };
      if (addon) reference.addonId = addon.addonId;
      const sold = addon ?? plan;
      const productMeta: Record<string, string> = addon ? { addonId: addon.addonId } : { productPlanId: plan.productPlanId };
      try {
        const session = await stripe.checkout.sessions.create({
          mode: 'subscription',
          ui_mode: embedded ? 'embedded_page' : 'hosted_page',
          client_reference_id: req.subscriptionId,
          metadata: reference,
          subscription_data: { metadata: reference },
          line_items: [{
            quantity: 1,
            price_data: {
              currency: sold.currency.toLowerCase(),
              unit_amount: minorUnits(priceOf(sold, req.term), sold.currency),
              recurring: { interval: req.term },
              product_data: { name: sold.name, metadata: productMeta },
            },
          }],
          ...(embedded
            ? { return_url: req.successUrl }
            : { success_url: req.successUrl, ...(req.cancelUrl ? { cancel_url: req.cancelUrl } : {}) }),
        }, { idempotencyKey: idempotencyKey('checkout', req.subscriptionId) });
        if (embedded ? !session.client_secret : !session.url) throw new BadGateway('Stripe answered the checkout without its URL or client secret');
        return { sessionId: session.id, checkoutUrl: embedded ? null : session.url, clientSecret: embedded ? session.client_secret : null };
      } catch (err) {
        if (err instanceof BadGateway) throw err;
        throw fail('starting the checkout', err);
      }
    },
    async cancel(id, key) {
      const { Stripe, stripe, fail } = await client();
      try {
        await stripe.subscriptions.cancel(id, {}, { idempotencyKey: key });
      } catch (err) {
        // Already cancelled there (or deleted): what we wanted.
        if (err instanceof Stripe.errors.StripeError && (err.code === 'resource_missing' || err.statusCode === 404)) return;
        throw fail('cancelling the subscription', err);
      }
    },
  };
}

interface ChargebeeFailure { http_status_code?: number; api_error_code?: string; message?: string }

/** The item price a plan and term are sold under at Chargebee (docs/billing.md, "Chargebee"). */
export function chargebeeItemPriceId(plan: Plan, term: 'month' | 'year', addon?: Addon): string {
  const id = addon ? addon.addonId : plan.productPlanId;
  return `${id}-${(addon ?? plan).currency.toUpperCase()}-${term === 'month' ? 'Monthly' : 'Yearly'}`;
}

export function chargebeeProcessor(apiUrl: string, site: string, keys: ProcessorKeys): Processor {
  const url = new URL(apiUrl.replaceAll('{site}', site));
  const protocol = url.protocol === 'http:' ? 'http' : 'https';
  const prefix = url.pathname.replace(/\/+$/, '');
  const client = once(async () => new (await chargebeeLib())({
    // The client's host is `site + hostSuffix`: the whole host name is given as the site, so the
    // configured URL is used as it is (the real one is <site>.chargebee.com).
    site: url.hostname, hostSuffix: '', apiKey: keys.apiKey, protocol,
    port: Number(url.port || (protocol === 'http' ? 80 : 443)),
    // A path prefix of the configured URL (a proxy's) before the API's own path.
    apiPath: `${prefix}/api/v2` as '/api/v2',
    timeout: TIMEOUT_MS, sdkTelemetryEnabled: false,
  }));
  const fail = (doing: string, err: unknown): Error => {
    const e = (err ?? {}) as ChargebeeFailure;
    return failure('chargebee', doing, typeof e.http_status_code === 'number' ? e.http_status_code : undefined, e.api_error_code, e.message);
  };
  return {
    type: 'chargebee',
    async verify() {
      const chargebee = await client();
      try { await chargebee.itemPrice.list({ limit: 1 }); } catch (err) { throw fail('checking the apiKey (listing item prices)', err); }
    },
    async checkout(req) {
      const chargebee = await client();
      const itemPriceId = chargebeeItemPriceId(req.plan, req.term, req.addon);
      try {
        const { hosted_page: page } = await chargebee.hostedPage.checkoutNewForItems({
          // The Chargebee subscription takes our id: its webhooks name it.
          subscription: { id: req.subscriptionId },
          subscription_items: [{ item_price_id: itemPriceId, quantity: 1 }],
          redirect_url: req.successUrl,
          ...(req.cancelUrl ? { cancel_url: req.cancelUrl } : {}),
          pass_thru_content: req.subscriptionId,
        }, { 'chargebee-idempotency-key': idempotencyKey('checkout', req.subscriptionId) });
        if (!page.url || !page.id) throw new BadGateway('Chargebee answered the checkout without its hosted page URL');
        return { sessionId: page.id, checkoutUrl: page.url, clientSecret: null };
      } catch (err) {
        if (err instanceof BadGateway) throw err;
        const e = (err ?? {}) as ChargebeeFailure;
        if (e.http_status_code === 404 || e.api_error_code === 'resource_not_found') {
          const what = req.addon ? `add-on '${req.addon.addonId}'` : `plan '${req.plan.productPlanId}'`;
          const missing = new Invalid(`Chargebee has no item price '${itemPriceId}' for ${what} by the ${req.term}: create it at Chargebee (docs/billing.md, "Chargebee")`);
          ANSWERED.add(missing);
          throw missing;
        }
        throw fail('starting the checkout', err);
      }
    },
    async cancel(id, key) {
      const chargebee = await client();
      try {
        await chargebee.subscription.cancelForItems(id, { end_of_term: false }, { 'chargebee-idempotency-key': key });
      } catch (err) {
        const e = (err ?? {}) as ChargebeeFailure;
        // Gone, or already cancelled there: what we wanted.
        if (e.http_status_code === 404 || e.api_error_code === 'resource_not_found' || e.api_error_code === 'invalid_state_for_request') return;
        throw fail('cancelling the subscription', err);
      }
    },
  };
}

/** The processor of a stored billing system. */
export function openProcessor(config: { stripeApiUrl: string; chargebeeApiUrl: string }, type: ProcessorType, site: string | null, keys: ProcessorKeys): Processor {
  return type === 'stripe' ? stripeProcessor(config.stripeApiUrl, keys) : chargebeeProcessor(config.chargebeeApiUrl, site ?? '', keys);
}
