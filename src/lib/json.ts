// Bounds on free-form JSON values, checked without recursion: the point is that a value nested
// thousands of levels deep (which JSON.parse builds happily) is refused before anything recursive
// (JSON.stringify, a canonicalising walk, a serializer) overflows the stack on it.

/** Levels of objects and arrays a JSON document may nest, the outermost being the first. */
export const MAX_JSON_DEPTH = 32;

/**
 * Whether `value` nests objects and arrays deeper than `max` levels (`value` itself being the
 * first); if so, the top-level key (a property name, or an array index as a number) under which
 * it does, or null when `max` < 1 and `value` itself is a container.
 */
export function tooDeep(value: unknown, max: number = MAX_JSON_DEPTH): { key: string | number | null } | undefined {
  const stack: [unknown, number, string | number | null][] = [[value, 1, null]];
  while (stack.length > 0) {
    const [v, depth, key] = stack.pop()!;
    if (v === null || typeof v !== 'object' || ArrayBuffer.isView(v)) continue;
    if (depth > max) return { key };
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], depth + 1, key ?? i]);
    } else {
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) stack.push([entries[i][1], depth + 1, key ?? entries[i][0]]);
    }
  }
  return undefined;
}
