// What Twilio calls back on while a task's call or text is under way: the status callback (which
// ends the task) and the TwiML URL (what to say when the call is answered). Twilio sends no token:
// each request is checked against X-Twilio-Signature, computed with the auth token of the task's
// organization's twilio provider over the public URL Twilio called and the form it posted.
// A request that fails the check (verify.ts) changes nothing. The routes are in routes.ts. What an
// answered call says, and what its end means to its conversation, is calls.ts's (and amd.ts's),
// handed in as `calls`.
import type { Config } from '../../config.ts';
import type { Db, TaskRow } from '../../db/types.ts';
import { Conflict, Invalid } from '../../http/errors.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { callOutcome, parseStatusCallback, TWILIO } from '../../providers/index.ts';
import { first, type TwilioParams } from '../../providers/twilio/form.ts';
import { taskRepo } from '../tasks/repository.ts';
import { openAttemptStart, settleByCallback } from '../tasks/attempts.ts';
import { conversationRepo } from '../conversations/repository.ts';
import type { TaskQueue } from '../tasks/task-queue.ts';
import { refuseTwilioRequest, verifyTwilioRequest, type TwilioRequest } from './verify.ts';
import { readJsonObject } from '../../db/json-columns.ts';

const HANGUP_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>';

/** A request Twilio made for a task's call or text: ?taskId names the task. */
export interface TaskCallbackRequest extends TwilioRequest {
  taskId: unknown;
}

type Log = { warn(obj: object, msg: string): void };

/**
 * A call's conversation (calls.ts and amd.ts, built in src/platform.ts): handed in, so this file
 * needs neither.
 */
export interface CallConversations {
  /** The TwiML of a running task's call, answered: its CallSid is `callSid`. */
  answer(task: TaskRow, callSid: string): Promise<string>;
  /** The call ended (a final status callback, `status` in Twilio's words). */
  ended(task: TaskRow, callSid: string, status: string): Promise<void>;
  /** Twilio's answering-machine detection said who answered (AnsweredBy as Twilio wrote it). */
  answeredBy?(task: TaskRow, callSid: string, value: string, log: Log): Promise<void>;
}

export interface TwilioCallbackDeps {
  db: Db;
  box: SecretBox;
  config: Pick<Config, 'publicUrl'>;
  queue: TaskQueue;
  calls: CallConversations;
  log?: Log;
}

