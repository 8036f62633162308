// The one call policy of every spoken conversation (docs/conversations.md, "The call policy"):
// given the call's settings (agents/voice-settings.ts) and what just happened — the caller was
// heard, stayed silent, pressed a key; the agent's turn failed or took too long; the reply
// finished with its effects; a transfer failed — it decides what the agent says (in the agent's
// language) and what the call does next, with the same limits on every path. Pure: no I/O, no
// timers, no clock. The paths only render its decisions: TwiML on Twilio <Gather>
// (twilio/calls.ts), audio and signalling in the voice session (session.ts) over Media
// Streams and SIP. What a path cannot do is said once, in CAPABILITIES below.
import type { ConversationOutcome } from '../../db/types.ts';
import { twilioDials } from '../../providers/twilio/twiml.ts';
import { DEFAULT_WAIT_TO_GREET_SECONDS } from '../../providers/index.ts';
import type { AdmissionSettings, VoiceSettings } from '../agents/voice-settings.ts';
import type { ToolEffect } from '../conversations/tools.ts';

/**
 * How long one agent turn (the model and the tools it calls) may take on any path. Twilio waits
 * about 15 s for the answer to a gather action; a voice session would otherwise hold dead air.
 * Past it the turn is aborted and counts as failed (turn-limit.ts runs every path's turns under it).
 */
export const VOICE_TURN_TIMEOUT_MS = 10_000;
/** Failed turns in a row (model errors, turns past the limit) after which the call says sorry and hangs up `failed`. */
export const MAX_TURN_FAILURES = 3;
/** Longest pause before the greeting (waitOnAnswer is at most 10 000 ms). */
export const MAX_OPENING_PAUSE_MS = 10_000;

/** What the call itself says (everything else the agent says is the model's), in one language. */
export interface Phrases {
  stillThere: string;
  noResponseGoodbye: string;
  apology: string;
  failedGoodbye: string;
  /** Said when the process carrying the call stops and the drain time has passed (docs/deploy.md). */
  shutdownGoodbye: string;
  cannotTransfer: string;
  transferFailed: string;
  /** What an attended transfer's destination hears before it is joined; `{name}` is the destination's name. */
  transferAnnouncement: string;
  /** `{name}` when the destination has none. */
  you: string;
}

const PHRASES: Record<'en' | 'es' | 'fr' | 'de', Phrases> = {
  en: {
    stillThere: 'Are you still there?',
    noResponseGoodbye: 'I haven\'t heard anything, so I\'ll end the call now. Goodbye.',
    apology: 'Sorry, I\'m having trouble answering right now. Could you say that again?',
    failedGoodbye: 'Sorry, something went wrong on our side. Please try again later. Goodbye.',
    shutdownGoodbye: 'I\'m sorry, I have to end our call now. Please call back if there is anything else. Goodbye.',
    cannotTransfer: 'Sorry, I can\'t transfer this call.',
    transferFailed: 'Sorry, I could not transfer your call. How else can I help?',
    transferAnnouncement: 'Hello, I have a caller for {name} on the line. Connecting you now.',
    you: 'you',
  },
  es: {
    stillThere: '¿Sigue ahí?',
    noResponseGoodbye: 'No he escuchado nada, así que voy a terminar la llamada. Adiós.',
    apology: 'Disculpe, tengo problemas para responder en este momento. ¿Podría repetirlo?',
    failedGoodbye: 'Disculpe, algo salió mal de nuestro lado. Inténtelo más tarde. Adiós.',
    shutdownGoodbye: 'Lo siento, tengo que terminar la llamada ahora. Vuelva a llamar si necesita algo más. Adiós.',
    cannotTransfer: 'Disculpe, no puedo transferir esta llamada.',
    transferFailed: 'Disculpe, no pude transferir su llamada. ¿En qué más puedo ayudarle?',
    transferAnnouncement: 'Hola, tengo en la línea una llamada para {name}. Le comunico ahora.',
    you: 'usted',
  },
  fr: {
    stillThere: 'Êtes-vous toujours là ?',
    noResponseGoodbye: 'Je n\'entends rien, je vais donc raccrocher. Au revoir.',
    apology: 'Désolé, j\'ai du mal à répondre pour le moment. Pouvez-vous répéter ?',
    failedGoodbye: 'Désolé, un problème est survenu de notre côté. Réessayez plus tard. Au revoir.',
    shutdownGoodbye: 'Désolé, je dois mettre fin à notre appel maintenant. Rappelez-nous si besoin. Au revoir.',
    cannotTransfer: 'Désolé, je ne peux pas transférer cet appel.',
    transferFailed: 'Désolé, je n\'ai pas pu transférer votre appel. Puis-je vous aider autrement ?',
    transferAnnouncement: 'Bonjour, j\'ai un appel pour {name} en ligne. Je vous mets en relation.',
    you: 'vous',
  },
  de: {
    stillThere: 'Sind Sie noch da?',
    noResponseGoodbye: 'Ich höre nichts mehr, deshalb beende ich jetzt den Anruf. Auf Wiederhören.',
    apology: 'Entschuldigung, ich kann gerade nicht antworten. Können Sie das bitte wiederholen?',
    failedGoodbye: 'Entschuldigung, bei uns ist etwas schiefgelaufen. Bitte versuchen Sie es später noch einmal. Auf Wiederhören.',
    shutdownGoodbye: 'Entschuldigung, ich muss unser Gespräch jetzt beenden. Rufen Sie gern wieder an. Auf Wiederhören.',
    cannotTransfer: 'Entschuldigung, ich kann diesen Anruf nicht weiterleiten.',
    transferFailed: 'Entschuldigung, ich konnte Ihren Anruf nicht weiterleiten. Wie kann ich Ihnen sonst helfen?',
    transferAnnouncement: 'Hallo, ich habe einen Anrufer für {name} in der Leitung. Ich verbinde jetzt.',
    you: 'Sie',
  },
};

