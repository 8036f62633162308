// What a phone call reads of an agent, in the units a call uses: derived from the agent's resolved
// settings (settings.ts: every field with its default, clamped into the field table's ranges).
// Every voice path (Twilio <Gather>, Media Streams, SIP) and the call policy take these, never the
// raw configuration. It lives beside the field table (not in conversations) because the table is
// what it reads; the conversations module already depends on agents, never the other way.
import { catalogVoice, VOICE_ID_FORMS, VOICES, type TtsEngineName } from './catalog.ts';
import { DEFAULT_SETTINGS, resolveAgentSettings, type AgentSettings } from './settings.ts';
import type { AgentConfig } from './validation.ts';

export interface BackgroundSetting {
  url: string;
  loop: boolean;
  /** dB, −40 to +20 (0: as recorded). */
  gain: number;
  startAfterGreeting: boolean;
  track: 'bg' | 'fx';
}

export interface VoiceSettings {
  /**
   * BCP-47 tag the agent speaks and listens in, on every path: agentLang; for `multi`, the language
   * of its voice (agentVoice in the catalog), else `en-US`.
   */
  language: string;
  /** agentLang as set: `multi`, a bare `es`, or a tag with its region. */
  agentLang: string;
  /** agentVoice (a catalog id such as `es-US Female`). */
  voice: string;
  gender: 'male' | 'female';
  /** agentTtsEngine: the engine the agent asks to speak with; null for the process's configured voice. */
  ttsEngine: TtsEngineName | null;
  /**
   * agentVoice when it is ttsEngine's own voice id (not a catalog voice); undefined otherwise, when
   * the engine picks its default voice for `language` and `gender`.
   */
  engineVoice?: string;
  /** speakingTimeout: silence that ends the caller's turn, ms. */
  speakingTimeoutMs: number;
  /** callerResponseTimeout: caller silence before "are you still there?", ms. */
  callerResponseTimeoutMs: number;
  /** callerResponseTimeoutHangupCounter: times the agent asks before it hangs up. */
  noResponsePrompts: number;
  /** interruptionWordCount: words of the caller that make a barge-in. */
  interruptionWords: number;
  /** interruptionMinimumSpeakingTime: how long the agent's reply has been heard before it can be cut, ms. */
  interruptionMinimumSpeakingMs: number;
  /** waitOnAnswer: pause before the greeting, ms. */
  waitOnAnswerMs: number;
  /** postAnswerDtmf as written (0-9 * # A-D, w or , for a pause). */
  postAnswerDtmf: string;
  /** welcomeMessage, trimmed. */
  welcomeMessage: string;
  attendedTransfers: boolean;
  /** autoRecordingNotification. */
  recordingNotification: 'true' | 'false' | 'always';
  /** recordingNotificationPhrase, trimmed; the default when empty. */
  recordingNotificationPhrase: string;
  /** aiDisclosure, trimmed: said first on every call ('' for none). */
  aiDisclosure: string;
  /** recordingConsent: off, announce (the notice on every recorded call) or ask (recordingConsentQuestion; a "no" stops the recording). */
  recordingConsent: 'off' | 'announce' | 'ask';
  /** recordingConsentQuestion, trimmed; the default when empty. */
  recordingConsentQuestion: string;
  /** backgroundAudio with the contract's defaults (loop, gain 0, after the greeting, bg); null for none. */
  backgroundAudio: BackgroundSetting | null;
  /** voicemailAction: what an outbound call does when a machine answers (voice/call-policy.ts voicemailPlan). */
  voicemailAction: 'hangup' | 'leave-message' | 'continue';
  /** voicemailMessage, trimmed: the message left on a machine ('' for the welcomeMessage). */
  voicemailMessage: string;
}

function background(v: AgentSettings['backgroundAudio']): BackgroundSetting | null {
  if (v === null || v === '') return null;
  if (typeof v === 'string') return { url: v, loop: true, gain: 0, startAfterGreeting: true, track: 'bg' };
  return { url: v.url, loop: v.loop !== false, gain: typeof v.gain === 'number' && Number.isFinite(v.gain) ? Math.max(-40, Math.min(20, v.gain)) : 0, startAfterGreeting: v.startAfterGreeting !== false, track: v.track === 'fx' ? 'fx' : 'bg' };
}

