// One delivery attempt to a customer URL and what it came to, the Standard Webhooks signature we
// add, and the retry schedule (DESIGN §7). Nothing here throws on a failed delivery: every failure
// is an AttemptResult with an error that says what happened.
import crypto from 'node:crypto';
import { StringDecoder } from 'node:string_decoder';
import { request, type Dispatcher } from 'undici';

export { FORBIDDEN_HEADER_NAMES, checkCustomHeaders, headerMap } from './headers.ts';

export const DEFAULT_TIMEOUT_MS = 15_000;
export const MAX_TIMEOUT_MS = 30_000;

export interface DeliveryRequest {
  url: string;
  body: Buffer;
  /** Sent as Content-Type; none when undefined. */
  contentType?: string;
  /** Custom and signature headers; names are matched case-insensitively. */
  headers: Record<string, string>;
  timeoutMs: number;
  successStatusCodes: number[];
}

export interface AttemptResult {
  /** The receiver answered with one of the success status codes. */
  ok: boolean;
  statusCode?: number;
  /** What went wrong, when not ok: the transport error, the timeout, a refusal or the status. */
  error?: string;
  durationMs: number;
  /** The start of the response body (UTF-8, from at most RESPONSE_EXCERPT_BYTES bytes). */
  responseExcerpt?: string;
  /** The receiver's Retry-After, in ms from now. */
  retryAfterMs?: number;
  /** 410 Gone: the receiver says the endpoint no longer exists. */
  gone?: boolean;
}

/** Response bytes read before the connection is dropped; a reply that fits lets it be reused. */
export const RESPONSE_READ_LIMIT = 64 * 1024;
export const RESPONSE_EXCERPT_BYTES = 1024;
const DEFAULT_USER_AGENT = 'callplane-webhooks';

/**
 * POSTs the body to the URL through the (guarded) dispatcher. Redirects are not followed (a 3xx
 * is a failure naming the Location unless listed as a success), the whole attempt is aborted at
 * timeoutMs, and at most RESPONSE_READ_LIMIT bytes of the response are read. The status code
 * decides the outcome; a body still arriving at the deadline is cut short without changing it.
 */
export async function deliverOnce(req: DeliveryRequest, dispatcher: Dispatcher, abort?: AbortSignal): Promise<AttemptResult> {
  const started = performance.now();
  const durationMs = () => Math.round(performance.now() - started);
  const deadline = AbortSignal.timeout(req.timeoutMs);
  // The caller's signal (a worker stopping, a lease lost) ends the attempt early, as the deadline does.
  const signal = abort ? AbortSignal.any([deadline, abort]) : deadline;
  const headers: Record<string, string> = { 'user-agent': DEFAULT_USER_AGENT };
  for (const [name, value] of Object.entries(req.headers)) headers[name.toLowerCase()] = value;
  if (req.contentType !== undefined) headers['content-type'] = req.contentType;

  let res: Dispatcher.ResponseData;
  try {
    res = await request(req.url, {
      method: 'POST',
      dispatcher,
      body: req.body,
      headers,
      signal,
      headersTimeout: req.timeoutMs,
      bodyTimeout: req.timeoutMs,
    });
  } catch (err) {
    return { ok: false, error: describeError(err, req, deadline, abort), durationMs: durationMs() };
  }

  const statusCode = res.statusCode;
  const excerpt = await readExcerpt(res.body);
  const result: AttemptResult = { ok: req.successStatusCodes.includes(statusCode), statusCode, durationMs: durationMs() };
  if (excerpt !== '') result.responseExcerpt = excerpt;
  const retryAfter = parseRetryAfter(first(res.headers['retry-after']));
  if (retryAfter !== undefined) result.retryAfterMs = retryAfter;
  if (statusCode === 410) result.gone = true;
  if (!result.ok) {
    if (statusCode >= 300 && statusCode < 400) {
      const location = first(res.headers.location);
      result.error = location
        ? `redirect not followed: the receiver answered ${statusCode} to ${clip(location, 500)}`
        : `redirect not followed: the receiver answered ${statusCode} (no Location)`;
    } else {
      result.error = `the receiver answered ${statusCode}, not a success status (${describeCodes(req.successStatusCodes)})`;
    }
  }
  return result;
}

/** Reads up to RESPONSE_READ_LIMIT bytes, then drops the rest; keeps the first bytes as text. */
async function readExcerpt(body: Dispatcher.ResponseData['body']): Promise<string> {
  const kept: Buffer[] = [];
  let keptBytes = 0;
  let read = 0;
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      if (keptBytes < RESPONSE_EXCERPT_BYTES) {
        const part = chunk.subarray(0, RESPONSE_EXCERPT_BYTES - keptBytes);
        kept.push(part);
        keptBytes += part.length;
      }
      read += chunk.length;
      if (read >= RESPONSE_READ_LIMIT) break; // leaving the loop destroys the body (and its socket)
    }
  } catch {
    // The deadline or the receiver cut the body short: keep what arrived.
  } finally {
    if (!body.destroyed && !body.readableEnded) body.destroy();
  }
  // A string decoder holds back a character cut in half at the limit instead of mangling it.
  return new StringDecoder('utf8').write(Buffer.concat(kept));
}

function first(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

function clip(s: string, max: number): string {
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

/** 200–299 style ranges for the error text: "expected 202" or "expected 200-299". */
function describeCodes(codes: number[]): string {
  const sorted = [...new Set(codes)].sort((a, b) => a - b);
  if (sorted.length === 0) return 'no success status is configured';
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; i++) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    parts.push(j > i ? `${sorted[i]}-${sorted[j]}` : String(sorted[i]));
    i = j;
  }
  return `expected ${parts.join(', ')}`;
}

