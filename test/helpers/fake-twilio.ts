// A stand-in for the few Twilio REST endpoints callplane calls (create call, create message, update
// call), on 127.0.0.1, for the test suite only: it checks basic auth, records every request, answers
// with Twilio-shaped JSON, can be told to fail or hang, and sends status callbacks and TwiML fetches
// signed with Twilio's X-Twilio-Signature algorithm (implemented here on node:crypto, independently of the
// twilio package our code uses, so the two check each other).
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  form: URLSearchParams;
  raw: string;
  /** When it arrived (unix ms). */
  at: number;
}

export interface FakeCall {
  sid: string;
  to: string;
  from: string;
  status: string;
  statusCallback?: string;
  statusCallbackEvents: string[];
  twiml?: string;
  url?: string;
  sequence: number;
}

export interface FakeMessage {
  sid: string;
  to: string;
  from: string | null;
  messagingServiceSid: string | null;
  body: string;
  status: string;
  statusCallback?: string;
}

export interface Injection {
  status: number;
  code?: number;
  message?: string;
  headers?: Record<string, string>;
}

export interface CallbackResponse {
  status: number;
  body: string;
}

/** One fetch of a call's TwiML URL, as Twilio makes it when the call is answered. */
export interface TwimlFetch {
  sid: string;
  method: 'GET' | 'POST';
  url: string;
  status: number;
  contentType: string | null;
  body: string;
}

/** Twilio's signature: base64 HMAC-SHA1 over the URL followed by each sorted key and its value(s). */
export function twilioSignature(authToken: string, url: string, params: Record<string, string | string[]>): string {
  let data = url;
  for (const key of Object.keys(params).sort()) {
    const v = params[key];
    for (const value of Array.isArray(v) ? [...v].sort() : [v]) data += key + value;
  }
  return crypto.createHmac('sha1', authToken).update(Buffer.from(data, 'utf8')).digest('base64');
}

const hex32 = () => crypto.randomBytes(16).toString('hex');
const ENDED = new Set(['completed', 'busy', 'no-answer', 'failed', 'canceled']);
const E164 = /^\+[1-9]\d{6,14}$/;

export class FakeTwilio {
  readonly accountSid: string;
  readonly authToken: string;
  readonly requests: RecordedRequest[] = [];
  readonly calls = new Map<string, FakeCall>();
  readonly messages = new Map<string, FakeMessage>();
  readonly twimlFetches: TwimlFetch[] = [];
  /** Calls updated with new TwiML (Calls/{sid}.json with Twiml): transfers, redirects. */
  readonly redirects: Array<{ sid: string; twiml: string }> = [];
  readonly #injections: Array<Injection | 'hang'> = [];
  readonly #server: http.Server;
  #url = '';

