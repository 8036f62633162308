// SIP messages (RFC 3261 §7): parsing from bytes and serialising to bytes, the header grammar
// pieces the stack needs (URIs, name-addr, Via, CSeq), and framing for stream transports.
// Lenient where RFC 3261 asks receivers to be (header name case, compact forms, LWS around
// colons, folded lines), strict where a wrong guess would misroute a message.

export class SipParseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SipParseError';
  }
}

/** Compact header forms (RFC 3261 §7.3.3 and later RFCs) → full names. */
const COMPACT: Record<string, string> = {
  i: 'call-id', m: 'contact', e: 'content-encoding', l: 'content-length', c: 'content-type',
  f: 'from', s: 'subject', k: 'supported', t: 'to', v: 'via', o: 'event', u: 'allow-events', r: 'refer-to',
  a: 'accept-contact', b: 'referred-by', d: 'request-disposition', j: 'reject-contact', x: 'session-expires', y: 'identity',
};

/** Headers whose values contain commas that do not separate values (RFC 3261 §7.3.1). */
const SINGLE_VALUE = new Set([
  'www-authenticate', 'authorization', 'proxy-authenticate', 'proxy-authorization', 'date', 'call-id',
  'cseq', 'content-length', 'content-type', 'from', 'to', 'max-forwards', 'user-agent', 'server',
  'subject', 'expires', 'min-expires', 'retry-after', 'timestamp', 'organization',
]);

/** Canonical spelling for serialising (a receiver must accept any case; ours reads well). */
const CANONICAL: Record<string, string> = {
  'call-id': 'Call-ID', cseq: 'CSeq', 'www-authenticate': 'WWW-Authenticate', 'content-length': 'Content-Length',
};

export function headerKey(name: string): string {
  const lower = name.trim().toLowerCase();
  return COMPACT[lower] ?? lower;
}

function canonicalName(key: string): string {
  return CANONICAL[key] ?? key.replace(/(^|-)([a-z])/g, (_, dash: string, ch: string) => dash + ch.toUpperCase());
}

/** An ordered, case-insensitive header list; names are stored canonically. */
export class SipHeaders {
  readonly #list: [string, string][] = [];

  constructor(init?: Iterable<[string, string]>) {
    if (init) for (const [n, v] of init) this.append(n, v);
  }

  append(name: string, value: string | number): this {
    const v = String(value);
    if (/[\r\n]/.test(v)) throw new SipParseError(`header ${name} must not contain CR or LF`);
    this.#list.push([canonicalName(headerKey(name)), v]);
    return this;
  }

  /** Replaces every value of `name` with this one. */
  set(name: string, value: string | number): this {
    this.delete(name);
    return this.append(name, value);
  }

  /** Puts a value first (a new top Via). */
  prepend(name: string, value: string): this {
    this.#list.unshift([canonicalName(headerKey(name)), value]);
    return this;
  }

