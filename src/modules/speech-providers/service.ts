// An organization's own speech provider keys (issue 35), one per vendor: Deepgram, ElevenLabs,
// Cartesia, Google (a service account's JSON key) and OpenAI. Sealed like model provider keys,
// answered masked, bound to their base URL by the one rule of src/lib/secret-target.ts, and the
// resolution the voice side asks: an organization's enabled key wins over the process's
// (docs/voice.md, "Speech provider keys").
import type { SpeechConfig } from '../../config.ts';
import type { Db, Executor, SpeechProviderRow } from '../../db/types.ts';
import type { Scope } from '../../http/auth.ts';
import { Conflict, Invalid, NotFound } from '../../http/errors.ts';
import { maskSecret, type SecretBox } from '../../lib/crypto.ts';
import { secretTargetRefusal, urlOrigin } from '../../lib/secret-target.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import { vendorEngineCache, type SpeechCredentials, type VendorEngines } from '../../speech/registry.ts';
import { isSpeechVendor, SPEECH_VENDOR_URLS, SPEECH_VENDORS, type SpeechVendor } from '../../speech/vendors.ts';
import { checkTargetUrl, hostRefusal, lazyGuardedFetch, TargetRefusedError, type TargetPolicy } from '../../webhooks/ssrf.ts';
import { accountRepo } from '../accounts/repository.ts';
import { speechProviderRepo } from './repository.ts';

type Log = { warn(obj: object, msg: string): void };

/** The longest key of every vendor but Google. */
export const MAX_SPEECH_KEY_LENGTH = 1000;
/** The longest Google service account JSON key (they are about 2.3 KB). */
export const MAX_GOOGLE_KEY_LENGTH = 16_384;
export const MAX_SPEECH_BASE_URL_LENGTH = 2048;

/** Where a resolved key came from: the organization's own, or the process's configuration. */
export type SpeechKeySource = 'organization' | 'process';

export interface ResolvedSpeechCredentials extends SpeechCredentials {
  source: SpeechKeySource;
}

/** The process's keys by vendor (its configuration: CALLPLANE_DEEPGRAM_API_KEY, …). */
export type ProcessSpeechKeys = Partial<Record<SpeechVendor, SpeechCredentials>>;

/**
 * The keys this process is configured with: Deepgram's, ElevenLabs' and Cartesia's
 * (CALLPLANE_<VENDOR>_API_KEY and _URL: config.speech.providers) and the OpenAI-compatible speech
 * server's when it has a key (CALLPLANE_SPEECH_API_KEY and CALLPLANE_SPEECH_BASE_URL). Google's
 * process credentials are a key file (GOOGLE_APPLICATION_CREDENTIALS), which the registry's own
 * Google engines use; an organization's Google key is the service account's JSON itself.
 */
export function processSpeechKeys(speech: Pick<SpeechConfig, 'providers' | 'apiKey' | 'baseUrl'>): ProcessSpeechKeys {
  const keys: ProcessSpeechKeys = {};
  for (const vendor of ['deepgram', 'elevenlabs', 'cartesia'] as const) {
    const p = speech.providers[vendor];
    if (p) keys[vendor] = { apiKey: p.apiKey, baseUrl: p.url };
  }
  if (speech.apiKey) keys.openai = { apiKey: speech.apiKey, baseUrl: speech.baseUrl };
  return keys;
}

/**
 * The key `vendor` is used with for the organization: its own when it has one enabled (at its base
 * URL, else the vendor's), else the process's, else undefined. The key comes back opened: hand it
 * to the engine, never to a log.
 */
export async function speechCredentials(db: Executor, box: SecretBox, orgId: number, vendor: SpeechVendor, processKeys: ProcessSpeechKeys): Promise<ResolvedSpeechCredentials | undefined> {
  const row = await speechProviderRepo.find(db, orgId, vendor);
  if (row && row.enabled === 1) return { apiKey: box.open(row.api_key), baseUrl: row.base_url ?? SPEECH_VENDOR_URLS[vendor], source: 'organization' };
  const own = processKeys[vendor];
  return own ? { ...own, source: 'process' } : undefined;
}

/** POST /api/v2/speech/providers. */
export interface AddSpeechProviderBody {
  vendor: string;
  apiKey: string;
  baseUrl?: string | null;
  enabled?: boolean;
}

/** PUT /api/v2/speech/providers/{vendor}: what is sent changes, what is left out stays. */
export interface UpdateSpeechProviderBody {
  /** Omitted: the stored key is kept, unless baseUrl changes its origin (then 400 until it is sent again). */
  apiKey?: string;
  /** Null: the vendor's own URL. */
  baseUrl?: string | null;
  enabled?: boolean;
}

const hasControl = (s: string) => [...s].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f);

interface GoogleServiceAccount { type: 'service_account'; client_email: string; private_key: string; private_key_id?: string }

