// The SIP side of a worker process: one SipEndpoint (our listener and client transactions), the
// registrations this process owns through a lease in the database (one owner per registration
// across processes; a crashed owner's registrations are taken over once its lease expires), the
// inbound request policy (OPTIONS answered, INVITEs only from whitelisted addresses), and the
// capture of every SIP message of our calls and registrations for GET /api/v2/sip/captures.
import crypto from 'node:crypto';
import dgram from 'node:dgram';
import net from 'node:net';
import os from 'node:os';
import fs from 'node:fs';
import type { Insertable } from 'kysely';
import type { Config } from '../../config.ts';
import type { Database } from '../../db/index.ts';
import type { SipCapturesTable, SipRegistrationRow } from '../../db/types.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { newId } from '../../lib/ids.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import { Waker, type Wakeups } from '../../queue/waker.ts';
import { newTag, type RequestContext, type Remote, type SipEndpointOptions, type SipLog, type SipMessage, type SipRequest, SipEndpoint } from '../../sip/endpoint.ts';
import { SipHeaders, parseNameAddr, parseUri } from '../../sip/message.ts';
import { newRegisterSession, registerOnce, Registration, type RegisterResult, type RegistrationConfig, type RegistrationStatus } from '../../sip/register.ts';
import { buildOffer } from '../../sip/sdp.ts';
import { PresenceSubscription, type PresenceStatus } from '../../sip/subscribe.ts';
import { recordRegistrationEvent, type PresenceData, type RegistrationEventData, type RegistrationEventType } from './events.ts';
import { defaultPort, formatHost, parseAor, parseHostPort, whitelisted, whitelistMatcher } from './parse.ts';
import { sipRepo } from './repository.ts';
import { SIP_REGISTRATIONS } from './service.ts';
import { DELIVERIES } from '../webhooks/dispatcher.ts';

