// The TwiML of a spoken conversation over Twilio (docs/conversations.md, Voice over Twilio): how
// the agent's live configuration becomes <Say> voices and languages, <Gather> timeouts, the digits
// played on answer and the pause before the greeting, and the few fixed phrases the call itself
// says (still there? goodbye, sorry). Pure functions: no database, no request.
import { DEFAULT_WAIT_TO_GREET_SECONDS, xmlText } from '../../providers/index.ts';
import type { AgentConfig } from '../agents/validation.ts';

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

/** Characters one <Say> speaks at most (a spoken reply is meant to be a few sentences). */
export const MAX_SAY_CHARS = 3000;
/** Seconds of pause before the greeting at most (<Pause>; waitOnAnswer is at most 10 000 ms). */
const MAX_PAUSE_SECONDS = 10;

/** How the call speaks and listens, from the agent's live configuration. */
export interface VoiceStyle {
  /** <Say voice>: a Polly voice. */
  voice: string;
  /** <Say language>: the voice's own language. */
  sayLanguage: string;
  /** <Gather language>: what the caller is expected to speak (agentLang; the voice's for `multi`). */
  gatherLanguage: string;
  /** <Gather speechTimeout>, seconds of silence that end what the caller says (speakingTimeout). */
  speechTimeout: number;
  /** <Gather timeout>, seconds to wait for the caller to start speaking (callerResponseTimeout). */
  timeout: number;
}

const intIn = (v: unknown, min: number, max: number, dflt: number) =>
  (typeof v === 'number' && Number.isInteger(v) ? Math.min(Math.max(v, min), max) : dflt);

export function voiceStyle(config: AgentConfig): VoiceStyle {
  const v = (typeof config.agentVoice === 'string' && Object.hasOwn(TWILIO_VOICES, config.agentVoice)
    ? TWILIO_VOICES[config.agentVoice] : undefined) ?? DEFAULT_VOICE;
  const lang = typeof config.agentLang === 'string' ? config.agentLang : 'multi';
  // Twilio's speech recognition wants a language with its region: a bare `es` is the voice's
  // region when the voice speaks it, and is passed on as given otherwise.
  const gatherLanguage = lang === 'multi' ? v.language
    : !lang.includes('-') && v.language.toLowerCase().startsWith(`${lang.toLowerCase()}-`) ? v.language : lang;
  return {
    voice: v.voice,
    sayLanguage: v.language,
    gatherLanguage,
    speechTimeout: Math.max(1, Math.round(intIn(config.speakingTimeout, 100, 10_000, 1200) / 1000)),
    timeout: intIn(config.callerResponseTimeout, 1, 120, 13),
  };
}

/** What the call itself says, in the voice's language. */
export interface Phrases {
  stillThere: string;
  noResponseGoodbye: string;
  apology: string;
  failedGoodbye: string;
  cannotTransfer: string;
}

const PHRASES: Record<'en' | 'es' | 'fr' | 'de', Phrases> = {
  en: {
    stillThere: 'Are you still there?',
    noResponseGoodbye: 'I haven\'t heard anything, so I\'ll end the call now. Goodbye.',
    apology: 'Sorry, I\'m having trouble answering right now. Could you say that again?',
    failedGoodbye: 'Sorry, something went wrong on our side. Please try again later. Goodbye.',
    cannotTransfer: 'Sorry, I can\'t transfer this call.',
  },
  es: {
    stillThere: '¿Sigue ahí?',
    noResponseGoodbye: 'No he escuchado nada, así que voy a terminar la llamada. Adiós.',
    apology: 'Disculpe, tengo problemas para responder en este momento. ¿Podría repetirlo?',
    failedGoodbye: 'Disculpe, algo salió mal de nuestro lado. Inténtelo más tarde. Adiós.',
    cannotTransfer: 'Disculpe, no puedo transferir esta llamada.',
  },
  fr: {
    stillThere: 'Êtes-vous toujours là ?',
    noResponseGoodbye: 'Je n\'entends rien, je vais donc raccrocher. Au revoir.',
    apology: 'Désolé, j\'ai du mal à répondre pour le moment. Pouvez-vous répéter ?',
    failedGoodbye: 'Désolé, un problème est survenu de notre côté. Réessayez plus tard. Au revoir.',
    cannotTransfer: 'Désolé, je ne peux pas transférer cet appel.',
  },
  de: {
    stillThere: 'Sind Sie noch da?',
    noResponseGoodbye: 'Ich höre nichts mehr, deshalb beende ich jetzt den Anruf. Auf Wiederhören.',
    apology: 'Entschuldigung, ich kann gerade nicht antworten. Können Sie das bitte wiederholen?',
    failedGoodbye: 'Entschuldigung, bei uns ist etwas schiefgelaufen. Bitte versuchen Sie es später noch einmal. Auf Wiederhören.',
    cannotTransfer: 'Entschuldigung, ich kann diesen Anruf nicht weiterleiten.',
  },
};