/** The call's own phrases in `language` (a BCP-47 tag); English for a language not listed. */
export function phrasesFor(language: string): Phrases {
  const lang = language.slice(0, 2).toLowerCase();
  return Object.hasOwn(PHRASES, lang) ? PHRASES[lang as keyof typeof PHRASES] : PHRASES.en;
}

/** What the destination of an attended transfer hears before it is joined to the caller. */
export function transferAnnouncement(language: string, name: string | undefined): string {
  const p = phrasesFor(language);
  return p.transferAnnouncement.replace('{name}', name?.trim() || p.you);
}

/** A line the call says, and the kind it is recorded as (messages.data.kind). */
export interface AgentLine {
  text: string;
  kind: 'ai_disclosure' | 'consent_question' | 'welcome' | 'recording_notice' | 'still_there' | 'no_response' | 'apology' | 'failed' | 'transfer_refused' | 'transfer_failed' | 'voicemail_message' | 'shutdown';
}

/** What a path can and cannot do; the policy and the docs read it, the renderers obey it. */
export interface PathCapabilities {
  path: 'gather' | 'media-stream' | 'sip' | 'browser';
  /** The caller can cut the agent short (the reply stops, only what was heard is kept). */
  bargeIn: boolean;
  /** backgroundAudio is mixed under the agent. */
  backgroundAudio: boolean;
  /** The caller's keys reach the agent. */
  keys: boolean;
  /** The reply is spoken as the model streams it (else once the turn is over). */
  streamsReply: boolean;
  /** The call's audio can be recorded by us (CALLPLANE_CALL_RECORDING). */
  recording: boolean;
  /** Whether the path can hand the call to this destination. */
  canTransferTo(destination: string): boolean;
  /**
   * Who tells a voicemail from a person on an outbound call: the carrier's answering-machine
   * detection (Twilio AMD, asked for when the call is placed) or our detector on the call's audio.
   */
  voicemailDetection: 'carrier' | 'audio';
}

