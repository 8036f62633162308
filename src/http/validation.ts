// Turns the validator's errors into one sentence that names the field.
import type { FastifySchemaValidationError } from 'fastify/types/schema.js';

function fieldName(instancePath: string, context: string): string {
  const parts = instancePath.split('/').filter(Boolean).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (parts.length === 0) return context === 'body' ? 'body' : context;
  return parts.reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');
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
      return `${child(p.missingProperty)} is required`;
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
      return `${child(p.additionalProperty)} is not allowed`;
    case 'minProperties':
      return `${name} must have at least ${p.limit} propert${p.limit === 1 ? 'y' : 'ies'}`;
    case 'anyOf': case 'oneOf':
      return `${name} does not match any allowed form`;
    default:
      return `${name} ${e.message ?? 'is invalid'}`;
  }
}
