// The worker thread that turns an uploaded document into its text (extract.ts starts it through
// src/lib/worker-task.ts and maps its answers): HTML's visible text, a PDF's text layer page by
// page through pdf.js's text stream, normalised. It stops as soon as a limit is passed: the
// number of pages, the bytes pdf.js decompresses (a small PDF can unpack to gigabytes), the
// characters of text. The worker's heap and time limits are the backstop for the rest.
import { serveWorkerTask } from '../../lib/worker-task.ts';
import { htmlToText, normalizeText, type ExtractTask, type RefusalCode } from './extract.ts';

class Refused extends Error {
  constructor(readonly code: RefusalCode, message: string) { super(message); }
}

/**
 * Counts what pdf.js decompresses, in this worker only (these buffers live outside the V8 heap,
 * where the worker's heap limit does not reach). pdf.js unpacks a Flate stream whole through the
 * global DecompressionStream, else grows one Uint8Array per stream (doubling it) through the
 * global constructor: the first is cut off once one stream passes `perStream` bytes, the second
 * refuses a buffer larger than that, or any once all of them pass `total`. pdf.js catches errors
 * inside a content stream and carries on, so the refusal is also kept, and raised by `check()`
 * (and every later allocation fails at once, so pdf.js stops where it is).
 */
function capDecodedBytes(perStream: number, total: number): { check(): void } {
  let allocated = 0;
  let refusal: Refused | undefined;
  const refuse = (message: string): Refused => (refusal ??= new Refused('decompressed', message));
  const OriginalUint8Array = globalThis.Uint8Array;
  globalThis.Uint8Array = new Proxy(OriginalUint8Array, {
    construct(target, args: unknown[], newTarget) {
      const n = args[0];
      if (typeof n === 'number' && n > 0) {
        if (refusal) throw refusal;
        allocated += n;
        if (n > perStream) throw refuse(`a stream unpacks to more than ${perStream} bytes`);
        if (allocated > total) throw refuse(`its streams unpack to more than ${total} bytes`);
      }
      return Reflect.construct(target, args, newTarget) as object;
    },
  });
  const NativeDecompressionStream = globalThis.DecompressionStream;
  class CountedDecompressionStream {
    readonly writable: WritableStream<BufferSource>;
    readonly readable: ReadableStream<Uint8Array>;
    constructor(format: CompressionFormat) {
      const native = new NativeDecompressionStream(format);
      let bytes = 0;
      this.writable = native.writable;
      this.readable = native.readable.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          bytes += chunk.byteLength;
          if (refusal) controller.error(refusal);
          else if (bytes > perStream) controller.error(refuse(`a stream unpacks to more than ${perStream} bytes`));
          else controller.enqueue(chunk);
        },
      }));
    }
  }
  globalThis.DecompressionStream = CountedDecompressionStream as unknown as typeof DecompressionStream;
  return { check() { if (refusal) throw refusal; } };
}

interface TextItem { str?: string; hasEOL?: boolean }

/** Characters of `s` that normalising keeps one for one: all but spaces, tabs, line ends, no-break spaces and control characters. */
function keptLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0x20 && c !== 0x7f && c !== 0xa0) n++;
  }
  return n;
}

async function pdfText({ bytes, maxPages, maxChars, maxStreamBytes, maxDecodedBytes }: ExtractTask): Promise<string> {
  const decoded = capDecodedBytes(maxStreamBytes, maxDecodedBytes);
  const { getDocumentProxy } = await import('unpdf');
  const unreadable = (err: unknown) => {
    decoded.check();
    return new Refused('unreadable', String((err as Error)?.message ?? err).slice(0, 200));
  };
  const doc = await getDocumentProxy(bytes, { isEvalSupported: false, verbosity: 0 }).catch((err: unknown) => { throw unreadable(err); });
  decoded.check();
  if (doc.numPages > maxPages) throw new Refused('pages', `it has ${doc.numPages} pages`);
  const pages: string[] = [];
  // Counted before normalisation (which collapses runs of spaces): every character that is not a
  // space or a control character stays one character of the normalised text, so past the cap of
  // those reading stops at once; text that is mostly spaces stops at twice the cap. The normalised
  // text is checked against the cap itself.
  const rawCap = 2 * maxChars;
  let chars = 0;
  let kept = 0;
  for (let n = 1; n <= doc.numPages; n++) {
    const page = await doc.getPage(n).catch((err: unknown) => { throw unreadable(err); });
    const parts: string[] = [];
    const reader = page.streamTextContent().getReader();
    for (;;) {
      const chunk = await (reader.read() as Promise<ReadableStreamReadResult<{ items: TextItem[] }>>).catch((err: unknown) => { throw unreadable(err); });
      decoded.check();
      if (chunk.done) break;
      for (const item of chunk.value.items) {
        if (item.str == null) continue;
        const s = item.hasEOL ? `${item.str}\n` : item.str;
        parts.push(s);
        chars += s.length;
        kept += keptLength(s);
      }
      if (kept > maxChars) {
        await reader.cancel(new Error('character limit')).catch(() => {});
        throw new Refused('characters', `reading stopped past ${maxChars} characters`);
      }
      if (chars > rawCap) {
        await reader.cancel(new Error('character limit')).catch(() => {});
        throw new Refused('characters', `reading stopped past ${rawCap} characters before normalising`);
      }
    }
    pages.push(parts.join(''));
  }
  return pages.join('\n\n');
}

async function extract(task: ExtractTask): Promise<string> {
  const { bytes, format, maxChars } = task;
  let text: string;
  if (format === 'pdf') {
    text = await pdfText(task);
  } else {
    const decoded = new TextDecoder('utf-8', { fatal: false, ignoreBOM: false }).decode(bytes);
    text = format === 'html' ? htmlToText(decoded) : decoded;
  }
  text = normalizeText(text);
  if (text.length > maxChars) throw new Refused('characters', `it has ${text.length}`);
  return text;
}

serveWorkerTask(extract);
