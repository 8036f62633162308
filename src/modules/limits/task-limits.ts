// An organization's task limits: their shape and validation, the wall-clock arithmetic they need
// (business hours and daily rollover in a time zone, DST included, with Intl only), and the
// admission rule the queue applies when it is about to claim a call or text. Pure functions.
import { canonicalTimeZone } from '../../lib/checks.ts';

export interface BusinessHours {
  /** IANA time zone the window is read in. */
  timezone: string;
  /** Days the window opens on, 0 = Sunday … 6 = Saturday, ascending and unique. */
  days: number[];
  /** "HH:MM", 00:00–23:59. */
  start: string;
  /** "HH:MM", after `start`; "24:00" means the end of the day. */
  end: string;
}

/**
 * Days and hours a call or text may go out, read in the recipient's local time unless `timezone`
 * names a zone (docs/campaigns.md; the rules of it are in ./calling-window.ts).
 */
export interface CallingWindow {
  /** 0 = Sunday … 6 = Saturday, ascending and unique. */
  days: number[];
  /** "HH:MM". */
  start: string;
  /** "HH:MM", after start; "24:00" is the end of the day. */
  end: string;
  /** Read in this zone instead of the recipient's (a SIP extension, a number whose zone is known better). */
  timezone?: string;
}

export interface DailyCaps { calls: number | null; texts: number | null; tasks: number | null }
export interface Cooldowns { calls: number | null; texts: number | null }
/**
 * Busy and no-answer are outcomes of a call that was placed, not failures: by default they end
 * the task. An organization may ask for that many further attempts, `delaySec` apart.
 */
export interface OutcomeRetries { busy: number | null; noAnswer: number | null; delaySec: number | null }

/** The limits in force for an organization; null means "no limit" throughout. */
export interface TaskLimits {
  businessHours: BusinessHours | null;
  daily: DailyCaps;
  concurrencyPerRun: number;
  /** Seconds between two attempts to the same target. */
  cooldowns: Cooldowns;
  retries: OutcomeRetries;
  /** The organization's default calling window (extension; agents and tasks may set their own): null, none. */
  callingWindow: CallingWindow | null;
}

/**
 * A validated update, as sent (only the parts present). `businessHours` replaces the window as a
 * whole (null removes it); `daily` and `cooldowns` are merged key by key (a key set to null
 * removes that limit, the whole object set to null removes them all); `concurrencyPerRun: null`
 * restores the default.
 */
export interface LimitsPatch {
  businessHours?: BusinessHours | null;
  daily?: Partial<DailyCaps> | null;
  concurrencyPerRun?: number | null;
  cooldowns?: Partial<Cooldowns> | null;
  retries?: Partial<OutcomeRetries> | null;
  callingWindow?: CallingWindow | null;
}

export const DEFAULT_CONCURRENCY = 5;
export const MAX_CONCURRENCY = 1000;
export const MAX_DAILY_CAP = 1_000_000_000;
export const MAX_COOLDOWN_SEC = 365 * 86_400;
/** Further attempts after a busy or unanswered call, at most. */
export const MAX_OUTCOME_RETRIES = 5;
/** The wait before such a further attempt when `retries.delaySec` is not set. */
export const DEFAULT_RETRY_DELAY_SEC = 300;
/** Fields only an ancestor (reseller or partner) may change for an organization. */
export const RESTRICTED_LIMIT_FIELDS = ['daily', 'concurrencyPerRun'] as const;

export const DEFAULT_LIMITS: Readonly<TaskLimits> = Object.freeze({
  businessHours: null,
  daily: Object.freeze({ calls: null, texts: null, tasks: null }),
  concurrencyPerRun: DEFAULT_CONCURRENCY,
  cooldowns: Object.freeze({ calls: null, texts: null }),
  retries: Object.freeze({ busy: null, noAnswer: null, delaySec: null }),
  callingWindow: null,
}) as Readonly<TaskLimits>;

const DAY_MS = 86_400_000;
const DAILY_KEYS = ['calls', 'texts', 'tasks'] as const;
const COOLDOWN_KEYS = ['calls', 'texts'] as const;
const RETRY_KEYS = ['busy', 'noAnswer', 'delaySec'] as const;
const HOURS_KEYS = ['timezone', 'days', 'start', 'end'] as const;

export type Checked<T> = { ok: true; value: T } | { ok: false; message: string };
const fail = (message: string): { ok: false; message: string } => ({ ok: false, message });

