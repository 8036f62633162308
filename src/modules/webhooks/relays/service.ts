// Webhook relays: an organization's relay configuration per provider type (create/update, read,
// list, delete), the deliveries of what each relay received (and their replay), and the ingress:
// a provider's request verified, deduplicated and stored with its delivery in one transaction.
import crypto from 'node:crypto';
import type { Config } from '../../../config.ts';
import type { AccountRow, Db, WebhookRelayRow } from '../../../db/types.ts';
import type { Scope } from '../../../http/auth.ts';
import { Conflict, HttpError, Invalid, NotFound, Forbidden } from '../../../http/errors.ts';
import { maskSecret, type SecretBox } from '../../../lib/crypto.ts';
import { newId } from '../../../lib/ids.ts';
import { secretTargetRefusal, urlOrigin } from '../../../lib/secret-target.ts';
import { bool, flag } from '../../../db/flags.ts';
import { toUnixSeconds } from '../../../lib/time.ts';
import { TWILIO } from '../../../providers/twilio/carrier.ts';
import { notifyQueue } from '../../../queue/waker.ts';
import { checkTargetUrl, checkCustomHeaders, type TargetPolicy } from '../../../webhooks/ssrf.ts';
import { DEFAULT_TIMEOUT_MS, newSigningSecret } from '../../../webhooks/deliver.ts';
import { accountRepo } from '../../accounts/repository.ts';
import { providerSettings } from '../../numbering-providers/carriers.ts';
import {
  bodyFields, dedupeKey, isTwilio, keptHeaders, relayType, RELAY_TYPES, verifyBasicAuth, verifyStripe, verifyTwilio,
  type ProviderSecret, type RelayType, type RelayTypeInfo, type Verdict,
} from './providers.ts';
import { presentDelivery, replayDelivery } from '../deliveries.ts';
import { DELIVERIES } from '../dispatcher.ts';
import { attemptRepo, deliveryRepo, relayEventRepo, type RelayDelivery } from '../repository.ts';
import { relayRepo } from './repository.ts';

export { DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS } from '../../../webhooks/deliver.ts';
export const DEFAULT_SUCCESS_STATUS_CODES: readonly number[] = Array.from({ length: 100 }, (_, i) => 200 + i);
/** The path the provider posts to; the id after it is the relay's unguessable ingress id. */
export const INGRESS_PATH = '/hooks/relay';
const MAX_SECRET_LENGTH = 500;
const INGRESS_ID = /^[A-Za-z0-9_-]{16,128}$/;

/** The configuration as posted (fields the contract names, plus the provider secrets we need). */
export interface RelayBody {
  url?: unknown;
  timeout?: number;
  headers?: unknown;
  successStatusCodes?: number[];
  stripeSigningSecret?: unknown;
  username?: unknown;
  password?: unknown;
  rotateSigningSecret?: boolean;
}

export interface IngressRequest {
  ingressId: string;
  /** The URL as the provider called it: config.publicUrl + the request's path and query. */
  url: string;
  headers: Record<string, string | undefined>;
  contentType: string | undefined;
  rawBody: Buffer;
}

/** What a relay stores and forwards of a request: its headers and its exact bytes. */
export type RawRequest = Pick<IngressRequest, 'headers' | 'contentType' | 'rawBody'>;

export type IngressResult =
  | { kind: 'refused'; type: string; relayId: number; verdict: Extract<Verdict, { ok: false }> }
  | { kind: 'stored' | 'duplicate'; type: string; relayId: number; eventId: string };

export interface RelayServiceDeps {
  db: Db;
  box: SecretBox;
  config: Pick<Config, 'publicUrl'>;
  policy: TargetPolicy;
  /** Wakes this process's delivery runner (if it has one) after an event is stored. */
  notify: () => void;
  now?: () => number;
}

const PREMIUM_TO_CONFIGURE = 'Webhook Relay is a premium feature. Please upgrade your account.';
const PREMIUM_TO_USE = 'Webhook Relay is a premium feature. Please upgrade your account to use it.';

const secs = (ms: number | null | undefined) => toUnixSeconds(ms);

