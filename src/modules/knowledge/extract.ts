// The text of an uploaded document: plain text and Markdown as they are (UTF-8), HTML turned
// into its visible text, PDF through unpdf (pdf.js). The format comes from the file name's
// extension, else from the part's content type.
import type { KbDocumentFormat } from '../../db/types.ts';
import { Invalid } from '../../http/errors.ts';

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
  let s = html.replace(/<!--[\s\S]*?(-->|$)/g, ' ');
  s = s.replace(/<(script|style|template|noscript|svg|iframe)\b[^>]*>[\s\S]*?(<\/\1\s*>|$)/gi, ' ');
  s = s.replace(/<!\[CDATA\[[\s\S]*?\]\]>|<![^>]*>|<\?[^>]*>/g, ' ');
  s = s.replace(/<\/?([a-zA-Z][a-zA-Z0-9-]*)\b[^>]*>/g, (_t, name: string) => (BLOCK.test(name) ? '\n' : ' '));
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

async function pdfText(bytes: Buffer): Promise<string> {
  try {
    // Loaded with the first PDF.
    const { extractText, getDocumentProxy } = await import('unpdf');
    const doc = await getDocumentProxy(new Uint8Array(bytes), { isEvalSupported: false, verbosity: 0 });
    try {
      const { text } = await extractText(doc, { mergePages: false });
      return text.join('\n\n');
    } finally {
      await doc.destroy();
    }
  } catch (err) {
    throw new Invalid(`file is not a readable PDF: ${(err as Error).message.slice(0, 200)}`);
  }
}

export async function documentText(bytes: Buffer, format: KbDocumentFormat): Promise<string> {
  if (format === 'pdf') return normalizeText(await pdfText(bytes));
  const text = new TextDecoder('utf-8', { fatal: false, ignoreBOM: false }).decode(bytes);
  return normalizeText(format === 'html' ? htmlToText(text) : text);
}
