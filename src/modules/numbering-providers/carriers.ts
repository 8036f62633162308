// The one place where an organization's numbering provider settings are opened (plain `config`
// merged with the sealed `secrets`) and where its carrier is chosen. Tasks (placing calls and
// texts), the twilio module (checking Twilio's requests: src/modules/twilio/verify.ts) and relays
// (verifying Twilio ingress) all ask here; a new provider plugs in here too. Whose a number is,
// which also reads phone_numbers, is the phone-numbers module's (src/modules/phone-numbers/holders.ts).
import type { Config } from '../../config.ts';
import type { Db, NumberingProviderRow } from '../../db/types.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { Conflict } from '../../http/errors.ts';
import {
  createCarrier, createNumberProvider, createTwilioCarrier, PermanentCarrierError, SipCarrier, TWILIO,
  type Carrier, type CarrierOptions, type NumberProvider, type ProviderSettings, type TwilioCarrier,
} from '../../providers/index.ts';
import type { SipCallPlan } from '../../providers/sip-call-plan.ts';
import { numberingRepo } from './repository.ts';

/** A provider row's settings: its plain config and its opened secrets. */
export function openProviderSettings(row: NumberingProviderRow, box: SecretBox): ProviderSettings {
  return {
    providerId: row.provider_id,
    config: JSON.parse(row.config) as Record<string, string>,
    secrets: row.secrets ? box.openJson<Record<string, string>>(row.secrets) : {},
  };
}

/**
 * The settings of one of an organization's providers, enabled or not (a call placed before the
 * provider was disabled still reports), as one record (secrets over config); undefined when the
 * organization has no such provider.
 */
export async function providerSettings(db: Db, box: SecretBox, orgId: number, providerId: string): Promise<Record<string, string> | undefined> {
  const row = await numberingRepo.find(db, orgId, providerId);
  if (!row) return undefined;
  const s = openProviderSettings(row, box);
  return { ...s.config, ...s.secrets };
}

/** A phone number's digits, for comparing numbers written differently (+1 415-555-2671, 14155552671). */
export const digitsOf = (text: string) => text.replace(/^tel:/i, '').split(';')[0].replace(/[\s().\-+]/g, '');

/**
 * The organizations whose numbering provider settings name this number as theirs (`phoneNumber`),
 * compared by digits (the international form without `+`); none for something that is not a
 * number of at least 7 digits. Inbound SIP calls to a number are the organization's that owns it.
 */
export async function orgsOwningNumber(db: Db, called: string): Promise<number[]> {
  const digits = digitsOf(called);
  if (!/^\d{7,15}$/.test(digits)) return [];
  const rows = await numberingRepo.withPhoneNumberEnding(db, digits.slice(-4));
  const orgs = new Set<number>();
  for (const r of rows) {
    let phone: unknown;
    try { phone = (JSON.parse(r.config) as Record<string, unknown>).phoneNumber; } catch { continue; }
    if (typeof phone === 'string' && digitsOf(phone) === digits) orgs.add(r.org_id);
  }
  return [...orgs];
}

/** A twilio apiBaseUrl must be Twilio's own unless the operator allows private targets. */
function checkApiBase(url: string | undefined, config: Pick<Config, 'allowPrivateTargets'>): void {
  if (!url || config.allowPrivateTargets) return;
  let host: string;
  try {
    const u = new URL(url);
    if (u.protocol !== 'https:') throw new Error('not https');
    host = u.hostname.toLowerCase();
  } catch {
    throw new PermanentCarrierError(`twilio: apiBaseUrl '${url}' must be an https URL`, TWILIO);
  }
  if (host !== 'twilio.com' && !host.endsWith('.twilio.com')) {
    throw new PermanentCarrierError(`twilio: apiBaseUrl must be a twilio.com address (got '${host}')`, TWILIO);
  }
}

export interface CarrierChoiceDeps {
  db: Db;
  box: SecretBox;
  config: Pick<Config, 'allowPrivateTargets' | 'simulatedCallSeconds' | 'sipRingSeconds' | 'callMaxSeconds'>;
  carrierOptions?: CarrierOptions;
  /**
   * The organization's SIP plan, null without outbound routes: the sip module's (sipCallPlan,
   * src/modules/sip/calls.ts), handed in because sip sits above numbering (docs/architecture.md,
   * "The order of modules").
   */
  sipCallPlan: (orgId: number) => Promise<SipCallPlan | null>;
}

