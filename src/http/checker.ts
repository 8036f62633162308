// TypeBox schemas as checks that answer like the rest of the API: compiled (TypeCompiler) the first
// time one is used, never while the service starts, and a refused value is described by its first
// error as one sentence naming the field, e.g. `links[0] must be an http(s) URL`. A schema may
// carry its own words for a refusal (`refusing`); our string formats carry theirs
// (src/http/formats.ts); everything else is described from the error's kind and the schema's
// limits, in the words src/http/validation.ts uses for Ajv's errors.
import { Kind, TypeRegistry, type SchemaOptions, type TSchema, type TUnsafe } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors';
import { formatRefusal, registerTypeBoxFormats } from './formats.ts';
import { appendPath } from './validation.ts';

const REFUSALS = Symbol('callplane.refusals');

/** A schema's own words for what it refuses, each to follow the field's name. */
export interface Refusals {
  /** The value is not of the schema's type (for a union: of none of its forms' types). */
  type?: string;
  /** The value has the type but not the length, range, pattern, format or value the schema asks. */
  value?: string | ((value: unknown) => string);
  /** A key of the object (or record) that it does not allow. */
  key?: string;
}

/** The schema, carrying its own refusals (a symbol: neither Ajv nor the OpenAPI document sees it). */
export function refusing<T extends TSchema>(schema: T, refusals: Refusals): T {
  return Object.assign(schema, { [REFUSALS]: refusals });
}

const STRING_ENUM = 'StringEnum';

/**
 * One of the given strings: `{type: 'string', enum: [...]}` in the OpenAPI document, typed as the
 * union of the strings (TypeBox's compiler does not check `enum` on Type.String).
 */
export function StringEnum<const T extends readonly string[]>(values: T, options: SchemaOptions = {}): TUnsafe<T[number]> {
  return { ...options, [Kind]: STRING_ENUM, type: 'string', enum: [...values] } as unknown as TUnsafe<T[number]>;
}

function register(): void {
  registerTypeBoxFormats();
  if (!TypeRegistry.Has(STRING_ENUM)) {
    TypeRegistry.Set(STRING_ENUM, (schema: { enum: unknown[] }, value) => typeof value === 'string' && schema.enum.includes(value));
  }
}

/** A check of `schema`, compiled on its first use and kept. */
export function lazyCheck<T extends TSchema>(schema: T): () => TypeCheck<T> {
  let compiled: TypeCheck<T> | undefined;
  return () => {
    if (!compiled) {
      register();
      compiled = TypeCompiler.Compile(schema);
    }
    return compiled;
  };
}

const TYPE_ERRORS: Partial<Record<ValueErrorType, string>> = {
  [ValueErrorType.String]: 'must be a string',
  [ValueErrorType.Integer]: 'must be an integer',
  [ValueErrorType.Number]: 'must be a number',
  [ValueErrorType.Boolean]: 'must be a boolean',
  [ValueErrorType.Array]: 'must be an array',
  [ValueErrorType.Object]: 'must be an object',
  [ValueErrorType.Null]: 'must be null',
};

/** Whether `value` has the JSON type a union's form declares (its `type`). */
function hasType(schema: { type?: unknown }, value: unknown): boolean {
  switch (schema.type) {
    case 'integer': return Number.isInteger(value);
    case 'number': return typeof value === 'number';
    case 'object': return value !== null && typeof value === 'object' && !Array.isArray(value);
    case 'array': return Array.isArray(value);
    case 'null': return value === null;
    default: return typeof value === schema.type;
  }
}

const between = (s: Limits) => (s.minimum !== undefined && s.maximum !== undefined
  ? `must be between ${s.minimum} and ${s.maximum}` : s.minimum !== undefined ? `must be at least ${s.minimum}` : `must be at most ${s.maximum}`);

/** The keywords of a schema a refusal quotes. */
interface Limits {
  minLength?: number;
  maxLength?: number;
  format?: string;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  maxProperties?: number;
  enum?: unknown[];
}

/** What is wrong with a value whose type is right, in the schema's words when it has them. */
function valueRefusal(e: ValueError, own: Refusals['value']): string {
  if (own !== undefined) return typeof own === 'function' ? own(e.value) : own;
  const s = e.schema as Limits;
  switch (e.type) {
    case ValueErrorType.StringMinLength: return s.minLength === 1 ? 'must not be empty' : `must be at least ${s.minLength} characters long`;
    case ValueErrorType.StringMaxLength: return `must be at most ${s.maxLength} characters long`;
    case ValueErrorType.StringFormat: return formatRefusal(s.format ?? '', e.value as string) ?? `must be a valid ${s.format}`;
    case ValueErrorType.StringPattern: return 'has an invalid format';
    case ValueErrorType.IntegerMinimum: case ValueErrorType.IntegerMaximum:
    case ValueErrorType.NumberMinimum: case ValueErrorType.NumberMaximum: return between(s);
    case ValueErrorType.ArrayMaxItems: return `must have at most ${s.maxItems} items`;
    case ValueErrorType.ArrayMinItems: return `must have at least ${s.minItems} item${s.minItems === 1 ? '' : 's'}`;
    case ValueErrorType.ObjectMaxProperties: return `may have at most ${s.maxProperties} properties`;
    case ValueErrorType.Kind: return e.schema[Kind] === STRING_ENUM ? `must be one of: ${(s.enum ?? []).filter((v) => typeof v === 'string').join(', ')}` : 'is invalid';
    default: return e.message;
  }
}

/** One sentence for a refused value's first error: the field (`name`, and the error's path under it) and what is wrong. */
function describe(e: ValueError, name: string): string {
  const at = appendPath(name, e.path);
  const own = (e.schema as { [REFUSALS]?: Refusals })[REFUSALS] ?? {};
  if (e.type === ValueErrorType.Union) {
    // The form whose type the value has says what is wrong with it; a value of no form's type gets the union's words.
    const forms = (e.schema as unknown as { anyOf: { type?: unknown }[] }).anyOf;
    const i = forms.findIndex((f) => hasType(f, e.value));
    const first = i >= 0 ? e.errors[i]?.First() : undefined;
    return first ? describe(first, name) : `${at} ${own.type ?? 'does not match any allowed form'}`;
  }
  if (e.type === ValueErrorType.ObjectRequiredProperty) return `${at} is required`;
  if (e.type === ValueErrorType.ObjectAdditionalProperties) return `${at} ${own.key ?? 'is not allowed'}`;
  const typeError = e.type === ValueErrorType.Kind && e.schema[Kind] === STRING_ENUM && typeof e.value !== 'string' ? TYPE_ERRORS[ValueErrorType.String] : TYPE_ERRORS[e.type];
  if (typeError !== undefined) return `${at} ${own.type ?? typeError}`;
  return `${at} ${valueRefusal(e, own.value)}`;
}

/**
 * Undefined when `check` accepts `value`; otherwise one sentence naming the first refused part of
 * it under `name` (`snapshot.backgroundAudio.gain must be between -40 and 20`).
 */
export function refusalOf<T extends TSchema>(check: TypeCheck<T>, value: unknown, name: string): string | undefined {
  if (check.Check(value)) return undefined;
  const first = check.Errors(value).First();
  return first ? describe(first, name) : `${name} is invalid`;
}
