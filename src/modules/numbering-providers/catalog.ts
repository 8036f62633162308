// The numbering providers (carriers) callplane supports, what each needs, and which of its
// settings are secrets (sealed at rest, masked in every answer).
import { Invalid } from '../../http/errors.ts';

export interface ProviderSpec {
  providerId: string;
  name: string;
  description: string;
  requiredConfig: string[];
  optionalConfig: string[];
  secretConfig: string[];
  /** Other spellings of a setting accepted on input (the contract shows both). */
  aliases: Record<string, string>;
  patterns: Record<string, RegExp>;
}

export const PROVIDERS: Record<string, ProviderSpec> = {
  twilio: {
    providerId: 'twilio',
    name: 'Twilio',
    description: 'Calls and messages through the Twilio REST API with your own Twilio account.',
    requiredConfig: ['accountSid', 'authToken'],
    // voice: how answered calls talk, `stream` (a Media Stream to us) or `gather` (Twilio's speech);
    // unset, the deployment's CALLPLANE_TWILIO_VOICE.
    optionalConfig: ['phoneNumber', 'messagingServiceSid', 'apiBaseUrl', 'voice'],
    secretConfig: ['authToken'],
    aliases: { twilioAccountSid: 'accountSid', twilioAuthToken: 'authToken', twilioPhoneNumber: 'phoneNumber' },
    // Twilio issues SIDs as AC/MG + 32 lowercase hex digits.
    patterns: { accountSid: /^AC[0-9a-f]{32}$/, messagingServiceSid: /^MG[0-9a-f]{32}$/, apiBaseUrl: /^https?:\/\/\S+$/, voice: /^(stream|gather)$/ },
  },
  simulated: {
    providerId: 'simulated',
    name: 'Simulated carrier',
    description: 'SIMULATED: places no real calls or texts; runs them with plausible outcomes and timings for development and tests.',
    requiredConfig: [],
    optionalConfig: ['callSeconds', 'phoneNumber'],
    secretConfig: [],
    aliases: {},
    patterns: { callSeconds: /^\d{1,4}$/ },
  },
};

export interface NormalizedProvider {
  providerId: string;
  config: Record<string, string>;
  secrets: Record<string, string>;
}

export function providerSpec(providerId: string, field: string): ProviderSpec {
  // Own keys only: 'constructor' or 'toString' must not find Object's members (a 500).
  const key = providerId.trim().toLowerCase();
  const spec = Object.hasOwn(PROVIDERS, key) ? PROVIDERS[key] : undefined;
  if (!spec) {
    throw new Invalid(`${field} '${providerId}' is not supported (supported: ${Object.keys(PROVIDERS).join(', ')})`);
  }
  return spec;
}

/**
 * Validates a provider's settings and splits them into plain and secret parts.
 * `partial` allows omitting required settings (an update merges into what is stored).
 */
export function normalizeProviderConfig(spec: ProviderSpec, raw: Record<string, string>, field: string, partial = false): NormalizedProvider {
  const config: Record<string, string> = {};
  const secrets: Record<string, string> = {};
  const known = new Set([...spec.requiredConfig, ...spec.optionalConfig]);
  for (const [key, value] of Object.entries(raw)) {
    const name = Object.hasOwn(spec.aliases, key) ? spec.aliases[key] : key;
    if (!known.has(name)) {
      throw new Invalid(`${field}.${key} is not a ${spec.providerId} setting (known: ${[...known].join(', ')})`);
    }
    if (typeof value !== 'string' || value.trim() === '') throw new Invalid(`${field}.${key} must be a non-empty string`);
    const pattern = Object.hasOwn(spec.patterns, name) ? spec.patterns[name] : undefined;
    if (pattern && !pattern.test(value.trim())) throw new Invalid(`${field}.${key} has an invalid format`);
    (spec.secretConfig.includes(name) ? secrets : config)[name] = value.trim();
  }
  if (!partial) {
    for (const req of spec.requiredConfig) {
      if (config[req] === undefined && secrets[req] === undefined) throw new Invalid(`${field}.${req} is required for ${spec.providerId}`);
    }
  }
  return { providerId: spec.providerId, config, secrets };
}
