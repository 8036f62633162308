// Which speech engines a process runs, from its configuration (CALLPLANE_STT, CALLPLANE_TTS):
// there is always a real one, offline by default (pocketsphinx and espeak-ng from Debian), never a
// simulated one, and never a silent switch to a remote service: `openai` is chosen by name.
//
// What an agent asks for maps onto what is configured (docs/voice.md):
// - agentSttEngine (google, deepgram, deepgramflux, openai) names services we hold no keys for,
//   so every value runs on the configured recogniser; sttFor() says when that is a substitution.
// - agentVoice (the catalog's `en-US Female`, …) gives a language and a gender: synthesize() takes
//   both, and each engine picks its voice from them (espeak-ng: en-US female → en-us+f3; OpenAI:
//   CALLPLANE_TTS_VOICES, nova for female and onyx for male by default).
import type { SpeechConfig } from '../config.ts';
import { vadProvider, type VadProvider } from './detectors.ts';
import { EspeakEngine } from './espeak.ts';
import { OpenAISynthesizer, OpenAITranscriber } from './openai-speech.ts';
import { PocketsphinxEngine } from './pocketsphinx.ts';
import type { SpeechToText, TextToSpeech } from './types.ts';
import { CartesiaEngine } from './cartesia.ts';
import { DeepgramAuraEngine } from './deepgram-aura.ts';
import { ElevenLabsEngine } from './elevenlabs.ts';

export interface SpeechEngines {
  stt: SpeechToText;
  tts: TextToSpeech;
  /** The voice activity detector calls get (CALLPLANE_VAD: Silero where it loads, else energy). */
  vad: VadProvider;
  /**
   * The streamed voices whose key is configured (CALLPLANE_ELEVENLABS_API_KEY, …): engines that
   * speak a reply as it streams and list their voices. Not used by calls yet (docs/voice.md).
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
  const p = config.voiceProviders;
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
    voices: streamedVoices(config),
  };
}

/**
 * The recogniser for an agent whose agentSttEngine is `requested`: always the configured one;
 * `substituted` is true when the agent asked for another (google, deepgram, …), for the records.
 */
export function sttFor(engines: SpeechEngines, requested: string | null | undefined): { engine: SpeechToText; substituted: boolean } {
  return { engine: engines.stt, substituted: requested != null && requested !== '' && requested !== engines.stt.name };
}
