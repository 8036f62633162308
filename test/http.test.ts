// The HTTP surface as a whole: every route of the generated OpenAPI document refuses a missing
// token and garbage input with a JSON 4xx (never a 5xx), body parsing errors and limits, the
// operations endpoints, the served document and reference page, and request ids.
// @engines sqlite
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { forEachEngine } from './helpers/engines.ts';
import { ENGINES, startHarness, type Harness, type Reply } from './helpers/harness.ts';

// A copy of the public contract (shared/reference/vida-api-v2.openapi.json), kept with the tests
// so they do not depend on where the checkout lives.
const CONTRACT = JSON.parse(fs.readFileSync(new URL('./fixtures/vida-api-v2.openapi.json', import.meta.url), 'utf8'));
const METHODS = ['get', 'post', 'put', 'delete', 'patch'] as const;
// What the task calls a nonsense string: it arrives URL-encoded as x%00, i.e. "x" and a NUL byte.
const NONSENSE = 'x\u0000';

interface Operation {
  method: string;
  path: string;
  operationId?: string;
  queryParams: string[];
  /** Declared query parameter schemas by name. */
  querySchemas: Record<string, any>;
  pathParams: string[];
  body?: any;
}

function resolve(doc: any, schema: any): any {
  if (schema && typeof schema.$ref === 'string') {
    const name = schema.$ref.split('/').pop();
    return resolve(doc, doc.components?.schemas?.[name]);
  }
  return schema;
}

function operationsOf(doc: any): Operation[] {
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries<any>(doc.paths ?? {})) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const params = [...(item.parameters ?? []), ...(op.parameters ?? [])].map((p: any) => resolve(doc, p));
      const body = op.requestBody?.content?.['application/json']?.schema;
      ops.push({
        method: method.toUpperCase(), path, operationId: op.operationId,
        queryParams: params.filter((p: any) => p.in === 'query' && p.name !== 'token').map((p: any) => p.name),
        querySchemas: Object.fromEntries(params.filter((p: any) => p.in === 'query').map((p: any) => [p.name, resolve(doc, p.schema)])),
        pathParams: params.filter((p: any) => p.in === 'path').map((p: any) => p.name),
        body: body ? resolve(doc, body) : undefined,
      });
    }
  }
  return ops;
}

/** An object whose every declared property has a value no coercion can turn into the declared type. */
function wrongTypes(doc: any, schema: any): Record<string, unknown> {
  const props = resolve(doc, schema)?.properties ?? {};
  const out: Record<string, unknown> = {};
  for (const [name, raw] of Object.entries<any>(props)) {
    const s = resolve(doc, raw);
    // Objects cannot be coerced to a scalar or an array, and a scalar never becomes an object.
    out[name] = s?.type === 'object' ? NONSENSE : { wrong: [1, 2] };
  }
  return out;
}

function urlFor(op: Operation, value: string): string {
  return op.path.replace(/\{([^}]+)\}/g, () => encodeURIComponent(value));
}

function assertClientError(res: Reply, what: string): void {
  assert.ok(res.status >= 400 && res.status < 500, `${what}: expected a 4xx, got ${res.status} ${JSON.stringify(res.body)}`);
  assert.equal(typeof res.body, 'object', `${what}: body is not JSON: ${String(res.body).slice(0, 200)}`);
  assert.equal(res.body.success, false, `${what}: success must be false`);
  assert.equal(typeof res.body.message, 'string', `${what}: message must be a string`);
  assert.ok(res.body.message.length > 0, `${what}: message must not be empty`);
}

