// The catalog voices agentVoice names when no voice engine is chosen (the configured voice speaks in
// the nearest of them). The API takes exactly src/modules/agents/catalog.ts's VOICES, which the
// console cannot import (it uses nothing of src/): test/unit/console-catalog-voices.test.ts keeps
// the two lists equal.
export const CATALOG_VOICES: readonly { id: string; lang: string; gender: 'female' | 'male' }[] = [
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
