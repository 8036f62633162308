// `npm run check:contract` (run by .ci/run after lint): compares the OpenAPI document we serve
// (GET /api/v2/openapi.json, generated from the route schemas) with the reference contract
// (test/fixtures/vida-api-v2.openapi.json), operation by operation: every path and method of the
// contract exists; its parameters (name, in, required, type); its request body's field names and
// types; its responses' field names and types per status code — recursively, $refs resolved on
// both sides. Each difference is one stable line, e.g.
//   POST /api/v2/createReseller response 201 .organization: contract string, ours object
// and the check fails on any difference not listed, with its reason, in docs/api.md under
// "## Differences from the contract" as a bullet starting with the line in backticks.
//
// What counts as a difference (what a client written from the contract would notice):
// - requests: a value the contract allows that we refuse (a type we do not accept, a field or
//   parameter we require and the contract does not, one we do not know);
// - responses: a value we send that the contract's type does not allow, a field the contract
//   names that we do not declare, a success status the contract describes with a body and we do
//   not declare. Fields and operations we add are not differences; an integer is a number (and a
//   number sent to us may be taken as an integer: ids, pages, ports, milliseconds). An
//   error status we do not declare is compared with our error body, which every route answers.
//
// Usage: tsx scripts/check-contract.ts [--contract file] [--docs file]
//
// The two documents are walked as untyped JSON (any OpenAPI shape may appear): the unsafe-any
// rules are off for this file only.
/* eslint-disable @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-argument, @typescript-eslint/no-unsafe-return */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/index.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { SecretBox } from '../src/lib/crypto.ts';
import { createPlatform } from '../src/platform.ts';

type Json = Record<string, any>;
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head'];
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
export const DIFFERENCES_HEADING = '## Differences from the contract';

