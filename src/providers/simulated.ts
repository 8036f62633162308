// The SIMULATED carrier: places no real calls and sends no real texts. It runs when an organization
// has no carrier configured (or chose 'simulated'), with plausible outcomes and short timings, and
// says so in every answer (`provider: 'simulated'`, `result.simulated: true`).
import {
  PermanentCarrierError, TransientCarrierError, callOutcome, textOutcome,
  type CallStart, type Carrier, type ResultBase, type PlaceCallRequest, type SendTextRequest, type TaskOutcome, type TextResult,
} from './carrier.ts';

export const SIMULATED = 'simulated';

/**
 * Targets with a fixed outcome, in Twilio's test range (+1 500 555 …, never a real subscriber),
 * so development and tests can reach every branch. Any other number answers and completes.
 */
export const SIMULATED_TEST_NUMBERS = {
  /** Refused at once as an invalid number (like Twilio's 21211): a permanent error. */
  invalid: '+15005550001',
  /** Call: busy signal after a short ring → finished, outcome 'busy'. Texts deliver. */
  busy: '+15005550002',
  /** Call: rings for the whole call time, nobody answers → finished, outcome 'no-answer'. Texts deliver. */
  noAnswer: '+15005550003',
  /** Call: fails after a short ring → failed. Text: undelivered (error 30003) → failed. */
  failed: '+15005550004',
  /** The carrier is unavailable every time: a transient error, so the queue retries until attempts are spent. */
  unavailable: '+15005550009',
} as const;

/** Twilio's test "From" number that always works; used when no phone number is configured. */
const DEFAULT_FROM = '+15005550006';
const NOTE_CALL = 'SIMULATED: no real call was placed';
const NOTE_TEXT = 'SIMULATED: no real text was sent';
const NOTE_CONVERSATION = 'SIMULATED: no real call was placed; a simulated caller answered and talked with the agent (see conversation)';

export interface SimulatedOptions {
  /** How long an answered call lasts, in seconds (fractions allowed). Default 3. */
  callSeconds?: number | string;
  /** How long a text takes to be "delivered", in seconds. Default 0.5. */
  textSeconds?: number | string;
  /** The caller id used when a request gives none. */
  phoneNumber?: string;
}

function seconds(value: number | string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = typeof value === 'number' ? value : Number(value);
  // The catalog allows up to four digits; anything else is a programming error, not user input.
  if (!Number.isFinite(n) || n < 0 || n > 9999) throw new RangeError(`simulated carrier: ${name} must be between 0 and 9999 seconds`);
  return n;
}

/** Waits `ms`, or less if a signal fires; answers which one ended the wait. */
function wait(ms: number, signals: AbortSignal[]): Promise<'elapsed' | number> {
  return new Promise((resolve) => {
    const fired = signals.findIndex((s) => s.aborted);
    if (fired >= 0) return resolve(fired);
    const onAbort: Array<() => void> = [];
    const done = (how: 'elapsed' | number) => {
      clearTimeout(timer);
      signals.forEach((s, i) => s.removeEventListener('abort', onAbort[i]));
      resolve(how);
    };
    const timer = setTimeout(() => done('elapsed'), ms);
    signals.forEach((s, i) => {
      onAbort[i] = () => done(i);
      s.addEventListener('abort', onAbort[i], { once: true });
    });
  });
}

const round = (ms: number) => Math.round(ms) / 1000;

export class SimulatedCarrier implements Carrier {
  readonly name = SIMULATED;
  readonly simulated = true;
  readonly callMs: number;
  readonly textMs: number;
  readonly #from: string;
  /** Calls in progress, so endCall can hang one up early. */
  readonly #active = new Map<string, AbortController>();

  constructor(opts: SimulatedOptions = {}) {
    this.callMs = seconds(opts.callSeconds, 3, 'callSeconds') * 1000;
    this.textMs = seconds(opts.textSeconds, 0.5, 'textSeconds') * 1000;
    this.#from = opts.phoneNumber?.trim() || DEFAULT_FROM;
  }

