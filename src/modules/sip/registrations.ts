// Registration ownership: the registrations a worker process runs, each owned by one process
// through a lease in the database. Every turn the owner renews its leases, lets go of those it
// lost, applies configuration changes and DELETEs of the rows it holds, and claims rows nobody
// holds (new ones, given back ones, and a dead owner's once its lease has expired). For each one
// it keeps a Registration (and, with `subscribe`, a PresenceSubscription) running and writes what
// they learn to the row, with the registration events that follow (events.ts). A clean stop gives
// the leases back.
import { lookup } from 'node:dns/promises';
import net from 'node:net';
import type { SipRegistrationRow } from '../../db/types.ts';
import { toUnixSeconds, within } from '../../lib/time.ts';
import { newRegisterSession, registerOnce, Registration, type RegisterResult, type RegistrationConfig, type RegistrationStatus } from '../../sip/register.ts';
import { PresenceSubscription, type PresenceStatus } from '../../sip/subscribe.ts';
import { DELIVERIES } from '../webhooks/dispatcher.ts';
import { eventData, recordRegistrationEvent, type PresenceData, type RegistrationEventType } from './events.ts';
import { defaultPort, parseAor, parseHostPort } from './parse.ts';
import { sipRepo } from './repository.ts';
import type { CallTracker, SipWorkerDeps, WorkerState } from './worker-deps.ts';

export type RegistrationOwnerDeps = Pick<
  SipWorkerDeps, 'database' | 'config' | 'box' | 'log' | 'wakeups' | 'registerTimeoutMs' | 'retryMinMs' | 'retryMaxMs' | 'claimBatch'
> & {
  /** This process's name in `lease_owner`. */
  ownerId: string;
  /** How long a registration stays ours without renewal (renewed every third). */
  leaseMs: number;
};

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

/** Bound of the SUBSCRIBE with Expires: 0 that ends a presence subscription (update, DELETE, clean stop). */
const UNSUBSCRIBE_MS = 3000;

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

/**
 * Whether `source` is the registration's registrar (where its REGISTERs go: `proxy`, else the AOR's
 * host), by address: a name is resolved (all its addresses; one that does not resolve in 2 s is no
 * match). IPv4-mapped IPv6 sources are read as IPv4.
 */
export async function comesFromRegistrar(row: Pick<SipRegistrationRow, 'aor' | 'proxy' | 'port' | 'transport'>, source: string): Promise<boolean> {
  let host: string;
  try { host = registrarOf(row).host; } catch { return false; }
  const src = source.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '').toLowerCase();
  if (net.isIP(host)) return host.toLowerCase() === src;
  const addresses = await within(lookup(host, { all: true }).catch(() => []), 2000, () => []);
  return addresses.some((a) => a.address.toLowerCase() === src);
}

export class RegistrationOwner {
  readonly #owned = new Map<number, Owned>();
  #lastRenew = 0;

  constructor(readonly deps: RegistrationOwnerDeps, readonly worker: WorkerState, readonly calls: CallTracker) {}

