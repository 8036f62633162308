// Outbound campaign rules on the task queue (docs/campaigns.md): which calling window and retry
// rules a task runs under (its own, else its agent's, else its organization's), the window
// admission holds it by, and the record of its attempts (`attempt_log`, shown as `attemptLog`),
// with the outside-effect key of each attempt. Kept apart from queue-hooks.ts and run-task.ts,
// which call it at one place each.
import type { Executor, TaskRow } from '../../db/types.ts';
import type { AttemptEntry } from './present.ts';

export type { AttemptEntry };
import { readJsonObject } from '../../db/json-columns.ts';
import { isE164 } from '../../lib/phone.ts';
import { numberTimeZones } from '../../lib/phone-zones.ts';
import { agentRepo } from '../agents/repository.ts';
import { recipientWindow, retryDecision, retryResultOf, type CallingWindow, type RetryRules } from '../limits/calling-window.ts';
import { dayTimeZone, isOpenInAll, nextOpeningInAll, type RecipientWindow, type TaskLimits } from '../limits/task-limits.ts';
import { accountRepo } from '../accounts/repository.ts';
import { limitRepo } from './repository.ts';

/** What a task set for itself (the `campaign` column). */
interface TaskCampaign { callingWindow?: CallingWindow | null; retryRules?: RetryRules | null }

/** The agent's campaign settings (its live configuration), as far as the queue reads them. */
export interface AgentCampaign { callingWindow: CallingWindow | null; retryRules: RetryRules | null; callerIdStrategy: 'agent' | 'nearest' }

const NO_AGENT_RULES: AgentCampaign = Object.freeze({ callingWindow: null, retryRules: null, callerIdStrategy: 'agent' });

function taskCampaign(row: Pick<TaskRow, 'campaign'>): TaskCampaign {
  return row.campaign ? readJsonObject(row.campaign) as TaskCampaign : {};
}

/** The campaign rules a task set for itself (its `campaign` column), as sent: keys only when set. */
export function storedCampaign(campaign: string | null): TaskCampaign {
  return taskCampaign({ campaign });
}

/**
 * The campaign settings of an agent's live configuration, read as its field table stored them
 * (checked on every write; a value of another shape reads as unset). Agents without a stored
 * configuration have the defaults.
 */
export async function agentCampaign(db: Executor, agentId: number): Promise<AgentCampaign> {
  const row = await agentRepo.find(db, agentId);
  if (!row) return NO_AGENT_RULES;
  const live = readJsonObject(row.live);
  const window = live.callingWindow as CallingWindow | null | undefined;
  const rules = live.retryRules as RetryRules | null | undefined;
  return {
    callingWindow: window && typeof window === 'object' && Array.isArray(window.days) ? window : null,
    retryRules: rules && typeof rules === 'object' && Array.isArray(rules.on) && Array.isArray(rules.delaysSec) ? rules : null,
    callerIdStrategy: live.callerIdStrategy === 'nearest' ? 'nearest' : 'agent',
  };
}

/** The agents' settings read by one claim transaction, so a batch of one agent's tasks reads them once. */
const perClaim = new WeakMap<object, Map<number, Promise<AgentCampaign>>>();

function agentCampaignIn(tx: Executor, agentId: number): Promise<AgentCampaign> {
  let agents = perClaim.get(tx);
  if (!agents) perClaim.set(tx, (agents = new Map<number, Promise<AgentCampaign>>()));
  let found = agents.get(agentId);
  if (!found) agents.set(agentId, (found = agentCampaign(tx, agentId)));
  return found;
}

/**
 * The calling window a call or text is held by at `now`, or undefined when none applies: the
 * task's own (its null: none), else its agent's, else the organization's default (`limits`). Read
 * in the recipient's zones (lib/phone-zones.ts and windowZones), the organization's zone
 * (`orgZone`) when the number says nothing.
 */
export async function taskWindow(
  tx: Executor, row: Pick<TaskRow, 'account_id' | 'target' | 'campaign'>, limits: Readonly<TaskLimits>, orgZone: string, now: number, agent?: AgentCampaign,
): Promise<RecipientWindow | undefined> {
  const own = taskCampaign(row);
  let window: CallingWindow | null;
  let source: 'task' | 'agent' | 'organization' = 'task';
  if (own.callingWindow !== undefined) window = own.callingWindow;
  else {
    window = (agent ?? await agentCampaignIn(tx, row.account_id)).callingWindow;
    source = 'agent';
    if (!window) { window = limits.callingWindow ?? null; source = 'organization'; }
  }
  if (!window) return undefined;
  // A target that is not a phone number (a SIP extension or URI) says nothing of where it rings:
  // windowed only when the window names its own zone.
  if (!window.timezone && !(row.target && isE164(row.target))) return undefined;
  const zones = !window.timezone && row.target ? await numberTimeZones(row.target) : [];
  return recipientWindow(window, zones, orgZone, now, source);
}

/**
 * When a retry due at `at` may go out: `at` itself, or the opening of the task's calling window
 * when `at` falls outside it (with the window, to say so); null when no window applies.
 */
