// What a task handler needs from a carrier (Twilio, the simulated one, later SIP trunks): place a
// call, send a text, end a call; and the one mapping from carrier statuses to our task states.
//
// Status mapping (docs/carriers.md repeats it):
//   call   completed                    → finished (result.outcome 'completed')
//          busy / no-answer             → finished (result.outcome 'busy' / 'no-answer'): outcomes
//                                         of a call that was placed, not reasons to retry
//          declined (SIP 603)           → finished (result.outcome 'declined'): the callee refused
//          completed, answered by a machine → finished (result.outcome 'voicemail', result.answeredBy
//                                         as the carrier said it: Twilio's machine_*, fax; SIP 'machine')
//          failed / canceled            → failed   (canceled by us after a cancel request → canceled)
//          queued, initiated, ringing, in-progress → not final
//   text   delivered / sent / read      → finished
//          undelivered / failed         → failed
//          canceled                     → canceled when we asked, else failed
//          accepted, scheduled, queued, sending → not final
//   HTTP 429, 5xx, timeouts, network errors → TransientCarrierError (the queue retries)
//   other 4xx and bad settings               → PermanentCarrierError (the task fails)

export type FinalTaskState = 'finished' | 'failed' | 'canceled';

export type CallOutcome = 'completed' | 'busy' | 'no-answer' | 'declined' | 'failed' | 'canceled' | 'voicemail';
export type TextOutcome = 'delivered' | 'sent' | 'read' | 'undelivered' | 'failed' | 'canceled' | 'accepted';

export interface PlaceCallRequest {
  /** Our task id: the idempotency key we hand to the carrier where its API takes one (unless `effectKey` is given). */
  taskId: string;
  /**
   * The idempotency key of this attempt (src/modules/tasks/attempts.ts, effectKey): a deliberate
   * retry of the task is a new call, a queue rerun of the same attempt is not. Default: taskId.
   */
  effectKey?: string;
  /** The agent that talks on the call (carriers that carry its audio themselves: SIP). */
  agentId?: number;
  orgId?: number;
  /** E.164; defaults to the carrier's configured phone number. */
  from?: string;
  to: string;
  /** What to say when the call is answered. */
  greeting?: string;
  /** Let the callee speak first: listen before the greeting. */
  waitToGreet?: boolean;
  /** Where the carrier reports call progress; the task id is added when the URL does not already carry it. */
  statusCallbackUrl?: string;
  /** Where the carrier fetches call instructions; without it they are sent inline. */
  twimlUrl?: string;
  /**
   * What the call does when a voicemail answers (the call policy's voicemailPlan for the task and
   * its agent), and who tells a voicemail from a person on the path the call takes (the policy's
   * CAPABILITIES[path].voicemailDetection): `carrier` — Twilio asks its answering-machine
   * detection (unless the action is `continue`); `audio` — our detector listens to the call's
   * audio (SIP: the voice session here; Twilio Media Streams: the session the stream starts), and
   * the carrier is asked for nothing.
   */
  voicemail?: { action: 'hangup' | 'leave-message' | 'continue'; message: string | null; holdGreeting: boolean; detection: 'carrier' | 'audio' };
  /** Where the carrier reports answering-machine detection (Twilio's AsyncAmdStatusCallback); the task id is added. */
  amdCallbackUrl?: string;
  /**
   * The SIMULATED carrier only (others ignore it): what the answered call does — a simulated
   * caller's conversation with the agent (docs/tasks.md, "Simulated calls"). Its answer goes into
   * the result as `conversation` (`{error}` when it could not run).
   */
  simulatedConversation?: (signal: AbortSignal) => Promise<Record<string, unknown>>;
}

export interface SendTextRequest {
  taskId: string;
  from?: string;
  to: string;
  body: string;
  statusCallbackUrl?: string;
}

/** What every result carries besides the status: who ran it and the carrier's details. */
export interface ResultBase {
  provider: string;
  /** Present (and true) only for the simulated carrier, so no one mistakes it for a real call. */
  simulated?: true;
  providerRef?: string;
  durationSeconds?: number;
  /** The carrier's error code (Twilio ErrorCode) when it gave one. */
  errorCode?: string;
  note?: string;
  [key: string]: unknown;
}

/** What goes into the task row's `result` column. */
export interface CarrierResult extends ResultBase {
  /** The carrier's own status word, as it said it (lowercased). */
  status: string;
  outcome: CallOutcome | TextOutcome | 'queued';
}

/** A final state for the task plus what to record. */
export interface TaskOutcome {
  state: FinalTaskState;
  result: CarrierResult;
  error?: string;
}

export interface CallStart {
  provider: string;
  simulated: boolean;
  /** The carrier's id for the call (Twilio CA…); stored as the task's provider_ref. */
  providerRef: string;
  status: string;
  /**
   * The final outcome when the carrier already knows it (the simulated carrier runs the whole call
   * inside placeCall). null: the outcome arrives later through the status callback.
   */
  final: TaskOutcome | null;
}

export interface TextResult {
  provider: string;
  simulated: boolean;
  providerRef: string;
  status: string;
  final: TaskOutcome | null;
}

export interface Carrier {
  readonly name: string;
  readonly simulated: boolean;
  placeCall(req: PlaceCallRequest, signal: AbortSignal): Promise<CallStart>;
  sendText(req: SendTextRequest, signal: AbortSignal): Promise<TextResult>;
  /** Hangs up a call in progress; a call that already ended is not an error. */
  endCall(providerRef: string, signal?: AbortSignal): Promise<void>;
}