  delete(name: string): this {
    const key = headerKey(name);
    for (let i = this.#list.length - 1; i >= 0; i--) if (headerKey(this.#list[i][0]) === key) this.#list.splice(i, 1);
    return this;
  }

  has(name: string): boolean {
    const key = headerKey(name);
    return this.#list.some(([n]) => headerKey(n) === key);
  }

  /** The first value, as written. */
  get(name: string): string | undefined {
    const key = headerKey(name);
    return this.#list.find(([n]) => headerKey(n) === key)?.[1];
  }

  /** Every value, with comma-separated lists split (except for headers that are never lists). */
  getAll(name: string): string[] {
    const key = headerKey(name);
    const raw = this.#list.filter(([n]) => headerKey(n) === key).map(([, v]) => v);
    return SINGLE_VALUE.has(key) ? raw : raw.flatMap(splitList);
  }

  entries(): [string, string][] {
    return this.#list.map(([n, v]) => [n, v]);
  }

  clone(): SipHeaders {
    return new SipHeaders(this.#list);
  }
}

/** Splits on commas outside quotes and angle brackets. */
export function splitList(value: string): string[] {
  const out: string[] = [];
  let depthAngle = 0;
  let quoted = false;
  let start = 0;
  for (let i = 0; i < value.length; i++) {
    const ch = value[i];
    if (quoted) {
      if (ch === '\\') i++;
      else if (ch === '"') quoted = false;
    } else if (ch === '"') quoted = true;
    else if (ch === '<') depthAngle++;
    else if (ch === '>') depthAngle = Math.max(0, depthAngle - 1);
    else if (ch === ',' && depthAngle === 0) {
      out.push(value.slice(start, i).trim());
      start = i + 1;
    }
  }
  out.push(value.slice(start).trim());
  return out.filter((v) => v !== '');
}

export interface SipRequest {
  kind: 'request';
  method: string;
  uri: string;
  headers: SipHeaders;
  body: Buffer;
}

export interface SipResponse {
  kind: 'response';
  status: number;
  reason: string;
  headers: SipHeaders;
  body: Buffer;
}

export type SipMessage = SipRequest | SipResponse;

const CRLF2 = Buffer.from('\r\n\r\n');
const TOKEN = /^[A-Za-z0-9\-.!%*_+`'~]+$/;
export const MAX_MESSAGE_BYTES = 65_535;

/** Splits a message's bytes at the blank line: the start line and headers, and the rest. */
function splitHead(buf: Buffer): { head: string; rest: Buffer } {
  // Tolerate leading CRLFs (keep-alives, RFC 5626) before a message.
  let offset = 0;
  while (offset + 1 < buf.length && buf[offset] === 13 && buf[offset + 1] === 10) offset += 2;
  const end = buf.indexOf(CRLF2, offset);
  // Bare LF line ends appear in the wild; accept them as well, whichever blank line comes first
  // (a CRLF message's body may hold LF LF, and an LF message's body CRLF CRLF).
  const lf = buf.indexOf('\n\n', offset);
  if (end < 0 && lf < 0) throw new SipParseError('message has no end of headers (blank line)');
  if (end < 0 || (lf >= 0 && lf < end)) return { head: buf.subarray(offset, lf).toString('utf8'), rest: buf.subarray(lf + 2) };
  return { head: buf.subarray(offset, end).toString('utf8'), rest: buf.subarray(end + 4) };
}

/**
 * Parses one SIP message. On a datagram the body is everything after the headers, cut to
 * Content-Length when that is shorter (RFC 3261 §18.3); a longer Content-Length is an error.
 */
export function parseMessage(buf: Buffer): SipMessage {
  if (buf.length > MAX_MESSAGE_BYTES) throw new SipParseError(`message larger than ${MAX_MESSAGE_BYTES} bytes`);
  const { head, rest } = splitHead(buf);
  const lines = head.split(/\r?\n/);
  const start = lines.shift() ?? '';
  const headers = new SipHeaders();
  let last: [string, string] | undefined;
  const pending: [string, string][] = [];
  for (const line of lines) {
    if (/^[ \t]/.test(line)) {
      // A folded continuation of the previous header (RFC 3261 §7.3.1).
      if (!last) throw new SipParseError('header continuation without a header');
      last[1] += ' ' + line.trim();
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) throw new SipParseError(`malformed header line: ${line.slice(0, 80)}`);
    const name = line.slice(0, colon).trim();
    if (!TOKEN.test(name)) throw new SipParseError(`malformed header name: ${name.slice(0, 80)}`);
    last = [name, line.slice(colon + 1).trim()];
    pending.push(last);
  }
  for (const [n, v] of pending) headers.append(n, v);

  let body = rest;
  const lengthHeader = headers.get('content-length');
  if (lengthHeader !== undefined) {
    if (!/^\s*\d+\s*$/.test(lengthHeader)) throw new SipParseError(`bad Content-Length: ${lengthHeader}`);
    const length = Number(lengthHeader);
    if (length > rest.length) throw new SipParseError(`Content-Length ${length} is longer than the body (${rest.length} bytes)`);
    body = rest.subarray(0, length);
  }

  const response = /^SIP\/2\.0\s+(\d{3})(?:\s+(.*))?$/i.exec(start);
  if (response) {
    const status = Number(response[1]);
    if (status < 100 || status > 699) throw new SipParseError(`bad status code ${status}`);
    return { kind: 'response', status, reason: response[2] ?? '', headers, body: Buffer.from(body) };
  }
  const request = /^([A-Za-z0-9\-.!%*_+`'~]+)\s+(\S+)\s+SIP\/2\.0$/i.exec(start);
  if (!request) throw new SipParseError(`malformed start line: ${start.slice(0, 80)}`);
  return { kind: 'request', method: request[1].toUpperCase(), uri: request[2], headers, body: Buffer.from(body) };
}

/** Bytes of a message, with Content-Length set from the body. */
export function serialize(msg: SipMessage): Buffer {
  const start = msg.kind === 'request' ? `${msg.method} ${msg.uri} SIP/2.0` : `SIP/2.0 ${msg.status} ${msg.reason}`;
  const headers = msg.headers.clone().set('Content-Length', msg.body.length);
  const lines = [start, ...headers.entries().map(([n, v]) => `${n}: ${v}`)];
  return Buffer.concat([Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'utf8'), msg.body]);
}

/**
 * Cuts a byte stream (TCP, TLS) into messages: headers up to the blank line, then exactly
 * Content-Length bytes (required on streams, RFC 3261 §18.3).
 */
export class StreamFramer {
  #buf: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): SipMessage[] {
    return this.pushRaw(chunk).map((f) => f.msg);
  }

