// Twilio's form parameters as our routes receive them: the form @fastify/formbody parsed (or a
// GET's query), or the raw form a signature covers, and the one way to read a parameter of it.

/** A form as @fastify/formbody parses it: strings, or arrays for repeated keys. */
export type TwilioForm = Record<string, string | string[]>;

/** Parameters Twilio sent: a parsed form, or the form as URLSearchParams. */
export type TwilioParams = TwilioForm | URLSearchParams;

/** The parameters as a record (a repeated key's values as an array). */
export function toRecord(params: TwilioParams): TwilioForm {
  if (!(params instanceof URLSearchParams)) return params;
  const out: TwilioForm = {};
  for (const key of new Set(params.keys())) {
    const all = params.getAll(key);
    out[key] = all.length === 1 ? all[0] : all;
  }
  return out;
}

/** The first value Twilio sent for `key` (a repeated parameter's first); undefined when none or empty. */
export function first(params: TwilioParams, key: string): string | undefined {
  if (params instanceof URLSearchParams) {
    const v = params.get(key);
    return v !== null && v !== '' ? v : undefined;
  }
  const v = Object.hasOwn(params, key) ? params[key] : undefined;
  const s = Array.isArray(v) ? v[0] : v;
  return typeof s === 'string' && s !== '' ? s : undefined;
}

/** The form as parsed by @fastify/formbody (strings, or arrays for repeated keys); anything else is no form. */
export function formOf(body: unknown): TwilioForm {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return {};
  const out: TwilioForm = {};
  for (const [k, v] of Object.entries(body)) {
    if (typeof v === 'string' || (Array.isArray(v) && v.every((x) => typeof x === 'string'))) out[k] = v as string | string[];
  }
  return out;
}
