// JSON held in text columns (both engines store it as text): read without throwing, since a row
// may hold null, an empty string or, from an older version, text that is not the shape expected.
// Writes go through JSON.stringify as they always did; this is where reads agree on the fallbacks.

/** The column's value parsed, or `fallback` when it is null, empty or does not parse. */
export function readJson<T>(text: string | null | undefined, fallback: T): unknown {
  if (text === null || text === undefined || text === '') return fallback;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return fallback;
  }
}

/** A column holding a JSON object: the object, or an empty one for anything else (null, an array, unreadable text). */
export function readJsonObject(text: string | null | undefined): Record<string, unknown> {
  const v = readJson(text, {});
  return v && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : {};
}

/** A column holding a JSON array: the array, or an empty one for anything else. */
export function readJsonArray(text: string | null | undefined): unknown[] {
  const v = readJson(text, []);
  return Array.isArray(v) ? v : [];
}
