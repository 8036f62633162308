// What a voice session asks of speech engines, independent of who serves them: the caller's
// utterance to text (SpeechToText) and the agent's reply to audio (TextToSpeech).
//
// Audio is PCM16: signed 16-bit samples, mono, little-endian when it travels as bytes (a Buffer),
// as an Int16Array otherwise. Every call says its sample rate; telephony runs at 8 kHz, and each
// engine resamples to what it needs (src/speech/resample.ts).

/** Longest utterance a transcription accepts (seconds of audio at its rate); longer is refused. */
export const MAX_UTTERANCE_SECONDS = 30;
/** Longest text one synthesis accepts (characters); a reply is spoken sentence by sentence. */
export const MAX_SYNTHESIS_CHARS = 2000;

/**
 * What an utterance may be, for recognition that must be deterministic (menus, yes/no, tests):
 * - `phrases`: the utterance is one of these (case and punctuation do not matter); pocketsphinx
 *   recognises nothing else, OpenAI-compatible servers get them as a vocabulary hint (`prompt`).
 * - `jsgf`: a JSGF grammar (pocketsphinx only; other engines ignore it).
 */
export type SpeechGrammar =
  | { kind: 'phrases'; phrases: readonly string[] }
  | { kind: 'jsgf'; jsgf: string };

export interface TranscribeOptions {
  /** BCP-47 language of the speech (en-US). */
  language: string;
  signal?: AbortSignal;
  grammar?: SpeechGrammar;
}

export interface Transcript {
  /** What was said, lowercase for pocketsphinx; '' when nothing was recognised. */
  text: string;
  /** 0..1 when the engine reports it (pocketsphinx without a grammar); absent otherwise. */
  confidence?: number;
  /** The engine's name (SpeechToText.name). */
  engine: string;
  /** The model that transcribed, when the engine has models. */
  model?: string;
}

/** Speech to text, one utterance at a time (the VAD in src/speech/vad.ts cuts the utterances). */
export interface SpeechToText {
  /** The engine's name, shown in errors and conversation records. */
  readonly name: string;
  /** True when nothing leaves the machine (pocketsphinx); false for a remote service. */
  readonly offline: boolean;
  /**
   * Transcribes one utterance of PCM16 mono at `sampleRate` Hz (8000–48000; any rate, the engine
   * resamples). At most MAX_UTTERANCE_SECONDS; longer is refused with a SpeechError ('input').
   */
  transcribe(pcm16: Int16Array | Buffer, sampleRate: number, opts: TranscribeOptions): Promise<Transcript>;
  /** Resolves when the engine can run (its program and model are installed); a SpeechError says what is missing. */
  check(signal?: AbortSignal): Promise<void>;
}

export interface SynthesizeOptions {
  /** BCP-47 language of the text (en-US); picks the engine's voice for that language. */
  language: string;
  /** Picks a voice of that gender when `voice` is not given. */
  gender?: 'female' | 'male';
  /**
   * An engine's own voice name, overriding `gender`: an espeak-ng variant (`f3`, `m3`, `klatt`),
   * an OpenAI voice (`nova`, `onyx`).
   */
  voice?: string;
  /** 1 = the engine's normal rate; 0.5–2. */
  speed?: number;
  signal?: AbortSignal;
}

export interface Speech {
  /** PCM16 mono at `sampleRate` (espeak-ng: 22050 Hz; OpenAI `pcm`: 24000 Hz; `wav`: what the server wrote). */
  pcm16: Int16Array;
  sampleRate: number;
  /** The engine's name (TextToSpeech.name). */
  engine: string;
  model?: string;
}

/** A piece of streamed speech; every piece of one synthesis has the same rate. */
export interface SpeechChunk {
  pcm16: Int16Array;
  sampleRate: number;
}

/** Text to speech, a sentence or so at a time. */
export interface TextToSpeech {
  readonly name: string;
  readonly offline: boolean;
  /**
   * Speaks `text` (at most MAX_SYNTHESIS_CHARS; blank text gives no samples) and returns PCM16
   * mono at the engine's own rate, which the result names; the caller resamples (to 8 kHz for
   * telephony).
   */
  synthesize(text: string, opts: SynthesizeOptions): Promise<Speech>;
  /**
   * The same speech as it arrives, for engines where the first audio comes well before the last
   * (a remote service); absent when synthesize() is as quick.
   */
  synthesizeStream?(text: string, opts: SynthesizeOptions): AsyncIterable<SpeechChunk>;
  check(signal?: AbortSignal): Promise<void>;
}

/**
 * Why a speech request failed:
 * - `input`: the request itself is refused (too long, a language the engine has no model for,
 *   a grammar word the dictionary lacks); trying again will not help.
 * - `unavailable`: the engine cannot run here (its Debian package is not installed).
 * - `timeout`: it took longer than the engine's time limit and was stopped.
 * - `failed`: anything else (the program failed, the server answered an error).
 */
export type SpeechErrorKind = 'input' | 'unavailable' | 'timeout' | 'failed';

/** A speech request that failed; names the engine. */
export class SpeechError extends Error {
  constructor(readonly engine: string, readonly kind: SpeechErrorKind, message: string, readonly status?: number) {
    super(`speech engine '${engine}' failed: ${message}`);
  }
}
