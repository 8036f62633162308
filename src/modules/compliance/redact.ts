// Redaction of personal data (an organization setting, off by default; docs/campaigns.md,
// "Redaction"): card numbers (13–19 digits that pass the Luhn check), US social security numbers,
// email addresses, phone numbers and street addresses are replaced by typed placeholders —
// [card], [ssn], [email], [phone], [address] — before a message is stored, so every reader
// (transcripts, logs and their CSV, webhooks, the analysis, exports) sees the redacted text.
// Written digits only: numbers spoken as words ("four one five…") are not recognised. Every
// pattern is linear (bounded repetitions, no nested quantifiers), so the cost is the text's length.
// Measured on a generated set with planted data: bench/redaction.ts, docs/performance.md.

export const PLACEHOLDERS = ['[card]', '[ssn]', '[email]', '[phone]', '[address]'] as const;

/** Luhn's check over the digits of `s` (separators ignored). */
export function luhn(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) { d *= 2; if (d > 9) d -= 9; }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

const EMAIL = /[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}\b/g;
/** 13–19 digits, in groups split by single spaces or dashes. */
const CARD = /(?<![\d+])\d(?:[ -]?\d){12,18}(?!\d)/g;
/** SSN written 123-45-6789 or 123 45 6789 (never 000, 666 or 9xx first, 00 middle, 0000 last). */
const SSN = /(?<![\d-])(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}(?![\d-])/g;
/** Nine digits in a row after "SSN" or "social security (number)" a few words before. */
const SSN_NAMED = /\b(ssn|social security(?: number)?)(\W{1,3}(?:\w{1,12}\W{1,3}){0,3})(\d{9})(?!\d)/gi;
/** International (+ and 7–15 digits, with spaces, dots, dashes or parentheses) or North American (10 digits, with a leading 1). */
const PHONE = /(?<![\w+])(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{1,5}){1,5}|(?:1[ .-]?)?\(?\d{3}\)?[ .-]?\d{3}[ .-]?\d{4})(?!\d)/g;
const SUFFIX = 'street|st|avenue|ave|road|rd|boulevard|blvd|lane|ln|drive|dr|court|ct|way|place|pl|terrace|circle|cir|parkway|pkwy|highway|hwy|square|sq|trail|trl';
/** Words that follow a number in speech but never start a street's name ("5 pm on the way"). */
const NOT_STREET = 'am|pm|on|the|in|of|to|by|for|and|or|at|a|an|my|your|our|is|are|was|were|times|minutes|hours|days|weeks|months|years|people|of';
/** A house number, one to three words, a street suffix; then a unit, and ", city, ST 12345" when they follow. */
const ADDRESS = new RegExp(
  `\\b\\d{1,6}[a-z]?\\s+(?:(?:north|south|east|west|n|s|e|w)\\.?\\s+)?(?:(?!(?:${NOT_STREET})\\b)[a-z][a-z'-]{0,24}\\.?\\s+){1,3}(?:${SUFFIX})\\b\\.?`
  + `(?:,?\\s+(?:apt|apartment|suite|ste|unit|#)\\.?\\s*#?[a-z0-9-]{1,6})?`
  + `(?:,\\s*[a-z][a-z .'-]{1,30},\\s*[a-z]{2}(?:\\s+\\d{5}(?:-\\d{4})?)?)?`, 'gi');

function digitsOf(s: string): string {
  return s.replace(/\D/g, '');
}

/** `text` with the personal data it holds replaced by placeholders. */
export function redactPersonalData(text: string): string {
  if (text === '') return text;
  let out = text.replace(EMAIL, '[email]');
  out = out.replace(CARD, (m) => {
    const d = digitsOf(m);
    return d.length >= 13 && d.length <= 19 && luhn(d) ? '[card]' : m;
  });
  out = out.replace(SSN, '[ssn]');
  out = out.replace(SSN_NAMED, (_m, name: string, gap: string) => `${name}${gap}[ssn]`);
  out = out.replace(PHONE, (m) => {
    const d = digitsOf(m);
    return d.length >= 10 && d.length <= 15 ? '[phone]' : m;
  });
  out = out.replace(ADDRESS, '[address]');
  return out;
}

/** Keys of a message's data whose values are ours (ids, carriers), never a person's words: left as they are. */
const OWN_KEYS = new Set(['provider', 'messageSid', 'accountSid', 'taskId', 'carrierRef', 'requestId', 'name', 'kind', 'simulated', 'truncated', 'length', 'from', 'to']);

/** A message's JSON data with every string a person or model wrote redacted (our own ids kept). */
export function redactData(data: string | null): string | null {
  if (data === null) return null;
  let parsed: unknown;
  try { parsed = JSON.parse(data); } catch { return redactPersonalData(data); }
  const walk = (v: unknown, key?: string): unknown => {
    if (typeof v === 'string') return key !== undefined && OWN_KEYS.has(key) ? v : redactPersonalData(v);
    if (Array.isArray(v)) return v.map((x) => walk(x));
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, k)]));
    return v;
  };
  return JSON.stringify(walk(parsed));
}
