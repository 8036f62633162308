// Registration with a registrar (RFC 3261 §10): one REGISTER exchange with digest
// authentication (registerOnce), and a Registration that keeps a binding alive by refreshing at
// half the granted expiry, backs off on failure, and removes the binding on unregister().
import { authorize, challengesOf, type Challenge } from './digest.ts';
import { SipTimeoutError, failureText, newBranch, newCallId, newTag, type Destination, type SipEndpoint } from './endpoint.ts';
import { parseNameAddr, parseUri, SipHeaders, type SipRequest, type SipResponse } from './message.ts';

export interface RegistrationConfig {
  /** The address of record, `sip:user@domain` (a bare `user@domain` is read as sip:). */
  aor: string;
  /** The user part of our Contact; default the AOR's user. */
  username?: string;
  /** The digest user name; default `username`, then the AOR's user. */
  authUsername?: string;
  password: string;
  /** When set, only challenges of this realm are answered (case-insensitive). */
  realm?: string;
  /** Where REGISTERs go: the registrar or an outbound proxy in front of it. */
  registrar: Destination;
}

export interface RegisterResult {
  ok: boolean;
  /** The final SIP status, when one arrived. */
  status?: number;
  reason?: string;
  /** Seconds granted (0 after an unregister). */
  expires?: number;
  /** Why it failed without a SIP answer (timeout, transport), or what was wrong with the answer. */
  error?: string;
}

/** State kept between the REGISTERs of one binding: same Call-ID, increasing CSeq, last challenges. */
export interface RegisterSession {
  callId: string;
  fromTag: string;
  cseq: number;
  challenges: Map<Challenge['kind'], { challenge: Challenge; nc: number }>;
}

export function newRegisterSession(): RegisterSession {
  return { callId: newCallId(), fromTag: newTag(), cseq: 0, challenges: new Map() };
}

export function aorUri(aor: string): string {
  const t = aor.trim();
  return /^sips?:/i.test(t) ? t : `sip:${t}`;
}

/** Observed about one exchange (for tests and logs): how many stale nonces were answered. */
export interface ExchangeStats { staleAnswered: number; challengesAnswered: number }

/** Who we are in the requests of a registration: its AOR, our Contact's user and the digest user. */
export interface Identity { aor: string; host: string; port?: number; scheme: string; contactUser: string; authUser: string }

/** The identity of a configuration, or why its AOR cannot be used. */
export function identityOf(cfg: RegistrationConfig): Identity | { error: string } {
  let uri;
  try {
    uri = parseUri(aorUri(cfg.aor));
  } catch {
    return { error: `aor is not a SIP URI: ${cfg.aor}` };
  }
  if (!uri.user) return { error: `aor has no user part: ${cfg.aor}` };
  return {
    aor: aorUri(cfg.aor), host: uri.host, port: uri.port, scheme: uri.scheme,
    contactUser: cfg.username || uri.user, authUser: cfg.authUsername || cfg.username || uri.user,
  };
}

/** A failed exchange: the final SIP status and reason when one arrived, else what went wrong. */
export type ExchangeFailure = { ok: false; status?: number; reason?: string; error?: string };

/**
 * One authenticated transaction chain on behalf of a registration, shared by REGISTER and
 * SUBSCRIBE: the request `build(expires)` makes (everything but the credentials) is sent with an
 * Authorization for every challenge the session keeps, until a final answer that is not a
 * challenge. A 401/407 is answered with the configuration's credentials — a stale nonce again
 * without counting as a failure, a second challenge after our answer means the credentials were
 * refused, only challenges of `cfg.realm` when set — and a 423 is retried with its Min-Expires.
 * Returns that final answer and the expiry last asked for. Never throws.
 */