export async function retryOpening(db: Executor, row: Pick<TaskRow, 'org_id' | 'account_id' | 'target' | 'campaign'>, agent: AgentCampaign, at: number): Promise<{ at: number; window: RecipientWindow } | null> {
  const limits = await limitRepo.load(db, row.org_id);
  const orgZone = dayTimeZone(await accountRepo.timezoneOf(db, row.org_id), limits);
  const window = await taskWindow(db, row, limits, orgZone, at, agent);
  if (!window) return null;
  const all = limits.businessHours ? [limits.businessHours, ...window.hours] : window.hours;
  return { at: isOpenInAll(at, all) ? at : nextOpeningInAll(at, all) ?? at, window };
}

/** The retry rules of a call: its own, else its agent's; undefined (the organization's `retries` apply) when neither sets any. */
export function retryRulesOf(row: Pick<TaskRow, 'campaign'>, agent: AgentCampaign): RetryRules | undefined {
  const own = taskCampaign(row).retryRules;
  if (own !== undefined) return own ?? undefined;
  return agent.retryRules ?? undefined;
}

export function attemptLog(row: Pick<TaskRow, 'attempt_log'>): AttemptEntry[] {
  if (!row.attempt_log) return [];
  try {
    const list = JSON.parse(row.attempt_log) as unknown;
    return Array.isArray(list) ? list as AttemptEntry[] : [];
  } catch {
    return [];
  }
}

/**
 * The number of the attempt about to go out: one more than those that ended. An attempt that went
 * out but whose end was never recorded (its worker died) keeps its number, so the queue's rerun of
 * it is the same attempt, not a new one.
 */
export function attemptNumber(row: Pick<TaskRow, 'attempt_log'>): number {
  return attemptLog(row).filter((e) => e.result !== null).length + 1;
}

/**
 * The key the carrier's outside effect is made idempotent by (Twilio's I-Twilio-Idempotency-Token)
 * for attempt `n`: the task id for the first (as before retry rules), the task id and the number for
 * each deliberate retry after it. A queue rerun of an attempt (a crash) sends the same key, so a
 * call that went out is not placed twice; a deliberate retry is a new call on purpose.
 */
export function effectKey(taskId: string, n: number): string {
  return n <= 1 ? taskId : `${taskId}:attempt-${n}`;
}

/** The log with `entry` in it: replacing the unfinished entry of the same attempt (a rerun), else added. */
export function withAttempt(row: Pick<TaskRow, 'attempt_log'>, entry: AttemptEntry): string {
  const log = attemptLog(row).filter((e) => !(e.attempt === entry.attempt && e.result === null));
  log.push(entry);
  return JSON.stringify(log);
}

/** When the attempt under way went out (ms; its log entry's second), 0 when none is open. */
export function openAttemptStart(row: Pick<TaskRow, 'attempt_log'>): number {
  const open = attemptLog(row).reverse().find((e) => e.result === null);
  return open ? open.at * 1000 : 0;
}

/** The log with its last unfinished entry given `result` (a carrier's callback ended it); null when none is open. */
export function endingAttempt(row: Pick<TaskRow, 'attempt_log'>, result: string, conversation?: { id: string; roomId: string } | null): string | null {
  const log = attemptLog(row);
  const open = [...log].reverse().find((e) => e.result === null);
  if (!open) return null;
  open.result = result;
  if (conversation) {
    open.conversationId = conversation.id;
    open.roomId = conversation.roomId;
  }
  return JSON.stringify(log);
}

/**
 * How a task whose call or text a carrier's callback ended moves (the Twilio status callback:
 * src/modules/twilio/task-callbacks.ts): its open attempt ended with `ended` in the log (with its
 * conversation), and, for a call whose retry rules name the result with attempts left, back to
 * pending at the next delay moved into the calling window; otherwise to `state`, with why retries
 * stopped when they did.
 */
export async function settleByCallback(
  db: Executor, task: TaskRow, state: 'finished' | 'failed' | 'canceled', result: Record<string, unknown>, error: string | null, now: number, conversation: { id: string; roomId: string } | null,
): Promise<{ to: 'pending' | 'finished' | 'failed' | 'canceled'; set: Partial<TaskRow> }> {
  const ended = state === 'finished' ? String(result.outcome) : state;
  const log = endingAttempt(task, ended, conversation) ?? task.attempt_log;
  const n = attemptNumber(task);
  const agent = task.type === 'call' && state !== 'canceled' ? await agentCampaign(db, task.account_id) : NO_AGENT_RULES;
  const rules = task.type === 'call' ? retryRulesOf(task, agent) : undefined;
  const decision = rules ? retryDecision(rules, retryResultOf(state, result.outcome), n) : null;
  if (!rules || decision === null) return { to: state, set: { result: JSON.stringify(result), error, attempt_log: log } };
  if ('stop' in decision) {
    return {
      to: state,
      set: { result: JSON.stringify({ ...result, stopReason: decision.stop }), error: state === 'failed' ? `${decision.stop}${error ? ` (${error})` : ''}` : error, attempt_log: log },
    };
  }
  const due = now + decision.retryInMs;
  const opening = await retryOpening(db, task, agent, due);
  const runAt = opening?.at ?? due;
  const moved = opening && runAt !== due ? `, moved to the calling window's opening (${opening.window.label})` : '';
  return {
    to: 'pending',
    set: {
      run_at: runAt, max_attempts: Math.max(task.max_attempts, task.attempt + 1), result: JSON.stringify(result), attempt_log: log,
      error: `${ended} on attempt ${n} of ${rules.maxAttempts}; next attempt at ${new Date(runAt).toISOString()}${moved}`,
    },
  };
}
