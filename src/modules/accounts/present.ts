// How accounts and integrations look on the wire (contract field names, unix seconds,
// secrets masked).
import type { AccountRow, IntegrationRow } from '../../db/types.ts';
import { maskSecret, type SecretBox } from '../../lib/crypto.ts';
import { bool } from '../../db/flags.ts';
import { toUnixSeconds } from '../../lib/time.ts';

export const ACCOUNT_TYPE = { partner: 'partner', reseller: 'reseller', organization: 'organization', agent: 'account' } as const;

const SECRET_KEY = /token|secret|password|passwd|key|auth|credential/i;

export function maskRecord(data: Record<string, string>, isSecret: (k: string) => boolean): Record<string, string> {
  return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, isSecret(k) ? maskSecret(v) : v]));
}

/**
 * appData as an answer shows it: under a key that names a secret (token, key, password, …) every
 * string is masked, at any depth; other values are shown as stored.
 */
export function maskAppData(value: unknown, secret = false): unknown {
  if (typeof value === 'string') return secret ? maskSecret(value) : value;
  if (Array.isArray(value)) return value.map((v) => maskAppData(v, secret));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, maskAppData(v, secret || SECRET_KEY.test(k))]));
  }
  return value;
}

export function presentIntegration(row: IntegrationRow, box: SecretBox) {
  return {
    appId: row.app_id,
    appVersion: row.app_version,
    appData: maskAppData(box.openJson<Record<string, unknown>>(row.app_data)) as Record<string, unknown>,
    createdAt: toUnixSeconds(row.created_at),
  };
}

/** The account's username (GET /api/v2/account): its email, else `<accountType>-<id>`. */
export function username(row: AccountRow): string {
  return row.email ?? `${ACCOUNT_TYPE[row.kind]}-${row.id}`;
}

/** The common view of any account on the ladder, with the fields of its own level. */
export function presentAccount(row: AccountRow) {
  const base = {
    id: row.id,
    accountType: ACCOUNT_TYPE[row.kind],
    username: username(row),
    name: row.name,
    email: row.email,
    active: bool(row.active),
    externalAccountId: row.external_account_id,
    externalBillingId: row.external_billing_id,
    createdAt: toUnixSeconds(row.created_at)!,
    updatedAt: toUnixSeconds(row.updated_at)!,
    profile: JSON.parse(row.details) as Record<string, string>,
  };
  switch (row.kind) {
    case 'partner':
      return { ...base, partnerName: row.name };
    case 'reseller':
      return {
        ...base, resellerName: row.name, partnerId: row.partner_id,
        productPlanId: row.product_plan_id, offeredProductPlanId: row.offered_product_plan_id,
        sellPlanId: row.sell_plan_id, hipaaEnabledDefault: bool(row.hipaa_enabled_default),
        resellerStatus: bool(row.active) ? 'enabled' : 'disabled',
      };
    case 'organization':
      return {
        ...base, orgName: row.name, resellerId: row.reseller_id, partnerId: row.partner_id,
        productPlanId: row.product_plan_id, offeredProductPlanId: row.offered_product_plan_id,
        productPlanTerm: row.product_plan_term,
        vidaPremium: bool(row.vida_premium), smsEnabled: bool(row.sms_enabled),
        smsBrandId: row.sms_brand_id, smsCampaignId: row.sms_campaign_id,
        hipaaSetting: row.hipaa_setting, orgAccountType: row.org_account_type,
        onboardingComplete: bool(row.onboarding_complete), subscribed: bool(row.subscribed),
        canceledAt: toUnixSeconds(row.canceled_at), timezone: row.timezone,
        // Where agents' replies to receiveMessage go by default; the secret that signs them is shown only when issued.
        outboundMessageWebhookUrl: row.message_webhook_url ?? null,
        outboundMessageSigningSecretIssued: row.message_signing_secret !== null && row.message_signing_secret !== undefined,
      };
    case 'agent':
      return { ...base, accountName: row.name, organizationId: row.org_id, resellerId: row.reseller_id };
  }
}
