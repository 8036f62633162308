// A refused CSV upload over a real keep-alive connection: random bytes, or an unknown header
// followed by many rows, are a 400 naming the problem while the file is still arriving, and the
// rest of the upload is read and dropped, so the next request on the same connection is answered
// at once; past the size limit the refusal closes the connection instead, and the client's next
// request (on a new one) is answered just as promptly.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { before, it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';

const SMALL_LIMIT = 64 * 1024;

/** The upload's request bytes: a multipart form with `content` as the csv file. */
function uploadRequest(token: string, content: Buffer, chunked = false): Buffer {
  const boundary = `----callplane${crypto.randomBytes(8).toString('hex')}`;
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="csv"; filename="t.csv"\r\nContent-Type: text/csv\r\n\r\n`),
    content, Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  const head = `POST /api/v2/tasks/csv?token=${token} HTTP/1.1\r\nHost: test\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\n`;
  if (!chunked) return Buffer.concat([Buffer.from(`${head}Content-Length: ${body.length}\r\n\r\n`), body]);
  // No Content-Length: the size is only known while reading.
  const chunks: Buffer[] = [Buffer.from(`${head}Transfer-Encoding: chunked\r\n\r\n`)];
  for (let i = 0; i < body.length; i += 16 * 1024) {
    const piece = body.subarray(i, i + 16 * 1024);
    chunks.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(chunks);
}

const rows = (n: number) => Array.from({ length: n }, (_, i) => `+1415555${String(i % 10000).padStart(4, '0')},row ${i}`).join('\n');

interface Answer { status: number; headers: Record<string, string>; body: any }

/**
 * One keep-alive HTTP/1.1 connection, read by hand so that every request really goes on the
 * same socket (an HTTP client library would quietly open a new one when it sees trouble).
 */
function connection(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  let buffered = Buffer.alloc(0);
  let closed = false;
  let wake = () => {};
  socket.on('data', (c: Buffer) => { buffered = Buffer.concat([buffered, c]); wake(); });
  socket.on('close', () => { closed = true; wake(); });
  /** The next answer on this connection, or an error after `ms`. */
  const answer = (ms: number) => new Promise<Answer>((resolve, reject) => {
    const timer = setTimeout(() => { wake = () => {}; reject(new Error(`no answer on the connection within ${ms} ms`)); }, ms);
    wake = () => {
      const end = buffered.indexOf('\r\n\r\n');
      if (end >= 0) {
        const [statusLine, ...lines] = buffered.subarray(0, end).toString().split('\r\n');
        const headers: Record<string, string> = {};
        for (const l of lines) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
        const length = Number(headers['content-length']);
        if (buffered.length >= end + 4 + length) {
          const body = buffered.subarray(end + 4, end + 4 + length).toString();
          buffered = buffered.subarray(end + 4 + length);
          clearTimeout(timer);
          wake = () => {};
          return resolve({ status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(body) });
        }
      }
      if (closed) { clearTimeout(timer); reject(new Error('the connection closed without an answer')); }
    };
    wake();
  });
  return {
    socket, answer,
    send: (bytes: Buffer | string) => { socket.write(bytes); },
    closed: () => closed,
  };
}

/** A refused upload, then a GET on the same connection: each must be answered within 5 s. */
async function refusedThenNext(address: string, token: string, content: Buffer, chunked = false) {
  const port = Number(new URL(address).port);
  const conn = connection(port);
  try {
    conn.send(uploadRequest(token, content, chunked));
    const first = await conn.answer(10_000);
    const started = Date.now();
    let second: Answer;
    let sameConnection = true;
    if (first.headers.connection === 'close') {
      // The server said it closes this connection: the client's next request goes on a new one.
      await new Promise<void>((resolve) => { if (conn.closed()) resolve(); else conn.socket.once('close', () => resolve()); });
      sameConnection = false;
      const next = connection(port);
      next.send(`GET /api/v2/tasks/stats?token=${token} HTTP/1.1\r\nHost: test\r\n\r\n`);
      second = await next.answer(5000);
      next.socket.destroy();
    } else {
      conn.send(`GET /api/v2/tasks/stats?token=${token} HTTP/1.1\r\nHost: test\r\n\r\n`);
      second = await conn.answer(5000);
    }
    return { first, second, sameConnection, secondMs: Date.now() - started };
  } finally {
    conn.socket.destroy();
  }
}

forEachEngine('tasks csv upload, refused while arriving', (h) => {
  let org: { id: number; token: string };
  let address: string;
  before(async () => {
    const r = await h().reseller();
    org = await h().organization(r.id);
    address = await h().app.listen({ port: 0, host: '127.0.0.1' });
  });

  it('an unknown header followed by 200,000 rows: 400 naming the column, the rest drained, the next request on the connection answered at once', async () => {
    const res = await refusedThenNext(address, org.token, Buffer.from(`foo,target\n${rows(200_000)}\n`));
    assert.equal(res.first.status, 400, JSON.stringify(res.first.body));
    assert.equal(res.first.body.success, false);
    assert.match(res.first.body.message, /^csv: unknown column 'foo' in the header \(line 1\); recognised columns: /);
    assert.ok(res.first.body.requestId);
    assert.equal(res.sameConnection, true, 'drained: the connection is kept');
    assert.equal(res.second.status, 200);
    assert.equal(res.second.body.success, true);
    assert.ok(res.secondMs < 5000, `the next request took ${res.secondMs} ms`);
    const n = await h().database.db.selectFrom('tasks').select((eb) => eb.fn.countAll().as('n')).where('org_id', '=', org.id).executeTakeFirstOrThrow();
    assert.equal(Number(n.n), 0, 'nothing of a refused file is inserted');
  });

  it('3 MB of random bytes: a 400 in our envelope (never a 500), and the next request answered at once', async () => {
    // Seeded, so a failure can be replayed: bytes from a hash chain.
    let seed = crypto.createHash('sha256').update('callplane').digest();
    const parts: Buffer[] = [];
    for (let i = 0; i < 3 * 1024 * 1024 / 32; i++) { seed = crypto.createHash('sha256').update(seed).digest(); parts.push(seed); }
    const res = await refusedThenNext(address, org.token, Buffer.concat(parts));
    assert.equal(res.first.status, 400, JSON.stringify(res.first.body));
    assert.equal(res.first.body.success, false);
    assert.match(res.first.body.message, /^csv/);
    assert.ok(res.first.body.requestId);
    assert.equal(res.second.status, 200);
    assert.ok(res.secondMs < 5000, `the next request took ${res.secondMs} ms`);
  });
});

forEachEngine('tasks csv upload, refused past the size limit', (h) => {
  let org: { id: number; token: string };
  let address: string;
  before(async () => {
    const r = await h().reseller();
    org = await h().organization(r.id);
    address = await h().app.listen({ port: 0, host: '127.0.0.1' });
  });

  it('a refused chunked upload whose rest runs past CALLPLANE_CSV_MAX_BYTES is answered with Connection: close, and the next request is answered on a new connection', async () => {
    const res = await refusedThenNext(address, org.token, Buffer.from(`foo\n${rows(40_000)}\n`), true);
    assert.equal(res.first.status, 400, JSON.stringify(res.first.body));
    assert.match(res.first.body.message, /^csv: unknown column 'foo'/);
    assert.equal(res.first.headers.connection, 'close');
    assert.equal(res.sameConnection, false);
    assert.equal(res.second.status, 200);
    assert.ok(res.secondMs < 5000, `the next request took ${res.secondMs} ms`);
  });

  it('a Content-Length over the limit is a 413 at once, with Connection: close (nothing of it is read)', async () => {
    const res = await refusedThenNext(address, org.token, Buffer.from(`target\n${rows(40_000)}\n`));
    assert.equal(res.first.status, 413, JSON.stringify(res.first.body));
    assert.match(res.first.body.message, /^csv must be at most 64 KB/);
    assert.equal(res.first.headers.connection, 'close');
    assert.equal(res.second.status, 200);
    assert.ok(res.secondMs < 5000, `the next request took ${res.secondMs} ms`);
  });
}, { CALLPLANE_CSV_MAX_BYTES: String(SMALL_LIMIT) });