/** Follows `$ref`s (local, `#/…`) until a schema that is not one. */
function resolve(doc: Json, schema: Json | undefined, seen = new Set<string>()): Json | undefined {
  let s = schema;
  while (s && typeof s.$ref === 'string') {
    if (seen.has(s.$ref)) return {};
    seen.add(s.$ref);
    s = s.$ref.replace(/^#\//, '').split('/').reduce<any>((node, key) => node?.[key.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
  }
  return s;
}

/** The alternatives of a schema: its anyOf/oneOf members (flattened), else itself. */
function alternatives(doc: Json, schema: Json | undefined): Json[] {
  const s = resolve(doc, schema);
  if (!s) return [];
  const members = s.anyOf ?? s.oneOf;
  if (Array.isArray(members)) {
    const rest = { ...s };
    delete rest.anyOf;
    delete rest.oneOf;
    // A schema with both its own keywords and a oneOf (the contract does this): each member with them.
    return members.flatMap((m: Json) => alternatives(doc, { ...rest, ...resolve(doc, m) }));
  }
  if (Array.isArray(s.allOf)) return [s.allOf.reduce((acc: Json, m: Json) => mergeObjects(acc, resolve(doc, m) ?? {}), { ...s, allOf: undefined })];
  return [s];
}

function mergeObjects(a: Json, b: Json): Json {
  return { ...a, ...b, properties: { ...(a.properties ?? {}), ...(b.properties ?? {}) }, required: [...(a.required ?? []), ...(b.required ?? [])] };
}

/** The JSON types a schema allows: string, number, integer, boolean, object, array, null; `any` when unconstrained. */
export function typesOf(doc: Json, schema: Json | undefined): Set<string> {
  const out = new Set<string>();
  for (const s of alternatives(doc, schema)) {
    let types: string[];
    if (Array.isArray(s.type)) types = s.type;
    else if (typeof s.type === 'string') types = [s.type];
    else if (s.const !== undefined || Array.isArray(s.enum)) {
      types = (s.const !== undefined ? [s.const] : s.enum).map((v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array'
        : typeof v === 'number' ? (Number.isInteger(v) ? 'integer' : 'number') : typeof v));
    } else if (s.properties) types = ['object'];
    else if (s.items) types = ['array'];
    else types = ['any'];
    for (const t of types) out.add(t);
    if (s.nullable === true) out.add('null');
  }
  return out;
}

/**
 * Whether every value of types `a` is a value of types `b` (an integer is a number). Sent to us
 * (`request`), a number the contract allows is taken by an integer field: the contract's numbers
 * there are ids, page numbers, ports and milliseconds, where a fraction has no meaning.
 */
function within(a: Set<string>, b: Set<string>, direction: 'request' | 'response'): boolean {
  if (b.has('any')) return true;
  for (const t of a) {
    if (t === 'any') return false;
    if (b.has(t)) continue;
    if (t === 'integer' && b.has('number')) continue;
    if (direction === 'request' && t === 'number' && b.has('integer')) continue;
    return false;
  }
  return true;
}

const show = (types: Set<string>) => [...types].sort().join('|');

/** Merged view of an object schema's alternatives: properties (first declaration wins) and required names. */
function objectView(doc: Json, schema: Json | undefined): { properties: Record<string, Json>; required: Set<string> } | undefined {
  const objects = alternatives(doc, schema).filter((s) => s.properties || s.type === 'object');
  if (objects.length === 0) return undefined;
  const properties: Record<string, Json> = {};
  const required = new Set<string>();
  for (const o of objects) {
    for (const [k, v] of Object.entries(o.properties ?? {})) if (!(k in properties)) properties[k] = v as Json;
    // A name is required only when every alternative requires it.
    for (const r of o.required ?? []) if (objects.every((x) => (x.required ?? []).includes(r))) required.add(r);
  }
  return { properties, required };
}

/** The items schema of an array schema's alternatives (the first that declares one). */
function itemsOf(doc: Json, schema: Json | undefined): Json | undefined {
  return alternatives(doc, schema).find((s) => s.items)?.items as Json | undefined;
}

interface Side { doc: Json; schema: Json | undefined }

/**
 * Differences between two schemas at `at` (`.a.b[]`), recursively. `direction` says whose values
 * flow: in a request the contract's values must be ours too; in a response ours must be the contract's.
 */
function compareSchemas(contract: Side, ours: Side, at: string, direction: 'request' | 'response', out: string[], depth = 0): void {
  if (depth > 12) return;
  const ct = typesOf(contract.doc, contract.schema);
  const ot = typesOf(ours.doc, ours.schema);
  if (ct.has('any')) return; // the contract says nothing about it
  const ok = direction === 'request' ? within(ct, ot, direction) : within(ot, ct, direction);
  if (!ok) {
    out.push(`${at || '.'}: contract ${show(ct)}, ours ${show(ot)}`);
    return;
  }
  if (ot.has('any')) return; // we accept anything (request) — responses never get here with any
  const cObj = ct.has('object') ? objectView(contract.doc, contract.schema) : undefined;
  const oObj = ot.has('object') ? objectView(ours.doc, ours.schema) : undefined;
  if (cObj) {
    for (const [name, cProp] of Object.entries(cObj.properties)) {
      const fieldAt = `${at}.${name}`;
      const oProp = oObj?.properties[name];
      if (!oProp) {
        out.push(`${fieldAt}: contract ${show(typesOf(contract.doc, cProp))}, ours missing`);
        continue;
      }
      if (direction === 'request' && oObj!.required.has(name) && !cObj.required.has(name)) {
        out.push(`${fieldAt}: contract optional, ours required`);
      }
      if (direction === 'response' && cObj.required.has(name) && !oObj!.required.has(name)) {
        out.push(`${fieldAt}: contract required, ours optional`);
      }
      compareSchemas({ doc: contract.doc, schema: cProp }, { doc: ours.doc, schema: oProp }, fieldAt, direction, out, depth + 1);
    }
    if (direction === 'request' && oObj) {
      for (const name of oObj.required) if (!(name in cObj.properties)) out.push(`${at}.${name}: contract missing, ours required`);
    }
  }
  if (ct.has('array') && ot.has('array')) {
    const ci = itemsOf(contract.doc, contract.schema);
    const oi = itemsOf(ours.doc, ours.schema);
    if (ci) compareSchemas({ doc: contract.doc, schema: ci }, { doc: ours.doc, schema: oi }, `${at}[]`, direction, out, depth + 1);
  }
}

function jsonSchemaOf(doc: Json, holder: Json | undefined): Json | undefined {
  const h = resolve(doc, holder);
  const content = h?.content as Record<string, Json> | undefined;
  if (!content) return undefined;
  const key = Object.keys(content).find((k) => /^application\/json/i.test(k));
  return key ? content[key].schema : undefined;
}

function parameterType(doc: Json, p: Json): Set<string> {
  return typesOf(doc, p.schema ?? (p.type ? { type: p.type } : undefined));
}

/** Every difference between the contract and our document, one line each, sorted. */
export function compareDocuments(contract: Json, ours: Json): string[] {
  const lines: string[] = [];
  const errorBody = Object.values((ours.components?.schemas ?? {}) as Record<string, Json>).find((s) => s.description === 'Every error has this shape.')
    ?? { type: 'object', properties: { success: { type: 'boolean' }, message: { type: 'string' } } };
  for (const [p, item] of Object.entries(contract.paths as Record<string, Json>)) {
    for (const method of METHODS) {
      const cop = item[method] as Json | undefined;
      if (!cop) continue;
      const op = `${method.toUpperCase()} ${p}`;
      const oop = ours.paths?.[p]?.[method] as Json | undefined;
      if (!oop) {
        lines.push(`${op}: contract operation, ours missing`);
        continue;
      }
      // Parameters: name, in, required, type.
      const cParams = [...(item.parameters ?? []), ...(cop.parameters ?? [])].map((x: Json) => resolve(contract, x)!);
      const oParams = [...(ours.paths[p].parameters ?? []), ...(oop.parameters ?? [])].map((x: Json) => resolve(ours, x)!);
      for (const cp of cParams) {
        if (cp.in === 'header') continue;
        const label = `${op} parameter ${cp.in} ${cp.name}`;
        const found = oParams.find((x) => x.in === cp.in && x.name === cp.name);
        const ct = parameterType(contract, cp);
        if (!found) {
          lines.push(`${label}: contract ${show(ct)}${cp.required ? ' required' : ''}, ours missing`);
          continue;
        }
        const creq = cp.required === true || cp.in === 'path';
        const oreq = found.required === true || found.in === 'path';
        if (oreq && !creq) lines.push(`${label}: contract optional, ours required`);
        const ot = parameterType(ours, found);
        if (!ct.has('any') && !within(ct, ot, 'request')) lines.push(`${label}: contract ${show(ct)}, ours ${show(ot)}`);
      }
      for (const opm of oParams) {
        if (opm.required && opm.in !== 'path' && !cParams.some((x) => x.in === opm.in && x.name === opm.name)) {
          lines.push(`${op} parameter ${opm.in} ${opm.name}: contract missing, ours required`);
        }
      }
      // Request body.
      const cBody = jsonSchemaOf(contract, cop.requestBody);
      if (cBody) {
        const oBody = jsonSchemaOf(ours, oop.requestBody);
        const out: string[] = [];
        if (!oBody) out.push(`: contract ${show(typesOf(contract, cBody))}, ours missing`);
        else compareSchemas({ doc: contract, schema: cBody }, { doc: ours, schema: oBody }, '', 'request', out);
        for (const d of out) lines.push(`${op} request ${d.startsWith(':') ? `body${d}` : d}`);
      }
      // Responses.
      for (const [status, cres] of Object.entries((cop.responses ?? {}) as Record<string, Json>)) {
        const cSchema = jsonSchemaOf(contract, cres);
        if (!cSchema) continue;
        let oSchema = jsonSchemaOf(ours, oop.responses?.[status]);
        const code = Number(status);
        if (!oSchema && code >= 400) oSchema = errorBody;
        const out: string[] = [];
        if (!oSchema) out.push(`: contract ${show(typesOf(contract, cSchema))}, ours missing`);
        else compareSchemas({ doc: contract, schema: cSchema }, { doc: ours, schema: oSchema }, '', 'response', out);
        for (const d of out) lines.push(`${op} response ${status} ${d.startsWith(':') ? `body${d}` : d}`);
      }
    }
  }
  return [...new Set(lines)].sort();
}

/** The differences docs/api.md lists: exact line → reason (empty when the bullet gives none). */
export function listedDifferences(markdown: string): Map<string, string> {
  const listed = new Map<string, string>();
  const start = markdown.indexOf(`\n${DIFFERENCES_HEADING}\n`);
  if (start < 0) return listed;
  const rest = markdown.slice(start + DIFFERENCES_HEADING.length + 2);
  const end = rest.search(/\n## /);
  const section = end < 0 ? rest : rest.slice(0, end);
  let last: string | undefined;
  for (const raw of section.split('\n')) {
    const m = /^- `([^`]+)`\s*(?:[—:-]+\s*)?(.*)$/.exec(raw);
    if (m) {
      last = m[1];
      listed.set(last, m[2].trim());
    } else if (last && /^\s{2,}\S/.test(raw)) {
      listed.set(last, `${listed.get(last)} ${raw.trim()}`.trim());
    } else if (raw.trim() === '') {
      last = undefined;
    }
  }
  return listed;
}

export interface CheckResult {
  /** Every difference found. */
  differences: string[];
  /** Found and not listed with a reason: what fails the check. */
  unlisted: string[];
  /** Listed but no longer found (reported, not failing). */
  stale: string[];
}

export function checkAgainstDocs(differences: string[], markdown: string): CheckResult {
  const listed = listedDifferences(markdown);
  const unlisted = differences.filter((d) => !listed.get(d));
  const found = new Set(differences);
  return { differences, unlisted, stale: [...listed.keys()].filter((l) => !found.has(l)) };
}

/** Our served document: the app built as `callplane serve` builds it, on a scratch SQLite database. */
export async function servedDocument(): Promise<Json> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-contract-'));
  const config = loadConfig({ DATA_DIR: dataDir });
  const database = openDatabase({ sqliteFile: path.join(dataDir, 'callplane.db'), poolSize: 1 });
  try {
    await migrateToLatest(database);
    const platform = createPlatform({ config, database, box: new SecretBox(crypto.randomBytes(32)), sip: false });
    const app = await buildApp({ config, database, services: platform.services });
    try {
      await app.ready();
      const res = await app.inject({ method: 'GET', url: '/api/v2/openapi.json' });
      if (res.statusCode !== 200) throw new Error(`GET /api/v2/openapi.json answered ${res.statusCode}`);
      return res.json<Json>();
    } finally {
      await app.close();
      await platform.close();
    }
  } finally {
    await database.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main(argv: string[]): Promise<number> {
  const arg = (name: string, fallback: string) => {
    const i = argv.indexOf(name);
    return i >= 0 && argv[i + 1] ? path.resolve(argv[i + 1]) : fallback;
  };
  const contractFile = arg('--contract', path.join(ROOT, 'test/fixtures/vida-api-v2.openapi.json'));
  const docsFile = arg('--docs', path.join(ROOT, 'docs/api.md'));
  const contract = JSON.parse(fs.readFileSync(contractFile, 'utf8')) as Json;
  const result = checkAgainstDocs(compareDocuments(contract, await servedDocument()), fs.readFileSync(docsFile, 'utf8'));
  const unlisted = new Set(result.unlisted);
  for (const d of result.differences) console.log(`${unlisted.has(d) ? 'UNLISTED' : 'listed  '} ${d}`);
  for (const s of result.stale) console.log(`stale    ${s} (listed in ${path.relative(ROOT, docsFile)} but no longer a difference)`);
  console.log(`${result.differences.length} differences from the contract, ${result.unlisted.length} not listed with a reason in ${path.relative(ROOT, docsFile)} (${DIFFERENCES_HEADING})`);
  return result.unlisted.length === 0 ? 0 : 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main(process.argv.slice(2)).then((code) => { process.exitCode = code; }, (err: unknown) => {
    console.error(err);
    process.exitCode = 2;
  });
}
