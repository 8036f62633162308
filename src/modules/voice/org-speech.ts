// Which keys a call's remote speech engines use (issue 35): the organization's own enabled key for
// the vendor the agent names wins (speech-providers module), else the process's, else the
// configured engines as before. An organization's base URL that resolves to an address the policy
// refuses (TargetRefusedError) is treated like a refused key: the configured engine hears or
// speaks, and state.speech says why. The resolution is a port the voice module declares
// (SpeechKeys), given by the composition root. docs/voice.md, "Speech provider keys".
import { sttFor, type SpeechEngines, type StreamedVoice, type StreamedVoices } from '../../speech/registry.ts';
import type { StreamingSpeechToText, TextToSpeech } from '../../speech/types.ts';
import type { SpeechVendor } from '../../speech/vendors.ts';
import { TargetRefusedError } from '../../webhooks/ssrf.ts';
import type { SpeechKeySource, SpeechProvidersService } from '../speech-providers/service.ts';
import { callSpeaker, type CallSpeaker, type SpeakerDeps } from './speaker.ts';

type Log = { warn(obj: object, msg: string): void };

/** The engines of a vendor with the organization's key, or the process's (SpeechProvidersService.engines). */
export type SpeechKeys = Pick<SpeechProvidersService, 'engines'>;

export interface OrgSpeechDeps {
  /** Without it, calls use only the process's engines. */
  speechKeys?: SpeechKeys;
  log?: Log;
}

/** A vendor's engines for the organization; `refused` when its own base URL may not be reached; undefined when there is no key (or no engine of it here). */
async function vendorEngines(deps: OrgSpeechDeps, orgId: number | null, vendor: SpeechVendor) {
  if (!deps.speechKeys || orgId === null) return undefined;
  try {
    return await deps.speechKeys.engines(orgId, vendor);
  } catch (err) {
    if (err instanceof TargetRefusedError) return { refused: `the organization's ${vendor} base URL was refused: ${err.message}`.slice(0, 300) };
    deps.log?.warn({ orgId, vendor, err: (err as Error).message }, 'voice call: the organization\'s speech key could not be read: the process\'s engines are used');
    return undefined;
  }
}

/**
 * The streaming recogniser a call of the organization hears with, for agentSttEngine `requested`
 * (deepgram and deepgramflux: Deepgram's; google; openai where its server offers Realtime
 * transcription), and whose key it uses; `refused` (and no
 * engine) when the organization's key may not be used.
 */
export async function callRecogniser(
  deps: OrgSpeechDeps & Pick<SpeechEngines, 'stt'> & { streaming?: SpeechEngines['streaming'] },
  orgId: number,
  requested: string | null | undefined,
): Promise<{ streaming?: StreamingSpeechToText; source?: SpeechKeySource; refused?: string }> {
  const processOwn = sttFor({ stt: deps.stt, streaming: deps.streaming ?? {} }, requested).streaming;
  const fallback = processOwn ? { streaming: processOwn, source: 'process' as const } : {};
  if (requested !== 'deepgram' && requested !== 'deepgramflux' && requested !== 'google' && requested !== 'openai') return fallback;
  const found = await vendorEngines(deps, orgId, requested === 'deepgramflux' ? 'deepgram' : requested);
  if (found && 'refused' in found) return { refused: found.refused };
  const own = found?.engines.streaming[requested];
  return own ? { streaming: own, source: found!.source } : fallback;
}

const isStreamedVoice = (t: TextToSpeech | undefined): t is StreamedVoice => typeof t?.openStream === 'function' && typeof t.listVoices === 'function';

/** The voice of a call of the organization with `settings`: its streamed voice with the organization's key when it has one. */
export async function orgCallSpeaker(deps: SpeakerDeps & OrgSpeechDeps, settings: Parameters<typeof callSpeaker>[1], now: () => number, orgId: number | null): Promise<CallSpeaker> {
  const asked = settings.ttsEngine;
  if (asked !== 'elevenlabs' && asked !== 'cartesia' && asked !== 'deepgram') return callSpeaker(deps, settings, now);
  const found = await vendorEngines(deps, orgId, asked);
  if (found && 'refused' in found) return callSpeaker({ ...deps, voices: { ...deps.voices, [asked]: undefined } }, settings, now, { refused: found.refused });
  const voice = found?.engines.tts;
  if (found && isStreamedVoice(voice)) {
    const voices: StreamedVoices = { ...deps.voices, [asked]: voice };
    return callSpeaker({ ...deps, voices }, settings, now, { source: found.source, ...(found.source === 'organization' ? { owner: `organization ${orgId}` } : {}) });
  }
  return callSpeaker(deps, settings, now);
}
