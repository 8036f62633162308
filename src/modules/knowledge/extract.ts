// The text of an uploaded document: plain text and Markdown as they are (UTF-8), HTML turned
// into its visible text, PDF through unpdf (pdf.js), all read in a worker thread with limits
// (extract-worker.ts). The format comes from the file name's extension, else from the part's
// content type.
import type { KbDocumentFormat } from '../../db/types.ts';
import { HttpError, Invalid } from '../../http/errors.ts';
import { runWorkerTask, WorkerLimitError, WorkerTaskError, workerEntry } from '../../lib/worker-task.ts';

const BY_EXTENSION: Record<string, KbDocumentFormat> = {
  txt: 'text', text: 'text', md: 'markdown', markdown: 'markdown', htm: 'html', html: 'html', pdf: 'pdf',
};
const BY_TYPE: Record<string, KbDocumentFormat> = {
  'text/plain': 'text', 'text/markdown': 'markdown', 'text/x-markdown': 'markdown', 'text/html': 'html',
  'application/xhtml+xml': 'html', 'application/pdf': 'pdf',
};
export const FORMATS = 'plain text (.txt), Markdown (.md), HTML (.html) and PDF (.pdf)';

export function formatOf(filename: string, contentType: string | undefined): KbDocumentFormat {
  const ext = /\.([A-Za-z0-9]{1,10})$/.exec(filename)?.[1]?.toLowerCase();
  const byExt = ext === undefined ? undefined : BY_EXTENSION[ext];
  if (byExt) return byExt;
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  const byType = BY_TYPE[type];
  if (byType) return byType;
  throw new Invalid(`file must be ${FORMATS} (got ${JSON.stringify(filename.slice(0, 80))}, ${JSON.stringify(type.slice(0, 80))})`);
}

const NAMED: Record<string, string> = {
  amp: '&', lt: '<', gt: '>', quot: '"', apos: '\'', nbsp: ' ', ndash: '–', mdash: '—', hellip: '…',
  lsquo: '‘', rsquo: '’', ldquo: '“', rdquo: '”', copy: '©', reg: '®', trade: '™', euro: '€', middot: '·', bull: '•',
};

function codePoint(n: number): string {
  return Number.isInteger(n) && n > 0 && n <= 0x10ffff && !(n >= 0xd800 && n <= 0xdfff) ? String.fromCodePoint(n) : '\uFFFD';
}

/** `&amp;`, `&#39;`, `&#x27;` …; an unknown name is left as it is. */
export function decodeEntities(s: string): string {
  return s.replace(/&(#x[0-9a-f]{1,6}|#[0-9]{1,7}|[a-z][a-z0-9]{1,31});/gi, (all, e: string) => {
    if (e[0] === '#') return codePoint(e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10));
    return NAMED[e.toLowerCase()] ?? all;
  });
}

const BLOCK = /^(p|div|br|hr|h[1-6]|li|ul|ol|tr|table|section|article|header|footer|nav|aside|blockquote|pre|dd|dt|dl|figcaption|main|title)$/i;

/**
 * The visible text of an HTML document: comments, `<script>`, `<style>`, `<template>`,
 * `<noscript>` and `<head>`'s metadata are dropped; block elements become line breaks; entities
 * are decoded once, after the tags are gone (so `&lt;b&gt;` stays text).
 */
export function htmlToText(html: string): string {
  // Each pattern either ends at the end of the text or cannot run past the next '<', so no
  // input makes them quadratic (an unclosed `<a<a<a…` once took seconds per 100 KB).
  let s = html.replace(/<!--[\s\S]*?(-->|$)/g, ' ');
  s = s.replace(/<(script|style|template|noscript|svg|iframe)\b[^<>]*>[\s\S]*?(<\/\1\s*>|$)/gi, ' ');
  s = s.replace(/<!\[CDATA\[[\s\S]*?(\]\]>|$)|<![^<>]*>|<\?[^<>]*>/g, ' ');
  s = s.replace(/<\/?([a-zA-Z][a-zA-Z0-9-]*)\b[^<>]*>/g, (_t, name: string) => (BLOCK.test(name) ? '\n' : ' '));
  s = s.replace(/[<>]/g, ' ');
  return decodeEntities(s);
}