/**
 * The carrier of an organization's call or text:
 * - a call of an organization with SIP outbound routes goes over SIP (texts keep its carrier);
 * - otherwise its default enabled numbering provider, else its first enabled one;
 * - with none, the SIMULATED carrier, which says so in every result.
 */
export async function chooseCarrier(deps: CarrierChoiceDeps, orgId: number, kind: 'call' | 'text'): Promise<Carrier> {
  const { db, box, config } = deps;
  const opts = deps.carrierOptions ?? {};
  const sip = kind === 'call' ? await deps.sipCallPlan(orgId) : null;
  if (sip) {
    return new SipCarrier(opts.sip, sip, { ringTimeoutMs: config.sipRingSeconds * 1000, maxDurationMs: config.callMaxSeconds * 1000 });
  }
  const rows = await numberingRepo.listEnabled(db, orgId);
  const row = rows.find((r) => r.provider_id === TWILIO || r.provider_id === 'simulated') ?? rows[0];
  if (!row) return createCarrier(null, { ...opts, simulated: { callSeconds: config.simulatedCallSeconds, ...opts.simulated } });
  const settings = openProviderSettings(row, box);
  if (row.provider_id === TWILIO) checkApiBase(settings.config.apiBaseUrl ?? settings.secrets?.apiBaseUrl, config);
  return createCarrier(settings,
    { ...opts, simulated: { ...(settings.config.callSeconds ? {} : { callSeconds: config.simulatedCallSeconds }), ...opts.simulated } });
}

/**
 * Where an organization's numbers are searched, bought and released: `providerId`'s (enabled or
 * not: a number bought there is released there), else its default enabled provider, else its
 * first enabled one; with none, the SIMULATED inventory.
 */
export async function chooseNumberProvider(deps: Pick<CarrierChoiceDeps, 'db' | 'box' | 'carrierOptions'> & { config: Pick<Config, 'allowPrivateTargets'> }, orgId: number, providerId?: string): Promise<NumberProvider> {
  const row = providerId ? await numberingRepo.find(deps.db, orgId, providerId) : (await numberingRepo.listEnabled(deps.db, orgId))[0];
  if (!row && providerId && providerId !== 'simulated') {
    // Never the simulated inventory in its place: the number would be unbound while still rented there.
    throw new Conflict(`numbering provider '${providerId}', where this number was bought, is no longer configured for organization ${orgId}; add it again to release the number`);
  }
  if (!row) return createNumberProvider(null);
  return numberProviderOf(deps, openProviderSettings(row, deps.box));
}

/** The numbering provider built from opened settings (a deleted organization's, kept for releasing its numbers). */
export function numberProviderOf(deps: { config: Pick<Config, 'allowPrivateTargets'>; carrierOptions?: CarrierOptions }, settings: ProviderSettings): NumberProvider {
  if (settings.providerId === TWILIO) checkApiBase(settings.config.apiBaseUrl ?? settings.secrets?.apiBaseUrl, deps.config);
  return createNumberProvider(settings, deps.carrierOptions ?? {});
}

/**
 * The organization's Twilio carrier, enabled or not (a call it placed is still its own to
 * transfer, redirect and end), for acting on a call in progress; undefined without a twilio provider.
 */
export async function twilioCarrierOf(deps: Pick<CarrierChoiceDeps, 'db' | 'box' | 'config' | 'carrierOptions'>, orgId: number): Promise<TwilioCarrier | undefined> {
  const row = await numberingRepo.find(deps.db, orgId, TWILIO);
  if (!row) return undefined;
  const settings = openProviderSettings(row, deps.box);
  const merged = { ...settings.config, ...settings.secrets };
  checkApiBase(merged.apiBaseUrl, deps.config);
  return createTwilioCarrier({
    accountSid: merged.accountSid ?? '', authToken: merged.authToken ?? '', phoneNumber: merged.phoneNumber, apiBaseUrl: merged.apiBaseUrl,
  }, deps.carrierOptions?.twilio);
}
