// What an integration's appData may be: a JSON object of bounded size and depth.
import { Invalid } from '../../http/errors.ts';

/** Levels of objects and arrays, appData itself being the first. */
export const MAX_APP_DATA_DEPTH = 5;
/** Keys of one object, items of one array. */
export const MAX_APP_DATA_ENTRIES = 100;
export const MAX_APP_DATA_KEY_LENGTH = 100;
export const MAX_APP_DATA_STRING_LENGTH = 4000;
/** Characters of the stored appData as JSON. */
export const MAX_APP_DATA_BYTES = 16_384;

/** Refuses appData (400 naming the field) unless it is an object within the bounds above. */
export function validateAppData(value: unknown, field = 'appData'): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Invalid(`${field} must be an object`);
  walk(value, field, 1);
  checkSize(value as Record<string, unknown>, field);
  return value as Record<string, unknown>;
}

export function checkSize(value: Record<string, unknown>, field = 'appData'): void {
  if (Buffer.byteLength(JSON.stringify(value)) > MAX_APP_DATA_BYTES) {
    throw new Invalid(`${field} is too large: at most ${MAX_APP_DATA_BYTES} bytes as JSON`);
  }
}

function walk(value: unknown, at: string, depth: number): void {
  if (typeof value === 'string') {
    if (value.length > MAX_APP_DATA_STRING_LENGTH) throw new Invalid(`${at} is too long: at most ${MAX_APP_DATA_STRING_LENGTH} characters`);
    return;
  }
  if (value === null || typeof value === 'number' || typeof value === 'boolean') return;
  if (typeof value !== 'object') throw new Invalid(`${at} must be JSON`);
  if (depth > MAX_APP_DATA_DEPTH) {
    throw new Invalid(`${at} is nested too deeply: appData may nest at most ${MAX_APP_DATA_DEPTH} levels of objects and arrays`);
  }
  if (Array.isArray(value)) {
    if (value.length > MAX_APP_DATA_ENTRIES) throw new Invalid(`${at} has too many items: at most ${MAX_APP_DATA_ENTRIES}`);
    value.forEach((v, i) => walk(v, `${at}[${i}]`, depth + 1));
    return;
  }
  const entries = Object.entries(value);
  if (entries.length > MAX_APP_DATA_ENTRIES) throw new Invalid(`${at} has too many keys: at most ${MAX_APP_DATA_ENTRIES}`);
  for (const [k, v] of entries) {
    if (k === '') throw new Invalid(`${at} has an empty key`);
    if (k.length > MAX_APP_DATA_KEY_LENGTH) throw new Invalid(`${at} has a key longer than ${MAX_APP_DATA_KEY_LENGTH} characters`);
    walk(v, `${at}.${k}`, depth + 1);
  }
}
