// The SIP transport and transaction layer (RFC 3261 §17–18, RFC 3581): one local endpoint that
// listens on UDP and TCP, opens TCP/TLS connections as a client, runs client transactions with
// the RFC timers, and absorbs retransmitted requests on the server side. Dialogs, registration
// and calls live above it (register.ts, call.ts).
import crypto from 'node:crypto';
import dgram from 'node:dgram';
import dns from 'node:dns/promises';
import net from 'node:net';
import os from 'node:os';
import tls from 'node:tls';
import {
  formatNameAddr, formatVia, parseCSeq, parseMessage, parseNameAddr, parseVia, serialize, SipHeaders, StreamFramer,
  type SipMessage, type SipRequest, type SipResponse, type Via,
} from './message.ts';

export type Transport = 'UDP' | 'TCP' | 'TLS';
/** Where a message came from or went to (an IP address, never a name). */
export interface Remote { transport: Transport; address: string; port: number }
/** Where to send a request: a host name or IP address. */
export interface Destination { transport: Transport; host: string; port: number }

/** RFC 3261 timer values (§17.1.1.1): T1 the RTT estimate, T2 the retransmission cap, T4 a message's lifetime. */
export const T1 = 500;
export const T2 = 4000;
export const T4 = 5000;
/** Timer B/F: 64·T1, how long a client transaction waits for an answer by default. */
export const DEFAULT_TIMEOUT_MS = 64 * T1;

/** No final response arrived within the transaction's time. */
export class SipTimeoutError extends Error {
  readonly code = 'SIP_TIMEOUT';
  constructor(message: string) {
    super(message);
    this.name = 'SipTimeoutError';
  }
}

/** The request could not be sent or its connection failed (refused, reset, TLS trust, our own address). */
export class SipTransportError extends Error {
  readonly code = 'SIP_TRANSPORT';
  /** A TCP/TLS connection was refused, failed or closed: what a port scan would learn from (see `failureText`). */
  readonly connection: boolean;
  constructor(message: string, options?: { cause?: unknown; connection?: boolean }) {
    super(message, options);
    this.name = 'SipTransportError';
    this.connection = options?.connection ?? false;
  }
}

/**
 * What a caller may show a customer about a request that got no SIP answer. A refused, reset or
 * closed connection and a timeout read the same (`no SIP answer from tcp:host:port: refused,
 * unreachable or timed out`), so a target's answers cannot tell an open port from a closed one.
 * A refused target, an unresolvable name and our own endpoint's state keep their own words.
 */
export function failureText(err: unknown, dest: Destination): string {
  if (err instanceof SipTimeoutError || (err instanceof SipTransportError && err.connection)) {
    return `no SIP answer from ${dest.transport.toLowerCase()}:${bracket(unbracket(dest.host))}:${dest.port}: refused, unreachable or timed out`;
  }
  return err instanceof Error ? err.message : String(err);
}

/** The address policy refused where a request would go (checked after resolving, before anything is sent). */
export class SipTargetRefusedError extends Error {
  readonly code = 'SIP_TARGET_REFUSED';
  constructor(message: string, readonly address: string) {
    super(message);
    this.name = 'SipTargetRefusedError';
  }
}

/** What a request handler gets along with the request; pass it back to respond(). */
export interface RequestContext {
  remote: Remote;
  /** @internal the stream the request came on (TCP/TLS), answered on the same connection. */
  readonly conn?: unknown;
}

export type RequestHandler = (req: SipRequest, ctx: RequestContext) => void | Promise<void>;

/** A pino logger fits; every method optional so a plain object works in tests. */
export interface SipLog {
  debug?(obj: object, msg?: string): void;
  info?(obj: object, msg?: string): void;
  warn?(obj: object, msg?: string): void;
  error?(obj: object, msg?: string): void;
}

export interface SipEndpointOptions {
  /** The address to bind (an IP address; 0.0.0.0 or :: for every interface). */
  host: string;
  /** The port to bind for UDP and TCP alike; 0 picks a free one (read it back from `port`). */
  port: number;
  /** The host put in Via and Contact when the bound address is not the one peers should use. */
  advertiseHost?: string;
  advertisePort?: number;
  /** Listeners to open; default both. TLS is client-only. */
  listen?: Array<'UDP' | 'TCP'>;
  /** Trust for outbound TLS connections. */
  tls?: { ca?: string | Buffer | Array<string | Buffer>; rejectUnauthorized?: boolean; cert?: string | Buffer; key?: string | Buffer };
  /** Out-of-dialog requests (and in-dialog ones no dialog claimed). Without it: OPTIONS → 200, others → 501. */
  onRequest?: RequestHandler;
  /** Every message sent and received, retransmissions included (captures). Exceptions are logged and ignored. */
  onMessage?: (dir: 'in' | 'out', msg: SipMessage, remote: Remote, raw: Buffer) => void;
  log?: SipLog;
  userAgent?: string;
  /**
   * The address policy of requests we send (request() and send(); responses go back to whoever
   * asked): why an address may not be sent to, or null. Every address a name resolves to is
   * checked, and the one checked is the one used (no second lookup), before a datagram is sent or
   * a connection opened.
   */
  refuseTarget?: (address: string, name?: string) => string | null;
}