export function relayService(deps: RelayServiceDeps) {
  const { db, box, config, policy } = deps;
  const now = deps.now ?? Date.now;

  function typeOf(name: string): RelayTypeInfo {
    const t = relayType(name);
    if (!t) throw new NotFound(`Webhook Relay type '${name}' is not supported.`);
    return t;
  }

  /** The organization acted on: the token's own, or `targetAccountId` for resellers and partners. */
  async function premiumOrg(scope: Scope, targetAccountId: number | undefined, message: string): Promise<AccountRow> {
    const org = await scope.target(targetAccountId, ['organization']);
    if (!bool(org.vida_premium)) throw new Forbidden(message);
    return org;
  }

  const ingressUrl = (row: WebhookRelayRow) => `${config.publicUrl}${INGRESS_PATH}/${row.ingress_id}`;

  function providerSecret(row: WebhookRelayRow): ProviderSecret {
    return row.provider_secret ? box.openJson<ProviderSecret>(row.provider_secret) : {};
  }

  /** The auth token of the organization's twilio numbering provider (enabled or not), if any. */
  async function twilioAuthToken(orgId: number): Promise<string | undefined> {
    const settings: Record<string, unknown> | undefined = await providerSettings(db, box, orgId, TWILIO);
    const token = settings?.authToken;
    return typeof token === 'string' && token !== '' ? token : undefined;
  }

  /** Whether the ingress can verify requests yet, and what it checks. */
  async function verification(row: WebhookRelayRow, secret: ProviderSecret) {
    const t = typeOf(row.type);
    if (isTwilio(row.type)) {
      const ready = (await twilioAuthToken(row.org_id)) !== undefined;
      return {
        scheme: t.scheme, ready,
        detail: ready ? 'X-Twilio-Signature, with the auth token of the organization\'s twilio numbering provider'
          : 'Add a twilio numbering provider with an authToken to this organization: until then every request is refused',
      };
    }
    if (row.type === 'stripe') {
      const ready = Boolean(secret.stripeSigningSecret);
      return {
        scheme: t.scheme, ready,
        detail: ready ? 'Stripe-Signature, with stripeSigningSecret (timestamps within 5 minutes)'
          : 'Set stripeSigningSecret (the whsec_… secret Stripe shows for this endpoint): until then every request is refused',
      };
    }
    if (row.type === 'chargebee') return { scheme: t.scheme, ready: true, detail: 'HTTP basic auth with the configured username and password' };
    return { scheme: t.scheme, ready: true, detail: 'None: the ingress URL is the credential; keep it secret' };
  }

  /** The configuration as shown: header values and every secret masked. */
  async function view(row: WebhookRelayRow) {
    const secret = providerSecret(row);
    const headers = box.openJson<Array<Record<string, string>>>(row.headers)
      .map((h) => Object.fromEntries(Object.entries(h).map(([k, v]) => [k, maskSecret(v)])));
    return {
      type: row.type,
      url: row.url,
      timeout: row.timeout_ms,
      headers,
      successStatusCodes: JSON.parse(row.success_status_codes) as number[],
      ingressUrl: ingressUrl(row),
      signingSecret: maskSecret(box.open(row.signing_secret)),
      enabled: bool(row.enabled),
      verification: await verification(row, secret),
      ...(row.type === 'stripe' ? { stripeSigningSecret: secret.stripeSigningSecret ? maskSecret(secret.stripeSigningSecret) : null } : {}),
      ...(row.type === 'chargebee' ? { username: secret.username ?? null, password: secret.password ? maskSecret(secret.password) : null } : {}),
      createdAt: secs(row.created_at),
      updatedAt: secs(row.updated_at),
    };
  }

  function optionalSecret(value: unknown, field: string): string | null | undefined {
    if (value === undefined) return undefined;
    if (value === null) return null;
    if (typeof value !== 'string' || value === '') throw new Invalid(`${field} must be a non-empty string`);
    if (value.length > MAX_SECRET_LENGTH) throw new Invalid(`${field} must be at most ${MAX_SECRET_LENGTH} characters long`);
    return value;
  }

  /** Checks the posted configuration; only what was sent is returned (an update keeps the rest). */
  function checkBody(type: RelayTypeInfo, body: RelayBody) {
    if (body.url === undefined || body.url === null || body.url === '') throw new Invalid('url is required');
    if (typeof body.url !== 'string') throw new Invalid('url must be a string');
    const target = checkTargetUrl(body.url, policy);
    if (!target.ok) throw new Invalid(target.message.startsWith('url') ? target.message : `url ${target.message}`);

    let headers: Array<Record<string, string>> | undefined;
    if (body.headers !== undefined) {
      const checked = checkCustomHeaders(body.headers);
      if (!checked.ok) throw new Invalid(checked.message);
      headers = checked.headers;
    }
    const codes = body.successStatusCodes === undefined ? undefined : [...new Set(body.successStatusCodes)].sort((a, b) => a - b);

    const given: Array<[keyof ProviderSecret, unknown]> = [
      ['stripeSigningSecret', body.stripeSigningSecret], ['username', body.username], ['password', body.password],
    ];
    const secrets: Partial<Record<keyof ProviderSecret, string | null>> = {};
    for (const [field, value] of given) {
      const checked = optionalSecret(value, field);
      if (checked === undefined) continue;
      const owner = field === 'stripeSigningSecret' ? 'stripe' : 'chargebee';
      if (type.name !== owner) throw new Invalid(`${field} applies only to ${owner} relays`);
      secrets[field] = checked;
    }
    if (typeof secrets.stripeSigningSecret === 'string' && !/^whsec_[A-Za-z0-9+/=_-]+$/.test(secrets.stripeSigningSecret)) {
      throw new Invalid('stripeSigningSecret must be the endpoint\'s signing secret as Stripe shows it (whsec_…)');
    }
    if (typeof secrets.username === 'string' && secrets.username.includes(':')) {
      throw new Invalid('username must not contain ":" (HTTP basic auth cannot carry it)');
    }
    return { url: target.url.toString(), timeout: body.timeout, headers, codes, secrets, rotate: body.rotateSigningSecret === true };
  }

  /**
   * Generates the basic-auth username and password a chargebee relay lacks (the contract's body
   * needs only `url`); returns what it generated, to be shown once.
   */
  function fillBasicAuth(secret: ProviderSecret): Partial<Record<'username' | 'password', string>> {
    const made: Partial<Record<'username' | 'password', string>> = {};
    if (!secret.username) secret.username = made.username = `chargebee-${crypto.randomBytes(6).toString('hex')}`;
    if (!secret.password) secret.password = made.password = crypto.randomBytes(24).toString('base64url');
    return made;
  }

  function mergeSecret(current: ProviderSecret, patch: Partial<Record<keyof ProviderSecret, string | null>>): ProviderSecret {
    const out: ProviderSecret = { ...current };
    for (const [k, v] of Object.entries(patch) as Array<[keyof ProviderSecret, string | null]>) {
      if (v === null) delete out[k];
      else out[k] = v;
    }
    return out;
  }

  async function relayOf(org: AccountRow, type: string, missing: string): Promise<WebhookRelayRow> {
    const row = await relayRepo.find(db, org.id, type);
    if (!row) throw new NotFound(missing);
    return row;
  }

  /** A relay delivery: the shared view plus the received event it forwards. */
  function presentRelayDelivery(d: RelayDelivery, attempts: Parameters<typeof presentDelivery>[1]) {
    return {
      ...presentDelivery(d, attempts),
      relayEventId: d.relay_event_id,
      providerEventId: d.provider_event_id,
      receivedAt: secs(d.received_at),
    };
  }

  async function verify(row: WebhookRelayRow, req: IngressRequest): Promise<Verdict> {
    if (isTwilio(row.type)) {
      const token = await twilioAuthToken(row.org_id);
      if (!token) return { ok: false, status: 403, message: 'this relay cannot verify X-Twilio-Signature: the organization has no twilio numbering provider with an authToken' };
      return verifyTwilio(token, req.url, req.rawBody, req.headers['x-twilio-signature']);
    }
    const secret = providerSecret(row);
    if (row.type === 'stripe') {
      if (!secret.stripeSigningSecret) return { ok: false, status: 403, message: 'this relay cannot verify Stripe-Signature: stripeSigningSecret is not configured' };
      return verifyStripe(secret.stripeSigningSecret, req.headers['stripe-signature'], req.rawBody, Math.floor(now() / 1000));
    }
    if (row.type === 'chargebee') {
      return verifyBasicAuth(secret.username ?? '', secret.password ?? '', req.headers.authorization);
    }
    return { ok: true };
  }

  /** A verified request stored with its delivery (due now) in one transaction, unless its event id was seen already. */
  async function store(row: WebhookRelayRow, req: RawRequest): Promise<IngressResult> {
    const key = dedupeKey(row.type, req.headers, bodyFields(req.contentType, req.rawBody), req.rawBody);
    const at = now();
    const eventId = newId('rev', at);
    const stored = await db.transaction().execute(async (tx) => {
      const event = await relayEventRepo.insert(tx, {
        id: eventId, relay_id: row.id, org_id: row.org_id, provider_event_id: key,
        content_type: req.contentType ?? null, headers: JSON.stringify(keptHeaders(req.headers)),
        body: req.rawBody.toString('base64'), received_at: at,
      });
      if (!event) return false;
      await deliveryRepo.insert(tx, {
        id: newId('dlv', at), org_id: row.org_id, kind: 'relay', relay_id: row.id, relay_event_id: event.id,
        event_id: event.id, event_type: row.type, payload: null, run_at: at, created_at: at, updated_at: at,
      });
      await notifyQueue(tx, DELIVERIES);
      return true;
    });
    if (!stored) {
      const first = await relayEventRepo.find(db, row.id, key!);
      return { kind: 'duplicate', type: row.type, relayId: row.id, eventId: first?.id ?? '' };
    }
    deps.notify();
    return { kind: 'stored', type: row.type, relayId: row.id, eventId };
  }

  return {
    types() {
      return {
        success: true, message: 'Webhook Relay types fetched successfully',
        types: RELAY_TYPES.map((t) => ({ name: t.name, description: t.description })),
      };
    },

    async upsert(scope: Scope, targetAccountId: number | undefined, typeName: string, body: RelayBody) {
      const type = typeOf(typeName);
      const org = await premiumOrg(scope, targetAccountId, PREMIUM_TO_CONFIGURE);
      const input = checkBody(type, body);
      const at = now();
      let issued: string | undefined;
      let generated: Partial<Record<'username' | 'password', string>> = {};
      const row = await db.transaction().execute(async (tx) => {
        let existing = await relayRepo.find(tx, org.id, type.name, { lock: true });
        if (!existing) {
          const secret = mergeSecret({}, input.secrets);
          if (type.name === 'chargebee') generated = fillBasicAuth(secret);
          const signing = newSigningSecret();
          const created = await relayRepo.insert(tx, {
            org_id: org.id, type: type.name, ingress_id: crypto.randomBytes(32).toString('base64url'),
            url: input.url, timeout_ms: input.timeout ?? DEFAULT_TIMEOUT_MS,
            headers: box.sealJson(input.headers ?? []),
            success_status_codes: JSON.stringify(input.codes ?? DEFAULT_SUCCESS_STATUS_CODES),
            signing_secret: box.seal(signing),
            provider_secret: Object.keys(secret).length ? box.sealJson(secret) : null,
            enabled: 1, created_at: at, updated_at: at,
          });
          if (created) {
            issued = signing;
            return created;
          }
          // Created by a concurrent request since we looked: update that one.
          existing = await relayRepo.find(tx, org.id, type.name, { lock: true });
          if (!existing) throw new Conflict(`Webhook Relay type '${type.name}' was changed concurrently; try again`);
        }
        // Header values are answered masked, as secrets (an Authorization, an API key): they go only
        // to the origin they were given for (docs/api.md, "Secrets and their targets").
        const refused = secretTargetRefusal({
          secret: 'headers', target: 'url', before: urlOrigin(existing.url), after: urlOrigin(input.url),
          keeps: input.headers === undefined && box.openJson<unknown[]>(existing.headers).length > 0,
        });
        if (refused) throw new Invalid(refused);
        const secret = mergeSecret(providerSecret(existing), input.secrets);
        // Credentials cleared with null are generated anew: a chargebee relay always checks basic auth.
        if (type.name === 'chargebee') generated = fillBasicAuth(secret);
        if (input.rotate) issued = newSigningSecret();
        return relayRepo.update(tx, existing.id, {
          url: input.url,
          ...(input.timeout !== undefined ? { timeout_ms: input.timeout } : {}),
          ...(input.headers !== undefined ? { headers: box.sealJson(input.headers) } : {}),
          ...(input.codes !== undefined ? { success_status_codes: JSON.stringify(input.codes) } : {}),
          ...(issued !== undefined ? { signing_secret: box.seal(issued) } : {}),
          provider_secret: Object.keys(secret).length ? box.sealJson(secret) : null,
          // Configuring it again re-enables a relay its receiver had turned off with 410 Gone.
          enabled: flag(true),
          updated_at: at,
        });
      });
      return {
        success: true,
        message: `Webhook Relay for type '${type.name}' configured successfully.`,
        config: await view(row),
        // Our signing secret, in full only here: when the relay is created or the secret rotated.
        ...(issued !== undefined ? { signingSecret: issued } : {}),
        // Chargebee basic-auth credentials we generated (none were sent), in full only here.
        ...generated,
      };
    },

    async get(scope: Scope, targetAccountId: number | undefined, typeName: string) {
      const type = typeOf(typeName);
      const org = await premiumOrg(scope, targetAccountId, PREMIUM_TO_USE);
      const row = await relayOf(org, type.name, `Webhook Relay type '${type.name}' not configured.`);
      return { success: true, message: 'Webhook Relay configuration fetched successfully.', config: await view(row) };
    },

    async list(scope: Scope, targetAccountId: number | undefined) {
      const org = await premiumOrg(scope, targetAccountId, PREMIUM_TO_USE);
      const rows = await relayRepo.list(db, org.id);
      if (rows.length === 0) throw new NotFound('No webhook relay configurations found.');
      const configs = [];
      for (const row of rows) configs.push(await view(row));
      return { success: true, message: 'Webhook Relay configurations fetched successfully.', configs };
    },

    async remove(scope: Scope, targetAccountId: number | undefined, typeName: string) {
      const type = typeOf(typeName);
      const org = await premiumOrg(scope, targetAccountId, PREMIUM_TO_USE);
      if (!(await relayRepo.remove(db, org.id, type.name))) throw new NotFound(`Webhook Relay type '${type.name}' was not configured.`);
      return { success: true, message: `Webhook Relay type '${type.name}' removed successfully.` };
    },

    async deliveries(scope: Scope, targetAccountId: number | undefined, typeName: string, q: { limit?: number; offset?: number }) {
      const type = typeOf(typeName);
      const org = await premiumOrg(scope, targetAccountId, PREMIUM_TO_USE);
      const relay = await relayOf(org, type.name, `Webhook Relay type '${type.name}' not configured.`);
      const limit = q.limit ?? 100;
      const offset = q.offset ?? 0;
      const [total, rows] = await Promise.all([
        deliveryRepo.countForRelay(db, org.id, relay.id),
        deliveryRepo.pageForRelay(db, org.id, relay.id, limit, offset),
      ]);
      const attempts = await attemptRepo.byDelivery(db, rows.map((r) => r.id));
      return {
        success: true, message: 'Webhook Relay deliveries fetched successfully.', total, limit, offset,
        deliveries: rows.map((r) => presentRelayDelivery(r, attempts.get(r.id) ?? [])),
      };
    },

    async replay(scope: Scope, targetAccountId: number | undefined, typeName: string, deliveryId: string) {
      const type = typeOf(typeName);
      const org = await premiumOrg(scope, targetAccountId, PREMIUM_TO_USE);
      const relay = await relayOf(org, type.name, `Webhook Relay type '${type.name}' not configured.`);
      const original = deliveryId.length <= 64 ? await deliveryRepo.findForRelay(db, org.id, relay.id, deliveryId) : undefined;
      if (!original) throw new NotFound(`Delivery ${deliveryId} was not found`);
      const created = await replayDelivery(db, original, now());
      deps.notify();
      return {
        success: true, message: `Delivery ${deliveryId} replayed as ${created.id}.`,
        delivery: presentRelayDelivery({ ...created, provider_event_id: original.provider_event_id, received_at: original.received_at }, []),
      };
    },

    /**
     * A provider's request at an ingress URL: refused unless it verifies; else stored with its
     * delivery (due now) in one transaction, unless the provider's event id was seen already.
     */
    async receive(req: IngressRequest): Promise<IngressResult> {
      const row = INGRESS_ID.test(req.ingressId) ? await relayRepo.findByIngress(db, req.ingressId) : undefined;
      if (!row) throw new NotFound('No webhook relay at this address');
      const org = await accountRepo.findById(db, row.org_id);
      if (!org || !bool(org.vida_premium)) throw new Forbidden(PREMIUM_TO_USE);
      if (!bool(row.enabled)) {
        throw new HttpError(410, 'This webhook relay is disabled: its URL answered 410 Gone. Configure the relay again to re-enable it.');
      }
      const verdict = await verify(row, req);
      if (!verdict.ok) return { kind: 'refused', type: row.type, relayId: row.id, verdict };
      return store(row, req);
    },

    /**
     * A provider's request that one of our own webhooks already received and verified (the
     * Twilio SMS webhook, src/modules/conversations/sms.ts), handed to the organization's relay of
     * this type as if it had come to the relay's ingress: stored and forwarded, deduplicated the
     * same way. Nothing happens (undefined) when the organization has no such relay, the relay is
     * disabled, or the organization is not premium.
     */
    async forwardVerified(orgId: number, type: RelayType, req: RawRequest): Promise<IngressResult | undefined> {
      const row = await relayRepo.find(db, orgId, type);
      if (!row || !bool(row.enabled)) return undefined;
      const org = await accountRepo.findById(db, orgId);
      if (!org || !bool(org.vida_premium)) return undefined;
      return store(row, req);
    },
  };
}

export type RelayService = ReturnType<typeof relayService>;
