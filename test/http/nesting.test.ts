// Deeply nested JSON is refused at the edge with a 400 naming the field, before anything
// recursive (JSON.stringify of meta, the Idempotency-Key request hash, a serializer) can overflow
// the stack on it: request bodies on every route, and a CSV row's meta cell. Fastify's JSON parser
// itself answers 400, never 500, for 100,000 levels.
// @engines sqlite
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { before, it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import type { Reply } from '../helpers/harness.ts';
import { MAX_JSON_DEPTH } from '../../src/lib/json.ts';
import { MAX_META_BYTES } from '../../src/modules/tasks/validation.ts';

/** `levels` objects, one inside the other, as JSON text (JSON.stringify itself overflows on 6,000). */
const nested = (levels: number) => '{"a":'.repeat(levels - 1) + '{"a":1}' + '}'.repeat(levels - 1);
const DEEP = nested(6000);
const TOO_DEEP = (field: string) => `${field} is nested too deeply: a JSON body may nest at most ${MAX_JSON_DEPTH} levels of objects and arrays`;

forEachEngine('deeply nested JSON', (h) => {
  let org: { id: number; agentId: number; token: string };
  before(async () => {
    const r = await h().reseller();
    org = await h().organization(r.id);
  });
  const post = (url: string, payload: string, headers: Record<string, string> = {}) =>
    h().call('POST', url, { token: org.token, payload, headers: { 'content-type': 'application/json', ...headers } });
  const refused = (res: Reply, message: string) => {
    assert.equal(res.status, 400, `expected 400, got ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
    assert.equal(res.body.success, false);
    assert.equal(res.body.message, message);
    assert.ok(res.body.requestId);
  };
  const countTasks = async () => Number((await h().database.db.selectFrom('tasks')
    .select((eb) => eb.fn.countAll().as('n')).where('org_id', '=', org.id).executeTakeFirstOrThrow()).n);

  it('POST /tasks with meta nested 6,000 levels (60 KB) is a 400 naming meta, with or without an Idempotency-Key', async () => {
    assert.ok(DEEP.length > 30_000 && DEEP.length < 100_000);
    refused(await post('/api/v2/tasks', `{"type":"ping","meta":${DEEP}}`), TOO_DEEP('meta'));
    refused(await post('/api/v2/tasks', `{"type":"ping","meta":${DEEP}}`, { 'idempotency-key': 'deep-1' }), TOO_DEEP('meta'));
    assert.equal(await countTasks(), 0);
  });

  it('agent/outboundCall and outboundSms: meta, and an item\'s meta, nested too deep are 400s', async () => {
    refused(await post('/api/v2/agent/outboundCall', `{"target":"+14155552671","meta":${DEEP}}`), TOO_DEEP('meta'));
    refused(await post('/api/v2/agent/outboundSms', `{"target":"+14155552671","content":"hi","meta":${DEEP}}`), TOO_DEEP('meta'));
    refused(await post('/api/v2/agent/outboundCall', `{"targets":[{"target":"+14155552671","meta":${DEEP}}]}`), TOO_DEEP('targets'));
    assert.equal(await countTasks(), 0);
  });

  it('the bound is exact: a body nesting 32 levels (meta 31) is accepted, 33 is refused', async () => {
    const ok = await post('/api/v2/tasks', `{"type":"ping","meta":${nested(MAX_JSON_DEPTH - 1)}}`, { 'idempotency-key': 'deep-ok' });
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    let depth = 0;
    for (let m = ok.body.task.meta; m && typeof m === 'object'; m = m.a) depth++;
    assert.equal(depth, MAX_JSON_DEPTH - 1, 'the answer carries the whole meta');
    const again = await post('/api/v2/tasks', `{"type":"ping","meta":${nested(MAX_JSON_DEPTH - 1)}}`, { 'idempotency-key': 'deep-ok' });
    assert.equal(again.status, 201);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    refused(await post('/api/v2/tasks', `{"type":"ping","meta":${nested(MAX_JSON_DEPTH)}}`), TOO_DEEP('meta'));
  });

  it('every route: any body field, an array body, and bodies of other modules are bounded the same way', async () => {
    refused(await post('/api/v2/tasks', `{"type":"ping","context":${DEEP}}`), TOO_DEEP('context'));
    refused(await post('/api/v2/tasks', `[${'['.repeat(100)}${']'.repeat(100)}]`), TOO_DEEP('body[0]'));
    refused(await h().call('POST', '/api/v2/createReseller', {
      query: { targetPartnerId: h().partnerId }, payload: `{"resellerName":"R","extra":${DEEP}}`, headers: { 'content-type': 'application/json' },
    }), TOO_DEEP('extra'));
    refused(await h().call('POST', '/api/v2/tasks/limits', {
      token: org.token, payload: `{"cooldowns":${DEEP}}`, headers: { 'content-type': 'application/json' },
    }), TOO_DEEP('cooldowns'));
  });

  it('Fastify\'s JSON parser answers 400, not 500, for 100,000 levels: unclosed, closed, and with a __proto__ at the bottom', async () => {
    const unclosed = await post('/api/v2/tasks', '['.repeat(100_000));
    assert.equal(unclosed.status, 400);
    assert.equal(unclosed.body.message, 'Request body is not valid JSON');
    refused(await post('/api/v2/tasks', '['.repeat(100_000) + ']'.repeat(100_000)), TOO_DEEP('body[0]'));
    refused(await post('/api/v2/tasks', `{"type":"ping","meta":${nested(100_000)}}`), TOO_DEEP('meta'));
    const proto = await post('/api/v2/tasks', `{"type":"ping","meta":${'{"a":'.repeat(100_000)}{"__proto__":{}}${'}'.repeat(100_000)}}`);
    assert.equal(proto.status, 400);
    assert.equal(proto.body.message, 'Request body is not valid JSON');
  });

  it('a CSV row whose meta cell nests 6,000 levels is refused on its line, naming meta; the other rows are inserted', async () => {
    const cell = `"${DEEP.replaceAll('"', '""')}"`;
    const csv = `target,meta\n+14155552671,"{""crm"":1}"\n+14155552672,${cell}\n+14155552673,\n`;
    const boundary = `----callplane${crypto.randomBytes(8).toString('hex')}`;
    const payload = `--${boundary}\r\nContent-Disposition: form-data; name="csv"; filename="t.csv"\r\nContent-Type: text/csv\r\n\r\n${csv}\r\n--${boundary}--\r\n`;
    const res = await h().call('POST', '/api/v2/tasks/csv', { token: org.token, payload, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } });
    assert.equal(res.status, 200, JSON.stringify(res.body).slice(0, 400));
    assert.equal(res.body.inserted, 2);
    assert.deepEqual(res.body.errors, [{ line: 3, message: `meta is nested too deeply: at most ${MAX_JSON_DEPTH} levels of objects and arrays` }]);
  });

  it('meta stays bounded in size too (16 KB as JSON)', async () => {
    assert.equal(MAX_META_BYTES, 16 * 1024);
    const big = JSON.stringify({ note: 'x'.repeat(MAX_META_BYTES) });
    refused(await post('/api/v2/tasks', `{"type":"ping","meta":${big}}`), `meta must be at most ${MAX_META_BYTES} bytes as JSON`);
  });
});
