// The SSRF guard for every outbound request to a customer URL: which addresses are refused and why,
// the configuration-time URL check, and an undici dispatcher that resolves names itself and refuses
// blocked addresses at connect time, so the socket goes to the address that was checked (no second
// resolution, hence no DNS rebinding).
import dns from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Agent, buildConnector, fetch as undiciFetch, type Dispatcher } from 'undici';
import type { Config } from '../config.ts';

// The relay service checks a configuration (URL and headers) in one place.
export { checkCustomHeaders, FORBIDDEN_HEADER_NAMES } from './headers.ts';

/** Which non-public addresses outbound requests may reach (CALLPLANE_ALLOW_PRIVATE_TARGETS). */
export interface TargetPolicy {
  /** Every address is allowed (development and tests only). */
  allowPrivate: boolean;
  /** Ranges opened despite being non-public ('10.1.0.0/16', 'fd00::/8', or a single address). */
  allowCidrs?: readonly string[];
}

export function policyFromConfig(config: Pick<Config, 'allowPrivateTargets' | 'privateTargetCidrs'>): TargetPolicy {
  return { allowPrivate: config.allowPrivateTargets, allowCidrs: [...(config.privateTargetCidrs ?? [])] };
}

/**
 * A refused outbound target. The message is what a tenant may read: for a name it says only that
 * the address policy refused the target, never what the name resolves to (an organization could
 * otherwise map this deployment's internal names); `detail` (the address and why) is for our log.
 */
export class TargetRefusedError extends Error {
  readonly code = 'ERR_TARGET_REFUSED';
  constructor(message: string, readonly address: string, readonly detail: string = message) {
    super(message);
    this.name = 'TargetRefusedError';
  }
}

/** Where the guard tells the operator what a refused name resolved to. */
export type RefusalLog = { warn(obj: object, msg: string): void };

type Family = 'ipv4' | 'ipv6';

function rules(family: Family, table: Array<[reason: string, cidrs: string[]]>): Array<{ reason: string; list: BlockList }> {
  return table.map(([reason, cidrs]) => {
    const list = new BlockList();
    for (const cidr of cidrs) {
      const [addr, bits] = cidr.split('/');
      list.addSubnet(addr, Number(bits), family);
    }
    return { reason, list };
  });
}

