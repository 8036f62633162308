// The Twilio carrier: Calls and Messages through Twilio's REST API (2010-04-01) with the
// organization's own account, and the TwiML that speaks a task's greeting. The rest of Twilio's
// protocol is beside it: signature checks (signature.ts), form parameters (form.ts), status
// callbacks (status-callback.ts) and the Media Stream transport (media-stream.ts).
import { request, type Dispatcher } from 'undici';
import {
  PermanentCarrierError, TransientCarrierError, callOutcome, textOutcome, withTaskId,
  type CallStart, type Carrier, type PlaceCallRequest, type SendTextRequest, type TextResult,
} from '../carrier.ts';

export const TWILIO = 'twilio';
export const DEFAULT_TWILIO_API_BASE_URL = 'https://api.twilio.com';
/** Twilio refuses inline TwiML (the `Twiml` parameter) longer than this. */
export const MAX_INLINE_TWIML = 4000;
/** The call progress events we ask for; `completed` carries the final status. */
export const CALL_STATUS_EVENTS = ['initiated', 'ringing', 'answered', 'completed'] as const;
/** TwiML with no instructions: no reply to a message (it goes out later, if at all), nothing more on a call. */
export const EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response/>';
/** Seconds of listening before the greeting when the callee is to speak first. */
export const DEFAULT_WAIT_TO_GREET_SECONDS = 2;

/** The organization's twilio provider settings (src/modules/numbering/catalog.ts), secrets opened. */
export interface TwilioSettings {
  accountSid: string;
  authToken: string;
  phoneNumber?: string;
  messagingServiceSid?: string;
  /** Twilio's API by default; a different base (a regional edge, a test server) from configuration. */
  apiBaseUrl?: string;
}

export interface TwilioOptions {
  /** Hard limit for one request, connect to last byte. Default 10 s. */
  timeoutMs?: number;
  dispatcher?: Dispatcher;
}

/** Twilio's answers are a few kilobytes; anything far larger is not Twilio. */
const MAX_RESPONSE_BYTES = 256 * 1024;
/** Failures where the request cannot have reached Twilio, so a retry cannot duplicate anything. */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

interface TwilioJson {
  sid?: unknown;
  status?: unknown;
  code?: unknown;
  message?: unknown;
  [key: string]: unknown;
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new DOMException('The operation was aborted', 'AbortError');
}

/** Retry-After as seconds or an HTTP date → milliseconds from now (capped at a day). */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (!raw) return undefined;
  const ms = /^\s*\d+\s*$/.test(raw) ? Number(raw) * 1000 : Date.parse(raw) - now;
  return Number.isFinite(ms) ? Math.min(Math.max(ms, 0), 86_400_000) : undefined;
}

/** A Node or undici error's `code` ('ECONNREFUSED', 'UND_ERR_…'), when it has a string one. */
function errorCode(err: unknown): string | undefined {
  const code = err && typeof err === 'object' ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' && code ? code : undefined;
}

export class TwilioCarrier implements Carrier {
  readonly name = TWILIO;
  readonly simulated = false;
  readonly #settings: TwilioSettings;
  readonly #base: string;
  readonly #auth: string;
  readonly #timeoutMs: number;
  readonly #dispatcher?: Dispatcher;

  constructor(settings: TwilioSettings, opts: TwilioOptions = {}) {
    if (!settings.accountSid || !settings.authToken) {
      throw new PermanentCarrierError('twilio: accountSid and authToken are required in the provider settings', TWILIO);
    }
    const base = (settings.apiBaseUrl || DEFAULT_TWILIO_API_BASE_URL).replace(/\/+$/, '');
    let parsed: URL;
    try {
      parsed = new URL(base);
    } catch {
      throw new PermanentCarrierError('twilio: apiBaseUrl is not a valid URL', TWILIO);
    }
    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new PermanentCarrierError('twilio: apiBaseUrl must be http(s)', TWILIO);
    this.#settings = settings;
    this.#base = base;
    this.#auth = 'Basic ' + Buffer.from(`${settings.accountSid}:${settings.authToken}`).toString('base64');
    this.#timeoutMs = opts.timeoutMs ?? 10_000;
    this.#dispatcher = opts.dispatcher;
  }

