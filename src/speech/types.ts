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
  /**
   * One reply spoken as its text arrives (the model still streaming): the streamed engines
   * (ElevenLabs, Cartesia, Deepgram Aura; see SynthesisStream). Absent on the offline and
   * OpenAI-compatible engines.
   */
  openStream?(opts: SynthesisStreamOptions): SynthesisStream;
  /** The voices the engine's account can use, from the provider's list where it has one. */
  listVoices?(signal?: AbortSignal): Promise<VoiceInfo[]>;
  /**
   * Loads what the engine needs before its first request (a vendor's client, loaded on first use),
   * so a caller can start a request's time limit after it: loading a large client under load can
   * take seconds the provider did not spend.
   */
  ready?(): Promise<void>;
}

/**
 * Streaming recognition (an engine that hears a call as it happens): one stream per call, fed the
 * call's own frames as they arrive, answering with events. Engine layer: no tenant knowledge.
 *
 * The audio is what the call carries, in its own encoding and rate (`mulaw` bytes or `linear16`
 * little-endian samples, mono), never resampled on the way.
 */
export type StreamEncoding = 'mulaw' | 'linear16';

export interface StreamOptions {
  /** BCP-47 language of the speech (en-US). */
  language: string;
  encoding: StreamEncoding;
  /** 8000–48000 Hz (a telephone call: 8000). */
  sampleRate: number;
  /** Silence after speech before the engine ends an utterance (Deepgram live `endpointing`); engine default otherwise. */
  endpointingMs?: number;
  /** Gap between words that ends an utterance even without `endpointingMs` of silence (Deepgram `utterance_end_ms`, ≥ 1000). */
  utteranceEndMs?: number;
  /** Words and names to favour (Deepgram `keyterm`); at most MAX_STREAM_KEYWORDS are sent. */
  keywords?: readonly string[];
  /** Aborting closes the stream (as close() does, without waiting for the server). */
  signal?: AbortSignal;
}

/** Most keywords a stream sends; more are left out. */
export const MAX_STREAM_KEYWORDS = 50;

/**
 * What a stream reports. Two groups:
 *
 * - **Turn events**, the same for every engine, which is what a listener should be written
 *   against: `startOfTurn` (the caller began speaking: barge-in may start here), `interim` (the
 *   turn's words so far), `eagerEndOfTurn` (probably done: a reply may be prepared, not played),
 *   `turnResumed` (not done after all: drop what the eager end started), `endOfTurn` (done: `text`
 *   is the whole turn). Every `startOfTurn` is followed by exactly one `endOfTurn`, whose text
 *   may be '' when the engine heard a sound but no words; `eagerEndOfTurn`/`turnResumed` only
 *   come between the two, and an `endOfTurn` after an `eagerEndOfTurn` carries the same text.
 *   Deepgram live makes them from its own events: `SpeechStarted` or the first words start the
 *   turn, the finals' transcripts make its text, and a final with `speech_final` (or an
 *   `UtteranceEnd`, when the endpointing silence never came) ends it; it has no eager end.
 *   Flux reports its `TurnInfo` events as they are. Google makes them from its voice activity
 *   events and finals (src/speech/google.ts); it has no eager end either.
 * - **Engine events**, for records and tests: `speechStarted`, `final` (one finalized segment,
 *   `speechFinal` when the engine's endpointing ended the utterance there) and `utteranceEnd`,
 *   from Deepgram live; Google reports `speechStarted` and `final`.
 *
 * And the stream's own: `reconnected` (the socket dropped and a new one carries on; the audio
 * written in the gap, up to a bound, was sent again), `error` (the stream has ended and will hear
 * nothing more: the listener falls back to another engine) and `closed` (always last, once).
 */
export type RecognitionEvent =
  | { type: 'startOfTurn' }
  | { type: 'interim'; text: string }
  | { type: 'eagerEndOfTurn'; text: string }
  | { type: 'turnResumed' }
  | { type: 'endOfTurn'; text: string; confidence?: number }
  | { type: 'speechStarted' }
  | { type: 'final'; text: string; speechFinal: boolean; confidence?: number }
  | { type: 'utteranceEnd' }
  | { type: 'reconnected'; resentBytes: number; droppedBytes: number }
  | { type: 'error'; error: SpeechError }
  | { type: 'closed' };

export type RecognitionListener = (event: RecognitionEvent) => void;

/** One call's recognition: audio in, RecognitionEvents out. */
export interface RecognitionStream {
  /** `open` until close() or an error ends it; `reconnecting` while a dropped socket is replaced. */
  readonly state: 'open' | 'reconnecting' | 'closing' | 'closed';
  /**
   * Sends one piece of the call's audio (a frame or a few: at most one second of it), in the
   * stream's encoding and rate. While the socket is being replaced it is kept (up to a bound) and
   * sent when the new one opens; after the stream ended it is ignored.
   */
  write(audio: Buffer): void;
  /**
   * Tells the engine the stream is still wanted while no audio goes (the agent speaks and the
   * caller's audio is not sent). The stream also does it by itself when nothing was sent for a while.
   */
  keepAlive(): void;
  /** Asks for what has been heard so far at once (a final, or Flux's end of the turn); resolves when it came or its time bound passed. */
  finalize(): Promise<void>;
  /** Ends the stream: tells the engine, waits (bounded) for its last results and its close. Never rejects. */
  close(): Promise<void>;
  /** Listeners run in order, synchronously, and must not throw. */
  on(listener: RecognitionListener): void;
  off(listener: RecognitionListener): void;
}

