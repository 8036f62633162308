// A small line diff for the agent page: two configurations pretty-printed as JSON (keys sorted, so
// the order they were stored in does not show as a change), compared line by line with a longest
// common subsequence, laid out side by side.

/** JSON with object keys sorted at every depth, two-space indented. */
export function pretty(value: unknown): string {
  const sort = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sort);
    if (v !== null && typeof v === 'object') {
      return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort((v as Record<string, unknown>)[k])]));
    }
    return v;
  };
  return JSON.stringify(sort(value), null, 2) ?? '';
}

export interface Side { text: string; kind: 'same' | 'del' | 'ins'; line: number }
/** One row of the side-by-side view: a line on the left, the right, or both. */
export interface Row { left?: Side; right?: Side }

/** Side-by-side rows of a line diff of `a` (left) and `b` (right). */
export function lineDiff(a: string, b: string): Row[] {
  const x = a.split('\n');
  const y = b.split('\n');
  const n = x.length;
  const m = y.length;
  // lcs[i][j]: the longest common subsequence of x[i..] and y[j..].
  const lcs: Uint32Array[] = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) lcs[i]![j] = x[i] === y[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  }
  const rows: Row[] = [];
  let dels: Side[] = [];
  let inss: Side[] = [];
  /** Pairs the removed and added lines of one changed stretch, so a changed line sits beside its new form. */
  const flush = () => {
    for (let k = 0; k < Math.max(dels.length, inss.length); k++) rows.push({ left: dels[k], right: inss[k] });
    dels = [];
    inss = [];
  };
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && x[i] === y[j]) {
      flush();
      rows.push({ left: { text: x[i]!, kind: 'same', line: i + 1 }, right: { text: y[j]!, kind: 'same', line: j + 1 } });
      i++;
      j++;
    } else if (j < m && (i >= n || lcs[i]![j + 1]! >= lcs[i + 1]![j]!)) {
      inss.push({ text: y[j]!, kind: 'ins', line: j + 1 });
      j++;
    } else {
      dels.push({ text: x[i]!, kind: 'del', line: i + 1 });
      i++;
    }
  }
  flush();
  return rows;
}