// ---------------------------------------------------------------------------------------------
// Validation

/**
 * A limits update checked field by field; the first problem is reported with the field's name
 * (`businessHours.days[2] must be …`). Unknown top-level keys are ignored like anywhere else in
 * the API, but unknown keys inside `businessHours`, `daily` and `cooldowns` are refused: a typo
 * there ("call" for "calls") would otherwise silently leave a limit unset.
 */
export function validateLimits(input: unknown): { ok: true; limits: LimitsPatch } | { ok: false; message: string } {
  if (!isPlainObject(input)) return fail('limits must be an object');
  const patch: LimitsPatch = {};

  if ('businessHours' in input && input.businessHours !== undefined) {
    const hours = validateBusinessHours(input.businessHours);
    if (!hours.ok) return hours;
    patch.businessHours = hours.value;
  }
  if ('daily' in input && input.daily !== undefined) {
    const daily = validateKeyed(input.daily, 'daily', DAILY_KEYS, (v, f) => nonNegativeInteger(v, f, MAX_DAILY_CAP, '', ''));
    if (!daily.ok) return daily;
    patch.daily = daily.value;
  }
  if ('concurrencyPerRun' in input && input.concurrencyPerRun !== undefined) {
    if (input.concurrencyPerRun === null) patch.concurrencyPerRun = null;
    else {
      const n = asInteger(input.concurrencyPerRun);
      if (n === undefined || n < 1 || n > MAX_CONCURRENCY) {
        return fail(`concurrencyPerRun must be an integer from 1 to ${MAX_CONCURRENCY}`);
      }
      patch.concurrencyPerRun = n;
    }
  }
  if ('cooldowns' in input && input.cooldowns !== undefined) {
    const cooldowns = validateKeyed(input.cooldowns, 'cooldowns', COOLDOWN_KEYS,
      (v, f) => nonNegativeInteger(v, f, MAX_COOLDOWN_SEC, ' (seconds)', ' seconds (365 days)'));
    if (!cooldowns.ok) return cooldowns;
    patch.cooldowns = cooldowns.value;
  }
  if ('retries' in input && input.retries !== undefined) {
    const retries = validateKeyed(input.retries, 'retries', RETRY_KEYS, (v, f) => f.endsWith('delaySec')
      ? nonNegativeInteger(v, f, 86_400, ' (seconds)', ' seconds (one day)')
      : nonNegativeInteger(v, f, MAX_OUTCOME_RETRIES, '', ' further attempts'));
    if (!retries.ok) return retries;
    patch.retries = retries.value;
  }
  if ('callingWindow' in input && input.callingWindow !== undefined) {
    const window = validateHours(input.callingWindow, 'callingWindow', false);
    if (!window.ok) return window;
    patch.callingWindow = window.value;
  }
  return { ok: true, limits: patch };
}

/** `current` with `patch` applied (see LimitsPatch for what each part means). Returns a new object. */
export function mergeLimits(current: Readonly<TaskLimits>, patch: LimitsPatch): TaskLimits {
  const merged: TaskLimits = {
    businessHours: current.businessHours ? { ...current.businessHours, days: [...current.businessHours.days] } : null,
    daily: { ...current.daily },
    concurrencyPerRun: current.concurrencyPerRun,
    cooldowns: { ...current.cooldowns },
    retries: { ...DEFAULT_LIMITS.retries, ...current.retries },
    callingWindow: current.callingWindow ? { ...current.callingWindow, days: [...current.callingWindow.days] } : null,
  };
  if (patch.callingWindow !== undefined) merged.callingWindow = patch.callingWindow;
  if (patch.businessHours !== undefined) {
    merged.businessHours = patch.businessHours ? { ...patch.businessHours, days: [...patch.businessHours.days] } : null;
  }
  if (patch.daily === null) merged.daily = { calls: null, texts: null, tasks: null };
  else if (patch.daily) for (const k of DAILY_KEYS) if (patch.daily[k] !== undefined) merged.daily[k] = patch.daily[k]!;
  if (patch.concurrencyPerRun !== undefined) merged.concurrencyPerRun = patch.concurrencyPerRun ?? DEFAULT_CONCURRENCY;
  if (patch.cooldowns === null) merged.cooldowns = { calls: null, texts: null };
  else if (patch.cooldowns) for (const k of COOLDOWN_KEYS) if (patch.cooldowns[k] !== undefined) merged.cooldowns[k] = patch.cooldowns[k]!;
  if (patch.retries === null) merged.retries = { busy: null, noAnswer: null, delaySec: null };
  else if (patch.retries) for (const k of RETRY_KEYS) if (patch.retries[k] !== undefined) merged.retries[k] = patch.retries[k]!;
  return merged;
}

