// What a numbering provider does with phone numbers (docs/carriers.md, "Numbering providers"):
// search its inventory, buy a number with the addresses its calls and texts go to, find and
// reconfigure a number it already holds for us, release one. Twilio's is in twilio/numbers.ts,
// the SIMULATED inventory (fictional ranges, labelled simulated) in simulated-numbers.ts; which one
// an organization uses is decided in src/modules/numbering-providers/carriers.ts.

/** Most numbers one search answers; a provider is asked for no more. */
export const SEARCH_LIMIT = 20;

export interface NumberSearch {
  /** ISO 3166 alpha-2, upper case, already checked. */
  country: string;
  city?: string;
  region?: string;
  /**
   * Digits the national number starts with (no country code, no trunk 0). With `widen` the
   * provider may answer numbers of the same general area when none start with all of them.
   */
  prefix?: string;
  /**
   * Keypad digits the national number contains (phraseDigits). A `*` at either end stands for
   * anything (the digits anywhere in the number); between digits, for any one digit, which not
   * every provider can search (Twilio cannot: a 400 says so).
   */
  contains?: string;
  limit: number;
}

export interface Capabilities { voice: boolean; sms: boolean; mms: boolean }

export interface AvailableNumber {
  /** E.164. */
  number: string;
  locality: string | null;
  region: string | null;
  country: string;
  capabilities: Capabilities;
  /** Monthly price when the provider says it in its answer, else null. */
  monthlyPrice: { amount: string; currency: string } | null;
}

/** Where a number's calls and texts go: our webhooks, which check the provider's signature. */
export interface NumberWebhooks {
  voiceUrl: string;
  voiceStatusUrl: string;
  smsUrl: string;
}

/** A number the provider holds for the account: its reference there (Twilio's PN… sid). */
export interface HeldNumber {
  number: string;
  providerRef: string;
  /** What the provider says of it, when it says it. */
  locality?: string | null;
  region?: string | null;
  capabilities?: Capabilities;
}

export interface NumberProvider {
  readonly name: string;
  readonly simulated: boolean;
  /** Available numbers; throws UnsupportedSearch for what it cannot search (a country, a filter). */
  search(q: NumberSearch, signal?: AbortSignal): Promise<AvailableNumber[]>;
  /** Buys `number` with its calls and texts sent to `hooks`. */
  buy(number: string, hooks: NumberWebhooks, signal?: AbortSignal): Promise<HeldNumber>;
  /** The number if the provider account already holds it (reconciling an unknown purchase), else null. */
  find(number: string, signal?: AbortSignal): Promise<HeldNumber | null>;
  /** Points a held number's calls and texts at `hooks`. */
  configure(providerRef: string, hooks: NumberWebhooks, signal?: AbortSignal): Promise<void>;
  /** Gives the number back; a number the provider no longer holds is already released. */
  release(providerRef: string, signal?: AbortSignal): Promise<void>;
  /** Where it has numbers in `country`, in words, when it can say (the simulated inventory's areas); for a search that found none. */
  areas?(country: string): string | undefined;
}

/** A search the provider cannot do: the caller gets a 400 that says so, never an empty list. */
export class UnsupportedSearch extends Error {
  constructor(message: string, readonly provider: string) {
    super(message);
    this.name = 'UnsupportedSearch';
  }
}

/** A number the provider does not offer (not in its inventory, or taken meanwhile). */
export class NumberUnavailable extends Error {
  constructor(message: string, readonly provider: string) {
    super(message);
    this.name = 'NumberUnavailable';
  }
}

const KEYPAD: Record<string, string> = {
  a: '2', b: '2', c: '2', d: '3', e: '3', f: '3', g: '4', h: '4', i: '4', j: '5', k: '5', l: '5',
  m: '6', n: '6', o: '6', p: '7', q: '7', r: '7', s: '7', t: '8', u: '8', v: '8', w: '9', x: '9', y: '9', z: '9',
};

/**
 * A vanity phrase as keypad digits: letters become their key's digit, digits and `*` (any one
 * digit) stay, spaces and dashes are dropped; anything else is an error (the reason, to finish
 * "phrase …"). "*bitcoin*" → "*2482646*".
 */
export function phraseDigits(phrase: string): { ok: true; digits: string } | { ok: false; reason: string } {
  let out = '';
  for (const ch of phrase.toLowerCase()) {
    if (/[0-9*]/.test(ch)) out += ch;
    else if (KEYPAD[ch]) out += KEYPAD[ch];
    else if (ch === ' ' || ch === '-') continue;
    else return { ok: false, reason: `may hold only letters, digits, '*', spaces and dashes (found '${ch}')` };
  }
  if (out.replace(/\*/g, '').length < 2) return { ok: false, reason: 'must name at least 2 letters or digits' };
  return { ok: true, digits: out };
}

/** Whether a national number contains `pattern` (digits, `*` any one digit) somewhere. */
export function containsPattern(national: string, pattern: string): boolean {
  const core = pattern.replace(/^\*+|\*+$/g, '');
  const re = new RegExp(core.replace(/\*/g, '\\d'));
  return re.test(national);
}
