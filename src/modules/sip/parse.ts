// The text formats the SIP API takes: outbound routes (`host[:port][;transport=…][;proxyAddress=…]`),
// addresses of record, `host[:port]` proxies, and whitelist entries (an address or CIDR range).
// Each check answers a message naming the part that is wrong, for a 400.
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import type { SipTransportName } from '../../db/types.ts';

export type Checked<T> = { ok: true; value: T } | { ok: false; message: string };

const ok = <T>(value: T): Checked<T> => ({ ok: true, value });
const bad = <T>(message: string): Checked<T> => ({ ok: false, message });

/** A DNS name: dot-separated labels of letters, digits and inner hyphens (a trailing dot is dropped). */
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

export function isHostName(host: string): boolean {
  const h = host.endsWith('.') ? host.slice(0, -1) : host;
  if (h.length === 0 || h.length > 253) return false;
  const labels = h.split('.');
  // All-numeric dotted strings that are not valid IPv4 addresses (999.1.1.1) are not names either.
  if (labels.every((l) => /^\d+$/.test(l))) return false;
  return labels.every((l) => LABEL.test(l));
}

export interface HostPort {
  /** A lowercased name or an IP address (IPv6 without brackets). */
  host: string;
  port?: number;
}

/** `host`, `host:port`, `[v6]`, `[v6]:port` or a bare IPv6 address. */
export function parseHostPort(text: string, field: string): Checked<HostPort> {
  const t = text.trim();
  if (t === '') return bad(`${field} must not be empty`);
  let host: string;
  let portText: string | undefined;
  if (t.startsWith('[')) {
    const close = t.indexOf(']');
    if (close < 0) return bad(`${field} has an unclosed [ in '${t}'`);
    host = t.slice(1, close);
    const rest = t.slice(close + 1);
    if (net.isIPv6(host) === false) return bad(`${field} has '${host}' in brackets, which is not an IPv6 address`);
    if (rest !== '') {
      if (!rest.startsWith(':')) return bad(`${field} has '${rest}' after the IPv6 address; expected :port`);
      portText = rest.slice(1);
    }
  } else if (net.isIPv6(t)) {
    host = t;
  } else {
    const colon = t.lastIndexOf(':');
    if (colon >= 0) {
      host = t.slice(0, colon);
      portText = t.slice(colon + 1);
      if (host.includes(':')) return bad(`${field} '${t}': write an IPv6 address with a port as [address]:port`);
    } else host = t;
    if (host === '') return bad(`${field} '${t}' has no host`);
    if (net.isIPv4(host)) { /* fine */ } else if (/^[\d.]+$/.test(host)) {
      return bad(`${field} host '${host}' is not a valid IPv4 address`);
    } else if (!isHostName(host)) {
      return bad(`${field} host '${host}' is not a valid host name or IP address`);
    }
  }
  const out: HostPort = { host: net.isIPv6(host) ? ipaddr.parse(host).toString() : host.toLowerCase().replace(/\.$/, '') };
  if (portText !== undefined) {
    const port = parsePort(portText);
    if (port === undefined) return bad(`${field} port '${portText}' must be a number from 1 to 65535`);
    out.port = port;
  }
  return ok(out);
}

function parsePort(text: string): number | undefined {
  if (!/^\d{1,5}$/.test(text)) return undefined;
  const n = Number(text);
  return n >= 1 && n <= 65535 ? n : undefined;
}

export const formatHost = (host: string) => (net.isIPv6(host) ? `[${host}]` : host);
export const formatHostPort = (hp: HostPort) => `${formatHost(hp.host)}${hp.port ? `:${hp.port}` : ''}`;

export const defaultPort = (transport: SipTransportName) => (transport === 'TLS' ? 5061 : 5060);

export interface OutboundRoute {
  host: string;
  port?: number;
  transport: SipTransportName;
  /** Whether the route text named its transport (else UDP by default). */
  transportGiven: boolean;
  proxy?: HostPort;
}

const ROUTE_FORMAT = 'host[:port][;transport=udp|tcp|tls][;proxyAddress=host[:port]]';

/**
 * `host[:port][;transport=tcp|udp][;proxyAddress=host[:port]]`. Parameter names are
 * case-insensitive, each may appear once, in any order; `tls` is accepted besides the contract's
 * udp and tcp.
 */
