// One submitted task, read and checked field by field, whatever the door it came through
// (POST /tasks, the agent queueing operations, a CSV row). Every refusal names the field.
import type { TaskRow, TaskType } from '../../db/types.ts';
import { newId } from '../../lib/ids.ts';
import { invalidPhoneMessage, normalizePhone } from '../../lib/phone.ts';
import { flag } from '../../db/flags.ts';
import { MAX_JSON_DEPTH, tooDeep } from '../../lib/json.ts';
import { normalizeScheduledFor, staggered, type Scheduled } from './schedule.ts';
import { validateCallingWindow, validateRetryRules, type CallingWindow, type RetryRules } from '../limits/calling-window.ts';

export const TASK_TYPES: readonly TaskType[] = ['call', 'text', 'ping'];
export const MAX_TEXT = 10_000;
/** Ten SMS segments: Twilio's own ceiling for one message body. */
export const MAX_CONTENT = 1600;
export const MAX_EXTERNAL_ID = 255;
export const MAX_META_BYTES = 16 * 1024;
export const DEFAULT_MAX_ATTEMPTS = 3;

/** A task as submitted, before checking. Strings from a CSV, typed JSON from the API. */
export interface RawTask {
  type?: unknown;
  target?: unknown;
  context?: unknown;
  taskContext?: unknown;
  content?: unknown;
  message?: unknown;
  greeting?: unknown;
  waitToGreet?: unknown;
  accountId?: unknown;
  scheduledFor?: unknown;
  meta?: unknown;
  externalTaskId?: unknown;
  /** A call's own voicemail choice `{action, message}` (extension; docs/tasks.md). */
  voicemail?: unknown;
  /** The task's own calling window, over its agent's and organization's; null: none (extension; docs/campaigns.md). */
  callingWindow?: unknown;
  /** A call's own retry rules, over its agent's (extension; docs/campaigns.md). */
  retryRules?: unknown;
}

/** What a call does when a voicemail answers (the call policy's VOICEMAIL_ACTIONS; tasks never import conversations). */
export const TASK_VOICEMAIL_ACTIONS = ['hangup', 'leave-message', 'continue'] as const;
export const MAX_VOICEMAIL_MESSAGE = 1000;

