// What one call used of remote speech providers, in each vendor's own unit (issue 35): seconds of
// audio written to a remote recogniser (its stream, or the one-utterance recogniser's requests)
// and characters handed to a remote voice. Counted as the call goes, recorded once for the
// organization when the call ends (recordCallSpeech), keyed by the conversation so a retried end
// or a second listener never counts twice. Offline engines (pocketsphinx, espeak-ng) count nothing.
// docs/billing.md, "Speech providers' units".
import type { Db } from '../../db/types.ts';
import { isSpeechVendor, type SpeechUnit, type SpeechVendor } from '../../speech/vendors.ts';
import type { RecognitionStream, SpeechToText, StreamingSpeechToText, SynthesisStream } from '../../speech/types.ts';
import { recordSpeechUsage } from '../billing/speech-usage.ts';
import { conversationRepo, toolEffectRepo } from '../conversations/repository.ts';
import { readCallState, type SpeechUsageNote } from './call-state.ts';

/** The vendor an engine (by its name) is billed by: deepgramflux is Deepgram's; an engine that is no vendor's (offline) has none. */
export function vendorOf(engine: { name: string; offline: boolean }): SpeechVendor | undefined {
  if (engine.offline) return undefined;
  const name = engine.name === 'deepgramflux' ? 'deepgram' : engine.name;
  return isSpeechVendor(name) ? name : undefined;
}

/** Audio is summed in whole microseconds, so a call's thousands of 20 ms frames add up exactly. */
const SCALE: Record<SpeechUnit, number> = { audioSeconds: 1_000_000, characters: 1 };

export class SpeechMeter {
  private readonly amounts = new Map<`${SpeechVendor}:${SpeechUnit}`, number>();

  add(vendor: SpeechVendor, unit: SpeechUnit, amount: number): void {
    if (!(amount > 0)) return;
    const key = `${vendor}:${unit}` as const;
    this.amounts.set(key, (this.amounts.get(key) ?? 0) + Math.round(amount * SCALE[unit]));
  }

  /** What was counted so far: each vendor and unit with its amount (audio in seconds). */
  entries(): { vendor: SpeechVendor; unit: SpeechUnit; amount: number }[] {
    return [...this.amounts].map(([key, n]) => {
      const [vendor, unit] = key.split(':') as [SpeechVendor, SpeechUnit];
      return { vendor, unit, amount: n / SCALE[unit] };
    });
  }

  /** `engine` whose streams count the seconds of audio written to them (unchanged when it is no vendor's). */
  recognising(engine: StreamingSpeechToText): StreamingSpeechToText {
    const vendor = vendorOf(engine);
    if (!vendor) return engine;
    return {
      name: engine.name, offline: engine.offline,
      check: (signal) => engine.check(signal),
      open: async (opts) => {
        const stream = await engine.open(opts);
        const bytesPerSecond = opts.sampleRate * (opts.encoding === 'mulaw' ? 1 : 2);
        return meteredStream(stream, (bytes) => this.add(vendor, 'audioSeconds', bytes / bytesPerSecond));
      },
    };
  }

  /** `engine` counting the seconds of audio it is asked to transcribe (unchanged when it runs here). */
  transcribing(engine: SpeechToText): SpeechToText {
    const vendor = vendorOf(engine);
    if (!vendor) return engine;
    return {
      name: engine.name, offline: engine.offline,
      check: (signal) => engine.check(signal),
      transcribe: (pcm16, sampleRate, opts) => {
        const samples = Buffer.isBuffer(pcm16) ? pcm16.length / 2 : pcm16.length;
        this.add(vendor, 'audioSeconds', samples / sampleRate);
        return engine.transcribe(pcm16, sampleRate, opts);
      },
    };
  }

  /** `stream` counting the characters pushed to it, for `vendor`. */
  synthesizing(stream: SynthesisStream, vendor: SpeechVendor | undefined): SynthesisStream {
    if (!vendor) return stream;
    return {
      get engine() { return stream.engine; },
      get encoding() { return stream.encoding; },
      get sampleRate() { return stream.sampleRate; },
      get chunks() { return stream.chunks; },
      get timing() { return stream.timing; },
      push: (text) => {
        stream.push(text);
        this.add(vendor, 'characters', text.length);
      },
      end: () => stream.end(),
      cancel: () => stream.cancel(),
    };
  }
}

function meteredStream(stream: RecognitionStream, wrote: (bytes: number) => void): RecognitionStream {
  return {
    get state() { return stream.state; },
    write(audio) {
      if (stream.state === 'closing' || stream.state === 'closed') return;
      stream.write(audio);
      wrote(audio.length);
    },
    keepAlive: () => stream.keepAlive(),
    finalize: () => stream.finalize(),
    close: () => stream.close(),
    on: (l) => stream.on(l),
    off: (l) => stream.off(l),
  };
}

/**
 * Records what `meter` counted for the conversation's organization, once: in one transaction that
 * locks the conversation, notes the amounts in its state (`speechUsage`) and adds them to the usage
 * rollups; a conversation whose state has them already is left as it is (a retried end).
 */
export async function recordCallSpeech(db: Db, conversationId: string, meter: SpeechMeter, now: number): Promise<void> {
  const entries = meter.entries();
  if (entries.length === 0) return;
  await db.transaction().execute(async (tx) => {
    await toolEffectRepo.lockConversation(tx, conversationId);
    const row = await conversationRepo.find(tx, conversationId);
    if (!row) return;
    const state = readCallState(row.state);
    if (state.speechUsage) return;
    const note: SpeechUsageNote = {};
    for (const e of entries) {
      await recordSpeechUsage(tx, row.org_id, e.vendor, e.unit, e.amount, now);
      note[`${e.vendor}:${e.unit}`] = Math.round(e.amount * 1000) / 1000;
    }
    await conversationRepo.setState(tx, conversationId, JSON.stringify({ ...state, speechUsage: note }), now);
  });
}