  #accountPath(rest: string): string {
    return `${this.#base}/2010-04-01/Accounts/${encodeURIComponent(this.#settings.accountSid)}/${rest}`;
  }

  /** One POST with a hard timeout, no redirects, and Twilio's answers turned into our error types. */
  async #post(url: string, form: URLSearchParams, idempotencyKey: string | undefined, signal: AbortSignal | undefined): Promise<TwilioJson> {
    if (signal?.aborted) throw abortReason(signal);
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const headers: Record<string, string> = {
      authorization: this.#auth,
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
      'user-agent': 'callplane',
    };
    if (idempotencyKey) headers['i-twilio-idempotency-token'] = idempotencyKey;
    let status: number;
    let text: string;
    let retryAfter: string | string[] | undefined;
    try {
      // undici's request() follows no redirects (there is no redirect interceptor here).
      const res = await request(url, {
        method: 'POST', headers, body: form.toString(), signal: combined,
        headersTimeout: this.#timeoutMs, bodyTimeout: this.#timeoutMs,
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
          throw new TransientCarrierError(`twilio: answer larger than ${MAX_RESPONSE_BYTES} bytes`, TWILIO, { httpStatus: status, maybeApplied: true });
        }
        chunks.push(chunk);
      }
      text = Buffer.concat(chunks).toString('utf8');
    } catch (err) {
      if (err instanceof TransientCarrierError) throw err;
      if (signal?.aborted) throw abortReason(signal);
      if (timeout.aborted) {
        throw new TransientCarrierError(`twilio: no answer within ${this.#timeoutMs} ms`, TWILIO, { maybeApplied: true, cause: err });
      }
      const code = errorCode(err) ?? errorCode((err as { cause?: unknown }).cause) ?? '';
      throw new TransientCarrierError(`twilio: request failed (${code || (err as Error).message})`, TWILIO, {
        maybeApplied: !NOT_SENT_CODES.has(code), cause: err,
      });
    }
    let json: TwilioJson | undefined;
    try {
      const parsed: unknown = text ? JSON.parse(text) : undefined;
      json = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed as TwilioJson : undefined;
    } catch {
      json = undefined;
    }
    if (status >= 200 && status < 300) {
      if (!json) throw new TransientCarrierError(`twilio: ${status} without a JSON body`, TWILIO, { httpStatus: status, maybeApplied: true });
      return json;
    }
    const code = json && (typeof json.code === 'number' || typeof json.code === 'string') ? String(json.code) : undefined;
    const detail = json && typeof json.message === 'string' ? json.message.slice(0, 500) : `HTTP ${status}`;
    const message = `twilio ${status}${code ? ` (error ${code})` : ''}: ${detail}`;
    if (status === 429) {
      throw new TransientCarrierError(message, TWILIO, { httpStatus: status, code, retryAfterMs: parseRetryAfter(retryAfter), maybeApplied: false });
    }
    if (status >= 500) {
      throw new TransientCarrierError(message, TWILIO, { httpStatus: status, code, retryAfterMs: parseRetryAfter(retryAfter), maybeApplied: true });
    }
    if (status >= 300 && status < 400) {
      throw new PermanentCarrierError(`twilio ${status}: apiBaseUrl answered with a redirect, which is not followed`, TWILIO, { httpStatus: status });
    }
    throw new PermanentCarrierError(message, TWILIO, { httpStatus: status, code });
  }

  async placeCall(req: PlaceCallRequest, signal: AbortSignal): Promise<CallStart> {
    const from = req.from || this.#settings.phoneNumber;
    if (!from) throw new PermanentCarrierError('twilio: no caller id: set phoneNumber in the twilio provider settings', TWILIO);
    const form = new URLSearchParams({ To: req.to, From: from });
    if (req.twimlUrl) {
      form.set('Url', req.twimlUrl);
    } else {
      const twiml = greetingTwiml({ greeting: req.greeting, waitToGreet: req.waitToGreet });
      if (twiml.length > MAX_INLINE_TWIML) {
        throw new PermanentCarrierError(`twilio: the greeting makes ${twiml.length} characters of TwiML, more than the ${MAX_INLINE_TWIML} Twilio takes inline; serve it from a TwiML URL`, TWILIO);
      }
      form.set('Twiml', twiml);
    }
    if (req.statusCallbackUrl) {
      form.set('StatusCallback', withTaskId(req.statusCallbackUrl, req.taskId));
      form.set('StatusCallbackMethod', 'POST');
      for (const event of CALL_STATUS_EVENTS) form.append('StatusCallbackEvent', event);
    }
    const json = await this.#post(this.#accountPath('Calls.json'), form, req.taskId, signal);
    const { sid, status } = this.#sidAndStatus(json, 'CA');
    const base = { provider: TWILIO, providerRef: sid, from, to: req.to };
    // Without a status callback nothing will tell us how the call ends: the task ends when Twilio
    // has accepted the call, and says so (tracked: false).
    const final = callOutcome(status, base)
      ?? (req.statusCallbackUrl ? null : { state: 'finished' as const, result: { ...base, status, outcome: 'queued' as const, tracked: false } });
    return { provider: TWILIO, simulated: false, providerRef: sid, status, final };
  }

  async sendText(req: SendTextRequest, signal: AbortSignal): Promise<TextResult> {
    const form = new URLSearchParams({ To: req.to, Body: req.body });
    // A request's own sender wins; otherwise the Messaging Service (it picks the sender), otherwise
    // the configured number.
    if (req.from) form.set('From', req.from);
    else if (this.#settings.messagingServiceSid) form.set('MessagingServiceSid', this.#settings.messagingServiceSid);
    else if (this.#settings.phoneNumber) form.set('From', this.#settings.phoneNumber);
    else throw new PermanentCarrierError('twilio: no sender: set phoneNumber or messagingServiceSid in the twilio provider settings', TWILIO);
    if (req.statusCallbackUrl) form.set('StatusCallback', withTaskId(req.statusCallbackUrl, req.taskId));
    const json = await this.#post(this.#accountPath('Messages.json'), form, req.taskId, signal);
    const { sid, status } = this.#sidAndStatus(json, 'SM', 'MM');
    const base = { provider: TWILIO, providerRef: sid, to: req.to, ...(typeof json.from === 'string' && json.from ? { from: json.from } : {}) };
    const final = textOutcome(status, base)
      ?? (req.statusCallbackUrl ? null : { state: 'finished' as const, result: { ...base, status, outcome: 'queued' as const, tracked: false } });
    return { provider: TWILIO, simulated: false, providerRef: sid, status, final };
  }

  async endCall(providerRef: string, signal?: AbortSignal): Promise<void> {
    try {
      await this.#post(this.#accountPath(`Calls/${encodeURIComponent(providerRef)}.json`), new URLSearchParams({ Status: 'completed' }), undefined, signal);
    } catch (err) {
      // 21220: the call is no longer in progress, so there is nothing left to end.
      if (err instanceof PermanentCarrierError && err.code === '21220') return;
      throw err;
    }
  }

  /**
   * Replaces what a call in progress does with `twiml` (Calls API update with `Twiml`): a <Dial>
   * that transfers it, <Play digits> and a new stream. The caller builds the TwiML escaped.
   */
  async redirectCall(providerRef: string, twiml: string, signal?: AbortSignal): Promise<void> {
    if (twiml.length > MAX_INLINE_TWIML) throw new PermanentCarrierError(`twilio: ${twiml.length} characters of TwiML, more than the ${MAX_INLINE_TWIML} Twilio takes inline`, TWILIO);
    await this.#post(this.#accountPath(`Calls/${encodeURIComponent(providerRef)}.json`), new URLSearchParams({ Twiml: twiml }), undefined, signal);
  }

  #sidAndStatus(json: TwilioJson, ...prefixes: string[]): { sid: string; status: string } {
    const sid = typeof json.sid === 'string' ? json.sid : '';
    if (!prefixes.some((p) => sid.startsWith(p))) {
      throw new TransientCarrierError('twilio: answer without a resource sid', TWILIO, { maybeApplied: true });
    }
    return { sid, status: typeof json.status === 'string' ? json.status : 'queued' };
  }
}

