// DTMF as RTP telephone-events (RFC 4733 §2.3): what a sender emits for one key press, and a
// receiver that turns the packets of a call into each key pressed, once.
//
// Payload (4 bytes): event (8 bits: 0-9, * = 10, # = 11, A-D = 12-15), E (end of event),
// R (reserved), volume (6 bits, −dBm0), duration (16 bits, in timestamp units since the event's
// start). Every packet of one event carries the same RTP timestamp: the event's start.

/** The keys in event-code order: the code of a key is its index. */
export const DTMF_KEYS = '0123456789*#ABCD';

/** The event code of a key ('0'-'9', '*', '#', 'A'-'D', lower case too), or null. */
export function dtmfEventCode(key: string): number | null {
  if (key.length !== 1) return null;
  const i = DTMF_KEYS.indexOf(key.toUpperCase());
  return i < 0 ? null : i;
}

export interface DtmfPacket {
  /** Set on the first packet of the event (RFC 4733 §2.5.1.1). */
  marker: boolean;
  /** The telephone-event payload. */
  payload: Buffer;
  /** An end packet (E bit): the last three packets, repeats of one another. */
  end: boolean;
}

export interface DtmfOptions {
  /** How long the key is held, ms (default 100; at least one packet interval). */
  durationMs?: number;
  /** Volume in −dBm0, 0-63 (default 10). */
  volume?: number;
  /** The interval between packets, ms (default 20, the audio's ptime). */
  packetMs?: number;
  /** The payload's clock (telephone-event/8000). */
  clockRate?: number;
}

function payloadOf(code: number, end: boolean, volume: number, duration: number): Buffer {
  const b = Buffer.alloc(4);
  b[0] = code;
  b[1] = (end ? 0x80 : 0) | (volume & 0x3f);
  b.writeUInt16BE(Math.min(0xffff, duration), 2);
  return b;
}

/**
 * The packets a sender emits for one key press, one per packet interval, all with the timestamp
 * of the interval the event starts in and each with the next sequence number: updates with the
 * duration so far (the first one marked), then three end packets with the full duration.
 * Throws a RangeError for a key that is not a DTMF key.
 */
export function encodeDtmf(key: string, o: DtmfOptions = {}): DtmfPacket[] {
  const code = dtmfEventCode(key);
  if (code === null) throw new RangeError(`'${key}' is not a DTMF key (0-9, *, #, A-D)`);
  const packetMs = o.packetMs ?? 20;
  const rate = o.clockRate ?? 8000;
  const volume = Math.max(0, Math.min(63, Math.round(o.volume ?? 10)));
  const step = (rate * packetMs) / 1000;
  const count = Math.max(1, Math.ceil(Math.max(packetMs, Math.min(o.durationMs ?? 100, 8000)) / packetMs));
  const total = count * step;
  const packets: DtmfPacket[] = [];
  for (let i = 1; i < count; i++) packets.push({ marker: i === 1, payload: payloadOf(code, false, volume, i * step), end: false });
  for (let i = 0; i < 3; i++) packets.push({ marker: packets.length === 0, payload: payloadOf(code, true, volume, total), end: true });
  return packets;
}

/** What the receiver reads of a packet: the RTP fields an event is keyed on, and its payload. */
export interface DtmfInput {
  timestamp: number;
  marker: boolean;
  payload: Uint8Array;
}

interface EventSeen { code: number; ended: boolean; duration: number }

/** How many recent events are remembered to recognise their late repeats. */
const REMEMBERED = 64;
/** A segment this long means the event may go on in a new segment (RFC 4733 §2.5.1.3). */
const SEGMENT_LIMIT = 0xf000;

/**
 * Turns one stream's telephone-event packets into key presses. An event is known by its RTP
 * timestamp: its first packet to arrive (whichever it is, so a lost start still counts) gives the
 * key; every other packet of it — updates, the repeated end packets, duplicates, packets reordered
 * behind the next event — gives nothing. A long event split into segments (a new timestamp,
 * no marker, the same key, its previous segment near the 16-bit duration limit and not ended) is
 * one press.
 */
export class DtmfReceiver {
  private readonly events = new Map<number, EventSeen>();
  private last: EventSeen | undefined;

  /** The key this packet starts, or null (a repeat, an unknown event, a short payload). */
  push(p: DtmfInput): string | null {
    if (p.payload.length < 4) return null;
    const code = p.payload[0];
    const ended = (p.payload[1] & 0x80) !== 0;
    const duration = (p.payload[2] << 8) | p.payload[3];
    const ts = p.timestamp >>> 0;
    const seen = this.events.get(ts);
    if (seen) {
      seen.ended ||= ended;
      seen.duration = Math.max(seen.duration, duration);
      return null;
    }
    if (code >= DTMF_KEYS.length) return null; // flash (16) and tones: not keys
    const event: EventSeen = { code, ended, duration };
    const last = this.last;
    const continued = !p.marker && last !== undefined && last.code === code && !last.ended && last.duration >= SEGMENT_LIMIT;
    this.events.set(ts, event);
    if (this.events.size > REMEMBERED) this.events.delete(this.events.keys().next().value!);
    this.last = event;
    return continued ? null : DTMF_KEYS[code];
  }
}