forEachEngine('every route', (h) => {
  let ops: Operation[] = [];
  before(() => {
    ops = operationsOf(h().app.swagger()).filter((o) => o.path.startsWith('/api/v2/'));
  });

  it('the generated document lists the operations this suite walks', () => {
    // Guards the walk itself: an empty or tiny list would make every test below pass vacuously.
    assert.ok(ops.length >= 15, `only ${ops.length} operations under /api/v2`);
    for (const id of ['createOrganization', 'getAccount', 'listResellers']) {
      assert.ok(ops.some((o) => o.operationId === id), `${id} missing`);
    }
  });

  it('every /api/v2 operation without a token answers 401 JSON', async () => {
    for (const op of ops) {
      const res = await h().call(op.method, urlFor(op, '1'), { token: null });
      assert.equal(res.status, 401, `${op.method} ${op.path}: ${res.status} ${JSON.stringify(res.body)}`);
      assertClientError(res, `${op.method} ${op.path} without a token`);
      assert.match(res.body.message, /token/i);
    }
  });

  it('every /api/v2 operation answers a 4xx JSON to nonsense in every query and path parameter', async () => {
    for (const op of ops) {
      const query = Object.fromEntries(op.queryParams.map((p) => [p, NONSENSE]));
      const res = await h().call(op.method, urlFor(op, NONSENSE), { query });
      const what = `${op.method} ${op.path}?${op.queryParams.join('&')}`;
      if (op.queryParams.length || op.pathParams.length) assertClientError(res, what);
      else assert.ok(res.status < 500, `${what}: ${res.status} ${JSON.stringify(res.body)}`);
    }
  });

  it('every /api/v2 operation with a JSON body answers a 4xx JSON to an array, a string and an object of wrong types', async () => {
    const withBody = ops.filter((o) => o.body);
    assert.ok(withBody.length >= 5, `only ${withBody.length} operations take a body`);
    for (const op of withBody) {
      const bodies: [string, string][] = [
        ['a JSON array', JSON.stringify([{ a: 1 }, 2])],
        ['a JSON string', JSON.stringify('x')],
        ['a JSON number', '42'],
        ['JSON null', 'null'],
      ];
      const wrong = wrongTypes(h().app.swagger(), op.body);
      if (Object.keys(wrong).length) bodies.push(['an object of wrong types', JSON.stringify(wrong)]);
      for (const [label, payload] of bodies) {
        // Plausible query values so the body, not the query, is what is wrong.
        const query = Object.fromEntries(op.queryParams.map((p) => [p, String(h().partnerId)]));
        const res = await h().call(op.method, urlFor(op, '1'), { query, payload, headers: { 'content-type': 'application/json' } });
        assertClientError(res, `${op.method} ${op.path} with ${label}`);
      }
    }
  });

  it('every /api/v2 operation answers numbers out of any sane range with a 4xx or a 2xx, never a 5xx', async () => {
    // Plausible values for everything else, so the numbers reach the service and the database.
    const plausible = (schema: any, extreme: string): unknown => {
      const t = resolve(h().app.swagger(), schema)?.type;
      if (t === 'integer' || t === 'number') return extreme;
      if (t === 'boolean') return 'true';
      if (schema?.enum) return schema.enum[0];
      return 'x';
    };
    for (const extreme of ['1e400', '-1e400', '99999999999999999999', '9007199254740993', '2147483648', '-2147483649', '1e-300']) {
      for (const op of ops) {
        const query = Object.fromEntries(op.queryParams.map((p) => [p, plausible(op.querySchemas[p], extreme)]));
        const props = resolve(h().app.swagger(), op.body)?.properties ?? {};
        const body = op.body
          ? Object.fromEntries(Object.entries<any>(props).map(([k, v]) => [k, (() => {
            const t = resolve(h().app.swagger(), v)?.type;
            return t === 'integer' || t === 'number' ? Number(extreme) : t === 'boolean' ? true : t === 'string' ? 'x' : undefined;
          })()]).filter(([, v]) => v !== undefined))
          : undefined;
        const res = await h().call(op.method, urlFor(op, extreme), { query, ...(body ? { body } : {}) });
        const what = `${op.method} ${op.path} with ${extreme}`;
        assert.ok(res.status < 500, `${what}: ${res.status} ${JSON.stringify(res.body)}`);
        assert.equal(typeof res.body, 'object', `${what}: not JSON`);
        if (res.status >= 400) assertClientError(res, what);
      }
    }
  });

  it('operations the contract declares keep its path and method', () => {
    const ours = ops.filter((o) => CONTRACT.paths[o.path]);
    assert.ok(ours.length >= 10, `only ${ours.length} of our paths are in the contract`);
    for (const op of ours) {
      assert.ok(CONTRACT.paths[op.path][op.method.toLowerCase()],
        `${op.method} ${op.path} (${op.operationId}) is not a method the contract declares for that path`);
    }
  });

  it('every /api/v2 operation has a unique operationId and a 401 response documented', () => {
    const doc = h().app.swagger() as any;
    const seen = new Set<string>();
    for (const op of ops) {
      assert.ok(doc.paths[op.path][op.method.toLowerCase()].responses?.['401'], `${op.method} ${op.path} does not document its 401`);
      assert.ok(op.operationId, `${op.method} ${op.path} has no operationId`);
      assert.ok(!seen.has(op.operationId!), `operationId ${op.operationId} is used twice`);
      seen.add(op.operationId!);
    }
  });
});

