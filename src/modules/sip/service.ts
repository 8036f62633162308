// SIP operations of the API: an organization's registration (stored here, registered by the
// worker that owns it: src/modules/sip/registrations.ts), its inbound IP whitelist, its outbound routes
// and its captures. The API process never speaks SIP itself: it writes the configuration, wakes
// the workers and waits (bounded) for the owner's first REGISTER to answer 201/200 or 502.
import { toPcap, toTransactions, type CapturedMessage } from './capture-exports.ts';
import type { AccountRow, Db, SipRegistrationRow } from '../../db/types.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { Scope } from '../../http/auth.ts';
import { Conflict, Forbidden, HttpError, Invalid, NotFound } from '../../http/errors.ts';
import { maskSecret, type SecretBox } from '../../lib/crypto.ts';
import { secretTargetRefusal, sipOrigin } from '../../lib/secret-target.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import { notifyQueue } from '../../queue/waker.ts';
import { hostRefusal, refusalReason, type TargetPolicy } from '../../webhooks/ssrf.ts';
import { accountRepo } from '../accounts/repository.ts';
import { recordRegistrationEvent, type PresenceData } from './events.ts';
import {
  isSipUser, parseAor, parseHostPort, parseOutboundRoute, parseWhitelistIp, routeKey, whitelistRefusal, type Aor,
} from './parse.ts';
import { registrarOf } from './registrations.ts';
import { sipRepo } from './repository.ts';

/** The wakeup channel of registration owners (in-process and PostgreSQL NOTIFY). */
export const SIP_REGISTRATIONS = 'sip_registrations';
/** How long POST/DELETE wait for the owning worker: a claim turn plus the REGISTER's own 10 s bound. */
export const DEFAULT_WORKER_WAIT_MS = 14_000;
export const MAX_WHITELIST = 1000;
export const MAX_ROUTES = 100;
const MAX_CAPTURES = 2000;
const TRANSPORTS = ['UDP', 'TCP', 'TLS'] as const;

export interface RegistrationBody {
  aor?: string;
  username?: string;
  authUsername?: string;
  password?: string;
  sipRealm?: string;
  proxy?: string;
  port?: number;
  transport?: string;
  subscribe?: boolean;
}

export interface SipServiceDeps {
  db: Db;
  box: SecretBox;
  /** The address policy of outbound targets (CALLPLANE_ALLOW_PRIVATE_TARGETS): registrars, proxies, routes; loopback whitelist entries. */
  policy: TargetPolicy;
  /** Wakes this process's registration owner and delivery worker (other processes hear NOTIFY). */
  wake?: () => void;
  wakeDeliveries?: () => void;
  workerWaitMs?: number;
  /** Where peers send INVITEs (from the configuration), for GET /api/v2/sip/ingress. */
  ingress?: { enabled: boolean; host: string; port: number };
}

/** A 502: the registrar (or our worker) did not accept the registration. */
export class BadGateway extends HttpError {
  constructor(message: string, extra?: Record<string, unknown>) { super(502, message, extra); }
}

/** What GET /api/v2/sip/captures answers: the contract's `text | pcap | json | transaction`. */
export const CAPTURE_FORMATS = ['json', 'text', 'pcap', 'transaction'];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A registration as the API shows it: everything but the password, and the owner's status. */
export function presentRegistration(row: SipRegistrationRow) {
  const status = row.deleting ? 'deleting'
    : row.attempted_version < row.version ? 'pending'
      : row.registered ? 'registered' : 'failed';
  return {
    id: row.id,
    userId: row.org_id,
    aor: row.aor,
    username: row.username,
    authUsername: row.auth_username,
    sipRealm: row.realm,
    // The contract types proxy as a string: without one (REGISTERs go to the AOR's host) it is absent, not null.
    ...(row.proxy !== null ? { proxy: row.proxy } : {}),
    port: row.port,
    transport: row.transport,
    subscribe: row.subscribe === 1,
    status,
    registered: row.registered === 1,
    lastCode: row.last_code,
    lastReason: row.last_reason,
    lastError: row.last_error,
    expiresAt: toUnixSeconds(row.expires_at),
    lastAttemptAt: toUnixSeconds(row.last_attempt_at),
    nextAttemptAt: toUnixSeconds(row.next_attempt_at),
    presence: presenceOf(row),
    createdAt: toUnixSeconds(row.created_at),
    updatedAt: toUnixSeconds(row.updated_at),
  };
}

