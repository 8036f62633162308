// A model's answer read as the JSON it was asked for: the text trimmed, a code fence around it
// (```json … ```) tolerated, then parsed. Callers say in their own words what was wrong.

/** The parsed value, or `{ ok: false }` when the text (fence removed) is not JSON. */
export function readJsonAnswer(text: string): { ok: true; value: unknown } | { ok: false } {
  let t = text.trim();
  if (t.startsWith('```') && t.endsWith('```') && t.length >= 6) {
    const firstLine = t.indexOf('\n');
    t = (firstLine < 0 ? t.slice(3, -3) : t.slice(firstLine + 1, -3)).trim();
  }
  try {
    return { ok: true, value: JSON.parse(t) as unknown };
  } catch {
    return { ok: false };
  }
}
