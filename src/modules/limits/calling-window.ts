// Outbound campaign rules (docs/campaigns.md): a calling window read in the recipient's local
// time, and the retry rules of a call. Their shape and validation (one check for the organization's
// default, an agent's setting and a task's own), which zones a window is read in for a number, and
// the retry decision. Pure functions, below agents and tasks (docs/architecture.md).
import { validateHours, validTimeZone, type BusinessHours, type CallingWindow, type Checked, type RecipientWindow } from './task-limits.ts';

export type { CallingWindow };

/** The results of a call attempt that retry rules may name. */
export const RETRY_RESULTS = ['no-answer', 'busy', 'failed', 'voicemail'] as const;
export type RetryResult = (typeof RETRY_RESULTS)[number];

export interface RetryRules {
  /** Which results try again. */
  on: RetryResult[];
  /** Seconds before retry n (1-based) is delaysSec[n − 1]; the last delay repeats. */
  delaysSec: number[];
  /** Attempts in all, the first included. */
  maxAttempts: number;
}

export const MAX_RETRY_ATTEMPTS = 10;
export const MAX_RETRY_DELAYS = 10;
export const MAX_RETRY_DELAY_SEC = 7 * 86_400;
/**
 * A number that maps to several zones (a country-wide range) is windowed in all of them when their
 * UTC offsets now lie within this many hours of each other (the US mainland: Eastern to Pacific);
 * beyond it (US toll-free reaches from Guam to Newfoundland), in the organization's zone.
 */
export const MAX_ZONE_SPREAD_HOURS = 3;

const fail = (message: string): { ok: false; message: string } => ({ ok: false, message });

/** A calling window as sent (`field` names it in messages), or null. */
export function validateCallingWindow(value: unknown, field: string): Checked<CallingWindow | null> {
  if (value === undefined) return { ok: true, value: null };
  const checked = validateHours(value, field, false);
  return checked as Checked<CallingWindow | null>;
}

/** Retry rules as sent: `{on, delaysSec, maxAttempts}`, every key required; null allowed. */
export function validateRetryRules(value: unknown, field: string): Checked<RetryRules | null> {
  if (value === undefined || value === null) return { ok: true, value: null };
  if (typeof value !== 'object' || Array.isArray(value)) return fail(`${field} must be an object {on, delaysSec, maxAttempts} or null`);
  const o = value as Record<string, unknown>;
  const extra = Object.keys(o).find((k) => k !== 'on' && k !== 'delaysSec' && k !== 'maxAttempts');
  if (extra !== undefined) return fail(`${field}.${extra.slice(0, 40)} is not allowed (known: on, delaysSec, maxAttempts)`);
  if (!Array.isArray(o.on)) return fail(`${field}.on must be an array of results (${RETRY_RESULTS.join(', ')})`);
  const on: RetryResult[] = [];
  const given = o.on as unknown[];
  for (let i = 0; i < given.length; i++) {
    const r = given[i];
    if (typeof r !== 'string' || !(RETRY_RESULTS as readonly string[]).includes(r)) return fail(`${field}.on[${i}] must be one of ${RETRY_RESULTS.join(', ')}`);
    if (!on.includes(r as RetryResult)) on.push(r as RetryResult);
  }
  if (!Array.isArray(o.delaysSec) || o.delaysSec.length === 0 || o.delaysSec.length > MAX_RETRY_DELAYS) {
    return fail(`${field}.delaysSec must be an array of 1 to ${MAX_RETRY_DELAYS} delays (seconds)`);
  }
  const delaysSec: number[] = [];
  const delays = o.delaysSec as unknown[];
  for (let i = 0; i < delays.length; i++) {
    const d = delays[i];
    if (typeof d !== 'number' || !Number.isInteger(d) || d < 0 || d > MAX_RETRY_DELAY_SEC) {
      return fail(`${field}.delaysSec[${i}] must be an integer from 0 to ${MAX_RETRY_DELAY_SEC} (seconds; 7 days)`);
    }
    delaysSec.push(d);
  }
  const max = o.maxAttempts;
  if (typeof max !== 'number' || !Number.isInteger(max) || max < 1 || max > MAX_RETRY_ATTEMPTS) {
    return fail(`${field}.maxAttempts must be an integer from 1 to ${MAX_RETRY_ATTEMPTS} (attempts in all, the first included)`);
  }
  return { ok: true, value: { on, delaysSec, maxAttempts: max } };
}