/** A streaming recogniser (Deepgram live, Flux, Google). */
export interface StreamingSpeechToText {
  readonly name: string;
  readonly offline: false;
  /** Opens a stream; rejects with a SpeechError (`refused` for a refused key, `timeout`, `input`, `failed`). */
  open(opts: StreamOptions): Promise<RecognitionStream>;
  /** Resolves when the engine can be used (a key is configured); does not spend a request. */
  check(signal?: AbortSignal): Promise<void>;
}

/**
 * Why a speech request failed:
 * - `input`: the request itself is refused (too long, a language the engine has no model for,
 *   a grammar word the dictionary lacks); trying again will not help.
 * - `refused`: the service refused our credentials (401/403): the key is wrong or lacks the
 *   right; trying again will not help.
 * - `unavailable`: the engine cannot run here (its Debian package is not installed).
 * - `timeout`: it took longer than the engine's time limit and was stopped.
 * - `failed`: anything else (the program failed, the server answered an error).
 */
export type SpeechErrorKind = 'input' | 'refused' | 'unavailable' | 'timeout' | 'failed';

/** A speech request that failed; names the engine. */
export class SpeechError extends Error {
  constructor(readonly engine: string, readonly kind: SpeechErrorKind, message: string, readonly status?: number) {
    super(`speech engine '${engine}' failed: ${message}`);
  }
}

// ── Streamed synthesis: one reply whose text arrives as the model streams ──────────────────────

/** Longest reply one SynthesisStream takes, in characters of text pushed; more is refused. */
export const MAX_STREAM_CHARS = 10_000;

/**
 * How a stream's audio comes: `mulaw` is G.711 μ-law, one byte per sample (what a phone call
 * carries: 8 kHz μ-law goes to Twilio and to PCMU peers as it is); `pcm` is PCM16 little-endian.
 */
export type SynthesisEncoding = 'mulaw' | 'pcm';
/** The rates every streamed engine offers; 8000 on a phone call, so nothing is resampled. */
export type StreamSampleRate = 8000 | 16000 | 22050 | 24000;

export interface SynthesisStreamOptions extends SynthesizeOptions {
  sampleRate: StreamSampleRate;
  /** Default `mulaw` at 8000 Hz, `pcm` at any other rate (μ-law is for 8 kHz only). */
  encoding?: SynthesisEncoding;
}

/** A piece of a streamed reply: the provider's bytes as asked for, and the same audio as PCM16. */
export interface SynthesisChunk extends SpeechChunk {
  encoding: SynthesisEncoding;
  /** μ-law bytes, or PCM16 little-endian bytes, exactly as the provider sent them (whole samples). */
  audio: Buffer;
}

/** When things happened on a stream (performance.now() milliseconds); absent until they do. */
export interface SynthesisTiming {
  startedAt: number;
  /** The provider's socket is open. */
  openedAt?: number;
  /** The first text that asks for audio (a sentence's end, or end()) went to the provider. */
  firstFlushAt?: number;
  firstAudioAt?: number;
  /** The stream ended: done, failed or cancelled. */
  endedAt?: number;
}

/**
 * One reply spoken while its text still arrives. Text goes in with push() (a sentence or a
 * fragment; a sentence's end asks the provider to speak what it holds) and end() (no more text:
 * speak the rest). Audio comes out of `chunks`, in order, as the provider sends it; iteration ends
 * after the provider's last audio, or throws a SpeechError naming the engine (refused key, a wait
 * that ran past its bound, a socket closed mid-reply). cancel() (barge-in) stops the provider's
 * stream and drops what is queued at once: `chunks` ends without another chunk. Breaking out of
 * `chunks`, or aborting `signal`, cancels too.
 */
export interface SynthesisStream {
  readonly engine: string;
  readonly encoding: SynthesisEncoding;
  readonly sampleRate: StreamSampleRate;
  /** Refused (SpeechError 'input') past MAX_STREAM_CHARS, or after end() or cancel(). */
  push(text: string): void;
  end(): void;
  cancel(): void;
  /** One consumer; a second iteration throws. */
  readonly chunks: AsyncIterable<SynthesisChunk>;
  readonly timing: Readonly<SynthesisTiming>;
}

/** A voice an engine offers (for GET /api/v2/voices and the console's picker). */
export interface VoiceInfo {
  /** What `SynthesizeOptions.voice` takes for this engine. */
  id: string;
  name: string;
  engine: string;
  /** BCP-47 (en-US) or a bare language (en) as the provider says it; absent when it does not. */
  language?: string;
  gender?: 'female' | 'male';
  /** A short sample the provider hosts. */
  previewUrl?: string;
}
