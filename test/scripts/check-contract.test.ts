// The contract check (scripts/check-contract.ts, `npm run check:contract` in .ci/run): it finds
// the differences that matter, passes with docs/api.md as it is, and fails on a difference that is
// not listed there with a reason.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { checkAgainstDocs, compareDocuments, listedDifferences } from '../../scripts/check-contract.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

const op = (response: object, extra: object = {}) => ({
  responses: { 201: { description: 'x', content: { 'application/json': { schema: response } } } }, ...extra,
});
const doc = (paths: object, components: object = {}) => ({ openapi: '3.0.3', paths, components });

function run(args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts/check-contract.ts'), ...args], { cwd: ROOT, timeout: 120_000 }, (err, stdout) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout });
    });
  });
}

describe('contract check', () => {
  it('names each difference in one stable line: types, nulls, missing fields, parameters, operations; $refs resolved', () => {
    const contract = doc({
      '/api/v2/createReseller': {
        post: {
          parameters: [{ name: 'targetPartnerId', in: 'query', required: true, schema: { type: 'string' } }],
          requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/Body' } } } },
          ...op({ type: 'object', properties: { organization: { type: 'string' }, limits: { type: 'object', properties: { daily: { type: 'number' } } }, gone: { type: 'string' } } }),
        },
      },
      '/api/v2/absent': { get: op({ type: 'object' }) },
    }, { schemas: { Body: { type: 'object', properties: { name: { type: 'string' } } } } });
    const ours = doc({
      '/api/v2/createReseller': {
        post: {
          parameters: [{ name: 'targetPartnerId', in: 'query', required: true, schema: { type: 'integer' } }, { name: 'x', in: 'query', required: true, schema: { type: 'string' } }],
          requestBody: { content: { 'application/json': { schema: { type: 'object', required: ['name', 'extra'], properties: { name: { type: 'integer' }, extra: { type: 'string' } } } } } },
          ...op({ $ref: '#/components/schemas/Answer' }),
        },
      },
      '/api/v2/ours-only': { get: op({ type: 'object' }) },
    }, { schemas: { Answer: { type: 'object', properties: { organization: { type: 'object', properties: {} }, limits: { type: 'object', properties: { daily: { anyOf: [{ type: 'integer' }, { type: 'null' }] } } }, added: { type: 'string' } } } } });
    assert.deepEqual(compareDocuments(contract, ours), [
      'GET /api/v2/absent: contract operation, ours missing',
      'POST /api/v2/createReseller parameter query targetPartnerId: contract string, ours integer',
      'POST /api/v2/createReseller parameter query x: contract missing, ours required',
      'POST /api/v2/createReseller request .extra: contract missing, ours required',
      'POST /api/v2/createReseller request .name: contract optional, ours required',
      'POST /api/v2/createReseller request .name: contract string, ours integer',
      'POST /api/v2/createReseller response 201 .gone: contract string, ours missing',
      'POST /api/v2/createReseller response 201 .limits.daily: contract number, ours integer|null',
      'POST /api/v2/createReseller response 201 .organization: contract string, ours object',
    ]);
    // The same document on both sides: nothing.
    assert.deepEqual(compareDocuments(contract, contract), []);
  });

  it('reads the listed differences from docs: a bullet with the line in backticks and a reason; one without a reason does not count', () => {
    const md = '# API\n\n## Differences from the contract\n\nIntro.\n\n- `A: contract string, ours object` — because.\n- `B: x` —\n- `C: y` — a reason that goes on\n  on the next line.\n\n## Later\n\n- `D` — not in the section\n';
    const listed = listedDifferences(md);
    assert.deepEqual([...listed], [['A: contract string, ours object', 'because.'], ['B: x', ''], ['C: y', 'a reason that goes on on the next line.']]);
    const result = checkAgainstDocs(['A: contract string, ours object', 'B: x', 'E: z'], md);
    assert.deepEqual(result.unlisted, ['B: x', 'E: z']);
    assert.deepEqual(result.stale, ['C: y']);
  });

  it('passes on our served document with docs/api.md, and fails naming the line when one listed difference is taken out', async () => {
    const ok = await run([]);
    assert.equal(ok.code, 0, ok.out);
    assert.match(ok.out, /\d+ differences from the contract, 0 not listed/);
    const docs = fs.readFileSync(path.join(ROOT, 'docs/api.md'), 'utf8');
    const line = 'POST /api/v2/webhookRelay/{type} parameter path type: contract object, ours string';
    const bullet = docs.split('\n').find((l) => l.startsWith(`- \`${line}\``));
    assert.ok(bullet, 'docs/api.md lists the difference');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-contract-docs-'));
    try {
      const without = path.join(dir, 'api.md');
      fs.writeFileSync(without, docs.replace(`${bullet}\n`, ''));
      const bad = await run(['--docs', without]);
      assert.equal(bad.code, 1, bad.out);
      assert.ok(bad.out.includes(`UNLISTED ${line}`), bad.out);
      assert.match(bad.out, /, 1 not listed with a reason/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
