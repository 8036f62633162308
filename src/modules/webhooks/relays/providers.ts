// The relay types and what each provider signs: verification of an ingress request (Twilio
// X-Twilio-Signature, Stripe Stripe-Signature, Chargebee basic auth, nothing for generic), the
// provider's own id of an event (so a provider's retry is not forwarded twice), and the request
// headers we keep with a stored event.
import crypto from 'node:crypto';
import { verifyTwilioSignature } from '../../../providers/twilio/signature.ts';

export const RELAY_TYPE_NAMES = ['twilioSMS', 'twilioVoice', 'chargebee', 'stripe', 'generic'] as const;
export type RelayType = (typeof RELAY_TYPE_NAMES)[number];

/** How an ingress request is authenticated. */
export type Scheme = 'twilio-signature' | 'stripe-signature' | 'basic-auth' | 'none';

export interface RelayTypeInfo {
  name: RelayType;
  description: string;
  scheme: Scheme;
}

export const RELAY_TYPES: readonly RelayTypeInfo[] = [
  {
    name: 'twilioSMS', scheme: 'twilio-signature',
    description: 'Proxy inbound Twilio SMS webhooks (incoming messages and message status callbacks) to your URL. '
      + 'Requests are verified with X-Twilio-Signature using the auth token of your organization\'s twilio numbering provider.',
  },
  {
    name: 'twilioVoice', scheme: 'twilio-signature',
    description: 'Proxy Twilio voice webhooks (call status callbacks and other call events) to your URL. '
      + 'Requests are verified with X-Twilio-Signature using the auth token of your organization\'s twilio numbering provider.',
  },
  {
    name: 'chargebee', scheme: 'basic-auth',
    description: 'Proxy Chargebee event webhooks to your URL. Requests must carry the HTTP basic-auth username and password configured on the relay.',
  },
  {
    name: 'stripe', scheme: 'stripe-signature',
    description: 'Proxy Stripe event webhooks to your URL. Requests are verified with the Stripe-Signature header and the endpoint\'s signing secret (stripeSigningSecret).',
  },
  {
    name: 'generic', scheme: 'none',
    description: 'Proxy any HTTP POST to your URL. Unsigned: the unguessable ingress URL is the only credential.',
  },
];

export function relayType(name: string): RelayTypeInfo | undefined {
  return RELAY_TYPES.find((t) => t.name === name);
}

export const isTwilio = (type: string): boolean => type === 'twilioSMS' || type === 'twilioVoice';

/** What the relay holds for the provider (sealed in webhook_relays.provider_secret). */
export interface ProviderSecret {
  /** Stripe: the endpoint's signing secret (whsec_…). */
  stripeSigningSecret?: string;
  /** Chargebee: the basic-auth credentials the provider sends. */
  username?: string;
  password?: string;
}

/** Stripe's default tolerance between the signed timestamp and now. */
export const STRIPE_TOLERANCE_SECONDS = 300;

export type Verdict = { ok: true } | { ok: false; status: 401 | 403; message: string; challenge?: string };

const refuse = (status: 401 | 403, message: string, challenge?: string): Verdict =>
  ({ ok: false, status, message, ...(challenge ? { challenge } : {}) });

/** Compares two strings in time independent of where they differ (and of their lengths). */
export function safeEqual(a: string, b: string): boolean {
  const ha = crypto.createHash('sha256').update(a, 'utf8').digest();
  const hb = crypto.createHash('sha256').update(b, 'utf8').digest();
  return crypto.timingSafeEqual(ha, hb);
}

/**
 * Stripe-Signature: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">` (several v1 may
 * be present while a secret is rolled; any one matching is enough; v0 is ignored, as Stripe does).
 */
export function verifyStripe(secret: string, header: string | undefined, rawBody: Buffer, nowSec: number): Verdict {
  if (!header) return refuse(403, 'Stripe-Signature header is missing');
  let t: number | undefined;
  const v1: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't' && /^\d{1,12}$/.test(value)) t = Number(value);
    else if (key === 'v1' && /^[0-9a-f]{64}$/i.test(value)) v1.push(value.toLowerCase());
  }
  if (t === undefined || v1.length === 0) return refuse(403, 'Stripe-Signature header has no timestamp or no v1 signature');
  const expected = crypto.createHmac('sha256', secret)
    .update(Buffer.concat([Buffer.from(`${t}.`, 'utf8'), rawBody])).digest();
  const match = v1.some((sig) => crypto.timingSafeEqual(Buffer.from(sig, 'hex'), expected));
  if (!match) return refuse(403, 'Stripe-Signature does not match this request');
  if (Math.abs(nowSec - t) > STRIPE_TOLERANCE_SECONDS) {
    return refuse(403, `Stripe-Signature timestamp is more than ${STRIPE_TOLERANCE_SECONDS} seconds away from now`);
  }
  return { ok: true };
}

