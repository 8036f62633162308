// A reseller's (or partner's) billing system: Stripe or Chargebee, its keys sealed at rest, masked
// in every answer, checked against the processor on every save. An organization's subscriptions
// run on its reseller's billing system, else its partner's (the catalog's layering); without
// either they are recorded directly. docs/billing.md, "Payment processors".
import type { Config } from '../../config.ts';
import type { AccountRow, BillingSystemRow, Db } from '../../db/types.ts';
import type { Scope } from '../../http/auth.ts';
import { Invalid } from '../../http/errors.ts';
import { maskSecret, type SecretBox } from '../../lib/crypto.ts';
import { secretTargetRefusal, urlOrigin } from '../../lib/secret-target.ts';
import { nowMs, toUnixSeconds } from '../../lib/time.ts';
import { openProcessor, PROCESSOR_NAME, PROCESSORS, type Processor, type ProcessorKeys, type ProcessorType } from './processors.ts';
import { billingSystemRepo } from './repository.ts';

/** The body of POST /api/v2/billing/billingSystemConfig, as the contract names its fields. */
export interface BillingSystemInput {
  billingSystemType: string;
  apiKey?: string;
  publishableKey?: string;
  webhookSigningKey?: string;
  site?: string;
  webhookUsername?: string;
  webhookPassword?: string;
}

/** The fields each type requires (the contract's "Required", "Required for Stripe only", "Required for Chargebee only"). */
const REQUIRED: Record<ProcessorType, readonly (keyof BillingSystemInput)[]> = {
  stripe: ['apiKey', 'publishableKey', 'webhookSigningKey'],
  chargebee: ['apiKey', 'publishableKey', 'site', 'webhookUsername', 'webhookPassword'],
};
const ONLY: Partial<Record<keyof BillingSystemInput, ProcessorType>> = {
  webhookSigningKey: 'stripe', site: 'chargebee', webhookUsername: 'chargebee', webhookPassword: 'chargebee',
};
/** Stripe's key prefixes: a secret or restricted key, a publishable key, an endpoint signing secret. */
const STRIPE_PREFIX: Partial<Record<keyof BillingSystemInput, RegExp>> = {
  apiKey: /^(sk|rk)_(test|live)_[A-Za-z0-9_]+$/, publishableKey: /^pk_(test|live)_[A-Za-z0-9_]+$/, webhookSigningKey: /^whsec_[A-Za-z0-9+/=_-]+$/,
};
const CHARGEBEE_SITE = /^[a-z0-9][a-z0-9-]{0,62}$/;
const MAX_KEY = 500;

/** The path a processor posts its webhooks to, per billing account. */
export const webhookPath = (ownerId: number, type: ProcessorType) => `/api/v2/billing/webhook/${ownerId}/${type}`;

export interface BillingSystem {
  row: BillingSystemRow;
  keys: ProcessorKeys;
  processor: Processor;
}

export interface BillingSystemServiceDeps {
  db: Db;
  box: SecretBox;
  config: Pick<Config, 'publicUrl' | 'stripeApiUrl' | 'chargebeeApiUrl'>;
}