export const CAPABILITIES: Readonly<Record<PathCapabilities['path'], PathCapabilities>> = Object.freeze({
  // Twilio speaks and listens for us: <Gather input="speech"> hears speech only, plays one <Say>
  // at a time (the caller can talk over it, but that is Twilio's and nothing is cut from the
  // transcript), and <Dial> takes phone numbers.
  gather: { path: 'gather', bargeIn: false, backgroundAudio: false, keys: false, streamsReply: false, recording: false, canTransferTo: twilioDials, voicemailDetection: 'carrier' },
  // Our voice session over Twilio's Media Stream: a Twilio call dials phone numbers only. Whether
  // an organization's Twilio calls stream is known when a call is placed (its twilio provider's
  // `voice`, else CALLPLANE_TWILIO_VOICE), so the call's own audio decides voicemail, as on SIP, and
  // Twilio is not asked for its detection (one decider per call; no AMD fee).
  'media-stream': { path: 'media-stream', bargeIn: true, backgroundAudio: true, keys: true, streamsReply: true, recording: false, canTransferTo: twilioDials, voicemailDetection: 'audio' },
  // Our voice session over RTP: REFER (or an attended INVITE) to numbers and extensions. An
  // admission transfer (cnamAutoTransferRegex) cannot happen before answering here: the call is
  // answered and REFERred at once (sip-calls.ts).
  sip: { path: 'sip', bargeIn: true, backgroundAudio: true, keys: true, streamsReply: true, recording: true, canTransferTo: () => true, voicemailDetection: 'audio' },
  // Our voice session over the console's WebSocket (browser-calls.ts): someone trying an agent
  // from its page. No keypad, nowhere to transfer to, nothing recorded but the transcript; the call
  // is inbound, so no voicemail is screened.
  browser: { path: 'browser', bargeIn: true, backgroundAudio: false, keys: false, streamsReply: true, recording: false, canTransferTo: () => false, voicemailDetection: 'audio' },
});

/** How the call opens once answered: a pause, keys, the recording notice, then the greeting. */
export interface CallOpening {
  /** Silence before anything is said, ms (0 for none). */
  pauseMs: number;
  /** postAnswerDtmf as written (0-9 * # A-D, w or , for half a second); each path plays what it can. */
  digits: string;
  /** The agent's aiDisclosure: said before anything else. */
  disclosure?: AgentLine;
  notice?: AgentLine;
  greeting?: AgentLine;
  /** recordingConsent `ask` on a recorded call: the question, after the greeting; the caller's first words answer it (start-call.ts). */
  consentQuestion?: AgentLine;
}

/**
 * The opening rule, once: the task's greeting, else welcomeMessage; waitOnAnswer's pause, else
 * DEFAULT_WAIT_TO_GREET_SECONDS when the task lets the callee speak first (waitToGreet); the
 * recording notice when autoRecordingNotification is `always`, or `true` (or recordingConsent
 * `announce`) and the call is recorded; the agent's aiDisclosure before all of it; with
 * recordingConsent `ask` on a recorded call, the consent question after the greeting instead of the notice.
 */
export function callOpening(settings: VoiceSettings, opts: { taskGreeting?: string | null; waitToGreet?: boolean; recorded: boolean }): CallOpening {
  const greeting = opts.taskGreeting?.trim() || settings.welcomeMessage;
  const pauseMs = Math.min(settings.waitOnAnswerMs, MAX_OPENING_PAUSE_MS) || (opts.waitToGreet ? DEFAULT_WAIT_TO_GREET_SECONDS * 1000 : 0);
  const consent = settings.recordingConsent ?? 'off';
  // recordingConsent `ask` asks instead of announcing; `announce` announces every recorded call.
  const announce = consent !== 'ask' && (settings.recordingNotification === 'always' || ((settings.recordingNotification === 'true' || consent === 'announce') && opts.recorded));
  return {
    pauseMs,
    digits: settings.postAnswerDtmf,
    ...(settings.aiDisclosure ? { disclosure: { text: settings.aiDisclosure, kind: 'ai_disclosure' as const } } : {}),
    ...(announce ? { notice: { text: settings.recordingNotificationPhrase, kind: 'recording_notice' as const } } : {}),
    ...(greeting ? { greeting: { text: greeting, kind: 'welcome' as const } } : {}),
    ...(consent === 'ask' && opts.recorded ? { consentQuestion: { text: settings.recordingConsentQuestion, kind: 'consent_question' as const } } : {}),
  };
}

