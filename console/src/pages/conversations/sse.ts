// Server-Sent Events read from a fetch response's body (the WHATWG event-stream rules: lines end
// in CRLF, LF or CR; `event`, `data` (joined by newlines) and `id` fields; a blank line ends an
// event; lines starting with `:` are comments, like the feed's `: ping`). Kept in the Live page's
// own chunk, so the first screen does not carry it.

export interface SseEvent { event: string; id?: string; data: string }

/** Yields each event of `body` until it ends; the caller's abort signal ends the read. */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let event = 'message';
  let id: string | undefined;
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      for (let nl = buffer.search(/\r\n|\r|\n/); nl >= 0; nl = buffer.search(/\r\n|\r|\n/)) {
        // A CR at the very end may be the first half of a CRLF: wait for the next chunk.
        if (buffer[nl] === '\r' && nl === buffer.length - 1) break;
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + (buffer.startsWith('\r\n', nl) ? 2 : 1));
        if (line === '') {
          if (data.length > 0) yield { event, id, data: data.join('\n') };
          event = 'message';
          data = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'data') data.push(text);
        else if (field === 'event') event = text;
        else if (field === 'id' && !text.includes('\0')) id = text;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
