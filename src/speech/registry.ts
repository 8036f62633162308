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
//   `substituted` says so. With GOOGLE_APPLICATION_CREDENTIALS the same holds for Google's
//   (src/speech/google.ts): the streaming `google` and `google` for one utterance. With
//   CALLPLANE_STT=openai and a server offering Realtime transcription (CALLPLANE_STT_REALTIME,
//   src/speech/openai-realtime.ts), `openai` streams too; else it is the batch `engine`.
// - agentVoice (the catalog's `en-US Female`, …) gives a language and a gender: synthesize() takes
//   both, and each engine picks its voice from them (espeak-ng: en-US female → en-us+f3; OpenAI:
//   CALLPLANE_TTS_VOICES, nova for female and onyx for male by default).
// - An organization's own keys (src/modules/speech-providers/): vendorEngineCache() builds a
//   vendor's engines for given credentials (Google's: the service account's JSON key), once per
//   key, bounded.
import { createHash } from 'node:crypto';
import type { SpeechConfig } from '../config.ts';
import { vadProvider, type VadProvider } from './detectors.ts';
import { DeepgramFlux, DeepgramLive, DeepgramTranscriber } from './deepgram.ts';
import { EspeakEngine } from './espeak.ts';
import { GoogleStreaming, GoogleTranscriber } from './google.ts';
import { OpenAIRealtimeTranscription, offersRealtime } from './openai-realtime.ts';
import { OpenAISynthesizer, OpenAITranscriber, type OpenAISpeechOptions } from './openai-speech.ts';
import { PocketsphinxEngine } from './pocketsphinx.ts';
import type { SpeechToText, StreamingSpeechToText, TextToSpeech } from './types.ts';
import { CartesiaEngine } from './cartesia.ts';
import { DeepgramAuraEngine } from './deepgram-aura.ts';
import { ElevenLabsEngine } from './elevenlabs.ts';
import type { SpeechVendor } from './vendors.ts';

export interface SpeechEngines {
  stt: SpeechToText;
  tts: TextToSpeech;
  /** The voice activity detector calls get (CALLPLANE_VAD: Silero where it loads, else energy). */
  vad: VadProvider;
  /** The streaming recognisers this process has keys for, by agentSttEngine value (none without a key). */
  streaming: { deepgram?: StreamingSpeechToText; deepgramflux?: StreamingSpeechToText; google?: StreamingSpeechToText; openai?: StreamingSpeechToText };
  /** Remote one-utterance recognisers this process has keys for, by agentSttEngine value. */
  transcribers: { deepgram?: SpeechToText; google?: SpeechToText };
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
    ...remoteRecognisers(config),
    voices: streamedVoices(config),
  };
}

function remoteRecognisers(config: SpeechConfig): Pick<SpeechEngines, 'streaming' | 'transcribers'> {
  const deepgram = deepgramEngines(config);
  const google = googleEngines(config);
  const openai = config.stt === 'openai' ? realtimeFor(config, config.baseUrl, config.apiKey) : undefined;
  return { streaming: { ...deepgram.streaming, ...google.streaming, ...(openai ? { openai } : {}) }, transcribers: { ...deepgram.transcribers, ...google.transcribers } };
}

/** OpenAI's streaming transcription at `baseUrl`, where CALLPLANE_STT_REALTIME says the server offers it. */
function realtimeFor(config: SpeechConfig, baseUrl: string, apiKey: string | undefined): StreamingSpeechToText | undefined {
  if (!offersRealtime(baseUrl, config.sttRealtime)) return undefined;
  return new OpenAIRealtimeTranscription({ name: 'openai', baseUrl, apiKey, model: config.sttModel });
}

