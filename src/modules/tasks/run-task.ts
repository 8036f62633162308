// What running a task means (the job the task queue's runner calls): a ping answers at once (the
// platform's synthetic check); a call or a text goes to the organization's carrier, as chosen by
// the numbering-providers module (src/modules/numbering-providers/carriers.ts). Results and errors are written through the queue's
// guarded completion, so a worker that lost its lease changes nothing.
import type { Config } from '../../config.ts';
import type { Db } from '../../db/types.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { isDatabaseUnavailable, whileDatabaseAway } from '../../db/errors.ts';
import { bool } from '../../db/flags.ts';
import { CarrierError, TransientCarrierError, type Carrier, type CarrierOptions, type PlaceCallRequest, type TaskOutcome } from '../../providers/index.ts';
import { exponentialBackoff, type Patch, type QueueRow } from '../../queue/engine.ts';
import { QueueAbortError, type HandlerContext, type Outcome } from '../../queue/runner.ts';
import { chooseCarrier } from '../numbering-providers/carriers.ts';
import { agentCallerId, nearestCallerId, type CallerIdBasis } from '../phone-numbers/holders.ts';
import { retryDecision, retryResultOf } from '../limits/calling-window.ts';
import { agentCampaign, attemptNumber, effectKey, retryOpening, retryRulesOf, withAttempt, type AgentCampaign, type AttemptEntry } from './attempts.ts';
import { sipCallPlan } from '../sip/calls.ts';
import { outcomeRetryDelayMs } from '../limits/task-limits.ts';
import { TWILIO_AMD_PATH, TWILIO_STATUS_PATH, TWILIO_TWIML_PATH } from '../../providers/twilio/paths.ts';
import { limitRepo, taskRepo } from './repository.ts';
import { MAX_CONTENT } from './validation.ts';
import { doNotCallAtSending } from './do-not-call.ts';

type Row = QueueRow<'tasks'>;

/** A text task's text that its carrier accepted (or settled at once), for the person's conversation history. */
export interface TextSent {
  taskId: string;
  orgId: number;
  /** The task's agent. */
  accountId: number;
  to: string;
  body: string;
  provider: string;
  simulated: boolean;
  providerRef: string;
  /** The carrier already reported it undelivered, failed or canceled. */
  failed: boolean;
}

export interface TaskHandlerDeps {
  db: Db;
  box: SecretBox;
  config: Config;
  carrierOptions?: CarrierOptions;
  /** Records a sent text in the person's text conversation (src/modules/conversations/sms.ts); a failure is logged, the task goes on. */
  textSent?: (text: TextSent) => Promise<void>;
  /**
   * What a call task does when a voicemail answers, and who decides on the path the call takes
   * through `carrier` (the call policy's, for the task and its agent: src/modules/voice/voicemail.ts).
   */
  voicemailPlan?: (row: Row, carrier: string) => Promise<PlaceCallRequest['voicemail']>;
  /**
   * Writes the text of a text task that came without `content` (the contract's task): the agent's
   * model, from its instructions and the task's context (src/modules/conversations/text-task.ts).
   * Throws when the model fails; the answer may be empty (then nothing is sent).
   */
  composeText?: (row: Row, signal: AbortSignal) => Promise<string>;
  /** The task's agent's aiDisclosure ('' for none): a text task's text starts with it (docs/campaigns.md). */
  textDisclosure?: (row: Row) => Promise<string>;
  /**
   * The latest conversation a task's call or text held since `since` (ms): the conversations
   * module's, handed in (it sits above tasks). Without it an attempt records none.
   */
  conversationOf?: (taskId: string, since: number) => Promise<{ id: string; roomId: string } | null>;
  /** The queue's clock (ms): retries' times and the attempts' record. Default Date.now. */
  now?: () => number;
  /**
   * A call on the SIMULATED carrier, once "answered": a simulated caller talks with the agent and
   * the conversation is recorded (src/modules/agent-tests/simulated-call.ts; docs/tasks.md,
   * "Simulated calls"). Answers what the conversation was, for the task's result; rejects only when
   * the signal aborts. Without it a simulated call is the fixed wait it always was.
   */
  simulatedCall?: (row: Row, signal: AbortSignal) => Promise<Record<string, unknown>>;
  log?: { warn(obj: object, msg: string): void };
}

