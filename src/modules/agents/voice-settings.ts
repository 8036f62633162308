// What a phone call reads of an agent's configuration, each field's default and range resolved
// once, from the field table itself (validation.ts: its schema's minimum/maximum, and the default
// a new agent gets). Every voice path (Twilio <Gather>, Media Streams, SIP) and the call policy
// take these settings, never the raw configuration: a stored snapshot may predate a field or its
// range, so a missing or out-of-range value is resolved here, the same way for everyone. It lives
// beside the field table (not in conversations) because the table is what it reads; the
// conversations module already depends on agents, never the other way.
import { DEFAULT_VOICE, VOICES } from './catalog.ts';
import { defaultConfig, FIELDS, type AgentConfig, type AgentField } from './validation.ts';

const DEFAULTS = defaultConfig('');

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
  /** backgroundAudio with the contract's defaults (loop, gain 0, after the greeting, bg); null for none. */
  backgroundAudio: BackgroundSetting | null;
  /** voicemailAction: what an outbound call does when a machine answers (voice/call-policy.ts voicemailPlan). */
  voicemailAction: 'hangup' | 'leave-message' | 'continue';
  /** voicemailMessage, trimmed: the message left on a machine ('' for the welcomeMessage). */
  voicemailMessage: string;
}

function range(field: AgentField): { min: number; max: number } {
  const s = FIELDS[field].schema as { minimum?: number; maximum?: number };
  return { min: s.minimum ?? -Infinity, max: s.maximum ?? Infinity };
}

/** An integer field: its value clamped into the schema's range, or its default when it is not an integer. */
export function intSetting(config: AgentConfig, field: AgentField): number {
  const v = config[field];
  const d = DEFAULTS[field] as number;
  const { min, max } = range(field);
  return typeof v === 'number' && Number.isInteger(v) ? Math.min(Math.max(v, min), max) : d;
}

const text = (v: unknown, d = ''): string => (typeof v === 'string' ? v : d);

function background(v: unknown): BackgroundSetting | null {
  if (typeof v === 'string' && v) return { url: v, loop: true, gain: 0, startAfterGreeting: true, track: 'bg' };
  if (!v || typeof v !== 'object' || Array.isArray(v)) return null;
  const o = v as Record<string, unknown>;
  if (typeof o.url !== 'string' || !o.url) return null;
  return {
    url: o.url,
    loop: o.loop !== false,
    gain: typeof o.gain === 'number' && Number.isFinite(o.gain) ? Math.max(-40, Math.min(20, o.gain)) : 0,
    startAfterGreeting: o.startAfterGreeting !== false,
    track: o.track === 'fx' ? 'fx' : 'bg',
  };
}

export function voiceSettings(config: AgentConfig): VoiceSettings {
  const agentLang = text(config.agentLang) || 'multi';
  const voice = text(config.agentVoice) || DEFAULT_VOICE;
  const notification = String(config.autoRecordingNotification ?? DEFAULTS.autoRecordingNotification);
  return {
    language: agentLang !== 'multi' ? agentLang : VOICES.find((v) => v.id === voice)?.lang ?? 'en-US',
    agentLang,
    voice,
    gender: /male$/i.test(voice) && !/female$/i.test(voice) ? 'male' : 'female',
    speakingTimeoutMs: intSetting(config, 'speakingTimeout'),
    callerResponseTimeoutMs: intSetting(config, 'callerResponseTimeout') * 1000,
    noResponsePrompts: intSetting(config, 'callerResponseTimeoutHangupCounter'),
    interruptionWords: intSetting(config, 'interruptionWordCount'),
    interruptionMinimumSpeakingMs: intSetting(config, 'interruptionMinimumSpeakingTime') * 1000,
    waitOnAnswerMs: intSetting(config, 'waitOnAnswer'),
    postAnswerDtmf: text(config.postAnswerDtmf),
    welcomeMessage: text(config.welcomeMessage).trim(),
    attendedTransfers: config.attendedTransfers === true,
    recordingNotification: notification === 'always' || notification === 'false' ? notification : 'true',
    recordingNotificationPhrase: text(config.recordingNotificationPhrase).trim() || DEFAULTS.recordingNotificationPhrase!,
    backgroundAudio: background(config.backgroundAudio),
    voicemailAction: config.voicemailAction === 'hangup' || config.voicemailAction === 'leave-message' ? config.voicemailAction : 'continue',
    voicemailMessage: text(config.voicemailMessage).trim(),
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

/** The agent's admission rules for an inbound call, from its live configuration. */
export function admissionSettings(config: AgentConfig): AdmissionSettings {
  const ring = config.preAnswerRingTime;
  const { min, max } = range('preAnswerRingTime');
  const nonEmpty = (v: unknown) => (typeof v === 'string' && v.trim() !== '' ? v : null);
  return {
    ringMs: typeof ring === 'number' && Number.isInteger(ring) ? Math.min(Math.max(ring, min), max) * 1000 : 0,
    rejectRegex: nonEmpty(config.cnamAutoRejectRegex),
    rejectCode: intSetting(config, 'cnamAutoRejectCode'),
    transferRegex: nonEmpty(config.cnamAutoTransferRegex),
    transferDestination: nonEmpty(config.cnamAutoTransferDestination)?.trim() ?? null,
  };
}
