// HTTP Digest authentication as SIP uses it (RFC 3261 §22, RFC 2617, RFC 7616, RFC 8760):
// reading a 401/407 challenge and answering it. MD5 and SHA-256 (with -sess), qop=auth.
import crypto from 'node:crypto';
import { quote, splitList, unquote } from './message.ts';

export interface Challenge {
  /** 'www' for 401 WWW-Authenticate, 'proxy' for 407 Proxy-Authenticate. */
  kind: 'www' | 'proxy';
  realm: string;
  nonce: string;
  opaque?: string;
  algorithm: string;
  qop: string[];
  /** The nonce expired but the credentials were right: answer again without counting a failure. */
  stale: boolean;
}

const ALGORITHMS: Record<string, string> = {
  MD5: 'md5', 'MD5-SESS': 'md5', 'SHA-256': 'sha256', 'SHA-256-SESS': 'sha256',
};

export function parseChallenge(header: string, kind: Challenge['kind']): Challenge | null {
  const m = /^\s*Digest\s+(.*)$/is.exec(header);
  if (!m) return null;
  const fields: Record<string, string> = {};
  for (const part of splitList(m[1])) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    fields[part.slice(0, eq).trim().toLowerCase()] = unquote(part.slice(eq + 1).trim());
  }
  if (fields.realm === undefined || fields.nonce === undefined) return null;
  const algorithm = (fields.algorithm ?? 'MD5').toUpperCase();
  return {
    kind,
    realm: fields.realm,
    nonce: fields.nonce,
    ...(fields.opaque !== undefined ? { opaque: fields.opaque } : {}),
    algorithm,
    qop: (fields.qop ?? '').split(',').map((q) => q.trim().toLowerCase()).filter(Boolean),
    stale: (fields.stale ?? '').toLowerCase() === 'true',
  };
}

/** The challenges of a 401/407 we can answer, strongest algorithm first. */
export function challengesOf(headers: { getAll(name: string): string[] }, status: number): Challenge[] {
  const kind = status === 407 ? 'proxy' : 'www';
  const name = kind === 'proxy' ? 'proxy-authenticate' : 'www-authenticate';
  const found = headers.getAll(name).map((h) => parseChallenge(h, kind)).filter((c): c is Challenge => c !== null && Object.hasOwn(ALGORITHMS, c.algorithm));
  return found.sort((a, b) => Number(b.algorithm.startsWith('SHA')) - Number(a.algorithm.startsWith('SHA')));
}

export interface Credentials {
  username: string;
  password: string;
}

const hash = (algo: string, text: string) => crypto.createHash(algo).update(text, 'utf8').digest('hex');

/**
 * The Authorization (or Proxy-Authorization) header answering `c` for a request `method uri`.
 * `nc` counts the uses of this nonce (1 for the first answer).
 */
export function authorize(c: Challenge, creds: Credentials, method: string, uri: string, nc: number, cnonce = crypto.randomBytes(8).toString('hex')): { name: string; value: string } {
  const algo = ALGORITHMS[c.algorithm];
  if (!algo) throw new Error(`unsupported digest algorithm ${c.algorithm}`);
  let ha1 = hash(algo, `${creds.username}:${c.realm}:${creds.password}`);
  if (c.algorithm.endsWith('-SESS')) ha1 = hash(algo, `${ha1}:${c.nonce}:${cnonce}`);
  const ha2 = hash(algo, `${method}:${uri}`);
  const useQop = c.qop.includes('auth');
  const ncHex = nc.toString(16).padStart(8, '0');
  const response = useQop
    ? hash(algo, `${ha1}:${c.nonce}:${ncHex}:${cnonce}:auth:${ha2}`)
    : hash(algo, `${ha1}:${c.nonce}:${ha2}`);
  const parts = [
    `username=${quote(creds.username)}`, `realm=${quote(c.realm)}`, `nonce=${quote(c.nonce)}`, `uri=${quote(uri)}`,
    `response=${quote(response)}`, `algorithm=${c.algorithm}`,
  ];
  if (c.opaque !== undefined) parts.push(`opaque=${quote(c.opaque)}`);
  if (useQop) parts.push('qop=auth', `nc=${ncHex}`, `cnonce=${quote(cnonce)}`);
  return { name: c.kind === 'proxy' ? 'Proxy-Authorization' : 'Authorization', value: `Digest ${parts.join(', ')}` };
}

/**
 * The server side of the same computation, for tests and for checking our own answers: true
 * when `header` (an Authorization value) is right for these credentials.
 */
export function verifyAuthorization(header: string, creds: Credentials, method: string): boolean {
  const m = /^\s*Digest\s+(.*)$/is.exec(header);
  if (!m) return false;
  const f: Record<string, string> = {};
  for (const part of splitList(m[1])) {
    const eq = part.indexOf('=');
    if (eq > 0) f[part.slice(0, eq).trim().toLowerCase()] = unquote(part.slice(eq + 1).trim());
  }
  const algorithm = (f.algorithm ?? 'MD5').toUpperCase();
  const algo = ALGORITHMS[algorithm];
  if (!algo || f.username !== creds.username) return false;
  let ha1 = hash(algo, `${creds.username}:${f.realm}:${creds.password}`);
  if (algorithm.endsWith('-SESS')) ha1 = hash(algo, `${ha1}:${f.nonce}:${f.cnonce}`);
  const ha2 = hash(algo, `${method}:${f.uri}`);
  const expected = f.qop ? hash(algo, `${ha1}:${f.nonce}:${f.nc}:${f.cnonce}:${f.qop}:${ha2}`) : hash(algo, `${ha1}:${f.nonce}:${ha2}`);
  const a = Buffer.from(expected);
  const b = Buffer.from(f.response ?? '');
  return a.length === b.length && crypto.timingSafeEqual(a, b);
}
