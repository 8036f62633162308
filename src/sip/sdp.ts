// SDP (RFC 4566) for our calls: the audio offer we send (PCMU, PCMA, telephone-event on an RTP
// port we bind), the few facts we read from an answer, and the choice of codec both ends share
// (negotiateAudio), which is what the media layer (src/media/) is opened with.
import crypto from 'node:crypto';
import net from 'node:net';

export interface Codec { pt: number; name: string; rate: number; fmtp?: string }

/** What we offer, in order of preference. */
export const OFFER_CODECS: readonly Codec[] = [
  { pt: 0, name: 'PCMU', rate: 8000 },
  { pt: 8, name: 'PCMA', rate: 8000 },
  { pt: 101, name: 'telephone-event', rate: 8000, fmtp: '0-16' },
];

export interface OfferOptions {
  /** The address the far end sends RTP to (ours). */
  address: string;
  port: number;
  sessionId?: string;
  version?: number;
  codecs?: readonly Codec[];
  direction?: 'sendrecv' | 'sendonly' | 'recvonly' | 'inactive';
}

export function buildOffer(o: OfferOptions): string {
  const codecs = o.codecs ?? OFFER_CODECS;
  const ip = net.isIPv6(o.address) ? 'IP6' : 'IP4';
  const id = o.sessionId ?? String(crypto.randomInt(1, 2 ** 47));
  const lines = [
    'v=0',
    `o=callplane ${id} ${o.version ?? 1} IN ${ip} ${o.address}`,
    's=callplane',
    `c=IN ${ip} ${o.address}`,
    't=0 0',
    `m=audio ${o.port} RTP/AVP ${codecs.map((c) => c.pt).join(' ')}`,
    ...codecs.flatMap((c) => [`a=rtpmap:${c.pt} ${c.name}/${c.rate}`, ...(c.fmtp ? [`a=fmtp:${c.pt} ${c.fmtp}`] : [])]),
    'a=ptime:20',
    `a=${o.direction ?? 'sendrecv'}`,
  ];
  return lines.join('\r\n') + '\r\n';
}

export interface SdpAudio {
  /** Where the far end wants RTP (media-level c= over session-level). */
  address?: string;
  port: number;
  codecs: Codec[];
  direction: 'sendrecv' | 'sendonly' | 'recvonly' | 'inactive';
}

/** The first audio stream of an SDP body; null when there is none (or it is not SDP). */
export function parseSdp(text: string): SdpAudio | null {
  const lines = text.split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
  if (!lines[0]?.startsWith('v=')) return null;
  let sessionAddress: string | undefined;
  let audio: SdpAudio | null = null;
  let inAudio = false;
  /** Past the first m= line: c= and a= lines belong to a media section, not the session. */
  let inMedia = false;
  let sessionDirection: SdpAudio['direction'] = 'sendrecv';
  const staticNames: Record<number, Codec> = { 0: { pt: 0, name: 'PCMU', rate: 8000 }, 8: { pt: 8, name: 'PCMA', rate: 8000 }, 9: { pt: 9, name: 'G722', rate: 8000 }, 18: { pt: 18, name: 'G729', rate: 8000 } };
  for (const line of lines) {
    const type = line[0];
    const value = line.slice(2);
    if (type === 'm') {
      if (audio) break; // only the first audio stream
      inMedia = true;
      const m = /^audio\s+(\d+)(?:\/\d+)?\s+\S+\s*(.*)$/.exec(value);
      inAudio = Boolean(m);
      if (m) {
        audio = {
          port: Number(m[1]), direction: sessionDirection,
          codecs: m[2].split(/\s+/).filter(Boolean).map(Number).filter(Number.isInteger).map((pt) => staticNames[pt] ?? { pt, name: '', rate: 8000 }),
        };
      }
      continue;
    }
    if (type === 'c') {
      const addr = /^IN\s+IP[46]\s+([^\s/]+)/.exec(value)?.[1];
      if (audio && inAudio) audio.address = addr;
      else if (!inMedia) sessionAddress = addr;
      continue;
    }
    if (type === 'a') {
      if (/^(sendrecv|sendonly|recvonly|inactive)$/.test(value)) {
        if (audio && inAudio) audio.direction = value as SdpAudio['direction'];
        else if (!inMedia) sessionDirection = value as SdpAudio['direction'];
        continue;
      }
      if (!audio || !inAudio) continue;
      const rtpmap = /^rtpmap:(\d+)\s+([^/\s]+)\/(\d+)/.exec(value);
      if (rtpmap) {
        const codec = audio.codecs.find((c) => c.pt === Number(rtpmap[1]));
        if (codec) Object.assign(codec, { name: rtpmap[2], rate: Number(rtpmap[3]) });
        continue;
      }
      const fmtp = /^fmtp:(\d+)\s+(.*)$/.exec(value);
      if (fmtp) {
        const codec = audio.codecs.find((c) => c.pt === Number(fmtp[1]));
        if (codec) codec.fmtp = fmtp[2];
      }
    }
  }
  if (audio && !audio.address) audio.address = sessionAddress;
  return audio;
}

