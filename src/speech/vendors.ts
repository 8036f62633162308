// The speech providers an organization or the process may hold keys for (issue 35), where each is
// reached by default, and the unit each counts its use in (docs/voice.md, docs/billing.md "Usage").
// Imports nothing: the speech-providers module (keys), billing (usage) and the registry
// (engines for given credentials) all read it.

/** Vendors of remote speech, as the API names them. */
export const SPEECH_VENDORS = ['deepgram', 'elevenlabs', 'cartesia', 'google', 'openai'] as const;
export type SpeechVendor = (typeof SPEECH_VENDORS)[number];

export const isSpeechVendor = (v: unknown): v is SpeechVendor => typeof v === 'string' && (SPEECH_VENDORS as readonly string[]).includes(v);

/**
 * Where each vendor is reached when no base URL is given: one base serves its HTTP API and, in
 * ws(s):// form, its WebSocket API. Google's is its gRPC endpoint, written as an https URL.
 */
export const SPEECH_VENDOR_URLS: Readonly<Record<SpeechVendor, string>> = {
  deepgram: 'https://api.deepgram.com',
  elevenlabs: 'https://api.elevenlabs.io',
  cartesia: 'https://api.cartesia.ai',
  google: 'https://speech.googleapis.com',
  openai: 'https://api.openai.com/v1',
};

/** What a vendor's use is counted in: seconds of audio recognised, characters synthesized. */
export type SpeechUnit = 'audioSeconds' | 'characters';

/**
 * The units each vendor is used (and billed by the vendor) in: recognition in seconds of audio
 * (Deepgram, Google, OpenAI), synthesis in characters (ElevenLabs, Cartesia, Deepgram Aura, OpenAI).
 */
export const SPEECH_VENDOR_UNITS: Readonly<Record<SpeechVendor, readonly SpeechUnit[]>> = {
  deepgram: ['audioSeconds', 'characters'],
  elevenlabs: ['characters'],
  cartesia: ['characters'],
  google: ['audioSeconds'],
  openai: ['audioSeconds', 'characters'],
};
