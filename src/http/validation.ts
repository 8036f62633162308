// Turns the validator's errors into one sentence that names the field.
import type { FastifySchemaValidationError } from 'fastify/types/schema.js';
import { MAX_JSON_DEPTH, tooDeep } from '../lib/json.ts';

/** `name` and a JSON pointer under it, as messages name fields: `appendPath('apps', '/0/appId')` is `apps[0].appId`. */
export function appendPath(name: string, pointer: string): string {
  const parts = pointer.split('/').filter(Boolean).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  return parts.reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), name);
}

function fieldName(instancePath: string, context: string): string {
  return appendPath('', instancePath) || context;
}

const article = (t: string) => (/^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`);

export function describeValidationError(errors: FastifySchemaValidationError[], context: string): string {
  const e = errors[0] as FastifySchemaValidationError & { params: Record<string, any> };
  if (!e) return `${context} is invalid`;
  const name = fieldName(e.instancePath, context);
  const p = e.params ?? {};
  const child = (c: string) => (name === context || name === 'body' ? c : `${name}.${c}`);
  switch (e.keyword) {
    case 'required':
      return `${child(String(p.missingProperty))} is required`;
    case 'type':
      return `${name} must be ${String(p.type).split(',').map(article).join(' or ')}`;
    case 'format':
      return `${name} must be a valid ${p.format === 'email' ? 'email address' : p.format}`;
    case 'enum':
      return `${name} must be one of: ${(p.allowedValues as unknown[]).join(', ')}`;
    case 'const':
      return `${name} must be ${JSON.stringify(p.allowedValue)}`;
    case 'minimum': case 'maximum': case 'exclusiveMinimum': case 'exclusiveMaximum':
      return `${name} must be ${p.comparison} ${p.limit}`;
    case 'minLength':
      return p.limit === 1 ? `${name} must not be empty` : `${name} must be at least ${p.limit} characters long`;
    case 'maxLength':
      return `${name} must be at most ${p.limit} characters long`;
    case 'minItems':
      return `${name} must have at least ${p.limit} item(s)`;
    case 'maxItems':
      return `${name} must have at most ${p.limit} items`;
    case 'pattern':
      return `${name} has an invalid format`;
    case 'additionalProperties':
      return `${child(String(p.additionalProperty))} is not allowed`;
    case 'minProperties':
      return `${name} must have at least ${p.limit} propert${p.limit === 1 ? 'y' : 'ies'}`;
    case 'anyOf': case 'oneOf':
      return `${name} does not match any allowed form`;
    default:
      return `${name} ${e.message ?? 'is invalid'}`;
  }
}

/**
 * The path (as in validation messages: `a.b[0].c`) of the first key or value that fails `bad`.
 * Iterative: a deeply nested body must not overflow the stack. Every request's params, query and
 * body pass through here, nearly always clean: a first walk only looks, and the paths are built
 * by a second walk once something was found.
 */
function findValue(value: unknown, root: string, bad: (v: unknown) => boolean): string | undefined {
  return anyValue(value, bad) ? pathOfValue(value, root, bad) : undefined;
}

/** Whether any key or value (at any depth) fails `bad`. */
function anyValue(value: unknown, bad: (v: unknown) => boolean): boolean {
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    if (bad(v)) return true;
    if (v === null || typeof v !== 'object' || ArrayBuffer.isView(v)) continue;
    if (Array.isArray(v)) {
      for (const item of v) stack.push(item);
    } else {
      for (const k in v) {
        if (!Object.hasOwn(v, k)) continue;
        if (bad(k)) return true;
        stack.push((v as Record<string, unknown>)[k]);
      }
    }
  }
  return false;
}

function pathOfValue(value: unknown, root: string, bad: (v: unknown) => boolean): string | undefined {
  const stack: [unknown, string][] = [[value, root]];
  const join = (base: string, key: string) => (base === 'body' || base === '' ? key : `${base}.${key}`);
  while (stack.length) {
    const [v, at] = stack.pop()!;
    if (bad(v)) return at;
    if (ArrayBuffer.isView(v)) continue; // raw uploads are parsed (and checked) by their own route
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${at}[${i}]`]);
    } else if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v);
      for (const [k] of entries) if (bad(k)) return join(at, k.replaceAll('\u0000', '\\0'));
      for (let i = entries.length - 1; i >= 0; i--) stack.push([entries[i][1], join(at, entries[i][0])]);
    }
  }
  return undefined;
}

/**
 * Where a string (key or value) holds a NUL character. PostgreSQL text and jsonb cannot store NUL
 * at all, so such input is refused up front on both engines instead of failing inside a query.
 */
export const findNulCharacter = (value: unknown, root: string) =>
  findValue(value, root, (v) => typeof v === 'string' && v.includes('\u0000'));

/**
 * Where a number is not finite. The validator coerces "1e400" to Infinity and then skips its
 * minimum/maximum checks for non-finite numbers, so this runs on the validated (coerced) input.
 */
export const findNonFiniteNumber = (value: unknown, root: string) =>
  findValue(value, root, (v) => typeof v === 'number' && !Number.isFinite(v));

/**
 * The field (a top-level property of the body, or `body` itself) under which a request body nests
 * objects and arrays deeper than MAX_JSON_DEPTH levels (the body being the first). Iterative, and
 * checked before anything else reads the body, so nothing recursive ever meets such a body.
 */
export function findTooDeep(body: unknown): string | undefined {
  const found = tooDeep(body, MAX_JSON_DEPTH);
  if (!found) return undefined;
  return found.key === null ? 'body' : typeof found.key === 'number' ? `body[${found.key}]` : found.key;
}

export const tooDeepMessage = (field: string) =>
  `${field} is nested too deeply: a JSON body may nest at most ${MAX_JSON_DEPTH} levels of objects and arrays`;