/** Collapses runs of spaces, keeps paragraph breaks (at most one blank line). */
export function normalizeText(s: string): string {
  return s.replace(/\r\n?/g, '\n')
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, ' ')
    .replace(/[ \t\u00a0]+/g, ' ')
    .replace(/ *\n */g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/** Pages of a PDF read at most (more is a 413 before any page is read). */
export const MAX_PDF_PAGES = 5000;
/** Bytes one stream of a PDF may unpack to, and all its streams together (as pdf.js allocates them). */
export const MAX_PDF_STREAM_BYTES = 64 * 1024 * 1024;
export const MAX_PDF_DECODED_BYTES = 512 * 1024 * 1024;
/** Heap of the worker that reads one upload, MB: a PDF that needs more is a 413. */
export const EXTRACT_HEAP_MB = 192;
/** Time one upload may take to read, from its worker's start: longer is a 413. */
export const EXTRACT_TIMEOUT_MS = 15_000;

/** What extract-worker.ts is given. */
export interface ExtractTask {
  bytes: Uint8Array; format: KbDocumentFormat; maxPages: number; maxChars: number; maxStreamBytes: number; maxDecodedBytes: number;
}
/** What extract-worker.ts refuses (its errors' `code`). */
export type RefusalCode = 'pages' | 'decompressed' | 'characters' | 'unreadable';

const EXTRACT_WORKER = workerEntry(import.meta.url, './extract-worker');

/**
 * The upload's normalised text, at most `maxChars` characters, read in a worker thread
 * (src/lib/worker-task.ts; the work is in extract-worker.ts) so that no document, however it is
 * built, holds the event loop: HTML's regular expressions and pdf.js run there, under the
 * worker's heap and time limits. Each refusal names the limit it passed.
 */
export async function documentText(bytes: Buffer, format: KbDocumentFormat, maxChars: number): Promise<string> {
  // A copy the worker owns (the upload's Buffer may be a slice of a shared pool).
  const owned = new Uint8Array(bytes);
  const task: ExtractTask = {
    bytes: owned, format, maxPages: MAX_PDF_PAGES, maxChars, maxStreamBytes: MAX_PDF_STREAM_BYTES, maxDecodedBytes: MAX_PDF_DECODED_BYTES,
  };
  try {
    return await runWorkerTask<ExtractTask, string>(EXTRACT_WORKER, task, { maxHeapMb: EXTRACT_HEAP_MB, timeoutMs: EXTRACT_TIMEOUT_MS, transfer: [owned.buffer] });
  } catch (err) {
    if (err instanceof WorkerLimitError) {
      if (err.limit === 'busy' || err.limit === 'stopped') throw new HttpError(503, `file cannot be read now: ${err.message}`);
      const what = err.limit === 'memory' ? `the memory limit (${EXTRACT_HEAP_MB} MB)` : `the time limit (${EXTRACT_TIMEOUT_MS / 1000} seconds)`;
      throw new HttpError(413, `file's text could not be read within ${what}; split the document`);
    }
    if (err instanceof WorkerTaskError) {
      const code = err.code as RefusalCode | undefined;
      if (code === 'characters') throw new HttpError(413, `file's text must be at most ${maxChars} characters (${err.message}); split the document`);
      if (code === 'decompressed') {
        throw new HttpError(413, `file must unpack to at most ${MAX_PDF_STREAM_BYTES / 1024 / 1024} MB in one stream and ${MAX_PDF_DECODED_BYTES / 1024 / 1024} MB in all (${err.message}); split the document`);
      }
      if (code === 'pages') throw new HttpError(413, `file must have at most ${MAX_PDF_PAGES} pages (${err.message}); split the document`);
      if (code === 'unreadable') throw new Invalid(`file is not a readable PDF: ${err.message}`);
    }
    throw err;
  }
}