  /** Registrations this process runs now (ids). */
  get ids(): number[] {
    return [...this.#owned.keys()];
  }

  /** One look at the registrations: renew, let go of lost ones, apply changes, claim free ones. */
  async turn(): Promise<void> {
    const db = this.deps.database.db;
    const { ownerId, leaseMs } = this.deps;
    const now = Date.now();
    const renew = now - this.#lastRenew >= leaseMs / 3;
    const held = await sipRepo.owned(db, ownerId, renew ? now + leaseMs : undefined);
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
    if (this.worker.stopping) return;
    const claimed = await sipRepo.claim(db, ownerId, Date.now(), leaseMs, this.deps.claimBatch ?? 20);
    for (const row of claimed) {
      this.deps.log?.info({ registration: row.id, aor: row.aor }, 'SIP registration taken');
      this.#sync(row.id, row.org_id);
    }
  }

  /**
   * The worker stops (its loop has ended): registrations stop refreshing (they are not
   * un-REGISTERed: another worker takes them over, and the registrar keeps the binding until it
   * expires). With `release` (a clean stop) presence subscriptions are ended and the leases given
   * back; without it (a crash, in tests) subscriptions just stop and the leases run out.
   */
  async stop(release: boolean): Promise<void> {
    const unsubscribing: Promise<unknown>[] = [];
    for (const o of this.#owned.values()) {
      if (o.running) {
        o.running.stopped = true;
        o.running.reg.stop();
        // A clean stop ends presence subscriptions (the next owner subscribes again); a crash leaves them to expire.
        if (o.running.sub) unsubscribing.push(release ? this.#endPresence(o.running.sub) : Promise.resolve(o.running.sub.stop()));
      }
    }
    await Promise.allSettled(unsubscribing);
    await within(Promise.allSettled([...this.#owned.values()].map((o) => o.chain)), 5000, () => undefined);
    await Promise.allSettled([...this.#owned.values()].flatMap((o) => (o.running?.writing ? [o.running.writing] : [])));
    if (release) {
      await sipRepo.release(this.deps.database.db, this.deps.ownerId).catch((err: unknown) => this.deps.log?.error({ err }, 'releasing SIP registrations failed'));
    }
    this.#owned.clear();
  }

  #drop(o: Owned): void {
    this.#owned.delete(o.id);
    if (o.running) {
      o.running.stopped = true;
      o.running.reg.stop();
      o.running.sub?.stop();
      this.calls.untrack(o.running.callId);
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
      if (this.worker.stopping || this.#owned.get(id) !== owned) return;
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
    if (!row || row.lease_owner !== this.deps.ownerId) {
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
      this.calls.untrack(old.callId);
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
    const endpoint = this.worker.endpoint;
    if (this.worker.stopping || this.#owned.get(o.id) !== o || !endpoint) return;
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
    this.calls.track(running.callId, row.org_id);
    o.running = running;
    const contact = endpoint.contactFor(row.username, config.registrar.transport);
    const noPresence = row.subscribe === 1 ? {} : { presence_subscription: null, presence_state: null, presence_code: null, presence_reason: null, presence_updated_at: null };
    await sipRepo.writeStatus(this.deps.database.db, o.id, this.deps.ownerId, row.version, { contact, ...noPresence }).catch(() => undefined);
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
        await this.#writeStatusRow(o, running.version, s, running.aor, running).catch((err: unknown) =>
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
    // The realm the registrar challenged with when it accepted us: calls answer only that realm with
    // the registration's password (calls.ts, routeCredentials).
    const realm = s.ok ? [...(running?.reg.session.challenges.values() ?? [])][0]?.challenge.realm : undefined;
    const queued = await database.db.transaction().execute(async (tx) => {
      const wrote = await sipRepo.writeStatus(tx, o.id, this.deps.ownerId, version, {
        ...(realm !== undefined ? { challenge_realm: realm } : {}),
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
    const endpoint = this.worker.endpoint;
    if (!endpoint || this.worker.stopping) return;
    const orgId = o.orgId;
    running.sub = new PresenceSubscription(endpoint, running.config, {
      expires: this.deps.config.sipRegisterExpires,
      timeoutMs: this.deps.registerTimeoutMs ?? 10_000,
      retryMinMs: this.deps.retryMinMs, retryMaxMs: this.deps.retryMaxMs,
      onCallId: (callId, active) => (active ? this.calls.track(callId, orgId) : this.calls.untrack(callId)),
      onStatus: (status) => {
        if (running.stopped) return;
        running.presence = status;
        running.presenceWriting = running.presenceWriting.then(() => this.#writePresence(o, running)).catch((err: unknown) =>
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
      const wrote = await sipRepo.writeStatus(tx, o.id, this.deps.ownerId, running.version, {
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
    await within(sub.unsubscribe(UNSUBSCRIBE_MS).catch(() => undefined), UNSUBSCRIBE_MS + 1000, () => undefined);
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
      this.calls.untrack(running.callId);
    } else if (row.registered === 1) {
      // Registered by a process that is gone: if it had our address (a restart), this removes its binding.
      const session = newRegisterSession();
      this.calls.track(session.callId, row.org_id);
      try {
        result = await registerOnce(this.worker.endpoint!, this.#config(row), { expires: 0, timeoutMs: this.deps.registerTimeoutMs ?? 10_000, session });
      } catch (err) {
        result = { ok: false, error: (err as Error).message };
      }
      this.calls.untrack(session.callId);
    } else {
      result = { ok: false, error: 'not registered; nothing to remove at the registrar' };
    }
    o.running = undefined;
    const queued = await database.db.transaction().execute(async (tx) => {
      const gone = await sipRepo.removeOwned(tx, o.id, this.deps.ownerId);
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
}
