// Phone numbers in, E.164 out: the one place that decides whether a task target can be dialled.
// Possible numbers are accepted; whether one is also assigned (valid) is reported with it.
// The "max" metadata is used because only it checks a number against the ranges in actual use
// (the default "min" metadata only checks the general shape and lengths of a country's numbers).
import { getCountryCallingCode, isSupportedCountry, parsePhoneNumberWithError, ParseError, validatePhoneNumberLength } from 'libphonenumber-js/max';
import type { CountryCode } from 'libphonenumber-js/max';

export type PhoneResult =
  /**
   * `assigned`: false for a number that is possible (a valid length for its country code) but in
   * no range a numbering plan assigns, such as the fictional 555-01xx numbers of documentation.
   */
  | { ok: true; e164: string; country?: string; assigned: boolean }
  | { ok: false; reason: string };

/**
 * A number written as E.164 (`+15551234567`): `+`, a country code that does not start with 0, and
 * 7 to 15 digits in all. The written shape only, unanchored for composing into other patterns;
 * normalizePhone decides whether a number can be dialled.
 */
export const E164_PATTERN = '\\+[1-9]\\d{6,14}';
const E164 = new RegExp(`^${E164_PATTERN}$`);

/** Whether `text` is a number written as E.164 (E164_PATTERN), and nothing else. */
export function isE164(text: string): boolean {
  return E164.test(text);
}

/** Longer input is refused before parsing: no real number (with its punctuation) comes near it. */
const MAX_INPUT_LENGTH = 64;
/** Punctuation people write inside numbers; it carries no meaning and is dropped. */
const SEPARATORS = /[\s().\-\u00a0]/g;

/**
 * `input` as an E.164 number, or the reason it is not one, phrased to finish a sentence such as
 * "target '+1555' is not a valid phone number (too short)" (see `invalidPhoneMessage`).
 * Spaces, dashes, dots and parentheses are accepted, and a leading `00` is read as `+`.
 * Without `+`/`00` the number is read in `defaultCountry` (ISO 3166 alpha-2), if one is given.
 * Letters (vanity numbers, extensions) and any other characters are refused rather than guessed at.
 */
export function normalizePhone(input: unknown, defaultCountry?: string): PhoneResult {
  if (typeof input !== 'string') return { ok: false, reason: 'not a string' };
  const text = input.trim();
  if (text === '') return { ok: false, reason: 'empty' };
  if (text.length > MAX_INPUT_LENGTH) return { ok: false, reason: 'too long' };
  if (/\p{L}/u.test(text)) return { ok: false, reason: 'contains letters' };
  let compact = text.replace(SEPARATORS, '');
  if (compact === '' || compact === '+') return { ok: false, reason: 'not a number' };
  if (!/^\+?\d+$/.test(compact)) {
    return { ok: false, reason: 'contains characters other than digits, spaces, dashes, dots, parentheses and a leading +' };
  }
  if (compact.startsWith('00')) compact = `+${compact.slice(2)}`;

  let country: CountryCode | undefined;
  if (defaultCountry !== undefined) {
    const upper = defaultCountry.toUpperCase();
    if (!isSupportedCountry(upper)) return { ok: false, reason: `unknown default country '${defaultCountry}'` };
    country = upper;
  }
  const international = compact.startsWith('+');
  if (!international && !country) {
    return { ok: false, reason: 'no country code; use the international format +<country code><number>' };
  }
  if (compact === '+') return { ok: false, reason: 'not a number' }; // what "00" becomes

  let parsed;
  try {
    parsed = parsePhoneNumberWithError(compact, country ? { defaultCountry: country } : undefined);
  } catch (error) {
    if (error instanceof ParseError) return { ok: false, reason: describeParseError(error.message, international) };
    throw error;
  }
  if (!parsed.isValid()) {
    const length = validatePhoneNumberLength(compact, country ? { defaultCountry: country } : undefined);
    if (length) return { ok: false, reason: describeParseError(length, international) };
    // Possible but not assigned (the contract's own +15551234567): accepted, and said so by the
    // caller, since examples, test ranges and freshly opened ranges must not fail on the first call.
    if (parsed.isPossible()) return { ok: true, e164: parsed.number, assigned: false };
    return { ok: false, reason: `not a valid number for country code +${parsed.countryCallingCode}` };
  }
  return { ok: true, e164: parsed.number, ...(parsed.country ? { country: parsed.country } : {}), assigned: true };
}

function describeParseError(code: string, international: boolean): string {
  switch (code) {
    case 'TOO_SHORT': return 'too short';
    case 'TOO_LONG': return 'too long';
    case 'INVALID_LENGTH': return 'not a valid length for its country';
    case 'INVALID_COUNTRY':
      return international ? 'unknown country code' : 'no country code; use the international format +<country code><number>';
    default: return 'not a number';
  }
}

/** The 400 message for a refused number: `target '+1555' is not a valid phone number (too short)`. */
export function invalidPhoneMessage(field: string, input: unknown, reason: string): string {
  const raw = typeof input === 'string' ? input : (JSON.stringify(input) ?? String(input));
  const cut = raw.length > MAX_INPUT_LENGTH ? `${raw.slice(0, MAX_INPUT_LENGTH)}…` : raw;
  return `${field} ${typeof input === 'string' ? `'${cut}'` : cut} is not a valid phone number (${reason})`;
}

/** Whether `code` is an ISO 3166 alpha-2 country (upper case) that has a telephone numbering plan. */
export function isPhoneCountry(code: string): boolean {
  return /^[A-Z]{2}$/.test(code) && isSupportedCountry(code);
}

/** A country's calling code ('1', '44'), or undefined for a code that is not a phone country. */
export function callingCodeOf(country: string): string | undefined {
  return isPhoneCountry(country) ? getCountryCallingCode(country as CountryCode) : undefined;
}
