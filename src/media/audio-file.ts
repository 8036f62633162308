// Audio files a customer points us at (an agent's backgroundAudio): WAV (PCM 16-bit mono) or MP3
// (decoded by mpg123-decoder, WebAssembly), to PCM16 mono at 8 kHz for the call. Bounded: at most
// MAX_AUDIO_SECONDS of audio comes out, whatever the file claims, and an MP3 is decoded a piece
// at a time, stopping there. readAudioFile() does it in a worker thread (audio-file-worker.ts):
// decoding a 10 MB MP3 took seconds of CPU, which on the event loop stalled every call's audio.
import { runWorkerTask, WorkerLimitError, WorkerTaskError, workerEntry } from '../lib/worker-task.ts';
import { resample } from '../speech/resample.ts';
import { parseWav } from '../speech/wav.ts';

/** Longest audio a file may give (a loop plays it again). */
export const MAX_AUDIO_SECONDS = 600;

export class AudioFileError extends Error {}

const RATE = 8000;
/** MP3 bytes handed to the decoder at a time. */
const MP3_PIECE_BYTES = 64 * 1024;
/** Heap of the worker that decodes one file, MB, and the time it may take. */
export const AUDIO_HEAP_MB = 128;
export const AUDIO_TIMEOUT_MS = 15_000;

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
      // A piece at a time, stopping once MAX_AUDIO_SECONDS are out: decoding the whole file at
      // once held every sample of up to hours of audio (a gigabyte of floats) at the same time.
      const pieces: Int16Array[] = [];
      let n = 0;
      let max = Infinity;
      rate = 0;
      for (let at = 0; at < bytes.length && n < max; at += MP3_PIECE_BYTES) {
        const out = decoder.decode(bytes.subarray(at, at + MP3_PIECE_BYTES));
        if (out.samplesDecoded === 0 || out.channelData.length === 0) continue;
        if (rate === 0) {
          rate = out.sampleRate;
          max = rate * MAX_AUDIO_SECONDS;
        }
        const left = out.channelData[0]!;
        const piece = new Int16Array(Math.min(left.length, max - n));
        for (let i = 0; i < piece.length; i++) piece[i] = Math.max(-32768, Math.min(32767, Math.round(left[i]! * 32767)));
        pieces.push(piece);
        n += piece.length;
      }
      if (n === 0) throw new AudioFileError('the MP3 file holds no audio');
      pcm = new Int16Array(n);
      let o = 0;
      for (const piece of pieces) { pcm.set(piece, o); o += piece.length; }
    } finally {
      decoder.free();
    }
  } else {
    throw new AudioFileError('the file is neither WAV nor MP3');
  }
  if (pcm.length === 0) throw new AudioFileError('the file holds no audio');
  return rate === RATE ? pcm : resample(pcm, rate, RATE);
}

const AUDIO_WORKER = workerEntry(import.meta.url, './audio-file-worker');

/**
 * decodeAudioFile() in a worker thread (src/lib/worker-task.ts), under its heap and time limits:
 * what the event loop of a process carrying calls must never do itself. Every failure is an
 * AudioFileError saying why.
 */
export async function readAudioFile(bytes: Uint8Array): Promise<Int16Array> {
  const owned = new Uint8Array(bytes);
  try {
    return await runWorkerTask<Uint8Array, Int16Array>(AUDIO_WORKER, owned, { maxHeapMb: AUDIO_HEAP_MB, timeoutMs: AUDIO_TIMEOUT_MS, transfer: [owned.buffer] });
  } catch (err) {
    if (err instanceof WorkerLimitError || err instanceof WorkerTaskError) throw new AudioFileError(err.message);
    throw err;
  }
}
