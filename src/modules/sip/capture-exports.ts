// The export formats of GET /api/v2/sip/captures beyond json and text: `pcap`, a libpcap file
// (what tcpdump writes; Wireshark and tshark open it) with one packet per captured message, and
// `transaction`, the messages grouped by SIP transaction. Pure functions over captured messages.
import net from 'node:net';
import { parseCSeq, parseMessage, parseVia, splitList } from '../../sip/message.ts';

/** One captured message as the captures operation presents it. */
export interface CapturedMessage {
  /** Epoch millis. */
  timestamp: number;
  direction: 'in' | 'out';
  transport: string;
  /** `host:port`, IPv6 hosts in brackets. */
  source: string;
  destination: string;
  firstLine: string;
  message: string;
}

// ── pcap ────────────────────────────────────────────────────────────────────

/** libpcap's magic for microsecond timestamps, written little-endian. */
const PCAP_MAGIC = 0xa1b2c3d4;
const LINKTYPE_ETHERNET = 1;
const SNAPLEN = 262_144;
const ETHERTYPE_IPV4 = 0x0800;
const ETHERTYPE_IPV6 = 0x86dd;
const PROTO_TCP = 6;
const PROTO_UDP = 17;
/** Locally administered MAC addresses: the capture knows no link layer. */
const MAC_LOCAL = Buffer.from([0x02, 0, 0, 0, 0, 0x01]);
const MAC_REMOTE = Buffer.from([0x02, 0, 0, 0, 0, 0x02]);
/** Stands in for an address that is a host name, not an IP (TEST-NET-1, RFC 5737). */
const UNKNOWN_V4 = '192.0.2.1';

interface Endpoint { ip: string; port: number }

/** `host:port` or `[v6]:port` as an IP and port; a host name is replaced by a documentation address. */
function endpointOf(text: string): Endpoint {
  const m = /^\[(.+)\]:(\d+)$/.exec(text) ?? /^([^:]+):(\d+)$/.exec(text);
  const host = m?.[1] ?? text;
  const port = Number(m?.[2] ?? 0) & 0xffff;
  return { ip: net.isIP(host) ? host : UNKNOWN_V4, port };
}

function ipv4Bytes(ip: string): Buffer {
  return Buffer.from(ip.split('.').map(Number));
}