/** Whether an inbound call is answered, and how: decided once, before the agent answers, on every path. */
export type CallAdmission =
  | { action: 'answer'; ringMs: number }
  | { action: 'reject'; code: number; rule: 'cnamAutoRejectRegex' }
  | { action: 'transfer'; destination: string; rule: 'cnamAutoTransferRegex' };

/** Who is calling, as the carrier says: the caller name (CNAM) and number, either possibly absent. */
export interface Caller { callerName?: string | null; callerNumber?: string | null }

/** Whether `source` (checked when written) matches the caller's name or number; one that no longer compiles matches nothing. */
function matchesCaller(source: string | null, caller: Caller): boolean {
  if (source === null) return false;
  let re: RegExp;
  try {
    re = new RegExp(source);
  } catch {
    return false;
  }
  return [caller.callerName, caller.callerNumber].some((v) => typeof v === 'string' && v !== '' && re.test(v.slice(0, 256)));
}

/**
 * The admission rule, once: cnamAutoRejectRegex matching the caller's name (CNAM) or number
 * rejects the call with cnamAutoRejectCode; else cnamAutoTransferRegex matching sends it to
 * cnamAutoTransferDestination (when there is one) unanswered by the agent; else the agent
 * answers after preAnswerRingTime of ringing. Rejection wins over transfer.
 */
export function callAdmission(a: AdmissionSettings, caller: Caller): CallAdmission {
  if (matchesCaller(a.rejectRegex, caller)) return { action: 'reject', code: a.rejectCode, rule: 'cnamAutoRejectRegex' };
  if (a.transferDestination !== null && matchesCaller(a.transferRegex, caller)) {
    return { action: 'transfer', destination: a.transferDestination, rule: 'cnamAutoTransferRegex' };
  }
  return { action: 'answer', ringMs: a.ringMs };
}

/** The call's counters the policy keeps (a path stores them between events). */
export interface CallCounters {
  /** Silences in a row (the caller said nothing for callerResponseTimeout). */
  noResponse: number;
  /** Failed turns in a row. */
  failures: number;
}

export const freshCounters = (): CallCounters => ({ noResponse: 0, failures: 0 });

/** What just happened on the call. */
export type CallEvent =
  | { kind: 'heard'; text: string }
  | { kind: 'key'; digit: string }
  | { kind: 'silence' }
  | { kind: 'turnFailed'; reason: string }
  /** The turn ran past its limit (turn-limit.ts): `limitMs` is the limit it ran past. */
  | { kind: 'turnTooSlow'; limitMs: number }
  | { kind: 'replied'; effects: readonly ToolEffect[] }
  | { kind: 'transferFailed'; reason: string };

/** What the call does next. `say` is said (and recorded) first. */
export type CallDecision =
  /** Run the agent's turn on what the caller said (recorded as said). */
  | { next: 'answer'; text: string }
  /** Listen for the caller again. */
  | { next: 'listen'; say?: AgentLine }
  | { next: 'hangup'; say?: AgentLine; outcome: Extract<ConversationOutcome, 'no_response' | 'failed' | 'ended_by_agent'>; detail: string | null }
  /** Hand the call to the destination (after the reply), announcing it first when attended. */
  | { next: 'transfer'; destination: string; name: string; attended: boolean };