/** Whether agentVoice is the named engine's own voice id (a catalog voice is not). */
function engineVoice(s: AgentSettings): boolean {
  return s.agentTtsEngine !== null && !catalogVoice(s.agentVoice) && VOICE_ID_FORMS[s.agentTtsEngine].pattern.test(s.agentVoice);
}

/** What a call reads of the agent: its settings (or a configuration, resolved here) in the units a call uses. */
export function voiceSettings(config: AgentConfig | AgentSettings): VoiceSettings {
  const s = resolveAgentSettings(config);
  return {
    language: s.agentLang !== 'multi' ? s.agentLang : VOICES.find((v) => v.id === s.agentVoice)?.lang ?? 'en-US',
    agentLang: s.agentLang,
    voice: s.agentVoice,
    gender: /male$/i.test(s.agentVoice) && !/female$/i.test(s.agentVoice) ? 'male' : 'female',
    ttsEngine: s.agentTtsEngine,
    ...(engineVoice(s) ? { engineVoice: s.agentVoice } : {}),
    speakingTimeoutMs: s.speakingTimeout,
    callerResponseTimeoutMs: s.callerResponseTimeout * 1000,
    noResponsePrompts: s.callerResponseTimeoutHangupCounter,
    interruptionWords: s.interruptionWordCount,
    interruptionMinimumSpeakingMs: s.interruptionMinimumSpeakingTime * 1000,
    waitOnAnswerMs: s.waitOnAnswer,
    postAnswerDtmf: s.postAnswerDtmf,
    welcomeMessage: s.welcomeMessage.trim(),
    attendedTransfers: s.attendedTransfers,
    recordingNotification: s.autoRecordingNotification === 'always' || s.autoRecordingNotification === 'false' ? s.autoRecordingNotification : 'true',
    recordingNotificationPhrase: s.recordingNotificationPhrase.trim() || DEFAULT_SETTINGS.recordingNotificationPhrase,
    aiDisclosure: s.aiDisclosure.trim(),
    recordingConsent: s.recordingConsent === 'announce' || s.recordingConsent === 'ask' ? s.recordingConsent : 'off',
    recordingConsentQuestion: s.recordingConsentQuestion.trim() || DEFAULT_SETTINGS.recordingConsentQuestion,
    backgroundAudio: background(s.backgroundAudio),
    voicemailAction: s.voicemailAction === 'hangup' || s.voicemailAction === 'leave-message' ? s.voicemailAction : 'continue',
    voicemailMessage: s.voicemailMessage.trim(),
  };
}

/** What decides whether and how an inbound call is answered (voice/call-policy.ts callAdmission). */
export interface AdmissionSettings {
  /** preAnswerRingTime: ringing before the agent answers, ms (0 for none). */
  ringMs: number;
  /** cnamAutoRejectRegex (checked when written: compiles, cannot backtrack catastrophically); null for none. */
  rejectRegex: string | null;
  /** cnamAutoRejectCode: the SIP code of such a rejection (400-699). */
  rejectCode: number;
  /** cnamAutoTransferRegex; null for none. */
  transferRegex: string | null;
  /** cnamAutoTransferDestination: E.164, ext:NNN or pbx:NNN; null for none. */
  transferDestination: string | null;
}

/** The agent's admission rules for an inbound call, from its live settings (or a configuration, resolved here). */
export function admissionSettings(config: AgentConfig | AgentSettings): AdmissionSettings {
  const s = resolveAgentSettings(config);
  const nonEmpty = (v: string | null) => (v !== null && v.trim() !== '' ? v : null);
  return {
    ringMs: (s.preAnswerRingTime ?? 0) * 1000,
    rejectRegex: nonEmpty(s.cnamAutoRejectRegex),
    rejectCode: s.cnamAutoRejectCode,
    transferRegex: nonEmpty(s.cnamAutoTransferRegex),
    transferDestination: nonEmpty(s.cnamAutoTransferDestination)?.trim() ?? null,
  };
}
