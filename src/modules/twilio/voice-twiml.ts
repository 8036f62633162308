// The gather path's renderer (docs/conversations.md, Voice over Twilio): the call policy's
// decisions (voice/call-policy.ts) as TwiML — <Say> in the Polly voice of the agent's voice, <Gather>
// with the agent's timeouts, <Dial>, <Hangup> — built from Twilio's verbs
// (src/providers/twilio/twiml.ts). It decides nothing: what to say and do is the policy's.
import { dial, gather, HANGUP, pause, playDigits, say, twimlDocument } from '../../providers/twilio/twiml.ts';
import type { VoiceSettings } from '../agents/voice-settings.ts';
import type { AgentLine, CallAdmission, CallDecision, CallOpening } from '../voice/call-policy.ts';

/**
 * agentVoice (the catalog, src/modules/agents/catalog.ts) → the Amazon Polly neural voice Twilio
 * speaks it with, and that voice's language (<Say language>). A voice not listed speaks as
 * `en-US Female`.
 */
export const TWILIO_VOICES: Readonly<Record<string, { voice: string; language: string }>> = Object.freeze({
  'en-US Female': { voice: 'Polly.Joanna-Neural', language: 'en-US' },
  'en-US Male': { voice: 'Polly.Matthew-Neural', language: 'en-US' },
  'en-GB Female': { voice: 'Polly.Amy-Neural', language: 'en-GB' },
  'en-GB Male': { voice: 'Polly.Brian-Neural', language: 'en-GB' },
  'es-US Female': { voice: 'Polly.Lupe-Neural', language: 'es-US' },
  'es-US Male': { voice: 'Polly.Pedro-Neural', language: 'es-US' },
  'es-MX Female': { voice: 'Polly.Mia-Neural', language: 'es-MX' },
  'es-ES Female': { voice: 'Polly.Lucia-Neural', language: 'es-ES' },
  'fr-FR Female': { voice: 'Polly.Lea-Neural', language: 'fr-FR' },
  'de-DE Female': { voice: 'Polly.Vicki-Neural', language: 'de-DE' },
});
const DEFAULT_VOICE = TWILIO_VOICES['en-US Female']!;

/** How the call speaks and listens on Twilio, from the agent's settings. */
export interface VoiceStyle {
  /** <Say voice> and <Say language>: a Polly voice and its own language. */
  say: { voice: string; language: string };
  /** <Gather language>: what the caller is expected to speak (the settings' language; a bare tag completed with the voice's region). */
  gatherLanguage: string;
  /** <Gather speechTimeout>, seconds of silence that end what the caller says (speakingTimeout). */
  speechTimeout: number;
  /** <Gather timeout>, seconds to wait for the caller to start speaking (callerResponseTimeout). */
  timeout: number;
}

export function voiceStyle(settings: VoiceSettings): VoiceStyle {
  const v = (Object.hasOwn(TWILIO_VOICES, settings.voice) ? TWILIO_VOICES[settings.voice] : undefined) ?? DEFAULT_VOICE;
  const lang = settings.agentLang;
  // Twilio's speech recognition wants a language with its region: a bare `es` is the voice's
  // region when the voice speaks it, and is passed on as given otherwise.
  const gatherLanguage = lang === 'multi' ? settings.language
    : !lang.includes('-') && v.language.toLowerCase().startsWith(`${lang.toLowerCase()}-`) ? v.language : lang;
  return {
    say: v,
    gatherLanguage,
    speechTimeout: Math.max(1, Math.round(settings.speakingTimeoutMs / 1000)),
    timeout: Math.round(settings.callerResponseTimeoutMs / 1000),
  };
}

/** Where the gather posts, and where an attended transfer's whisper is fetched. */
export interface GatherTargets {
  action: string;
  whisper(name: string): string;
}

/** Listening: `lines` said, the last one inside the <Gather> so the caller can speak over it. */
function listen(style: VoiceStyle, action: string, lines: string[]): string[] {
  const said = lines.filter((t) => t.trim());
  const last = said.pop();
  const g = { language: style.gatherLanguage, speechTimeout: style.speechTimeout, timeout: style.timeout, action };
  return [...said.map((t) => say(style.say, t)), gather(g, last ? say(style.say, last) : '')];
}

/**
 * The opening (voice/call-policy.ts callOpening) as the answer's TwiML: the keys on answer
 * (postAnswerDtmf: `,` is Twilio's `w`; A-D, which Twilio cannot play, are left out), the pause
 * (milliseconds rounded up to seconds), the recording notice, then the greeting inside the first
 * <Gather>.
 */
export function renderOpening(style: VoiceStyle, opening: CallOpening, action: string, ringMs = 0): string {
  return twimlDocument(
    ringBeforeAnswer(ringMs), playDigits(opening.digits), pause(opening.pauseMs / 1000),
    ...listen(style, action, [opening.disclosure?.text ?? '', opening.notice?.text ?? '', opening.greeting?.text ?? '']),
  );
}

/**
 * preAnswerRingTime on Twilio: a <Pause> as the document's first verb makes Twilio wait that long
 * before it picks up (the caller hears it ring). Up to the field's 60 s, unlike pause().
 */
export function ringBeforeAnswer(ms: number): string {
  const s = Math.min(Math.ceil(ms / 1000), 60);
  return s > 0 ? `<Pause length="${s}"/>` : '';
}

/**
 * An inbound call the admission rule did not let the agent answer, as TwiML: a rejection is
 * <Reject> (busy for 486 and 600, else rejected: Twilio has no other codes); a transfer is <Dial>.
 */
export function renderRefusal(admission: Exclude<CallAdmission, { action: 'answer' }>): string {
  if (admission.action === 'reject') return twimlDocument(`<Reject reason="${admission.code === 486 || admission.code === 600 ? 'busy' : 'rejected'}"/>`);
  return twimlDocument(dial(admission.destination));
}

/** A decision of the policy as TwiML, after `reply` (the agent's words this turn, if any). */
export function renderDecision(style: VoiceStyle, decision: Exclude<CallDecision, { next: 'answer' }>, targets: GatherTargets, reply = ''): string {
  const line = (l: AgentLine | undefined) => l?.text ?? '';
  switch (decision.next) {
    case 'listen':
      return twimlDocument(...listen(style, targets.action, [reply, line(decision.say)]));
    case 'hangup':
      return twimlDocument(say(style.say, reply), say(style.say, line(decision.say)), HANGUP);
    case 'transfer':
      return twimlDocument(say(style.say, reply), dial(decision.destination, decision.attended ? targets.whisper(decision.name) : undefined));
  }
}
