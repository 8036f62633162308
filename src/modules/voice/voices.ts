// The voices an agent can name (GET /api/v2/voices, extension): for each engine agentTtsEngine
// takes, what its `agentVoice` may be. The streamed engines' lists come from the provider
// (TextToSpeech.listVoices) when this process has the engine's key, within a time bound and kept
// for a few minutes; espeak-ng's variants and the OpenAI voices are a static list. An engine this
// process has no key for lists nothing and says so. docs/voice.md, "Choosing a voice".
import { TTS_ENGINES, type TtsEngineName } from '../agents/catalog.ts';
import { ESPEAK_GENDER_VARIANTS } from '../../speech/espeak.ts';
import type { StreamedVoices } from '../../speech/registry.ts';
import type { TextToSpeech, VoiceInfo } from '../../speech/types.ts';

/** How long a provider's list is kept, and how long asking for it may take. */
export const VOICE_LIST_TTL_MS = 5 * 60_000;
export const VOICE_LIST_TIMEOUT_MS = 5000;
/** Most voices listed per engine (an account's library can be large). */
export const MAX_VOICES_PER_ENGINE = 500;

/** A voice as the API lists it. */
export interface ListedVoice {
  /** What agentVoice takes (with agentTtsEngine set to `engine`). */
  id: string;
  name: string;
  engine: TtsEngineName;
  /** BCP-47 or a bare language as the provider says it; null: any (the agent's agentLang). */
  language: string | null;
  gender: 'female' | 'male' | null;
  previewUrl: string | null;
}

/** What an engine gave: `available` false when this process cannot speak with it; `error` when its list could not be read. */
export interface EngineVoices {
  engine: TtsEngineName;
  available: boolean;
  error?: string;
}

/** OpenAI's documented voices (any OpenAI-compatible server may have others, named by agentVoice as well). */
const OPENAI_VOICES: readonly [string, 'female' | 'male' | null][] = [
  ['alloy', null], ['ash', 'male'], ['ballad', 'male'], ['coral', 'female'], ['echo', 'male'], ['fable', null],
  ['nova', 'female'], ['onyx', 'male'], ['sage', 'female'], ['shimmer', 'female'], ['verse', 'male'],
];
/** espeak-ng's variants (any language): the female and male ones of its voices/!v folder. */
const ESPEAK_VARIANTS: readonly [string, 'female' | 'male'][] = [
  ['f1', 'female'], ['f2', 'female'], ['f3', 'female'], ['f4', 'female'], ['f5', 'female'],
  ['m1', 'male'], ['m2', 'male'], ['m3', 'male'], ['m4', 'male'], ['m5', 'male'], ['m6', 'male'], ['m7', 'male'],
];

const staticVoice = (engine: TtsEngineName, id: string, name: string, gender: 'female' | 'male' | null): ListedVoice =>
  ({ id, name, engine, language: null, gender, previewUrl: null });

export interface VoicesDeps {
  /** The process's configured voice (CALLPLANE_TTS). */
  tts: TextToSpeech;
  voices?: StreamedVoices;
  now: () => number;
}

export interface VoicesService {
  list(engine?: TtsEngineName): Promise<{ success: true; voices: ListedVoice[]; engines: EngineVoices[] }>;
}

export function voicesService(deps: VoicesDeps): VoicesService {
  const kept = new Map<TtsEngineName, { at: number; voices: ListedVoice[] }>();

  async function provider(engine: 'elevenlabs' | 'cartesia' | 'deepgram'): Promise<{ voices: ListedVoice[]; about: EngineVoices }> {
    const tts = deps.voices?.[engine];
    if (!tts) return { voices: [], about: { engine, available: false } };
    const hit = kept.get(engine);
    if (hit && deps.now() - hit.at < VOICE_LIST_TTL_MS) return { voices: hit.voices, about: { engine, available: true } };
    try {
      // The time limit is the provider's: the vendor's client is loaded first.
      await tts.ready?.();
      const listed = await tts.listVoices(AbortSignal.timeout(VOICE_LIST_TIMEOUT_MS));
      const voices = listed.slice(0, MAX_VOICES_PER_ENGINE).map((v: VoiceInfo): ListedVoice => ({
        id: v.id, name: v.name, engine, language: v.language ?? null, gender: v.gender ?? null, previewUrl: v.previewUrl ?? null,
      }));
      kept.set(engine, { at: deps.now(), voices });
      return { voices, about: { engine, available: true } };
    } catch (err) {
      // An old list is better than none while the provider does not answer.
      const message = err instanceof Error ? err.message : String(err);
      return { voices: hit?.voices ?? [], about: { engine, available: true, error: message.slice(0, 300) } };
    }
  }

  async function of(engine: TtsEngineName): Promise<{ voices: ListedVoice[]; about: EngineVoices }> {
    switch (engine) {
      case 'espeak':
        return {
          voices: ESPEAK_VARIANTS.map(([id, gender]) => staticVoice(engine, id, `espeak-ng ${id}${ESPEAK_GENDER_VARIANTS[gender] === id ? ` (default ${gender})` : ''}`, gender)),
          about: { engine, available: deps.tts.name === 'espeak-ng' },
        };
      case 'openai':
        return { voices: OPENAI_VOICES.map(([id, gender]) => staticVoice(engine, id, id, gender)), about: { engine, available: deps.tts.name === 'openai' } };
      default:
        return provider(engine);
    }
  }

  return {
    async list(engine) {
      const results = await Promise.all((engine ? [engine] : TTS_ENGINES).map(of));
      return { success: true, voices: results.flatMap((r) => r.voices), engines: results.map((r) => r.about) };
    },
  };
}
