// Custom headers a customer may configure for deliveries: which names are refused and why, and the
// shape check (an array of single-key objects, as the contract's relay config has them).

/**
 * Names a customer may not set: hop-by-hop headers, ones that describe the body or the connection
 * (we set them from what we send), the target host, and the signature headers we add.
 */
export const FORBIDDEN_HEADER_NAMES: ReadonlySet<string> = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization',
  'te', 'trailer', 'trailers', 'transfer-encoding', 'upgrade', 'expect',
  'host', 'content-length', 'content-type', 'content-encoding',
  'webhook-id', 'webhook-timestamp', 'webhook-signature',
]);

export const MAX_CUSTOM_HEADERS = 50;
export const MAX_HEADER_VALUE_LENGTH = 8192;

/** RFC 9110 token characters. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Control characters other than horizontal tab (CR and LF would let a value inject headers). */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]/;

const SHAPE = 'headers must be an array of single-key objects, such as [{"Authorization": "Bearer xyz"}]';

/** Why a header name may not be configured, or null when it may. */
function nameRefusal(name: string): string | null {
  const lower = name.toLowerCase();
  if (!TOKEN.test(name)) return 'is not a valid header name';
  if (FORBIDDEN_HEADER_NAMES.has(lower) || lower.startsWith('content-')) return 'may not be set: we set it ourselves';
  return null;
}

/**
 * Configured custom headers: `[{"Name": "value"}, …]`. Absent (undefined or null) means none.
 * Names are kept as given; the same name twice (in any case) is refused.
 */
export function checkCustomHeaders(headers: unknown): { ok: true; headers: Array<Record<string, string>> } | { ok: false; message: string } {
  if (headers === undefined || headers === null) return { ok: true, headers: [] };
  if (!Array.isArray(headers)) return { ok: false, message: SHAPE };
  if (headers.length > MAX_CUSTOM_HEADERS) return { ok: false, message: `headers: at most ${MAX_CUSTOM_HEADERS} headers` };
  const out: Array<Record<string, string>> = [];
  const seen = new Set<string>();
  for (let i = 0; i < headers.length; i++) {
    const entry: unknown = headers[i];
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return { ok: false, message: SHAPE };
    const keys = Object.keys(entry);
    if (keys.length !== 1) return { ok: false, message: SHAPE };
    const name = keys[0];
    const value: unknown = (entry as Record<string, unknown>)[name];
    const refused = nameRefusal(name);
    if (refused) return { ok: false, message: `headers[${i}]: '${name.slice(0, 100)}' ${refused}` };
    if (seen.has(name.toLowerCase())) return { ok: false, message: `headers[${i}]: '${name}' is given more than once` };
    seen.add(name.toLowerCase());
    if (typeof value !== 'string') return { ok: false, message: `headers[${i}]: the value of '${name}' must be a string` };
    if (CONTROL.test(value)) {
      return { ok: false, message: `headers[${i}]: the value of '${name}' must not contain CR, LF or other control characters` };
    }
    if (value.length > MAX_HEADER_VALUE_LENGTH) {
      return { ok: false, message: `headers[${i}]: the value of '${name}' is longer than ${MAX_HEADER_VALUE_LENGTH} characters` };
    }
    out.push({ [name]: value });
  }
  return { ok: true, headers: out };
}

/** Checked custom headers as one map with lower-case names, for a request. */
export function headerMap(headers: ReadonlyArray<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of headers) for (const [name, value] of Object.entries(entry)) out[name.toLowerCase()] = value;
  return out;
}