/** Retry-After as ms from now: delay-seconds or an HTTP date; undefined when absent or malformed. */
export function parseRetryAfter(value: string | undefined, now: number = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  if (!/[a-z]/i.test(v)) return undefined; // a bare number that is not delay-seconds (negative, fraction)
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

interface NetError extends Error {
  code?: string;
  address?: string;
  port?: number;
  hostname?: string;
  errors?: unknown[];
  cause?: unknown;
}

/** One line saying why no response came: a refusal, the timeout, a refused connection, DNS, TLS. */
function describeError(err: unknown, req: DeliveryRequest, deadline: AbortSignal, abort?: AbortSignal): string {
  const chain: NetError[] = [];
  let e: unknown = err;
  while (e instanceof Error && chain.length < 5) {
    chain.push(e as NetError);
    const agg = (e as NetError).errors;
    e = Array.isArray(agg) && agg.length > 0 ? agg[0] : (e as NetError).cause;
  }
  const refused = chain.find((c) => c.code === 'ERR_TARGET_REFUSED');
  if (refused) return `refused: ${refused.message}`;
  const code = chain.map((c) => c.code).find((c) => c !== undefined && c !== 'UND_ERR_ABORTED');
  if (abort?.aborted && !deadline.aborted) return 'attempt abandoned before a response (the worker stopped or lost its lease)';
  if (deadline.aborted || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return `no response within ${req.timeoutMs} ms`;
  }
  // The host as the URL names it, never the address it resolved to: the text is the tenant's to read.
  const where = hostOf(req.url);
  switch (code) {
    case 'ECONNREFUSED': return `connection refused by ${where}`;
    case 'ECONNRESET':
    case 'UND_ERR_SOCKET':
    case 'EPIPE': return `connection to ${where} closed before a response`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_NODATA': return `could not resolve ${hostOf(req.url)}`;
    case 'UND_ERR_CONNECT_TIMEOUT': return `could not connect to ${hostOf(req.url)} in time`;
    case 'EHOSTUNREACH':
    case 'ENETUNREACH': return `${where} is unreachable`;
    case 'ERR_INVALID_URL':
    case 'UND_ERR_INVALID_ARG': return `request not sent: ${chain[0]?.message ?? 'invalid'}`;
    default: break;
  }
  const top = chain.find((c) => c.code !== undefined) ?? chain[0];
  if (top?.code?.startsWith('ERR_TLS') || /CERT|SSL|TLS/.test(top?.code ?? '')) return `TLS with ${hostOf(req.url)} failed: ${top.message}`;
  if (!top) return String(err);
  return top.code ? `${top.code}: ${top.message}` : top.message;
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'the target';
  }
}

// ---- Standard Webhooks signature ----

/** A new signing secret as Standard Webhooks writes them: whsec_ + base64 of 24 random bytes. */
export function newSigningSecret(): string {
  return `whsec_${crypto.randomBytes(24).toString('base64')}`;
}

/**
 * The Standard Webhooks headers for one attempt: HMAC-SHA256 over `${id}.${timestamp}.${body}`
 * (the body's raw bytes) with the secret's key, verifiable with the `standardwebhooks` package.
 */
export function signatureHeaders(secret: string, id: string, timestampSec: number, body: Buffer): {
  'webhook-id': string; 'webhook-timestamp': string; 'webhook-signature': string;
} {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
  const ts = String(Math.floor(timestampSec));
  const mac = crypto.createHmac('sha256', key).update(`${id}.${ts}.`, 'utf8').update(body).digest('base64');
  return { 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': `v1,${mac}` };
}

// ---- Retry schedule ----

/**
 * When attempt n+1 runs after attempt n (index n-1 is attempt n's delay): immediately, then 5 s,
 * 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (Svix's schedule), so 8 attempts in all over about 28 h.
 */
export const RETRY_SCHEDULE_MS: readonly number[] = Object.freeze([
  0, 5_000, 5 * 60_000, 30 * 60_000, 2 * 3_600_000, 5 * 3_600_000, 10 * 3_600_000, 10 * 3_600_000,
]);
export const MAX_DELIVERY_ATTEMPTS = RETRY_SCHEDULE_MS.length;
/** Jitter either side of a scheduled delay, so failures that happened together spread out. */
export const RETRY_JITTER = 0.2;
/** The longest a receiver's Retry-After can push the next attempt back. */
export const RETRY_AFTER_CAP_MS = 10 * 3_600_000;

/**
 * Delay before the next attempt once attempt `attemptJustFailed` (1-based) failed, or null when
 * that was the last one. The scheduled delay gets ±20% jitter; a Retry-After longer than that is
 * honoured up to RETRY_AFTER_CAP_MS (never shortens the schedule).
 */
export function retryDelayMs(attemptJustFailed: number, retryAfterMs?: number, random: () => number = Math.random): number | null {
  if (!Number.isInteger(attemptJustFailed) || attemptJustFailed < 1) {
    throw new RangeError(`attemptJustFailed must be a positive integer (got ${attemptJustFailed})`);
  }
  if (attemptJustFailed >= RETRY_SCHEDULE_MS.length) return null;
  const scheduled = RETRY_SCHEDULE_MS[attemptJustFailed];
  const jittered = Math.round(scheduled * (1 - RETRY_JITTER + 2 * RETRY_JITTER * random()));
  if (retryAfterMs === undefined || !Number.isFinite(retryAfterMs) || retryAfterMs <= jittered) return jittered;
  return Math.min(retryAfterMs, Math.max(RETRY_AFTER_CAP_MS, jittered));
}