export async function authenticatedExchange(
  endpoint: SipEndpoint, cfg: RegistrationConfig, method: string,
  opts: { expires: number; timeoutMs?: number; authUser: string; session: Pick<RegisterSession, 'challenges'>; stats?: ExchangeStats },
  build: (expires: number) => { uri: string; headers: SipHeaders },
): Promise<{ res: SipResponse; expires: number } | ExchangeFailure> {
  const { session, stats } = opts;
  let expires = Math.max(0, Math.floor(opts.expires));
  /** Challenges of this exchange we answered: a second non-stale one of the same kind means wrong credentials. */
  const answered = new Set<Challenge['kind']>();
  let staleRounds = 0;
  let intervalRetries = 0;
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);

  for (let round = 0; round < 8; round++) {
    const { uri, headers } = build(expires);
    for (const entry of session.challenges.values()) {
      const auth = authorize(entry.challenge, { username: opts.authUser, password: cfg.password }, method, uri, ++entry.nc);
      headers.append(auth.name, auth.value);
    }
    const req: SipRequest = { kind: 'request', method, uri, headers, body: Buffer.alloc(0) };
    let res: SipResponse;
    try {
      const left = deadline - Date.now();
      if (left <= 0) throw new SipTimeoutError(`${method} to ${cfg.registrar.host}:${cfg.registrar.port} did not complete in time`);
      res = await endpoint.request(req, cfg.registrar, { timeoutMs: left });
    } catch (err) {
      // Refused, closed and silent ports read alike (failureText): the answer is no port scanner.
      return { ok: false, error: failureText(err, cfg.registrar) };
    }

    if (res.status === 401 || res.status === 407) {
      const kind = res.status === 407 ? 'proxy' : 'www';
      const offered = challengesOf(res.headers, res.status);
      const usable = cfg.realm ? offered.filter((c) => c.realm.toLowerCase() === cfg.realm!.toLowerCase()) : offered;
      const c = usable[0];
      if (!c) {
        const realms = offered.map((o) => o.realm).join(', ');
        return { ok: false, status: res.status, reason: res.reason, error: offered.length ? `challenge for realm ${realms}, configured realm ${cfg.realm}` : 'no digest challenge we can answer' };
      }
      if (c.stale) {
        // Right credentials, old nonce: answer the new one; not a failure.
        if (++staleRounds > 3) return { ok: false, status: res.status, reason: res.reason, error: 'server keeps answering stale nonces' };
        if (stats) stats.staleAnswered++;
      } else if (answered.has(kind)) {
        // We answered a challenge from this exchange and were challenged again: wrong credentials.
        session.challenges.delete(kind);
        return { ok: false, status: res.status, reason: res.reason, error: 'credentials refused' };
      }
      answered.add(kind);
      if (stats) stats.challengesAnswered++;
      session.challenges.set(kind, { challenge: c, nc: 0 });
      continue;
    }
    if (res.status === 423 && intervalRetries++ < 2) {
      const min = Number(res.headers.get('min-expires'));
      if (Number.isFinite(min) && min > expires) {
        expires = Math.floor(min);
        continue;
      }
      return { ok: false, status: res.status, reason: res.reason, error: 'interval too brief without a usable Min-Expires' };
    }
    return { res, expires };
  }
  return { ok: false, error: `too many ${method} rounds` };
}

/**
 * One REGISTER transaction chain (authenticatedExchange). `expires` 0 removes our binding. Never
 * throws: failures come back as {ok: false}.
 */
export async function registerOnce(
  endpoint: SipEndpoint,
  cfg: RegistrationConfig,
  opts: { expires: number; timeoutMs?: number; session?: RegisterSession; stats?: ExchangeStats },
): Promise<RegisterResult> {
  const session = opts.session ?? newRegisterSession();
  const id = identityOf(cfg);
  if ('error' in id) return { ok: false, error: id.error };
  const requestUri = `${id.scheme}:${id.host}${id.port ? `:${id.port}` : ''}`;
  const transport = cfg.registrar.transport;
  const out = await authenticatedExchange(endpoint, cfg, 'REGISTER', { ...opts, authUser: id.authUser, session }, (expires) => {
    const headers = new SipHeaders();
    headers.append('Via', endpoint.viaFor(transport, newBranch()));
    headers.append('Max-Forwards', 70);
    headers.append('From', `<${id.aor}>;tag=${session.fromTag}`);
    headers.append('To', `<${id.aor}>`);
    headers.append('Call-ID', session.callId);
    headers.append('CSeq', `${++session.cseq} REGISTER`);
    headers.append('Contact', endpoint.contactFor(id.contactUser, transport, { expires: String(expires) }));
    headers.append('Expires', expires);
    headers.append('Allow', 'INVITE, ACK, CANCEL, BYE, OPTIONS');
    return { uri: requestUri, headers };
  });
  if (!('res' in out)) return out;
  const { res, expires } = out;
  if (res.status < 200 || res.status >= 300) return { ok: false, status: res.status, reason: res.reason };
  return { ok: true, status: res.status, reason: res.reason, expires: expires === 0 ? 0 : grantedExpiry(res, endpoint, id.contactUser, transport, expires) };
}

/** The expiry the registrar granted our binding: its Contact's expires, else Expires, else what we asked. */
function grantedExpiry(res: SipResponse, endpoint: SipEndpoint, user: string, transport: string, asked: number): number {
  const ours = endpoint.advertised;
  const ourTransport = transport.toLowerCase();
  for (const contact of res.headers.getAll('contact')) {
    try {
      const na = parseNameAddr(contact);
      const uri = parseUri(na.uri);
      const host = uri.host.replace(/^\[|\]$/g, '');
      const uriTransport = (uri.params.transport ?? 'udp').toLowerCase();
      if (uri.user === user && host === ours.host.toLowerCase() && (uri.port ?? 5060) === ours.port && uriTransport === ourTransport && na.params.expires != null) {
        const n = Number(na.params.expires);
        if (Number.isFinite(n)) return n;
      }
    } catch { /* another binding we cannot read */ }
  }
  const header = Number(res.headers.get('expires'));
  return res.headers.has('expires') && Number.isFinite(header) ? header : asked;
}

export interface RegistrationStatus {
  /** The last attempt succeeded. */
  ok: boolean;
  /** The last final SIP status and reason (absent after a timeout). */
  code?: number;
  reason?: string;
  /** When the binding runs out (null when not registered). */
  expiresAt: Date | null;
  lastAttemptAt: Date | null;
  /** The last failure's explanation. */
  error?: string;
  /** Consecutive failed attempts. */
  failures: number;
  /** When the next REGISTER is due (refresh or retry); null once stopped. */
  nextAttemptAt: Date | null;
}

