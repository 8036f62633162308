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

/** A run of rows shown as they are, or unchanged lines folded into one row that says how many. */
export type Chunk = { kind: 'rows'; rows: Row[]; from: number } | { kind: 'fold'; rows: Row[]; from: number };

/**
 * The rows with every run of unchanged lines longer than `context` lines on each side of a change
 * folded: `context` lines are kept next to each change, the rest become one fold.
 */
export function foldUnchanged(rows: Row[], context = 2): Chunk[] {
  const same = (r: Row) => r.left?.kind === 'same' && r.right?.kind === 'same';
  const chunks: Chunk[] = [];
  let i = 0;
  while (i < rows.length) {
    if (!same(rows[i]!)) {
      const start = i;
      while (i < rows.length && !same(rows[i]!)) i++;
      chunks.push({ kind: 'rows', rows: rows.slice(start, i), from: start });
      continue;
    }
    const start = i;
    while (i < rows.length && same(rows[i]!)) i++;
    const keepBefore = start === 0 ? 0 : context;
    const keepAfter = i === rows.length ? 0 : context;
    if (i - start <= keepBefore + keepAfter + 1) {
      chunks.push({ kind: 'rows', rows: rows.slice(start, i), from: start });
    } else {
      if (keepBefore) chunks.push({ kind: 'rows', rows: rows.slice(start, start + keepBefore), from: start });
      chunks.push({ kind: 'fold', rows: rows.slice(start + keepBefore, i - keepAfter), from: start + keepBefore });
      if (keepAfter) chunks.push({ kind: 'rows', rows: rows.slice(i - keepAfter, i), from: i - keepAfter });
    }
  }
  return chunks;
}
