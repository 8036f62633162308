// Helpers for tests of streaming recognisers (Deepgram, Google): a call's audio as frames, and the
// events a RecognitionStream reports, collected and read as turns.
import { encodeG711 } from '../../src/media/g711.ts';
import type { RecognitionEvent, RecognitionStream } from '../../src/speech/types.ts';
import { sleep } from './wait.ts';

/** μ-law frames of 20 ms at 8 kHz, as a call carries them. */
export function mulawFrames(pcm: Int16Array): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < pcm.length; i += 160) out.push(encodeG711('PCMU', pcm.subarray(i, Math.min(pcm.length, i + 160))));
  return out;
}

export function collect(stream: RecognitionStream): RecognitionEvent[] {
  const events: RecognitionEvent[] = [];
  stream.on((e) => events.push(e));
  return events;
}

const TURN = new Set(['startOfTurn', 'eagerEndOfTurn', 'turnResumed', 'endOfTurn']);
/** The turn events, as `type` or `type:text`. */
export const turns = (events: RecognitionEvent[]) => events.filter((e) => TURN.has(e.type)).map((e) => ('text' in e ? `${e.type}:${e.text}` : e.type));
/** A waitFor() check: at least `n` events of `type` came. */
export const has = (events: RecognitionEvent[], type: RecognitionEvent['type'], n = 1) => () => Promise.resolve(events.filter((e) => e.type === type).length >= n);

/** Writes the frames `everyMs` apart (until the stream closes). */
export async function paced(stream: RecognitionStream, frames: Buffer[], everyMs: number): Promise<void> {
  for (const f of frames) {
    if (stream.state === 'closed') return;
    stream.write(f);
    await sleep(everyMs);
  }
}
