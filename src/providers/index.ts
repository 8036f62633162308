// The carriers (Twilio, SIP, and the SIMULATED one, which says so in every result) and
// createCarrier, which builds one from a provider's opened settings. Which provider an
// organization uses is decided in src/modules/numbering-providers/carriers.ts.
import { PermanentCarrierError, type Carrier } from './carrier.ts';
import { SimulatedCarrier, type SimulatedOptions } from './simulated.ts';
import { TwilioCarrier, type TwilioOptions } from './twilio/carrier.ts';
import type { SipCallDeps } from './sip.ts';
import { UnsupportedSearch, type NumberProvider } from './numbers.ts';
import { SIMULATED_NUMBERS, SimulatedNumbers } from './simulated-numbers.ts';
import { TwilioNumbers } from './twilio/numbers.ts';

export * from './carrier.ts';
export * from './simulated.ts';
export * from './twilio/carrier.ts';
export type { TwilioForm, TwilioParams } from './twilio/form.ts';
export * from './twilio/signature.ts';
export * from './twilio/status-callback.ts';
export * from './sip.ts';
export type { SipCallPlan } from './sip-call-plan.ts';

/** The default provider's stored settings: plain config and opened secrets. */
export interface ProviderSettings {
  providerId: string;
  config: Record<string, string>;
  secrets?: Record<string, string>;
}

export interface CarrierOptions {
  twilio?: TwilioOptions;
  /** Overrides for the simulated carrier (tests shorten callSeconds). */
  simulated?: SimulatedOptions;
  /** The process's SIP runtime, for calls of organizations with outbound routes. */
  sip?: SipCallDeps;
}

/** The carrier for an organization; null or a disabled provider → simulated. */
export function createCarrier(provider: ProviderSettings | null | undefined, opts: CarrierOptions = {}): Carrier {
  if (!provider || provider.providerId === 'simulated') {
    const cfg = provider?.config ?? {};
    return new SimulatedCarrier({ callSeconds: cfg.callSeconds, phoneNumber: cfg.phoneNumber, ...opts.simulated });
  }
  if (provider.providerId === 'twilio') {
    const all = { ...provider.config, ...provider.secrets };
    return new TwilioCarrier({
      accountSid: all.accountSid, authToken: all.authToken, phoneNumber: all.phoneNumber,
      messagingServiceSid: all.messagingServiceSid, apiBaseUrl: all.apiBaseUrl,
    }, opts.twilio);
  }
  throw new PermanentCarrierError(`provider '${provider.providerId}' cannot place calls or send texts`, provider.providerId);
}

export * from './numbers.ts';
export * from './simulated-numbers.ts';
export * from './twilio/numbers.ts';

/** The numbers of an organization's provider (search, buy, release); null or simulated → the SIMULATED inventory. */
export function createNumberProvider(provider: ProviderSettings | null | undefined, opts: CarrierOptions = {}): NumberProvider {
  if (!provider || provider.providerId === SIMULATED_NUMBERS) return new SimulatedNumbers();
  if (provider.providerId === 'twilio') {
    const all = { ...provider.config, ...provider.secrets };
    return new TwilioNumbers({ accountSid: all.accountSid, authToken: all.authToken, apiBaseUrl: all.apiBaseUrl }, opts.twilio);
  }
  throw new UnsupportedSearch(`provider '${provider.providerId}' cannot search, buy or release numbers here (twilio or simulated can)`, provider.providerId);
}
