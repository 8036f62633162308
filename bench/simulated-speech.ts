// Speech engines for bench/voice that answer at once, so what a benchmark measures is the
// service's own time, not an engine's. They are simulations: nothing is recognised or spoken.
//   SimulatedInstantStt — every utterance "is" the same fixed text;
//   SimulatedInstantTts — every sentence "sounds like" the same short tone.
// TimedStt / TimedTts wrap any engine (these or the real offline ones) and record when each
// request started and ended (performance.now()), for the per-turn breakdown.
import type { Speech, SpeechToText, SynthesizeOptions, TextToSpeech, Transcript, TranscribeOptions } from '../src/speech/types.ts';

export class SimulatedInstantStt implements SpeechToText {
  readonly name = 'simulated-instant-stt';
  readonly offline = true;
  constructor(private readonly text: string) {}
  async transcribe(): Promise<Transcript> {
    return { text: this.text, engine: this.name };
  }
  async check(): Promise<void> {}
}

/** A 440 Hz tone at a quarter of full scale, `ms` long, at 8 kHz (no resampling on the way out). */
export function tone(ms: number, rate = 8000): Int16Array {
  const pcm = new Int16Array(Math.round((ms / 1000) * rate));
  for (let i = 0; i < pcm.length; i++) pcm[i] = Math.round(8192 * Math.sin((2 * Math.PI * 440 * i) / rate));
  return pcm;
}

export class SimulatedInstantTts implements TextToSpeech {
  readonly name = 'simulated-instant-tts';
  readonly offline = true;
  private readonly pcm: Int16Array;
  constructor(ms: number) {
    this.pcm = tone(ms);
  }
  async synthesize(): Promise<Speech> {
    return { pcm16: this.pcm, sampleRate: 8000, engine: this.name };
  }
  async check(): Promise<void> {}
}

export interface Span { start: number; end: number; text?: string }

export class TimedStt implements SpeechToText {
  readonly spans: Span[] = [];
  constructor(private readonly inner: SpeechToText) {}
  get name() { return this.inner.name; }
  get offline() { return this.inner.offline; }
  async transcribe(pcm16: Int16Array | Buffer, sampleRate: number, opts: TranscribeOptions): Promise<Transcript> {
    const span: Span = { start: performance.now(), end: NaN };
    this.spans.push(span);
    try {
      const heard = await this.inner.transcribe(pcm16, sampleRate, opts);
      span.text = heard.text;
      return heard;
    } finally {
      span.end = performance.now();
    }
  }
  check(signal?: AbortSignal) { return this.inner.check(signal); }
}

export class TimedTts implements TextToSpeech {
  readonly spans: Span[] = [];
  constructor(private readonly inner: TextToSpeech) {}
  get name() { return this.inner.name; }
  get offline() { return this.inner.offline; }
  async synthesize(text: string, opts: SynthesizeOptions): Promise<Speech> {
    const span: Span = { start: performance.now(), end: NaN };
    this.spans.push(span);
    try {
      return await this.inner.synthesize(text, opts);
    } finally {
      span.end = performance.now();
    }
  }
  check(signal?: AbortSignal) { return this.inner.check(signal); }
}
