// TwiML verbs (Twilio's protocol): pure builders over plain strings — voices, languages, URLs and
// text — that know nothing of agents or conversations. Every text is escaped (xmlText): nothing a
// caller or a model says can add or close a verb. The twilio module's gather renderer
// (src/modules/twilio/voice-twiml.ts) turns the call policy's decisions into these.
import { isE164 } from '../../lib/phone.ts';
import { xmlText } from '../index.ts';

/** Characters one <Say> speaks at most (a spoken reply is meant to be a few sentences). */
export const MAX_SAY_CHARS = 3000;
/** Longest <Pause> we write, seconds. */
export const MAX_PAUSE_SECONDS = 10;

export const HANGUP = '<Hangup/>';

const clip = (s: string, max: number) => (s.length > max ? `${s.slice(0, max)}…` : s);

/** A whole TwiML document of the given verbs. */
export function twimlDocument(...verbs: string[]): string {
  return `<?xml version="1.0" encoding="UTF-8"?><Response>${verbs.join('')}</Response>`;
}

/** <Say> in `voice` (a Polly voice) and `language`; nothing for empty text. */
export function say(voice: { voice: string; language: string }, text: string): string {
  const t = text.trim();
  if (!t) return '';
  return `<Say voice="${xmlText(voice.voice)}" language="${xmlText(voice.language)}">${xmlText(clip(t, MAX_SAY_CHARS))}</Say>`;
}

export interface GatherOptions {
  /** What the caller is expected to speak (BCP-47 with its region). */
  language: string;
  /** Seconds of silence that end what the caller says. */
  speechTimeout: number;
  /** Seconds to wait for the caller to start speaking. */
  timeout: number;
  /** Where Twilio posts the result (also when nothing was said). */
  action: string;
}

/** <Gather input="speech">, posted to `action` even when empty, with `inner` (a <Say>) played inside it. */
export function gather(o: GatherOptions, inner = ''): string {
  const attrs = [
    'input="speech"', `language="${xmlText(o.language)}"`, `speechTimeout="${o.speechTimeout}"`, `timeout="${o.timeout}"`,
    `action="${xmlText(o.action)}"`, 'method="POST"', 'actionOnEmptyResult="true"',
  ];
  return `<Gather ${attrs.join(' ')}>${inner}</Gather>`;
}

/**
 * Whether a Twilio call can be handed to `destination`: <Dial> reaches phone numbers (E.164) only,
 * never a PBX extension (`ext:`/`pbx:`). The one rule for every Twilio path: the call policy's
 * capabilities of gathered and streamed calls, the tools a Twilio call's model is offered, and a
 * streamed call's transfer.
 */
export function twilioDials(destination: string): boolean {
  return isE164(destination);
}

/** <Dial> of an E.164 number (twilioDials); with `whisperUrl`, Twilio runs that URL's TwiML on the destination's side before joining. */
export function dial(number: string, whisperUrl?: string): string {
  if (whisperUrl) return `<Dial><Number url="${xmlText(whisperUrl)}" method="POST">${xmlText(number)}</Number></Dial>`;
  return `<Dial>${xmlText(number)}</Dial>`;
}

/** <Pause> of whole seconds (at most MAX_PAUSE_SECONDS); nothing for none. */
export function pause(seconds: number): string {
  const s = Math.min(Math.ceil(seconds), MAX_PAUSE_SECONDS);
  return s > 0 ? `<Pause length="${s}"/>` : '';
}

/**
 * <Connect><Stream>: a bidirectional Media Stream to `url` (wss://…) for the rest of the call, with
 * <Parameter>s Twilio hands back in the stream's `start` message (customParameters).
 */
export function connectStream(url: string, parameters: Record<string, string>): string {
  const params = Object.entries(parameters).map(([name, value]) => `<Parameter name="${xmlText(name)}" value="${xmlText(value)}"/>`).join('');
  return `<Connect><Stream url="${xmlText(url)}">${params}</Stream></Connect>`;
}

/** <Play digits> of keys (0-9, *, #; `w` or `,` for half a second; A-D, which Twilio cannot play, left out); nothing when no key is left. */
export function playDigits(digits: string): string {
  const d = digits.replace(/,/g, 'w').replace(/[^0-9*#w]/g, '');
  return /[0-9*#]/.test(d) ? `<Play digits="${xmlText(d)}"/>` : '';
}