/** The outcome of offer/answer for the audio stream: what to send, what to accept, and where. */
export interface AudioNegotiation {
  /** The audio codec we send: the first of the remote's list we support. */
  codec: Codec;
  /** Every audio codec both ends support, in the remote's order (what the far end may send). */
  common: Codec[];
  /** telephone-event at the codec's rate, with the remote's payload type; null when not offered. */
  telephoneEvent: Codec | null;
  /** Where to send RTP. */
  address: string;
  port: number;
  /** The remote's direction (sendonly or inactive: it does not want our audio). */
  direction: SdpAudio['direction'];
  /** The codecs of an answer to this SDP: the chosen codec and telephone-event, numbered as the remote numbered them. */
  answerCodecs: Codec[];
}

const sameCodec = (a: Codec, b: Codec) => a.name.toLowerCase() === b.name.toLowerCase() && a.rate === b.rate;

/**
 * Chooses from a remote offer or answer: the first audio codec of the remote's list that we
 * support (matched by name and rate, so a dynamic payload type works), and telephone-event if it
 * is there. Null when nothing is shared, or the stream was refused (port 0) or has no address.
 */
export function negotiateAudio(remote: SdpAudio, supported: readonly Codec[] = OFFER_CODECS): AudioNegotiation | null {
  if (remote.port === 0 || !remote.address) return null;
  const isEvent = (c: Codec) => c.name.toLowerCase() === 'telephone-event';
  const ours = supported.filter((c) => !isEvent(c));
  const common = remote.codecs.filter((c) => !isEvent(c) && ours.some((o) => sameCodec(o, c))).map((c) => ({ ...c }));
  const codec = common[0];
  if (!codec) return null;
  const event = supported.some(isEvent) ? remote.codecs.find((c) => isEvent(c) && c.rate === codec.rate) : undefined;
  const telephoneEvent = event ? { ...event, fmtp: event.fmtp ?? '0-15' } : null;
  return {
    codec, common, telephoneEvent, address: remote.address, port: remote.port, direction: remote.direction,
    answerCodecs: telephoneEvent ? [codec, telephoneEvent] : [codec],
  };
}

const ANSWER_DIRECTION: Record<SdpAudio['direction'], SdpAudio['direction']> = { sendrecv: 'sendrecv', sendonly: 'recvonly', recvonly: 'sendonly', inactive: 'inactive' };

/**
 * Our answer to a remote offer (RFC 3264 §6): the negotiated codecs, numbered as the offer
 * numbered them, on our RTP address and port, and the direction that mirrors the offer's.
 */
export function buildAnswer(n: AudioNegotiation, o: Omit<OfferOptions, 'codecs'>): string {
  return buildOffer({ ...o, direction: o.direction ?? ANSWER_DIRECTION[n.direction], codecs: n.answerCodecs });
}

/** What an RTP session is opened (or updated) with after a negotiation (src/media/rtp-session.ts). */
export function rtpParams(n: AudioNegotiation): {
  codec: Codec; receiveCodecs: Codec[]; telephoneEvent: number | null;
  remote: { address: string; port: number; direction: SdpAudio['direction'] };
} {
  return { codec: n.codec, receiveCodecs: n.common, telephoneEvent: n.telephoneEvent?.pt ?? null, remote: { address: n.address, port: n.port, direction: n.direction } };
}