export interface RegistrationOptions {
  /** Expiry to ask for, seconds (default 3600). */
  expires?: number;
  /** Per attempt (default 10 s). */
  timeoutMs?: number;
  /** First retry after a failure (default 10 s), doubling up to retryMaxMs (default 10 min), ±10 %. */
  retryMinMs?: number;
  retryMaxMs?: number;
  onStatus?: (status: RegistrationStatus) => void;
}

/**
 * Runs the attempts of something kept alive at a server (a binding, a subscription) one at a time,
 * and plans the next one: a refresh, or a retry after backoffMs.
 */
export class AttemptSchedule {
  running = false;
  #timer?: NodeJS.Timeout;
  #chain: Promise<unknown> = Promise.resolve();

  constructor(private readonly attempt: () => Promise<unknown>) {}

  /** Runs `fn` after every attempt or exchange queued before it, whatever their outcome. */
  serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.#chain.then(fn, fn);
    this.#chain = next.catch(() => undefined);
    return next;
  }

  /** Plans the next attempt in `ms`; returns when it is due (null once stopped). */
  schedule(ms: number): Date | null {
    clearTimeout(this.#timer);
    if (!this.running) return null;
    this.#timer = setTimeout(() => void this.serial(this.attempt), ms);
    return new Date(Date.now() + ms);
  }

  stop(): void {
    this.running = false;
    clearTimeout(this.#timer);
  }
}

/** The wait before retrying after `failures` consecutive failures: `min` doubling up to `max`, ±10 %. */
export function backoffMs(failures: number, min = 10_000, max = 600_000): number {
  const base = Math.min(max, min * 2 ** Math.max(0, failures - 1));
  return Math.round(base * (0.9 + Math.random() * 0.2));
}

/**
 * Keeps one binding registered. start() performs the first REGISTER and resolves with its result;
 * refreshes follow at half the granted expiry, failures retry with exponential backoff (±10 %).
 */
export class Registration {
  readonly session = newRegisterSession();
  readonly stats: ExchangeStats = { staleAnswered: 0, challengesAnswered: 0 };
  #status: RegistrationStatus = { ok: false, expiresAt: null, lastAttemptAt: null, failures: 0, nextAttemptAt: null };
  readonly #attempts = new AttemptSchedule(() => this.#attempt());

  constructor(readonly endpoint: SipEndpoint, readonly config: RegistrationConfig, readonly options: RegistrationOptions = {}) {}

  get status(): RegistrationStatus {
    return { ...this.#status };
  }

  async start(): Promise<RegisterResult> {
    this.#attempts.running = true;
    return this.#attempts.serial(() => this.#attempt());
  }

  /** Stops refreshing; the binding stays at the registrar until it expires. */
  stop(): void {
    this.#attempts.stop();
    this.#update({ nextAttemptAt: null });
  }

  /** Stops refreshing and removes our binding (REGISTER with Expires: 0). */
  async unregister(): Promise<RegisterResult> {
    this.stop();
    return this.#attempts.serial(async () => {
      const result = await registerOnce(this.endpoint, this.config, { expires: 0, timeoutMs: this.options.timeoutMs, session: this.session, stats: this.stats });
      this.#update({
        ok: result.ok, code: result.status, reason: result.reason, error: result.error, lastAttemptAt: new Date(),
        ...(result.ok ? { expiresAt: null } : {}),
      });
      return result;
    });
  }

  async #attempt(): Promise<RegisterResult> {
    if (!this.#attempts.running) return { ok: false, error: 'registration stopped' };
    const result = await registerOnce(this.endpoint, this.config, {
      expires: this.options.expires ?? 3600, timeoutMs: this.options.timeoutMs, session: this.session, stats: this.stats,
    });
    const now = new Date();
    if (result.ok && result.expires !== undefined && result.expires > 0) {
      const delay = Math.max(500, (result.expires * 1000) / 2);
      this.#update({
        ok: true, code: result.status, reason: result.reason, error: undefined, lastAttemptAt: now, failures: 0,
        expiresAt: new Date(now.getTime() + result.expires * 1000), nextAttemptAt: this.#attempts.schedule(delay),
      });
    } else {
      const failures = this.#status.failures + 1;
      const expiresAt = this.#status.expiresAt && this.#status.expiresAt > now ? this.#status.expiresAt : null;
      this.#update({
        ok: false, code: result.status, reason: result.reason, error: result.error ?? (result.ok ? 'registrar granted no expiry' : undefined),
        lastAttemptAt: now, failures, expiresAt, nextAttemptAt: this.#attempts.schedule(backoffMs(failures, this.options.retryMinMs, this.options.retryMaxMs)),
      });
    }
    return result;
  }

  #update(patch: Partial<RegistrationStatus>): void {
    this.#status = { ...this.#status, ...patch };
    try {
      this.options.onStatus?.(this.status);
    } catch { /* a listener's failure is not ours */ }
  }
}