/** Base of every carrier failure; `permanent` tells the queue whether a retry can help. */
export class CarrierError extends Error {
  readonly permanent: boolean;
  readonly httpStatus?: number;
  /** The carrier's own error code (Twilio's numeric codes, as text). */
  readonly code?: string;
  constructor(
    message: string,
    readonly carrier: string,
    opts: { permanent: boolean; httpStatus?: number; code?: string; cause?: unknown },
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'CarrierError';
    this.permanent = opts.permanent;
    this.httpStatus = opts.httpStatus;
    this.code = opts.code;
  }
}

/**
 * A retry may succeed: rate limited, carrier 5xx, timeout, connection refused or reset.
 * `maybeApplied` is true when the request may have reached the carrier and only its answer was
 * lost (timeout after sending, reset, 5xx): the call or text may exist, so a handler that cares
 * should look before placing it again.
 */
export class TransientCarrierError extends CarrierError {
  /** From the carrier's Retry-After, when it sent one. */
  readonly retryAfterMs?: number;
  readonly maybeApplied: boolean;
  constructor(
    message: string,
    carrier: string,
    opts: { httpStatus?: number; code?: string; retryAfterMs?: number; maybeApplied?: boolean; cause?: unknown } = {},
  ) {
    super(message, carrier, { ...opts, permanent: false });
    this.name = 'TransientCarrierError';
    this.retryAfterMs = opts.retryAfterMs;
    this.maybeApplied = opts.maybeApplied ?? false;
  }
}

/** Retrying the same request cannot help: bad number, bad credentials, missing settings, 4xx. */
export class PermanentCarrierError extends CarrierError {
  constructor(message: string, carrier: string, opts: { httpStatus?: number; code?: string; cause?: unknown } = {}) {
    super(message, carrier, { ...opts, permanent: true });
    this.name = 'PermanentCarrierError';
  }
}

const CALL_FINAL: Record<string, { state: FinalTaskState; outcome: CallOutcome }> = {
  completed: { state: 'finished', outcome: 'completed' },
  busy: { state: 'finished', outcome: 'busy' },
  'no-answer': { state: 'finished', outcome: 'no-answer' },
  declined: { state: 'finished', outcome: 'declined' },
  failed: { state: 'failed', outcome: 'failed' },
  canceled: { state: 'failed', outcome: 'canceled' },
};

const TEXT_FINAL: Record<string, { state: FinalTaskState; outcome: TextOutcome }> = {
  delivered: { state: 'finished', outcome: 'delivered' },
  sent: { state: 'finished', outcome: 'sent' },
  read: { state: 'finished', outcome: 'read' },
  undelivered: { state: 'failed', outcome: 'undelivered' },
  failed: { state: 'failed', outcome: 'failed' },
  canceled: { state: 'failed', outcome: 'canceled' },
};

export interface MapOptions {
  /** The task had a cancel request: a carrier 'canceled' is then our doing, so the task is canceled. */
  cancelRequested?: boolean;
}

function mapStatus(
  table: Record<string, { state: FinalTaskState; outcome: CallOutcome | TextOutcome }>,
  status: string,
  base: ResultBase,
  opts: MapOptions,
): TaskOutcome | null {
  const key = status.trim().toLowerCase();
  const hit = Object.hasOwn(table, key) ? table[key] : undefined;
  if (!hit) return null;
  const state: FinalTaskState = hit.outcome === 'canceled' && opts.cancelRequested ? 'canceled' : hit.state;
  const result: CarrierResult = { ...base, status: key, outcome: hit.outcome };
  return state === 'failed' ? { state, result, error: `${base.provider}: ${kindWord(table)} ${key}${base.errorCode ? ` (error ${base.errorCode})` : ''}` } : { state, result };
}

function kindWord(table: object): string {
  return table === CALL_FINAL ? 'call' : 'text';
}

/** Whether a carrier's answeredBy names a machine (Twilio machine_start, machine_end_*, fax; our 'machine'). */
export function answeredByMachine(answeredBy: unknown): boolean {
  return typeof answeredBy === 'string' && (answeredBy === 'machine' || answeredBy.startsWith('machine_') || answeredBy === 'fax');
}

/** A carrier's call status → our final outcome, or null while the call is still under way. */
export function callOutcome(status: string, base: ResultBase, opts: MapOptions = {}): TaskOutcome | null {
  const out = mapStatus(CALL_FINAL, status, base, opts);
  // A call a machine answered is a voicemail, whatever the call did then (hung up, left a message, went on).
  if (out?.result.outcome === 'completed' && answeredByMachine(base.answeredBy)) out.result.outcome = 'voicemail';
  return out;
}

/** A carrier's message status → our final outcome, or null while the text is still under way. */
export function textOutcome(status: string, base: ResultBase, opts: MapOptions = {}): TaskOutcome | null {
  return mapStatus(TEXT_FINAL, status, base, opts);
}

/** Adds `taskId` to a callback URL unless the URL already carries the id somewhere. */
export function withTaskId(url: string, taskId: string): string {
  if (url.includes(taskId)) return url;
  const u = new URL(url);
  u.searchParams.set('taskId', taskId);
  return u.toString();
}