function googleEngines(config: SpeechConfig): Pick<SpeechEngines, 'streaming' | 'transcribers'> {
  if (!config.googleCredentials) return { streaming: {}, transcribers: {} };
  const o = { keyFile: config.googleCredentials, url: config.googleSpeechUrl, requestTimeoutMs: config.timeoutMs };
  return { streaming: { google: new GoogleStreaming(o) }, transcribers: { google: new GoogleTranscriber(o) } };
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
 * The recogniser for an agent whose agentSttEngine is `requested`: `streaming` is the streaming
 * engine asked for when this process has it (`deepgram`, `deepgramflux` with a Deepgram key, `google` with a service account key),
 * which calls hear with; `engine` is the configured one (what hears without `streaming`, and
 * after it fails), `substituted` true when the agent asked for another, for the records.
 */
export function sttFor(engines: Pick<SpeechEngines, 'stt' | 'streaming'>, requested: string | null | undefined): { engine: SpeechToText; substituted: boolean; streaming?: StreamingSpeechToText } {
  const streaming = requested === 'deepgram' || requested === 'deepgramflux' || requested === 'google' || requested === 'openai' ? engines.streaming[requested] : undefined;
  return {
    engine: engines.stt,
    substituted: requested != null && requested !== '' && requested !== engines.stt.name,
    ...(streaming ? { streaming } : {}),
  };
}

/** A vendor's key and where to reach it (an organization's own, or the process's). */
export interface SpeechCredentials {
  /** The key (Google: a service account's JSON key). */
  apiKey: string;
  /** The vendor's base URL (SPEECH_VENDOR_URLS when none is configured). */
  baseUrl: string;
}

/** The engines one vendor's credentials give, by what they do (none of a kind the vendor lacks here). */
export interface VendorEngines {
  /** Streaming recognisers, by agentSttEngine value. */
  streaming: { deepgram?: StreamingSpeechToText; deepgramflux?: StreamingSpeechToText; google?: StreamingSpeechToText; openai?: StreamingSpeechToText };
  /** One-utterance recognition. */
  stt?: SpeechToText;
  /** Synthesis. */
  tts?: TextToSpeech;
}

export interface VendorEngineCacheOptions {
  /** Engines kept built, at most (the least recently used go first; default 200). */
  max?: number;
  /** How the HTTP requests of engines that take it leave the process (the SSRF guard for an organization's URL). */
  fetch?: OpenAISpeechOptions['fetch'];
}

/**
 * Engines for given credentials, built once per vendor, base URL and key (keyed by a digest, so no
 * key is held as a map key) and kept up to `max`. Vendors whose engines this build lacks give
 * undefined. Built once per process (by the speech-providers service).
 */
export function vendorEngineCache(config: SpeechConfig, options: VendorEngineCacheOptions = {}) {
  const max = options.max ?? 200;
  const cache = new Map<string, VendorEngines | undefined>();
  const digest = (vendor: SpeechVendor, c: SpeechCredentials) => createHash('sha256').update(`${vendor}\0${c.baseUrl}\0${c.apiKey}`).digest('base64url');

  function build(vendor: SpeechVendor, c: SpeechCredentials): VendorEngines | undefined {
    const common = { requestTimeoutMs: config.timeoutMs, maxRetries: config.maxRetries };
    switch (vendor) {
      case 'deepgram': {
        const o = { apiKey: c.apiKey, baseUrl: c.baseUrl, ...common };
        return {
          streaming: { deepgram: new DeepgramLive(o), deepgramflux: new DeepgramFlux(o) }, stt: new DeepgramTranscriber(o),
          tts: new DeepgramAuraEngine({ apiKey: c.apiKey, baseUrl: c.baseUrl, timeoutMs: config.timeoutMs, maxRetries: config.maxRetries }),
        };
      }
      case 'elevenlabs':
        return { streaming: {}, tts: new ElevenLabsEngine({ apiKey: c.apiKey, baseUrl: c.baseUrl, timeoutMs: config.timeoutMs, maxRetries: config.maxRetries }) };
      case 'cartesia':
        return { streaming: {}, tts: new CartesiaEngine({ apiKey: c.apiKey, baseUrl: c.baseUrl, timeoutMs: config.timeoutMs, maxRetries: config.maxRetries }) };
      case 'openai': {
        const o = { name: 'openai', baseUrl: c.baseUrl, apiKey: c.apiKey, timeoutMs: config.timeoutMs, maxRetries: config.maxRetries, ...(options.fetch ? { fetch: options.fetch } : {}) };
        const realtime = realtimeFor(config, c.baseUrl, c.apiKey);
        return {
          streaming: realtime ? { openai: realtime } : {},
          stt: new OpenAITranscriber({ ...o, model: config.sttModel }),
          tts: new OpenAISynthesizer({ ...o, model: config.ttsModel, format: config.ttsFormat, voices: config.ttsVoices }),
        };
      }
      case 'google': {
        // The key is the service account's JSON; the base URL is its gRPC endpoint.
        const o = { keyJson: c.apiKey, url: c.baseUrl, requestTimeoutMs: config.timeoutMs };
        return { streaming: { google: new GoogleStreaming(o) }, stt: new GoogleTranscriber(o) };
      }
      default:
        return undefined;
    }
  }

  return {
    /** The engines of `vendor` with these credentials (undefined: this build has none for the vendor). */
    engineFor(vendor: SpeechVendor, credentials: SpeechCredentials): VendorEngines | undefined {
      const key = digest(vendor, credentials);
      if (cache.has(key)) {
        const hit = cache.get(key);
        cache.delete(key);
        cache.set(key, hit);
        return hit;
      }
      const built = build(vendor, credentials);
      cache.set(key, built);
      if (cache.size > max) cache.delete(cache.keys().next().value!);
      return built;
    },
    /** How many are kept (tests). */
    get size(): number {
      return cache.size;
    },
  };
}

export type VendorEngineCache = ReturnType<typeof vendorEngineCache>;