export function twilioCallbacks(deps: TwilioCallbackDeps) {
  const { db, queue } = deps;

  /**
   * The task named by ?taskId, once the request is checked with its organization's twilio
   * provider (verify.ts: the signature, the AccountSid).
   */
  async function verified(req: TaskCallbackRequest, log: Log): Promise<TaskRow> {
    const { taskId } = req;
    if (typeof taskId !== 'string' || taskId === '') throw new Invalid('taskId query parameter is required');
    const task = taskId.length <= 64 ? await taskRepo.findAnyOrg(db, taskId) : undefined;
    // An unknown task is refused like a bad signature: nobody learns which tasks exist.
    if (!task) refuseTwilioRequest(deps, req, log, 'twilio callback', 'no such task', { taskId: taskId.slice(0, 64) });
    await verifyTwilioRequest(deps, task.org_id, req, log, 'twilio callback', { taskId });
    return task;
  }

  /** The callback names the task's own call or message (once we know its sid). */
  function checkIdentity(task: TaskRow, params: TwilioParams, sidKeys: string[]): string | undefined {
    const sid = sidKeys.map((k) => first(params, k)).find((s) => s !== undefined);
    if (sid !== undefined && task.provider_ref && sid !== task.provider_ref) {
      throw new Conflict(`${sidKeys[0]} ${sid} is not the ${task.type} of task ${task.id}`);
    }
    return sid;
  }

  /**
   * Records a call's or text's progress (ringing, in-progress, sent…) in result.status while the
   * task runs. A progress event numbered lower than one already recorded is older: kept out.
   */
  async function noteProgress(id: string, providerRef: string, status: string, seq: number | undefined): Promise<void> {
    await db.transaction().execute(async (tx) => {
      const row = await taskRepo.findRunning(tx, id, { lock: true });
      if (!row) return;
      // A result that is not an object is not ours to keep.
      const result = readJsonObject(row.result);
      const known = typeof result.sequenceNumber === 'number' ? result.sequenceNumber : undefined;
      if (seq !== undefined && known !== undefined && seq <= known) return;
      const next = { ...result, provider: TWILIO, providerRef, status, ...(seq !== undefined ? { sequenceNumber: seq } : {}) };
      await taskRepo.updateRunning(tx, id, {
        result: JSON.stringify(next), provider: TWILIO, provider_ref: row.provider_ref ?? providerRef, updated_at: Date.now(),
      });
    });
  }

  /** The running task's result as recorded so far (an object), or an empty one. */
  function resultOf(row: Pick<TaskRow, 'result'>): Record<string, unknown> {
    return readJsonObject(row.result);
  }

  return {
    /**
     * Twilio's answering-machine detection (AsyncAmdStatusCallback) for a task's call: signed and
     * checked like the status callback (an unknown task is the same 403); the verdict is kept on
     * the task and handed to the call's conversation, which renders the call policy's decision.
     */
    async amd(req: TaskCallbackRequest, log: Log): Promise<void> {
      const task = await verified(req, log);
      if (task.type !== 'call') throw new Invalid(`task ${task.id} is a ${task.type}, not a call`);
      const callSid = checkIdentity(task, req.params, ['CallSid']);
      if (!callSid) throw new Invalid('CallSid is required');
      const answeredBy = first(req.params, 'AnsweredBy');
      if (!answeredBy || answeredBy.length > 40) throw new Invalid('AnsweredBy is required');
      if (task.state !== 'running') return;
      // Kept on the task, so the final status can say `voicemail`.
      await taskRepo.noteAnsweredBy(db, task.id, answeredBy, Date.now());
      await deps.calls.answeredBy?.(task, callSid, answeredBy, log);
    },

    /** A status callback: progress is noted; a final status ends the running task. */
    async status(req: TaskCallbackRequest, log: Log): Promise<void> {
      const task = await verified(req, log);
      const cancelRequested = task.cancel_requested_at !== null;
      const event = parseStatusCallback(req.params, { cancelRequested });
      // Asynchronous AMD said who answered before the call ended: a machine makes the outcome `voicemail`.
      const noted = resultOf(task).answeredBy;
      if (event?.kind === 'call' && event.final && event.final.result.answeredBy === undefined && typeof noted === 'string') {
        event.final = callOutcome(event.status, { ...event.final.result, answeredBy: noted }, { cancelRequested }) ?? event.final;
      }
      if (!event) throw new Invalid('not a Twilio status callback: CallSid and CallStatus, or MessageSid and MessageStatus, are required');
      if ((event.kind === 'call') !== (task.type === 'call') || task.type === 'ping') {
        throw new Invalid(`a ${event.kind} status callback for task ${task.id}, which is a ${task.type}`);
      }
      checkIdentity(task, req.params, event.kind === 'call' ? ['CallSid'] : ['MessageSid', 'SmsSid']);

      if (!event.final) return noteProgress(task.id, event.providerRef, event.status, event.sequenceNumber);
      // After a cancel request the call was ended by us (Twilio reports that hang-up as
      // `completed`): a call that ended normally is then canceled; one that failed stays failed.
      const state = cancelRequested && event.final.state === 'finished' ? 'canceled' : event.final.state;
      // The attempt ends in the task's attempt log; a call whose retry rules name its result goes
      // back to the queue for the next attempt (docs/campaigns.md, "Retry rules").
      const now = Date.now();
      const conversation = task.type === 'call' && task.state === 'running'
        ? await conversationRepo.latestOfTask(db, task.id, openAttemptStart(task)) : null;
      const settled = task.state === 'running'
        ? await settleByCallback(db, task, state, event.final.result, state === 'failed' ? event.final.error ?? null : null, now, conversation)
        : { to: state, set: { result: JSON.stringify(event.final.result), error: state === 'failed' ? event.final.error ?? null : null } };
      // Only a running task moves: a duplicate, or a callback after the task ended (or after it
      // went back to the queue), changes nothing.
      const moved = await queue.engine.transition(db, task.id, ['running'], settled.to, {
        ...settled.set,
        provider: TWILIO,
        provider_ref: event.providerRef,
      });
      // The worker waiting for this call, when it runs in this process, stops now instead of at
      // its next heartbeat (in another process the heartbeat still finds the lease gone).
      if (moved) queue.release(task.id);
      // The call's conversation ends with it (once: a duplicate callback changes nothing there
      // either). The task has moved already; a failure here is logged, not answered to Twilio.
      if (event.kind === 'call') {
        await deps.calls.ended(task, event.providerRef, event.status).catch((err: unknown) =>
          log.warn({ err, taskId: task.id }, 'ending the call\'s conversation failed'));
      }
    },

    /**
     * The call's instructions: while the task runs, its conversation's (the greeting, then
     * listening: `calls.answer`); a hang-up once it has ended.
     */
    async twiml(req: TaskCallbackRequest, log: Log): Promise<string> {
      const task = await verified(req, log);
      if (task.type !== 'call') throw new Invalid(`task ${task.id} is a ${task.type}, not a call`);
      const sid = checkIdentity(task, req.params, ['CallSid']) ?? task.provider_ref;
      if (task.state !== 'running') return HANGUP_TWIML;
      if (!sid) throw new Invalid('CallSid is required');
      return deps.calls.answer(task, sid);
    },
  };
}

export type TwilioCallbacks = ReturnType<typeof twilioCallbacks>;
