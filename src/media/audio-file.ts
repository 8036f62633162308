// Audio files a customer points us at (an agent's backgroundAudio): WAV (PCM 16-bit mono) or MP3
// (decoded by mpg123-decoder, WebAssembly), to PCM16 mono at 8 kHz for the call. Bounded: at most
// MAX_AUDIO_SECONDS of audio comes out, whatever the file claims.
import { resample } from '../speech/resample.ts';
import { parseWav } from '../speech/wav.ts';

/** Longest audio a file may give (a loop plays it again). */
export const MAX_AUDIO_SECONDS = 600;

export class AudioFileError extends Error {}

const RATE = 8000;

function isMp3(b: Uint8Array): boolean {
  if (b.length >= 3 && b[0] === 0x49 && b[1] === 0x44 && b[2] === 0x33) return true; // ID3 tag
  return b.length >= 2 && b[0] === 0xff && (b[1]! & 0xe0) === 0xe0; // an MPEG frame's sync word
}

/** Decodes a WAV or MP3 file to PCM16 mono at 8 kHz. */
export async function decodeAudioFile(bytes: Uint8Array): Promise<Int16Array> {
  let pcm: Int16Array;
  let rate: number;
  if (bytes.length >= 4 && Buffer.from(bytes.subarray(0, 4)).toString('latin1') === 'RIFF') {
    try {
      const wav = parseWav(bytes);
      pcm = wav.pcm16.subarray(0, wav.sampleRate * MAX_AUDIO_SECONDS);
      rate = wav.sampleRate;
    } catch (err) {
      throw new AudioFileError(`not a usable WAV file: ${(err as Error).message}`);
    }
  } else if (isMp3(bytes)) {
    // Loaded with the first MP3 (its WebAssembly decoder is not needed until then).
    const { MPEGDecoder } = await import('mpg123-decoder');
    const decoder = new MPEGDecoder();
    await decoder.ready;
    try {
      const out = decoder.decode(bytes);
      if (out.samplesDecoded === 0 || out.channelData.length === 0) throw new AudioFileError('the MP3 file holds no audio');
      rate = out.sampleRate;
      const left = out.channelData[0]!;
      const n = Math.min(left.length, rate * MAX_AUDIO_SECONDS);
      pcm = new Int16Array(n);
      for (let i = 0; i < n; i++) pcm[i] = Math.max(-32768, Math.min(32767, Math.round(left[i]! * 32767)));
    } finally {
      decoder.free();
    }
  } else {
    throw new AudioFileError('the file is neither WAV nor MP3');
  }
  if (pcm.length === 0) throw new AudioFileError('the file holds no audio');
  return rate === RATE ? pcm : resample(pcm, rate, RATE);
}
