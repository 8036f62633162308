// Rules of the tenancy ladder: who may create, list, change and delete which accounts.
// Each method resolves its targets through the caller's Scope and owns its transaction.
import type { Config } from '../../config.ts';
import type { AccountKind, AccountRow, AccountUpdate, Db, Executor } from '../../db/types.ts';
import { checkTargetUrl, type TargetPolicy } from '../../webhooks/ssrf.ts';
import { newSigningSecret } from '../../webhooks/deliver.ts';
import { messageSecret } from '../accounts/message-secret.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { Conflict, Invalid, NotFound } from '../../http/errors.ts';
import type { Scope } from '../../http/auth.ts';
import { pageInfo, pageOf, type PageQuery } from '../../http/pagination.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { canonicalTimeZone, isEmail } from '../../lib/checks.ts';
import { normalizePhone } from '../../lib/phone.ts';
import { flag } from '../../db/flags.ts';
import { nowMs } from '../../lib/time.ts';
import { accountRepo, type SearchFilter } from '../accounts/repository.ts';
import { ACCOUNT_TYPE, presentAccount, presentIntegration } from '../accounts/present.ts';
import { presentProvider } from '../numbering-providers/present.ts';
import { integrationRepo, numberingRepo } from '../numbering-providers/repository.ts';
import { normalizeProviderConfig, providerSpec, type NormalizedProvider } from '../numbering-providers/catalog.ts';
import { memberRepo } from '../members/repository.ts';
import { presentNumber } from '../phone-numbers/present.ts';
import { queueNumberReleases } from '../phone-numbers/releases.ts';
import { phoneNumberRepo } from '../phone-numbers/repository.ts';
import { notifyQueue } from '../../queue/waker.ts';
import { TASKS } from '../tasks/queue-hooks.ts';
import { applyPlanLimits, catalogOwners, requirePlan } from '../billing/plans.ts';
import { subscriptionRepo } from '../billing/repository.ts';
import type { Plan } from '../billing/catalog.ts';

export interface IntegrationInput { appId: string; appVersion: string; appData: Record<string, string> }
export interface ProviderInput { providerId: string; default?: boolean; enabled?: boolean; config: Record<string, string> }

export interface CreateResellerInput {
  resellerName: string; email?: string; productPlanId?: string; offeredProductPlanId?: string;
  sellPlanId?: string; hipaaEnabledDefault?: boolean; resellerStatus?: 'enabled' | 'disabled';
}

export interface CreateOrganizationInput {
  orgName: string; email?: string; accountName?: string; orgAccountType?: 'internal' | 'customer';
  productPlanId?: string; offeredProductPlanId?: string; externalAccountId?: string; externalBillingId?: string;
  hipaaSetting?: 'on' | 'off' | 'inherit'; numberingProviders?: ProviderInput[]; vidaPremium?: boolean;
  smsEnabled?: boolean; smsBrandId?: string; smsCampaignId?: string; integrations?: IntegrationInput[];
  timezone?: string;
}

export interface CreateAccountInput {
  accountName?: string; externalAccountId?: string; externalBillingId?: string; integrations?: IntegrationInput[];
}

export interface AccountDetailsInput {
  name?: string; partnerName?: string; resellerName?: string; orgName?: string; accountName?: string;
  firstName?: string; lastName?: string; description?: string; image?: string; businessName?: string;
  businessAddress?: string; email?: string;
}

export interface UpdateOrganizationInput {
  active?: boolean; productPlanId?: string; offeredProductPlanId?: string | null; email?: string; orgName?: string;
  smsEnabled?: boolean; smsBrandId?: string | null; smsCampaignId?: string | null; vidaPremium?: boolean;
  externalAccountId?: string | null; externalBillingId?: string | null; hipaaSetting?: 'on' | 'off' | 'inherit';
  orgAccountType?: 'internal' | 'customer'; timezone?: string;
  outboundMessageWebhookUrl?: string | null; rotateOutboundMessageSigningSecret?: boolean;
}

export interface UpdateAccountInput {
  active?: boolean; accountName?: string; externalAccountId?: string | null; externalBillingId?: string | null;
}

