// String formats the API's schemas name that JSON Schema cannot say by itself. Each is declared
// once, with its test and the words a refusal uses, and registered with both validators that read
// our schemas: Fastify's Ajv (src/app.ts passes `ajvFormats` to it, so a route whose schema names
// one compiles) and TypeBox's compiled checkers (src/http/checker.ts registers them on its first
// compile). The agent fields (src/modules/agents/validation.ts) are their users today.
import { FormatRegistry } from '@sinclair/typebox';
import safeRegex from 'safe-regex2';
import { E164_PATTERN } from '../lib/phone.ts';

interface Format {
  test(value: string): boolean;
  /** What is wrong with a value the test refused, to follow the field's name. */
  refusal(value: string): string;
}

/**
 * Time zones looked up, by the spelling given: building an Intl.DateTimeFormat takes some 40 µs,
 * and an agent's settings are checked on every write and read for every conversation (the format's
 * test, then the spelling). Bounded: emptied when full.
 */
const zones = new Map<string, string | undefined>();

function timeZoneOf(value: string): string | undefined {
  if (zones.has(value)) return zones.get(value);
  let zone: string | undefined;
  try {
    zone = new Intl.DateTimeFormat('en-US', { timeZone: value }).resolvedOptions().timeZone;
  } catch {
    zone = undefined;
  }
  if (zones.size >= 1000) zones.clear();
  zones.set(value, zone);
  return zone;
}

function languageTagOf(value: string): string | undefined {
  if (value === 'multi') return value;
  try {
    return Intl.getCanonicalLocales(value)[0];
  } catch {
    return undefined;
  }
}

function regexError(value: string): string | undefined {
  try {
    new RegExp(value);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

const DESTINATION = new RegExp(`^(${E164_PATTERN}|(ext|pbx):[0-9A-Za-z*#_.-]{1,32})$`);
const DTMF = /^[0-9*#A-Dw,]*$/;

export const FORMATS = {
  /** An absolute http: or https: URL. */
  'http-url': {
    test: (v) => {
      try {
        const { protocol } = new URL(v);
        return protocol === 'http:' || protocol === 'https:';
      } catch {
        return false;
      }
    },
    refusal: () => 'must be an http(s) URL',
  },
  /** A time zone of the IANA database, in any letter case (canonicalTimeZone spells it). */
  'iana-timezone': {
    test: (v) => timeZoneOf(v) !== undefined,
    refusal: (v) => `must be an IANA time zone (such as America/Chicago), not ${JSON.stringify(v)}`,
  },
  /** A BCP-47 language tag (canonicalLanguageTag spells it), or `multi` for every language. */
  'bcp47-or-multi': {
    test: (v) => languageTagOf(v) !== undefined,
    refusal: (v) => `must be a BCP-47 language tag (such as en-US) or multi, not ${JSON.stringify(v)}`,
  },
  /** A JavaScript regular expression that compiles and cannot backtrack catastrophically (safe-regex2). */
  'safe-regex': {
    test: (v) => regexError(v) === undefined && safeRegex(v),
    refusal: (v) => {
      const error = regexError(v);
      return error !== undefined ? `is not a valid regular expression: ${error}`
        : 'could backtrack catastrophically (nested or overlapping repetition); simplify it';
    },
  },
  /** Where a call may be transferred: an E.164 number, or ext:/pbx: and an extension. */
  'transfer-destination': {
    test: (v) => DESTINATION.test(v),
    refusal: () => 'must be an E.164 number (+15551234567) or ext:/pbx: followed by an extension',
  },
  /** DTMF digits to send: 0-9 * # A-D, and w or , for a pause (empty: none). */
  dtmf: {
    test: (v) => DTMF.test(v),
    refusal: () => 'may hold only 0-9 * # A-D w ,',
  },
} satisfies Record<string, Format>;

export type FormatName = keyof typeof FORMATS;

/** The refusal of a format we declare, or undefined for a format that is not ours. */
export function formatRefusal(format: string, value: string): string | undefined {
  return Object.hasOwn(FORMATS, format) ? FORMATS[format as FormatName].refusal(value) : undefined;
}

/** The formats as Ajv's `formats` option takes them. */
export const ajvFormats: Record<string, { type: 'string'; validate: (v: string) => boolean }> = Object.fromEntries(
  Object.entries(FORMATS).map(([name, f]) => [name, { type: 'string', validate: f.test }]),
);

/** Adds the formats to TypeBox's FormatRegistry (once; the registry is the process's). */
export function registerTypeBoxFormats(): void {
  for (const [name, f] of Object.entries(FORMATS)) if (!FormatRegistry.Has(name)) FormatRegistry.Set(name, f.test);
}

/** The IANA spelling of a time zone the `iana-timezone` format accepts (`asia/tokyo` → `Asia/Tokyo`). */
export function canonicalTimeZone(value: string): string {
  return timeZoneOf(value) ?? value;
}

/** The canonical spelling of a tag the `bcp47-or-multi` format accepts (`es-mx` → `es-MX`). */
export function canonicalLanguageTag(value: string): string {
  return languageTagOf(value) ?? value;
}