function validateBusinessHours(value: unknown): Checked<BusinessHours | null> {
  const hours = validateHours(value, 'businessHours', true);
  return hours.ok && hours.value ? { ok: true, value: hours.value as BusinessHours } : hours as Checked<null>;
}

/**
 * A window of days and hours named `field` (business hours, or a calling window whose zone is
 * optional: `zoneRequired` false), checked field by field; null as a whole is allowed.
 */
export function validateHours(value: unknown, field: string, zoneRequired: boolean): Checked<(Omit<BusinessHours, 'timezone'> & { timezone?: string }) | null> {
  if (value === null) return { ok: true, value: null };
  if (!isPlainObject(value)) return fail(`${field} must be an object or null`);
  for (const key of Object.keys(value)) {
    if (!(HOURS_KEYS as readonly string[]).includes(key)) return fail(`${field}.${key} is not allowed`);
  }
  for (const key of HOURS_KEYS) {
    if (key === 'timezone' && !zoneRequired) continue;
    if (value[key] === undefined || value[key] === null) return fail(`${field}.${key} is required`);
  }

  let timezone: string | undefined;
  if (value.timezone !== undefined && value.timezone !== null) {
    const zone = validTimeZone(value.timezone);
    if (!zone.ok) return fail(`${field}.timezone ${zone.message}`);
    timezone = zone.value;
  }

  if (!Array.isArray(value.days)) return fail(`${field}.days must be an array of days (0 = Sunday … 6 = Saturday)`);
  if (value.days.length === 0) return fail(`${field}.days must have at least one day`);
  const days: number[] = [];
  for (let i = 0; i < value.days.length; i++) {
    const day = asInteger(value.days[i]);
    if (day === undefined || day < 0 || day > 6) {
      return fail(`${field}.days[${i}] must be an integer from 0 (Sunday) to 6 (Saturday)`);
    }
    if (days.includes(day)) return fail(`${field}.days must not repeat a day (${day} appears twice)`);
    days.push(day);
  }
  days.sort((a, b) => a - b);

  const start = parseClock(value.start, false);
  if (start === undefined) return fail(`${field}.start must be a time as HH:MM, from 00:00 to 23:59`);
  const end = parseClock(value.end, true);
  if (end === undefined) return fail(`${field}.end must be a time as HH:MM, from 00:01 to 24:00`);
  // A window that crosses midnight (22:00–06:00) is refused, not supported: "days" would then be
  // ambiguous (the day it opens or the day it closes?), and two windows on adjacent days say the
  // same thing without the ambiguity. "24:00" as end keeps "until midnight" expressible.
  if (end <= start) {
    return fail(`${field}.end must be after ${field}.start (${value.start as string}); ` +
      'windows that cross midnight are not supported, use 24:00 as the end of a day');
  }
  return { ok: true, value: { ...(timezone ? { timezone } : {}), days, start: formatClock(start), end: formatClock(end) } };
}

/** An object whose listed keys are each null (no limit) or pass `check`; null as a whole is allowed. */
function validateKeyed<K extends string>(
  value: unknown, field: string, keys: readonly K[], check: (v: unknown, f: string) => Checked<number>,
): Checked<Partial<Record<K, number | null>> | null> {
  if (value === null) return { ok: true, value: null };
  if (!isPlainObject(value)) return fail(`${field} must be an object or null`);
  const out: Partial<Record<K, number | null>> = {};
  for (const key of Object.keys(value)) {
    if (!(keys as readonly string[]).includes(key)) return fail(`${field}.${key} is not allowed (known: ${keys.join(', ')})`);
  }
  for (const key of keys) {
    const v = value[key];
    if (v === undefined) continue;
    if (v === null) { out[key] = null; continue; }
    const checked = check(v, `${field}.${key}`);
    if (!checked.ok) return checked;
    out[key] = checked.value;
  }
  return { ok: true, value: out };
}

function nonNegativeInteger(value: unknown, field: string, max: number, unit: string, maxNote: string): Checked<number> {
  const n = asInteger(value);
  if (n === undefined || n < 0) return fail(`${field} must be a non-negative integer${unit} or null`);
  if (n > max) return fail(`${field} must be at most ${max}${maxNote}`);
  return { ok: true, value: n };
}

