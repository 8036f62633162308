// The Twilio carrier: Calls and Messages through Twilio's REST API (2010-04-01) with the
// organization's own account, and the TwiML that speaks a task's greeting. The rest of Twilio's
// protocol is beside it: signature checks (signature.ts), form parameters (form.ts), status
// callbacks (status-callback.ts) and the Media Stream transport (media-stream.ts).
import {
  PermanentCarrierError, TransientCarrierError, callOutcome, textOutcome, withTaskId,
  type CallStart, type Carrier, type PlaceCallRequest, type SendTextRequest, type TextResult,
} from '../carrier.ts';
import { TWILIO, TwilioRest, type TwilioJson, type TwilioOptions } from './rest.ts';

export { DEFAULT_TWILIO_API_BASE_URL, parseRetryAfter, TWILIO, type TwilioOptions } from './rest.ts';

/** Twilio refuses inline TwiML (the `Twiml` parameter) longer than this. */
export const MAX_INLINE_TWIML = 4000;
/** The call progress events we ask for; `completed` carries the final status. */
export const CALL_STATUS_EVENTS = ['initiated', 'ringing', 'answered', 'completed'] as const;
/** TwiML with no instructions: no reply to a message (it goes out later, if at all), nothing more on a call. */
export const EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response/>';
/** Seconds of listening before the greeting when the callee is to speak first. */
export const DEFAULT_WAIT_TO_GREET_SECONDS = 2;

/** The organization's twilio provider settings (src/modules/numbering-providers/catalog.ts), secrets opened. */
export interface TwilioSettings {
  accountSid: string;
  authToken: string;
  phoneNumber?: string;
  messagingServiceSid?: string;
  /** Twilio's API by default; a different base (a regional edge, a test server) from configuration. */
  apiBaseUrl?: string;
}

export class TwilioCarrier implements Carrier {
  readonly name = TWILIO;
  readonly simulated = false;
  readonly #settings: TwilioSettings;
  readonly #rest: TwilioRest;

  constructor(settings: TwilioSettings, opts: TwilioOptions = {}) {
    this.#rest = new TwilioRest(settings, opts);
    this.#settings = settings;
  }

