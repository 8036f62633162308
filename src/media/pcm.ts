// PCM16 as the media layer passes it around: mono, signed 16-bit samples in an Int16Array, and
// the telephone frame (8 kHz, 20 ms, 160 samples). Byte conversion for engines that speak
// little-endian s16le (most speech-to-text and text-to-speech services).

/** The sample rate of G.711 and of the frames the media layer hands out. */
export const TELEPHONE_RATE = 8000;
/** One RTP packet's worth of audio (a=ptime:20). */
export const FRAME_MS = 20;
/** Samples in one 20 ms frame at 8 kHz. */
export const FRAME_SAMPLES = (TELEPHONE_RATE * FRAME_MS) / 1000;

/** s16le bytes to samples (an odd trailing byte is ignored; works on any byte offset). */
export function pcm16FromBytes(bytes: Uint8Array): Int16Array {
  const n = bytes.length >> 1;
  const out = new Int16Array(n);
  const view = new DataView(bytes.buffer, bytes.byteOffset, n * 2);
  for (let i = 0; i < n; i++) out[i] = view.getInt16(i * 2, true);
  return out;
}

/** Samples to s16le bytes. */
export function pcm16ToBytes(samples: Int16Array): Buffer {
  const out = Buffer.allocUnsafe(samples.length * 2);
  for (let i = 0; i < samples.length; i++) out.writeInt16LE(samples[i], i * 2);
  return out;
}

/** Bytes of a canonical PCM WAV header. */
export const WAV_HEADER_BYTES = 44;

/** The 44-byte header of a PCM WAV holding `dataBytes` bytes of samples. */
export function wavHeader(sampleRate: number, channels: number, dataBytes: number): Buffer {
  const h = Buffer.alloc(WAV_HEADER_BYTES);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(36 + dataBytes, 4);
  h.write('WAVE', 8, 'latin1');
  h.write('fmt ', 12, 'latin1');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20); // PCM
  h.writeUInt16LE(channels, 22);
  h.writeUInt32LE(sampleRate, 24);
  h.writeUInt32LE(sampleRate * channels * 2, 28); // bytes per second
  h.writeUInt16LE(channels * 2, 32); // bytes per sample frame
  h.writeUInt16LE(16, 34); // bits per sample
  h.write('data', 36, 'latin1');
  h.writeUInt32LE(dataBytes, 40);
  return h;
}