export interface RequestOptions {
  /** Give up after this long without a final response (default 32 s); for INVITE, only until the first provisional. */
  timeoutMs?: number;
  onProvisional?: (res: SipResponse) => void;
  /** INVITE: a retransmitted 2xx (our ACK was lost); the caller re-sends its ACK. */
  on2xxRetransmit?: (res: SipResponse) => void;
  /** Abandons the transaction (rejects with SipAbortError); nothing is sent for it. */
  signal?: AbortSignal;
}

/** The caller abandoned the transaction through its signal. */
export class SipAbortError extends Error {
  readonly code = 'SIP_ABORTED';
  constructor(message: string) {
    super(message);
    this.name = 'SipAbortError';
  }
}

interface Resolved { transport: Transport; address: string; port: number; /** the name asked for (TLS server name) */ name?: string }

interface Connection {
  key: string;
  transport: 'TCP' | 'TLS';
  socket: net.Socket;
  remote: Remote;
  framer: StreamFramer;
  ready: Promise<void>;
  closed: boolean;
}

interface ClientTx {
  key: string;
  method: string;
  req: SipRequest;
  bytes: Buffer;
  dest: Resolved;
  conn?: Connection;
  done: boolean;
  provisional: boolean;
  retransmit?: NodeJS.Timeout;
  timeout?: NodeJS.Timeout;
  linger?: NodeJS.Timeout;
  ack?: Buffer;
  opts: RequestOptions;
  resolve: (res: SipResponse) => void;
  reject: (err: Error) => void;
}

interface ServerTx {
  key: string;
  method: string;
  toTag: string;
  last?: { bytes: Buffer; msg: SipResponse; status: number };
  remote: Remote;
  conn?: Connection;
  retransmit?: NodeJS.Timeout;
  expire?: NodeJS.Timeout;
  acked: boolean;
}

const MAGIC = 'z9hG4bK';
const MAX_SERVER_TX = 10_000;

export const newBranch = () => MAGIC + crypto.randomBytes(10).toString('hex');
export const newTag = () => crypto.randomBytes(6).toString('hex');
export const newCallId = (host?: string) => crypto.randomBytes(12).toString('hex') + (host ? `@${host}` : '');

/** The first Via value (a header line may carry several, comma-separated). */
const topVia = (msg: SipMessage): string => msg.headers.getAll('via')[0];
/** A host as a URI writes it: an IPv6 address in brackets. */
export const bracket = (host: string) => (net.isIPv6(host) ? `[${host}]` : host);
const unbracket = (host: string) => (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host);

function errText(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e?.code ? `${e.code}${e.message && !e.message.includes(e.code) ? ` ${e.message}` : ''}` : String(e?.message ?? err);
}

export class SipEndpoint {
  readonly options: SipEndpointOptions;
  #udp?: dgram.Socket;
  #tcp?: net.Server;
  #port = 0;
  #started = false;
  #stopped = false;
  readonly #conns = new Map<string, Connection>();
  readonly #client = new Map<string, ClientTx>();
  readonly #server = new Map<string, ServerTx>();
  /** INVITE 2xx retransmissions waiting for the ACK: Call-ID + CSeq number → server transaction. */
  readonly #awaitingAck = new Map<string, ServerTx>();
  readonly #dialogs = new Map<string, RequestHandler>();
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(options: SipEndpointOptions) {
    this.options = options;
  }

  /** The bound port (after start()). */
  get port(): number {
    return this.#port;
  }

  get host(): string {
    return this.options.host;
  }

  /** The host:port peers should use for us (Via sent-by, Contact). */
  get advertised(): { host: string; port: number } {
    return { host: this.options.advertiseHost ?? this.options.host, port: this.options.advertisePort ?? this.#port };
  }

  async start(): Promise<void> {
    if (this.#started) return;
    const listen = this.options.listen ?? ['UDP', 'TCP'];
    const { host } = this.options;
    if (!net.isIP(host)) throw new Error(`SIP listener host must be an IP address, got ${JSON.stringify(host)}`);
    // With port 0 the UDP socket picks the port and TCP must get the same one; another process may hold
    // it on TCP, so try a few times.
    const attempts = this.options.port === 0 ? 20 : 1;
    let lastError: unknown;
    for (let i = 0; i < attempts; i++) {
      try {
        let port = this.options.port;
        if (listen.includes('UDP')) port = await this.#bindUdp(host, port);
        if (listen.includes('TCP')) port = await this.#listenTcp(host, port);
        this.#port = port;
        this.#started = true;
        this.options.log?.info?.({ host, port, listen }, 'SIP endpoint listening');
        return;
      } catch (err) {
        lastError = err;
        await this.#closeListeners();
        if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') break;
      }
    }
    const e = lastError as NodeJS.ErrnoException & { transport?: string; port?: number };
    const why = e.code === 'EADDRINUSE' ? 'address already in use' : e.code === 'EADDRNOTAVAIL' ? 'address not available on this machine' : errText(e);
    throw new Error(`SIP endpoint cannot listen on ${e.transport ?? ''} ${bracket(host)}:${e.port ?? this.options.port}: ${why}`.replace('  ', ' '), { cause: e });
  }

  #bindUdp(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const sock = dgram.createSocket({ type: net.isIPv6(host) ? 'udp6' : 'udp4', reuseAddr: false });
      const onError = (err: NodeJS.ErrnoException) => {
        sock.close();
        reject(Object.assign(err, { transport: 'UDP', port }));
      };
      sock.once('error', onError);
      sock.bind({ address: host, port, exclusive: true }, () => {
        sock.off('error', onError);
        sock.on('error', (err) => this.options.log?.error?.({ err: errText(err) }, 'SIP UDP socket error'));
        sock.on('message', (buf, rinfo) => this.#onDatagram(buf, rinfo));
        this.#udp = sock;
        resolve(sock.address().port);
      });
    });
  }

