// Splits a document's text into overlapping chunks, the unit the search returns.
// A chunk is at most CHUNK_CHARS characters and ends, when it can, at a paragraph break, else at
// the end of a sentence, else at a space, in its last half; the next chunk starts CHUNK_OVERLAP
// characters before that end (moved forward to the start of a word), so a passage cut by a
// boundary is still whole in one of the two chunks.

export const CHUNK_CHARS = 1000;
export const CHUNK_OVERLAP = 200;

function cutAt(text: string, start: number, max: number): number {
  const end = start + max;
  if (end >= text.length) return text.length;
  const window = text.slice(start, end);
  const half = Math.floor(max / 2);
  for (const sep of ['\n\n', '\n', '. ', '? ', '! ', '; ', ' ']) {
    const i = window.lastIndexOf(sep);
    if (i >= half) return start + i + sep.length;
  }
  return end;
}

export function splitChunks(text: string, max = CHUNK_CHARS, overlap = CHUNK_OVERLAP): string[] {
  const out: string[] = [];
  let start = 0;
  while (start < text.length) {
    const end = cutAt(text, start, max);
    const chunk = text.slice(start, end).trim();
    if (chunk) out.push(chunk);
    if (end >= text.length) break;
    let next = Math.max(end - overlap, start + 1);
    // Start the overlap on a word.
    const space = text.slice(next, end).search(/\s/);
    if (space >= 0 && next + space + 1 < end) next += space + 1;
    start = next;
  }
  return out;
}
