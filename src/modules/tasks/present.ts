// How a task looks on the wire: the contract's field names, unix seconds for times.
import type { TaskRow } from '../../db/types.ts';
import { bool } from '../../db/flags.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import type { TaskLimits } from '../limits/task-limits.ts';
import type { CallingWindow, RetryRules } from '../limits/calling-window.ts';

/** One call or text that went out (docs/campaigns.md, "Retry rules"). */
export interface AttemptEntry {
  /** Its number among the attempts that went out, from 1. */
  attempt: number;
  /** Unix seconds. */
  at: number;
  /** How it ended (the outcome, or failed / canceled); null while under way. */
  result: string | null;
  callerId: string | null;
  callerIdBasis?: string;
  conversationId: string | null;
  /** The conversation's room (`<agent>:<room>`), for GET /api/v2/conversation/{roomId}/{uuid}; absent on entries written before it was recorded. */
  roomId?: string;
  providerRef: string | null;
}

function json(text: string | null): unknown {
  if (text === null) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export function presentTask(row: TaskRow) {
  return {
    id: row.id,
    type: row.type,
    state: row.state,
    // The contract types target as a string: a ping without one has none, rather than null.
    ...(row.target !== null ? { target: row.target } : {}),
    context: row.context,
    taskContext: row.task_context,
    content: row.content,
    greeting: row.greeting,
    waitToGreet: bool(row.wait_to_greet),
    voicemail: json(row.voicemail ?? null) as { action: string; message?: string } | null,
    accountId: row.account_id,
    organizationId: row.org_id,
    externalTaskId: row.external_task_id,
    meta: json(row.meta),
    scheduledFor: toUnixSeconds(row.scheduled_for),
    /** When the queue will next consider it: scheduledFor, or later when a limit or a retry moved it. */
    runAt: row.state === 'pending' ? toUnixSeconds(row.run_at) : null,
    /** While pending: why a limit holds it back (an included amount used, a daily cap, business hours …); null otherwise. */
    heldReason: row.state === 'pending' ? row.held_reason ?? null : null,
    createdAt: toUnixSeconds(row.created_at),
    updatedAt: toUnixSeconds(row.updated_at),
    startedAt: toUnixSeconds(row.started_at),
    finishedAt: toUnixSeconds(row.finished_at),
    attempts: row.attempt,
    maxAttempts: row.max_attempts,
    cancelRequestedAt: toUnixSeconds(row.cancel_requested_at),
    provider: row.provider,
    providerRef: row.provider_ref,
    result: json(row.result),
    error: row.error,
    ...campaignOf(row.campaign),
    /** Each call or text attempt that went out: time, result, caller ID, conversation (extension; docs/campaigns.md). */
    attemptLog: (row.attempt_log ? json(row.attempt_log) : []) as AttemptEntry[],
  };
}

/** The task's own campaign rules, as sent (docs/campaigns.md): only the keys it set. */
function campaignOf(text: string | null | undefined): { callingWindow?: CallingWindow | null; retryRules?: RetryRules | null } {
  if (!text) return {};
  const c = json(text) as { callingWindow?: CallingWindow | null; retryRules?: RetryRules | null };
  return {
    ...(c.callingWindow !== undefined ? { callingWindow: c.callingWindow } : {}),
    ...(c.retryRules !== undefined ? { retryRules: c.retryRules } : {}),
  };
}

export type TaskView = ReturnType<typeof presentTask>;

/** The keys of `values` whose value is set: an unset limit is left out, never sent as null. */
function setOnly<T extends object>(values: T): { [K in keyof T]?: NonNullable<T[K]> } {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== null && v !== undefined)) as { [K in keyof T]?: NonNullable<T[K]> };
}

/**
 * Limits on the wire. The contract types every limit as a number or an object, so a limit that is
 * not set is left out (`daily: {}` when no cap is set, no `businessHours` without a window).
 * Setting one to null in POST /tasks/limits still removes it.
 */
export function presentLimits(limits: Readonly<TaskLimits>) {
  return {
    ...(limits.businessHours ? { businessHours: limits.businessHours } : {}),
    daily: setOnly(limits.daily),
    concurrencyPerRun: limits.concurrencyPerRun,
    cooldowns: setOnly(limits.cooldowns),
    retries: setOnly(limits.retries),
    ...(limits.callingWindow ? { callingWindow: limits.callingWindow } : {}),
  };
}
