// X-Twilio-Signature (twilio.com/docs/usage/security): the check of every request Twilio makes to
// us, on node:crypto. Which organization's auth token a request is checked with is the caller's
// decision (src/modules/twilio/verify.ts for every route Twilio calls, and the relays).
import crypto from 'node:crypto';
import { toRecord, type TwilioParams } from './form.ts';

/** A URL's scheme, authority parts and the rest, split without normalizing (Twilio signs the characters it requested). */
function splitUrl(url: string): { scheme: string; userInfo: string; host: string; port: string; rest: string } | null {
  const match = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)/i.exec(url);
  if (!match) return null;
  const [prefix, scheme, authority] = match;
  const at = authority.lastIndexOf('@');
  const hostAndPort = authority.slice(at + 1);
  // A colon starts the port only after the closing bracket of an IPv6 literal.
  const colon = hostAndPort.indexOf(':', hostAndPort.lastIndexOf(']') + 1);
  return {
    scheme, userInfo: authority.slice(0, at + 1),
    host: colon < 0 ? hostAndPort : hostAndPort.slice(0, colon),
    port: colon < 0 ? '' : hostAndPort.slice(colon),
    rest: url.slice(prefix.length),
  };
}

/**
 * The URLs Twilio may have signed for the one we were asked: as requested and as the WHATWG URL
 * parser writes it, each without a port and with the scheme's default port (Twilio signs some
 * requests with :443 or :80 added, others without). The same candidates as Twilio's own Node
 * helper, less its re-encoding of the query string in the legacy `querystring` style.
 */
function signedUrlCandidates(url: string): string[] {
  const variants = (u: string): string[] => {
    const parts = splitUrl(u);
    if (!parts) return [u];
    const bare = parts.scheme + parts.userInfo + parts.host + parts.rest;
    const withPort = parts.port ? u : parts.scheme + parts.userInfo + parts.host + (parts.scheme.toLowerCase() === 'https://' ? ':443' : ':80') + parts.rest;
    return [bare, withPort];
  };
  return [...new Set([...variants(url), ...variants(new URL(url).toString())])];
}

/**
 * Twilio's X-Twilio-Signature (twilio.com/docs/usage/security): base64 HMAC-SHA1, keyed with the
 * auth token, of the full URL followed by every POST parameter's name and value, sorted by name
 * (a repeated parameter contributes each distinct value, sorted, as Twilio's helpers do).
 */
function twilioSignatureOf(authToken: string, url: string, params: Record<string, string | string[]>): string {
  let data = url;
  for (const key of Object.keys(params).sort()) {
    const value = params[key];
    for (const v of Array.isArray(value) ? [...new Set(value)].sort() : [value]) data += key + v;
  }
  return crypto.createHmac('sha1', authToken).update(data, 'utf8').digest('base64');
}

/** Constant-time equality of two strings (false at once when their lengths differ). */
function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}

/**
 * Checks X-Twilio-Signature. `url` is the full URL Twilio requested, query included. `body` is the
 * form parameters (an object or URLSearchParams), or the raw body: with a `bodySHA256` query
 * parameter it is checked as a JSON body (the URL alone is signed, and bodySHA256 must be the hex
 * SHA-256 of the body), otherwise read as a form. Anything missing or malformed is a refusal,
 * never an exception.
 */
export function verifyTwilioSignature(authToken: string, url: string, body: TwilioParams | string, signature: string | undefined): boolean {
  if (!authToken || !signature || !url) return false;
  try {
    let params: Record<string, string | string[]>;
    if (typeof body === 'string') {
      const bodyHash = new URL(url).searchParams.get('bodySHA256');
      if (bodyHash !== null) {
        if (!sameText(bodyHash, crypto.createHash('sha256').update(body, 'utf8').digest('hex'))) return false;
        params = {};
      } else {
        params = toRecord(new URLSearchParams(body));
      }
    } else {
      params = toRecord(body);
    }
    return signedUrlCandidates(url).some((candidate) => sameText(signature, twilioSignatureOf(authToken, candidate, params)));
  } catch {
    return false;
  }
}

/** The X-Twilio-Signature header of a request (the first, if it came more than once). */
export function signatureHeader(headers: Record<string, string | string[] | undefined>): string | undefined {
  const header = headers['x-twilio-signature'];
  return Array.isArray(header) ? header[0] : header;
}

/** A request Twilio made to us, as far as its signature goes. */
export interface SignedRequest {
  /** The path and query Twilio called. */
  url: string;
  signature: string | undefined;
  /** What the signature covers besides the URL: the form of a POST, nothing for a GET. */
  signed: TwilioParams | string;
}

/**
 * Whether `authToken` signed a request Twilio made to `publicUrl` + its path and query: the URL
 * Twilio was given, since every URL we give Twilio is built on config.publicUrl. A URL that went
 * through new URL() before Twilio got it (a status callback's, with ?taskId added) may have its
 * host lower-cased or a default port dropped: that spelling is among verifyTwilioSignature's
 * candidates too. No auth token: false.
 */
export function signedByTwilio(authToken: string | undefined, publicUrl: string, req: SignedRequest): boolean {
  return Boolean(authToken) && verifyTwilioSignature(authToken!, `${publicUrl}${req.url}`, req.signed, req.signature);
}