export function phrasesFor(style: VoiceStyle): Phrases {
  const lang = style.sayLanguage.slice(0, 2).toLowerCase();
  return Object.hasOwn(PHRASES, lang) ? PHRASES[lang as keyof typeof PHRASES] : PHRASES.en;
}

const clip = (s: string, max: number) => (s.length > max ? `${s.slice(0, max)}…` : s);

/** A whole TwiML document of the given verbs. */
export function twimlDocument(...verbs: string[]): string {
  return `<?xml version="1.0" encoding="UTF-8"?><Response>${verbs.join('')}</Response>`;
}

/** <Say> in the agent's voice; nothing for empty text. Text is escaped: nothing said can add a verb. */
export function say(style: VoiceStyle, text: string): string {
  const t = text.trim();
  if (!t) return '';
  return `<Say voice="${xmlText(style.voice)}" language="${xmlText(style.sayLanguage)}">${xmlText(clip(t, MAX_SAY_CHARS))}</Say>`;
}

/**
 * <Gather> of the caller's speech, posted to `action` (also when nothing was said), with `inner`
 * (a <Say>) played inside it so the caller can speak over it.
 */
export function gather(style: VoiceStyle, action: string, inner = ''): string {
  const attrs = [
    'input="speech"', `language="${xmlText(style.gatherLanguage)}"`, `speechTimeout="${style.speechTimeout}"`, `timeout="${style.timeout}"`,
    `action="${xmlText(action)}"`, 'method="POST"', 'actionOnEmptyResult="true"',
  ];
  return `<Gather ${attrs.join(' ')}>${inner}</Gather>`;
}

/** <Dial> of an E.164 number. */
export function dial(number: string, whisperUrl?: string): string {
  // An attended transfer: Twilio runs the whisper URL's TwiML on the destination's side once it
  // answers, before the two calls are joined.
  if (whisperUrl) return `<Dial><Number url="${xmlText(whisperUrl)}" method="POST">${xmlText(number)}</Number></Dial>`;
  return `<Dial>${xmlText(number)}</Dial>`;
}

/** What an attended transfer's destination hears (<Number url>); ?conversation and ?name. */
export const TWILIO_WHISPER_PATH = '/api/v2/providers/twilio/voice/whisper';

/** Where Twilio fetches what an attended transfer's destination hears before it is joined. */
export function whisperUrl(publicUrl: string, conversationId: string, name: string | undefined): string {
  return `${publicUrl}${TWILIO_WHISPER_PATH}?conversation=${encodeURIComponent(conversationId)}&name=${encodeURIComponent((name ?? '').slice(0, 100))}`;
}

/** What the destination of an attended transfer hears before it is joined to the caller. */
export function transferAnnouncement(name: string | undefined): string {
  return `Hello, I have a caller for ${name?.trim() || 'you'} on the line. Connecting you now.`;
}

export const HANGUP = '<Hangup/>';

/**
 * What is played as the call is answered, before the greeting: postAnswerDtmf as <Play digits>
 * (`,` is Twilio's `w`, half a second; A–D, which Twilio cannot play, are left out), then
 * waitOnAnswer as <Pause> (milliseconds rounded up to seconds; a task's waitToGreet without
 * waitOnAnswer pauses DEFAULT_WAIT_TO_GREET_SECONDS).
 */
export function onAnswer(config: AgentConfig, waitToGreet: boolean): string[] {
  const out: string[] = [];
  const digits = (typeof config.postAnswerDtmf === 'string' ? config.postAnswerDtmf : '').replace(/,/g, 'w').replace(/[^0-9*#w]/g, '');
  if (/[0-9*#]/.test(digits)) out.push(`<Play digits="${xmlText(digits)}"/>`);
  const waitMs = intIn(config.waitOnAnswer, 0, MAX_PAUSE_SECONDS * 1000, 0);
  const seconds = waitMs > 0 ? Math.ceil(waitMs / 1000) : waitToGreet ? DEFAULT_WAIT_TO_GREET_SECONDS : 0;
  if (seconds > 0) out.push(`<Pause length="${Math.min(seconds, MAX_PAUSE_SECONDS)}"/>`);
  return out;
}

/**
 * <Connect><Stream>: a bidirectional Media Stream to `url` (wss://…) for the rest of the call, with
 * <Parameter>s Twilio hands back in the stream's `start` message (customParameters).
 */
export function connectStream(url: string, parameters: Record<string, string>): string {
  const params = Object.entries(parameters).map(([name, value]) => `<Parameter name="${xmlText(name)}" value="${xmlText(value)}"/>`).join('');
  return `<Connect><Stream url="${xmlText(url)}">${params}</Stream></Connect>`;
}

/** <Play digits> of keys (0-9, *, #, w for half a second); nothing when no key is left. */
export function playDigits(digits: string): string {
  const d = digits.replace(/,/g, 'w').replace(/[^0-9*#w]/g, '');
  return /[0-9*#]/.test(d) ? `<Play digits="${xmlText(d)}"/>` : '';
}