export interface SearchInput extends PageQuery {
  accountType: string; queryText?: string; createdStart?: number; createdEnd?: number;
  canceledStart?: number; canceledEnd?: number; subscribed?: boolean; canceled?: boolean; active?: boolean;
  onboardingComplete?: boolean; productPlanId?: string; productPlanTerm?: string; billingSubscriptionId?: string;
  billingId?: string; externalAccountId?: string; [range: string]: unknown;
}

const PROFILE_FIELDS = ['firstName', 'lastName', 'description', 'image', 'businessName', 'businessAddress'] as const;
const NAME_FIELD: Record<AccountKind, keyof AccountDetailsInput> = {
  partner: 'partnerName', reseller: 'resellerName', organization: 'orgName', agent: 'accountName',
};

/** Usage ranges of searchAccounts: query prefix → column. */
const USAGE_RANGES: Record<string, keyof AccountRow> = {
  currentBillingPeriodVoiceMinutes: 'voice_minutes_current',
  previousBillingPeriodVoiceMinutes: 'voice_minutes_previous',
  currentBillingPeriodMessages: 'messages_current',
  previousBillingPeriodMessages: 'messages_previous',
  allTimeVoiceMinutes: 'voice_minutes_all_time',
  allTimeMessages: 'messages_all_time',
};

const SEARCH_KIND: Record<string, AccountKind> = {
  partner: 'partner', reseller: 'reseller', organization: 'organization', org: 'organization', account: 'agent', agent: 'agent',
};

/** Times are stored in ms (bigint); these bounds are whole ms, clamped to what a Date can hold. */
/**
 * The accounts module's management of an account (reading it, its settings, its agents, its
 * deletion, and reactivating it) also works on a suspended account below the actor; anything else
 * on a suspended account is refused (src/http/auth.ts Scope.account).
 */
const MANAGE = { suspended: 'allow' } as const;

const MAX_MS = 8.64e15;
const clampMs = (ms: number) => Math.max(-MAX_MS, Math.min(MAX_MS, ms));
/** The first ms of the second `seconds` (rounded up): answers show createdAt in whole seconds. */
const msFrom = (seconds: number) => clampMs(Math.ceil(seconds) * 1000);
/** The last ms of the second `seconds`, so an end bound equal to a shown createdAt includes it. */
const msUntil = (seconds: number) => clampMs(Math.floor(seconds) * 1000 + 999);

/** A blank externalAccountId means none: it is stored as null, never as '' (which is unique per reseller). */
function externalId(value: string | null | undefined): string | null | undefined {
  return typeof value === 'string' && !value.trim() ? null : value;
}

export interface AccountServiceDeps {
  db: Db;
  box: SecretBox;
  config: Pick<Config, 'defaultPlanId'>;
  /** Checks outboundMessageWebhookUrl like every customer URL. */
  policy: TargetPolicy;
  /** Wakes this process's task runners (a reactivated account's pending tasks may start). */
  wakeTasks: () => void;
  /** Wakes the number-release queue (a deleted organization's or agent's bought numbers). */
  wakeNumberReleases: () => void;
}

