// A stand-in for the few Twilio REST endpoints callplane calls (create call, create message, update
// call; search, buy, find, update and release phone numbers), on 127.0.0.1, for the test suite only: it checks basic auth, records every request, answers
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
  /** The query string's parameters (searches and lookups are GETs). */
  query: URLSearchParams;
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
  /** Answering-machine detection as asked: MachineDetection, AsyncAmd, AsyncAmdStatusCallback (and its method). */
  machineDetection?: string;
  asyncAmd?: string;
  amdCallback?: string;
  amdCallbackMethod?: string;
  /** The I-Twilio-Idempotency-Token it was created with: the same token again answers this call instead of placing another. */
  idempotencyToken?: string;
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

/** A number of the fake's inventory (AvailablePhoneNumbers), or one the account holds (IncomingPhoneNumbers). */
export interface FakeNumber {
  phoneNumber: string;
  /** ISO country; its national digits are the number without `+` and the calling code. */
  isoCountry: string;
  locality: string | null;
  region: string | null;
  capabilities?: { voice: boolean; SMS: boolean; MMS: boolean };
}

export interface FakeIncoming extends FakeNumber {
  sid: string;
  voiceUrl: string | null;
  smsUrl: string | null;
  statusCallback: string | null;
}

const CALLING: Record<string, string> = { US: '1', CA: '1', GB: '44' };
const KEYS = 'abc2def3ghi4jkl5mno6pqrs7tuv8wxyz9';
const keypad = (c: string) => { const i = KEYS.indexOf(c.toLowerCase()); if (i < 0) return c; let j = i; while (!/\d/.test(KEYS[j])) j++; return KEYS[j]; };