  #refuse(to: string): void {
    if (to === SIMULATED_TEST_NUMBERS.invalid) {
      throw new PermanentCarrierError(`simulated: the 'To' number ${to} is not a valid phone number`, SIMULATED, { httpStatus: 400, code: '21211' });
    }
    if (to === SIMULATED_TEST_NUMBERS.unavailable) {
      throw new TransientCarrierError('simulated: carrier unavailable (test number)', SIMULATED, { httpStatus: 503 });
    }
  }

  async placeCall(req: PlaceCallRequest, signal: AbortSignal): Promise<CallStart> {
    this.#refuse(req.to);
    const providerRef = `sim_call_${req.taskId}`;
    const hangup = new AbortController();
    this.#active.set(providerRef, hangup);
    const started = Date.now();
    const base = { provider: SIMULATED, simulated: true as const, providerRef, from: req.from || this.#from, to: req.to, note: NOTE_CALL };
    // A busy line or a failure shows within a short ring; no-answer rings for the whole call time.
    const ringMs = Math.min(this.callMs / 3, 1000);
    let final: TaskOutcome;
    try {
      if (req.to === SIMULATED_TEST_NUMBERS.busy || req.to === SIMULATED_TEST_NUMBERS.failed) {
        const how = await wait(ringMs, [signal]);
        final = how === 'elapsed'
          ? callOutcome(req.to === SIMULATED_TEST_NUMBERS.busy ? 'busy' : 'failed', { ...base, durationSeconds: 0 })!
          : this.#canceled(base, started);
      } else if (req.to === SIMULATED_TEST_NUMBERS.noAnswer) {
        const how = await wait(this.callMs, [signal, hangup.signal]);
        final = how === 0 ? this.#canceled(base, started) : callOutcome('no-answer', { ...base, durationSeconds: 0 })!;
      } else {
        const talked = req.simulatedConversation ? await this.#converse(req.simulatedConversation, signal, hangup.signal) : undefined;
        // The call lasts callMs at least (a conversation may be quicker), ended early only by a cancel or endCall.
        const how = signal.aborted ? 0 : hangup.signal.aborted ? 1 : await wait(Math.max(0, this.callMs - (Date.now() - started)), [signal, hangup.signal]);
        if (how === 0) {
          final = this.#canceled(base, started);
          if (talked) final.result.conversation = talked;
        } else {
          // Answered: the greeting was spoken (after listening first when waitToGreet); ended by
          // the far end after callMs, or early by endCall (Twilio also reports that as completed).
          const result: ResultBase = {
            ...base, durationSeconds: round(Date.now() - started), greeted: Boolean(req.greeting), waitedToGreet: Boolean(req.waitToGreet),
            ...(talked ? { conversation: talked, note: NOTE_CONVERSATION } : {}),
          };
          if (how === 1) result.endedBy = 'us';
          final = callOutcome('completed', result)!;
        }
      }
    } finally {
      this.#active.delete(providerRef);
    }
    return { provider: SIMULATED, simulated: true, providerRef, status: final.result.status, final };
  }

  /**
   * The answered call's conversation; a cancel during it is the call's cancel (undefined: it
   * stopped). One that could not run at all (its agent gone) is said in the result, and the
   * simulated call still completes: nothing was dialled, so there is nothing to try again.
   */
  async #converse(run: NonNullable<PlaceCallRequest['simulatedConversation']>, signal: AbortSignal, hangup: AbortSignal): Promise<Record<string, unknown> | undefined> {
    try {
      return await run(AbortSignal.any([signal, hangup]));
    } catch (err) {
      if (signal.aborted || hangup.aborted) return undefined;
      return { error: `SIMULATED: the simulated caller could not talk with the agent: ${err instanceof Error ? err.message.slice(0, 300) : String(err)}` };
    }
  }

  #canceled(base: ResultBase, started: number): TaskOutcome {
    return { state: 'canceled', result: { ...base, status: 'canceled', outcome: 'canceled', durationSeconds: round(Date.now() - started) } };
  }

  async sendText(req: SendTextRequest, signal: AbortSignal): Promise<TextResult> {
    this.#refuse(req.to);
    const providerRef = `sim_text_${req.taskId}`;
    const base = { provider: SIMULATED, simulated: true as const, providerRef, from: req.from || this.#from, to: req.to, note: NOTE_TEXT, segments: Math.max(1, Math.ceil(req.body.length / 160)) };
    const how = await wait(this.textMs, [signal]);
    const final: TaskOutcome = how !== 'elapsed'
      ? { state: 'canceled', result: { ...base, status: 'canceled', outcome: 'canceled' } }
      : req.to === SIMULATED_TEST_NUMBERS.failed
        ? textOutcome('undelivered', { ...base, errorCode: '30003' })!
        : textOutcome('delivered', base)!;
    return { provider: SIMULATED, simulated: true, providerRef, status: final.result.status, final };
  }

  async endCall(providerRef: string): Promise<void> {
    // Unknown or finished calls: nothing to hang up, which is not an error.
    this.#active.get(providerRef)?.abort();
  }
}

export function createSimulatedCarrier(opts: SimulatedOptions = {}): SimulatedCarrier {
  return new SimulatedCarrier(opts);
}