// IANA special-purpose registries; the first match names the reason, so narrower ranges come first.
const V4_RULES = rules('ipv4', [
  ['an unspecified ("this network") address', ['0.0.0.0/8']],
  ['a loopback address', ['127.0.0.0/8']],
  ['a private (RFC 1918) address', ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']],
  ['a link-local address (the cloud metadata service)', ['169.254.169.254/32']],
  ['a link-local address', ['169.254.0.0/16']],
  ['a carrier-grade NAT (RFC 6598) address', ['100.64.0.0/10']],
  ['a multicast address', ['224.0.0.0/4']],
  ['the broadcast address', ['255.255.255.255/32']],
  ['a reserved address', ['240.0.0.0/4']],
  ['a documentation address', ['192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24']],
  ['a special-purpose address', ['192.0.0.0/24', '192.88.99.0/24', '198.18.0.0/15']],
]);

const V6_RULES = rules('ipv6', [
  ['the unspecified address', ['::/128']],
  ['a loopback address', ['::1/128']],
  ['a link-local address', ['fe80::/10']],
  ['a unique local (private) address', ['fc00::/7']],
  ['a site-local address', ['fec0::/10']],
  ['a multicast address', ['ff00::/8']],
  ['a local-use NAT64 address', ['64:ff9b:1::/48']],
  ['a discard-only address', ['100::/64']],
  ['a Teredo tunnel address', ['2001::/32']],
  ['a documentation address', ['2001:db8::/32', '3fff::/20']],
  ['a special-purpose address', ['2001:2::/48', '2001:10::/28', '2001:20::/28', '5f00::/16']],
]);

/** IPv6 forms that carry an IPv4 address the packet really goes to: checked as that address. */
const EMBEDDING: Array<{ name: string; list: BlockList; v4At: number }> = [
  { name: 'IPv4-mapped', cidr: '::ffff:0:0/96', v4At: 12 },
  { name: 'NAT64', cidr: '64:ff9b::/96', v4At: 12 },
  { name: '6to4', cidr: '2002::/16', v4At: 2 },
].map(({ name, cidr, v4At }) => {
  const list = new BlockList();
  const [addr, bits] = cidr.split('/');
  list.addSubnet(addr, Number(bits), 'ipv6');
  return { name, list, v4At };
});

/** Global unicast space: anything outside it (and not embedding IPv4) is reserved. */
const GLOBAL_UNICAST_V6 = (() => {
  const list = new BlockList();
  list.addSubnet('2000::', 3, 'ipv6');
  return list;
})();

/** An address without brackets or zone index, with its family; undefined when it is not an IP address. */
function normalize(ip: string): { address: string; family: Family } | undefined {
  let address = ip.trim();
  if (address.startsWith('[') && address.endsWith(']')) address = address.slice(1, -1);
  const zone = address.indexOf('%');
  if (zone >= 0) address = address.slice(0, zone);
  const v = isIP(address);
  if (v === 0) return undefined;
  return { address: v === 4 ? address : address.toLowerCase(), family: v === 4 ? 'ipv4' : 'ipv6' };
}

function embeddedV4(address: string): { v4: string; via: string } | undefined {
  for (const e of EMBEDDING) {
    if (!e.list.check(address, 'ipv6')) continue;
    const bytes = ipaddr.IPv6.parse(address).toByteArray();
    return { v4: bytes.slice(e.v4At, e.v4At + 4).join('.'), via: e.name };
  }
  return undefined;
}

/**
 * Why an address is refused as an outbound target ('a loopback address', …), or null when it is
 * public. Something that is not an IP address at all is refused too.
 */
export function blockedReason(ip: string): string | null {
  const n = normalize(ip);
  if (!n) return 'not an IP address';
  if (n.family === 'ipv4') {
    for (const r of V4_RULES) if (r.list.check(n.address, 'ipv4')) return r.reason;
    return null;
  }
  for (const r of V6_RULES) if (r.list.check(n.address, 'ipv6')) return r.reason;
  const inner = embeddedV4(n.address);
  if (inner) {
    const reason = blockedReason(inner.v4);
    return reason === null ? null : `${reason} (${inner.via} ${inner.v4})`;
  }
  if (!GLOBAL_UNICAST_V6.check(n.address, 'ipv6')) return 'a reserved address (not global unicast)';
  return null;
}

/** True when outbound requests must not reach this address (unless the policy opens it). */
export function isBlockedAddress(ip: string): boolean {
  return blockedReason(ip) !== null;
}

const allowLists = new WeakMap<readonly string[], BlockList>();

function allowList(cidrs: readonly string[]): BlockList {
  let list = allowLists.get(cidrs);
  if (list) return list;
  list = new BlockList();
  for (const cidr of cidrs) {
    const [addr, bits] = cidr.trim().split('/');
    const n = normalize(addr);
    if (!n) throw new Error(`'${cidr}' is not a CIDR range`);
    if (bits === undefined) list.addAddress(n.address, n.family);
    else list.addSubnet(n.address, Number(bits), n.family);
  }
  allowLists.set(cidrs, list);
  return list;
}

/** Why the policy refuses this address, or null when it may be reached. */
export function refusalReason(ip: string, policy: TargetPolicy): string | null {
  const reason = blockedReason(ip);
  if (reason === null || policy.allowPrivate) return null;
  const n = normalize(ip);
  if (n && policy.allowCidrs && policy.allowCidrs.length > 0) {
    const list = allowList(policy.allowCidrs);
    if (list.check(n.address, n.family)) return null;
    const inner = n.family === 'ipv6' ? embeddedV4(n.address) : undefined;
    if (inner && list.check(inner.v4, 'ipv4')) return null;
  }
  return reason;
}

const NOT_ALLOWED = 'private targets are not allowed (CALLPLANE_ALLOW_PRIVATE_TARGETS)';

/**
 * The refusal of a name, as a tenant reads it: what the name resolved to, and why that address is
 * refused, stay in our log (hostRefusal, addressRefusal, the guarded dispatcher).
 */
export const POLICY_REFUSED = `the address policy refused the target; ${NOT_ALLOWED}`;
const refusedName = (host: string) => `${host}: ${POLICY_REFUSED}`;

/**
 * A customer URL as configured: absolute http or https, no credentials in it, and a literal IP
 * address must be one the policy allows. Names are checked when a request connects.
 */
export function checkTargetUrl(url: string, policy: TargetPolicy): { ok: true; url: URL } | { ok: false; message: string } {
  if (typeof url !== 'string' || url.trim() === '') return { ok: false, message: 'url must be an absolute http or https URL' };
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, message: `url must be an absolute http or https URL (got '${clip(url)}')` };
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    return { ok: false, message: `url must use http or https (got '${parsed.protocol.replace(/:$/, '')}')` };
  }
  if (parsed.username !== '' || parsed.password !== '') {
    return { ok: false, message: 'url must not carry credentials (user:password@); use headers instead' };
  }
  if (parsed.hostname === '') return { ok: false, message: 'url must name a host' };
  const literal = normalize(parsed.hostname);
  if (literal) {
    const reason = refusalReason(literal.address, policy);
    if (reason !== null) return { ok: false, message: `url points to ${literal.address}, ${reason}; ${NOT_ALLOWED}` };
  }
  return { ok: true, url: parsed };
}

function clip(s: string): string {
  return s.length > 200 ? `${s.slice(0, 200)}…` : s;
}

/**
 * Why the policy refuses a host (a name or an IP address) as a target, as a sentence ending in the
 * setting's name, or null. A name is resolved and refused if any of its addresses is; a name that
 * does not resolve is not refused here (it is checked again where it is used, when it is sent to).
 * A refused name's sentence does not say what it resolved to (POLICY_REFUSED; `log` hears it).
 * For targets that are not URLs: SIP registrars, proxies and outbound routes.
 */