/** The policy: what the call says and does after `event`, and the counters after it. */
export function decide(settings: VoiceSettings, counters: CallCounters, event: CallEvent, caps: PathCapabilities): { counters: CallCounters; decision: CallDecision } {
  const words = phrasesFor(settings.language);
  const c = { ...counters };
  switch (event.kind) {
    case 'heard': {
      const text = event.text.trim();
      if (!text) return decide(settings, counters, { kind: 'silence' }, caps);
      c.noResponse = 0;
      return { counters: c, decision: { next: 'answer', text } };
    }
    case 'key':
      c.noResponse = 0;
      return { counters: c, decision: { next: 'answer', text: `[DTMF ${event.digit}]` } };
    case 'silence':
      c.noResponse += 1;
      // The agent asks callerResponseTimeoutHangupCounter times; the silence after the last ask ends the call.
      if (c.noResponse > settings.noResponsePrompts) {
        return { counters: c, decision: { next: 'hangup', say: { text: words.noResponseGoodbye, kind: 'no_response' }, outcome: 'no_response', detail: `${c.noResponse} silences in a row` } };
      }
      return { counters: c, decision: { next: 'listen', say: { text: words.stillThere, kind: 'still_there' } } };
    case 'turnFailed':
    case 'turnTooSlow': {
      c.failures += 1;
      const reason = event.kind === 'turnTooSlow' ? `the turn took longer than ${event.limitMs} ms` : event.reason;
      if (c.failures >= MAX_TURN_FAILURES) {
        return { counters: c, decision: { next: 'hangup', say: { text: words.failedGoodbye, kind: 'failed' }, outcome: 'failed', detail: reason.slice(0, 500) } };
      }
      return { counters: c, decision: { next: 'listen', say: { text: words.apology, kind: 'apology' } } };
    }
    case 'replied': {
      c.failures = 0;
      const transfer = event.effects.find((e) => e.kind === 'transfer');
      if (transfer) {
        if (!caps.canTransferTo(transfer.destination)) return { counters: c, decision: { next: 'listen', say: { text: words.cannotTransfer, kind: 'transfer_refused' } } };
        return { counters: c, decision: { next: 'transfer', destination: transfer.destination, name: transfer.name, attended: settings.attendedTransfers } };
      }
      const end = event.effects.find((e) => e.kind === 'end');
      if (end) return { counters: c, decision: { next: 'hangup', outcome: 'ended_by_agent', detail: end.reason.slice(0, 500) } };
      return { counters: c, decision: { next: 'listen' } };
    }
    case 'transferFailed':
      return { counters: c, decision: { next: 'listen', say: { text: words.transferFailed, kind: 'transfer_failed' } } };
  }
}

// ---------------------------------------------------------------------------------------------
// Voicemail on outbound calls (docs/voice.md, "Voicemail"): who answered is decided once per call
// — by Twilio's answering-machine detection on gathered Twilio calls, by the audio detector
// (src/speech/answering-machine.ts) on SIP and streamed Twilio calls (CAPABILITIES) — and what that means is decided here, for every path.

export const VOICEMAIL_ACTIONS = ['hangup', 'leave-message', 'continue'] as const;
export type VoicemailAction = typeof VOICEMAIL_ACTIONS[number];
export type AnsweredBy = 'human' | 'machine' | 'unknown';

/** A call task's own choice (tasks.voicemail), over the agent's. */
export interface TaskVoicemail { action?: VoicemailAction; message?: string | null }

/** What an outbound call does when a machine answers, and what it leaves. */
export interface VoicemailPlan {
  action: VoicemailAction;
  /** The message left (leave-message); null when there is nothing to say. */
  message: string | null;
  /** Whether the agent waits for the verdict before it greets (so it never greets a machine). */
  holdGreeting: boolean;
}

/**
 * The task's action, else the agent's voicemailAction; the message is the task's, else the
 * agent's voicemailMessage, else its welcomeMessage. A leave-message with nothing to leave hangs up.
 */
export function voicemailPlan(settings: Pick<VoiceSettings, 'voicemailAction' | 'voicemailMessage' | 'welcomeMessage'>, task?: TaskVoicemail | null): VoicemailPlan {
  let action = task?.action ?? settings.voicemailAction;
  const message = task?.message?.trim() || settings.voicemailMessage || settings.welcomeMessage || null;
  if (action === 'leave-message' && !message) action = 'hangup';
  return { action, message: action === 'leave-message' ? message : null, holdGreeting: action !== 'continue' };
}

/** What the call does once it knows who answered. */
export type VoicemailDecision =
  | { next: 'go-on' }
  | { next: 'hangup'; outcome: 'voicemail'; detail: string }
  /** Wait for the end of the machine's greeting (the beep), say the message, hang up. */
  | { next: 'leave-message'; say: AgentLine; outcome: 'voicemail'; detail: string };