export function billingSystemService(deps: BillingSystemServiceDeps) {
  const { db, box, config } = deps;

  const open = (row: BillingSystemRow): BillingSystem => {
    const keys = box.openJson<ProcessorKeys>(row.secrets);
    return { row, keys, processor: openProcessor(config, row.type, row.site, keys) };
  };

  /**
   * Where a Chargebee site's key is sent (the secret's target): the site's API URL, path included,
   * since the configured URL may carry the site in its path (a proxy's) rather than in the host.
   */
  const chargebeeTarget = (site: string | null) => {
    if (!site) return null;
    const url = config.chargebeeApiUrl.replaceAll('{site}', site);
    return `${urlOrigin(url)}${new URL(url).pathname.replace(/\/+$/, '')}`;
  };

  function present(row: BillingSystemRow) {
    const keys = box.openJson<ProcessorKeys>(row.secrets);
    const masked = (v: string | undefined) => (v ? maskSecret(v) : null);
    return {
      accountId: row.owner_id,
      billingSystemType: row.type,
      apiKey: maskSecret(keys.apiKey),
      publishableKey: masked(keys.publishableKey),
      webhookSigningKey: masked(keys.webhookSigningKey),
      site: row.site,
      webhookUsername: row.webhook_username,
      webhookPassword: masked(keys.webhookPassword),
      webhookUrl: `${config.publicUrl}${webhookPath(row.owner_id, row.type)}`,
      verifiedAt: toUnixSeconds(row.verified_at)!,
      createdAt: toUnixSeconds(row.created_at)!,
      updatedAt: toUnixSeconds(row.updated_at)!,
    };
  }

  /** The billing system an account's organizations are billed through: the reseller's own, else the partner's. */
  async function effectiveFor(account: Pick<AccountRow, 'id' | 'kind' | 'partner_id' | 'reseller_id'>): Promise<BillingSystemRow | undefined> {
    const owners = account.kind === 'partner' ? [account.id]
      : account.kind === 'reseller' ? [account.id, account.partner_id] : [account.reseller_id, account.partner_id];
    return billingSystemRepo.firstOf(db, owners.filter((id): id is number => id !== null));
  }

  return {
    /** The organization's billing system (its reseller's, else its partner's), opened; undefined: none. */
    async forOrganization(org: AccountRow): Promise<BillingSystem | undefined> {
      const row = await effectiveFor(org);
      return row ? open(row) : undefined;
    },

    /** The billing system an account holds (a webhook's account), opened. */
    async ofAccount(ownerId: number): Promise<BillingSystem | undefined> {
      const row = await billingSystemRepo.find(db, ownerId);
      return row ? open(row) : undefined;
    },

    async get(scope: Scope, targetAccountId: number | undefined) {
      scope.requireActor(['partner', 'reseller'], 'view a billing system configuration');
      const owner = await scope.target(targetAccountId, ['partner', 'reseller']);
      const own = await billingSystemRepo.find(db, owner.id);
      const effective = own ?? await effectiveFor(owner);
      return {
        success: true, message: own ? 'Success' : 'No billing system of its own',
        billingSystem: own ? present(own) : null,
        // Whose billing system the account's organizations subscribe through (its own, else its partner's).
        inEffect: effective ? { accountId: effective.owner_id, billingSystemType: effective.type } : null,
      };
    },

    async put(scope: Scope, targetAccountId: number | undefined, input: BillingSystemInput) {
      scope.requireActor(['partner', 'reseller'], 'configure a billing system');
      const owner = await scope.target(targetAccountId, ['partner', 'reseller']);
      const type = input.billingSystemType.trim().toLowerCase() as ProcessorType;
      if (!(PROCESSORS as readonly string[]).includes(type)) throw new Invalid(`billingSystemType must be one of: ${PROCESSORS.join(', ')}`);
      const name = PROCESSOR_NAME[type];
      const sent: Partial<Record<keyof BillingSystemInput, string>> = {};
      for (const field of ['apiKey', 'publishableKey', 'webhookSigningKey', 'site', 'webhookUsername', 'webhookPassword'] as const) {
        const v = input[field];
        if (v === undefined || v === null) continue;
        if (typeof v !== 'string') throw new Invalid(`${field} must be a string`);
        const value = v.trim();
        if (value === '') continue;
        const only = ONLY[field];
        if (only && only !== type) throw new Invalid(`${field} is for ${PROCESSOR_NAME[only]} only; billingSystemType is ${type}`);
        if (value.length > MAX_KEY) throw new Invalid(`${field} must be at most ${MAX_KEY} characters`);
        if (/\s/.test(value)) throw new Invalid(`${field} must not contain spaces`);
        sent[field] = value;
      }
      if (type === 'stripe') {
        for (const [field, re] of Object.entries(STRIPE_PREFIX) as [keyof BillingSystemInput, RegExp][]) {
          if (sent[field] !== undefined && !re.test(sent[field])) {
            throw new Invalid(`${field} does not look like a Stripe ${field === 'apiKey' ? 'secret key (sk_… or rk_…)' : field === 'publishableKey' ? 'publishable key (pk_…)' : 'webhook signing secret (whsec_…)'}`);
          }
        }
      } else {
        if (sent.site !== undefined) {
          sent.site = sent.site.toLowerCase();
          if (!CHARGEBEE_SITE.test(sent.site)) throw new Invalid('site must be the Chargebee site\'s name without .chargebee.com (letters, digits and dashes, e.g. acme or acme-test)');
        }
        if (sent.webhookUsername?.includes(':')) throw new Invalid('webhookUsername must not contain ":" (HTTP basic auth)');
      }

      // An update of the same type keeps what was not sent again; a new type starts from nothing.
      const stored = await billingSystemRepo.find(db, owner.id);
      const kept = stored && stored.type === type ? stored : undefined;
      const keptKeys = kept ? box.openJson<ProcessorKeys>(kept.secrets) : undefined;
      const keys: ProcessorKeys = {
        apiKey: sent.apiKey ?? keptKeys?.apiKey ?? '',
        publishableKey: sent.publishableKey ?? keptKeys?.publishableKey ?? '',
        ...(type === 'stripe' ? { webhookSigningKey: sent.webhookSigningKey ?? keptKeys?.webhookSigningKey }
          : { webhookPassword: sent.webhookPassword ?? keptKeys?.webhookPassword }),
      };
      const site = type === 'chargebee' ? sent.site ?? kept?.site ?? null : null;
      const webhookUsername = type === 'chargebee' ? sent.webhookUsername ?? kept?.webhook_username ?? null : null;
      const merged: Record<string, string | null | undefined> = { ...keys, site, webhookUsername };
      for (const field of REQUIRED[type]) {
        if (!merged[field]) throw new Invalid(`${field} is required for ${name}${stored && !kept ? ` (the billing system was ${PROCESSOR_NAME[stored.type]}: send every key of the new type)` : ''}`);
      }
      // The Chargebee API key goes to its site: a new site needs the key again (docs/api.md, "Secrets and their targets").
      if (type === 'chargebee' && kept) {
        const refusal = secretTargetRefusal({
          secret: 'apiKey', target: 'site', before: chargebeeTarget(kept.site), after: chargebeeTarget(site), keeps: sent.apiKey === undefined,
        });
        if (refusal) throw new Invalid(refusal);
      }

      // The processor must accept the key before it is kept.
      await openProcessor(config, type, site, keys).verify();

      const now = nowMs();
      await db.transaction().execute((tx) => billingSystemRepo.put(tx, {
        owner_id: owner.id, type, site, webhook_username: webhookUsername, secrets: box.sealJson(keys),
        verified_at: now, created_at: stored?.created_at ?? now, updated_at: now,
      }));
      const row = (await billingSystemRepo.find(db, owner.id))!;
      return { success: true, message: stored ? 'Billing system updated' : 'Billing system configured', billingSystem: present(row) };
    },
  };
}

export type BillingSystemService = ReturnType<typeof billingSystemService>;
