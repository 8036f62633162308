// The voices an agent may name: POST /api/v2/agent refuses a voice not listed here (and a model
// not in the model catalog, src/modules/models/catalog.ts, whose hosted models are MODELS there).
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