  constructor(opts: { accountSid?: string; authToken?: string } = {}) {
    this.accountSid = opts.accountSid ?? `AC${hex32()}`;
    this.authToken = opts.authToken ?? hex32();
    this.#server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => this.#handle(req, res, Buffer.concat(chunks).toString('utf8')));
    });
  }

  /** Base URL to configure as the twilio provider's apiBaseUrl. */
  get url(): string {
    return this.#url;
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.#url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  /** The next request(s) get this answer instead of the real one (429, 500, 400, a redirect…). */
  failNext(injection: Injection, times = 1): void {
    for (let i = 0; i < times; i++) this.#injections.push(injection);
  }

  /** The next request is read and never answered (until close). */
  hangNext(): void {
    this.#injections.push('hang');
  }

  #json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    res.end(JSON.stringify(body));
  }

  #error(res: http.ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
    this.#json(res, status, { code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status }, headers);
  }

  #handle(req: http.IncomingMessage, res: http.ServerResponse, raw: string): void {
    const path = (req.url ?? '/').split('?')[0];
    const form = new URLSearchParams(raw);
    this.requests.push({ method: req.method ?? '', path, headers: req.headers, form, raw, at: Date.now() });
    const injection = this.#injections.shift();
    if (injection === 'hang') return;
    if (injection) {
      if (injection.status >= 300 && injection.status < 400) {
        res.writeHead(injection.status, injection.headers ?? {});
        res.end();
        return;
      }
      this.#error(res, injection.status, injection.code ?? injection.status * 100, injection.message ?? http.STATUS_CODES[injection.status] ?? 'error', injection.headers);
      return;
    }
    const expected = 'Basic ' + Buffer.from(`${this.accountSid}:${this.authToken}`).toString('base64');
    if (req.headers.authorization !== expected) return this.#error(res, 401, 20003, 'Authenticate');
    const prefix = `/2010-04-01/Accounts/${this.accountSid}/`;
    if (req.method !== 'POST' || !path.startsWith(prefix)) {
      return this.#error(res, 404, 20404, `The requested resource ${path} was not found`);
    }
    const rest = path.slice(prefix.length);
    if (rest === 'Calls.json') return this.#createCall(res, form);
    if (rest === 'Messages.json') return this.#createMessage(res, form);
    const m = /^Calls\/([^/]+)\.json$/.exec(rest);
    if (m) return this.#updateCall(res, decodeURIComponent(m[1]), form, path);
    this.#error(res, 404, 20404, `The requested resource ${path} was not found`);
  }

  #callJson(c: FakeCall): Record<string, unknown> {
    const now = new Date().toUTCString().replace('GMT', '+0000');
    return {
      sid: c.sid, account_sid: this.accountSid, api_version: '2010-04-01', annotation: null, answered_by: null,
      caller_name: null, date_created: now, date_updated: now, direction: 'outbound-api', duration: null,
      end_time: null, forwarded_from: null, from: c.from, from_formatted: c.from, group_sid: null,
      parent_call_sid: null, phone_number_sid: `PN${hex32()}`, price: null, price_unit: 'USD', queue_time: '0',
      start_time: null, status: c.status, to: c.to, to_formatted: c.to, trunk_sid: null,
      uri: `/2010-04-01/Accounts/${this.accountSid}/Calls/${c.sid}.json`,
      subresource_uris: { recordings: `/2010-04-01/Accounts/${this.accountSid}/Calls/${c.sid}/Recordings.json` },
    };
  }

  #createCall(res: http.ServerResponse, form: URLSearchParams): void {
    const to = form.get('To');
    const from = form.get('From');
    if (!to) return this.#error(res, 400, 21201, "No 'To' number is specified");
    if (!from) return this.#error(res, 400, 21213, "No 'From' number is specified");
    if (!E164.test(to)) return this.#error(res, 400, 21211, `Invalid 'To' Phone Number: ${to}`);
    if (!form.get('Url') && !form.get('Twiml')) return this.#error(res, 400, 21205, 'Url parameter is required.');
    const call: FakeCall = {
      sid: `CA${hex32()}`, to, from, status: 'queued', statusCallback: form.get('StatusCallback') ?? undefined,
      statusCallbackEvents: form.getAll('StatusCallbackEvent'), twiml: form.get('Twiml') ?? undefined,
      url: form.get('Url') ?? undefined, sequence: 0,
    };
    this.calls.set(call.sid, call);
    this.#json(res, 201, this.#callJson(call));
  }

  #createMessage(res: http.ServerResponse, form: URLSearchParams): void {
    const to = form.get('To');
    const body = form.get('Body');
    const from = form.get('From');
    const service = form.get('MessagingServiceSid');
    if (!to) return this.#error(res, 400, 21604, "A 'To' phone number is required.");
    if (!body) return this.#error(res, 400, 21602, 'Message body is required.');
    if (!from && !service) return this.#error(res, 400, 21603, "A 'From' phone number is required.");
    if (!E164.test(to)) return this.#error(res, 400, 21211, `Invalid 'To' Phone Number: ${to}`);
    const msg: FakeMessage = {
      sid: `SM${hex32()}`, to, from, messagingServiceSid: service, body,
      // Twilio answers 'accepted' when a Messaging Service will pick the sender.
      status: service && !from ? 'accepted' : 'queued', statusCallback: form.get('StatusCallback') ?? undefined,
    };
    this.messages.set(msg.sid, msg);
    const now = new Date().toUTCString().replace('GMT', '+0000');
    this.#json(res, 201, {
      sid: msg.sid, account_sid: this.accountSid, api_version: '2010-04-01', body, date_created: now, date_sent: null,
      date_updated: now, direction: 'outbound-api', error_code: null, error_message: null, from, messaging_service_sid: service,
      num_media: '0', num_segments: String(Math.max(1, Math.ceil(body.length / 160))), price: null, price_unit: 'USD',
      status: msg.status, to, uri: `/2010-04-01/Accounts/${this.accountSid}/Messages/${msg.sid}.json`,
    });
  }

  #updateCall(res: http.ServerResponse, sid: string, form: URLSearchParams, path: string): void {
    const call = this.calls.get(sid);
    if (!call) return this.#error(res, 404, 20404, `The requested resource ${path} was not found`);
    const status = form.get('Status');
    const twiml = form.get('Twiml');
    if (twiml !== null && status === null) {
      // A redirect: the call in progress runs this TwiML next (recorded in `redirects`).
      if (ENDED.has(call.status)) return this.#error(res, 400, 21220, 'Call is not in-progress. Cannot redirect.');
      this.redirects.push({ sid, twiml });
      call.twiml = twiml;
      return this.#json(res, 200, this.#callJson(call));
    }
    if (status !== 'completed' && status !== 'canceled') return this.#error(res, 400, 21218, 'Invalid Status parameter');
    if (ENDED.has(call.status)) return this.#error(res, 400, 21220, 'Call is not in-progress. Cannot redirect.');
    call.status = status;
    this.#json(res, 200, this.#callJson(call));
    // Twilio reports the hang-up through the status callback as well.
    if (call.statusCallback) void this.progressCall(sid, status).catch(() => undefined);
  }

  /** Moves a call to `status` and sends its status callback, as Twilio would. */
  async progressCall(sid: string, status: string, extra: Record<string, string> = {}): Promise<CallbackResponse> {
    const call = this.calls.get(sid);
    if (!call) throw new Error(`fake twilio: no call ${sid}`);
    if (!call.statusCallback) throw new Error(`fake twilio: call ${sid} has no StatusCallback`);
    call.status = status;
    call.sequence += 1;
    const params: Record<string, string> = {
      AccountSid: this.accountSid, ApiVersion: '2010-04-01', CallSid: sid, CallStatus: status,
      Called: call.to, Caller: call.from, Direction: 'outbound-api', From: call.from, To: call.to,
      CallbackSource: 'call-progress-events', SequenceNumber: String(call.sequence - 1),
      Timestamp: new Date().toUTCString().replace('GMT', '+0000'),
      ...(status === 'completed' ? { CallDuration: '12', Duration: '1' } : {}),
      ...extra,
    };
    return this.postSigned(call.statusCallback, params);
  }

  /**
   * Fetches the call's TwiML URL (its `Url` parameter) as Twilio does once the call is answered:
   * POST with the call's parameters as a signed form (Twilio's default), or GET with them added to
   * the query string and the whole URL signed. Recorded in `twimlFetches`.
   */
  async fetchTwiml(sid: string, opts: { method?: 'GET' | 'POST'; token?: string } = {}): Promise<TwimlFetch> {
    const call = this.calls.get(sid);
    if (!call) throw new Error(`fake twilio: no call ${sid}`);
    if (!call.url) throw new Error(`fake twilio: call ${sid} has no Url`);
    const method = opts.method ?? 'POST';
    const token = opts.token ?? this.authToken;
    const params: Record<string, string> = {
      AccountSid: this.accountSid, ApiVersion: '2010-04-01', CallSid: sid, CallStatus: 'in-progress',
      Called: call.to, Caller: call.from, Direction: 'outbound-api', From: call.from, To: call.to,
    };
    let target = call.url;
    let init: RequestInit;
    if (method === 'GET') {
      const u = new URL(call.url);
      for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
      target = u.toString();
      init = { method, headers: { 'x-twilio-signature': twilioSignature(token, target, {}), 'user-agent': 'TwilioProxy/1.1' } };
    } else {
      init = {
        method, body: new URLSearchParams(params).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(token, target, params), 'user-agent': 'TwilioProxy/1.1' },
      };
    }
    const res = await fetch(target, { ...init, redirect: 'manual' });
    const fetched: TwimlFetch = { sid, method, url: target, status: res.status, contentType: res.headers.get('content-type'), body: await res.text() };
    this.twimlFetches.push(fetched);
    return fetched;
  }

  /** Moves a message to `status` and sends its status callback. */
  async messageStatus(sid: string, status: string, extra: Record<string, string> = {}): Promise<CallbackResponse> {
    const msg = this.messages.get(sid);
    if (!msg) throw new Error(`fake twilio: no message ${sid}`);
    if (!msg.statusCallback) throw new Error(`fake twilio: message ${sid} has no StatusCallback`);
    msg.status = status;
    const params: Record<string, string> = {
      AccountSid: this.accountSid, ApiVersion: '2010-04-01', MessageSid: sid, MessageStatus: status,
      SmsSid: sid, SmsStatus: status, To: msg.to, From: msg.from ?? '+15005550006', ...extra,
    };
    return this.postSigned(msg.statusCallback, params);
  }

  /**
   * Posts a signed callback. Form parameters by default; with `json`, a JSON body signed Twilio's
   * way for JSON (bodySHA256 = hex SHA-256 of the body added to the URL, the URL alone signed).
   */
  async postSigned(url: string, params: Record<string, string>, opts: { json?: string; token?: string } = {}): Promise<CallbackResponse> {
    const token = opts.token ?? this.authToken;
    let target = url;
    let body: string;
    let contentType: string;
    let signature: string;
    if (opts.json !== undefined) {
      const u = new URL(url);
      u.searchParams.set('bodySHA256', crypto.createHash('sha256').update(opts.json, 'utf8').digest('hex'));
      target = u.toString();
      body = opts.json;
      contentType = 'application/json';
      signature = twilioSignature(token, target, {});
    } else {
      body = new URLSearchParams(params).toString();
      contentType = 'application/x-www-form-urlencoded';
      signature = twilioSignature(token, target, params);
    }
    const res = await fetch(target, {
      method: 'POST', body, redirect: 'manual',
      headers: { 'content-type': contentType, 'x-twilio-signature': signature, 'i-twilio-idempotency-token': crypto.randomUUID(), 'user-agent': 'TwilioProxy/1.1' },
    });
    return { status: res.status, body: await res.text() };
  }
}

export async function startFakeTwilio(opts: { accountSid?: string; authToken?: string } = {}): Promise<FakeTwilio> {
  return new FakeTwilio(opts).start();
}