export function parseOutboundRoute(text: unknown): Checked<OutboundRoute> {
  if (typeof text !== 'string') return bad('route must be a string');
  const t = text.trim();
  if (t === '') return bad('route must not be empty');
  if (t.length > 500) return bad('route must be at most 500 characters long');
  if (/\s/.test(t)) return bad(`route must not contain spaces (expected ${ROUTE_FORMAT})`);
  if (/^sips?:/i.test(t)) return bad(`route is not a SIP URI: drop the '${t.slice(0, t.indexOf(':') + 1)}' (expected ${ROUTE_FORMAT})`);
  const [hostPart, ...params] = t.split(';');
  if (hostPart.includes('@')) return bad(`route host '${hostPart}' must not carry a user part (expected ${ROUTE_FORMAT})`);
  const hp = parseHostPort(hostPart, 'route');
  if (!hp.ok) return hp;
  const route: OutboundRoute = { host: hp.value.host, port: hp.value.port, transport: 'UDP', transportGiven: false };
  const seen = new Set<string>();
  for (const p of params) {
    if (p === '') return bad(`route has an empty parameter (a stray ';')`);
    const eq = p.indexOf('=');
    if (eq < 0) return bad(`route parameter '${p}' has no value (expected name=value)`);
    const name = p.slice(0, eq).toLowerCase();
    const value = p.slice(eq + 1);
    if (seen.has(name)) return bad(`route parameter '${p.slice(0, eq)}' is given twice`);
    seen.add(name);
    if (name === 'transport') {
      const v = value.toUpperCase();
      if (v !== 'UDP' && v !== 'TCP' && v !== 'TLS') return bad(`route transport '${value}' must be udp, tcp or tls`);
      route.transport = v;
      route.transportGiven = true;
    } else if (name === 'proxyaddress') {
      if (value.includes('@') || /^sips?:/i.test(value)) return bad(`route proxyAddress '${value}' must be host[:port]`);
      const proxy = parseHostPort(value, 'route proxyAddress');
      if (!proxy.ok) return proxy;
      route.proxy = proxy.value;
    } else {
      return bad(`route parameter '${p.slice(0, eq)}' is not known (expected ${ROUTE_FORMAT})`);
    }
  }
  return ok(route);
}

/** The form duplicates are compared in: host:port;transport=…[;proxyAddress=host:port], defaults filled in. */
export function routeKey(r: OutboundRoute): string {
  const port = r.port ?? defaultPort(r.transport);
  const proxy = r.proxy ? `;proxyAddress=${formatHost(r.proxy.host)}:${r.proxy.port ?? defaultPort(r.transport)}` : '';
  return `${formatHost(r.host)}:${port};transport=${r.transport.toLowerCase()}${proxy}`;
}

export interface Aor {
  user: string;
  /** Lowercased name or IP address (IPv6 without brackets). */
  host: string;
  port?: number;
  /** sip:user@host[:port] */
  key: string;
}

