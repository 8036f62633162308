// WAV (RIFF) files of PCM16 mono: reading what espeak-ng and speech servers write, and writing
// what transcription servers and pocketsphinx read.
//
// A WAV written to a pipe cannot have its sizes filled in afterwards: espeak-ng --stdout puts
// 0x7ffff000-ish placeholders in the RIFF and data sizes, so a data chunk that claims more than
// the bytes present runs to the end of the buffer.

import { pcm16FromBytes, pcm16ToBytes, wavHeader } from '../media/pcm.ts';

// The byte conversions are call media's (src/media/pcm.ts), re-exported under the names speech uses.
export { pcm16FromBytes as bytesToPcm16, pcm16ToBytes };

export class WavError extends Error {}

export interface Pcm16 {
  pcm16: Int16Array;
  sampleRate: number;
}

/** Samples from either form the interfaces accept (a Buffer holds little-endian bytes). */
export function asPcm16(audio: Int16Array | Buffer): Int16Array {
  if (Buffer.isBuffer(audio)) {
    if (audio.length % 2 !== 0) throw new WavError(`PCM16 audio has an odd number of bytes (${audio.length})`);
    return pcm16FromBytes(audio);
  }
  return audio;
}

export interface WavHeader {
  sampleRate: number;
  /** Where the samples begin. */
  dataOffset: number;
  /** The data chunk's size as written (a streamed file's is a placeholder past the end). */
  dataBytes: number;
}

/**
 * Reads the header of a RIFF/WAVE file of PCM 16-bit mono (the only kind we ask for) up to its
 * data chunk. Null when `buf` ends before the data chunk starts (a stream: wait for more).
 */
export function readWavHeader(buf: Uint8Array): WavHeader | null {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  if (b.length < 12) {
    const n = Math.min(4, b.length);
    if (b.toString('latin1', 0, n) !== 'RIFF'.slice(0, n)) throw new WavError('not a RIFF/WAVE file');
    return null;
  }
  if (b.toString('latin1', 0, 4) !== 'RIFF' || b.toString('latin1', 8, 12) !== 'WAVE') throw new WavError('not a RIFF/WAVE file');
  let pos = 12;
  let fmt: { format: number; channels: number; rate: number; bits: number } | undefined;
  while (pos + 8 <= b.length) {
    const id = b.toString('latin1', pos, pos + 4);
    const size = b.readUInt32LE(pos + 4);
    const body = pos + 8;
    if (id === 'data') {
      if (!fmt) throw new WavError('the data chunk comes before the fmt chunk');
      if (fmt.format !== 1 || fmt.bits !== 16 || fmt.channels !== 1) {
        throw new WavError(`expected PCM 16-bit mono, got format ${fmt.format}, ${fmt.bits} bits, ${fmt.channels} channels`);
      }
      if (fmt.rate < 1000 || fmt.rate > 192_000) throw new WavError(`implausible sample rate ${fmt.rate}`);
      return { sampleRate: fmt.rate, dataOffset: body, dataBytes: size };
    }
    if (id === 'fmt ') {
      if (size < 16) throw new WavError('the fmt chunk is too short');
      if (body + size > b.length) return null;
      let format = b.readUInt16LE(body);
      const channels = b.readUInt16LE(body + 2);
      const rate = b.readUInt32LE(body + 4);
      const bits = b.readUInt16LE(body + 14);
      // WAVE_FORMAT_EXTENSIBLE names the real format in the first two bytes of its sub-format GUID.
      if (format === 0xfffe && size >= 26) format = b.readUInt16LE(body + 24);
      fmt = { format, channels, rate, bits };
    }
    if (size > 1024 * 1024) throw new WavError(`a '${id}' chunk of ${size} bytes before the data`);
    // Chunks are padded to an even size.
    pos = body + size + (size & 1);
  }
  return null;
}

/** Parses a whole RIFF/WAVE file of PCM 16-bit mono. */
export function parseWav(buf: Uint8Array): Pcm16 {
  const h = readWavHeader(buf);
  if (!h) throw new WavError('the file ends before its data chunk');
  // A size past the end is a streamed file's placeholder: the data runs to the end.
  const end = Math.min(buf.byteLength, h.dataOffset + h.dataBytes);
  const len = (end - h.dataOffset) & ~1;
  return { pcm16: pcm16FromBytes(buf.subarray(h.dataOffset, h.dataOffset + len)), sampleRate: h.sampleRate };
}

/** A canonical 44-byte-header WAV of PCM16 mono. */
export function buildWav(pcm: Int16Array, sampleRate: number): Buffer {
  return Buffer.concat([wavHeader(sampleRate, 1, pcm.length * 2), pcm16ToBytes(pcm)]);
}
