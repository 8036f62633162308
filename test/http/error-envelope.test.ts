// One envelope for every error: what Fastify and Node answer on their own (an unsupported
// content type, a path parameter over the length limit, an undecodable URL, an unknown route, a
// body too large, malformed JSON, a request Node's HTTP parser refuses, errors thrown in hooks)
// comes as {success: false, message, requestId} with the right status, like our own errors.
// @engines sqlite
import assert from 'node:assert/strict';
import net from 'node:net';
import { before, it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import type { Reply } from '../helpers/harness.ts';

const BODY_LIMIT = 4096;

/** Our envelope, the status, and the request id in both the body and the x-request-id header. */
function assertEnvelope(res: Reply, status: number, message: RegExp): void {
  assert.equal(res.status, status, `expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
  assert.equal(typeof res.body, 'object', `a JSON body: ${String(res.body)}`);
  assert.deepEqual(Object.keys(res.body).sort(), ['message', 'requestId', 'success']);
  assert.equal(res.body.success, false);
  assert.match(res.body.message, message);
  assert.equal(typeof res.body.requestId, 'string');
  assert.equal(res.headers['x-request-id'], res.body.requestId);
  assert.match(String(res.headers['content-type']), /^application\/json/);
}

/** Sends raw bytes on a fresh connection and reads the one answer (the server closes after it). */
async function raw(port: number, bytes: string): Promise<Reply> {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.write(bytes);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => { socket.destroy(); reject(new Error('no answer within 5 s')); }, 5000);
    socket.on('close', () => { clearTimeout(timer); resolve(); });
  });
  const text = Buffer.concat(chunks).toString();
  const [head, ...rest] = text.split('\r\n\r\n');
  const [statusLine, ...headerLines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of headerLines) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
  const bodyText = rest.join('\r\n\r\n');
  let body: unknown = bodyText;
  try { body = JSON.parse(bodyText); } catch { /* not JSON: the assertion says so */ }
  return { status: Number(statusLine.split(' ')[1]), body, headers };
}

forEachEngine('every error in our envelope', (h) => {
  let token: string;
  let port: number;
  before(async () => {
    const r = await h().reseller();
    token = (await h().organization(r.id)).token;
    const address = await h().app.listen({ port: 0, host: '127.0.0.1' });
    port = Number(new URL(address).port);
  });
  const post = (payload: string, contentType: string | undefined) =>
    h().call('POST', '/api/v2/tasks', { token, payload, headers: contentType === undefined ? {} : { 'content-type': contentType } });

  it('a text/plain body is 415 (FST_ERR_CTP_INVALID_MEDIA_TYPE), as docs/api.md promises, not a 400 about the body', async () => {
    assertEnvelope(await post('{"type":"ping"}', 'text/plain'), 415, /^Unsupported Content-Type; send application\/json$/);
    assertEnvelope(await post('type=ping', 'text/plain; charset=utf-8'), 415, /Unsupported Content-Type/);
  });

  it('any other unsupported content type, a body without one, and a malformed Content-Type are 415', async () => {
    assertEnvelope(await post('<task/>', 'application/xml'), 415, /Unsupported Content-Type/);
    assertEnvelope(await post('{"type":"ping"}', undefined), 415, /Unsupported Content-Type/);
    assertEnvelope(await post('{"type":"ping"}', 'application/'), 415, /Unsupported Content-Type/);
  });

  it('a path parameter over the length limit is 414 (FST_ERR_MAX_PARAM_LENGTH), and the message does not echo the URL or its token', async () => {
    const res = await h().call('GET', `/api/v2/tasks/${'x'.repeat(101)}`, { token });
    assertEnvelope(res, 414, /^A path parameter is longer than 100 characters$/);
    assert.doesNotMatch(JSON.stringify(res.body), new RegExp(token));
    // At the limit it reaches the route (an unknown task).
    assertEnvelope(await h().call('GET', `/api/v2/tasks/${'x'.repeat(100)}`, { token }), 404, /not found/);
  });

  it('a URL path that is not valid percent-encoding is 400 (FST_ERR_BAD_URL)', async () => {
    assertEnvelope(await h().call('GET', '/api/v2/tasks/%E0%A4%A', { token }), 400, /^The URL path is not valid percent-encoding$/);
  });

  it('an unknown route, and a known path with a method it does not have, are 404 (Fastify answers no 405)', async () => {
    assertEnvelope(await h().call('GET', '/api/v2/nothing-here', { token }), 404, /^Route GET \/api\/v2\/nothing-here not found$/);
    assertEnvelope(await h().call('PATCH', '/api/v2/tasks', { token, body: {} }), 404, /^Route PATCH \/api\/v2\/tasks not found$/);
  });

  it('a body over the limit is 413 (FST_ERR_CTP_BODY_TOO_LARGE), by its Content-Length or while reading a chunked one', async () => {
    const big = JSON.stringify({ type: 'ping', context: 'x'.repeat(BODY_LIMIT) });
    assertEnvelope(await post(big, 'application/json'), 413, /^Request body is too large$/);
    const chunked = await raw(port, `POST /api/v2/tasks?token=${token} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n`
      + `Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n${big.length.toString(16)}\r\n${big}\r\n0\r\n\r\n`);
    assertEnvelope(chunked, 413, /^Request body is too large$/);
  });

  it('malformed JSON, an empty JSON body and a __proto__ key are 400 (FST_ERR_CTP_INVALID_JSON_BODY, FST_ERR_CTP_EMPTY_JSON_BODY)', async () => {
    assertEnvelope(await post('{"type":', 'application/json'), 400, /^Request body is not valid JSON$/);
    assertEnvelope(await post('', 'application/json'), 400, /^Request body is empty but Content-Type is application\/json$/);
    assertEnvelope(await post('{"type":"ping","meta":{"__proto__":{"x":1}}}', 'application/json'), 400, /^Request body is not valid JSON$/);
  });

  it('a body shorter than its Content-Length is 400 (FST_ERR_CTP_INVALID_CONTENT_LENGTH)', async () => {
    // Over a socket the server would wait for the missing bytes; inject ends the stream early.
    const res = await h().app.inject({
      method: 'POST', url: '/api/v2/tasks', query: { token },
      headers: { 'content-type': 'application/json', 'content-length': '40' }, payload: '{"type":"ping"}',
    });
    assertEnvelope({ status: res.statusCode, body: res.json(), headers: res.headers }, 400, /^Request body length does not match its Content-Length header$/);
  });

  it('errors thrown in hooks (authentication, the NUL and finite-number checks) are in the envelope', async () => {
    assertEnvelope(await h().call('GET', '/api/v2/tasks', { token: null }), 401, /token query parameter is required/);
    assertEnvelope(await h().call('GET', '/api/v2/tasks', { token: 'cpl_nope' }), 401, /unknown or deleted token/);
    assertEnvelope(await post('{"type":"ping","context":"a\\u0000b"}', 'application/json'), 400, /^context must not contain NUL characters$/);
    assertEnvelope(await post('{"type":"ping","meta":{"n":1e400}}', 'application/json'), 400, /^meta\.n must be a finite number$/);
  });

  it('requests Node\'s HTTP parser refuses (clientError) are answered in the envelope, and the connection closed', async () => {
    const cases: [string, number, RegExp][] = [
      ['FOO@ / HTTP/1.1\r\nHost: x\r\n\r\n', 400, /^The request method is not a valid HTTP method$/],
      ['POST /api/v2/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n', 400, /^The Content-Length header is invalid$/],
      ['POST /api/v2/tasks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', 400, /^The chunked request body is malformed$/],
      ['GET /api/v2/tasks HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n', 400, /^A request header is malformed$/],
      [`GET /api/v2/tasks HTTP/1.1\r\nHost: x\r\nX-Big: ${'y'.repeat(20_000)}\r\n\r\n`, 431, /^The request headers are too large$/],
    ];
    for (const [bytes, status, message] of cases) {
      const res = await raw(port, bytes);
      assertEnvelope(res, status, message);
      assert.equal(res.headers.connection, 'close');
    }
  });
}, { CALLPLANE_BODY_LIMIT_BYTES: String(BODY_LIMIT) });