/** What a call or text attempt records of itself (attempts.ts): all but how it ended and its conversation. */
interface AttemptStart { n: number; at: number; callerId: string | null; callerIdBasis: CallerIdBasis; agent: AgentCampaign; simulated: boolean }

const done = (outcome: TaskOutcome, extra: Patch<Row> = {}): Outcome<Row> => ({
  kind: 'complete',
  state: outcome.state,
  set: { result: JSON.stringify(outcome.result), error: outcome.error ?? null, ...extra },
});

const failed = (error: string, extra: Patch<Row> = {}): Outcome<Row> => ({ kind: 'complete', state: 'failed', set: { error, ...extra } });

/** Waits until the signal fires or `ms` pass; answers which. */
function until(signal: AbortSignal, ms: number): Promise<'aborted' | 'timeout'> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve('aborted');
    const timer = setTimeout(() => { signal.removeEventListener('abort', onAbort); resolve('timeout'); }, ms);
    const onAbort = () => { clearTimeout(timer); resolve('aborted'); };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

export function createTaskHandler(deps: TaskHandlerDeps) {
  const { db, box, config } = deps;
  const clock = deps.now ?? Date.now;
  const callMaxMs = config.callMaxSeconds * 1000;

  /**
   * One round trip to the database reading the pinged tasks: the check covers the store the queue
   * depends on. Pings that start in the same turn of the event loop (a claim's batch) share it.
   */
  let probing: { ids: string[]; done: Promise<number> } | undefined;
  function probe(id: string): Promise<number> {
    if (probing) {
      probing.ids.push(id);
      return probing.done;
    }
    const batch = { ids: [id], done: Promise.resolve(0) };
    probing = batch;
    batch.done = new Promise<void>((r) => setImmediate(r)).then(async () => {
      probing = undefined;
      const t0 = Date.now();
      await taskRepo.probe(db, batch.ids);
      return Date.now() - t0;
    });
    return batch.done;
  }

  async function ping(row: Row): Promise<Outcome<Row>> {
    const startedAt = Date.now();
    const due = row.scheduled_for ?? row.created_at;
    let roundTripMs: number;
    try {
      roundTripMs = await probe(row.id);
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      // The probe is the ping's whole work and reaches nobody: while the database is away it is
      // tried again later, saying why, like a call or text that had not gone out.
      return { kind: 'retry', runAt: Date.now() + exponentialBackoff(row.attempt), set: { error: `the database was unavailable to the ping (${(err as Error).message}); trying again` } };
    }
    const result = {
      provider: null, outcome: 'pong',
      queueLatencyMs: Math.max(0, startedAt - due),
      databaseRoundTripMs: roundTripMs,
      attempt: row.attempt,
    };
    return { kind: 'complete', state: 'finished', set: { result: JSON.stringify(result) } };
  }

  /**
   * A database step once the call or text has gone out: while the database is away it waits (the
   * heartbeat renews the lease when it is back) rather than failing the attempt, which would have
   * the runner try again and reach the person twice. Given up only when the attempt is aborted.
   */
  function afterSending<T>(row: Row, signal: AbortSignal, step: () => Promise<T>): Promise<T> {
    return whileDatabaseAway(step, {
      giveUp: () => signal.aborted,
      onFirstWait: (err) => deps.log?.warn({ err, taskId: row.id }, 'database unavailable after the carrier was reached; waiting for it'),
    });
  }

  /** Records who carries the task and its carrier id while the call is in progress. */
  async function note(row: Row, signal: AbortSignal, set: Partial<Row>): Promise<void> {
    await afterSending(row, signal, () => taskRepo.updateRunning(db, row.id, { ...set, updated_at: Date.now() }, { attempt: row.attempt }));
  }

  async function carrierTask(row: Row, signal: AbortSignal): Promise<Outcome<Row>> {
    // A number listed after submission is never reached (docs/campaigns.md, "Do-not-call").
    const listed = await doNotCallAtSending(db, row);
    if (listed) return { kind: 'complete', state: 'canceled', set: { error: listed } };
    const carrier = await chooseCarrier({ db, box, config, carrierOptions: deps.carrierOptions, sipCallPlan: (orgId) => sipCallPlan(db, box, orgId) }, row.org_id, row.type as 'call' | 'text');
    const who = { provider: carrier.name };
    const statusCallbackUrl = carrier.simulated ? undefined : `${config.publicUrl}${TWILIO_STATUS_PATH}`;
    // The agent's own number at this carrier, when it holds one; else the provider's default sender.
    // With the agent's callerIdStrategy `nearest`, a call goes out from the organization's number
    // nearest the recipient (docs/campaigns.md, "Caller ID").
    const agent = await agentCampaign(db, row.account_id);
    let from: string | undefined;
    let basis: CallerIdBasis;
    if (row.type === 'call' && agent.callerIdStrategy === 'nearest') ({ from, basis } = await nearestCallerId(db, row.org_id, row.account_id, row.target!, carrier));
    else { from = await agentCallerId(db, row.org_id, row.account_id, carrier); basis = from ? 'agent' : 'default'; }
    const sender = from ? { from } : {};
    const started: AttemptStart = { n: attemptNumber(row), at: clock(), callerId: from ?? null, callerIdBasis: basis, agent, simulated: carrier.simulated };
    if (row.type === 'text') {
      const written = row.content ?? await composed(row, signal);
      if (typeof written !== 'string') return written;
      let body = written;
      // Writing the text took a while: the list is asked again just before it goes.
      const listedNow = row.content === null ? await doNotCallAtSending(db, row) : null;
      if (listedNow) return { kind: 'complete', state: 'canceled', set: { error: listedNow } };
      const disclosure = (await deps.textDisclosure?.(row))?.trim();
      if (disclosure) body = `${disclosure}\n\n${body}`;
      const sent = await carrier.sendText({ taskId: row.id, to: row.target!, ...sender, body, statusCallbackUrl }, signal);
      await deps.textSent?.({
        taskId: row.id, orgId: row.org_id, accountId: row.account_id, to: row.target!, body, provider: sent.provider,
        simulated: sent.simulated, providerRef: sent.providerRef, failed: sent.final !== null && sent.final.state !== 'finished',
      }).catch((err: unknown) => deps.log?.warn({ err, taskId: row.id }, 'recording the text in its conversation failed'));
      const ref = { ...who, provider_ref: sent.providerRef };
      if (sent.final) {
        const ended = sent.final.state === 'finished' ? String(sent.final.result.outcome) : sent.final.state;
        return done(sent.final, { ...ref, attempt_log: await recorded(row, signal, started, ended, sent.providerRef) });
      }
      await note(row, signal, { ...ref, result: JSON.stringify({ provider: sent.provider, providerRef: sent.providerRef, status: sent.status }), attempt_log: withAttempt(row, entryOf(started, null, sent.providerRef, null)) });
      return awaitFinal(row, carrier, sent.providerRef, signal, ref);
    }
    const twimlUrl = carrier.simulated ? undefined : `${config.publicUrl}${TWILIO_TWIML_PATH}?taskId=${encodeURIComponent(row.id)}`;
    const voicemail = await deps.voicemailPlan?.(row, carrier.name);
    const call = await carrier.placeCall({
      taskId: row.id, effectKey: effectKey(row.id, started.n), agentId: row.account_id, orgId: row.org_id, ...sender, to: row.target!, greeting: row.greeting ?? undefined, waitToGreet: bool(row.wait_to_greet),
      statusCallbackUrl, twimlUrl, voicemail, amdCallbackUrl: carrier.simulated ? undefined : `${config.publicUrl}${TWILIO_AMD_PATH}`,
      ...(carrier.simulated && deps.simulatedCall ? { simulatedConversation: (s: AbortSignal) => deps.simulatedCall!(row, s) } : {}),
    }, signal);
    const ref = { ...who, provider_ref: call.providerRef };
    if (call.final) return settleCall(row, call.final, ref, signal, started);
    await note(row, signal, { ...ref, result: JSON.stringify({ provider: call.provider, providerRef: call.providerRef, status: call.status }), attempt_log: withAttempt(row, entryOf(started, null, call.providerRef, null)) });
    return awaitFinal(row, carrier, call.providerRef, signal, ref);
  }

  function entryOf(started: AttemptStart, result: string | null, providerRef: string | null, conversation: { id: string; roomId: string } | null): AttemptEntry {
    return {
      attempt: started.n, at: Math.floor(started.at / 1000), result, callerId: started.callerId, callerIdBasis: started.callerIdBasis,
      conversationId: conversation?.id ?? null, ...(conversation ? { roomId: conversation.roomId } : {}), providerRef,
    };
  }

  /**
   * The attempt log with this attempt ended (`result`), and the conversation it held (none on the
   * SIMULATED carrier, which holds no conversation: not looked for).
   */
  async function recorded(row: Row, signal: AbortSignal, started: AttemptStart, result: string, providerRef: string | null): Promise<string> {
    const conversation = deps.conversationOf && !started.simulated ? await afterSending(row, signal, () => deps.conversationOf!(row.id, started.at)) : null;
    return withAttempt(row, entryOf(started, result, providerRef, conversation));
  }

  /**
   * The text of a text task without content, written by the agent's model and recorded on the task
   * (its `content`) before anything is sent: an attempt after this one (the worker died, the
   * carrier was busy) sends that very text under the same task id, and never asks the model again.
   * A model failure is tried again on the task's attempt schedule; an empty answer fails the task.
   * Either way nothing is sent.
   */
  async function composed(row: Row, signal: AbortSignal): Promise<string | Outcome<Row>> {
    if (!deps.composeText) return failed('content is required: this worker cannot write a text task\'s text');
    let text: string;
    try {
      text = (await deps.composeText(row, signal)).trim();
    } catch (err) {
      if (err instanceof QueueAbortError || signal.aborted) throw err;
      if (isDatabaseUnavailable(err)) throw err;
      const reason = `the agent's model could not write the text (${err instanceof Error ? err.message : String(err)}); nothing was sent`;
      if (row.attempt >= row.max_attempts) return failed(`${reason} (after ${row.attempt} attempts)`);
      return { kind: 'retry', runAt: Date.now() + exponentialBackoff(row.attempt), set: { error: `${reason}; trying again` } };
    }
    if (text === '') return failed('the agent\'s model wrote an empty text; nothing was sent');
    const kept = await taskRepo.keepContent(db, row.id, text.slice(0, MAX_CONTENT), Date.now());
    if (kept === null) return failed('the task is gone; nothing was sent');
    return kept;
  }

  /**
   * A call's outcome, recorded in the attempt log, or one more attempt later: under the call's
   * retry rules (its own, else its agent's: docs/campaigns.md), when its result is one they name
   * and attempts remain, at the next delay moved into the calling window; without rules, when it
   * was busy or unanswered and the organization's `retries` ask for it. The attempt budget grows
   * to allow it.
   */
  async function settleCall(row: Row, outcome: TaskOutcome, ref: Patch<Row>, signal: AbortSignal, started: AttemptStart): Promise<Outcome<Row>> {
    const kind = String(outcome.result.outcome);
    const ended = outcome.state === 'finished' ? kind : outcome.state;
    const log = await recorded(row, signal, started, ended, typeof ref.provider_ref === 'string' ? ref.provider_ref : null);
    const rules = retryRulesOf(row, started.agent);
    if (rules) {
      const decision = retryDecision(rules, retryResultOf(outcome.state, outcome.result.outcome), started.n);
      if (decision === null) return done(outcome, { ...ref, attempt_log: log });
      if ('stop' in decision) {
        const error = outcome.state === 'failed' ? `${decision.stop}${outcome.error ? ` (${outcome.error})` : ''}` : outcome.error ?? null;
        return done({ ...outcome, result: { ...outcome.result, stopReason: decision.stop }, error: error ?? undefined }, { ...ref, attempt_log: log });
      }
      const due = clock() + decision.retryInMs;
      const opening = await afterSending(row, signal, () => retryOpening(db, row, started.agent, due));
      const runAt = opening?.at ?? due;
      const moved = opening && runAt !== due ? `, moved to the calling window's opening (${opening.window.label})` : '';
      await note(row, signal, { max_attempts: Math.max(row.max_attempts, row.attempt + 1) });
      return {
        kind: 'retry', runAt,
        set: { ...ref, result: JSON.stringify(outcome.result), attempt_log: log, error: `${ended} on attempt ${started.n} of ${rules.maxAttempts}; next attempt at ${new Date(runAt).toISOString()}${moved}` },
      };
    }
    const delay = outcome.state === 'finished' && (kind === 'busy' || kind === 'no-answer')
      ? outcomeRetryDelayMs(await afterSending(row, signal, () => limitRepo.load(db, row.org_id)), kind, row.attempt) : null;
    if (delay === null) return done(outcome, { ...ref, attempt_log: log });
    await note(row, signal, { max_attempts: Math.max(row.max_attempts, row.attempt + 1) });
    return {
      kind: 'retry', runAt: clock() + delay,
      set: { ...ref, result: JSON.stringify(outcome.result), attempt_log: log, error: `${outcome.result.outcome} on attempt ${row.attempt}; trying again in ${delay / 1000} s` },
    };
  }

  /**
   * The carrier reports the end through its status callback, which moves the task to its final
   * state (and so takes the lease: this worker's heartbeat then aborts the signal as lease-lost).
   * A cancel request ends the call; silence for callMaxSeconds ends it too and fails the task.
   */
  async function awaitFinal(row: Row, carrier: Carrier, providerRef: string, signal: AbortSignal, ref: Patch<Row>): Promise<Outcome<Row>> {
    const how = await until(signal, callMaxMs);
    const reason = signal.reason instanceof QueueAbortError ? signal.reason.kind : undefined;
    if (how === 'aborted' && reason === 'lease-lost') throw signal.reason; // settled elsewhere
    if (row.type === 'call') {
      await carrier.endCall(providerRef, AbortSignal.timeout(10_000)).catch((err: unknown) =>
        deps.log?.warn({ err, taskId: row.id }, 'ending the call failed'));
    }
    if (how === 'aborted' && reason === 'canceled') {
      return { kind: 'complete', state: 'canceled', set: { ...ref, error: null } };
    }
    if (how === 'aborted') throw signal.reason; // shutdown: the runner returns it to the queue
    return failed(`${carrier.name}: no final status within ${config.callMaxSeconds} s; ${row.type === 'call' ? 'the call was ended' : 'gave up waiting'}`, ref);
  }

  return async function handle(row: Row, ctx: HandlerContext): Promise<Outcome<Row>> {
    if (row.type === 'ping') return ping(row);
    try {
      return await carrierTask(row, ctx.signal);
    } catch (err) {
      if (err instanceof QueueAbortError || ctx.signal.aborted) throw err;
      if (err instanceof TransientCarrierError) {
        if (err.maybeApplied) {
          // The carrier may have placed the call or sent the text and only its answer was lost;
          // trying again could reach the person twice.
          return failed(`${err.message} (the ${row.type} may have gone out; not retried so it is not repeated)`, { provider: err.carrier });
        }
        if (row.attempt >= row.max_attempts) return failed(`${err.message} (after ${row.attempt} attempts)`, { provider: err.carrier });
        const delay = err.retryAfterMs ?? exponentialBackoff(row.attempt);
        return { kind: 'retry', runAt: Date.now() + delay, set: { error: err.message, provider: err.carrier } };
      }
      if (err instanceof CarrierError) return failed(err.message, { provider: err.carrier });
      if (isDatabaseUnavailable(err)) {
        // Steps after sending wait for the database (afterSending), so this is one before it: the
        // carrier was not reached and trying again later repeats nothing.
        const delay = exponentialBackoff(row.attempt);
        return { kind: 'retry', runAt: Date.now() + delay, set: { error: `the database was unavailable before the ${row.type} went out (${(err as Error).message}); trying again` } };
      }
      throw err;
    }
  };
}