function ipv6Bytes(ip: string): Buffer {
  let text = ip.split('%')[0];
  // A trailing dotted IPv4 part (::ffff:1.2.3.4) as two hex groups.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const b = ipv4Bytes(v4[1]);
    text = `${text.slice(0, -v4[1].length)}${((b[0] << 8) | b[1]).toString(16)}:${((b[2] << 8) | b[3]).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g || '0', 16) & 0xffff, i * 2));
  return out;
}

/** The address as IPv6 bytes (an IPv4 one IPv4-mapped), for a packet whose other end is IPv6. */
function asV6(ip: string): Buffer {
  return ipv6Bytes(net.isIPv6(ip) ? ip : `::ffff:${ip}`);
}

/** The Internet checksum (RFC 1071) over the buffers, as if concatenated. */
function checksum(...parts: Buffer[]): number {
  let sum = 0;
  let odd: number | undefined;
  for (const part of parts) {
    for (const byte of part) {
      if (odd === undefined) odd = byte;
      else { sum += (odd << 8) | byte; odd = undefined; }
    }
  }
  if (odd !== undefined) sum += odd << 8;
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

/**
 * A libpcap file of the messages: the global header, then one Ethernet/IP/UDP-or-TCP packet per
 * message, from its source to its destination, stamped with its capture time. IPv4 when both ends
 * are IPv4, else IPv6 (an IPv4 end IPv4-mapped). TCP and TLS messages are TCP segments with
 * sequence numbers continuing per direction (TLS ones are shown decrypted, as we captured them);
 * checksums are computed, so Wireshark reports none as bad.
 */
export function toPcap(messages: readonly CapturedMessage[]): Buffer {
  const header = Buffer.alloc(24);
  header.writeUInt32LE(PCAP_MAGIC, 0);
  header.writeUInt16LE(2, 4);
  header.writeUInt16LE(4, 6);
  header.writeInt32LE(0, 8);
  header.writeUInt32LE(0, 12);
  header.writeUInt32LE(SNAPLEN, 16);
  header.writeUInt32LE(LINKTYPE_ETHERNET, 20);
  const out: Buffer[] = [header];
  /** Next TCP sequence number per direction of a connection (`src>dst`). */
  const seqs = new Map<string, number>();
  let ipId = 1;

  for (const m of messages) {
    const src = endpointOf(m.source);
    const dst = endpointOf(m.destination);
    const tcp = m.transport.toUpperCase() !== 'UDP';
    const v6 = net.isIPv6(src.ip) || net.isIPv6(dst.ip);
    const l4Len = tcp ? 20 : 8;
    const ipLen = v6 ? 40 : 20;
    let payload = Buffer.from(m.message, 'utf8');
    // An IPv4 packet holds at most 65,535 bytes, an IPv6 payload as many: longer captures are cut.
    const room = 65_535 - l4Len - (v6 ? 0 : ipLen);
    if (payload.length > room) payload = payload.subarray(0, room);

    const l4 = Buffer.alloc(l4Len);
    l4.writeUInt16BE(src.port, 0);
    l4.writeUInt16BE(dst.port, 2);
    if (tcp) {
      const key = `${m.source}>${m.destination}`;
      const back = `${m.destination}>${m.source}`;
      const seq = seqs.get(key) ?? 1;
      seqs.set(key, (seq + payload.length) >>> 0);
      l4.writeUInt32BE(seq >>> 0, 4);
      l4.writeUInt32BE((seqs.get(back) ?? 1) >>> 0, 8);
      l4.writeUInt8(5 << 4, 12); // data offset: 5 words
      l4.writeUInt8(0x18, 13); // PSH, ACK
      l4.writeUInt16BE(65_535, 14);
    } else {
      l4.writeUInt16BE(l4Len + payload.length, 4);
    }

    let ip: Buffer;
    const proto = tcp ? PROTO_TCP : PROTO_UDP;
    const segmentLength = l4Len + payload.length;
    if (v6) {
      const s = asV6(src.ip);
      const d = asV6(dst.ip);
      ip = Buffer.alloc(40);
      ip.writeUInt32BE(0x60000000, 0);
      ip.writeUInt16BE(segmentLength, 4);
      ip.writeUInt8(proto, 6);
      ip.writeUInt8(64, 7);
      s.copy(ip, 8);
      d.copy(ip, 24);
      const pseudo = Buffer.alloc(40);
      s.copy(pseudo, 0);
      d.copy(pseudo, 16);
      pseudo.writeUInt32BE(segmentLength, 32);
      pseudo.writeUInt8(proto, 39);
      l4.writeUInt16BE(checksum(pseudo, l4, payload) || 0xffff, tcp ? 16 : 6);
    } else {
      const s = ipv4Bytes(src.ip);
      const d = ipv4Bytes(dst.ip);
      ip = Buffer.alloc(20);
      ip.writeUInt8(0x45, 0);
      ip.writeUInt16BE(20 + segmentLength, 2);
      ip.writeUInt16BE(ipId++ & 0xffff, 4);
      ip.writeUInt16BE(0x4000, 6); // don't fragment
      ip.writeUInt8(64, 8);
      ip.writeUInt8(proto, 9);
      s.copy(ip, 12);
      d.copy(ip, 16);
      ip.writeUInt16BE(checksum(ip), 10);
      const pseudo = Buffer.alloc(12);
      s.copy(pseudo, 0);
      d.copy(pseudo, 4);
      pseudo.writeUInt8(proto, 9);
      pseudo.writeUInt16BE(segmentLength, 10);
      l4.writeUInt16BE(checksum(pseudo, l4, payload) || 0xffff, tcp ? 16 : 6);
    }

    const ethernet = Buffer.alloc(14);
    (m.direction === 'out' ? MAC_REMOTE : MAC_LOCAL).copy(ethernet, 0);
    (m.direction === 'out' ? MAC_LOCAL : MAC_REMOTE).copy(ethernet, 6);
    ethernet.writeUInt16BE(v6 ? ETHERTYPE_IPV6 : ETHERTYPE_IPV4, 12);

    const length = ethernet.length + ip.length + l4.length + payload.length;
    const record = Buffer.alloc(16);
    record.writeUInt32LE(Math.floor(m.timestamp / 1000), 0);
    record.writeUInt32LE((m.timestamp % 1000) * 1000, 4);
    record.writeUInt32LE(length, 8);
    record.writeUInt32LE(length, 12);
    out.push(record, ethernet, ip, l4, payload);
  }
  return Buffer.concat(out);
}

// ── transactions ────────────────────────────────────────────────────────────

export interface CapturedTransaction {
  /** The top Via's branch (null when the message carries none). */
  branch: string | null;
  /** The CSeq method of the transaction (INVITE for the ACK of a non-2xx answer, RFC 3261 §17.2.3). */
  method: string | null;
  /** The CSeq number. */
  cseq: number | null;
  /** The last final status (>= 200) answered in it, null when none was captured. */
  finalStatus: number | null;
  firstAt: number;
  lastAt: number;
  messages: CapturedMessage[];
}

/** The transaction key of a message: top Via branch and CSeq method, from its text. */
function transactionOf(m: CapturedMessage): { branch: string | null; method: string | null; seq: number | null; status?: number } {
  try {
    const msg = parseMessage(Buffer.from(m.message, 'utf8'));
    const top = msg.headers.get('via');
    const via = top ? parseVia(splitList(top)[0] ?? top) : undefined;
    const cseqText = msg.headers.get('cseq');
    const cseq = cseqText ? parseCSeq(cseqText) : undefined;
    return {
      branch: via?.params.branch ?? null,
      method: cseq?.method ?? null,
      seq: cseq?.seq ?? null,
      ...(msg.kind === 'response' ? { status: msg.status } : {}),
    };
  } catch {
    return { branch: null, method: null, seq: null };
  }
}

/**
 * The messages grouped by SIP transaction (RFC 3261 §17: the top Via's branch and the CSeq
 * method; an ACK with the branch of an INVITE belongs to that INVITE's transaction, as it
 * acknowledges a non-2xx answer; the ACK of a 2xx has a branch of its own). Retransmissions stay
 * in their transaction. Transactions are in the order their first message was captured; a message
 * that cannot be parsed is a transaction of its own.
 */
export function toTransactions(messages: readonly CapturedMessage[]): CapturedTransaction[] {
  const byKey = new Map<string, CapturedTransaction>();
  const list: CapturedTransaction[] = [];
  messages.forEach((m, i) => {
    const t = transactionOf(m);
    let method = t.method;
    if (method === 'ACK' && t.branch !== null && byKey.has(`${t.branch}|INVITE`)) method = 'INVITE';
    const key = t.branch === null || method === null ? `#${i}` : `${t.branch}|${method}`;
    let tx = byKey.get(key);
    if (!tx) {
      tx = { branch: t.branch, method, cseq: t.seq, finalStatus: null, firstAt: m.timestamp, lastAt: m.timestamp, messages: [] };
      byKey.set(key, tx);
      list.push(tx);
    }
    tx.messages.push(m);
    tx.lastAt = Math.max(tx.lastAt, m.timestamp);
    if (t.status !== undefined && t.status >= 200) tx.finalStatus = t.status;
  });
  return list;
}
