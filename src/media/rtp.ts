// RTP packets (RFC 3550 §5.1): building what we send and reading what arrives. Reading is the
// network's edge: every field is checked against the packet's real length, nothing throws, and
// anything that is not a well-formed RTP version 2 packet comes back as null.
//
//  0                   1                   2                   3
//  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
// |V=2|P|X|  CC   |M|     PT      |       sequence number         |
// |                           timestamp                           |
// |           synchronization source (SSRC) identifier            |
// |            contributing source (CSRC) identifiers (CC × 32)   |
// | extension: profile (16) | length in 32-bit words (16) | data  |
// | payload ...                                   | padding | count |

/** The fixed header's length. */
export const RTP_HEADER_BYTES = 12;
/**
 * The largest packet read from the network. Voice packets are far smaller (20 ms of G.711 is
 * 172 bytes); anything above an Ethernet MTU is not ours.
 */
export const RTP_MAX_BYTES = 1500;

export interface RtpHeaderExtension {
  /** The profile-defined 16 bits (0xBEDE for RFC 8285 one-byte headers). */
  profile: number;
  /** A multiple of 4 bytes. */
  data: Buffer;
}

export interface RtpPacket {
  marker: boolean;
  payloadType: number;
  /** 16 bits, wrapping. */
  sequence: number;
  /** 32 bits unsigned, in the payload's clock (8000 per second for G.711). */
  timestamp: number;
  /** 32 bits unsigned. */
  ssrc: number;
  csrc: number[];
  extension?: RtpHeaderExtension;
  /** The payload, padding removed. */
  payload: Buffer;
  /** Padding bytes the packet carried (read) or is to carry (build; 1–255). */
  padding?: number;
}

const u16 = (n: number) => Number.isInteger(n) && n >= 0 && n <= 0xffff;
const u32 = (n: number) => Number.isInteger(n) && n >= 0 && n <= 0xffffffff;

/**
 * A packet from its fields. Throws a RangeError on values no packet can hold (our own mistakes,
 * never the network's).
 */
export function buildRtp(p: RtpPacket): Buffer {
  if (!Number.isInteger(p.payloadType) || p.payloadType < 0 || p.payloadType > 127) throw new RangeError(`payload type ${p.payloadType} is not 0-127`);
  if (!u16(p.sequence)) throw new RangeError(`sequence ${p.sequence} is not 16 bits`);
  if (!u32(p.timestamp)) throw new RangeError(`timestamp ${p.timestamp} is not 32 bits`);
  if (!u32(p.ssrc)) throw new RangeError(`SSRC ${p.ssrc} is not 32 bits`);
  if (p.csrc.length > 15 || !p.csrc.every(u32)) throw new RangeError('at most 15 CSRCs of 32 bits');
  const ext = p.extension;
  if (ext && (!u16(ext.profile) || ext.data.length % 4 !== 0 || ext.data.length / 4 > 0xffff)) throw new RangeError('the extension is a 16-bit profile and whole 32-bit words');
  const padding = p.padding ?? 0;
  if (!Number.isInteger(padding) || padding < 0 || padding > 255) throw new RangeError(`padding ${padding} is not 0-255`);
  const headerLength = RTP_HEADER_BYTES + 4 * p.csrc.length + (ext ? 4 + ext.data.length : 0);
  const out = Buffer.alloc(headerLength + p.payload.length + padding);
  out[0] = 0x80 | (padding ? 0x20 : 0) | (ext ? 0x10 : 0) | p.csrc.length;
  out[1] = (p.marker ? 0x80 : 0) | p.payloadType;
  out.writeUInt16BE(p.sequence, 2);
  out.writeUInt32BE(p.timestamp, 4);
  out.writeUInt32BE(p.ssrc, 8);
  let o = RTP_HEADER_BYTES;
  for (const c of p.csrc) { out.writeUInt32BE(c, o); o += 4; }
  if (ext) {
    out.writeUInt16BE(ext.profile, o);
    out.writeUInt16BE(ext.data.length / 4, o + 2);
    ext.data.copy(out, o + 4);
    o += 4 + ext.data.length;
  }
  p.payload.copy(out, o);
  if (padding) out[out.length - 1] = padding;
  return out;
}

/**
 * A packet from the network, or null: shorter than a header, longer than RTP_MAX_BYTES, not
 * version 2, CSRCs, extension or padding reaching past its end, or a payload type in 72–76 (RTCP
 * sharing the port, RFC 5761). The payload is a view into `buf`.
 */
export function parseRtp(buf: Uint8Array): RtpPacket | null {
  if (!(buf instanceof Uint8Array) || buf.length < RTP_HEADER_BYTES || buf.length > RTP_MAX_BYTES) return null;
  const b = Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.length);
  const first = b[0];
  if (first >> 6 !== 2) return null;
  const payloadType = b[1] & 0x7f;
  if (payloadType >= 72 && payloadType <= 76) return null;
  const cc = first & 0x0f;
  let o = RTP_HEADER_BYTES + 4 * cc;
  if (o > b.length) return null;
  const csrc: number[] = [];
  for (let i = 0; i < cc; i++) csrc.push(b.readUInt32BE(RTP_HEADER_BYTES + 4 * i));
  let extension: RtpHeaderExtension | undefined;
  if (first & 0x10) {
    if (o + 4 > b.length) return null;
    const words = b.readUInt16BE(o + 2);
    if (o + 4 + 4 * words > b.length) return null;
    extension = { profile: b.readUInt16BE(o), data: b.subarray(o + 4, o + 4 + 4 * words) };
    o += 4 + 4 * words;
  }
  let end = b.length;
  let padding: number | undefined;
  if (first & 0x20) {
    padding = b[b.length - 1];
    // The count includes itself, so it is at least 1, and it cannot eat into the header.
    if (padding === 0 || o + padding > b.length) return null;
    end -= padding;
  }
  return {
    marker: (b[1] & 0x80) !== 0,
    payloadType,
    sequence: b.readUInt16BE(2),
    timestamp: b.readUInt32BE(4),
    ssrc: b.readUInt32BE(8),
    csrc,
    ...(extension ? { extension } : {}),
    payload: b.subarray(o, end),
    ...(padding ? { padding } : {}),
  };
}

/** a − b for 16-bit sequence numbers, in −32768…32767 (how far a is ahead of b, across the wrap). */
export function seqDiff(a: number, b: number): number {
  return (((a - b) & 0xffff) << 16) >> 16;
}