export function accountService(deps: AccountServiceDeps) {
  const { db, box } = deps;

  function validateIntegrations(list: IntegrationInput[] | undefined, field = 'integrations'): IntegrationInput[] {
    const seen = new Set<string>();
    return (list ?? []).map((it, i) => {
      const f = `${field}[${i}]`;
      if (!it.appId.trim()) throw new Invalid(`${f}.appId must not be empty`);
      if (!it.appVersion.trim()) throw new Invalid(`${f}.appVersion must not be empty`);
      if (seen.has(it.appId)) throw new Invalid(`${f}.appId '${it.appId}' appears more than once`);
      seen.add(it.appId);
      return it;
    });
  }

  function validateProviders(list: ProviderInput[] | undefined): (NormalizedProvider & { isDefault: boolean; enabled: boolean })[] {
    const items = (list ?? []).map((p, i) => {
      const field = `numberingProviders[${i}]`;
      const spec = providerSpec(p.providerId, `${field}.providerId`);
      return { ...normalizeProviderConfig(spec, p.config, `${field}.config`), isDefault: p.default === true, enabled: p.enabled !== false };
    });
    const ids = new Set<string>();
    items.forEach((p, i) => {
      if (ids.has(p.providerId)) throw new Invalid(`numberingProviders[${i}].providerId '${p.providerId}' appears more than once`);
      ids.add(p.providerId);
    });
    if (items.filter((p) => p.isDefault).length > 1) throw new Invalid('numberingProviders may have only one default provider');
    if (items.length > 0 && !items.some((p) => p.isDefault)) items[0].isDefault = true;
    return items;
  }

  async function insertIntegrations(tx: Executor, account: AccountRow, list: IntegrationInput[], now: number) {
    for (const it of list) {
      await integrationRepo.insert(tx, {
        account_id: account.id, org_id: account.org_id, app_id: it.appId, app_version: it.appVersion,
        app_data: box.sealJson(it.appData), created_at: now, updated_at: now,
      });
    }
  }

  async function inviteAdmin(tx: Executor, accountId: number, email: string | undefined, now: number) {
    if (!email) return;
    await memberRepo.insert(tx, {
      account_id: accountId, email: email.toLowerCase(), role: 'admin', permitted_account_ids: '[]',
      redirect_url: null, send_welcome_email: 1, status: 'invited', created_at: now, updated_at: now,
    });
  }

  /** Writes in a transaction, turning a duplicate externalAccountId into a 409. */
  async function write<T>(fn: (tx: Executor) => Promise<T>, externalAccountId?: string | null): Promise<T> {
    try {
      return await db.transaction().execute(fn);
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw new Conflict(externalAccountId
          ? `externalAccountId '${externalAccountId}' is already used by another account of this reseller`
          : 'a record with these values already exists');
      }
      throw err;
    }
  }

  async function organizationView(org: AccountRow, ex: Executor = db) {
    const [providers, integrations, defaultAccountId] = await Promise.all([
      numberingRepo.listForOrg(ex, org.id),
      integrationRepo.listForAccount(ex, org.id),
      accountRepo.firstAgentId(ex, org.id),
    ]);
    return {
      ...presentAccount(org),
      defaultAccountId,
      numberingProviders: providers.map((p) => presentProvider(p, box)),
      integrations: integrations.map((i) => presentIntegration(i, box)),
    };
  }

  async function agentView(agent: AccountRow, ex: Executor = db) {
    const [integrations, numbers] = await Promise.all([
      integrationRepo.listForAccount(ex, agent.id),
      // Extension: the numbers the agent holds in its organization (docs/numbers.md).
      phoneNumberRepo.listForOrg(ex, agent.org_id!, agent.id),
    ]);
    return {
      ...presentAccount(agent), integrations: integrations.map((i) => presentIntegration(i, box)),
      phoneNumbers: numbers.map(presentNumber),
    };
  }

  async function listKind(scope: Scope, parent: AccountRow, kind: AccountKind, q: PageQuery & { active?: boolean }) {
    const page = pageOf(q);
    const { rows, total } = await accountRepo.list(db, {
      kind, within: scope.actor, parentId: parent.id, active: q.active, limit: page?.limit, offset: page?.offset,
    });
    return { rows: rows.map(presentAccount), total, ...pageInfo(page, total) };
  }

  return {
    async createReseller(scope: Scope, targetPartnerId: number, input: CreateResellerInput) {
      scope.requireActor(['partner'], 'create a reseller');
      const partner = await scope.account(targetPartnerId, ['partner'], 'targetPartnerId');
      if (!input.resellerName.trim()) throw new Invalid('resellerName must not be empty');
      // Plan ids name plans of the partner's catalog (a new reseller has no items of its own yet).
      const owners = catalogOwners(partner);
      for (const field of ['productPlanId', 'offeredProductPlanId', 'sellPlanId'] as const) {
        if (input[field] !== undefined) await requirePlan(db, owners, input[field], field);
      }
      const now = nowMs();
      const reseller = await write(async (tx) => {
        const row = await accountRepo.create(tx, 'reseller', partner, {
          name: input.resellerName.trim(), email: input.email?.toLowerCase() ?? null,
          product_plan_id: input.productPlanId ?? null, offered_product_plan_id: input.offeredProductPlanId ?? null,
          sell_plan_id: input.sellPlanId ?? null, hipaa_enabled_default: flag(input.hipaaEnabledDefault === true),
          active: flag(input.resellerStatus !== 'disabled'),
        }, now);
        await inviteAdmin(tx, row.id, input.email, now);
        return row;
      });
      const view = presentAccount(reseller);
      // The contract types `organization` as a string: the new reseller's id, as createAccount's
      // `account` is; the whole reseller is `reseller`.
      return { success: true, message: 'Reseller created', organization: String(view.id), reseller: view };
    },

    async listResellers(scope: Scope, targetPartnerId: number, q: PageQuery & { active?: boolean }) {
      scope.requireActor(['partner'], 'list resellers');
      const partner = await scope.account(targetPartnerId, ['partner'], 'targetPartnerId');
      const { rows, total, ...rest } = await listKind(scope, partner, 'reseller', q);
      return { success: true, message: 'Success', resellers: rows, total, ...rest };
    },

    async createOrganization(scope: Scope, targetResellerId: number, input: CreateOrganizationInput) {
      scope.requireActor(['partner', 'reseller'], 'create an organization');
      const reseller = await scope.account(targetResellerId, ['reseller'], 'targetResellerId');
      if (!input.orgName.trim()) throw new Invalid('orgName must not be empty');
      if (input.email !== undefined && !isEmail(input.email)) throw new Invalid('email must be a valid email address');
      const timezone = input.timezone === undefined ? undefined : canonicalTimeZone(input.timezone);
      if (input.timezone !== undefined && !timezone) throw new Invalid(`timezone '${input.timezone}' is not an IANA time zone`);
      const providers = validateProviders(input.numberingProviders);
      // A provider's phoneNumber another organization holds is refused (docs/numbers.md, Whose a number is).
      for (const [i, p] of providers.entries()) {
        const phone = p.config.phoneNumber === undefined ? undefined : normalizePhone(p.config.phoneNumber);
        if (phone?.ok && await phoneNumberRepo.findByNumber(db, phone.e164)) {
          throw new Conflict(`numberingProviders[${i}].config.phoneNumber ${p.config.phoneNumber} is held by another organization`);
        }
      }
      const integrations = validateIntegrations(input.integrations);
      // The plan names a plan of the reseller's catalog: the one asked for, else the reseller's sell
      // plan, else the service's default; its limits are the new organization's task limits.
      const owners = catalogOwners(reseller);
      const planId = input.productPlanId?.trim() || reseller.sell_plan_id || deps.config.defaultPlanId;
      const plan = await requirePlan(db, owners, planId, input.productPlanId?.trim() ? 'productPlanId'
        : reseller.sell_plan_id ? `productPlanId (the reseller's sellPlanId)` : 'productPlanId (CALLPLANE_DEFAULT_PLAN_ID)');
      if (input.offeredProductPlanId !== undefined) await requirePlan(db, owners, input.offeredProductPlanId, 'offeredProductPlanId');
      const now = nowMs();
      const org = await write(async (tx) => {
        const row = await accountRepo.create(tx, 'organization', reseller, {
          name: input.orgName.trim(), email: input.email?.toLowerCase() ?? null,
          external_account_id: externalId(input.externalAccountId) ?? null, external_billing_id: input.externalBillingId ?? null,
          // A blank productPlanId is an omitted one: the organization still needs a plan.
          product_plan_id: plan.productPlanId,
          offered_product_plan_id: input.offeredProductPlanId ?? null,
          vida_premium: flag(input.vidaPremium === true), sms_enabled: flag(input.smsEnabled === true),
          sms_brand_id: input.smsBrandId ?? null, sms_campaign_id: input.smsCampaignId ?? null,
          hipaa_setting: input.hipaaSetting ?? 'inherit', org_account_type: input.orgAccountType ?? 'customer',
          timezone: timezone ?? null,
        }, now);
        // Every organization starts with one agent account, so tasks can be queued at once.
        await accountRepo.create(tx, 'agent', row, { name: input.accountName?.trim() || `${row.name} Agent` }, now);
        for (const p of providers) {
          await numberingRepo.insert(tx, {
            org_id: row.id, provider_id: p.providerId, is_default: flag(p.isDefault), enabled: flag(p.enabled),
            config: JSON.stringify(p.config), secrets: Object.keys(p.secrets).length ? box.sealJson(p.secrets) : null,
            created_at: now, updated_at: now,
          });
        }
        await insertIntegrations(tx, row, integrations, now);
        await inviteAdmin(tx, row.id, input.email, now);
        await applyPlanLimits(tx, row.id, plan, now);
        return row;
      }, input.externalAccountId);
      return { success: true, message: 'Organization created', organization: await organizationView(org) };
    },

    async deleteOrganization(scope: Scope, targetResellerId: number, targetOrganizationId: number) {
      scope.requireActor(['partner', 'reseller'], 'delete an organization');
      const reseller = await scope.account(targetResellerId, ['reseller'], 'targetResellerId', MANAGE);
      const org = await scope.account(targetOrganizationId, ['organization'], 'targetOrganizationId', MANAGE);
      if (org.reseller_id !== reseller.id) throw new NotFound(`targetOrganizationId ${org.id} was not found under reseller ${reseller.id}`);
      const [descendants, releases] = await db.transaction().execute(async (tx) => {
        const n = await accountRepo.countDescendants(tx, org);
        // Its numbers are given back: unbound here, bought ones released at their provider by a job.
        const queued = await queueNumberReleases(tx, { orgId: org.id, reason: 'organization deleted' }, nowMs());
        await accountRepo.delete(tx, org.id);
        return [n, queued];
      });
      if (releases > 0) deps.wakeNumberReleases();
      return { success: true, message: 'Organization deleted', deletedAccounts: descendants + 1 };
    },

    async listOrganizations(scope: Scope, targetResellerId: number, q: PageQuery & { active?: boolean }) {
      scope.requireActor(['partner', 'reseller'], 'list organizations');
      const reseller = await scope.account(targetResellerId, ['reseller'], 'targetResellerId', MANAGE);
      const { rows, total, ...rest } = await listKind(scope, reseller, 'organization', q);
      return { success: true, message: 'Success', organizations: rows, total, ...rest };
    },

    async getAccount(scope: Scope, targetAccountId?: number) {
      const account = await scope.target(targetAccountId, undefined, MANAGE);
      const details = account.kind === 'organization' ? await organizationView(account)
        : account.kind === 'agent' ? await agentView(account) : presentAccount(account);
      return { success: true, message: 'Success', id: account.id, username: details.username, accountType: ACCOUNT_TYPE[account.kind], details };
    },

    async updateAccountDetails(scope: Scope, targetAccountId: number | undefined, input: AccountDetailsInput) {
      const account = await scope.target(targetAccountId, undefined, MANAGE);
      if (Object.keys(input).length === 0) throw new Invalid('body must contain at least one field to update');
      const patch: AccountUpdate = {};
      for (const [kind, field] of Object.entries(NAME_FIELD)) {
        if (input[field] === undefined) continue;
        if (kind !== account.kind) throw new Invalid(`${field} applies only to ${kind === 'agent' ? 'agent' : kind} accounts`);
        if (!input[field].trim()) throw new Invalid(`${field} must not be empty`);
        patch.name = input[field].trim();
      }
      if (input.email !== undefined) {
        if (!isEmail(input.email)) throw new Invalid('email must be a valid email address');
        patch.email = input.email.toLowerCase();
      }
      const profile = JSON.parse(account.details) as Record<string, string>;
      for (const f of [...PROFILE_FIELDS, 'name'] as const) if (input[f] !== undefined) profile[f] = input[f]!;
      patch.details = JSON.stringify(profile);
      patch.updated_at = nowMs();
      const updated = await write((tx) => accountRepo.update(tx, account.id, patch));
      return { success: true, message: 'Account details updated', account: presentAccount(updated!) };
    },

    async listAccounts(scope: Scope, targetOrganizationId: number, q: PageQuery & { active?: boolean }) {
      const org = await scope.account(targetOrganizationId, ['organization'], 'targetOrganizationId', MANAGE);
      const { rows, total, ...rest } = await listKind(scope, org, 'agent', q);
      return { success: true, message: 'Success', accounts: rows, total, ...rest };
    },

    async createAccount(scope: Scope, targetOrganizationId: number, input: CreateAccountInput) {
      const org = await scope.account(targetOrganizationId, ['organization'], 'targetOrganizationId');
      const integrations = validateIntegrations(input.integrations);
      const now = nowMs();
      const agent = await write(async (tx) => {
        const row = await accountRepo.create(tx, 'agent', org, {
          name: input.accountName?.trim() || `${org.name} Agent`,
          external_account_id: externalId(input.externalAccountId) ?? null, external_billing_id: input.externalBillingId ?? null,
        }, now);
        await insertIntegrations(tx, row, integrations, now);
        return row;
      }, input.externalAccountId);
      return { success: true, message: 'Account created', account: String(agent.id), accountId: agent.id, details: await agentView(agent) };
    },

    async deleteAccount(scope: Scope, targetOrganizationId: number, targetAccountId: number) {
      const org = await scope.account(targetOrganizationId, ['organization'], 'targetOrganizationId', MANAGE);
      const agent = await scope.account(targetAccountId, ['agent'], 'targetAccountId', MANAGE);
      if (agent.org_id !== org.id) throw new NotFound(`targetAccountId ${agent.id} was not found in organization ${org.id}`);
      const releases = await db.transaction().execute(async (tx) => {
        // The agent's numbers are given back like an organization's (docs/numbers.md).
        const queued = await queueNumberReleases(tx, { orgId: org.id, agentId: agent.id, reason: 'agent deleted' }, nowMs());
        await accountRepo.delete(tx, agent.id);
        return queued;
      });
      if (releases > 0) deps.wakeNumberReleases();
      return { success: true, message: 'Account deleted' };
    },

    async updateOrganization(scope: Scope, targetOrganizationId: number, input: UpdateOrganizationInput) {
      scope.requireActor(['partner', 'reseller'], 'update organization settings');
      const org = await scope.account(targetOrganizationId, ['organization'], 'targetOrganizationId', MANAGE);
      const patch: AccountUpdate = {};
      const updated: string[] = [];
      const failed: { field: string; message: string }[] = [];
      const set = (field: string, apply: () => void) => { apply(); updated.push(field); };
      let issued: string | undefined;
      // Plan ids name plans of the organization's catalog; a new plan's limits apply at once. While a
      // subscription is in force, the plan changes through subscribe and cancel only.
      const owners = catalogOwners(org);
      const planErrors: Partial<Record<'productPlanId' | 'offeredProductPlanId', string>> = {};
      let newPlan: Plan | undefined;
      if (typeof input.productPlanId === 'string' && input.productPlanId.trim()) {
        try {
          newPlan = await requirePlan(db, owners, input.productPlanId.trim(), 'productPlanId');
          const current = await subscriptionRepo.current(db, org.id);
          if (current && current.plan_id !== newPlan.productPlanId) {
            planErrors.productPlanId = `productPlanId: the organization is subscribed to '${current.plan_id}'; change its plan with POST /api/v2/product/subscribe or end the subscription with DELETE /api/v2/product/cancel`;
            newPlan = undefined;
          }
        } catch (err) {
          if (!(err instanceof Invalid)) throw err;
          planErrors.productPlanId = err.message;
        }
      }
      if (typeof input.offeredProductPlanId === 'string') {
        try { await requirePlan(db, owners, input.offeredProductPlanId, 'offeredProductPlanId'); } catch (err) {
          if (!(err instanceof Invalid)) throw err;
          planErrors.offeredProductPlanId = err.message;
        }
      }
      for (const [field, value] of Object.entries(input) as [keyof UpdateOrganizationInput, unknown][]) {
        switch (field) {
          case 'email':
            if (!isEmail(String(value))) failed.push({ field, message: "Invalid email provided. Doesn't look like a valid email address." });
            else set(field, () => (patch.email = String(value).toLowerCase()));
            break;
          case 'orgName':
            if (!String(value).trim()) failed.push({ field, message: 'orgName must not be empty' });
            else set(field, () => (patch.name = String(value).trim()));
            break;
          case 'active': set(field, () => (patch.active = flag(value as boolean))); break;
          case 'vidaPremium': set(field, () => (patch.vida_premium = flag(value as boolean))); break;
          case 'smsEnabled': set(field, () => (patch.sms_enabled = flag(value as boolean))); break;
          case 'productPlanId':
            if (!String(value).trim()) failed.push({ field, message: 'productPlanId must not be empty' });
            else if (planErrors.productPlanId) failed.push({ field, message: planErrors.productPlanId });
            else set(field, () => (patch.product_plan_id = String(value).trim()));
            break;
          case 'offeredProductPlanId':
            if (planErrors.offeredProductPlanId) failed.push({ field, message: planErrors.offeredProductPlanId });
            else set(field, () => (patch.offered_product_plan_id = value as string | null));
            break;
          case 'smsBrandId': set(field, () => (patch.sms_brand_id = value as string | null)); break;
          case 'smsCampaignId': set(field, () => (patch.sms_campaign_id = value as string | null)); break;
          case 'externalAccountId': set(field, () => (patch.external_account_id = externalId(value as string | null))); break;
          case 'externalBillingId': set(field, () => (patch.external_billing_id = value as string | null)); break;
          case 'hipaaSetting': set(field, () => (patch.hipaa_setting = value as string)); break;
          case 'orgAccountType': set(field, () => (patch.org_account_type = value as string)); break;
          case 'outboundMessageWebhookUrl': {
            if (value === null) { set(field, () => (patch.message_webhook_url = null)); break; }
            const url = typeof value === 'string' ? value : '';
            const checked = checkTargetUrl(url, deps.policy);
            if (url.length > 2048) failed.push({ field, message: 'outboundMessageWebhookUrl must be at most 2048 characters' });
            else if (!checked.ok) failed.push({ field, message: `outboundMessageWebhookUrl ${checked.message}` });
            else set(field, () => (patch.message_webhook_url = url));
            break;
          }
          case 'rotateOutboundMessageSigningSecret':
            if (value === true) set(field, () => { issued = newSigningSecret(); patch.message_signing_secret = box.seal(issued); });
            break;
          case 'timezone': {
            const zone = canonicalTimeZone(String(value));
            if (!zone) failed.push({ field, message: `timezone '${String(value)}' is not an IANA time zone` });
            else set(field, () => (patch.timezone = zone));
            break;
          }
          default: break;
        }
      }
      const failedSettings = failed.map((f) => f.field);
      if (updated.length === 0) {
        throw new Invalid(failed[0]?.message ?? 'No settings updated', failed.length ? { failedSettings } : {});
      }
      patch.updated_at = nowMs();
      await write(async (tx) => {
        await accountRepo.update(tx, org.id, patch);
        if (patch.active === 1) await notifyQueue(tx, TASKS);
        if (newPlan && patch.product_plan_id) await applyPlanLimits(tx, org.id, newPlan, patch.updated_at!);
      }, patch.external_account_id);
      // Reactivated: its pending tasks (kept out of claims while it was suspended) are due again;
      // so are those a new plan's limits may let start.
      if (patch.active === 1 || (newPlan && patch.product_plan_id)) deps.wakeTasks();
      // A reply URL needs the secret that signs its replies: issued with the first URL, shown once.
      if (patch.message_webhook_url && !issued && !org.message_signing_secret) issued = await messageSecret(db, box, org.id);
      return {
        success: true, message: 'Organization settings updated', updatedSettings: updated,
        ...(failed.length ? { failedSettings } : {}),
        ...(issued ? { outboundMessageSigningSecret: issued } : {}),
      };
    },

    async updateAccount(scope: Scope, targetAccountId: number, input: UpdateAccountInput) {
      scope.requireActor(['partner', 'reseller'], 'update account settings');
      const agent = await scope.account(targetAccountId, ['agent'], 'targetAccountId', MANAGE);
      const patch: AccountUpdate = {};
      const updated: string[] = [];
      const failed: string[] = [];
      if (input.accountName !== undefined) {
        if (input.accountName.trim()) { patch.name = input.accountName.trim(); updated.push('accountName'); } else failed.push('accountName');
      }
      if (input.active !== undefined) { patch.active = flag(input.active); updated.push('active'); }
      if (input.externalAccountId !== undefined) { patch.external_account_id = externalId(input.externalAccountId); updated.push('externalAccountId'); }
      if (input.externalBillingId !== undefined) { patch.external_billing_id = input.externalBillingId; updated.push('externalBillingId'); }
      if (updated.length === 0) {
        throw new Invalid(failed.length ? 'accountName must not be empty' : 'No settings updated', failed.length ? { failedSettings: failed } : {});
      }
      patch.updated_at = nowMs();
      await write(async (tx) => {
        await accountRepo.update(tx, agent.id, patch);
        if (patch.active === 1) await notifyQueue(tx, TASKS);
      }, patch.external_account_id);
      if (patch.active === 1) deps.wakeTasks();
      return { success: true, message: 'Account settings updated', updatedSettings: updated, ...(failed.length ? { failedSettings: failed } : {}) };
    },

    async searchAccounts(scope: Scope, q: SearchInput) {
      const kind = SEARCH_KIND[q.accountType.toLowerCase()];
      if (!kind) throw new Invalid(`accountType must be one of: partner, reseller, organization, account`);
      const equal: Partial<AccountRow> = {};
      const eq = <K extends keyof AccountRow>(col: K, v: AccountRow[K] | undefined) => { if (v !== undefined) equal[col] = v; };
      eq('active', q.active === undefined ? undefined : flag(q.active));
      eq('subscribed', q.subscribed === undefined ? undefined : flag(q.subscribed));
      eq('onboarding_complete', q.onboardingComplete === undefined ? undefined : flag(q.onboardingComplete));
      eq('product_plan_id', q.productPlanId);
      eq('product_plan_term', q.productPlanTerm);
      eq('billing_subscription_id', q.billingSubscriptionId);
      eq('billing_id', q.billingId);
      eq('external_account_id', q.externalAccountId);
      const ranges: SearchFilter['ranges'] = {
        created_at: { min: q.createdStart === undefined ? undefined : msFrom(q.createdStart), max: q.createdEnd === undefined ? undefined : msUntil(q.createdEnd) },
        canceled_at: { min: q.canceledStart === undefined ? undefined : msFrom(q.canceledStart), max: q.canceledEnd === undefined ? undefined : msUntil(q.canceledEnd) },
      };
      for (const [param, col] of Object.entries(USAGE_RANGES)) {
        ranges[col] = { min: q[`${param}Min`] as number | undefined, max: q[`${param}Max`] as number | undefined };
      }
      const page = pageOf(q) ?? (q.pagination === false ? undefined : pageOf({ pagination: true }));
      const { rows, total } = await accountRepo.search(db, {
        kind, within: scope.actor, text: q.queryText, equal, canceled: q.canceled, ranges, limit: page?.limit, offset: page?.offset,
      });
      return {
        success: true, message: 'Success', totalAccounts: total,
        pageSize: page?.pageSize ?? total, pageNumber: page?.page ?? 0,
        accounts: rows.map(presentAccount),
      };
    },

    async getByExternalId(scope: Scope, externalAccountId: string) {
      scope.requireActor(['partner', 'reseller'], 'fetch an account by externalAccountId');
      if (!externalAccountId.trim()) throw new Invalid('externalAccountId must not be empty');
      const [row] = await accountRepo.findByExternalId(db, scope.actor, externalAccountId);
      if (!row) throw new NotFound(`No account found with externalAccountId '${externalAccountId}'`);
      return {
        success: true, message: 'Success',
        account: { ...presentAccount(row), organizationId: row.kind === 'organization' ? row.id : row.org_id },
      };
    },
  };
}

export type AccountService = ReturnType<typeof accountService>;