const BASIC_CHALLENGE = 'Basic realm="callplane relay", charset="UTF-8"';

/** Authorization: Basic base64(username:password), both compared in constant time. */
export function verifyBasicAuth(username: string, password: string, header: string | undefined): Verdict {
  const m = header ? /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header) : null;
  if (!m) return refuse(401, 'Authorization header with HTTP basic credentials is required', BASIC_CHALLENGE);
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const user = colon < 0 ? decoded : decoded.slice(0, colon);
  const pass = colon < 0 ? '' : decoded.slice(colon + 1);
  // Both comparisons always run, so the time taken does not tell which one failed.
  const okUser = safeEqual(user, username);
  const okPass = safeEqual(pass, password);
  return okUser && okPass ? { ok: true } : refuse(401, 'basic-auth credentials do not match this relay', BASIC_CHALLENGE);
}

/**
 * X-Twilio-Signature over the URL Twilio called and the body: a form is signed through its
 * parameters; a JSON body through the URL, which then carries `bodySHA256` (Twilio's
 * validateRequestWithBody).
 */
export function verifyTwilio(authToken: string, url: string, rawBody: Buffer, header: string | undefined): Verdict {
  if (!header) return refuse(403, 'X-Twilio-Signature header is missing');
  return verifyTwilioSignature(authToken, url, rawBody.toString('utf8'), header)
    ? { ok: true }
    : refuse(403, 'X-Twilio-Signature does not match this request');
}

/** A dedupe key fits an index comfortably; anything longer is kept as its hash. */
const MAX_KEY = 200;
const fit = (key: string): string =>
  key.length <= MAX_KEY ? key : `sha256:${crypto.createHash('sha256').update(key, 'utf8').digest('hex')}`;

/** The body's top-level fields, from a form or a JSON object; anything else has none. */
export function bodyFields(contentType: string | undefined, rawBody: Buffer): Record<string, unknown> {
  const ct = (contentType ?? '').toLowerCase();
  const text = rawBody.toString('utf8');
  if (ct.includes('json') || (!ct && /^\s*\{/.test(text))) {
    try {
      const parsed: unknown = JSON.parse(text);
      return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed as Record<string, unknown> : {};
    } catch {
      return {};
    }
  }
  if (ct.startsWith('application/x-www-form-urlencoded')) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of new URLSearchParams(text)) if (!(k in out)) out[k] = v;
    return out;
  }
  return {};
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : undefined);

/**
 * The provider's id of this event: a retry of the same event carries the same one, so a second
 * request with it is answered 200 and not stored or forwarded again. Null when there is none.
 * - Twilio: the I-Twilio-Idempotency-Token header (Twilio's own key, the same on every retry of
 *   one webhook); without it, the resource sid (MessageSid/SmsSid/CallSid) and its status
 *   (MessageStatus/SmsStatus/CallStatus) plus a digest of the body: several webhooks of one call
 *   share sid and status (a gather, say) and must not be merged; a retry repeats the body.
 * - Stripe and Chargebee: the event's `id`.
 * - generic: an Idempotency-Key or webhook-id header.
 */
export function dedupeKey(type: string, headers: Record<string, string | undefined>, fields: Record<string, unknown>, rawBody: Buffer): string | null {
  if (isTwilio(type)) {
    const token = headers['i-twilio-idempotency-token'];
    if (token) return fit(`twilio-token:${token}`);
    const sid = str(fields.MessageSid) ?? str(fields.SmsSid) ?? str(fields.CallSid);
    if (!sid) return null;
    const status = str(fields.MessageStatus) ?? str(fields.SmsStatus) ?? str(fields.CallStatus) ?? '';
    const digest = crypto.createHash('sha256').update(rawBody).digest('hex').slice(0, 32);
    return fit(`${sid}:${status}:${digest}`);
  }
  if (type === 'stripe' || type === 'chargebee') {
    const id = str(fields.id);
    return id ? fit(id) : null;
  }
  const key = headers['idempotency-key'] ?? headers['webhook-id'];
  return key ? fit(key) : null;
}

/**
 * Request headers stored with an event (for the record and for support): what describes the body
 * and what the provider signed or keyed it with. Never Authorization: Chargebee's credentials.
 */
export const KEPT_HEADERS = [
  'content-type', 'user-agent',
  'x-twilio-signature', 'i-twilio-idempotency-token', 'i-twilio-request-id',
  'stripe-signature',
  'idempotency-key', 'webhook-id', 'webhook-timestamp', 'webhook-signature',
] as const;

export function keptHeaders(headers: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of KEPT_HEADERS) {
    const v = headers[name];
    if (v !== undefined) out[name] = v.slice(0, 1024);
  }
  return out;
}