forEachEngine('request bodies and validation messages', (h) => {
  const org = (payload: string, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
    h().call('POST', '/api/v2/createOrganization', { query: { targetResellerId: 1 }, payload, headers });

  it('malformed JSON is a 400 saying the body is not valid JSON', async () => {
    for (const payload of ['{"orgName": ', '{orgName: 1}', '{"a":1}}', '\u0000']) {
      const res = await org(payload);
      assert.equal(res.status, 400, payload);
      assertClientError(res, payload);
      assert.equal(res.body.message, 'Request body is not valid JSON');
    }
  });

  it('a prototype-poisoning body is refused as invalid JSON', async () => {
    const res = await org('{"orgName":"x","__proto__":{"admin":true}}');
    assert.equal(res.status, 400);
    assert.equal(res.body.message, 'Request body is not valid JSON');
  });

  it('a deeply nested body is a 4xx, not a crash', async () => {
    const depth = 50_000;
    const res = await org(`{"orgName":"x","integrations":${'['.repeat(depth)}${']'.repeat(depth)}}`);
    assertClientError(res, 'deep nesting');
  });

  it('a NUL character deep in the body is named with its path', async () => {
    const res = await org(JSON.stringify({ orgName: 'x', numberingProviders: [{ providerId: 'simulated', config: { k: `v${NONSENSE}` } }] }));
    assert.equal(res.status, 400);
    assert.equal(res.body.message, 'numberingProviders[0].config.k must not contain NUL characters');
    const key = await org(JSON.stringify({ orgName: 'x', numberingProviders: [{ providerId: 'simulated', config: { [`k${NONSENSE}`]: 'v' } }] }));
    assert.equal(key.status, 400);
    assert.match(key.body.message, /^numberingProviders\[0\]\.config\.kx\\0 must not contain NUL characters$/);
  });

  it('an empty body with content-type application/json is a 400', async () => {
    const res = await org('');
    assert.equal(res.status, 400);
    assertClientError(res, 'empty body');
    assert.match(res.body.message, /empty/i);
  });

  it('a body that is not JSON at all is refused with a 4xx JSON', async () => {
    const res = await org('orgName=x', { 'content-type': 'application/x-www-form-urlencoded' });
    assertClientError(res, 'form body');
    assert.equal(res.status, 415);
  });

  it('an unknown route is a JSON 404 naming it, with or without a token', async () => {
    for (const token of [undefined, null]) {
      const res = await h().call('GET', '/api/v2/noSuchThing', { token });
      assert.equal(res.status, 404);
      assertClientError(res, 'unknown route');
      assert.match(res.body.message, /\/api\/v2\/noSuchThing/);
      assert.doesNotMatch(res.body.message, /token=/, 'the 404 message must not echo the query string');
    }
    const wrongMethod = await h().call('PATCH', '/api/v2/createOrganization');
    assert.equal(wrongMethod.status, 404);
    assertClientError(wrongMethod, 'wrong method');
  });

  it('a missing required body field is named: orgName is required', async () => {
    const r = await h().reseller();
    const res = await h().call('POST', '/api/v2/createOrganization', { query: { targetResellerId: r.id }, body: {} });
    assert.equal(res.status, 400);
    assert.equal(res.body.success, false);
    assert.equal(res.body.message, 'orgName is required');
  });

  it('a query parameter over its maximum is named: pageSize must be <= 1000', async () => {
    const res = await h().call('GET', '/api/v2/listResellers', { query: { targetPartnerId: h().partnerId, pagination: true, pageSize: 1001 } });
    assert.equal(res.status, 400);
    assert.equal(res.body.message, 'pageSize must be <= 1000');
  });

  it('a missing field inside an array item is named with its index: numberingProviders[0].providerId is required', async () => {
    const r = await h().reseller();
    const res = await h().call('POST', '/api/v2/createOrganization', {
      query: { targetResellerId: r.id }, body: { orgName: 'Indexed', numberingProviders: [{ config: {} }] },
    });
    assert.equal(res.status, 400);
    assert.equal(res.body.message, 'numberingProviders[0].providerId is required');
  });

  it('a non-integer id is named: targetResellerId must be an integer', async () => {
    for (const bad of ['abc', '1.5', '', 'true']) {
      const res = await h().call('POST', '/api/v2/createOrganization', { query: { targetResellerId: bad }, body: { orgName: 'x' } });
      assert.equal(res.status, 400, bad);
      assert.equal(res.body.message, 'targetResellerId must be an integer');
    }
    // Ids beyond what the id column holds are refused before any query runs.
    for (const big of ['2147483648', '99999999999999999999']) {
      const res = await h().call('POST', '/api/v2/createOrganization', { query: { targetResellerId: big }, body: { orgName: 'x' } });
      assert.equal(res.status, 400, big);
      assert.equal(res.body.message, 'targetResellerId must be <= 2147483647');
    }
    // The validator turns "1e400" into Infinity and then skips its range checks; we do not.
    for (const inf of ['1e400', '-1e400']) {
      const res = await h().call('POST', '/api/v2/createOrganization', { query: { targetResellerId: inf }, body: { orgName: 'x' } });
      assert.equal(res.status, 400, inf);
      assert.equal(res.body.message, 'targetResellerId must be a finite number');
      const inBody = await h().call('DELETE', '/api/v2/deleteOrganization', { query: { targetResellerId: 1 }, body: { targetOrganizationId: inf } });
      assert.equal(inBody.status, 400, inf);
      assert.equal(inBody.body.message, 'targetOrganizationId must be a finite number');
    }
  });

  it('a missing required query parameter is named', async () => {
    const res = await h().call('POST', '/api/v2/createOrganization', { body: { orgName: 'x' } });
    assert.equal(res.status, 400);
    assert.equal(res.body.message, 'targetResellerId is required');
  });

  it('a NUL character in a string field is refused with a 400 naming the field, not stored', async () => {
    const r = await h().reseller();
    const res = await h().call('POST', '/api/v2/createOrganization', { query: { targetResellerId: r.id }, body: { orgName: `bad${NONSENSE}` } });
    assert.equal(res.status, 400);
    assert.equal(res.body.message, 'orgName must not contain NUL characters');
    const list = await h().call('GET', '/api/v2/listOrganizations', { query: { targetResellerId: r.id } });
    assert.equal(list.status, 200);
    assert.equal(list.body.organizations.length, 0);
  });
});

forEachEngine('body limit', (h) => {
  it('a body over CALLPLANE_BODY_LIMIT_BYTES is a 413 JSON; one under it is accepted', async () => {
    const r = await h().reseller();
    assert.equal(h().config.bodyLimitBytes, 2048);
    const big = await h().call('POST', '/api/v2/createOrganization', {
      query: { targetResellerId: r.id }, body: { orgName: 'Big', externalAccountId: 'y'.repeat(400), description: 'x'.repeat(3000) },
    });
    assert.equal(big.status, 413);
    assertClientError(big, 'big body');
    assert.match(big.body.message, /too large/);
    const small = await h().call('POST', '/api/v2/createOrganization', { query: { targetResellerId: r.id }, body: { orgName: 'Small' } });
    assert.equal(small.status, 201);
  });
}, { CALLPLANE_BODY_LIMIT_BYTES: '2048' });

forEachEngine('operations endpoints and the served document', (h) => {
  it('/healthz answers 200 {status:"ok"} without a token', async () => {
    const res = await h().call('GET', '/healthz', { token: null });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'ok' });
  });

  it('/readyz answers 200 {status:"ready"} with the engine in use', async () => {
    const res = await h().call('GET', '/readyz', { token: null });
    assert.equal(res.status, 200);
    assert.equal(res.body.status, 'ready');
    assert.equal(res.body.database, h().engine);
  });

  it('/metrics exposes callplane_http_request_duration_seconds in Prometheus text format', async () => {
    await h().call('GET', '/api/v2/account');
    const res = await h().call('GET', '/metrics', { token: null });
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^text\/plain/);
    const text = String(res.body);
    assert.match(text, /^# TYPE callplane_http_request_duration_seconds histogram$/m);
    assert.match(text, /^callplane_http_request_duration_seconds_count\{[^}]*route="\/api\/v2\/account"[^}]*status="200"[^}]*\} [1-9]/m);
    assert.doesNotMatch(text, new RegExp(h().adminToken), 'metrics must not carry the token');
  });

  it('GET /api/v2/openapi.json is an OpenAPI 3 document with operationIds, the apiKeyAuth scheme and createOrganization', async () => {
    const res = await h().call('GET', '/api/v2/openapi.json', { token: null });
    assert.equal(res.status, 200);
    const doc = res.body;
    assert.match(doc.openapi, /^3\.\d+\.\d+$/);
    assert.equal(typeof doc.info.title, 'string');
    assert.equal(typeof doc.info.version, 'string');
    assert.deepEqual(doc.components.securitySchemes.apiKeyAuth, { type: 'apiKey', in: 'query', name: 'token' });
    const create = doc.paths['/api/v2/createOrganization'];
    assert.ok(create?.post, 'POST /api/v2/createOrganization is documented');
    assert.equal(create.post.operationId, 'createOrganization');
    assert.deepEqual(create.post.security, [{ apiKeyAuth: [] }]);
    // Every $ref points at a schema the document defines, so tools can resolve it.
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]);
    for (const ref of refs) assert.ok(doc.components.schemas?.[ref], `dangling $ref ${ref}`);
    assert.ok(!doc.paths['/api/v2/openapi.json'], 'the document does not describe itself');
  });

  it('GET /docs serves the reference page without a token', async () => {
    const res = await h().call('GET', '/docs/', { token: null });
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /text\/html/);
    assert.match(String(res.body), /swagger/i);
    const bare = await h().call('GET', '/docs', { token: null });
    assert.ok([200, 301, 302].includes(bare.status), `GET /docs: ${bare.status}`);
    const spec = await h().call('GET', '/docs/json', { token: null });
    assert.equal(spec.status, 200);
    assert.ok(spec.body.paths['/api/v2/createOrganization']);
  });

  it('every response carries an x-request-id, which is also in error bodies', async () => {
    const answers = await Promise.all([
      h().call('GET', '/healthz', { token: null }),
      h().call('GET', '/api/v2/account'),
      h().call('GET', '/api/v2/account', { token: null }),
      h().call('GET', '/api/v2/nope'),
      h().call('POST', '/api/v2/createOrganization', { payload: '{', headers: { 'content-type': 'application/json' } }),
    ]);
    const ids = answers.map((a) => a.headers['x-request-id']);
    for (const id of ids) assert.match(String(id), /^[A-Za-z0-9._:-]{8,}$/);
    assert.equal(new Set(ids).size, ids.length, 'request ids are unique');
    for (const a of answers.slice(2)) assert.equal(a.body.requestId, a.headers['x-request-id']);
  });

  it('an incoming x-request-id is echoed; a malformed one is replaced', async () => {
    const given = 'trace-abc.123:xyz';
    const ok = await h().call('GET', '/api/v2/account', { headers: { 'x-request-id': given } });
    assert.equal(ok.headers['x-request-id'], given);
    const err = await h().call('GET', '/api/v2/account', { token: null, headers: { 'x-request-id': given } });
    assert.equal(err.headers['x-request-id'], given);
    assert.equal(err.body.requestId, given);
    const bad = await h().call('GET', '/healthz', { token: null, headers: { 'x-request-id': 'has spaces <script>' } });
    assert.notEqual(bad.headers['x-request-id'], 'has spaces <script>');
    assert.match(String(bad.headers['x-request-id']), /^[A-Za-z0-9._:-]+$/);
  });
});

for (const engine of ENGINES) {
  describe(`liveness without a database [${engine}]`, () => {
    let harness: Harness;
    before(async () => { harness = await startHarness(engine); });
    after(async () => {
      // The database was already closed by the test; close the app and drop what is left.
      await harness.app.close();
      await harness.close().catch(() => {});
    });

    it('/healthz stays 200 after the database is closed, while /readyz turns 503', async () => {
      assert.equal((await harness.call('GET', '/readyz', { token: null })).status, 200);
      await harness.database.close();
      const live = await harness.call('GET', '/healthz', { token: null });
      assert.equal(live.status, 200);
      assert.deepEqual(live.body, { status: 'ok' });
      const ready = await harness.call('GET', '/readyz', { token: null });
      assert.equal(ready.status, 503);
      assert.equal(ready.body.status, 'unavailable');
      // An authenticated route cannot reach the database: a clean 5xx JSON, no internals.
      const api = await harness.call('GET', '/api/v2/account');
      assert.equal(api.status, 500);
      assert.deepEqual(Object.keys(api.body).sort(), ['message', 'requestId', 'success']);
    });
  });
}
