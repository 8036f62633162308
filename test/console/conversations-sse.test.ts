// The Live page's event-stream reader (console/src/pages/conversations/sse.ts) on bytes cut at
// awkward places: a CRLF split between chunks, a multi-byte character split, comments, multi-line
// data, an event without data (not dispatched), and an event the stream ended in the middle of.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readSse } from '../../console/src/pages/conversations/sse.ts';

function stream(chunks: (string | Uint8Array)[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const k of chunks) c.enqueue(typeof k === 'string' ? enc.encode(k) : k);
      c.close();
    },
  });
}

async function all(chunks: (string | Uint8Array)[]) {
  const out = [];
  for await (const e of readSse(stream(chunks))) out.push(e);
  return out;
}

describe('the Live page\'s event-stream reader', () => {
  it('reads events whatever the chunks, with comments, CRLF and CR, and multi-line data', async () => {
    const e = 'é'; // two bytes in UTF-8, cut between chunks below
    const bytes = new TextEncoder().encode(`data: {"a":"${e}"}\n\n`);
    const cut = bytes.indexOf(0xc3) + 1;
    assert.deepEqual(await all([
      'retry: 3000\n\n: ping\n',
      'id: 1\r', '\nevent: snapshot\r\ndata: {"calls":[]}\r\n\r\n',
      'event: message\rdata: line one\rdata:line two\r\r',
      'event: split\ndata: a\r', '\ndata: b\r\n\r\n',
      'event: nothing\n\n',
      bytes.slice(0, cut), bytes.slice(cut),
    ]), [
      { event: 'snapshot', id: '1', data: '{"calls":[]}' },
      { event: 'message', id: '1', data: 'line one\nline two' },
      { event: 'split', id: '1', data: 'a\nb' },
      { event: 'message', id: '1', data: `{"a":"${e}"}` },
    ]);
  });

  it('drops an event the stream ended in the middle of', async () => {
    assert.deepEqual(await all(['event: message\ndata: {"x":1}\n\nevent: message\ndata: {"half"']), [{ event: 'message', id: undefined, data: '{"x":1}' }]);
  });
});