/** The presence a registration with `subscribe` keeps (null without `subscribe`). */
export function presenceOf(row: Pick<SipRegistrationRow, 'subscribe' | 'presence_subscription' | 'presence_state' | 'presence_code' | 'presence_reason' | 'presence_updated_at'>): PresenceData | null {
  if (row.subscribe !== 1) return null;
  return {
    subscription: row.presence_subscription ?? null,
    state: row.presence_state ?? null,
    code: row.presence_code ?? null,
    reason: row.presence_reason ?? null,
    updatedAt: toUnixSeconds(row.presence_updated_at ?? null),
  };
}

// eslint-disable-next-line no-control-regex -- matching control characters is what this pattern is for
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * A route's own digest credentials from a POST body: `username` and `password` together, or
 * neither (400 naming the field). They answer only the route's next hop (docs/sip.md, "Credentials").
 */
function routeCredentialsOf(body: { username?: unknown; password?: unknown }): { username: string; password: string } | undefined {
  const given = (v: unknown) => v !== undefined && v !== null && v !== '';
  if (!given(body.username) && !given(body.password)) return undefined;
  if (typeof body.username !== 'string' || !given(body.username)) throw new Invalid('username is required with password (the digest user of the route\'s next hop)');
  if (typeof body.password !== 'string' || !given(body.password)) throw new Invalid('password is required with username');
  if (!isSipUser(body.username)) throw new Invalid(`username '${body.username.slice(0, 40)}' has characters a SIP user cannot have`);
  if (body.password.length > 256) throw new Invalid('password must be at most 256 characters long');
  if (CONTROL.test(body.password)) throw new Invalid('password must not contain control characters');
  return { username: body.username, password: body.password };
}

function text(value: string | undefined, field: string, max: number): string | undefined {
  if (value === undefined) return undefined;
  const t = value.trim();
  if (t === '') return undefined;
  if (t.length > max) throw new Invalid(`${field} must be at most ${max} characters long`);
  if (CONTROL.test(t)) throw new Invalid(`${field} must not contain control characters`);
  return t;
}

/** The registration columns a request sets, checked; the password only when given. */
interface RegistrationConfig {
  aor: string;
  aor_key: string;
  username: string;
  auth_username: string | null;
  password?: string;
  realm: string | null;
  proxy: string | null;
  port: number | null;
  transport: 'UDP' | 'TCP' | 'TLS';
  subscribe: 0 | 1;
}

/** What POST /sip/registration and /available name: `aor`, else `username` + `sipRealm`. */
function aorOf(body: { aor?: string; username?: string; sipRealm?: string }, required: string): Aor {
  const aorText = text(body.aor, 'aor', 300);
  if (aorText !== undefined) {
    const a = parseAor(aorText);
    if (!a.ok) throw new Invalid(a.message);
    return a.value;
  }
  const user = text(body.username, 'username', 128);
  const realm = text(body.sipRealm, 'sipRealm', 255);
  if (user === undefined || realm === undefined) throw new Invalid(required);
  const a = parseAor(`sip:${user}@${realm}`, 'username@sipRealm');
  if (!a.ok) {
    if (!isSipUser(user)) throw new Invalid(`username '${user}' has characters a SIP user cannot have`);
    throw new Invalid(a.message.replace(/^username@sipRealm( host)?/, 'sipRealm'));
  }
  return a.value;
}

