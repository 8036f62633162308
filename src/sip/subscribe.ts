// Presence subscription (RFC 6665, RFC 3856): SUBSCRIBE for the `presence` event package of an
// address of record, sent to the same next hop as the REGISTERs and answered with the same digest
// credentials; NOTIFYs of the dialog are answered 200 and read (Subscription-State, and the PIDF
// body's <basic> of RFC 3863). PresenceSubscription keeps one subscription alive: refresh at half
// the granted expiry, backoff after failures, a new dialog after the notifier ends one, and
// SUBSCRIBE with Expires: 0 on unsubscribe().
import { newBranch, newCallId, newTag, type RequestContext, type SipEndpoint } from './endpoint.ts';
import { parseNameAddr, SipHeaders, type SipRequest } from './message.ts';
import { AttemptSchedule, authenticatedExchange, backoffMs, identityOf, type ExchangeStats, type RegisterSession, type RegistrationConfig } from './register.ts';

// -------------------------------------------------------------------------------------------
// Parsing

export interface SubscriptionState {
  /** active, pending, terminated (lowercased), or another value a notifier sent (treat as pending, RFC 6665 §4.1.3). */
  state: string;
  expires?: number;
  reason?: string;
  /** Seconds, from retry-after. */
  retryAfter?: number;
}