/** A Google service account key as its JSON file holds it, or a 400 naming apiKey. */
function googleKey(raw: string): GoogleServiceAccount {
  const refuse = (why: string) => new Invalid(`apiKey must be a Google service account's JSON key (the key file's contents): ${why}`);
  if (raw.length > MAX_GOOGLE_KEY_LENGTH) throw refuse(`at most ${MAX_GOOGLE_KEY_LENGTH} characters`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw refuse('it is not JSON');
  }
  const o = parsed as Partial<Record<keyof GoogleServiceAccount, unknown>> | null;
  if (typeof o !== 'object' || o === null || Array.isArray(o)) throw refuse('it is not a JSON object');
  if (o.type !== 'service_account') throw refuse('its type must be service_account');
  if (typeof o.client_email !== 'string' || !/^[^\s@]{1,200}@[^\s@]{1,200}$/.test(o.client_email)) throw refuse('client_email is missing');
  if (typeof o.private_key !== 'string' || !o.private_key.includes('PRIVATE KEY')) throw refuse('private_key is missing');
  if (o.private_key_id !== undefined && typeof o.private_key_id !== 'string') throw refuse('private_key_id must be a string');
  return o as GoogleServiceAccount;
}

/** A key as sent, checked for its vendor; a 400 naming apiKey otherwise. */
function checkKey(vendor: SpeechVendor, key: unknown): string {
  if (typeof key !== 'string' || key.trim() === '') throw new Invalid('apiKey is required: the provider\'s key, stored sealed and never answered in full');
  if (vendor === 'google') {
    googleKey(key);
    return key;
  }
  if (key.length > MAX_SPEECH_KEY_LENGTH || hasControl(key)) throw new Invalid(`apiKey must be at most ${MAX_SPEECH_KEY_LENGTH} characters without control characters`);
  return key.trim();
}

/** How a stored key is shown: the last four characters (Google: of its private_key_id) and, for Google, whose it is. */
function masked(vendor: SpeechVendor, key: string): { apiKey: string; serviceAccount: string | null } {
  if (vendor !== 'google') return { apiKey: maskSecret(key), serviceAccount: null };
  try {
    const g = googleKey(key);
    return { apiKey: maskSecret(g.private_key_id ?? ''), serviceAccount: g.client_email };
  } catch {
    return { apiKey: '****', serviceAccount: null };
  }
}

export interface SpeechProvidersServiceDeps {
  db: Db;
  box: SecretBox;
  /** Where an organization's base URL may point (CALLPLANE_ALLOW_PRIVATE_TARGETS). */
  policy: TargetPolicy;
  /** The process's keys (processSpeechKeys of the configuration). */
  processKeys: ProcessSpeechKeys;
  /** The speech settings engines are built with (timeouts, retries, OpenAI models). */
  speech: SpeechConfig;
  /** Engines kept built for given credentials (default 200). */
  maxEngines?: number;
  log?: Log;
  now?: () => number;
}

