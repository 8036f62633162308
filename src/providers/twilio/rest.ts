// One request to Twilio's REST API (2010-04-01) with an account's own credentials, as the carrier
// (carrier.ts) and the numbers (numbers.ts) send them: a hard timeout from connect to last byte, no
// redirects followed, at most MAX_RESPONSE_BYTES read back, and Twilio's answers turned into the
// carrier error types, saying whether a failed request may still have been applied.
import { request, type Dispatcher } from 'undici';
import { PermanentCarrierError, TransientCarrierError } from '../carrier.ts';

export const TWILIO = 'twilio';
export const DEFAULT_TWILIO_API_BASE_URL = 'https://api.twilio.com';

export interface TwilioOptions {
  /** Hard limit for one request, connect to last byte. Default 10 s. */
  timeoutMs?: number;
  dispatcher?: Dispatcher;
}

export interface TwilioCredentials {
  accountSid: string;
  authToken: string;
  /** Twilio's API by default; a different base (a regional edge, a test server) from configuration. */
  apiBaseUrl?: string;
}

export interface TwilioJson {
  sid?: unknown;
  status?: unknown;
  code?: unknown;
  message?: unknown;
  [key: string]: unknown;
}

/** Twilio's answers are a few kilobytes; anything far larger is not Twilio. */
const MAX_RESPONSE_BYTES = 256 * 1024;
/** Failures where the request cannot have reached Twilio, so a retry cannot duplicate anything. */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/** Retry-After as seconds or an HTTP date → milliseconds from now (capped at a day). */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (!raw) return undefined;
  const ms = /^\s*\d+\s*$/.test(raw) ? Number(raw) * 1000 : Date.parse(raw) - now;
  return Number.isFinite(ms) ? Math.min(Math.max(ms, 0), 86_400_000) : undefined;
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new DOMException('The operation was aborted', 'AbortError');
}

/** A Node or undici error's `code` ('ECONNREFUSED', 'UND_ERR_…'), when it has a string one. */
function errorCode(err: unknown): string | undefined {
  const code = err && typeof err === 'object' ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' && code ? code : undefined;
}

/** An account's REST API: its URLs and one request at a time. */
export class TwilioRest {
  readonly #accountSid: string;
  readonly #base: string;
  readonly #auth: string;
  readonly timeoutMs: number;
  readonly #dispatcher?: Dispatcher;

  constructor(credentials: TwilioCredentials, opts: TwilioOptions = {}) {
    if (!credentials.accountSid || !credentials.authToken) {
      throw new PermanentCarrierError('twilio: accountSid and authToken are required in the provider settings', TWILIO);
    }
    const base = (credentials.apiBaseUrl || DEFAULT_TWILIO_API_BASE_URL).replace(/\/+$/, '');
    let parsed: URL;
    try {
      parsed = new URL(base);
    } catch {
      throw new PermanentCarrierError('twilio: apiBaseUrl is not a valid URL', TWILIO);
    }
    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new PermanentCarrierError('twilio: apiBaseUrl must be http(s)', TWILIO);
    this.#accountSid = credentials.accountSid;
    this.#base = base;
    this.#auth = 'Basic ' + Buffer.from(`${credentials.accountSid}:${credentials.authToken}`).toString('base64');
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.#dispatcher = opts.dispatcher;
  }

  /** `<base>/2010-04-01/Accounts/<sid>/<rest>[?query]`. */
  accountUrl(rest: string, query?: URLSearchParams): string {
    const q = query && [...query.keys()].length ? `?${query.toString()}` : '';
    return `${this.#base}/2010-04-01/Accounts/${encodeURIComponent(this.#accountSid)}/${rest}${q}`;
  }

  /**
   * One request; its JSON answer (undefined for a DELETE's 204). A request that failed after it
   * may have reached Twilio is a TransientCarrierError with `maybeApplied` (never for a GET).
   */
  async send(method: 'GET' | 'POST' | 'DELETE', url: string, opts: { form?: URLSearchParams; idempotencyKey?: string; signal?: AbortSignal } = {}): Promise<TwilioJson | undefined> {
    const { form, idempotencyKey, signal } = opts;
    if (signal?.aborted) throw abortReason(signal);
    const writes = method !== 'GET';
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const headers: Record<string, string> = { authorization: this.#auth, accept: 'application/json', 'user-agent': 'callplane' };
    if (form) headers['content-type'] = 'application/x-www-form-urlencoded';
    if (idempotencyKey) headers['i-twilio-idempotency-token'] = idempotencyKey;
    let status: number;
    let text: string;
    let retryAfter: string | string[] | undefined;
    try {
      // undici's request() follows no redirects (there is no redirect interceptor here).
      const res = await request(url, {
        method, headers, body: form?.toString(), signal: combined,
        headersTimeout: this.timeoutMs, bodyTimeout: this.timeoutMs,
        ...(this.#dispatcher ? { dispatcher: this.#dispatcher } : {}),
      });
      status = res.statusCode;
      retryAfter = res.headers['retry-after'];
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > MAX_RESPONSE_BYTES) {
          res.body.destroy();
          throw new TransientCarrierError(`twilio: answer larger than ${MAX_RESPONSE_BYTES} bytes`, TWILIO, { httpStatus: status, maybeApplied: writes });
        }
        chunks.push(chunk);
      }
      text = Buffer.concat(chunks).toString('utf8');
    } catch (err) {
      if (err instanceof TransientCarrierError) throw err;
      if (signal?.aborted) throw abortReason(signal);
      if (timeout.aborted) {
        throw new TransientCarrierError(`twilio: no answer within ${this.timeoutMs} ms`, TWILIO, { code: 'timeout', maybeApplied: writes, cause: err });
      }
      const code = errorCode(err) ?? errorCode((err as { cause?: unknown }).cause) ?? '';
      throw new TransientCarrierError(`twilio: request failed (${code || (err as Error).message})`, TWILIO, {
        maybeApplied: writes && !NOT_SENT_CODES.has(code), cause: err,
      });
    }
    let json: TwilioJson | undefined;
    try {
      const parsed: unknown = text ? JSON.parse(text) : undefined;
      json = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed as TwilioJson : undefined;
    } catch {
      json = undefined;
    }
    if (status === 204 && method === 'DELETE') return undefined;
    if (status >= 200 && status < 300) {
      if (!json) throw new TransientCarrierError(`twilio: ${status} without a JSON body`, TWILIO, { httpStatus: status, maybeApplied: writes });
      return json;
    }
    const code = json && (typeof json.code === 'number' || typeof json.code === 'string') ? String(json.code) : undefined;
    const detail = json && typeof json.message === 'string' ? json.message.slice(0, 500) : `HTTP ${status}`;
    const message = `twilio ${status}${code ? ` (error ${code})` : ''}: ${detail}`;
    if (status === 429 || status >= 500) {
      throw new TransientCarrierError(message, TWILIO, { httpStatus: status, code, retryAfterMs: parseRetryAfter(retryAfter), maybeApplied: status !== 429 && writes });
    }
    if (status >= 300 && status < 400) {
      throw new PermanentCarrierError(`twilio ${status}: apiBaseUrl answered with a redirect, which is not followed`, TWILIO, { httpStatus: status });
    }
    throw new PermanentCarrierError(message, TWILIO, { httpStatus: status, code });
  }

  /** A POST whose answer must be JSON. */
  async post(url: string, form: URLSearchParams, idempotencyKey: string | undefined, signal: AbortSignal | undefined): Promise<TwilioJson> {
    return (await this.send('POST', url, { form, idempotencyKey, signal }))!;
  }
}