const DAY_NAMES = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];

/** "Mon–Fri 09:00–20:00" ("Mon, Wed, Fri 09:00–12:00" when the days are not a run). */
export function describeWindow(w: Pick<CallingWindow, 'days' | 'start' | 'end'>): string {
  const d = w.days;
  const run = d.length > 2 && d.every((x, i) => i === 0 || x === d[i - 1] + 1);
  const days = d.length === 7 ? 'every day' : run ? `${DAY_NAMES[d[0]]}–${DAY_NAMES[d[d.length - 1]]}` : d.map((x) => DAY_NAMES[x]).join(', ');
  return `${days} ${w.start}–${w.end}`;
}

/** UTC offset of `tz` at `at`, in minutes. */
function offsetMinutes(tz: string, at: number): number {
  const parts = new Intl.DateTimeFormat('en-US', { timeZone: tz, timeZoneName: 'longOffset' }).formatToParts(at);
  const name = parts.find((p) => p.type === 'timeZoneName')?.value ?? 'GMT';
  const m = /GMT([+-])(\d{2}):(\d{2})/.exec(name);
  return m ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3])) : 0;
}

/**
 * The zones a task's calling window is read in, and how they were found (said in a hold's reason):
 * - the window's own `timezone`, when it names one;
 * - else the zones the numbering plan gives the number (`numberZones`, src/lib/phone-zones.ts):
 *   one zone as it is; several (a country-wide range) all at once — the window must be open in
 *   each, the conservative intersection — when their offsets at `at` lie within
 *   MAX_ZONE_SPREAD_HOURS of each other;
 * - else (no zone, a spread too wide, or no valid zone among them) the organization's zone
 *   (`fallback`).
 */
export function windowZones(window: CallingWindow, numberZones: readonly string[], fallback: string, at: number): { zones: string[]; basis: string } {
  if (window.timezone) return { zones: [window.timezone], basis: `${window.timezone}, the window's own zone` };
  const valid = [...new Set(numberZones)].filter((z) => validTimeZone(z).ok);
  if (valid.length === 1) return { zones: valid, basis: `${valid[0]}, the recipient's time` };
  if (valid.length > 1) {
    const offsets = valid.map((z) => offsetMinutes(z, at));
    const spread = Math.max(...offsets) - Math.min(...offsets);
    if (spread <= MAX_ZONE_SPREAD_HOURS * 60) {
      return { zones: valid, basis: `the recipient's time in each of ${valid.join(', ')}` };
    }
    return { zones: [fallback], basis: `${fallback}, the organization's time: the number spans ${valid.length} time zones ${spread / 60} hours apart` };
  }
  return { zones: [fallback], basis: `${fallback}, the organization's time: the number names no time zone` };
}

/** The window admission checks for a task (RecipientWindow of task-limits.ts). */
export function recipientWindow(window: CallingWindow, numberZones: readonly string[], fallback: string, at: number, source?: 'task' | 'agent' | 'organization'): RecipientWindow {
  const { zones, basis } = windowZones(window, numberZones, fallback, at);
  const hours: BusinessHours[] = zones.map((timezone) => ({ timezone, days: window.days, start: window.start, end: window.end }));
  return { hours, label: `${describeWindow(window)}${source ? ` (the ${source}'s)` : ''}, ${basis}` };
}

/** What a finished or failed call attempt's outcome counts as for retry rules, or null (it never retries). */
export function retryResultOf(state: string, outcome: unknown): RetryResult | null {
  if (state === 'failed') return 'failed';
  if (state !== 'finished') return null;
  return outcome === 'no-answer' || outcome === 'busy' || outcome === 'voicemail' ? outcome : null;
}

/**
 * After call attempt `attempt` (1-based) ended with `result`: the wait before the next one, or why
 * it stops (`retries exhausted after 3 attempts: no-answer`); null when the rules do not name the
 * result (the outcome stands as it is).
 */
export function retryDecision(rules: RetryRules, result: RetryResult | null, attempt: number): { retryInMs: number } | { stop: string } | null {
  if (result === null || !rules.on.includes(result)) return null;
  if (attempt >= rules.maxAttempts) return { stop: `retries exhausted after ${attempt} attempt${attempt === 1 ? '' : 's'}: ${result}` };
  const delay = rules.delaysSec[Math.min(attempt - 1, rules.delaysSec.length - 1)];
  return { retryInMs: delay * 1000 };
}