  /** Like push(), with each message's own bytes (for captures). */
  pushRaw(chunk: Buffer): Array<{ msg: SipMessage; raw: Buffer }> {
    this.#buf = this.#buf.length ? Buffer.concat([this.#buf, chunk]) : chunk;
    const out: Array<{ msg: SipMessage; raw: Buffer }> = [];
    for (;;) {
      // Keep-alive CRLFs between messages.
      let offset = 0;
      while (offset + 1 < this.#buf.length && this.#buf[offset] === 13 && this.#buf[offset + 1] === 10) offset += 2;
      if (offset) this.#buf = this.#buf.subarray(offset);
      const end = this.#buf.indexOf(CRLF2);
      if (end < 0) {
        if (this.#buf.length > MAX_MESSAGE_BYTES) throw new SipParseError('headers larger than the message limit');
        return out;
      }
      const head = this.#buf.subarray(0, end).toString('utf8');
      const m = /^(?:content-length|l)[ \t]*:[ \t]*(\d+)/im.exec(head);
      if (!m) throw new SipParseError('a message on a stream transport needs Content-Length');
      const total = end + 4 + Number(m[1]);
      if (total > MAX_MESSAGE_BYTES) throw new SipParseError(`message larger than ${MAX_MESSAGE_BYTES} bytes`);
      if (this.#buf.length < total) return out;
      const raw = Buffer.from(this.#buf.subarray(0, total));
      out.push({ msg: parseMessage(raw), raw });
      this.#buf = this.#buf.subarray(total);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Header grammar

export type Params = Record<string, string | null>;

/** `;a=b;c` → {a: 'b', c: null}; names lower-cased, quotes removed. */
export function parseParams(text: string): Params {
  const out: Params = {};
  for (const part of splitOutsideQuotes(text, ';')) {
    const p = part.trim();
    if (!p) continue;
    const eq = p.indexOf('=');
    if (eq < 0) out[p.toLowerCase()] = null;
    else out[p.slice(0, eq).trim().toLowerCase()] = unquote(p.slice(eq + 1).trim());
  }
  return out;
}

export function formatParams(params: Params): string {
  return Object.entries(params).map(([k, v]) => (v === null ? `;${k}` : `;${k}=${v}`)).join('');
}

function splitOutsideQuotes(text: string, sep: string): string[] {
  const out: string[] = [];
  let quoted = false;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quoted) {
      if (ch === '\\') i++;
      else if (ch === '"') quoted = false;
    } else if (ch === '"') quoted = true;
    else if (ch === sep) {
      out.push(text.slice(start, i));
      start = i + 1;
    }
  }
  out.push(text.slice(start));
  return out;
}

export function unquote(v: string): string {
  return v.length >= 2 && v.startsWith('"') && v.endsWith('"') ? v.slice(1, -1).replace(/\\(.)/g, '$1') : v;
}

export function quote(v: string): string {
  return `"${v.replace(/["\\]/g, (c) => `\\${c}`)}"`;
}

export interface SipUri {
  scheme: 'sip' | 'sips';
  user?: string;
  password?: string;
  host: string;
  port?: number;
  params: Params;
  headers?: string;
}

/** `sip:user@host:port;params?headers`. IPv6 hosts keep their brackets. */
export function parseUri(text: string): SipUri {
  const m = /^(sips?):(?:([^@;?]*)@)?(\[[0-9a-fA-F:.]+\]|[^:;?]+)(?::(\d+))?((?:;[^?]*)?)(?:\?(.*))?$/i.exec(text.trim());
  if (!m) throw new SipParseError(`not a SIP URI: ${text.slice(0, 80)}`);
  const [, scheme, userinfo, host, port, params, headers] = m;
  let user: string | undefined;
  let password: string | undefined;
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(':');
    user = colon < 0 ? userinfo : userinfo.slice(0, colon);
    password = colon < 0 ? undefined : userinfo.slice(colon + 1);
  }
  const portNum = port === undefined ? undefined : Number(port);
  if (portNum !== undefined && (portNum < 1 || portNum > 65535)) throw new SipParseError(`bad port in URI: ${port}`);
  return {
    scheme: scheme.toLowerCase() as 'sip' | 'sips', user, password, host: host.toLowerCase(), port: portNum,
    params: parseParams(params ?? ''), ...(headers ? { headers } : {}),
  };
}

export function formatUri(u: SipUri): string {
  const userinfo = u.user !== undefined ? `${u.user}${u.password !== undefined ? `:${u.password}` : ''}@` : '';
  return `${u.scheme}:${userinfo}${u.host}${u.port ? `:${u.port}` : ''}${formatParams(u.params)}${u.headers ? `?${u.headers}` : ''}`;
}

export interface NameAddr {
  display?: string;
  uri: string;
  params: Params;
}

/** `"Alice" <sip:a@b>;tag=x` or `sip:a@b;tag=x` (then the params belong to the header). */
export function parseNameAddr(text: string): NameAddr {
  const t = text.trim();
  const lt = indexOutsideQuotes(t, '<');
  if (lt >= 0) {
    const gt = t.indexOf('>', lt);
    if (gt < 0) throw new SipParseError(`unterminated <…> in ${t.slice(0, 80)}`);
    const display = t.slice(0, lt).trim();
    return { ...(display ? { display: unquote(display) } : {}), uri: t.slice(lt + 1, gt).trim(), params: parseParams(t.slice(gt + 1)) };
  }
  const semi = t.indexOf(';');
  return semi < 0 ? { uri: t, params: {} } : { uri: t.slice(0, semi), params: parseParams(t.slice(semi)) };
}

export function formatNameAddr(na: NameAddr): string {
  return `${na.display ? `${quote(na.display)} ` : ''}<${na.uri}>${formatParams(na.params)}`;
}

function indexOutsideQuotes(text: string, ch: string): number {
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    if (quoted) {
      if (text[i] === '\\') i++;
      else if (text[i] === '"') quoted = false;
    } else if (text[i] === '"') quoted = true;
    else if (text[i] === ch) return i;
  }
  return -1;
}

export interface Via {
  transport: string;
  host: string;
  port?: number;
  params: Params;
}

export function parseVia(text: string): Via {
  const m = /^SIP\s*\/\s*2\.0\s*\/\s*([A-Za-z]+)\s+(\[[0-9a-fA-F:.]+\]|[^\s:;]+)(?:\s*:\s*(\d+))?\s*(.*)$/i.exec(text.trim());
  if (!m) throw new SipParseError(`malformed Via: ${text.slice(0, 80)}`);
  return { transport: m[1].toUpperCase(), host: m[2].toLowerCase(), port: m[3] ? Number(m[3]) : undefined, params: parseParams(m[4] ?? '') };
}

export function formatVia(v: Via): string {
  return `SIP/2.0/${v.transport} ${v.host}${v.port ? `:${v.port}` : ''}${formatParams(v.params)}`;
}

export function parseCSeq(text: string): { seq: number; method: string } {
  const m = /^\s*(\d+)\s+([A-Za-z]+)\s*$/.exec(text);
  if (!m) throw new SipParseError(`malformed CSeq: ${text.slice(0, 80)}`);
  return { seq: Number(m[1]), method: m[2].toUpperCase() };
}
