// Which speech engines a process runs, from its configuration (CALLPLANE_STT, CALLPLANE_TTS):
// there is always a real one, offline by default (pocketsphinx and espeak-ng from Debian), never a
// simulated one, and never a silent switch to a remote service: `openai` is chosen by name.
//
// What an agent asks for maps onto what is configured (docs/voice.md):
// - agentSttEngine (google, deepgram, deepgramflux, openai): with CALLPLANE_DEEPGRAM_API_KEY the
//   process has Deepgram's engines (src/speech/deepgram.ts): the streaming `deepgram` (live) and
//   `deepgramflux`, and `deepgram` for one utterance. sttFor() hands the streaming one an agent
//   asks for to its caller, and calls stream to it (modules/voice/streaming-listener.ts), falling
//   back to `engine` if it fails; any other value runs on the configured recogniser, and
//   `substituted` says so.
// - agentVoice (the catalog's `en-US Female`, …) gives a language and a gender: synthesize() takes
//   both, and each engine picks its voice from them (espeak-ng: en-US female → en-us+f3; OpenAI:
//   CALLPLANE_TTS_VOICES, nova for female and onyx for male by default).
import type { SpeechConfig } from '../config.ts';
import { vadProvider, type VadProvider } from './detectors.ts';
import { DeepgramFlux, DeepgramLive, DeepgramTranscriber } from './deepgram.ts';
import { EspeakEngine } from './espeak.ts';
import { OpenAISynthesizer, OpenAITranscriber } from './openai-speech.ts';
import { PocketsphinxEngine } from './pocketsphinx.ts';
import type { SpeechToText, StreamingSpeechToText, TextToSpeech } from './types.ts';

export interface SpeechEngines {
  stt: SpeechToText;
  tts: TextToSpeech;
  /** The voice activity detector calls get (CALLPLANE_VAD: Silero where it loads, else energy). */
  vad: VadProvider;
  /** The streaming recognisers this process has keys for, by agentSttEngine value (none without a key). */
  streaming: { deepgram?: StreamingSpeechToText; deepgramflux?: StreamingSpeechToText };
  /** Remote one-utterance recognisers this process has keys for, by agentSttEngine value. */
  transcribers: { deepgram?: SpeechToText };
}

/** Builds the configured engines (once per process, in the composition root). */
export function speechEngines(config: SpeechConfig, log?: { warn(obj: object, msg: string): void }): SpeechEngines {
  const remote = { name: 'openai', baseUrl: config.baseUrl, apiKey: config.apiKey, timeoutMs: config.timeoutMs, maxRetries: config.maxRetries };
  return {
    stt: config.stt === 'openai' ? new OpenAITranscriber({ ...remote, model: config.sttModel }) : new PocketsphinxEngine(),
    tts: config.tts === 'openai'
      ? new OpenAISynthesizer({ ...remote, model: config.ttsModel, format: config.ttsFormat, voices: config.ttsVoices })
      : new EspeakEngine(),
    vad: vadProvider(config, log),
    ...deepgramEngines(config),
  };
}

function deepgramEngines(config: SpeechConfig): Pick<SpeechEngines, 'streaming' | 'transcribers'> {
  if (!config.deepgramApiKey) return { streaming: {}, transcribers: {} };
  const o = { apiKey: config.deepgramApiKey, baseUrl: config.deepgramUrl, requestTimeoutMs: config.timeoutMs, maxRetries: config.maxRetries };
  return {
    streaming: { deepgram: new DeepgramLive(o), deepgramflux: new DeepgramFlux(o) },
    transcribers: { deepgram: new DeepgramTranscriber(o) },
  };
}

/**
 * The recogniser for an agent whose agentSttEngine is `requested`: `streaming` is the streaming
 * engine asked for when this process has it (`deepgram`, `deepgramflux` with a Deepgram key),
 * which calls hear with; `engine` is the configured one (what hears without `streaming`, and
 * after it fails), `substituted` true when the agent asked for another, for the records.
 */
export function sttFor(engines: Pick<SpeechEngines, 'stt' | 'streaming'>, requested: string | null | undefined): { engine: SpeechToText; substituted: boolean; streaming?: StreamingSpeechToText } {
  const streaming = requested === 'deepgram' || requested === 'deepgramflux' ? engines.streaming[requested] : undefined;
  return {
    engine: engines.stt,
    substituted: requested != null && requested !== '' && requested !== engines.stt.name,
    ...(streaming ? { streaming } : {}),
  };
}