function checkRegistration(body: RegistrationBody, existing: SipRegistrationRow | undefined): RegistrationConfig {
  const aor = aorOf(body, 'aor is required (or username and sipRealm to build it from)');
  const username = text(body.username, 'username', 128) ?? aor.user;
  if (!isSipUser(username)) throw new Invalid(`username '${username}' has characters a SIP user cannot have`);
  const authUsername = text(body.authUsername, 'authUsername', 128) ?? null;
  if (authUsername !== null && /["\\]/.test(authUsername)) throw new Invalid('authUsername must not contain quotes or backslashes');
  let password: string | undefined;
  if (body.password !== undefined && body.password !== '') {
    if (body.password.length > 256) throw new Invalid('password must be at most 256 characters long');
    if (CONTROL.test(body.password)) throw new Invalid('password must not contain control characters');
    password = body.password;
  } else if (!existing) {
    throw new Invalid('password is required');
  }
  const realm = text(body.sipRealm, 'sipRealm', 255) ?? null;
  let proxy: string | null = null;
  const proxyText = text(body.proxy, 'proxy', 300);
  if (proxyText !== undefined) {
    const stripped = proxyText.replace(/^sip:/i, '');
    const hp = parseHostPort(stripped, 'proxy');
    if (!hp.ok) throw new Invalid(hp.message);
    proxy = stripped;
  }
  let transport: RegistrationConfig['transport'] = 'UDP';
  if (body.transport !== undefined && body.transport.trim() !== '') {
    const t = body.transport.trim().toUpperCase();
    if (!(TRANSPORTS as readonly string[]).includes(t)) throw new Invalid(`transport must be UDP, TCP or TLS (got '${body.transport}')`);
    transport = t as RegistrationConfig['transport'];
  }
  const port = body.port ?? null;
  if (port !== null && (!Number.isInteger(port) || port < 1 || port > 65535)) throw new Invalid('port must be an integer from 1 to 65535');
  return {
    aor: aorFromBody(body, aor), aor_key: aor.key, username, auth_username: authUsername, password, realm, proxy, port,
    transport, subscribe: body.subscribe ? 1 : 0,
  };
}

/** The AOR as the caller wrote it (trimmed), or as built from username and sipRealm. */
function aorFromBody(body: RegistrationBody, aor: Aor): string {
  const given = body.aor?.trim();
  return given ? given : aor.key.replace(/^sip:/, '');
}

/** Why the registrar's answer is not a registration, for a 502. */
function rejection(row: SipRegistrationRow): { message: string; extra: Record<string, unknown> } {
  const extra: Record<string, unknown> = { sipStatus: row.last_code, sipReason: row.last_reason };
  if (row.last_code !== null) {
    const detail = row.last_error && row.last_error !== row.last_reason ? ` (${row.last_error})` : '';
    return { message: `The registrar answered ${row.last_code} ${row.last_reason ?? ''}`.trimEnd() + detail, extra };
  }
  return { message: `The registrar did not answer: ${row.last_error ?? 'no response'}`, extra };
}

export function sipService(deps: SipServiceDeps) {
  const { db, box } = deps;
  const waitMs = deps.workerWaitMs ?? DEFAULT_WORKER_WAIT_MS;

  /** The organization a request acts on; an agent's token may read its organization's settings, not change them. */
  async function tenant(scope: Scope, targetAccountId: number | undefined, change: boolean): Promise<AccountRow> {
    const account = await scope.target(targetAccountId, ['organization', 'agent']);
    if (account.kind === 'organization') return account;
    if (change && scope.actor.kind === 'agent') {
      throw new Forbidden('SIP settings belong to the organization: change them with the organization\'s token');
    }
    const org = await accountRepo.findById(db, account.org_id!);
    if (!org) throw new NotFound(`organization of account ${account.id} was not found`);
    return org;
  }

  const wake = () => deps.wake?.();

  /**
   * A SIP target (a name is resolved: every address must pass) under the address policy of all
   * outbound targets, or a 400 naming the field. The worker checks again at send time.
   */
  async function checkTarget(host: string, field: string): Promise<void> {
    const refused = await hostRefusal(host, deps.policy);
    if (refused !== null) throw new Invalid(`${field} host ${refused}`);
  }

  /** Where REGISTERs go: the proxy, else the AOR's host (`sipRealm` when the AOR was built from it). */
  async function checkRegistrar(cfg: RegistrationConfig, body: RegistrationBody): Promise<void> {
    const r = registrarOf(cfg);
    await checkTarget(r.host, cfg.proxy ? 'proxy' : body.aor?.trim() ? 'aor' : 'sipRealm');
  }

  /** Waits until the owner has tried `version` (or the row is gone or changed again). */
  async function awaitAttempt(id: number, version: number): Promise<SipRegistrationRow | 'gone' | 'timeout'> {
    const until = Date.now() + waitMs;
    for (;;) {
      const row = await sipRepo.registrationById(db, id);
      if (!row) return 'gone';
      if (row.version !== version || row.attempted_version >= version) return row;
      if (Date.now() >= until) return 'timeout';
      await sleep(100);
    }
  }

  function noWorker(): string {
    return `No SIP worker took the registration within ${Math.round(waitMs / 1000)} s (is a worker running with CALLPLANE_SIP_ENABLED?)`;
  }

  async function create(org: AccountRow, cfg: RegistrationConfig) {
    const now = Date.now();
    let row: SipRegistrationRow;
    try {
      row = await db.transaction().execute(async (tx) => {
        const inserted = await sipRepo.insertRegistration(tx, {
          org_id: org.id, ...cfg, password: box.seal(cfg.password!), version: 1, attempted_version: 0,
          created_at: now, updated_at: now,
        });
        await notifyQueue(tx, SIP_REGISTRATIONS);
        return inserted;
      });
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      const holder = await sipRepo.registrationByAorKey(db, cfg.aor_key);
      if (holder && holder.org_id !== org.id) throw new Conflict(`aor ${cfg.aor} is already registered by another organization`);
      throw new Conflict('The registration was created by a concurrent request; send it again to update it');
    }
    wake();
    const after = await awaitAttempt(row.id, 1);
    if (after !== 'gone' && after !== 'timeout' && after.version !== 1) {
      throw new Conflict('The registration was changed by a concurrent request meanwhile');
    }
    if (after !== 'gone' && after !== 'timeout' && after.registered === 1) {
      return { status: 201 as const, body: { success: true, message: 'Registration created successfully', registration: presentRegistration(after) } };
    }
    // Not accepted: nothing is kept, so the AOR is not held by a configuration that does not work.
    await sipRepo.deleteRegistration(db, row.id, 1);
    wake();
    if (after === 'gone') throw new Conflict('The registration was deleted by a concurrent request');
    if (after === 'timeout') throw new BadGateway(`${noWorker()}; the registration was not kept`);
    const r = rejection(after);
    throw new BadGateway(`${r.message}; the registration was not kept`, r.extra);
  }

  async function update(existing: SipRegistrationRow, cfg: RegistrationConfig) {
    const now = Date.now();
    const version = existing.version + 1;
    const { password, ...rest } = cfg;
    const changed = await db.transaction().execute(async (tx) => {
      const out = await sipRepo.updateRegistrationAt(tx, existing.id, existing.version, {
        // The realm the registrar challenges with is learnt again from the new configuration's REGISTER.
        ...rest, ...(password !== undefined ? { password: box.seal(password) } : {}), challenge_realm: null, version, updated_at: now,
      });
      if (out) await notifyQueue(tx, SIP_REGISTRATIONS);
      return out;
    });
    if (!changed) throw new Conflict('The registration was changed by a concurrent request meanwhile; send it again');
    wake();
    const after = await awaitAttempt(existing.id, version);
    if (after !== 'gone' && after !== 'timeout' && after.version !== version) {
      throw new Conflict('The registration was changed by a concurrent request meanwhile');
    }
    if (after !== 'gone' && after !== 'timeout' && after.registered === 1) {
      return { status: 200 as const, body: { success: true, message: 'Registration updated successfully', registration: presentRegistration(after) } };
    }
    if (after === 'gone') throw new Conflict('The registration was deleted by a concurrent request');
    // Not accepted: the previous configuration is put back (its owner registers it again).
    const restored = await db.transaction().execute(async (tx) => {
      const out = await sipRepo.updateRegistrationAt(tx, existing.id, version, {
        aor: existing.aor, aor_key: existing.aor_key, username: existing.username, auth_username: existing.auth_username,
        password: existing.password, realm: existing.realm, challenge_realm: existing.challenge_realm, proxy: existing.proxy, port: existing.port,
        transport: existing.transport, subscribe: existing.subscribe, version: version + 1, updated_at: Date.now(),
      });
      if (out) await notifyQueue(tx, SIP_REGISTRATIONS);
      return out;
    }).catch((err) => {
      // The AOR given back may meanwhile be another organization's; then the failed one stays.
      if (isUniqueViolation(err)) return undefined;
      throw err;
    });
    wake();
    const kept = restored ? 'the previous configuration was restored' : 'the previous configuration could not be restored';
    if (after === 'timeout') throw new BadGateway(`${noWorker()}; ${kept}`);
    const r = rejection(after);
    throw new BadGateway(`${r.message}; ${kept}`, r.extra);
  }

  return {
    tenant,

    async upsertRegistration(scope: Scope, targetAccountId: number | undefined, body: RegistrationBody) {
      const org = await tenant(scope, targetAccountId, true);
      const existing = await sipRepo.registrationOf(db, org.id);
      if (existing?.deleting) throw new Conflict('The registration is being deleted; try again in a moment');
      const cfg = checkRegistration(body, existing);
      // The stored password answers only the registrar it was given for (docs/api.md, "Secrets and their targets").
      const refused = existing && secretTargetRefusal({
        secret: 'password', target: 'the registrar (proxy, else the aor\'s host; port; transport)',
        before: sipOrigin(registrarOf(existing)), after: sipOrigin(registrarOf(cfg)), keeps: cfg.password === undefined,
      });
      if (refused) throw new Invalid(refused);
      await checkRegistrar(cfg, body);
      const holder = await sipRepo.registrationByAorKey(db, cfg.aor_key);
      if (holder && holder.org_id !== org.id) throw new Conflict(`aor ${cfg.aor} is already registered by another organization`);
      try {
        return existing ? await update(existing, cfg) : await create(org, cfg);
      } catch (err) {
        if (isUniqueViolation(err)) throw new Conflict(`aor ${cfg.aor} is already registered by another organization`);
        throw err;
      }
    },

    async getRegistration(scope: Scope, targetAccountId: number | undefined) {
      const org = await tenant(scope, targetAccountId, false);
      const row = await sipRepo.registrationOf(db, org.id);
      if (!row) throw new NotFound('Registration not found');
      return { success: true, message: 'Registration found', registration: presentRegistration(row) };
    },

    /**
     * Asks the owner to un-REGISTER (Expires: 0) and remove the registration, and waits for it.
     * Without an owner answering in time the row is removed anyway (the binding then lapses at
     * its expiry), and `unregistered: false` says so.
     */
    async deleteRegistration(scope: Scope, targetAccountId: number | undefined) {
      const org = await tenant(scope, targetAccountId, true);
      const row = await sipRepo.registrationOf(db, org.id);
      if (!row) throw new NotFound('Registration not found');
      const asked = Date.now();
      await db.transaction().execute(async (tx) => {
        await sipRepo.markDeleting(tx, row.id, asked);
        await notifyQueue(tx, SIP_REGISTRATIONS);
      });
      wake();
      const until = Date.now() + waitMs;
      while (Date.now() < until && (await sipRepo.registrationById(db, row.id))) await sleep(100);
      let unregistered: boolean;
      if (await sipRepo.registrationById(db, row.id)) {
        const queued = await db.transaction().execute(async (tx) => {
          if (!(await sipRepo.deleteRegistration(tx, row.id))) return false;
          return recordRegistrationEvent(tx, org.id, 'registration.unregistered', {
            aor: row.aor, registered: false, code: null, reason: null, error: noWorker(), expiresAt: null, lastAttemptAt: row.last_attempt_at === null ? null : toUnixSeconds(row.last_attempt_at),
          });
        });
        if (queued) deps.wakeDeliveries?.();
        unregistered = false;
      } else {
        // The owner recorded how the un-REGISTER went as the last event.
        const last = (await sipRepo.events(db, org.id)).reverse().find((e) => e.type === 'registration.unregistered' && e.created_at >= asked - 1000);
        const code = last ? Number((JSON.parse(last.payload) as { data?: { code?: number } }).data?.code ?? 0) : 0;
        unregistered = code >= 200 && code < 300;
      }
      return {
        success: true,
        message: unregistered ? 'Registration deleted successfully' : 'Registration deleted successfully; the registrar did not confirm the un-REGISTER, so the binding lapses at its expiry',
        unregistered,
      };
    },

    async available(scope: Scope, targetAccountId: number | undefined, body: { aor?: string; username?: string; sipRealm?: string }) {
      const org = await tenant(scope, targetAccountId, false);
      const aor = aorOf(body, 'aor is required (or username and sipRealm)');
      const holder = await sipRepo.registrationByAorKey(db, aor.key);
      if (!holder) return { success: true, available: true, message: 'AOR is available' };
      if (holder.org_id === org.id) return { success: true, available: true, message: 'AOR is registered by this organization already' };
      return { success: true, available: false, message: 'AOR is already registered by another organization' };
    },

    async listWhitelist(scope: Scope, targetAccountId: number | undefined) {
      const org = await tenant(scope, targetAccountId, false);
      return { success: true, message: 'Success', whitelist: await whitelistOf(org.id) };
    },

    /** Where to send calls: this deployment's SIP address (read-only configuration) and the Request-URI forms that reach the organization. */
    async ingress(scope: Scope, targetAccountId: number | undefined) {
      await tenant(scope, targetAccountId, false);
      const i = deps.ingress ?? { enabled: false, host: '127.0.0.1', port: 5060 };
      const at = i.port === 0 ? i.host : `${i.host}:${i.port}`;
      return {
        success: true, message: 'Success',
        ingress: {
          enabled: i.enabled, host: i.host, port: i.port === 0 ? null : i.port, transports: ['udp', 'tcp'],
          uriForms: [
            { form: `sip:<number>@${at}`, meaning: 'A number the organization holds (or names in its numbering provider settings), from an address on its IP whitelist' },
            { form: `sip:<user>@${at}`, meaning: 'The user of its SIP registration (our Contact at its registrar): calls arriving through the registrar' },
          ],
        },
      };
    },

    async addWhitelist(scope: Scope, targetAccountId: number | undefined, body: { ip: string; label?: string }) {
      const org = await tenant(scope, targetAccountId, true);
      const e = parseWhitelistIp(body.ip);
      if (!e.ok) throw new Invalid(e.message);
      const refused = whitelistRefusal(e.value, (address) => refusalReason(address, deps.policy) === null);
      if (refused !== null) throw new Invalid(refused);
      // The label is optional (an extension: the contract requires it for no reason an address needs one);
      // without one an entry keeps the label it had, or has none ('').
      const label = body.label === undefined ? undefined : text(body.label, 'label', 200) ?? '';
      const created = await db.transaction().execute(async (tx) => {
        const exists = (await sipRepo.whitelist(tx, org.id)).find((w) => w.ip === e.value.ip);
        if (!exists && (await sipRepo.countWhitelist(tx, org.id)) >= MAX_WHITELIST) {
          throw new Invalid(`an organization may whitelist at most ${MAX_WHITELIST} entries`);
        }
        return sipRepo.upsertWhitelist(tx, { org_id: org.id, ip: e.value.ip, label: label ?? exists?.label ?? '', created_at: Date.now() });
      });
      return {
        status: created ? 201 as const : 200 as const,
        body: { success: true, message: created ? 'IP entry created successfully' : 'IP entry already exists; its label was updated', whitelist: await whitelistOf(org.id) },
      };
    },

    async removeWhitelist(scope: Scope, targetAccountId: number | undefined, body: { ip: string }) {
      const org = await tenant(scope, targetAccountId, true);
      const e = parseWhitelistIp(body.ip);
      if (!e.ok) throw new Invalid(e.message);
      if (!(await sipRepo.deleteWhitelist(db, org.id, e.value.ip))) throw new NotFound(`ip ${e.value.ip} is not on the whitelist`);
      return { success: true, message: 'IP entry deleted successfully' };
    },

    async listRoutes(scope: Scope, targetAccountId: number | undefined) {
      const org = await tenant(scope, targetAccountId, false);
      return { success: true, message: 'Success', ...await routesOf(org.id) };
    },

    async addRoute(scope: Scope, targetAccountId: number | undefined, body: { route: string; username?: unknown; password?: unknown }) {
      const org = await tenant(scope, targetAccountId, true);
      const r = parseOutboundRoute(body.route);
      if (!r.ok) throw new Invalid(r.message);
      const creds = routeCredentialsOf(body);
      // The INVITE goes to the proxy when there is one, else to the host.
      if (r.value.proxy) await checkTarget(r.value.proxy.host, 'route proxyAddress');
      else await checkTarget(r.value.host, 'route');
      const key = routeKey(r.value);
      const created = await db.transaction().execute(async (tx) => {
        if ((await sipRepo.countRoutes(tx, org.id)) >= MAX_ROUTES) throw new Invalid(`an organization may have at most ${MAX_ROUTES} outbound routes`);
        const sealed = creds ? { username: creds.username, password: box.seal(creds.password) } : {};
        const inserted = await sipRepo.insertRoute(tx, {
          org_id: org.id, route: body.route.trim(), route_key: key, host: r.value.host, port: r.value.port ?? null,
          transport: r.value.transport, proxy_host: r.value.proxy?.host ?? null, proxy_port: r.value.proxy?.port ?? null,
          ...sealed, created_at: Date.now(),
        });
        // The route (so its host) is the key: credentials sent again for it replace its own.
        if (!inserted && creds) await sipRepo.setRouteCredentials(tx, org.id, key, sealed);
        return inserted;
      });
      const message = created ? 'Route added successfully' : creds ? 'Route credentials updated' : 'Route already exists';
      return { status: created ? 201 as const : 200 as const, body: { success: true, message, ...await routesOf(org.id) } };
    },

    async removeRoute(scope: Scope, targetAccountId: number | undefined, body: { route: string }) {
      const org = await tenant(scope, targetAccountId, true);
      const r = parseOutboundRoute(body.route);
      if (!r.ok) throw new Invalid(r.message);
      if (!(await sipRepo.deleteRoute(db, org.id, routeKey(r.value)))) throw new NotFound(`route ${body.route.trim()} was not found`);
      return { success: true, message: 'Route removed successfully' };
    },

    /** The organization's captured Call-IDs (registrations, calls, refused INVITEs), so a client can pick one to read. */
    async captureCalls(scope: Scope, q: { targetAccountId?: number; limit?: number }) {
      const org = await tenant(scope, q.targetAccountId, false);
      const rows = await sipRepo.captureCalls(db, org.id, q.limit ?? 20);
      const calls = rows.map((r) => {
        const firstLine = r.firstMessage.slice(0, Math.max(0, r.firstMessage.indexOf('\r\n'))) || r.firstMessage.slice(0, 200);
        const request = /^([A-Z]+) \S+ SIP\/2\.0$/.exec(firstLine);
        return { sipCallId: r.callId, firstAt: r.firstAt, lastAt: r.lastAt, count: r.count, firstLine, method: request ? request[1] : null };
      });
      return { success: true, message: 'Success', count: calls.length, calls };
    },

    async captures(scope: Scope, q: { targetAccountId?: number; sipCallId: string; from?: number; to?: number; format?: string }) {
      const org = await tenant(scope, q.targetAccountId, false);
      const format = (q.format ?? 'json').trim().toLowerCase();
      if (!CAPTURE_FORMATS.includes(format)) throw new Invalid(`format must be one of ${CAPTURE_FORMATS.join(', ')} (got '${q.format}')`);
      const callId = q.sipCallId.trim();
      if (callId === '') throw new Invalid('sipCallId must not be empty');
      if (q.from !== undefined && q.to !== undefined && q.from > q.to) throw new Invalid('from must not be after to');
      // Stored as integer millis (bigint on PostgreSQL): a fractional or huge bound is made one the column takes.
      const from = q.from === undefined ? undefined : Math.min(Math.ceil(q.from), Number.MAX_SAFE_INTEGER);
      const to = q.to === undefined ? undefined : Math.min(Math.floor(q.to), Number.MAX_SAFE_INTEGER);
      const rows = await sipRepo.captures(db, org.id, callId, from, to, MAX_CAPTURES);
      if (rows.length === 0) throw new NotFound(`No SIP messages were found for sipCallId ${callId}`);
      const messages: CapturedMessage[] = rows.map((r) => ({
        timestamp: r.created_at,
        direction: r.direction,
        transport: r.transport,
        source: r.direction === 'in' ? r.remote : r.local,
        destination: r.direction === 'in' ? r.local : r.remote,
        firstLine: r.message.slice(0, Math.max(0, r.message.indexOf('\r\n'))) || r.message.slice(0, 200),
        message: r.message,
      }));
      if (format === 'pcap') return { pcap: toPcap(messages) };
      if (format === 'transaction') {
        const transactions = toTransactions(messages);
        return { json: { success: true, message: 'Success', sipCallId: callId, count: transactions.length, transactions } };
      }
      if (format === 'text') {
        const body = messages.map((m) =>
          `${new Date(m.timestamp).toISOString()} ${m.transport} ${m.source} -> ${m.destination}\n${m.message.replace(/\r\n/g, '\n').replace(/\n+$/, '')}\n`).join('\n');
        return { text: body };
      }
      return { json: { success: true, message: 'Success', sipCallId: callId, count: messages.length, captures: messages } };
    },
  };

  async function whitelistOf(orgId: number) {
    return (await sipRepo.whitelist(db, orgId)).map((w) => ({ id: w.id, userId: w.org_id, label: w.label, timestamp: toUnixSeconds(w.created_at), ip: w.ip }));
  }

  /** The routes as the contract lists them, and (an extension) the credentials of those that have their own, masked. */
  async function routesOf(orgId: number) {
    const rows = await sipRepo.routes(db, orgId);
    const routeCredentials = rows.filter((r) => r.username !== null && r.password !== null)
      .map((r) => ({ route: r.route, username: r.username!, password: maskSecret(box.open(r.password!)) }));
    return { routes: rows.map((r) => r.route), ...(routeCredentials.length ? { routeCredentials } : {}) };
  }
}

export type SipService = ReturnType<typeof sipService>;