export function createTwilioCarrier(settings: TwilioSettings, opts: TwilioOptions = {}): TwilioCarrier {
  return new TwilioCarrier(settings, opts);
}

/**
 * Text for XML: drops what XML 1.0 cannot carry (control characters, lone surrogates, U+FFFE/F)
 * and escapes the five special characters, so no input can add or close an element.
 */
export function xmlText(value: string): string {
  return value
    .replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}

/**
 * The TwiML for a task's call: say the greeting when the call is answered. With waitToGreet the
 * call first listens in silence (<Pause>) so the callee can say "hello" before we speak. <Pause>
 * rather than <Gather input="speech">: it works in inline TwiML with no action URL and no extra
 * round trip to us, and behaves the same whether a person or a voicemail answers.
 */
export function greetingTwiml(opts: { greeting?: string; waitToGreet?: boolean; waitSeconds?: number }): string {
  const parts: string[] = [];
  if (opts.waitToGreet) {
    const secs = Math.min(Math.max(Math.round(opts.waitSeconds ?? DEFAULT_WAIT_TO_GREET_SECONDS), 1), 10);
    parts.push(`<Pause length="${secs}"/>`);
  }
  const greeting = opts.greeting?.trim();
  if (greeting) parts.push(`<Say>${xmlText(greeting)}</Say>`);
  return `<?xml version="1.0" encoding="UTF-8"?><Response>${parts.join('')}</Response>`;
}