export function voicemailDecision(plan: VoicemailPlan, answeredBy: AnsweredBy): VoicemailDecision {
  if (answeredBy !== 'machine' || plan.action === 'continue') return { next: 'go-on' };
  if (plan.action === 'leave-message' && plan.message) {
    return { next: 'leave-message', say: { text: plan.message, kind: 'voicemail_message' }, outcome: 'voicemail', detail: 'a voicemail answered: the message was left' };
  }
  return { next: 'hangup', outcome: 'voicemail', detail: 'a voicemail answered: hung up' };
}

/**
 * Twilio's AnsweredBy: who answered, and whether the machine's greeting is over (with
 * DetectMessageEnd Twilio waits for the beep or the silence after the greeting before saying
 * machine_end_*). null for a value Twilio does not document.
 */
export function twilioAnsweredBy(value: string): { answeredBy: AnsweredBy; greetingEnded: boolean } | null {
  switch (value) {
    case 'human': return { answeredBy: 'human', greetingEnded: false };
    case 'unknown': return { answeredBy: 'unknown', greetingEnded: false };
    case 'fax':
    case 'machine_start': return { answeredBy: 'machine', greetingEnded: false };
    case 'machine_end_beep':
    case 'machine_end_silence':
    case 'machine_end_other': return { answeredBy: 'machine', greetingEnded: true };
    default: return null;
  }
}

/** What machines say and people do not, by language (lowercase, matched as words in what was recognised). */
const VOICEMAIL_CUES: Record<'en' | 'es' | 'fr' | 'de', readonly string[]> = {
  en: ['leave a message', 'leave your message', 'leave me a message', 'leave your name', 'after the tone', 'after the beep', 'not available', 'unavailable',
    'voicemail', 'voice mail', 'record your message', 'can\'t take your call', 'cannot take your call', 'can\'t come to the phone', 'reached the voicemail', 'mailbox'],
  es: ['deje su mensaje', 'deje un mensaje', 'después del tono', 'no está disponible', 'no disponible', 'buzón de voz', 'correo de voz'],
  fr: ['laisser un message', 'laissez un message', 'laissez votre message', 'après le bip', 'après le signal sonore', 'pas disponible', 'indisponible', 'messagerie vocale', 'boîte vocale'],
  de: ['hinterlassen sie', 'nach dem signalton', 'nach dem piepton', 'nicht erreichbar', 'nicht verfügbar', 'mailbox', 'anrufbeantworter', 'sprachnachricht'],
};

/** Whether `text` (what the answering side said) holds a voicemail cue in `language` or English. */
export function heardVoicemailCue(text: string, language: string): boolean {
  const t = ` ${text.toLowerCase().replace(/[’`]/g, '\'').replace(/[^\p{L}\p{N}' ]+/gu, ' ').replace(/\s+/g, ' ').trim()} `;
  const lang = language.slice(0, 2).toLowerCase();
  const lists = [VOICEMAIL_CUES.en, ...(lang !== 'en' && Object.hasOwn(VOICEMAIL_CUES, lang) ? [VOICEMAIL_CUES[lang as keyof typeof VOICEMAIL_CUES]] : [])];
  return lists.some((cues) => cues.some((cue) => t.includes(` ${cue} `)));
}

/**
 * The caller's answer to the recording-consent question (recordingConsent `ask`), from their first
 * words after it: `no` stops and discards the call's recording; anything else leaves it running
 * (`unclear` says nobody said yes). "No problem" and "no worries" are a yes.
 */
export function consentAnswer(text: string): 'yes' | 'no' | 'unclear' {
  const t = text.toLowerCase().replace(/[^a-z' ]+/g, ' ').replace(/\s+/g, ' ').trim();
  if (/\bno (problem|worries)\b/.test(t) || /^(yes|yeah|yep|sure|ok|okay|fine|that's fine|go ahead|of course|i agree|absolutely)\b/.test(t)) return 'yes';
  if (/\b(no|nope|nah|don't|do not|dont|not okay|not ok|not all right|not alright|rather not|object|refuse|decline)\b/.test(t)) return 'no';
  if (/\b(yes|yeah|sure|okay|ok|fine|agree)\b/.test(t)) return 'yes';
  return 'unclear';
}
