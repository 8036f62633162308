// Twilio's form parameters: the one way a form Twilio posts (or a GET's query string) is read into
// parameters (parseForm, which the twilio module's routes parse every body with), and the one way
// to read a parameter of it (first).

/** A form's parameters: strings, or arrays for repeated keys. */
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

/** An application/x-www-form-urlencoded body, or a query string, read into its parameters. */
export function parseForm(raw: string): TwilioForm {
  return toRecord(new URLSearchParams(raw));
}
