// A voice transport for tests (src/media/voice-transport.ts), with speech engines to match: no
// sockets, no codecs, no real time. It records every call the session makes on it (play, clear,
// sendDigits, transfer, hangup), echoes `played` marks at once or when the test says, and lets the
// test speak as the caller: frames of loud synthetic audio then silence, cut into an utterance by
// the session's own VAD, which the scripted SpeechToText "recognises" as the next scripted text.
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import type { AudioBed, TransferOptions, VoiceTransport, VoiceTransportEvents } from '../../src/media/voice-transport.ts';
import type { Speech, SpeechToText, TextToSpeech, Transcript } from '../../src/speech/types.ts';

const FRAME = 160; // 20 ms at 8 kHz

export type TransportCall =
  | { op: 'play'; samples: number; mark?: string }
  | { op: 'clear'; dropped: number }
  | { op: 'sendDigits'; digits: string }
  | { op: 'transfer'; destination: string; announced: boolean; name?: string }
  | { op: 'hangup'; reason?: string }
  | { op: 'background'; on: boolean };

export class FakeVoiceTransport extends EventEmitter<VoiceTransportEvents> implements VoiceTransport {
  readonly kind = 'fake';
  readonly calls: TransportCall[] = [];
  /** Echo each mark as played as soon as it is queued (true), or hold them until playOut(). */
  autoPlay = true;
  /** What the next transfer does: resolve (the call is handed over and ends) or reject with this. */
  transferError: Error | undefined;
  /** Marks queued and not yet played, in order. */
  readonly #pending: string[] = [];
  #ended = false;

  get ended(): boolean { return this.#ended; }
  /** The calls of one kind. */
  of<K extends TransportCall['op']>(op: K): Array<Extract<TransportCall, { op: K }>> {
    return this.calls.filter((c): c is Extract<TransportCall, { op: K }> => c.op === op);
  }

  play(pcm: Int16Array, mark?: string): void {
    this.calls.push({ op: 'play', samples: pcm.length, ...(mark ? { mark } : {}) });
    if (!mark) return;
    if (this.autoPlay) setImmediate(() => { if (!this.#ended) this.emit('played', mark); });
    else this.#pending.push(mark);
  }

  /** Plays out every mark held (autoPlay false). */
  playOut(): void {
    for (const m of this.#pending.splice(0)) this.emit('played', m);
  }

  clear(): number {
    const dropped = this.#pending.splice(0).length;
    this.calls.push({ op: 'clear', dropped });
    return dropped;
  }

  async sendDigits(digits: string): Promise<void> {
    this.calls.push({ op: 'sendDigits', digits });
  }

  async transfer(destination: string, opts: TransferOptions = {}): Promise<void> {
    this.calls.push({ op: 'transfer', destination, announced: opts.announce !== undefined, ...(opts.name ? { name: opts.name } : {}) });
    if (this.transferError) throw this.transferError;
    this.end('transferred');
  }

  async hangup(reason?: string): Promise<void> {
    this.calls.push({ op: 'hangup', reason });
    this.end('hung up by us');
  }

  background(bed: AudioBed | null): void {
    this.calls.push({ op: 'background', on: bed !== null });
  }

  /** The far end: the call is over. */
  end(reason: string): void {
    if (this.#ended) return;
    this.#ended = true;
    this.emit('ended', reason);
  }

  /** The caller presses a key. */
  press(digit: string): void {
    this.emit('dtmf', digit);
  }

  /** The caller talks for `ms` (loud synthetic audio), without the silence that ends the utterance. */
  talk(ms: number): void {
    for (let i = 0; i < ms / 20; i++) {
      const f = new Int16Array(FRAME);
      for (let j = 0; j < FRAME; j++) f[j] = Math.round(8000 * Math.sin((2 * Math.PI * 300 * (i * FRAME + j)) / 8000));
      this.emit('audio', f);
    }
  }

  /** `ms` of the line's silence. */
  hush(ms: number): void {
    for (let i = 0; i < ms / 20; i++) this.emit('audio', new Int16Array(FRAME));
  }

  /** One utterance: a little silence (the noise floor), `ms` of talk, then silence past the speakingTimeout. */
  utter(speakingTimeoutMs: number, ms = 400): void {
    this.hush(100);
    this.talk(ms);
    this.hush(speakingTimeoutMs + 100);
  }
}

/** A fake transport that also notes when each piece of audio was queued (performance.now()). */
export class TimedTransport extends FakeVoiceTransport {
  readonly playedAt: number[] = [];
  override play(pcm: Int16Array, mark?: string): void {
    this.playedAt.push(performance.now());
    super.play(pcm, mark);
  }
}

/** Speech to text that "recognises" each utterance as the next scripted text ('' once the script is out). */
export class ScriptedStt implements SpeechToText {
  readonly name = 'scripted';
  readonly offline = true;
  readonly heard: Array<{ samples: number; language: string }> = [];
  constructor(readonly script: string[] = []) {}
  async transcribe(pcm16: Int16Array | Buffer, _rate: number, opts: { language: string }): Promise<Transcript> {
    this.heard.push({ samples: pcm16.length, language: opts.language });
    return { text: this.script.shift() ?? '', engine: this.name };
  }
  async check(): Promise<void> {}
}

/** Text to speech that answers at once with 100 ms of a quiet tone per call, and remembers what it said in which language. */
export class ShortTts implements TextToSpeech {
  readonly name = 'short';
  readonly offline = true;
  readonly said: Array<{ text: string; language: string }> = [];
  /** Throw for texts that match (a synthesis failure). */
  failOn: RegExp | undefined;
  async synthesize(text: string, opts: { language: string }): Promise<Speech> {
    if (this.failOn?.test(text)) throw new Error('synthesis failed');
    this.said.push({ text, language: opts.language });
    const pcm16 = new Int16Array(800);
    for (let i = 0; i < pcm16.length; i++) pcm16[i] = Math.round(500 * Math.sin((2 * Math.PI * 440 * i) / 8000));
    return { pcm16, sampleRate: 8000, engine: this.name };
  }
  async check(): Promise<void> {}
}