export interface SipRuntimeLog extends SipLog {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface SipWorkerDeps {
  database: Database;
  config: Config;
  box: SecretBox;
  log?: SipRuntimeLog;
  /** The process's one wake-up bus: registration API changes wake the owner; queued events wake deliveries. */
  wakeups: Wakeups;
  /** Listener address and port (default config.sipHost/sipPort); tests bind 127.0.0.x:0. */
  host?: string;
  port?: number;
  advertiseHost?: string;
  /** How often the owner loop looks at its registrations without being woken (default 1 s). */
  pollMs?: number;
  /** How long a registration stays ours without renewal (default 30 s; renewed every third). */
  leaseMs?: number;
  /** Bound of one REGISTER exchange (default 10 s). */
  registerTimeoutMs?: number;
  /** Backoff after a failed REGISTER: first delay and cap (defaults 10 s and 10 min). */
  retryMinMs?: number;
  retryMaxMs?: number;
  /** Registrations one process takes per turn. */
  claimBatch?: number;
}

/** A registration this process runs. */
interface Owned {
  id: number;
  orgId: number;
  /** Serialises the work on one registration (start, restart, delete). */
  chain: Promise<void>;
  /** A sync is queued on the chain. */
  queued: boolean;
  /** The configuration version last applied (running, or found unusable). */
  version?: number;
  running?: Running;
}

interface Running {
  version: number;
  aor: string;
  reg: Registration;
  config: RegistrationConfig;
  /** The registration's `subscribe`: once registered, its presence is subscribed to. */
  subscribe: boolean;
  sub?: PresenceSubscription;
  presence?: PresenceStatus;
  /** The presence state last stored (events are queued when it changes). */
  presenceState: 'open' | 'closed' | null;
  presenceWriting: Promise<void>;
  /** What identifies the binding at the registrar: a change means the old one is removed first. */
  identity: string;
  callId: string;
  lastEvent?: string;
  latest?: RegistrationStatus;
  writing?: Promise<void>;
  dirty: boolean;
  stopped: boolean;
}

interface PendingCapture { rows: Omit<Insertable<SipCapturesTable>, 'org_id'>[]; until: number; bytes: number }

/** An inbound call we answered (whitelisted source), held until a BYE or callMaxSeconds. */
interface InboundCall { end(by: 'local' | 'remote'): Promise<void> }

const CAPTURE_FLUSH_MS = 200;
const CAPTURE_MAX_BYTES = 65_536;
const PENDING_CAPTURE_MS = 10_000;
/** Bytes of not-yet-attributed messages held at once: strangers' traffic cannot grow the process past this. */
const PENDING_MAX_BYTES = 4 * 1024 * 1024;
const UNTRACK_GRACE_MS = 32_000;
/**
 * Refused INVITEs captured per organization and minute (per worker). Anyone can send INVITEs naming
 * an organization's AOR; beyond this the refusals are answered but not stored, so strangers cannot
 * fill an organization's captures.
 */
export const REFUSED_CAPTURES_PER_MINUTE = 30;
const PRUNE_EVERY_MS = 3600_000;
/** Bound of the SUBSCRIBE with Expires: 0 that ends a presence subscription (update, DELETE, clean stop). */
const UNSUBSCRIBE_MS = 3000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const toTag = (req: SipRequest): string | undefined => {
  try { return parseNameAddr(req.headers.get('to') ?? '').params.tag ?? undefined; } catch { return undefined; }
};
const hostPort = (address: string, port: number) => `${formatHost(address)}:${port}`;

/** The payload of a registration event: the registration's status as GET shows it. */
function eventData(aor: string, s: RegistrationStatus | undefined, now: number): RegistrationEventData {
  return {
    aor, registered: !!s?.ok && s.expiresAt !== null && s.expiresAt.getTime() > now, code: s?.code ?? null,
    reason: s?.reason ?? null, error: s && !s.ok ? (s.error ?? null) : null,
    expiresAt: toUnixSeconds(s?.expiresAt?.getTime()), lastAttemptAt: toUnixSeconds(s?.lastAttemptAt?.getTime()),
  };
}

/** The first non-internal IPv4 address of the machine: what a 0.0.0.0 listener advertises by default. */
export function defaultAdvertiseHost(bound: string): string {
  if (bound !== '0.0.0.0' && bound !== '::') return bound;
  for (const list of Object.values(os.networkInterfaces())) {
    for (const i of list ?? []) if (i.family === 'IPv4' && !i.internal) return i.address;
  }
  return '127.0.0.1';
}

/** Where REGISTERs of a registration go: its proxy, else the AOR's host; port: proxy's, `port`, AOR's, default. */
export function registrarOf(row: Pick<SipRegistrationRow, 'aor' | 'proxy' | 'port' | 'transport'>): { transport: SipRegistrationRow['transport']; host: string; port: number } {
  const aor = parseAor(row.aor);
  if (!aor.ok) throw new Error(aor.message);
  if (row.proxy) {
    const p = parseHostPort(row.proxy.replace(/^sip:/i, ''), 'proxy');
    if (!p.ok) throw new Error(p.message);
    return { transport: row.transport, host: p.value.host, port: p.value.port ?? row.port ?? defaultPort(row.transport) };
  }
  return { transport: row.transport, host: aor.value.host, port: row.port ?? aor.value.port ?? defaultPort(row.transport) };
}

export class SipWorker {
  readonly ownerId: string;
  #endpoint: SipEndpoint | undefined;
  readonly #owned = new Map<number, Owned>();
  readonly #waker = new Waker();
  #loop: Promise<void> | undefined;
  #stopping = false;
  #unsubscribe: (() => void) | undefined;
  #lastRenew = 0;
  #lastPrune = 0;
  readonly #leaseMs: number;
  readonly #pollMs: number;
  /** Call-ID → organization, for captures; `until` is when an untracked Call-ID is forgotten. */
  readonly #callOrgs = new Map<string, { orgId: number; until: number }>();
  /** Messages of Call-IDs not (yet) attributed: the INVITE arrives before we know whose it is. */
  readonly #pending = new Map<string, PendingCapture>();
  #pendingBytes = 0;
  #captureBuffer: Insertable<SipCapturesTable>[] = [];
  #flushTimer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();
  readonly #inbound = new Set<InboundCall>();
  /** Refused INVITEs captured this minute, per organization. */
  readonly #refusedCaptures = new Map<number, { minute: number; n: number }>();

  constructor(readonly deps: SipWorkerDeps) {
    this.ownerId = `${os.hostname()}:${process.pid}:${crypto.randomBytes(4).toString('hex')}`;
    this.#leaseMs = deps.leaseMs ?? 30_000;
    this.#pollMs = deps.pollMs ?? 1000;
  }

  /** The process's SIP endpoint once started (calls are placed through it). */
  get endpoint(): SipEndpoint | undefined {
    return this.#endpoint;
  }

  /** Bytes of messages held while nobody knows their organization yet (bounded; for tests and metrics). */
  get pendingCaptureBytes(): number {
    return this.#pendingBytes;
  }