/** Integers as numbers or strings of digits (the API's usual leniency); anything else undefined. */
function asInteger(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isInteger(value) ? value : undefined;
  if (typeof value === 'string' && /^\s*-?\d{1,15}\s*$/.test(value)) return Number(value);
  return undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A real IANA zone name in its canonical case (see canonicalTimeZone), or a message. */
export function validTimeZone(value: unknown): Checked<string> {
  if (typeof value !== 'string' || value.trim() === '') return fail('must be an IANA time zone name, such as America/New_York');
  const zone = canonicalTimeZone(value);
  return zone ? { ok: true, value: zone } : fail(`'${value.trim()}' is not an IANA time zone`);
}

/** Minutes since midnight for "HH:MM" (00:00–23:59, and 24:00 when `allowEndOfDay`). */
function parseClock(value: unknown, allowEndOfDay: boolean): number | undefined {
  if (typeof value !== 'string') return undefined;
  if (allowEndOfDay && value === '24:00') return 1440;
  const m = /^([01]\d|2[0-3]):([0-5]\d)$/.exec(value);
  return m ? Number(m[1]) * 60 + Number(m[2]) : undefined;
}

function formatClock(minutes: number): string {
  return `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;
}

// ---------------------------------------------------------------------------------------------
// Wall-clock arithmetic in a time zone. Instants are ms since the epoch; a "wall" value is the
// local date and time written as if it were UTC (Date.UTC(y, m, d, h, mi, s)), which makes local
// dates easy to compare and step through. Only Intl.DateTimeFormat knows the zone rules.

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    // Throws RangeError for an unknown zone: callers pass validated zones.
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz, hourCycle: 'h23',
      year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
    });
    if (formatters.size >= 1000) formatters.clear(); // zone names come from configuration; bound it anyway
    formatters.set(tz, f);
  }
  return f;
}

/** The wall value of instant `ms` in `tz`. */
function wallOf(ms: number, tz: string): number {
  const p: Record<string, number> = {};
  for (const part of formatter(tz).formatToParts(ms)) if (part.type !== 'literal') p[part.type] = Number(part.value);
  const wholeSecond = Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second);
  return wholeSecond + (((ms % 1000) + 1000) % 1000);
}

/**
 * Every instant whose wall time in `tz` is `wall`: one normally, two in a fall-back overlap
 * (earliest first). In a spring-forward gap, where the wall time never occurs, the one instant
 * returned is the end of the gap: the first instant whose wall time is later than `wall`.
 */
function instantsAt(wall: number, tz: string): number[] {
  const offsets = new Set([wall - DAY_MS, wall, wall + DAY_MS].map((t) => wallOf(t, tz) - t));
  const guesses = [...offsets].map((o) => wall - o).sort((a, b) => a - b);
  const exact = guesses.filter((t) => wallOf(t, tz) === wall);
  if (exact.length) return exact;
  // In the gap: the earliest guess lies before it, the latest after; search the transition.
  let lo = Math.floor(guesses[0] / 1000);
  let hi = Math.ceil(guesses[guesses.length - 1] / 1000);
  if (wallOf(hi * 1000, tz) < wall) return [hi * 1000]; // not reachable with real zone data
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (wallOf(mid * 1000, tz) >= wall) hi = mid;
    else lo = mid;
  }
  return [hi * 1000];
}

const dayStart = (wall: number) => Math.floor(wall / DAY_MS) * DAY_MS;
const weekday = (wall: number) => new Date(wall).getUTCDay();

/** The local calendar day of `nowMs` in `tz`, as 'YYYY-MM-DD' (the key of daily counters). */
export function localDay(nowMs: number, tz: string): string {
  return new Date(wallOf(nowMs, tz)).toISOString().slice(0, 10);
}

/**
 * The instant the local day after the one containing `nowMs` begins in `tz`: usually local
 * midnight; 23 or 25 hours away across a DST change; where midnight itself is skipped (zones
 * that change at 00:00), the first instant of the new day.
 */
export function nextLocalMidnight(nowMs: number, tz: string): number {
  const tomorrow = dayStart(wallOf(nowMs, tz)) + DAY_MS;
  for (const t of instantsAt(tomorrow, tz)) if (t > nowMs) return t;
  return nowMs + DAY_MS; // not reachable with real zone data
}

/** Whether `nowMs` falls inside the window (always, when there is none). Minute resolution. */
export function isOpen(nowMs: number, hours: BusinessHours | null | undefined): boolean {
  if (!hours) return true;
  const wall = wallOf(nowMs, hours.timezone);
  if (!hours.days.includes(weekday(wall))) return false;
  const minute = Math.floor((wall - dayStart(wall)) / 60_000);
  return minute >= clockMinutes(hours.start) && minute < clockMinutes(hours.end);
}

/**
 * The first instant at or after `nowMs` when the window is open: `nowMs` itself when open now,
 * otherwise the next opening, across closed days and DST changes. An opening time that a DST gap
 * skips opens at the end of the gap (02:30 on the spring-forward night in New York opens at
 * 03:00); a window entirely inside a gap does not open that day.
 */
export function nextOpening(nowMs: number, hours: BusinessHours | null | undefined): number {
  if (!hours || isOpen(nowMs, hours)) return nowMs;
  const today = dayStart(wallOf(nowMs, hours.timezone));
  const start = clockMinutes(hours.start) * 60_000;
  // Eight days reach every weekday; a few more cover a day that a zone skipped altogether.
  for (let k = 0; k <= 14; k++) {
    const day = today + k * DAY_MS;
    if (!hours.days.includes(weekday(day))) continue;
    for (const t of instantsAt(day + start, hours.timezone)) {
      if (t > nowMs && isOpen(t, hours)) return t;
    }
  }
  return nowMs + DAY_MS; // not reachable with validated hours and real zone data: look again tomorrow
}

/** Whether every window of `all` is open at `nowMs` (true for none). */
export function isOpenInAll(nowMs: number, all: readonly BusinessHours[]): boolean {
  return all.every((h) => isOpen(nowMs, h));
}

/**
 * The first instant at or after `nowMs` when every window of `all` is open at once (a calling
 * window read in each of a number's zones, with the organization's business hours): each closed
 * window moves the candidate to its next opening, until none is closed. Null when no such instant
 * comes within eight days (windows that never overlap).
 */
export function nextOpeningInAll(nowMs: number, all: readonly BusinessHours[]): number | null {
  let t = nowMs;
  const limit = nowMs + 8 * DAY_MS;
  for (let pass = 0; pass < 64 && t <= limit; pass++) {
    let moved = false;
    for (const h of all) {
      if (isOpen(t, h)) continue;
      t = nextOpening(t, h);
      moved = true;
    }
    if (!moved) return t;
  }
  return null;
}

function clockMinutes(clock: string): number {
  return clock === '24:00' ? 1440 : Number(clock.slice(0, 2)) * 60 + Number(clock.slice(3, 5));
}

// ---------------------------------------------------------------------------------------------
// Admission

export type TaskKind = 'call' | 'text' | 'ping';
export type DeferCode = 'business_hours' | 'calling_window' | 'daily_cap' | 'cooldown' | 'concurrency';

/**
 * A task's calling window as admission reads it: the window in each zone it applies in (the
 * recipient's, docs/campaigns.md), all of which must be open, and how a hold names it.
 */
export interface RecipientWindow { hours: readonly BusinessHours[]; label: string }

/** What the claim transaction knows about the organization when it considers one task. */
export interface AdmissionCounters {
  /** Attempts already counted today (in `dayTimezone`'s day) per kind; missing counts are 0. */
  today: Partial<Record<'calls' | 'texts' | 'tasks', number>>;
  /**
   * The zone whose days the daily counts belong to: the organization's time zone. See
   * `dayTimeZone` for the fallback when the organization has none.
   */
  dayTimezone: string;
  /** Tasks of the organization running now (the semaphore's count, this task not included). */
  running: number;
  /** The last attempt of the same kind to the same target (ms), if any. */
  lastAttemptAt?: number | null;
}

export type Admission =
  | { admit: true }
  | { admit: false; until: number; code: DeferCode; reason: string };

/**
 * When the concurrency limit is full there is no time at which it is known to free up; the task
 * is looked at again this much later (the queue may also wake it when a slot is released).
 */
export const CONCURRENCY_RECHECK_MS = 1000;

/**
 * The zone daily counters roll over in: the organization's own time zone; without one, the zone
 * of its business hours; without those, UTC.
 */
export function dayTimeZone(orgTimezone: string | null | undefined, limits: Pick<TaskLimits, 'businessHours'>): string {
  return orgTimezone || limits.businessHours?.timezone || 'UTC';
}

/**
 * Whether a task of `kind` may start at `nowMs`. Pings are exempt from every limit. Otherwise all
 * limits are checked and, when any refuses, `until` is the earliest time worth looking again: the
 * latest of the blocking limits' own times (cooldown end, next local midnight for a reached daily
 * cap, next opening of the window, a short recheck for concurrency), moved to the next opening if
 * that falls outside business hours. `code` names the limit that set `until`; `reason` lists every
 * limit that refused. A daily cap of 0 defers to each next midnight (the cap may be raised).
 * The semaphore and counter updates in the claim transaction stay the authority; this decides
 * only whether to try them and, if not, when to look again.
 */
export function admission(kind: TaskKind, nowMs: number, limits: Readonly<TaskLimits>, counters: AdmissionCounters, recipient?: RecipientWindow): Admission {
  if (kind === 'ping') return { admit: true };
  const plural = kind === 'call' ? 'calls' : 'texts';
  const blocks: { code: DeferCode; until: number; reason: string }[] = [];

  const hours = limits.businessHours;
  if (hours && !isOpen(nowMs, hours)) {
    const opens = nextOpening(nowMs, hours);
    blocks.push({ code: 'business_hours', until: opens, reason: `outside business hours (opens ${new Date(opens).toISOString()})` });
  }
  if (recipient && !isOpenInAll(nowMs, recipient.hours)) {
    const opens = nextOpeningInAll(nowMs, recipient.hours);
    blocks.push(opens === null
      ? { code: 'calling_window', until: nowMs + DAY_MS, reason: `outside the calling window (${recipient.label}), which does not open within eight days; looked at again in a day` }
      : { code: 'calling_window', until: opens, reason: `outside the calling window (${recipient.label}; opens ${new Date(opens).toISOString()})` });
  }

  const cap = limits.daily[plural];
  const taskCap = limits.daily.tasks;
  const done = counters.today[plural] ?? 0;
  const doneTasks = counters.today.tasks ?? 0;
  const capReached = cap !== null && cap !== undefined && done >= cap;
  const taskCapReached = taskCap !== null && taskCap !== undefined && doneTasks >= taskCap;
  if (capReached || taskCapReached) {
    const midnight = nextLocalMidnight(nowMs, counters.dayTimezone);
    const what = capReached ? `daily ${kind} limit of ${cap} reached` : `daily task limit of ${taskCap} reached`;
    blocks.push({ code: 'daily_cap', until: midnight, reason: `${what} (resets ${new Date(midnight).toISOString()})` });
  }

  const cooldown = limits.cooldowns[plural];
  const last = counters.lastAttemptAt;
  if (cooldown && last !== null && last !== undefined && nowMs < last + cooldown * 1000) {
    const ends = last + cooldown * 1000;
    blocks.push({ code: 'cooldown', until: ends, reason: `cooldown of ${cooldown}s for this target until ${new Date(ends).toISOString()}` });
  }

  if (counters.running >= limits.concurrencyPerRun) {
    blocks.push({
      code: 'concurrency', until: nowMs + CONCURRENCY_RECHECK_MS,
      reason: `concurrency limit of ${limits.concurrencyPerRun} running tasks reached`,
    });
  }

  if (blocks.length === 0) return { admit: true };
  let binding = blocks[0];
  for (const b of blocks) if (b.until > binding.until) binding = b;
  let until = binding.until;
  let code = binding.code;
  const windows = recipient ? [...(hours ? [hours] : []), ...recipient.hours] : hours ? [hours] : [];
  if (!isOpenInAll(until, windows)) {
    // Not before every window is open: the business hours and the recipient's calling window.
    const opens = nextOpeningInAll(until, windows);
    code = hours && !isOpen(until, hours) ? 'business_hours' : 'calling_window';
    until = opens ?? until; // windows that never meet: looked at again at the binding time
  }
  return { admit: false, until, code, reason: blocks.map((b) => b.reason).join('; ') };
}

/**
 * After a call ended busy or unanswered on attempt `attempt` (1-based): the wait before one more
 * attempt when the organization's `retries` ask for it, else null (the outcome stands).
 */
export function outcomeRetryDelayMs(limits: Readonly<TaskLimits>, outcome: string, attempt: number): number | null {
  const allowed = outcome === 'busy' ? limits.retries?.busy : outcome === 'no-answer' ? limits.retries?.noAnswer : null;
  if (!allowed || attempt > allowed) return null;
  return (limits.retries.delaySec ?? DEFAULT_RETRY_DELAY_SEC) * 1000;
}