export async function hostRefusal(host: string, policy: TargetPolicy, resolve: (hostname: string) => Promise<dns.LookupAddress[]> = systemResolve, log?: RefusalLog): Promise<string | null> {
  const literal = normalize(host);
  if (literal) {
    const reason = refusalReason(literal.address, policy);
    return reason === null ? null : `${literal.address} is ${reason}; ${NOT_ALLOWED}`;
  }
  let found: dns.LookupAddress[];
  try {
    found = await resolve(host);
  } catch {
    return null;
  }
  for (const a of found) {
    const reason = refusalReason(a.address, policy);
    if (reason !== null) {
      log?.warn({ host, address: a.address, reason }, 'target refused by the address policy');
      return refusedName(host);
    }
  }
  return null;
}

/**
 * The sentence refusing an address the policy does not allow (at send time), or null. For an
 * address a name resolved to, the sentence names the name only (the address and why go to `log`).
 */
export function addressRefusal(address: string, policy: TargetPolicy, name?: string, log?: RefusalLog): string | null {
  const reason = refusalReason(address, policy);
  if (reason === null) return null;
  if (!name || name === address) return `${address} is ${reason}; ${NOT_ALLOWED}`;
  log?.warn({ host: name, address, reason }, 'target refused by the address policy');
  return refusedName(name);
}

export interface GuardOptions {
  /** Resolves a name to all its addresses (default: the system resolver, dns.lookup with all). */
  resolve?: (hostname: string) => Promise<dns.LookupAddress[]>;
  /** Longest wait for a TCP/TLS connection (default 10 s; the caller's timeout still applies). */
  connectTimeoutMs?: number;
  /** Hears what a refused name resolved to (the error a tenant may read does not say). */
  log?: RefusalLog;
}

const systemResolve = (hostname: string) => dns.promises.lookup(hostname, { all: true, order: 'verbatim' });

/** A net/tls `lookup` that resolves once, refuses the name if any address is refused, and hands on the checked addresses. */
function guardedLookup(policy: TargetPolicy, resolve: NonNullable<GuardOptions['resolve']>, log?: RefusalLog): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then((found) => {
      for (const a of found) {
        const reason = refusalReason(a.address, policy);
        if (reason !== null) {
          const detail = `${hostname} resolves to ${a.address}, ${reason}; ${NOT_ALLOWED}`;
          log?.warn({ host: hostname, address: a.address, reason }, 'target refused by the address policy');
          throw new TargetRefusedError(refusedName(hostname), a.address, detail);
        }
      }
      const family = options.family === 4 || options.family === 'IPv4' ? 4 : options.family === 6 || options.family === 'IPv6' ? 6 : 0;
      const usable = family === 0 ? found : found.filter((a) => a.family === family);
      if (usable.length === 0) {
        throw Object.assign(new Error(`could not resolve ${hostname}`), { code: 'ENOTFOUND', hostname });
      }
      if (options.all) callback(null, usable);
      else callback(null, usable[0].address, usable[0].family);
    }).catch((err: NodeJS.ErrnoException) => callback(err, ''));
  };
}

/**
 * An undici dispatcher for customer URLs. Names are resolved by our own lookup and every address
 * must pass the policy; literal addresses are checked before connecting. Redirects are never
 * followed (undici follows none without the redirect interceptor).
 */
export function guardedDispatcher(policy: TargetPolicy, options: GuardOptions = {}): Dispatcher {
  if (policy.allowCidrs && policy.allowCidrs.length > 0) allowList(policy.allowCidrs); // a bad range fails here, not per request
  const connector = buildConnector({
    lookup: guardedLookup(policy, options.resolve ?? systemResolve, options.log),
    timeout: options.connectTimeoutMs ?? 10_000,
  });
  const connect: buildConnector.connector = (opts, callback) => {
    const literal = normalize(opts.hostname);
    if (literal) {
      const reason = refusalReason(literal.address, policy);
      if (reason !== null) {
        callback(new TargetRefusedError(`${literal.address} is ${reason}; ${NOT_ALLOWED}`, literal.address), null);
        return;
      }
    }
    connector(opts, callback);
  };
  return new Agent({ connect, keepAliveTimeout: 4_000 });
}

/** A WHATWG fetch whose requests go through the SSRF guard, for clients that take one (`openai`). */
export type GuardedFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/**
 * A fetch through guardedDispatcher(), its connection pool made on the first request and ended by
 * close() (made again if used after): what the models' and speech providers' services hand the
 * clients of organizations' own servers.
 */
export function lazyGuardedFetch(policy: TargetPolicy, options: GuardOptions = {}): { fetch: GuardedFetch; close(): Promise<void> } {
  let pool: Dispatcher | undefined;
  type Init = NonNullable<Parameters<typeof undiciFetch>[1]>;
  return {
    fetch: (input, init) => {
      pool ??= guardedDispatcher(policy, options);
      return undiciFetch(input as Parameters<typeof undiciFetch>[0], { ...(init as Init), dispatcher: pool }) as unknown as Promise<Response>;
    },
    async close() {
      const p = pool;
      pool = undefined;
      await p?.close().catch(() => {});
    },
  };
}