  #accountPath(rest: string): string {
    return this.#rest.accountUrl(rest);
  }

  #post(url: string, form: URLSearchParams, idempotencyKey: string | undefined, signal: AbortSignal | undefined): Promise<TwilioJson> {
    return this.#rest.post(url, form, idempotencyKey, signal);
  }

  async placeCall(req: PlaceCallRequest, signal: AbortSignal): Promise<CallStart> {
    const from = req.from || this.#settings.phoneNumber;
    if (!from) throw new PermanentCarrierError('twilio: no caller id: set phoneNumber in the twilio provider settings', TWILIO);
    const form = new URLSearchParams({ To: req.to, From: from });
    if (req.twimlUrl) {
      form.set('Url', req.twimlUrl);
    } else {
      const twiml = greetingTwiml({ greeting: req.greeting, waitToGreet: req.waitToGreet });
      if (twiml.length > MAX_INLINE_TWIML) {
        throw new PermanentCarrierError(`twilio: the greeting makes ${twiml.length} characters of TwiML, more than the ${MAX_INLINE_TWIML} Twilio takes inline; serve it from a TwiML URL`, TWILIO);
      }
      form.set('Twiml', twiml);
    }
    if (req.statusCallbackUrl) {
      form.set('StatusCallback', withTaskId(req.statusCallbackUrl, req.taskId));
      form.set('StatusCallbackMethod', 'POST');
      for (const event of CALL_STATUS_EVENTS) form.append('StatusCallbackEvent', event);
    }
    // Answering-machine detection (asynchronous: the call goes on while Twilio listens, and posts
    // AnsweredBy to the callback): only when Twilio decides on this call's path (a streamed call's
    // own audio decides instead) and a machine would change what the call does. To leave a
    // message, Twilio waits for the end of the greeting (the beep, or the silence after it).
    if (req.voicemail?.detection === 'carrier' && req.voicemail.action !== 'continue' && req.amdCallbackUrl) {
      form.set('MachineDetection', req.voicemail.action === 'leave-message' ? 'DetectMessageEnd' : 'Enable');
      form.set('AsyncAmd', 'true');
      form.set('AsyncAmdStatusCallback', withTaskId(req.amdCallbackUrl, req.taskId));
      form.set('AsyncAmdStatusCallbackMethod', 'POST');
    }
    const json = await this.#post(this.#accountPath('Calls.json'), form, req.effectKey ?? req.taskId, signal);
    const { sid, status } = this.#sidAndStatus(json, 'CA');
    const base = { provider: TWILIO, providerRef: sid, from, to: req.to };
    // Without a status callback nothing will tell us how the call ends: the task ends when Twilio
    // has accepted the call, and says so (tracked: false).
    const final = callOutcome(status, base)
      ?? (req.statusCallbackUrl ? null : { state: 'finished' as const, result: { ...base, status, outcome: 'queued' as const, tracked: false } });
    return { provider: TWILIO, simulated: false, providerRef: sid, status, final };
  }

  async sendText(req: SendTextRequest, signal: AbortSignal): Promise<TextResult> {
    const form = new URLSearchParams({ To: req.to, Body: req.body });
    // A request's own sender wins; otherwise the Messaging Service (it picks the sender), otherwise
    // the configured number.
    if (req.from) form.set('From', req.from);
    else if (this.#settings.messagingServiceSid) form.set('MessagingServiceSid', this.#settings.messagingServiceSid);
    else if (this.#settings.phoneNumber) form.set('From', this.#settings.phoneNumber);
    else throw new PermanentCarrierError('twilio: no sender: set phoneNumber or messagingServiceSid in the twilio provider settings', TWILIO);
    if (req.statusCallbackUrl) form.set('StatusCallback', withTaskId(req.statusCallbackUrl, req.taskId));
    const json = await this.#post(this.#accountPath('Messages.json'), form, req.taskId, signal);
    const { sid, status } = this.#sidAndStatus(json, 'SM', 'MM');
    const base = { provider: TWILIO, providerRef: sid, to: req.to, ...(typeof json.from === 'string' && json.from ? { from: json.from } : {}) };
    const final = textOutcome(status, base)
      ?? (req.statusCallbackUrl ? null : { state: 'finished' as const, result: { ...base, status, outcome: 'queued' as const, tracked: false } });
    return { provider: TWILIO, simulated: false, providerRef: sid, status, final };
  }

  async endCall(providerRef: string, signal?: AbortSignal): Promise<void> {
    try {
      await this.#post(this.#accountPath(`Calls/${encodeURIComponent(providerRef)}.json`), new URLSearchParams({ Status: 'completed' }), undefined, signal);
    } catch (err) {
      // 21220: the call is no longer in progress, so there is nothing left to end.
      if (err instanceof PermanentCarrierError && err.code === '21220') return;
      throw err;
    }
  }

  /**
   * Replaces what a call in progress does with `twiml` (Calls API update with `Twiml`): a <Dial>
   * that transfers it, <Play digits> and a new stream. The caller builds the TwiML escaped.
   */
  async redirectCall(providerRef: string, twiml: string, signal?: AbortSignal): Promise<void> {
    if (twiml.length > MAX_INLINE_TWIML) throw new PermanentCarrierError(`twilio: ${twiml.length} characters of TwiML, more than the ${MAX_INLINE_TWIML} Twilio takes inline`, TWILIO);
    await this.#post(this.#accountPath(`Calls/${encodeURIComponent(providerRef)}.json`), new URLSearchParams({ Twiml: twiml }), undefined, signal);
  }

  #sidAndStatus(json: TwilioJson, ...prefixes: string[]): { sid: string; status: string } {
    const sid = typeof json.sid === 'string' ? json.sid : '';
    if (!prefixes.some((p) => sid.startsWith(p))) {
      throw new TransientCarrierError('twilio: answer without a resource sid', TWILIO, { maybeApplied: true });
    }
    return { sid, status: typeof json.status === 'string' ? json.status : 'queued' };
  }
}

export function createTwilioCarrier(settings: TwilioSettings, opts: TwilioOptions = {}): TwilioCarrier {
  return new TwilioCarrier(settings, opts);
}

/**
 * Text for XML: drops what XML 1.0 cannot carry (control characters, lone surrogates, U+FFFE/F)
 * and escapes the five special characters, so no input can add or close an element.
 */
export function xmlText(value: string): string {
  return value
    .replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}

/**
 * The TwiML for a task's call: say the greeting when the call is answered. With waitToGreet the
 * call first listens in silence (<Pause>) so the callee can say "hello" before we speak. <Pause>
 * rather than <Gather input="speech">: it works in inline TwiML with no action URL and no extra
 * round trip to us, and behaves the same whether a person or a voicemail answers.
 */
export function greetingTwiml(opts: { greeting?: string; waitToGreet?: boolean; waitSeconds?: number }): string {
  const parts: string[] = [];
  if (opts.waitToGreet) {
    const secs = Math.min(Math.max(Math.round(opts.waitSeconds ?? DEFAULT_WAIT_TO_GREET_SECONDS), 1), 10);
    parts.push(`<Pause length="${secs}"/>`);
  }
  const greeting = opts.greeting?.trim();
  if (greeting) parts.push(`<Say>${xmlText(greeting)}</Say>`);
  return `<?xml version="1.0" encoding="UTF-8"?><Response>${parts.join('')}</Response>`;
}
