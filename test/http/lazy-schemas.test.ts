// Route schemas are compiled on first use (src/http/lazy-schemas.ts): nothing is compiled while
// the app starts, a schema is compiled once when its route first needs it, and compileAll() finds
// every schema Ajv or fast-json-stringify would refuse, so a broken one fails here and not on a
// caller's first request.
// @engines sqlite
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { lazySchemas } from '../../src/http/lazy-schemas.ts';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';

describe('lazy schema compilers', () => {
  const route = (schema: unknown) => ({ schema, method: 'POST', url: '/x', httpPart: 'body' }) as never;

  it('compile when first called, once, and validate as Ajv does (errors, coercion of the root value)', () => {
    const s = lazySchemas();
    const build = s.compilersFactory.buildValidator({}, { customOptions: { coerceTypes: 'array' } } as never) as (r: unknown) => ((...a: unknown[]) => unknown) & { errors?: { instancePath: string }[] };
    const validate = build(route({ type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }));
    assert.equal(s.compileAll(), 1, 'still waiting after it was built');
    assert.equal(s.compileAll(), 0);

    const again = build(route({ type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }));
    const body = { n: '7' };
    assert.equal(again(body, { parentData: { body }, parentDataProperty: 'body' }), true);
    assert.deepEqual(body, { n: 7 }, 'coerced in place');
    assert.equal(again({ n: 'seven' }), false);
    assert.equal(again.errors?.[0]?.instancePath, '/n');
    assert.equal(s.compileAll(), 0, 'the first call compiled it');
    assert.equal(validate({ n: 1 }), true);
  });

  it('compileAll throws the refusal of a broken schema, which building did not', () => {
    const s = lazySchemas();
    const build = s.compilersFactory.buildValidator({}, { customOptions: {} } as never) as (r: unknown) => unknown;
    build(route({ type: 'no-such-type' }));
    assert.throws(() => s.compileAll(), /no-such-type|type/);
  });

  it('the compiler itself (an Ajv with the shared schemas) is built on the first compile, not when Fastify asks for it at start', () => {
    const s = lazySchemas();
    // A shared schema Ajv refuses: building the compiler checks it against the meta-schema.
    const shared = { Broken: { $id: 'Broken', type: 'no-such-type' } };
    const build = s.compilersFactory.buildValidator(shared, { customOptions: {} } as never) as (r: unknown) => unknown;
    build(route({ type: 'object' }));
    assert.throws(() => s.compileAll(), /no-such-type|type/);
  });

  it('serializers compile when first called and drop what the schema does not name', () => {
    const s = lazySchemas();
    const build = s.compilersFactory.buildSerializer({}, {} as never) as (r: unknown) => (doc: unknown) => string;
    const serialize = build({ schema: { type: 'object', properties: { a: { type: 'string' } } }, method: 'GET', url: '/x', httpStatus: '200' });
    assert.equal(s.compileAll(), 1);
    assert.equal(serialize({ a: 'x', secret: 'y' }), '{"a":"x"}');
  });
});

for (const engine of ENGINES) {
  describe(`every route schema of the app compiles [${engine}]`, () => {
    const schemas = lazySchemas();
    let h: Harness | undefined;
    before(async () => { h = await startHarness(engine, {}, { schemas }); });
    after(async () => { await h?.close(); });

    it('none was compiled while the app started; all of them compile, and the routes still validate', async () => {
      await h!.app.ready();
      const n = schemas.compileAll();
      // Every operation of the contract has at least a body, query or response schema.
      assert.ok(n >= 108, `compiled ${n} schemas`);
      assert.equal(schemas.compileAll(), 0);
      const r = await h!.reseller();
      const o = await h!.organization(r.id);
      const res = await h!.call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'nonsense' } });
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.equal(res.body.success, false);
      assert.match(res.body.message, /type/);
    });

    it('our string formats (src/http/formats.ts) are known to the validators\' and the serializers\' Ajv: an agent using them is saved and answered without a warning', async () => {
      const warnings: unknown[][] = [];
      const warn = console.warn;
      console.warn = (...args: unknown[]) => { warnings.push(args); };
      try {
        const o = await h!.organization((await h!.reseller()).id);
        const token = await h!.tokenFor(o.agentId);
        const body = {
          links: ['https://a.example/faq'], timezone: 'Europe/Paris', agentLang: 'fr-FR', postAnswerDtmf: '1w#',
          backgroundAudio: { url: 'https://a.example/x.mp3', gain: -10 }, cnamAutoRejectRegex: '^SPAM', cnamAutoTransferDestination: 'pbx:200',
          transferDestinations: [{ name: 'desk', destination: '+15551234567' }],
        };
        const saved = await h!.call('POST', '/api/v2/agent', { token, body });
        assert.equal(saved.status, 200, JSON.stringify(saved.body));
        const staging = await h!.call('GET', '/api/v2/agentEventRules/staging', { token });
        assert.equal(staging.status, 200, JSON.stringify(staging.body));
        for (const [k, v] of Object.entries(body)) assert.deepEqual(staging.body.agent[k], v, k);
        const refused = await h!.call('POST', '/api/v2/agent', { token, body: { backgroundAudio: 'ftp://a.example/x.mp3' } });
        assert.equal(refused.body.message, 'backgroundAudio must be an http(s) URL');
      } finally {
        console.warn = warn;
      }
      assert.deepEqual(warnings, []);
    });
  });
}
