// Twilio's monthly price of a local number in a country, from its Pricing API
// (pricing.twilio.com/v1/PhoneNumbers/Countries/{IsoCountry}: `phone_number_prices` per
// `number_type`, in `price_unit`), fetched through the same TwilioRest as the rest (a hard timeout,
// no redirects, a bounded answer). Prices change rarely: one answer per account and country is
// kept for an hour (a failure or a country without a local price, for a minute), at most
// MAX_ENTRIES of them, and concurrent searches share one request. A price that cannot be had is
// null: it never fails a search.
import type { TwilioRest } from './rest.ts';

export const DEFAULT_TWILIO_PRICING_BASE_URL = 'https://pricing.twilio.com';
/** How long a country's price is kept. */
export const PRICE_TTL_MS = 3_600_000;
/** How long a failure (or no local price) is kept before asking again. */
export const PRICE_MISS_TTL_MS = 60_000;
/** Longest a search waits for the price (it runs beside the search; the REST timeout applies too). */
export const PRICE_TIMEOUT_MS = 3000;
const MAX_ENTRIES = 1000;

export interface MonthlyPrice { amount: string; currency: string }

interface Entry { price: MonthlyPrice | null; until: number; pending?: Promise<MonthlyPrice | null> }
const cache = new Map<string, Entry>();

/**
 * Where the Pricing API is: Twilio's own pricing host when the provider uses Twilio (no apiBaseUrl,
 * or one of twilio.com's hosts), else the apiBaseUrl itself (a proxy or a test double serving both).
 */
export function pricingBaseOf(apiBaseUrl: string | undefined): string {
  if (!apiBaseUrl) return DEFAULT_TWILIO_PRICING_BASE_URL;
  let host: string;
  try { host = new URL(apiBaseUrl).hostname.toLowerCase(); } catch { return DEFAULT_TWILIO_PRICING_BASE_URL; }
  return host === 'twilio.com' || host.endsWith('.twilio.com') ? DEFAULT_TWILIO_PRICING_BASE_URL : apiBaseUrl.replace(/\/+$/, '');
}

/** The `local` price of Twilio's answer, or null when it has none or is not what we expect. */
export function localPriceOf(json: Record<string, unknown> | undefined): MonthlyPrice | null {
  const list = Array.isArray(json?.phone_number_prices) ? json.phone_number_prices as Array<Record<string, unknown>> : [];
  const local = list.find((p) => p && typeof p === 'object' && String(p.number_type).toLowerCase() === 'local');
  const raw = local?.current_price ?? local?.base_price;
  const amount = typeof raw === 'number' ? String(raw) : raw;
  const currency = typeof json?.price_unit === 'string' ? json.price_unit.toUpperCase() : '';
  if (typeof amount !== 'string' || !/^\d{1,6}(\.\d{1,6})?$/.test(amount) || !/^[A-Z]{3}$/.test(currency)) return null;
  return { amount, currency };
}

/** The monthly price of a local number in `country` for this account (cached; null when unknown). */
export function localNumberPrice(rest: TwilioRest, key: { accountSid: string; base: string }, country: string, now: () => number = Date.now): Promise<MonthlyPrice | null> {
  const k = `${key.base}|${key.accountSid}|${country}`;
  const hit = cache.get(k);
  if (hit?.pending) return hit.pending;
  if (hit && hit.until > now()) return Promise.resolve(hit.price);
  const keep = (price: MonthlyPrice | null) => {
    cache.delete(k);
    if (cache.size >= MAX_ENTRIES) cache.delete(cache.keys().next().value!);
    cache.set(k, { price, until: now() + (price ? PRICE_TTL_MS : PRICE_MISS_TTL_MS) });
    return price;
  };
  const url = `${key.base}/v1/PhoneNumbers/Countries/${encodeURIComponent(country)}`;
  const pending = rest.send('GET', url, { signal: AbortSignal.timeout(Math.min(PRICE_TIMEOUT_MS, rest.timeoutMs)) })
    .then((json) => keep(localPriceOf(json)), () => keep(null));
  cache.set(k, { price: null, until: 0, pending });
  return pending;
}
