// Which speech engines a process runs, from its configuration (CALLPLANE_STT, CALLPLANE_TTS):
// there is always a real one, offline by default (pocketsphinx and espeak-ng from Debian), never a
// simulated one, and never a silent switch to a remote service: `openai` is chosen by name.
//
// What an agent asks for maps onto what is configured (docs/voice.md):
// - agentSttEngine (google, deepgram, deepgramflux, openai) runs on the configured recogniser;
//   sttFor() says when that is a substitution. With CALLPLANE_DEEPGRAM_API_KEY the process also
//   has Deepgram's engines (src/speech/deepgram.ts): the streaming `deepgram` (live) and
//   `deepgramflux`, and `deepgram` for one utterance. sttFor() hands the streaming one an agent
//   asks for to its caller, but voice sessions do not use it yet (issue 35): they still run on
//   `engine`, so `substituted` still says what they do.
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
import { CartesiaEngine } from './cartesia.ts';
import { DeepgramAuraEngine } from './deepgram-aura.ts';
import { ElevenLabsEngine } from './elevenlabs.ts';

export interface SpeechEngines {
  stt: SpeechToText;
  tts: TextToSpeech;
  /** The voice activity detector calls get (CALLPLANE_VAD: Silero where it loads, else energy). */
  vad: VadProvider;
  /** The streaming recognisers this process has keys for, by agentSttEngine value (none without a key). */
  streaming: { deepgram?: StreamingSpeechToText; deepgramflux?: StreamingSpeechToText };
  /** Remote one-utterance recognisers this process has keys for, by agentSttEngine value. */
  transcribers: { deepgram?: SpeechToText };
  /**
   * The streamed voices whose key is configured (CALLPLANE_ELEVENLABS_API_KEY, …): engines that
   * speak a reply as it streams and list their voices; a call uses one when its agent's
   * agentTtsEngine names it (src/modules/voice/speaker.ts, docs/voice.md "Choosing a voice").
   */
  voices?: StreamedVoices;
}

export type StreamedVoice = TextToSpeech & Required<Pick<TextToSpeech, 'openStream' | 'listVoices'>>;
export interface StreamedVoices {
  elevenlabs?: StreamedVoice;
  cartesia?: StreamedVoice;
  deepgram?: StreamedVoice;
}

/** The streamed voices of the configured providers (each only when its key is set). */
export function streamedVoices(config: SpeechConfig): StreamedVoices {
  const p = config.providers;
  const common = { timeoutMs: config.timeoutMs, maxRetries: config.maxRetries };
  return {
    ...(p.elevenlabs ? { elevenlabs: new ElevenLabsEngine({ apiKey: p.elevenlabs.apiKey, baseUrl: p.elevenlabs.url, ...common }) } : {}),
    ...(p.cartesia ? { cartesia: new CartesiaEngine({ apiKey: p.cartesia.apiKey, baseUrl: p.cartesia.url, ...common }) } : {}),
    ...(p.deepgram ? { deepgram: new DeepgramAuraEngine({ apiKey: p.deepgram.apiKey, baseUrl: p.deepgram.url, ...common }) } : {}),
  };
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
    voices: streamedVoices(config),
  };
}

function deepgramEngines(config: SpeechConfig): Pick<SpeechEngines, 'streaming' | 'transcribers'> {
  const dg = config.providers.deepgram;
  if (!dg) return { streaming: {}, transcribers: {} };
  const o = { apiKey: dg.apiKey, baseUrl: dg.url, requestTimeoutMs: config.timeoutMs, maxRetries: config.maxRetries };
  return {
    streaming: { deepgram: new DeepgramLive(o), deepgramflux: new DeepgramFlux(o) },
    transcribers: { deepgram: new DeepgramTranscriber(o) },
  };
}

/**
 * The recogniser for an agent whose agentSttEngine is `requested`: always the configured one;
 * `substituted` is true when the agent asked for another (google, deepgram, …), for the records.
 * `streaming` is the streaming engine asked for when this process has it (`deepgram`,
 * `deepgramflux` with a Deepgram key): real here, though sessions do not use it yet.
 */
export function sttFor(engines: SpeechEngines, requested: string | null | undefined): { engine: SpeechToText; substituted: boolean; streaming?: StreamingSpeechToText } {
  const streaming = requested === 'deepgram' || requested === 'deepgramflux' ? engines.streaming[requested] : undefined;
  return {
    engine: engines.stt,
    substituted: requested != null && requested !== '' && requested !== engines.stt.name,
    ...(streaming ? { streaming } : {}),
  };
}