/** What the user part of a SIP URI may hold (RFC 3261 unreserved, user-unreserved and %-escapes). */
const SIP_USER = /^(?:[A-Za-z0-9\-_.!~*'()&=+$,;?/]|%[0-9A-Fa-f]{2})+$/;

export function isSipUser(user: string): boolean {
  return user.length <= 128 && SIP_USER.test(user);
}

/** `sip:user@host[:port]` or `user@host[:port]` (read as sip:); no parameters. */
export function parseAor(text: string, field = 'aor'): Checked<Aor> {
  const t = text.trim();
  const example = `${field} must be a SIP address such as sip:1001@pbx.example.com`;
  if (t === '') return bad(`${field} must not be empty`);
  if (t.length > 300) return bad(`${field} must be at most 300 characters long`);
  let rest = t;
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(t);
  if (scheme) {
    const s = scheme[1].toLowerCase();
    if (s === 'sips') return bad(`${field} must be a sip: URI (sips: is not supported; use transport TLS)`);
    if (s !== 'sip') return bad(`${field} must be a sip: URI, not ${s}:`);
    rest = t.slice(scheme[0].length);
  }
  if (/[;?<>\s"]/.test(rest)) return bad(`${example}, without parameters, headers or spaces`);
  const at = rest.lastIndexOf('@');
  if (at < 0) return bad(`${example} (the user part is missing)`);
  const user = rest.slice(0, at);
  if (user === '') return bad(`${example} (the user part is empty)`);
  if (user.includes(':')) return bad(`${field} must not carry a password`);
  if (!isSipUser(user)) return bad(`${field} user part '${user}' has characters a SIP user cannot have`);
  const hp = parseHostPort(rest.slice(at + 1), `${field}`);
  if (!hp.ok) return hp;
  const key = `sip:${user}@${formatHostPort(hp.value)}`;
  return ok({ user, host: hp.value.host, port: hp.value.port, key });
}

export interface WhitelistEntry {
  /** Normalised: an address (IPv4, or compressed lowercase IPv6) or network/prefix. */
  ip: string;
  family: 'ipv4' | 'ipv6';
  /** The network address, and the prefix length (32/128 for a single address). */
  address: string;
  prefix: number;
}

/**
 * An IPv4 or IPv6 address, optionally with a /prefix. A range is stored by its network address
 * (10.1.2.3/8 → 10.0.0.0/8), a /32 or /128 as the bare address, and an IPv4-mapped IPv6 address
 * as the IPv4 address it maps (inbound packets are seen that way).
 */
export function parseWhitelistIp(text: unknown, field = 'ip'): Checked<WhitelistEntry> {
  if (typeof text !== 'string') return bad(`${field} must be a string`);
  const t = text.trim();
  if (t === '') return bad(`${field} must not be empty`);
  const slash = t.indexOf('/');
  const addrText = slash < 0 ? t : t.slice(0, slash);
  const family = net.isIP(addrText);
  if (family === 0) return bad(`${field} '${t}' is not an IPv4 or IPv6 address (optionally with a /prefix, such as 203.0.113.0/24)`);
  let addr = ipaddr.parse(addrText);
  let prefix = family === 4 ? 32 : 128;
  if (slash >= 0) {
    const bits = t.slice(slash + 1);
    if (!/^\d{1,3}$/.test(bits) || Number(bits) > prefix) {
      return bad(`${field} prefix '/${bits}' must be a number from 0 to ${prefix}`);
    }
    prefix = Number(bits);
  }
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) {
    addr = (addr as ipaddr.IPv6).toIPv4Address();
    prefix = Math.max(0, prefix - 96);
    if (slash >= 0 && Number(t.slice(slash + 1)) < 96) return bad(`${field} '${t}': an IPv4-mapped range needs a prefix of at least /96`);
  }
  const kind = addr.kind();
  const full = kind === 'ipv4' ? 32 : 128;
  const network = prefix === full ? addr
    : kind === 'ipv4' ? ipaddr.IPv4.networkAddressFromCIDR(`${addr.toString()}/${prefix}`)
      : ipaddr.IPv6.networkAddressFromCIDR(`${addr.toString()}/${prefix}`);
  const address = network.toString();
  return ok({ ip: prefix === full ? address : `${address}/${prefix}`, family: kind, address, prefix });
}

/** The widest range a whitelist entry may be: an IPv4 /24 (256 addresses) or an IPv6 /48 (one site). */
export const WHITELIST_MIN_PREFIX = { ipv4: 24, ipv6: 48 } as const;

/**
 * Why an organization may not whitelist this entry, or null. The whitelist admits calls to the
 * organization from a trunk's addresses: wider than a /24 (IPv4) or /48 (IPv6) it no longer names a
 * trunk but a provider's or the whole internet's space. Ranges that are never the source of a
 * packet (unspecified, multicast, reserved and broadcast) are refused; loopback (this machine)
 * only when `loopbackAllowed` says the address policy opens it (development and tests).
 */
export function whitelistRefusal(e: WhitelistEntry, loopbackAllowed: (address: string) => boolean, field = 'ip'): string | null {
  const min = WHITELIST_MIN_PREFIX[e.family];
  if (e.prefix < min) {
    return `${field} '${e.ip}' covers too many addresses: a whitelist entry may be at most a /${min} range (${e.family === 'ipv4' ? 'IPv4' : 'IPv6'}); list your trunk's addresses or ranges one by one`;
  }
  // With these prefixes a range overlaps one of the special blocks (all /8 or wider) only by starting in it.
  const never = e.family === 'ipv4'
    ? (e.address.startsWith('0.') ? 'the unspecified ("this network") block' : Number(e.address.split('.')[0]) >= 224 ? 'multicast, reserved or broadcast space' : null)
    : (e.address === '::' ? 'the unspecified address' : ipaddr.IPv6.parse(e.address).toByteArray()[0] === 0xff ? 'multicast space' : null);
  if (never) return `${field} '${e.ip}' is in ${never}, which never sends calls`;
  const loopback = e.family === 'ipv4' ? e.address.startsWith('127.') : e.address === '::1';
  if (loopback) {
    const last = e.family === 'ipv4' && e.prefix < 32 ? ipaddr.IPv4.broadcastAddressFromCIDR(`${e.address}/${e.prefix}`).toString() : e.address;
    if (!loopbackAllowed(e.address) || !loopbackAllowed(last)) {
      return `${field} '${e.ip}' is a loopback address (this machine); it may be whitelisted only where CALLPLANE_ALLOW_PRIVATE_TARGETS opens it`;
    }
  }
  return null;
}

/** A BlockList holding the entries, for matching a peer's address. */
export function whitelistMatcher(entries: Iterable<string>): net.BlockList {
  const list = new net.BlockList();
  for (const raw of entries) {
    const e = parseWhitelistIp(raw);
    if (!e.ok) continue;
    if (e.value.prefix === (e.value.family === 'ipv4' ? 32 : 128)) list.addAddress(e.value.address, e.value.family);
    else list.addSubnet(e.value.address, e.value.prefix, e.value.family);
  }
  return list;
}

/** Whether `address` (as a socket reports it; IPv4-mapped IPv6 is read as IPv4) is in the list. */
export function whitelisted(list: net.BlockList, address: string): boolean {
  let a = address;
  if (net.isIPv6(a)) {
    const parsed = ipaddr.parse(a) as ipaddr.IPv6;
    if (parsed.isIPv4MappedAddress()) a = parsed.toIPv4Address().toString();
  }
  const family = net.isIP(a);
  if (family === 0) return false;
  return list.check(a, family === 4 ? 'ipv4' : 'ipv6');
}