/** A task's `voicemail` as stored (JSON `{action, message}`), or null for the agent's choice. */
export function readTaskVoicemail(v: unknown, field: string): { ok: true; value: string | null } | { ok: false; message: string } {
  if (v === undefined || v === null || v === '') return { ok: true, value: null };
  let value: unknown = v;
  if (typeof value === 'string' && !value.trim().startsWith('{')) {
    // A CSV cell's short form: `hangup`, `continue`, or `leave-message: <the message>`.
    const [, action, message] = /^\s*([a-z-]+)\s*(?::([\s\S]*))?$/i.exec(value) ?? [];
    if (action === undefined) return { ok: false, message: `${field} must be an object {action, message}, or an action (${TASK_VOICEMAIL_ACTIONS.join(', ')}) optionally followed by ': <message>'` };
    value = { action: action.toLowerCase(), ...(message !== undefined ? { message } : {}) };
  } else if (typeof value === 'string') {
    try { value = JSON.parse(value) as unknown; } catch { return { ok: false, message: `${field} must be an object {action, message}` }; }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { ok: false, message: `${field} must be an object {action, message}` };
  const o = value as Record<string, unknown>;
  const extra = Object.keys(o).find((k) => k !== 'action' && k !== 'message');
  if (extra !== undefined) return { ok: false, message: `${field}.${extra.slice(0, 40)} is not a field of voicemail (action, message)` };
  if (typeof o.action !== 'string' || !(TASK_VOICEMAIL_ACTIONS as readonly string[]).includes(o.action)) {
    return { ok: false, message: `${field}.action must be one of: ${TASK_VOICEMAIL_ACTIONS.join(', ')}` };
  }
  if (o.message !== undefined && o.message !== null && typeof o.message !== 'string') return { ok: false, message: `${field}.message must be a string` };
  const message = typeof o.message === 'string' ? o.message.trim() : '';
  if (message.length > MAX_VOICEMAIL_MESSAGE) return { ok: false, message: `${field}.message must be at most ${MAX_VOICEMAIL_MESSAGE} characters long` };
  return { ok: true, value: JSON.stringify({ action: o.action, ...(message ? { message } : {}) }) };
}

export interface ItemContext {
  orgId: number;
  /** The agent the task runs as when the item names none. */
  defaultAccountId: number;
  /** Agents of the organization the caller may name (the caller's whole org, or only itself). */
  allowedAccount(id: number): boolean;
  now: number;
  /** Prefix for field names in messages: '' for a single task, 'targets[3].' for a batch item. */
  field?: string;
  /** The stagger of a batch: item `index` × `spacingSec` later than its schedule. */
  index?: number;
  spacingSec?: number;
  /**
   * The agent of the organization a username names (the `username` GET /api/v2/account shows:
   * its email, else `account-<id>`), among those the caller may name; undefined when none.
   */
  agentByUsername?(name: string): { id: number; username: string } | undefined;
}

/**
 * Whether a target names a user rather than a phone number: phone numbers begin with `+`, a digit
 * or `(` (written forms such as `(415) 555-2671`); anything else (`jane@example.com`,
 * `account-12`) is a username.
 */
export function isUsernameTarget(target: unknown): target is string {
  return typeof target === 'string' && target.trim() !== '' && !/^[+(\d]/.test(target.trim());
}

const clip = (text: string) => (text.length > 64 ? `${text.slice(0, 64)}…` : text);

export type Checked = { ok: true; task: TaskRow; notes: string[] } | { ok: false; message: string };

const fail = (message: string): { ok: false; message: string } => ({ ok: false, message });

function optionalString(v: unknown, name: string, max: number): { ok: true; value: string | null } | { ok: false; message: string } {
  if (v === undefined || v === null) return { ok: true, value: null };
  if (typeof v !== 'string') return fail(`${name} must be a string`);
  if (v.length > max) return fail(`${name} must be at most ${max} characters`);
  return { ok: true, value: v === '' ? null : v };
}

function readBool(v: unknown, name: string): { ok: true; value: boolean } | { ok: false; message: string } {
  if (v === undefined || v === null || v === '') return { ok: true, value: false };
  if (typeof v === 'boolean') return { ok: true, value: v };
  if (v === 'true' || v === '1') return { ok: true, value: true };
  if (v === 'false' || v === '0') return { ok: true, value: false };
  return fail(`${name} must be a boolean (true or false)`);
}

function readInt(v: unknown): number | undefined {
  if (typeof v === 'number' && Number.isInteger(v)) return v;
  if (typeof v === 'string' && /^\s*\d+\s*$/.test(v)) return Number(v);
  return undefined;
}

/** Checks one task; on success the row to insert (id, times and queue columns set). */
export function checkTask(raw: RawTask, ctx: ItemContext): Checked {
  const f = ctx.field ?? '';
  const notes: string[] = [];
  if (raw.type === undefined || raw.type === null || raw.type === '') return fail(`${f}type is required (call, text or ping)`);
  if (typeof raw.type !== 'string' || !TASK_TYPES.includes(raw.type as TaskType)) {
    return fail(`${f}type must be one of call, text, ping (got ${JSON.stringify(raw.type)})`);
  }
  const type = raw.type as TaskType;

  let target: string | null = null;
  /** A ping whose target is an agent's username runs as that agent (unless accountId says otherwise). */
  let targetAgent: number | undefined;
  if (raw.target !== undefined && raw.target !== null && raw.target !== '') {
    if (isUsernameTarget(raw.target)) {
      const name = raw.target.trim();
      if (type !== 'ping') {
        return fail(`${f}target '${clip(name)}' is not a phone number: ${type} tasks need a phone number in international format `
          + '(+<country code><number>); a username is a target for ping tasks only');
      }
      const agent = ctx.agentByUsername?.(name);
      if (agent === undefined) return fail(`${f}target '${clip(name)}' is not the username of an agent of this organization`);
      target = agent.username;
      targetAgent = agent.id;
    } else {
      const phone = normalizePhone(raw.target);
      if (!phone.ok) return fail(invalidPhoneMessage(`${f}target`, raw.target, phone.reason));
      target = phone.e164;
      if (!phone.assigned) {
        notes.push(`${f}target ${phone.e164} is a possible number but not one assigned in any numbering plan; `
          + 'the task was accepted, and the carrier may refuse the number');
      }
    }
  } else if (type !== 'ping') {
    return fail(`${f}target is required for ${type} tasks`);
  }

  const context = optionalString(raw.context, `${f}context`, MAX_TEXT);
  if (!context.ok) return context;
  const taskContext = optionalString(raw.taskContext, `${f}taskContext`, MAX_TEXT);
  if (!taskContext.ok) return taskContext;
  const greeting = optionalString(raw.greeting, `${f}greeting`, MAX_TEXT);
  if (!greeting.ok) return greeting;
  const contentField = raw.content !== undefined && raw.content !== null ? 'content' : 'message';
  const content = optionalString(raw.content ?? raw.message, `${f}${contentField}`, MAX_CONTENT);
  if (!content.ok) return content;
  let body = content.value;
  // A text task as the contract writes it has no content: the agent writes the text with its model
  // when the task runs (run-task.ts, composeText), from its instructions and the task's context.
  // `content` (or `message`) is the extension for a fixed text; a task's `greeting` is sent as
  // written when there is no content (docs/tasks.md, "Text tasks").
  if (type === 'text' && body === null && greeting.value !== null) {
    body = greeting.value;
    notes.push(`${f}content was empty: the greeting is sent as the message`);
  }
  const wait = readBool(raw.waitToGreet, `${f}waitToGreet`);
  if (!wait.ok) return wait;
  const voicemail = readTaskVoicemail(raw.voicemail, `${f}voicemail`);
  if (!voicemail.ok) return fail(voicemail.message);
  if (voicemail.value !== null && type !== 'call') return fail(`${f}voicemail applies to call tasks only`);

  const campaign = readCampaign(raw, f, type);
  if (!campaign.ok) return campaign;

  let accountId = targetAgent ?? ctx.defaultAccountId;
  if (raw.accountId !== undefined && raw.accountId !== null && raw.accountId !== '') {
    const id = readInt(raw.accountId);
    if (id === undefined || id < 1) return fail(`${f}accountId must be a positive integer`);
    if (!ctx.allowedAccount(id)) return fail(`${f}accountId ${id} is not an agent of this organization`);
    accountId = id;
  }

  const sched = normalizeScheduledFor(raw.scheduledFor === '' ? undefined : raw.scheduledFor, ctx.now, `${f}scheduledFor`);
  if (!sched.ok) return sched;
  if (sched.note) notes.push(sched.note);
  const when: Scheduled = ctx.index && ctx.spacingSec ? staggered(sched, ctx.index, ctx.spacingSec) : sched;

  let meta: string | null = null;
  if (raw.meta !== undefined && raw.meta !== null && raw.meta !== '') {
    let value: unknown = raw.meta;
    if (typeof value === 'string') {
      try { value = JSON.parse(value); } catch { return fail(`${f}meta must be a JSON object`); }
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return fail(`${f}meta must be an object`);
    // A CSV cell is parsed here, after the request body's own depth check: bounded before
    // JSON.stringify, which would overflow the stack on thousands of levels.
    if (tooDeep(value, MAX_JSON_DEPTH)) return fail(`${f}meta is nested too deeply: at most ${MAX_JSON_DEPTH} levels of objects and arrays`);
    meta = JSON.stringify(value);
    if (Buffer.byteLength(meta) > MAX_META_BYTES) return fail(`${f}meta must be at most ${MAX_META_BYTES} bytes as JSON`);
  }
  const externalTaskId = optionalString(raw.externalTaskId, `${f}externalTaskId`, MAX_EXTERNAL_ID);
  if (!externalTaskId.ok) return externalTaskId;

  const now = ctx.now;
  return {
    ok: true,
    notes,
    task: {
      id: newId('tsk', now),
      org_id: ctx.orgId,
      account_id: accountId,
      type,
      state: 'pending',
      target,
      context: context.value,
      task_context: taskContext.value,
      content: type === 'text' ? body : content.value,
      greeting: greeting.value,
      wait_to_greet: flag(wait.value),
      voicemail: voicemail.value,
      meta,
      external_task_id: externalTaskId.value,
      scheduled_for: when.scheduledForMs,
      run_at: when.runAtMs,
      attempt: 0,
      max_attempts: DEFAULT_MAX_ATTEMPTS,
      lease_owner: null,
      lease_expires_at: null,
      cancel_requested_at: null,
      idempotency_key: null,
      request_hash: null,
      provider: null,
      provider_ref: null,
      result: null,
      error: null,
      created_at: now,
      updated_at: now,
      started_at: null,
      finished_at: null,
      parked: 0,
      held_reason: null,
      campaign: campaign.value,
      attempt_log: null,
    },
  };
}

/** A CSV cell's JSON, or the value as sent; undefined for an empty cell. */
function jsonCell(v: unknown): { ok: true; value: unknown } | { ok: false } {
  if (v === '' || v === undefined) return { ok: true, value: undefined };
  if (typeof v !== 'string') return { ok: true, value: v };
  if (v.trim() === 'null') return { ok: true, value: null };
  try { return { ok: true, value: JSON.parse(v) as unknown }; } catch { return { ok: false }; }
}

/**
 * The task's own campaign rules (docs/campaigns.md) as stored (JSON, keys present only when sent),
 * or null when it sends none: `callingWindow` (an object, or null for no window at all) and, on
 * calls, `retryRules`.
 */
function readCampaign(raw: RawTask, f: string, type: TaskType): { ok: true; value: string | null } | { ok: false; message: string } {
  const out: { callingWindow?: CallingWindow | null; retryRules?: RetryRules | null } = {};
  const window = jsonCell(raw.callingWindow);
  if (!window.ok) return fail(`${f}callingWindow must be an object {days, start, end, timezone} or null`);
  if (window.value !== undefined) {
    if (type === 'ping') return fail(`${f}callingWindow applies to call and text tasks only`);
    const checked = validateCallingWindow(window.value, `${f}callingWindow`);
    if (!checked.ok) return checked;
    out.callingWindow = checked.value;
  }
  const rules = jsonCell(raw.retryRules);
  if (!rules.ok) return fail(`${f}retryRules must be an object {on, delaysSec, maxAttempts} or null`);
  if (rules.value !== undefined) {
    if (type !== 'call') return fail(`${f}retryRules applies to call tasks only`);
    const checked = validateRetryRules(rules.value, `${f}retryRules`);
    if (!checked.ok) return checked;
    out.retryRules = checked.value;
  }
  return { ok: true, value: Object.keys(out).length > 0 ? JSON.stringify(out) : null };
}