/** A default inventory: US numbers in Cleveland (216) and Austin (512), Canadian ones in Toronto. */
export function defaultInventory(): FakeNumber[] {
  const n = (phoneNumber: string, isoCountry: string, locality: string, region: string): FakeNumber =>
    ({ phoneNumber, isoCountry, locality, region, capabilities: { voice: true, SMS: true, MMS: isoCountry === 'US' } });
  return [
    n('+12165550101', 'US', 'Cleveland', 'OH'), n('+12165550102', 'US', 'Cleveland', 'OH'), n('+12167770103', 'US', 'Cleveland', 'OH'),
    n('+15125550104', 'US', 'Austin', 'TX'), n('+15122482646', 'US', 'Austin', 'TX'), n('+14165550105', 'CA', 'Toronto', 'ON'),
  ];
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
  /** What AvailablePhoneNumbers offers (tests replace or extend it); a bought number leaves it. */
  inventory: FakeNumber[] = defaultInventory();
  /** Numbers the account holds, by sid (IncomingPhoneNumbers). */
  readonly incoming = new Map<string, FakeIncoming>();
  readonly #injections: Array<Injection | 'hang'> = [];
  readonly #priceInjections: Array<Injection | 'hang'> = [];
  /** The Pricing API's monthly prices per country and number type (tests change them). */
  prices: Record<string, { currency: string; byType: Record<string, string> }> = {
    US: { currency: 'USD', byType: { local: '1.15', 'toll free': '2.15' } },
    CA: { currency: 'USD', byType: { local: '1.15', 'toll free': '2.15' } },
  };
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

  /** The next Pricing API request(s) get this answer ('hang': none) instead of the price. */
  failNextPrice(injection: Injection | 'hang', times = 1): void {
    for (let i = 0; i < times; i++) this.#priceInjections.push(injection);
  }

  /** Pricing API requests (GET /v1/PhoneNumbers/Countries/{iso}) received. */
  get priceRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.path.startsWith('/v1/PhoneNumbers/Countries/'));
  }

  /** The Pricing API's answer for a country: its monthly prices by number type, 404 for one it has none for. */
  #price(req: http.IncomingMessage, res: http.ServerResponse, country: string, path: string): void {
    const injection = this.#priceInjections.shift();
    if (injection === 'hang') return;
    if (injection) return this.#error(res, injection.status, injection.code ?? injection.status * 100, injection.message ?? 'error', injection.headers);
    const expected = 'Basic ' + Buffer.from(`${this.accountSid}:${this.authToken}`).toString('base64');
    if (req.headers.authorization !== expected) return this.#error(res, 401, 20003, 'Authenticate');
    const p = req.method === 'GET' ? this.prices[country] : undefined;
    if (!p) return this.#error(res, 404, 20404, `The requested resource ${path} was not found`);
    this.#json(res, 200, {
      country: country, iso_country: country, price_unit: p.currency,
      phone_number_prices: Object.entries(p.byType).map(([type, price]) => ({ number_type: type, base_price: price, current_price: price })),
      url: `https://pricing.twilio.com${path}`,
    });
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
    const [path, qs] = (req.url ?? '/').split('?') as [string, string | undefined];
    const form = new URLSearchParams(raw);
    const query = new URLSearchParams(qs ?? '');
    this.requests.push({ method: req.method ?? '', path, headers: req.headers, form, query, raw, at: Date.now() });
    // The Pricing API (pricing.twilio.com) has its own injections: it is asked beside a search.
    const pricing = /^\/v1\/PhoneNumbers\/Countries\/([^/]+)$/.exec(path);
    if (pricing) return this.#price(req, res, decodeURIComponent(pricing[1]!), path);
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
    if (path.startsWith(prefix)) {
      const rest = path.slice(prefix.length);
      const avail = /^AvailablePhoneNumbers\/([^/]+)\/Local\.json$/.exec(rest);
      if (avail && req.method === 'GET') return this.#searchNumbers(res, decodeURIComponent(avail[1]), query, path);
      if (rest === 'IncomingPhoneNumbers.json' && req.method === 'GET') return this.#findIncoming(res, query);
      if (rest === 'IncomingPhoneNumbers.json' && req.method === 'POST') return this.#buyNumber(res, form);
      const inc = /^IncomingPhoneNumbers\/([^/]+)\.json$/.exec(rest);
      if (inc && (req.method === 'POST' || req.method === 'DELETE')) return this.#updateIncoming(res, req.method, decodeURIComponent(inc[1]), form, path);
    }
    if (req.method !== 'POST' || !path.startsWith(prefix)) {
      return this.#error(res, 404, 20404, `The requested resource ${path} was not found`);
    }
    const rest = path.slice(prefix.length);
    if (rest === 'Calls.json') return this.#createCall(res, form, req.headers['i-twilio-idempotency-token'] as string | undefined);
    if (rest === 'Messages.json') return this.#createMessage(res, form);
    const m = /^Calls\/([^/]+)\.json$/.exec(rest);
    if (m) return this.#updateCall(res, decodeURIComponent(m[1]), form, path);
    this.#error(res, 404, 20404, `The requested resource ${path} was not found`);
  }

  #nationalOf(n: FakeNumber): string {
    return n.phoneNumber.slice(1 + (CALLING[n.isoCountry] ?? '').length);
  }

  #availableJson(n: FakeNumber): Record<string, unknown> {
    return {
      friendly_name: n.phoneNumber, phone_number: n.phoneNumber, lata: null, locality: n.locality, rate_center: n.locality,
      latitude: null, longitude: null, region: n.region, postal_code: null, iso_country: n.isoCountry,
      address_requirements: 'none', beta: false, capabilities: n.capabilities ?? { voice: true, SMS: true, MMS: false },
    };
  }

  #incomingJson(n: FakeIncoming): Record<string, unknown> {
    return {
      sid: n.sid, account_sid: this.accountSid, phone_number: n.phoneNumber, friendly_name: n.phoneNumber,
      voice_url: n.voiceUrl, voice_method: 'POST', sms_url: n.smsUrl, sms_method: 'POST', status_callback: n.statusCallback,
      status_callback_method: 'POST', capabilities: n.capabilities, api_version: '2010-04-01',
      uri: `/2010-04-01/Accounts/${this.accountSid}/IncomingPhoneNumbers/${n.sid}.json`,
    };
  }

  /** AvailablePhoneNumbers/{country}/Local: 404 for a country with no inventory, as Twilio answers one it does not serve. */
  #searchNumbers(res: http.ServerResponse, country: string, q: URLSearchParams, path: string): void {
    if (!this.inventory.some((n) => n.isoCountry === country)) return this.#error(res, 404, 20404, `The requested resource ${path} was not found`);
    // Twilio's pattern: 2 to 16 characters, letters read as keypad digits, matched anywhere in the
    // number unless `+` anchors it to the start (country code included) or `$` to the end; `*` (one
    // character) and `%` (any run) only at its ends, never between the other characters.
    const contains = q.get('Contains');
    let pattern: RegExp | null = null;
    if (contains !== null) {
      const m = /^(\+?)([*%]*)([^*%$+]+)([*%]*)(\$?)$/.exec(contains);
      if (!m || contains.length > 16 || m[3].length < 2) return this.#error(res, 400, 21207, `Invalid Contains pattern: ${contains}`);
      const wild = (w: string) => [...w].map((c) => (c === '*' ? '\\d' : '\\d*')).join('');
      pattern = new RegExp(`${m[1] ? '^\\+' : ''}${wild(m[2])}${[...m[3]].map(keypad).join('')}${wild(m[4])}${m[5] ? '$' : ''}`);
    }
    const pageSize = Number(q.get('PageSize') ?? 50);
    const found = this.inventory.filter((n) => n.isoCountry === country
      && (q.get('InLocality') === null || n.locality?.toLowerCase() === q.get('InLocality')!.toLowerCase())
      && (q.get('InRegion') === null || n.region?.toLowerCase() === q.get('InRegion')!.toLowerCase())
      && (q.get('AreaCode') === null || this.#nationalOf(n).startsWith(q.get('AreaCode')!))
      && (pattern === null || pattern.test(n.phoneNumber))).slice(0, pageSize);
    this.#json(res, 200, { available_phone_numbers: found.map((n) => this.#availableJson(n)), uri: path });
  }

  #findIncoming(res: http.ServerResponse, q: URLSearchParams): void {
    const wanted = q.get('PhoneNumber');
    const list = [...this.incoming.values()].filter((n) => wanted === null || n.phoneNumber === wanted);
    this.#json(res, 200, { incoming_phone_numbers: list.map((n) => this.#incomingJson(n)) });
  }

  #buyNumber(res: http.ServerResponse, form: URLSearchParams): void {
    const wanted = form.get('PhoneNumber');
    if (!wanted) return this.#error(res, 400, 21422, 'PhoneNumber is required');
    const i = this.inventory.findIndex((n) => n.phoneNumber === wanted);
    if (i < 0) return this.#error(res, 400, 21422, `Phone Number ${wanted} is not available`);
    const [n] = this.inventory.splice(i, 1);
    const bought: FakeIncoming = {
      ...n, sid: `PN${hex32()}`, voiceUrl: form.get('VoiceUrl'), smsUrl: form.get('SmsUrl'), statusCallback: form.get('StatusCallback'),
    };
    this.incoming.set(bought.sid, bought);
    this.#json(res, 201, this.#incomingJson(bought));
  }

  #updateIncoming(res: http.ServerResponse, method: string, sid: string, form: URLSearchParams, path: string): void {
    const n = this.incoming.get(sid);
    if (!n) return this.#error(res, 404, 20404, `The requested resource ${path} was not found`);
    if (method === 'DELETE') {
      this.incoming.delete(sid);
      res.writeHead(204);
      res.end();
      return;
    }
    if (form.has('VoiceUrl')) n.voiceUrl = form.get('VoiceUrl');
    if (form.has('SmsUrl')) n.smsUrl = form.get('SmsUrl');
    if (form.has('StatusCallback')) n.statusCallback = form.get('StatusCallback');
    this.#json(res, 200, this.#incomingJson(n));
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

  #createCall(res: http.ServerResponse, form: URLSearchParams, token?: string): void {
    // Twilio's idempotency: a request repeated with its token answers what the first one did.
    const earlier = token ? [...this.calls.values()].find((c) => c.idempotencyToken === token) : undefined;
    if (earlier) return this.#json(res, 201, this.#callJson(earlier));
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
      machineDetection: form.get('MachineDetection') ?? undefined, asyncAmd: form.get('AsyncAmd') ?? undefined,
      amdCallback: form.get('AsyncAmdStatusCallback') ?? undefined, amdCallbackMethod: form.get('AsyncAmdStatusCallbackMethod') ?? undefined,
      idempotencyToken: token,
    };
    // Twilio refuses a MachineDetection it does not know (error 21214-like: the parameter is invalid).
    if (call.machineDetection !== undefined && !['Enable', 'DetectMessageEnd'].includes(call.machineDetection)) {
      return this.#error(res, 400, 21626, `Invalid MachineDetection: ${call.machineDetection}`);
    }
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
   * Sends the asynchronous answering-machine detection result, as Twilio does once it has decided
   * (AnsweredBy: human, machine_start, machine_end_beep, machine_end_silence, machine_end_other,
   * fax, unknown), signed, to the call's AsyncAmdStatusCallback.
   */
  async sendAmd(sid: string, answeredBy: string, opts: { token?: string; detectionMs?: number } = {}): Promise<CallbackResponse> {
    const call = this.calls.get(sid);
    if (!call) throw new Error(`fake twilio: no call ${sid}`);
    if (!call.amdCallback) throw new Error(`fake twilio: call ${sid} has no AsyncAmdStatusCallback`);
    const params: Record<string, string> = {
      AccountSid: this.accountSid, CallSid: sid, AnsweredBy: answeredBy, MachineDetectionDuration: String(opts.detectionMs ?? 2400),
    };
    return this.postSigned(call.amdCallback, params, { token: opts.token });
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