/** The Subscription-State header (RFC 6665 §8.2.3): `active;expires=3599`, `terminated;reason=timeout;retry-after=30`. */
export function parseSubscriptionState(value: string | undefined | null): SubscriptionState | undefined {
  if (!value) return undefined;
  const [head, ...params] = value.split(';');
  const state = head.trim().toLowerCase();
  if (!/^[a-z0-9.!%*_+`'~-]+$/.test(state)) return undefined;
  const out: SubscriptionState = { state };
  for (const p of params) {
    const eq = p.indexOf('=');
    const name = (eq < 0 ? p : p.slice(0, eq)).trim().toLowerCase();
    const v = eq < 0 ? '' : p.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1');
    const n = Number(v);
    if (name === 'expires' && v !== '' && Number.isInteger(n) && n >= 0) out.expires = n;
    else if (name === 'retry-after' && v !== '' && Number.isInteger(n) && n >= 0) out.retryAfter = n;
    else if (name === 'reason' && /^[A-Za-z0-9.!%*_+`'~-]+$/.test(v)) out.reason = v.toLowerCase();
  }
  return out;
}

/**
 * The presence a PIDF document (RFC 3863) says: `open` when any tuple's <basic> is open, `closed`
 * when there are <basic> elements and none is open, null without a readable <basic> (no body, an
 * empty one, another format, garbage). Namespace prefixes are allowed.
 */
export function parsePidfBasic(body: Buffer | string | undefined | null): 'open' | 'closed' | null {
  if (!body || body.length === 0) return null;
  const text = (typeof body === 'string' ? body : body.toString('utf8')).slice(0, 65_536);
  let seen: 'closed' | null = null;
  for (const m of text.matchAll(/<(?:[A-Za-z_][\w.-]*:)?basic(?:\s[^>]*)?>\s*([^<]*?)\s*<\/(?:[A-Za-z_][\w.-]*:)?basic\s*>/g)) {
    const v = m[1].toLowerCase();
    if (v === 'open') return 'open';
    if (v === 'closed') seen = 'closed';
  }
  return seen;
}

// -------------------------------------------------------------------------------------------
// One SUBSCRIBE exchange

/** A subscription dialog: ours while the notifier's tag is unknown, established once it is. */
export interface SubscribeSession extends Pick<RegisterSession, 'challenges'> {
  callId: string;
  fromTag: string;
  cseq: number;
  /** The notifier's tag (from the 2xx or the first NOTIFY). */
  toTag?: string;
  /** Where in-dialog requests are addressed (the notifier's Contact). */
  remoteTarget?: string;
  /** Route headers of in-dialog requests (the 2xx's Record-Route, reversed). */
  routeSet: string[];
}

export function newSubscribeSession(): SubscribeSession {
  return { callId: newCallId(), fromTag: newTag(), cseq: 0, challenges: new Map(), routeSet: [] };
}

export interface SubscribeResult {
  ok: boolean;
  status?: number;
  reason?: string;
  /** Seconds the notifier granted (its Expires; 0 after an unsubscribe). */
  expires?: number;
  error?: string;
}

/**
 * One SUBSCRIBE transaction chain (Event: presence): the SUBSCRIBE (in the dialog once it is
 * established), answers to 401/407 with the registration's credentials (as REGISTER does), a 423
 * retried with Min-Expires. A 2xx completes the dialog (the notifier's tag, Contact and
 * Record-Route). Never throws.
 */
export async function subscribeOnce(
  endpoint: SipEndpoint, cfg: RegistrationConfig,
  opts: { expires: number; timeoutMs?: number; session: SubscribeSession; stats?: ExchangeStats },
): Promise<SubscribeResult> {
  const session = opts.session;
  const id = identityOf(cfg);
  if ('error' in id) return { ok: false, error: id.error };
  const transport = cfg.registrar.transport;
  const out = await authenticatedExchange(endpoint, cfg, 'SUBSCRIBE', { ...opts, authUser: id.authUser }, (expires) => {
    const inDialog = session.toTag !== undefined;
    const headers = new SipHeaders();
    headers.append('Via', endpoint.viaFor(transport, newBranch()));
    headers.append('Max-Forwards', 70);
    if (inDialog) for (const r of session.routeSet) headers.append('Route', r);
    headers.append('From', `<${id.aor}>;tag=${session.fromTag}`);
    headers.append('To', `<${id.aor}>${inDialog ? `;tag=${session.toTag}` : ''}`);
    headers.append('Call-ID', session.callId);
    headers.append('CSeq', `${++session.cseq} SUBSCRIBE`);
    headers.append('Contact', endpoint.contactFor(id.contactUser, transport));
    headers.append('Event', 'presence');
    headers.append('Accept', 'application/pidf+xml');
    headers.append('Expires', expires);
    headers.append('Allow', 'NOTIFY, OPTIONS');
    return { uri: inDialog && session.remoteTarget ? session.remoteTarget : id.aor, headers };
  });
  if (!('res' in out)) return out;
  const { res, expires } = out;
  if (res.status < 200 || res.status >= 300) return { ok: false, status: res.status, reason: res.reason };
  if (session.toTag === undefined) {
    try {
      session.toTag = parseNameAddr(res.headers.get('to') ?? '').params.tag ?? undefined;
    } catch { /* a 2xx without a readable To: the first NOTIFY gives the tag */ }
    session.routeSet = res.headers.getAll('record-route').reverse();
  }
  try {
    const contact = res.headers.get('contact');
    if (contact) session.remoteTarget = parseNameAddr(contact).uri;
  } catch { /* keep the target we had */ }
  const header = Number(res.headers.get('expires'));
  const granted = expires === 0 ? 0 : res.headers.has('expires') && Number.isFinite(header) && header >= 0 ? Math.floor(header) : expires;
  return { ok: true, status: res.status, reason: res.reason, expires: granted };
}

// -------------------------------------------------------------------------------------------
// A kept subscription

export interface PresenceStatus {
  /** active / pending (from the notifier), terminated (by the notifier or by us), failed (SUBSCRIBE refused or unanswered). */
  subscription: 'active' | 'pending' | 'terminated' | 'failed' | null;
  /** The last presence a NOTIFY told (kept across refreshes and new dialogs until another one says otherwise). */
  state: 'open' | 'closed' | null;
  /** The last SUBSCRIBE's final status. */
  code?: number;
  /** The reason the subscription was terminated (Subscription-State), else the last status's reason phrase. */
  reason?: string;
  error?: string;
  /** When this status last changed (a SUBSCRIBE answered, a NOTIFY received). */
  updatedAt: Date | null;
  failures: number;
  nextAttemptAt: Date | null;
}

export interface PresenceOptions {
  /** Expiry to ask for, seconds (default 3600). */
  expires?: number;
  /** Per SUBSCRIBE exchange (default 10 s). */
  timeoutMs?: number;
  /** First retry after a failure (default 10 s), doubling up to retryMaxMs (default 10 min), ±10 %. */
  retryMinMs?: number;
  retryMaxMs?: number;
  onStatus?: (status: PresenceStatus) => void;
  /** A dialog starts (true) or is over (false): its Call-ID, so the caller can capture its messages. */
  onCallId?: (callId: string, active: boolean) => void;
}

const NO_RETRY_REASONS = new Set(['rejected', 'noresource']);

export class PresenceSubscription {
  readonly stats: ExchangeStats = { staleAnswered: 0, challengesAnswered: 0 };
  #session: SubscribeSession | undefined;
  #release: (() => void) | undefined;
  #status: PresenceStatus = { subscription: null, state: null, updatedAt: null, failures: 0, nextAttemptAt: null };
  readonly #attempts = new AttemptSchedule(() => this.#attempt());
  /** NOTIFY said the state before the SUBSCRIBE's 2xx arrived. */
  #notified = false;

  constructor(readonly endpoint: SipEndpoint, readonly config: RegistrationConfig, readonly options: PresenceOptions = {}) {}

  get status(): PresenceStatus {
    return { ...this.#status };
  }

  /** The Call-ID of the current dialog. */
  get callId(): string | undefined {
    return this.#session?.callId;
  }

  /** Sends the first SUBSCRIBE and resolves with its result; refreshes and retries follow. */
  async start(): Promise<SubscribeResult> {
    this.#attempts.running = true;
    return this.#attempts.serial(() => this.#attempt());
  }

  /** Stops refreshing; the notifier keeps the subscription until it expires (its NOTIFYs get 481). */
  stop(): void {
    this.#attempts.stop();
    this.#endDialog(0);
    this.#update({ nextAttemptAt: null }, false);
  }

  /** Stops and ends the subscription at the notifier (SUBSCRIBE with Expires: 0), within `timeoutMs`. */
  async unsubscribe(timeoutMs = 5000): Promise<SubscribeResult> {
    this.#attempts.stop();
    return this.#attempts.serial(async () => {
      const session = this.#session;
      if (!session || session.toTag === undefined) {
        this.#endDialog(0);
        return { ok: false, error: 'no subscription dialog to end' };
      }
      const result = await subscribeOnce(this.endpoint, this.config, { expires: 0, timeoutMs, session, stats: this.stats });
      this.#update({ subscription: 'terminated', code: result.status, reason: 'unsubscribed', error: result.ok ? undefined : result.error, nextAttemptAt: null });
      // The notifier's final NOTIFY (terminated) still gets its 200.
      this.#endDialog(5000);
      return result;
    });
  }

  #newDialog(): SubscribeSession {
    this.#endDialog(5000);
    const session = newSubscribeSession();
    this.#session = session;
    this.#notified = false;
    this.options.onCallId?.(session.callId, true);
    this.#release = this.endpoint.onDialog(session.callId, (req, ctx) => this.#onRequest(session, req, ctx));
    return session;
  }

  /** Forgets the current dialog; its handler stays `graceMs` to answer late NOTIFYs. */
  #endDialog(graceMs: number): void {
    const session = this.#session;
    const release = this.#release;
    this.#session = undefined;
    this.#release = undefined;
    if (!session) return;
    const end = () => {
      release?.();
      this.options.onCallId?.(session.callId, false);
    };
    if (graceMs > 0) setTimeout(end, graceMs).unref();
    else end();
  }

  async #attempt(): Promise<SubscribeResult> {
    if (!this.#attempts.running) return { ok: false, error: 'subscription stopped' };
    const session = this.#session ?? this.#newDialog();
    const asked = this.options.expires ?? 3600;
    const result = await subscribeOnce(this.endpoint, this.config, { expires: asked, timeoutMs: this.options.timeoutMs, session, stats: this.stats });
    if (!this.#attempts.running || this.#session !== session) return result;
    if (result.ok && result.expires !== undefined && result.expires > 0) {
      const subscription = this.#notified && this.#status.subscription !== null ? this.#status.subscription : result.status === 202 ? 'pending' : 'active';
      this.#update({
        subscription, code: result.status, reason: result.reason, error: undefined, failures: 0,
        nextAttemptAt: this.#attempts.schedule(Math.max(500, (result.expires * 1000) / 2)),
      });
    } else {
      // A refresh refused (481: the notifier forgot us) or unanswered: the next try starts a new dialog.
      this.#endDialog(0);
      const failures = this.#status.failures + 1;
      this.#update({
        subscription: 'failed', code: result.status, reason: result.reason,
        error: result.error ?? (result.ok ? 'notifier granted no expiry' : undefined), failures, nextAttemptAt: this.#attempts.schedule(backoffMs(failures, this.options.retryMinMs, this.options.retryMaxMs)),
      });
    }
    return result;
  }

  #onRequest(session: SubscribeSession, req: SipRequest, ctx: RequestContext): void {
    if (req.method !== 'NOTIFY') {
      this.endpoint.respond(req, ctx, 405, 'Method Not Allowed', { Allow: 'NOTIFY' });
      return;
    }
    let toTag: string | undefined;
    let fromTag: string | undefined;
    try {
      toTag = parseNameAddr(req.headers.get('to') ?? '').params.tag ?? undefined;
      fromTag = parseNameAddr(req.headers.get('from') ?? '').params.tag ?? undefined;
    } catch { /* unreadable: not our dialog */ }
    if (toTag !== session.fromTag || !fromTag || (session.toTag !== undefined && session.toTag !== fromTag)) {
      this.endpoint.respond(req, ctx, 481, 'Subscription Does Not Exist');
      return;
    }
    const event = (req.headers.get('event') ?? '').split(';')[0].trim().toLowerCase();
    if (event !== 'presence') {
      this.endpoint.respond(req, ctx, 489, 'Bad Event', { 'Allow-Events': 'presence' });
      return;
    }
    const st = parseSubscriptionState(req.headers.get('subscription-state'));
    if (!st) {
      this.endpoint.respond(req, ctx, 400, 'Missing or unreadable Subscription-State');
      return;
    }
    this.endpoint.respond(req, ctx, 200, 'OK');
    if (this.#session !== session) return; // a late NOTIFY of a dialog we ended: answered, not news
    if (session.toTag === undefined) {
      // The NOTIFY came before the SUBSCRIBE's 2xx (RFC 6665 §4.1.2.4): it establishes the dialog.
      session.toTag = fromTag;
      session.routeSet = req.headers.getAll('record-route');
    }
    try {
      const contact = req.headers.get('contact');
      if (contact) session.remoteTarget = parseNameAddr(contact).uri;
    } catch { /* keep the target we had */ }
    const basic = parsePidfBasic(req.body);
    const state = basic ?? this.#status.state;
    this.#notified = true;
    if (st.state === 'terminated') {
      this.#endDialog(5000);
      if (!this.#attempts.running) {
        this.#update({ subscription: 'terminated', state, reason: st.reason ?? 'terminated', nextAttemptAt: null });
        return;
      }
      // RFC 6665 §4.1.3: deactivated/timeout → subscribe again at once; probation/giveup → after
      // retry-after; rejected/noresource → not for a long while.
      const reason = st.reason ?? 'terminated';
      const delay = st.retryAfter !== undefined ? st.retryAfter * 1000
        : NO_RETRY_REASONS.has(reason) ? (this.options.retryMaxMs ?? 600_000)
          : reason === 'deactivated' || reason === 'timeout' ? 0 : (this.options.retryMinMs ?? 10_000);
      this.#update({ subscription: 'terminated', state, reason, nextAttemptAt: this.#attempts.schedule(delay) });
      return;
    }
    const subscription = st.state === 'active' ? 'active' : 'pending';
    this.#update({ subscription, state });
  }

  #update(patch: Partial<PresenceStatus>, news = true): void {
    this.#status = { ...this.#status, ...patch, ...(news ? { updatedAt: new Date() } : {}) };
    try {
      this.options.onStatus?.(this.status);
    } catch { /* a listener's failure is not ours */ }
  }
}
