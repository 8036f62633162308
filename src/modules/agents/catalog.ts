// The voices an agent may name: POST /api/v2/agent refuses a voice not listed here (and a model
// not in the model catalog, src/modules/models/catalog.ts, whose hosted models are MODELS there),
// unless agentTtsEngine names an engine and the voice is that engine's own voice id.
import { CARTESIA_VOICE_ID } from '../../speech/cartesia.ts';
import { DEEPGRAM_AURA_VOICE_ID } from '../../speech/deepgram-aura.ts';
import { ELEVENLABS_VOICE_ID } from '../../speech/elevenlabs.ts';
import { ESPEAK_VARIANT } from '../../speech/espeak.ts';
import { OPENAI_VOICE_NAME } from '../../speech/openai-speech.ts';

export interface VoiceEntry {
  id: string;
  /** The language the voice speaks (BCP-47). */
  lang: string;
  gender: 'female' | 'male';
}

export const VOICES: readonly VoiceEntry[] = [
  { id: 'en-US Female', lang: 'en-US', gender: 'female' },
  { id: 'en-US Male', lang: 'en-US', gender: 'male' },
  { id: 'en-GB Female', lang: 'en-GB', gender: 'female' },
  { id: 'en-GB Male', lang: 'en-GB', gender: 'male' },
  { id: 'es-US Female', lang: 'es-US', gender: 'female' },
  { id: 'es-US Male', lang: 'es-US', gender: 'male' },
  { id: 'es-MX Female', lang: 'es-MX', gender: 'female' },
  { id: 'es-ES Female', lang: 'es-ES', gender: 'female' },
  { id: 'fr-FR Female', lang: 'fr-FR', gender: 'female' },
  { id: 'de-DE Female', lang: 'de-DE', gender: 'female' },
];

export const VOICE_IDS: readonly string[] = VOICES.map((v) => v.id);
export const DEFAULT_MODEL = 'gpt-4o-2024-08-06';
export const DEFAULT_THINKING_MODEL = 'gpt-5.2';
export const DEFAULT_VOICE = 'en-US Female';

/**
 * The text-to-speech engines an agent may name (agentTtsEngine, extension): the offline espeak-ng,
 * an OpenAI-compatible speech server, and the streamed voices (ElevenLabs, Cartesia, Deepgram
 * Aura). None (null) is the process's configured voice.
 */
export const TTS_ENGINES = ['espeak', 'openai', 'elevenlabs', 'cartesia', 'deepgram'] as const;
export type TtsEngineName = typeof TTS_ENGINES[number];
/** The engines that speak a reply as it streams (src/speech/registry.ts StreamedVoices). */
export const STREAMED_TTS_ENGINES = ['elevenlabs', 'cartesia', 'deepgram'] as const satisfies readonly TtsEngineName[];

/** What a provider's own voice id looks like (agentVoice with agentTtsEngine naming it), with an example. */
export const VOICE_ID_FORMS: Readonly<Record<TtsEngineName, { pattern: RegExp; example: string }>> = {
  espeak: { pattern: ESPEAK_VARIANT, example: 'f3' },
  openai: { pattern: OPENAI_VOICE_NAME, example: 'nova' },
  elevenlabs: { pattern: ELEVENLABS_VOICE_ID, example: 'EXAVITQu4vr4xnSDxMaL' },
  cartesia: { pattern: CARTESIA_VOICE_ID, example: 'f786b574-daa5-4673-aa0c-cbe3e8534c02' },
  deepgram: { pattern: DEEPGRAM_AURA_VOICE_ID, example: 'aura-2-thalia-en' },
};

/** The catalog voice `id` names, or undefined for a provider's own voice id. */
export function catalogVoice(id: string): VoiceEntry | undefined {
  return VOICES.find((v) => v.id === id);
}