export function speechProvidersService(deps: SpeechProvidersServiceDeps) {
  const { db, box, policy, processKeys, log } = deps;
  const now = deps.now ?? Date.now;
  const organization = (scope: Scope, targetAccountId: number | undefined) => scope.target(targetAccountId, ['organization']);

  // An organization's base URL is a customer URL: the HTTP requests of engines that take a fetch go
  // through the SSRF guard, which resolves names itself and refuses what the policy does not allow.
  const guarded = lazyGuardedFetch(policy, { log });
  const orgEngines = vendorEngineCache(deps.speech, { max: deps.maxEngines, fetch: guarded.fetch });
  const processEngines = vendorEngineCache(deps.speech, { max: SPEECH_VENDORS.length });

  function vendorOf(raw: string): SpeechVendor {
    if (!isSpeechVendor(raw)) throw new Invalid(`vendor must be one of ${SPEECH_VENDORS.join(', ')} (got '${String(raw).slice(0, 40)}')`);
    return raw;
  }

  /** A base URL as sent: null (or omitted) for the vendor's own; otherwise an http(s) URL the address policy allows. */
  function checkBaseUrl(raw: string | null | undefined): string | null {
    if (raw === undefined || raw === null) return null;
    const target = checkTargetUrl(raw, policy);
    if (!target.ok) throw new Invalid(target.message.replace(/^url\b/, 'baseUrl'));
    if (target.url.search !== '' || target.url.hash !== '') throw new Invalid('baseUrl must not carry a query or a fragment (such as https://api.deepgram.com)');
    return raw.trim().replace(/\/+$/, '');
  }

  function view(row: SpeechProviderRow) {
    const vendor = row.vendor as SpeechVendor;
    return {
      vendor,
      ...masked(vendor, box.open(row.api_key)),
      baseUrl: row.base_url,
      enabled: row.enabled === 1,
      createdAt: toUnixSeconds(row.created_at),
      updatedAt: toUnixSeconds(row.updated_at),
    };
  }

  /** The organization's own base URL, checked against the address policy where it is used (its name resolved now). */
  async function checkTarget(c: ResolvedSpeechCredentials): Promise<void> {
    if (c.source !== 'organization') return;
    const refusal = await hostRefusal(new URL(c.baseUrl).hostname, policy, undefined, log);
    if (refusal) throw new TargetRefusedError(refusal, new URL(c.baseUrl).hostname);
  }

  return {
    /**
     * The key `vendor` is used with for the organization (its own enabled one, else the process's),
     * or undefined. An organization's base URL whose name resolves to an address the policy refuses
     * throws TargetRefusedError (its message names the host only), so the caller falls back.
     */
    async credentials(orgId: number, vendor: SpeechVendor): Promise<ResolvedSpeechCredentials | undefined> {
      const c = await speechCredentials(db, box, orgId, vendor, processKeys);
      if (c) await checkTarget(c);
      return c;
    },

    /**
     * The engines of `vendor` for the organization (credentials() first), built once per key and
     * kept; undefined when there is no key, or this build has no engines of the vendor.
     */
    async engines(orgId: number, vendor: SpeechVendor): Promise<{ engines: VendorEngines; source: SpeechKeySource } | undefined> {
      const c = await this.credentials(orgId, vendor);
      if (!c) return undefined;
      const engines = (c.source === 'organization' ? orgEngines : processEngines).engineFor(vendor, { apiKey: c.apiKey, baseUrl: c.baseUrl });
      return engines ? { engines, source: c.source } : undefined;
    },

    async list(scope: Scope, targetAccountId: number | undefined) {
      const org = await organization(scope, targetAccountId);
      const rows = await speechProviderRepo.list(db, org.id);
      return { success: true, message: 'Success', providers: rows.filter((r) => isSpeechVendor(r.vendor)).map(view) };
    },

    async add(scope: Scope, targetAccountId: number | undefined, body: AddSpeechProviderBody) {
      const vendor = vendorOf(body.vendor);
      const org = await organization(scope, targetAccountId);
      const apiKey = checkKey(vendor, body.apiKey);
      const baseUrl = checkBaseUrl(body.baseUrl);
      const row = await db.transaction().execute(async (tx) => {
        await accountRepo.lock(tx, org.id);
        if (await speechProviderRepo.find(tx, org.id, vendor)) {
          throw new Conflict(`The organization already has a ${vendor} key: change it with PUT /api/v2/speech/providers/${vendor}, or delete it first`);
        }
        return speechProviderRepo.insert(tx, org.id, vendor, { api_key: box.seal(apiKey), base_url: baseUrl, enabled: body.enabled === false ? 0 : 1 }, now());
      });
      return { success: true, message: `Speech provider ${vendor} added`, provider: view(row) };
    },

    async update(scope: Scope, targetAccountId: number | undefined, rawVendor: string, body: UpdateSpeechProviderBody) {
      const vendor = vendorOf(rawVendor);
      const org = await organization(scope, targetAccountId);
      const apiKey = body.apiKey === undefined ? undefined : checkKey(vendor, body.apiKey);
      const baseUrl = body.baseUrl === undefined ? undefined : checkBaseUrl(body.baseUrl);
      const at = now();
      const row = await db.transaction().execute(async (tx) => {
        await accountRepo.lock(tx, org.id);
        const existing = await speechProviderRepo.find(tx, org.id, vendor);
        if (!existing) throw new NotFound(`The organization has no ${vendor} key: add one with POST /api/v2/speech/providers`);
        const nextUrl = baseUrl === undefined ? existing.base_url : baseUrl;
        // The stored key goes only to the origin it was given for (docs/api.md, "Secrets and their targets").
        const refused = secretTargetRefusal({
          secret: 'apiKey', target: 'baseUrl',
          before: urlOrigin(existing.base_url ?? SPEECH_VENDOR_URLS[vendor]), after: urlOrigin(nextUrl ?? SPEECH_VENDOR_URLS[vendor]),
          keeps: apiKey === undefined,
        });
        if (refused) throw new Invalid(refused);
        return speechProviderRepo.update(tx, org.id, vendor, {
          api_key: apiKey === undefined ? existing.api_key : box.seal(apiKey),
          base_url: nextUrl,
          enabled: body.enabled === undefined ? (existing.enabled === 1 ? 1 : 0) : body.enabled ? 1 : 0,
        }, Math.max(at, Number(existing.updated_at) + 1));
      });
      return { success: true, message: `Speech provider ${vendor} updated`, provider: view(row) };
    },

    async remove(scope: Scope, targetAccountId: number | undefined, rawVendor: string) {
      const org = await organization(scope, targetAccountId);
      const removed = isSpeechVendor(rawVendor) ? await speechProviderRepo.remove(db, org.id, rawVendor) : 0;
      if (removed === 0) throw new NotFound(`Speech provider ${rawVendor.slice(0, 40)} was not found`);
      return { success: true, message: `Speech provider ${rawVendor} deleted` };
    },

    /** Closes the connections kept to organizations' own servers (at shutdown). */
    close: (): Promise<void> => guarded.close(),
  };
}

export type SpeechProvidersService = ReturnType<typeof speechProvidersService>;