  /** Registrations this process runs now (ids). */
  get owned(): number[] {
    return [...this.#owned.keys()];
  }

  /**
   * Binds the listener and starts owning registrations. The API wakes the owner loop through the
   * process's wake-up bus (which PostgreSQL NOTIFY feeds from other processes).
   */
  async start(): Promise<void> {
    if (this.#endpoint) return;
    const { config, log } = this.deps;
    const host = this.deps.host ?? config.sipHost;
    const tls: SipEndpointOptions['tls'] = { rejectUnauthorized: config.sipTlsRejectUnauthorized };
    if (config.sipTlsCa) tls.ca = fs.readFileSync(config.sipTlsCa);
    const endpoint = new SipEndpoint({
      host, port: this.deps.port ?? config.sipPort,
      advertiseHost: this.deps.advertiseHost ?? config.sipAdvertiseHost ?? defaultAdvertiseHost(host),
      tls, log, userAgent: 'callplane',
      onRequest: (req, ctx) => this.#onRequest(req, ctx),
      onMessage: (dir, msg, remote, raw) => this.#capture(dir, msg, remote, raw),
    });
    await endpoint.start();
    this.#endpoint = endpoint;
    this.#stopping = false;
    this.#unsubscribe = this.deps.wakeups.on(SIP_REGISTRATIONS, () => this.#waker.notify());
    this.#flushTimer = setInterval(() => void this.#flush(), CAPTURE_FLUSH_MS);
    this.#flushTimer.unref();
    this.#loop = this.#run();
    log?.info({ owner: this.ownerId, ...endpoint.advertised }, 'SIP runtime started');
  }

  /** Look at the registrations now (a registration was created, changed or deleted). */
  notify(): void {
    this.#waker.notify();
  }

  /**
   * Stops: registrations stop refreshing (they are not un-REGISTERed: another worker takes them
   * over, and the registrar keeps the binding until it expires), leases are given back unless
   * `release` is false (a crash, in tests), answered inbound calls are ended, captures flushed.
   */
  async stop(opts: { release?: boolean } = {}): Promise<void> {
    if (!this.#endpoint) return;
    this.#stopping = true;
    this.#unsubscribe?.();
    this.#waker.notify();
    await this.#loop;
    const unsubscribing: Promise<unknown>[] = [];
    for (const o of this.#owned.values()) {
      if (o.running) {
        o.running.stopped = true;
        o.running.reg.stop();
        // A clean stop ends presence subscriptions (the next owner subscribes again); a crash leaves them to expire.
        if (o.running.sub) unsubscribing.push(opts.release !== false ? this.#endPresence(o.running.sub) : Promise.resolve(o.running.sub.stop()));
      }
    }
    await Promise.allSettled(unsubscribing);
    await Promise.race([Promise.allSettled([...this.#owned.values()].map((o) => o.chain)), sleep(5000)]);
    await Promise.allSettled([...this.#owned.values()].map((o) => o.running?.writing));
    if (opts.release !== false) {
      await sipRepo.release(this.deps.database.db, this.ownerId).catch((err) => this.deps.log?.error({ err }, 'releasing SIP registrations failed'));
    }
    this.#owned.clear();
    await Promise.allSettled([...this.#inbound].map((c) => c.end('local')));
    clearInterval(this.#flushTimer);
    await this.#flush();
    await this.#endpoint.stop();
    this.#endpoint = undefined;
  }

  // -------------------------------------------------------------------------------------------
  // Captures

  /** Messages of this Call-ID are the organization's (and so are those that arrived just before). */
  track(callId: string, orgId: number): void {
    this.#callOrgs.set(callId, { orgId, until: Infinity });
    const pending = this.#pending.get(callId);
    if (pending) {
      this.#forget(callId, pending);
      for (const row of pending.rows) this.#captureBuffer.push({ ...row, org_id: orgId });
    }
  }

  /** The call or registration is over; late retransmissions are still captured for a while. */
  untrack(callId: string): void {
    const t = this.#callOrgs.get(callId);
    if (t) t.until = Date.now() + UNTRACK_GRACE_MS;
  }

  #capture(dir: 'in' | 'out', msg: SipMessage, remote: Remote, raw: Buffer): void {
    const callId = msg.headers.get('call-id');
    if (!callId || !this.#endpoint) return;
    const now = Date.now();
    const adv = this.#endpoint.advertised;
    const text = raw.subarray(0, CAPTURE_MAX_BYTES).toString('utf8').replace(/\u0000/g, '\uFFFD');
    const row = {
      id: newId('cap', now), call_id: callId.slice(0, 500), direction: dir, transport: remote.transport,
      remote: hostPort(remote.address, remote.port), local: hostPort(adv.host, adv.port), message: text, created_at: now,
    };
    const owner = this.#callOrgs.get(callId);
    if (owner && owner.until >= now) {
      this.#captureBuffer.push({ ...row, org_id: owner.orgId });
      return;
    }
    let pending = this.#pending.get(callId);
    if (!pending) {
      if (this.#pending.size >= 1000) return; // unsolicited traffic is not ours to keep
      this.#pending.set(callId, (pending = { rows: [], until: now + PENDING_CAPTURE_MS, bytes: 0 }));
    }
    if (pending.rows.length >= 50 || this.#pendingBytes + text.length > PENDING_MAX_BYTES) return;
    pending.rows.push(row);
    pending.bytes += text.length;
    this.#pendingBytes += text.length;
  }

  /** Whether this refused INVITE of the organization is captured (REFUSED_CAPTURES_PER_MINUTE). */
  #mayCaptureRefusal(orgId: number): boolean {
    const minute = Math.floor(Date.now() / 60_000);
    const seen = this.#refusedCaptures.get(orgId);
    if (!seen || seen.minute !== minute) {
      if (this.#refusedCaptures.size >= 10_000) this.#refusedCaptures.clear();
      this.#refusedCaptures.set(orgId, { minute, n: 1 });
      return true;
    }
    return ++seen.n <= REFUSED_CAPTURES_PER_MINUTE;
  }

  #forget(callId: string, pending: PendingCapture): void {
    this.#pending.delete(callId);
    this.#pendingBytes -= pending.bytes;
  }

  async #flush(): Promise<void> {
    const now = Date.now();
    for (const [id, p] of this.#pending) if (p.until < now) this.#forget(id, p);
    for (const [id, t] of this.#callOrgs) if (t.until < now) this.#callOrgs.delete(id);
    if (this.#captureBuffer.length === 0) return this.#flushing;
    const rows = this.#captureBuffer;
    this.#captureBuffer = [];
    const db = this.deps.database.db;
    this.#flushing = this.#flushing.then(async () => {
      for (let i = 0; i < rows.length; i += 100) {
        await sipRepo.insertCaptures(db, rows.slice(i, i + 100)).catch((err) =>
          // An organization deleted mid-call (foreign key) or a database hiccup: captures are best effort.
          this.deps.log?.warn({ err: (err as Error).message }, 'SIP captures not stored'));
      }
    });
    return this.#flushing;
  }

  // -------------------------------------------------------------------------------------------
  // Registration ownership

  async #run(): Promise<void> {
    while (!this.#stopping) {
      try {
        await this.#turn();
      } catch (err) {
        this.deps.log?.error({ err }, 'SIP registration turn failed');
      }
      if (this.#stopping) break;
      await this.#waker.wait(this.#pollMs);
    }
  }

  async #turn(): Promise<void> {
    const { database } = this.deps;
    const db = database.db;
    const now = Date.now();
    const renew = now - this.#lastRenew >= this.#leaseMs / 3;
    const held = await sipRepo.owned(db, this.ownerId, renew ? now + this.#leaseMs : undefined);
    if (renew) this.#lastRenew = now;
    const heldIds = new Map(held.map((h) => [h.id, h]));
    for (const [id, o] of this.#owned) {
      // Lost: deleted (a failed new registration is not kept) or taken by another worker after our
      // lease ran out. Stop refreshing; the binding is not ours to remove any more.
      if (!heldIds.has(id)) this.#drop(o);
    }
    for (const h of held) {
      const o = this.#owned.get(h.id);
      if (!o || h.deleting === 1 || o.version !== h.version) this.#sync(h.id, o?.orgId);
    }
    if (this.#stopping) return;
    const claimed = await sipRepo.claim(db, this.ownerId, Date.now(), this.#leaseMs, this.deps.claimBatch ?? 20);
    for (const row of claimed) {
      this.deps.log?.info({ registration: row.id, aor: row.aor }, 'SIP registration taken');
      this.#sync(row.id, row.org_id);
    }
    if (Date.now() - this.#lastPrune > PRUNE_EVERY_MS) {
      this.#lastPrune = Date.now();
      const before = Date.now() - this.deps.config.sipCaptureRetentionDays * 86_400_000;
      await sipRepo.pruneCaptures(db, before).catch((err) => this.deps.log?.warn({ err }, 'pruning SIP captures failed'));
    }
  }

  #drop(o: Owned): void {
    this.#owned.delete(o.id);
    if (o.running) {
      o.running.stopped = true;
      o.running.reg.stop();
      o.running.sub?.stop();
      this.untrack(o.running.callId);
      this.deps.log?.info({ registration: o.id }, 'SIP registration no longer ours');
    }
  }

  /** Queues a look at one registration: start, restart after a change, or delete. */
  #sync(id: number, orgId?: number): void {
    let o = this.#owned.get(id);
    if (!o) {
      o = { id, orgId: orgId ?? 0, chain: Promise.resolve(), queued: false };
      this.#owned.set(id, o);
    }
    if (o.queued) return;
    o.queued = true;
    const owned = o;
    o.chain = o.chain.then(async () => {
      owned.queued = false;
      if (this.#stopping || this.#owned.get(id) !== owned) return;
      try {
        await this.#apply(owned);
      } catch (err) {
        this.deps.log?.error({ err, registration: id }, 'SIP registration step failed');
      }
    });
  }

  async #apply(o: Owned): Promise<void> {
    const db = this.deps.database.db;
    const row = await sipRepo.registrationById(db, o.id);
    if (!row || row.lease_owner !== this.ownerId) {
      this.#drop(o);
      return;
    }
    o.orgId = row.org_id;
    if (row.deleting === 1) return this.#remove(o, row);
    if (o.version === row.version) return;
    o.version = row.version;
    const identity = this.#identity(row);
    const old = o.running;
    if (old) {
      old.stopped = true;
      // Subscribed with the old configuration (or `subscribe` switched off): end that subscription first.
      if (old.sub) await this.#endPresence(old.sub);
      if (old.identity !== identity && old.latest?.ok) {
        // Another AOR, registrar or user: take the old binding away before making the new one.
        await old.reg.unregister().catch(() => undefined);
      } else old.reg.stop();
      this.untrack(old.callId);
      o.running = undefined;
    }
    await this.#startRegistration(o, row, identity);
  }

  #identity(row: SipRegistrationRow): string {
    const r = registrarOf(row);
    return JSON.stringify([row.aor_key, row.username, r.transport, r.host, r.port]);
  }

  #config(row: SipRegistrationRow): RegistrationConfig {
    return {
      aor: row.aor, username: row.username, authUsername: row.auth_username ?? undefined,
      password: this.deps.box.open(row.password), registrar: registrarOf(row),
    };
  }

  async #startRegistration(o: Owned, row: SipRegistrationRow, identity: string): Promise<void> {
    // Dropped (lease lost) or stopping while this step awaited: start nothing that would outlive it.
    if (this.#stopping || this.#owned.get(o.id) !== o || !this.#endpoint) return;
    const endpoint = this.#endpoint;
    let config: RegistrationConfig;
    try {
      config = this.#config(row);
    } catch (err) {
      // Stored data we cannot use (a key change, a hand-edited row): report it like a failure.
      await this.#writeStatusRow(o, row.version, { ok: false, error: `configuration unusable: ${(err as Error).message}`, expiresAt: null, lastAttemptAt: new Date(), failures: 1, nextAttemptAt: null }, row.aor);
      return;
    }
    const running: Running = {
      version: row.version, aor: row.aor, identity, callId: '', dirty: false, stopped: false,
      reg: undefined as unknown as Registration, config, subscribe: row.subscribe === 1,
      presenceState: row.subscribe === 1 ? (row.presence_state ?? null) : null, presenceWriting: Promise.resolve(),
    };
    running.reg = new Registration(endpoint, config, {
      expires: this.deps.config.sipRegisterExpires,
      timeoutMs: this.deps.registerTimeoutMs ?? 10_000,
      retryMinMs: this.deps.retryMinMs, retryMaxMs: this.deps.retryMaxMs,
      onStatus: (status) => this.#onStatus(o, running, status),
    });
    running.callId = running.reg.session.callId;
    this.track(running.callId, row.org_id);
    o.running = running;
    const contact = endpoint.contactFor(row.username, config.registrar.transport);
    const noPresence = row.subscribe === 1 ? {} : { presence_subscription: null, presence_state: null, presence_code: null, presence_reason: null, presence_updated_at: null };
    await sipRepo.writeStatus(this.deps.database.db, o.id, this.ownerId, row.version, { contact, ...noPresence }).catch(() => undefined);
    const first = await running.reg.start();
    this.deps.log?.info({ registration: o.id, aor: row.aor, ok: first.ok, status: first.status, error: first.error }, 'SIP REGISTER');
    // Make sure the first attempt's status is written before the API's wait reads it.
    await running.writing;
  }

  #onStatus(o: Owned, running: Running, status: RegistrationStatus): void {
    if (running.stopped) return;
    // Only completed attempts are news; the intermediate update that schedules the next one is not.
    if (status.lastAttemptAt === null) return;
    running.latest = status;
    if (status.ok && running.subscribe && !running.sub) this.#startPresence(o, running);
    if (running.writing) {
      running.dirty = true;
      return;
    }
    running.writing = (async () => {
      do {
        running.dirty = false;
        const s = running.latest!;
        await this.#writeStatusRow(o, running.version, s, running.aor, running).catch((err) =>
          this.deps.log?.error({ err, registration: o.id }, 'writing SIP registration status failed'));
      } while (running.dirty && !running.stopped);
    })().finally(() => { running.writing = undefined; });
  }

  async #writeStatusRow(o: Owned, version: number, s: RegistrationStatus, aor: string, running?: Running): Promise<void> {
    const { database } = this.deps;
    const now = Date.now();
    const data = eventData(aor, s, now);
    const registered = data.registered;
    const eventKey = `${registered}:${s.code ?? ''}`;
    const type: RegistrationEventType | undefined = running?.lastEvent === eventKey ? undefined
      : registered ? 'registration.registered' : 'registration.failed';
    const queued = await database.db.transaction().execute(async (tx) => {
      const wrote = await sipRepo.writeStatus(tx, o.id, this.ownerId, version, {
        attempted_version: version, registered: registered ? 1 : 0, last_code: s.code ?? null, last_reason: s.reason ?? null,
        last_error: s.ok ? null : (s.error ?? (s.code ? null : 'no response')), expires_at: s.expiresAt?.getTime() ?? null,
        last_attempt_at: s.lastAttemptAt?.getTime() ?? now, next_attempt_at: s.nextAttemptAt?.getTime() ?? null, updated_at: now,
      });
      if (!wrote || !type) return false;
      if (running) running.lastEvent = eventKey;
      return recordRegistrationEvent(tx, o.orgId, type, data, now);
    });
    if (queued) this.deps.wakeups.emit(DELIVERIES);
  }

  /**
   * The registration holds and has `subscribe`: SUBSCRIBE to its AOR's presence through the same
   * next hop with the same credentials; what the subscription learns is written to the row.
   */
  #startPresence(o: Owned, running: Running): void {
    const endpoint = this.#endpoint;
    if (!endpoint || this.#stopping) return;
    const orgId = o.orgId;
    running.sub = new PresenceSubscription(endpoint, running.config, {
      expires: this.deps.config.sipRegisterExpires,
      timeoutMs: this.deps.registerTimeoutMs ?? 10_000,
      retryMinMs: this.deps.retryMinMs, retryMaxMs: this.deps.retryMaxMs,
      onCallId: (callId, active) => (active ? this.track(callId, orgId) : this.untrack(callId)),
      onStatus: (status) => {
        if (running.stopped) return;
        running.presence = status;
        running.presenceWriting = running.presenceWriting.then(() => this.#writePresence(o, running)).catch((err) =>
          this.deps.log?.error({ err, registration: o.id }, 'writing SIP presence failed'));
      },
    });
    const sub = running.sub;
    void sub.start().then((r) => this.deps.log?.info({ registration: o.id, aor: running.aor, ok: r.ok, status: r.status, error: r.error }, 'SIP SUBSCRIBE presence'));
  }

  /** Writes the presence of a running registration (latest status) and queues `registration.presence` when its state changed. */
  async #writePresence(o: Owned, running: Running): Promise<void> {
    const p = running.presence;
    if (!p || running.stopped) return;
    const { database } = this.deps;
    const now = Date.now();
    const presence: PresenceData = {
      subscription: p.subscription, state: p.state, code: p.code ?? null, reason: p.reason ?? null,
      updatedAt: toUnixSeconds(p.updatedAt?.getTime()),
    };
    const changed = p.state !== running.presenceState;
    const queued = await database.db.transaction().execute(async (tx) => {
      const wrote = await sipRepo.writeStatus(tx, o.id, this.ownerId, running.version, {
        presence_subscription: p.subscription, presence_state: p.state, presence_code: p.code ?? null,
        presence_reason: p.reason?.slice(0, 200) ?? null, presence_updated_at: p.updatedAt?.getTime() ?? now,
      });
      if (!wrote || !changed) return false;
      running.presenceState = p.state;
      return recordRegistrationEvent(tx, o.orgId, 'registration.presence', { ...eventData(running.aor, running.latest, now), presence }, now);
    });
    if (queued) this.deps.wakeups.emit(DELIVERIES);
  }

  /** Ends a presence subscription at the notifier (SUBSCRIBE, Expires: 0), best effort and bounded. */
  async #endPresence(sub: PresenceSubscription): Promise<void> {
    await Promise.race([sub.unsubscribe(UNSUBSCRIBE_MS).catch(() => undefined), sleep(UNSUBSCRIBE_MS + 1000)]);
    sub.stop();
  }

  /** DELETE asked for: un-REGISTER (Expires: 0), then remove the row and say so in an event. */
  async #remove(o: Owned, row: SipRegistrationRow): Promise<void> {
    const { database } = this.deps;
    let result: RegisterResult;
    const running = o.running;
    if (running) {
      running.stopped = true;
      if (running.sub) await this.#endPresence(running.sub);
      result = await running.reg.unregister();
      this.untrack(running.callId);
    } else if (row.registered === 1) {
      // Registered by a process that is gone: if it had our address (a restart), this removes its binding.
      const session = newRegisterSession();
      this.track(session.callId, row.org_id);
      try {
        result = await registerOnce(this.#endpoint!, this.#config(row), { expires: 0, timeoutMs: this.deps.registerTimeoutMs ?? 10_000, session });
      } catch (err) {
        result = { ok: false, error: (err as Error).message };
      }
      this.untrack(session.callId);
    } else {
      result = { ok: false, error: 'not registered; nothing to remove at the registrar' };
    }
    o.running = undefined;
    const queued = await database.db.transaction().execute(async (tx) => {
      const gone = await sipRepo.removeOwned(tx, o.id, this.ownerId);
      if (!gone) return false;
      return recordRegistrationEvent(tx, row.org_id, 'registration.unregistered', {
        aor: row.aor, registered: false, code: result.status ?? null, reason: result.reason ?? null,
        error: result.ok ? null : (result.error ?? null), expiresAt: null, lastAttemptAt: Math.floor(Date.now() / 1000),
      });
    });
    this.#owned.delete(o.id);
    if (queued) this.deps.wakeups.emit(DELIVERIES);
    this.deps.log?.info({ registration: o.id, aor: row.aor, ok: result.ok, status: result.status }, 'SIP registration removed');
  }

  // -------------------------------------------------------------------------------------------
  // Inbound requests

  async #onRequest(req: SipRequest, ctx: RequestContext): Promise<void> {
    const endpoint = this.#endpoint;
    if (!endpoint) return;
    switch (req.method) {
      case 'OPTIONS':
        endpoint.respond(req, ctx, 200, 'OK', { Allow: 'INVITE, ACK, CANCEL, BYE, OPTIONS', Accept: 'application/sdp' });
        return;
      case 'INVITE':
        return this.#onInvite(endpoint, req, ctx);
      case 'ACK':
        return;
      case 'BYE':
        endpoint.respond(req, ctx, 481, 'Call/Transaction Does Not Exist');
        return;
      case 'NOTIFY':
        // Our subscriptions' NOTIFYs reach their dialog's handler (by Call-ID): this one is for none of them.
        endpoint.respond(req, ctx, 481, 'Subscription Does Not Exist');
        return;
      default:
        endpoint.respond(req, ctx, 405, 'Method Not Allowed', { Allow: 'INVITE, ACK, CANCEL, BYE, OPTIONS' });
    }
  }

  /**
   * The organization an INVITE is for: the registration whose AOR is its To (or Request-URI), or
   * whose user is the Request-URI's user (calls to our Contact); failing that, the one organization
   * whose whitelist holds the source address (trunks that send INVITEs without registering).
   */
  async #orgForInvite(req: SipRequest, source: string): Promise<number | undefined> {
    const db = this.deps.database.db;
    const keys: string[] = [];
    try {
      const to = parseUri(parseNameAddr(req.headers.get('to') ?? '').uri);
      if (to.user) keys.push(`sip:${to.user}@${formatHost(to.host.replace(/^\[|\]$/g, ''))}${to.port ? `:${to.port}` : ''}`, `sip:${to.user}@${formatHost(to.host.replace(/^\[|\]$/g, ''))}`);
    } catch { /* not a SIP URI */ }
    let ruriUser: string | undefined;
    try {
      const ruri = parseUri(req.uri);
      ruriUser = ruri.user;
      if (ruri.user) keys.push(`sip:${ruri.user}@${formatHost(ruri.host.replace(/^\[|\]$/g, ''))}`);
    } catch { /* not a SIP URI */ }
    for (const key of keys) {
      const org = await sipRepo.orgOfAor(db, key);
      if (org !== undefined) return org;
    }
    if (ruriUser) {
      const orgs = await sipRepo.orgsOfUser(db, ruriUser);
      if (orgs.length === 1) return orgs[0].org_id;
    }
    const entries = await sipRepo.whitelistEntriesFor(db, source);
    const orgs = new Set(entries.filter((e) => whitelisted(whitelistMatcher([e.ip]), source)).map((e) => e.org_id));
    return orgs.size === 1 ? [...orgs][0] : undefined;
  }

  async #onInvite(endpoint: SipEndpoint, req: SipRequest, ctx: RequestContext): Promise<void> {
    const callId = req.headers.get('call-id')!;
    const source = ctx.remote.address;
    const orgId = await this.#orgForInvite(req, source);
    const list = orgId === undefined ? undefined : whitelistMatcher((await sipRepo.whitelist(this.deps.database.db, orgId)).map((w) => w.ip));
    if (!list || !whitelisted(list, source)) {
      const captured = orgId !== undefined && this.#mayCaptureRefusal(orgId);
      if (captured) this.track(callId, orgId);
      this.deps.log?.info({ source, callId, org: orgId }, 'inbound SIP INVITE refused: source not whitelisted');
      endpoint.respond(req, ctx, 403, 'Forbidden');
      if (captured) this.untrack(callId);
      return;
    }
    this.track(callId, orgId!);
    if (toTag(req) !== undefined) {
      // A re-INVITE for a dialog we do not have (ours are claimed by Call-ID): RFC 3261 §12.2.2.
      endpoint.respond(req, ctx, 481, 'Call/Transaction Does Not Exist');
      this.untrack(callId);
      return;
    }
    await this.#answer(endpoint, req, ctx, callId);
  }

  /**
   * Answers a whitelisted INVITE and holds the call (no agent runtime is attached: no media is
   * played) until the caller hangs up or callMaxSeconds pass, then sends BYE.
   */
  async #answer(endpoint: SipEndpoint, req: SipRequest, ctx: RequestContext, callId: string): Promise<void> {
    const tag = newTag();
    // Our To tag is fixed here, so the BYE we may send later carries the same one.
    const answered: SipRequest = { ...req, headers: req.headers.clone().set('To', `${req.headers.get('to')};tag=${tag}`) };
    const rtp = dgram.createSocket(net.isIPv6(endpoint.host) ? 'udp6' : 'udp4');
    rtp.on('error', () => undefined);
    rtp.on('message', () => undefined);
    await new Promise<void>((resolve, reject) => { rtp.once('error', reject); rtp.bind({ address: endpoint.host, port: 0 }, () => resolve()); });
    const adv = endpoint.advertised;
    const sdp = buildOffer({ address: adv.host, port: rtp.address().port });
    let ended = false;
    let release = () => {};
    let timer: NodeJS.Timeout | undefined;
    const remoteTarget = (() => {
      try { return parseNameAddr(req.headers.get('contact') ?? '').uri; } catch { return undefined; }
    })();
    const call: InboundCall = {
      end: async (by) => {
        if (ended) return;
        ended = true;
        clearTimeout(timer);
        this.#inbound.delete(call);
        if (by === 'local' && remoteTarget) {
          const h = new SipHeaders();
          for (const r of req.headers.getAll('record-route')) h.append('Route', r);
          h.append('From', answered.headers.get('to')!);
          h.append('To', req.headers.get('from')!);
          h.append('Call-ID', callId);
          h.append('CSeq', '1 BYE');
          await endpoint.request({ kind: 'request', method: 'BYE', uri: remoteTarget, headers: h, body: Buffer.alloc(0) },
            { transport: ctx.remote.transport, host: ctx.remote.address, port: ctx.remote.port }, { timeoutMs: 5000 }).catch(() => undefined);
        }
        release();
        this.untrack(callId);
        await new Promise<void>((r) => rtp.close(() => r()));
      },
    };
    this.#inbound.add(call);
    release = endpoint.onDialog(callId, (r, c) => {
      if (r.method === 'ACK') return;
      if (r.method === 'BYE') {
        endpoint.respond(r, c, 200, 'OK');
        void call.end('remote');
        return;
      }
      if (r.method === 'INVITE') {
        endpoint.respond(r, c, 200, 'OK', { Contact: endpoint.contactFor(undefined, c.remote.transport), 'Content-Type': 'application/sdp' }, sdp);
        return;
      }
      endpoint.respond(r, c, 200, 'OK');
    });
    timer = setTimeout(() => void call.end('local'), this.deps.config.callMaxSeconds * 1000);
    timer.unref();
    endpoint.respond(answered, ctx, 200, 'OK', { Contact: endpoint.contactFor(undefined, ctx.remote.transport), 'Content-Type': 'application/sdp' }, sdp);
    this.deps.log?.info({ source: ctx.remote.address, callId }, 'inbound SIP call answered');
  }
}
