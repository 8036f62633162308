// G.711 (ITU-T): PCM16 frames to μ-law (PCMU, RTP payload type 0) and A-law (PCMA, type 8) and
// back, through the alawmulaw package. Both are 8 kHz, one byte per sample: a 20 ms frame is 160
// bytes. The package ships CommonJS with only a default export at run time, hence the default
// import.
import alawmulaw from 'alawmulaw';

export type G711Codec = 'PCMU' | 'PCMA';

/** The static RTP payload types of RFC 3551. */
export const G711_PAYLOAD_TYPE: Readonly<Record<G711Codec, number>> = { PCMU: 0, PCMA: 8 };

/** The codec an SDP encoding name stands for ('pcmu', 'PCMA'), or null for anything else. */
export function g711Codec(name: string): G711Codec | null {
  const n = name.toUpperCase();
  return n === 'PCMU' || n === 'PCMA' ? n : null;
}

/** PCM16 samples (8 kHz) to G.711 bytes, one per sample. */
export function encodeG711(codec: G711Codec, pcm: Int16Array): Buffer {
  const bytes = codec === 'PCMU' ? alawmulaw.mulaw.encode(pcm) : alawmulaw.alaw.encode(pcm);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
}

/** G.711 bytes to PCM16 samples (8 kHz). Every byte is a valid code, so this cannot fail. */
export function decodeG711(codec: G711Codec, payload: Uint8Array): Int16Array {
  return codec === 'PCMU' ? alawmulaw.mulaw.decode(payload) : alawmulaw.alaw.decode(payload);
}

/** The code of digital silence: μ-law 0xFF, A-law 0xD5 (what encoding a zero sample gives). */
export function g711Silence(codec: G711Codec): number {
  return codec === 'PCMU' ? 0xff : 0xd5;
}