  #listenTcp(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const server = net.createServer((socket) => this.#adopt(socket, 'TCP'));
      const onError = (err: NodeJS.ErrnoException) => {
        server.close();
        reject(Object.assign(err, { transport: 'TCP', port }));
      };
      server.once('error', onError);
      server.listen({ host, port, exclusive: true }, () => {
        server.off('error', onError);
        server.on('error', (err) => this.options.log?.error?.({ err: errText(err) }, 'SIP TCP listener error'));
        this.#tcp = server;
        resolve((server.address() as net.AddressInfo).port);
      });
    });
  }

  async #closeListeners(): Promise<void> {
    const udp = this.#udp;
    const tcp = this.#tcp;
    this.#udp = undefined;
    this.#tcp = undefined;
    if (udp) await new Promise<void>((r) => udp.close(() => r()));
    if (tcp) await new Promise<void>((r) => tcp.close(() => r()));
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    for (const tx of this.#client.values()) {
      this.#clearTx(tx);
      if (!tx.done) {
        tx.done = true;
        tx.reject(new SipTransportError(`SIP endpoint stopped before ${tx.method} got a final response`));
      }
    }
    this.#client.clear();
    for (const st of this.#server.values()) this.#clearServerTx(st);
    this.#server.clear();
    this.#awaitingAck.clear();
    for (const c of this.#conns.values()) c.socket.destroy();
    this.#conns.clear();
    await this.#closeListeners();
  }

  // -------------------------------------------------------------------------------------------
  // Helpers for building messages

  /** A Via for a request we send on `transport` (rport asks the peer to answer where it came from). */
  viaFor(transport: Transport, branch = newBranch()): string {
    const { host, port } = this.advertised;
    return formatVia({ transport, host: bracket(host), port, params: { branch, rport: null } });
  }

  /** `<sip:user@host:port;transport=tcp>` for our Contact; params are added after the URI. */
  contactFor(user: string | undefined, transport: Transport = 'UDP', params: Record<string, string | null> = {}): string {
    const { host, port } = this.advertised;
    const t = transport === 'UDP' ? '' : `;transport=${transport.toLowerCase()}`;
    const uri = `sip:${user ? `${user}@` : ''}${bracket(host)}:${port}${t}`;
    return formatNameAddr({ uri, params });
  }

  /** Claims the in-dialog requests of a Call-ID (BYE, re-INVITE, INFO…); returns the release function. */
  onDialog(callId: string, handler: RequestHandler): () => void {
    this.#dialogs.set(callId, handler);
    return () => {
      if (this.#dialogs.get(callId) === handler) this.#dialogs.delete(callId);
    };
  }

  // -------------------------------------------------------------------------------------------
  // Client side

  /**
   * Sends a request in a client transaction and resolves with its final response. Adds our Via
   * (with a new branch) when the request has none, and Max-Forwards when missing. Non-2xx finals
   * to INVITE are ACKed here; a 2xx is the caller's to ACK (RFC 3261 §13.2.2.4).
   */
  async request(req: SipRequest, dest: Destination, opts: RequestOptions = {}): Promise<SipResponse> {
    if (this.#stopped || !this.#started) throw new SipTransportError('SIP endpoint is not running');
    if (req.method === 'ACK') throw new Error('ACK is not a transaction: use send()');
    const to = await this.#resolve(dest);
    this.#prepare(req, to.transport);
    const via = parseVia(topVia(req));
    const branch = via.params.branch ?? '';
    const cseq = parseCSeq(req.headers.get('cseq') ?? '');
    const key = `${branch}|${cseq.method}`;
    if (this.#client.has(key)) throw new Error(`a ${cseq.method} transaction with branch ${branch} is already running`);

    return new Promise<SipResponse>((resolve, reject) => {
      const tx: ClientTx = {
        key, method: cseq.method, req, bytes: serialize(req), dest: to, done: false, provisional: false, opts, resolve, reject,
      };
      this.#client.set(key, tx);
      if (opts.signal) {
        const onAbort = () => {
          if (tx.done) return;
          if (tx.method !== 'INVITE') return this.#finishTx(tx, new SipAbortError(`${tx.method} abandoned`));
          // An abandoned INVITE stays matchable for a while so a late final still gets its ACK
          // (non-2xx) or reaches on2xxRetransmit (2xx) and the caller can end that dialog.
          tx.done = true;
          clearTimeout(tx.retransmit);
          clearTimeout(tx.timeout);
          tx.linger = this.#later(() => this.#client.delete(tx.key), 64 * T1);
          tx.reject(new SipAbortError('INVITE abandoned'));
        };
        if (opts.signal.aborted) return onAbort();
        opts.signal.addEventListener('abort', onAbort, { once: true });
        const release = () => opts.signal!.removeEventListener('abort', onAbort);
        const { resolve: res0, reject: rej0 } = tx;
        tx.resolve = (r) => { release(); res0(r); };
        tx.reject = (e) => { release(); rej0(e); };
      }
      const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
      tx.timeout = setTimeout(() => {
        this.#finishTx(tx, new SipTimeoutError(`no final response to ${tx.method} from ${to.transport.toLowerCase()}:${bracket(to.address)}:${to.port} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#transmit(tx).then(() => {
        if (to.transport === 'UDP' && !tx.done) this.#scheduleRetransmit(tx, T1);
      }, (err: unknown) => this.#finishTx(tx, err instanceof Error ? err : new Error(String(err))));
    });
  }

  /** Sends a message outside any transaction (the ACK to a 2xx, a stateless reply). */
  async send(msg: SipMessage, dest: Destination): Promise<void> {
    if (this.#stopped || !this.#started) throw new SipTransportError('SIP endpoint is not running');
    const to = await this.#resolve(dest);
    if (msg.kind === 'request') this.#prepare(msg, to.transport);
    const bytes = serialize(msg);
    if (to.transport === 'UDP') this.#sendUdp(bytes, msg, to);
    else {
      const conn = await this.#connection(to);
      this.#write(conn, bytes, msg);
    }
  }

  #prepare(req: SipRequest, transport: Transport): void {
    if (!req.headers.has('via')) req.headers.prepend('Via', this.viaFor(transport));
    if (!req.headers.has('max-forwards')) req.headers.append('Max-Forwards', 70);
    if (this.options.userAgent && !req.headers.has('user-agent')) req.headers.append('User-Agent', this.options.userAgent);
  }

  async #resolve(dest: Destination): Promise<Resolved> {
    const host = unbracket(dest.host);
    let address = host;
    let all = [host];
    if (!net.isIP(host)) {
      try {
        const found = await dns.lookup(host, { all: true, order: 'verbatim' });
        if (found.length === 0) throw Object.assign(new Error(`could not resolve ${host}`), { code: 'ENOTFOUND' });
        all = found.map((a) => a.address);
        address = all[0];
      } catch (err) {
        throw new SipTransportError(`cannot resolve SIP host ${host}: ${errText(err)}`, { cause: err });
      }
    }
    const refuse = this.options.refuseTarget;
    if (refuse) {
      for (const a of all) {
        const why = refuse(a, a === host ? undefined : host);
        if (why !== null) throw new SipTargetRefusedError(why, a);
      }
    }
    if (!Number.isInteger(dest.port) || dest.port < 1 || dest.port > 65535) throw new SipTransportError(`bad SIP port ${dest.port}`);
    const to: Resolved = { transport: dest.transport, address, port: dest.port, ...(address !== host ? { name: host } : {}) };
    if (this.#isSelf(to)) {
      throw new SipTransportError(`next hop ${dest.transport.toLowerCase()}:${bracket(host)}:${dest.port} is this endpoint's own address`);
    }
    return to;
  }

  #isSelf(to: Resolved): boolean {
    if (to.port !== this.#port) return false;
    if (to.transport === 'UDP' ? !this.#udp : !this.#tcp) return false;
    const host = this.options.host;
    if (to.address === host) return true;
    if (host === '0.0.0.0' || host === '::') {
      if (to.address.startsWith('127.') || to.address === '::1' || to.address === '0.0.0.0' || to.address === '::') return true;
      return Object.values(os.networkInterfaces()).some((list) => list?.some((i) => i.address === to.address));
    }
    return false;
  }

  async #transmit(tx: ClientTx): Promise<void> {
    if (tx.dest.transport === 'UDP') {
      this.#sendUdp(tx.bytes, tx.req, tx.dest);
      return;
    }
    const conn = await this.#connection(tx.dest);
    tx.conn = conn;
    if (tx.done) return;
    this.#write(conn, tx.bytes, tx.req);
  }

  #scheduleRetransmit(tx: ClientTx, interval: number): void {
    tx.retransmit = setTimeout(() => {
      if (tx.done) return;
      // INVITE: Timer A doubles without a cap and stops at the first provisional; others: Timer E,
      // doubling up to T2 and then every T2 (also after a provisional).
      if (tx.method === 'INVITE' && tx.provisional) return;
      this.#sendUdp(tx.bytes, tx.req, tx.dest);
      const next = tx.method === 'INVITE' ? interval * 2 : Math.min(interval * 2, T2);
      this.#scheduleRetransmit(tx, next);
    }, interval);
  }

  #clearTx(tx: ClientTx): void {
    clearTimeout(tx.retransmit);
    clearTimeout(tx.timeout);
    clearTimeout(tx.linger);
  }

  #finishTx(tx: ClientTx, err: Error): void {
    if (tx.done) return;
    tx.done = true;
    this.#clearTx(tx);
    this.#client.delete(tx.key);
    tx.reject(err);
  }

  #onResponse(res: SipResponse, remote: Remote): void {
    const top = res.headers.getAll('via')[0];
    const cseqText = res.headers.get('cseq');
    if (!top || !cseqText) {
      this.options.log?.debug?.({ remote }, 'SIP response without Via or CSeq dropped');
      return;
    }
    const via = parseVia(top);
    const cseq = parseCSeq(cseqText);
    const tx = this.#client.get(`${via.params.branch ?? ''}|${cseq.method}`);
    if (!tx) {
      this.options.log?.debug?.({ remote, status: res.status, method: cseq.method }, 'SIP response matching no transaction dropped');
      return;
    }
    if (tx.done) {
      // A retransmitted final: re-ACK a non-2xx INVITE final; tell the caller about a repeated 2xx.
      if (tx.method === 'INVITE' && res.status >= 300) {
        tx.ack ??= serialize(this.#ackFor(tx.req, res));
        this.#resendAck(tx);
      } else if (tx.method === 'INVITE' && res.status >= 200 && res.status < 300) this.#safe(() => tx.opts.on2xxRetransmit?.(res));
      return;
    }
    if (res.status < 200) {
      tx.provisional = true;
      if (tx.method === 'INVITE') {
        // Proceeding: no more retransmissions and no Timer B; the caller ends the ringing (CANCEL).
        clearTimeout(tx.retransmit);
        clearTimeout(tx.timeout);
      } else if (tx.dest.transport === 'UDP') {
        clearTimeout(tx.retransmit);
        this.#scheduleRetransmit(tx, T2);
      }
      this.#safe(() => tx.opts.onProvisional?.(res));
      return;
    }
    tx.done = true;
    clearTimeout(tx.retransmit);
    clearTimeout(tx.timeout);
    if (tx.method === 'INVITE') {
      if (res.status >= 300) {
        tx.ack = serialize(this.#ackFor(tx.req, res));
        this.#resendAck(tx);
      }
      // Timer D (non-2xx) / the 2xx retransmission window: keep the transaction to absorb repeats.
      tx.linger = this.#later(() => this.#client.delete(tx.key), tx.dest.transport === 'UDP' || res.status < 300 ? 64 * T1 : 0);
    } else {
      this.#client.delete(tx.key);
    }
    tx.resolve(res);
  }

  #resendAck(tx: ClientTx): void {
    if (!tx.ack) return;
    const msg = parseMessage(tx.ack);
    if (tx.dest.transport === 'UDP') this.#sendUdp(tx.ack, msg, tx.dest);
    else if (tx.conn && !tx.conn.closed) this.#write(tx.conn, tx.ack, msg);
  }

  /** RFC 3261 §17.1.1.3: the ACK of a non-2xx final belongs to the INVITE's transaction. */
  #ackFor(invite: SipRequest, res: SipResponse): SipRequest {
    const h = new SipHeaders();
    h.append('Via', topVia(invite));
    for (const r of invite.headers.getAll('route')) h.append('Route', r);
    h.append('Max-Forwards', 70);
    h.append('From', invite.headers.get('from')!);
    h.append('To', res.headers.get('to') ?? invite.headers.get('to')!);
    h.append('Call-ID', invite.headers.get('call-id')!);
    h.append('CSeq', `${parseCSeq(invite.headers.get('cseq')!).seq} ACK`);
    return { kind: 'request', method: 'ACK', uri: invite.uri, headers: h, body: Buffer.alloc(0) };
  }

  // -------------------------------------------------------------------------------------------
  // Server side

  /**
   * Answers a request received through onRequest or a dialog handler. The first call for a
   * transaction fixes the To tag; later calls (a provisional then a final) keep it. Responses to a
   * transaction that already has a final are ignored.
   */
  respond(req: SipRequest, ctx: RequestContext, status: number, reason: string, headers?: SipHeaders | Record<string, string | number> | Array<[string, string]>, body?: Buffer | string): void {
    if (req.method === 'ACK') return;
    const key = this.#serverKey(req);
    let st = this.#server.get(key);
    if (!st) {
      // Not recorded (a request handled after the transaction expired): answer statelessly.
      st = { key, method: req.method, toTag: newTag(), remote: ctx.remote, conn: ctx.conn as Connection | undefined, acked: false };
    }
    if (st.last && st.last.status >= 200) {
      this.options.log?.debug?.({ method: req.method, status }, 'second final response to a SIP request ignored');
      return;
    }
    const h = new SipHeaders();
    const vias = req.headers.getAll('via');
    vias.forEach((v, i) => h.append('Via', i === 0 ? this.#receivedVia(v, ctx.remote) : v));
    h.append('From', req.headers.get('from') ?? '');
    const to = req.headers.get('to') ?? '';
    let toValue = to;
    try {
      const na = parseNameAddr(to);
      if (na.params.tag === undefined && status > 100) toValue = `${to};tag=${st.toTag}`;
    } catch { /* keep To as received */ }
    h.append('To', toValue);
    h.append('Call-ID', req.headers.get('call-id') ?? '');
    h.append('CSeq', req.headers.get('cseq') ?? '');
    if (this.options.userAgent) h.append('Server', this.options.userAgent);
    const extra = headers instanceof SipHeaders ? headers.entries() : Array.isArray(headers) ? headers : Object.entries(headers ?? {});
    for (const [n, v] of extra) h.append(n, v);
    const res: SipResponse = { kind: 'response', status, reason, headers: h, body: body === undefined ? Buffer.alloc(0) : Buffer.from(body) };
    const bytes = serialize(res);
    st.last = { bytes, msg: res, status };
    this.#sendResponse(st, bytes, res);

    if (status >= 200) {
      clearTimeout(st.retransmit);
      if (req.method === 'INVITE' && st.remote.transport === 'UDP') {
        // Timer G: retransmit the final until its ACK (non-2xx: same transaction; 2xx: by Call-ID and CSeq).
        if (status < 300) this.#awaitingAck.set(this.#ackKey(req), st);
        this.#retransmitFinal(st, T1, status < 300 ? req : undefined);
      }
      clearTimeout(st.expire);
      st.expire = this.#later(() => this.#dropServerTx(st!, req), 64 * T1);
    }
  }

  #retransmitFinal(st: ServerTx, interval: number, invite2xx?: SipRequest): void {
    st.retransmit = this.#later(() => {
      if (st.acked || !st.last || this.#stopped) return;
      this.#sendResponse(st, st.last.bytes, st.last.msg);
      this.#retransmitFinal(st, Math.min(interval * 2, T2), invite2xx);
    }, interval);
  }

  #dropServerTx(st: ServerTx, req: SipRequest): void {
    this.#clearServerTx(st);
    if (this.#server.get(st.key) === st) this.#server.delete(st.key);
    if (req.method === 'INVITE') this.#awaitingAck.delete(this.#ackKey(req));
  }

  #clearServerTx(st: ServerTx): void {
    clearTimeout(st.retransmit);
    clearTimeout(st.expire);
  }

  #ackKey(req: SipRequest): string {
    return `${req.headers.get('call-id')}|${parseCSeq(req.headers.get('cseq') ?? '0 X').seq}`;
  }

  #serverKey(req: SipRequest): string {
    const via = parseVia(topVia(req) ?? '');
    const method = req.method === 'ACK' ? 'INVITE' : req.method;
    const branch = via.params.branch;
    if (branch && branch.startsWith(MAGIC)) return `${branch}|${via.host}:${via.port ?? ''}|${method}`;
    // RFC 2543 peers: no usable branch, match on the dialog identifiers instead.
    const from = parseNameAddr(req.headers.get('from') ?? '').params.tag ?? '';
    return `${req.headers.get('call-id')}|${from}|${parseCSeq(req.headers.get('cseq') ?? '0 X').seq}|${method}`;
  }

  /** RFC 3261 §18.2.1 and RFC 3581: note where the request really came from in the top Via. */
  #receivedVia(text: string, remote: Remote): string {
    try {
      const via = parseVia(text);
      const params = { ...via.params };
      if (unbracket(via.host) !== remote.address) params.received = remote.address;
      if ('rport' in params) {
        params.rport = String(remote.port);
        params.received = remote.address;
      }
      return formatVia({ ...via, params });
    } catch {
      return text;
    }
  }

  #sendResponse(st: ServerTx, bytes: Buffer, msg: SipResponse): void {
    if (st.remote.transport === 'UDP') {
      // With rport (RFC 3581) or without, the source address answers; only the port differs.
      const via = parseVia(topVia(msg) ?? '');
      const port = 'rport' in via.params ? st.remote.port : via.port ?? 5060;
      this.#sendUdp(bytes, msg, { transport: 'UDP', address: st.remote.address, port });
      return;
    }
    const conn = st.conn;
    if (conn && !conn.closed) {
      this.#write(conn, bytes, msg);
      return;
    }
    // The connection is gone: open one to where the request came from (RFC 3261 §18.2.2).
    this.#connection({ transport: st.remote.transport, address: st.remote.address, port: st.remote.port })
      .then((c) => this.#write(c, bytes, msg))
      .catch((err) => this.options.log?.warn?.({ err: errText(err), remote: st.remote }, 'SIP response could not be sent'));
  }

  async #onRequest(req: SipRequest, remote: Remote, conn?: Connection): Promise<void> {
    for (const name of ['via', 'call-id', 'cseq', 'from', 'to']) {
      if (!req.headers.has(name)) {
        this.options.log?.debug?.({ remote, method: req.method, missing: name }, 'SIP request without a mandatory header dropped');
        return;
      }
    }
    parseVia(topVia(req));
    parseCSeq(req.headers.get('cseq')!);
    const key = this.#serverKey(req);
    const ctx: RequestContext = { remote, conn };

    if (req.method === 'ACK') {
      const st = this.#server.get(key);
      if (st && st.last && st.last.status >= 300) {
        st.acked = true; // the ACK of our non-2xx final: absorbed here
        clearTimeout(st.retransmit);
        return;
      }
      const ok = this.#awaitingAck.get(this.#ackKey(req));
      if (ok) {
        ok.acked = true;
        clearTimeout(ok.retransmit);
        this.#awaitingAck.delete(this.#ackKey(req));
      }
      await this.#dispatch(req, ctx, false);
      return;
    }

    const existing = this.#server.get(key);
    if (existing) {
      // A retransmission: repeat the last response, if any (RFC 3261 §17.2).
      if (existing.last) this.#sendResponse(existing, existing.last.bytes, existing.last.msg);
      return;
    }
    if (this.#server.size >= MAX_SERVER_TX) {
      this.options.log?.warn?.({ remote }, 'too many SIP server transactions; request dropped');
      return;
    }
    const st: ServerTx = { key, method: req.method, toTag: newTag(), remote, conn, acked: false };
    this.#server.set(key, st);
    // Forget it eventually even if nobody answers.
    st.expire = this.#later(() => this.#dropServerTx(st, req), 64 * T1 + 180_000);

    if (req.method === 'CANCEL') {
      const inviteKey = key.replace(/\|CANCEL$/, '|INVITE');
      const invite = this.#server.get(inviteKey);
      if (!invite) {
        this.respond(req, ctx, 481, 'Call/Transaction Does Not Exist');
        return;
      }
      this.respond(req, ctx, 200, 'OK');
      if (!invite.last || invite.last.status < 200) {
        const inviteReq = this.#pendingInvites.get(inviteKey);
        if (inviteReq) this.respond(inviteReq, { remote: invite.remote, conn: invite.conn }, 487, 'Request Terminated');
      }
      await this.#dispatch(req, ctx, false);
      return;
    }
    if (req.method === 'INVITE') {
      this.#pendingInvites.set(key, req);
      this.#later(() => this.#pendingInvites.delete(key), 64 * T1 + 180_000);
    }
    await this.#dispatch(req, ctx, true);
  }

  readonly #pendingInvites = new Map<string, SipRequest>();

  async #dispatch(req: SipRequest, ctx: RequestContext, mustAnswer: boolean): Promise<void> {
    const handler = this.#dialogs.get(req.headers.get('call-id') ?? '') ?? this.options.onRequest;
    try {
      if (handler) await handler(req, ctx);
      else if (mustAnswer) {
        if (req.method === 'OPTIONS') this.respond(req, ctx, 200, 'OK', { Allow: 'INVITE, ACK, CANCEL, BYE, OPTIONS' });
        else this.respond(req, ctx, 501, 'Not Implemented');
      }
    } catch (err) {
      this.options.log?.error?.({ err: errText(err), method: req.method }, 'SIP request handler failed');
      if (mustAnswer) this.respond(req, ctx, 500, 'Server Internal Error');
    }
  }

  // -------------------------------------------------------------------------------------------
  // Transports

  #onDatagram(buf: Buffer, rinfo: dgram.RemoteInfo): void {
    const remote: Remote = { transport: 'UDP', address: rinfo.address, port: rinfo.port };
    // Keep-alives (CRLF) and empty datagrams are not messages.
    if (buf.length <= 4 && /^[\r\n]*$/.test(buf.toString('latin1'))) return;
    let msg: SipMessage;
    try {
      msg = parseMessage(buf);
    } catch (err) {
      this.options.log?.debug?.({ remote, err: errText(err) }, 'unparseable SIP datagram dropped');
      return;
    }
    this.#onMessage(msg, remote, buf);
  }

  #onMessage(msg: SipMessage, remote: Remote, raw: Buffer, conn?: Connection): void {
    this.#capture('in', msg, remote, raw);
    try {
      if (msg.kind === 'response') this.#onResponse(msg, remote);
      else {
        this.#onRequest(msg, remote, conn).catch((err) => {
          this.options.log?.warn?.({ remote, err: errText(err) }, 'SIP request dropped');
        });
      }
    } catch (err) {
      this.options.log?.debug?.({ remote, err: errText(err) }, 'SIP message dropped');
    }
  }

  #capture(dir: 'in' | 'out', msg: SipMessage, remote: Remote, raw: Buffer): void {
    if (!this.options.onMessage) return;
    this.#safe(() => this.options.onMessage!(dir, msg, remote, raw));
  }

  #safe(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.options.log?.warn?.({ err: errText(err) }, 'SIP callback failed');
    }
  }

  #sendUdp(bytes: Buffer, msg: SipMessage, to: Resolved): void {
    const sock = this.#udp;
    if (!sock) {
      this.options.log?.warn?.({ to }, 'no UDP listener to send from');
      return;
    }
    const remote: Remote = { transport: 'UDP', address: to.address, port: to.port };
    if (net.isIPv6(to.address) !== net.isIPv6(this.options.host) && this.options.host !== '::') {
      this.options.log?.warn?.({ to }, 'SIP datagram to another address family than the listener dropped');
      return;
    }
    this.#capture('out', msg, remote, bytes);
    sock.send(bytes, to.port, to.address, (err) => {
      if (err) this.options.log?.debug?.({ to, err: errText(err) }, 'SIP datagram not sent');
    });
  }

  #write(conn: Connection, bytes: Buffer, msg: SipMessage): void {
    if (conn.closed) return;
    this.#capture('out', msg, conn.remote, bytes);
    conn.socket.write(bytes);
  }

  #connKey(transport: Transport, address: string, port: number): string {
    return `${transport}|${address}|${port}`;
  }

  /** The open connection to a destination, or a new one (TCP or TLS). */
  async #connection(to: Resolved): Promise<Connection> {
    const key = this.#connKey(to.transport, to.address, to.port);
    const existing = this.#conns.get(key);
    if (existing && !existing.closed) {
      await existing.ready;
      return existing;
    }
    if (to.transport === 'UDP') throw new Error('UDP has no connections');
    const host = this.options.host;
    // Bind outgoing connections to our address so peers see it, when the families match.
    const localAddress = host === '0.0.0.0' || host === '::' || net.isIPv6(host) !== net.isIPv6(to.address) ? undefined : host;
    let socket: net.Socket;
    if (to.transport === 'TLS') {
      const t = this.options.tls ?? {};
      // tls.connect has no localAddress: bind the TCP socket ourselves so the peer sees our address.
      const raw = net.connect({ host: to.address, port: to.port, localAddress });
      socket = tls.connect({
        socket: raw, host: to.name ?? to.address, ca: t.ca, cert: t.cert, key: t.key,
        rejectUnauthorized: t.rejectUnauthorized ?? true,
        servername: to.name,
      });
      raw.once('error', (err) => socket.destroy(err));
    } else {
      socket = net.connect({ host: to.address, port: to.port, localAddress });
    }
    const conn = this.#adopt(socket, to.transport, { transport: to.transport, address: to.address, port: to.port });
    await conn.ready;
    return conn;
  }

  #adopt(socket: net.Socket, transport: 'TCP' | 'TLS', outbound?: Remote): Connection {
    const remote: Remote = outbound ?? { transport, address: socket.remoteAddress ?? '', port: socket.remotePort ?? 0 };
    const key = this.#connKey(transport, remote.address, remote.port);
    const conn: Connection = { key, transport, socket, remote, framer: new StreamFramer(), ready: Promise.resolve(), closed: false };
    if (outbound) {
      conn.ready = new Promise<void>((resolve, reject) => {
        const ev = transport === 'TLS' ? 'secureConnect' : 'connect';
        socket.once(ev, () => resolve());
        socket.once('error', (err) => reject(new SipTransportError(`${transport} connection to ${bracket(remote.address)}:${remote.port} failed: ${errText(err)}`, { cause: err, connection: true })));
      });
      conn.ready.catch(() => undefined);
    }
    socket.setKeepAlive(true, 30_000);
    socket.setNoDelay(true);
    this.#conns.set(key, conn);
    if (this.#stopped) socket.destroy();
    socket.on('data', (chunk: Buffer) => {
      let msgs: Array<{ msg: SipMessage; raw: Buffer }>;
      try {
        msgs = conn.framer.pushRaw(chunk);
      } catch (err) {
        // Framing is lost on a stream: the only safe thing is to drop the connection.
        this.options.log?.warn?.({ remote, err: errText(err) }, 'unparseable SIP stream; connection closed');
        socket.destroy();
        return;
      }
      for (const m of msgs) this.#onMessage(m.msg, remote, m.raw, conn);
    });
    socket.on('error', (err) => this.options.log?.debug?.({ remote, err: errText(err) }, 'SIP connection error'));
    socket.on('close', () => {
      conn.closed = true;
      if (this.#conns.get(key) === conn) this.#conns.delete(key);
      for (const tx of this.#client.values()) {
        if (tx.conn === conn && !tx.done) this.#finishTx(tx, new SipTransportError(`${transport} connection to ${bracket(remote.address)}:${remote.port} closed before ${tx.method} got a final response`, { connection: true }));
      }
    });
    return conn;
  }

  /** A timer that stop() clears and that does not keep the process alive. */
  #later(fn: () => void, ms: number): NodeJS.Timeout {
    const t = setTimeout(() => {
      this.#timers.delete(t);
      fn();
    }, ms);
    t.unref();
    this.#timers.add(t);
    return t;
  }
}

export type { SipMessage, SipRequest, SipResponse, Via };
