// When a submitted task may first run: `scheduledFor` (unix seconds, as the contract says) read
// strictly, and the stagger of a batch (`scheduleSpacingSec`). Pure functions; callers pass `now`.

/** A time this far in the past is taken as "now": clocks differ and requests take time. */
export const PAST_GRACE_MS = 5 * 60_000;
/** 9999-12-31T23:59:59Z: beyond it dates stop being four-digit years, and no schedule needs it. */
export const MAX_SCHEDULED_FOR_SEC = 253_402_300_799;
/**
 * From here on (13 digits and more) a value is taken to be milliseconds. In seconds it would be
 * the year 33658, so nobody means it; in milliseconds it is any date since 2001.
 */
const MILLISECONDS_FROM = 1e12;
/** Stagger of one batch item to the next; a day is already far more than any dialling pace. */
export const MAX_SPACING_SEC = 86_400;

export interface Scheduled {
  /** When the task may first be claimed (ms). */
  runAtMs: number;
  /** The requested time (ms), kept as asked; null when the task was not scheduled. */
  scheduledForMs: number | null;
  /** Set when the request was read in a way worth telling the caller about. */
  note?: string;
}

export type ScheduleResult = ({ ok: true } & Scheduled) | { ok: false; message: string };

/**
 * Reads `scheduledFor`. Choices where a guess would be possible, made as refusals so nothing is
 * silently reinterpreted:
 * - 13 or more digits: refused as "looks like milliseconds" rather than divided by 1000, because
 *   a client that sends milliseconds here probably sends them elsewhere too, and should hear it.
 * - In the past by more than PAST_GRACE_MS: refused, naming the field and how far back it is.
 *   Within the grace it runs now, with a note.
 * - Absent, null or 0: not scheduled, runs now (0 is the usual "unset" of JSON clients and is
 *   never a real schedule; the answer carries a note saying how it was read).
 * - Fractions, negatives and non-numeric strings: refused. A string of digits is read as the
 *   number it spells, like every other integer in this API.
 * `field` names the value in messages (`targets[3].scheduledFor` for a batch item).
 */
export function normalizeScheduledFor(value: unknown, nowMs: number, field = 'scheduledFor'): ScheduleResult {
  if (value === undefined || value === null) return { ok: true, runAtMs: nowMs, scheduledForMs: null };
  let seconds: number;
  if (typeof value === 'number') seconds = value;
  else if (typeof value === 'string' && /^\s*-?\d+\s*$/.test(value)) seconds = Number(value);
  else return { ok: false, message: `${field} must be an integer (unix seconds)` };
  if (!Number.isFinite(seconds)) return { ok: false, message: `${field} must be a finite number` };
  if (!Number.isInteger(seconds)) return { ok: false, message: `${field} must be an integer (unix seconds)` };
  if (seconds < 0) return { ok: false, message: `${field} must not be negative (unix seconds)` };
  if (seconds === 0) return { ok: true, runAtMs: nowMs, scheduledForMs: null, note: `${field} 0 is read as "not scheduled": the task runs now` };
  if (seconds >= MILLISECONDS_FROM) {
    const digits = String(Math.trunc(seconds)).length;
    return {
      ok: false,
      message: `${field} ${seconds} looks like milliseconds (${digits} digits); ${field} is unix seconds, so divide by 1000 (${Math.floor(seconds / 1000)})`,
    };
  }
  if (seconds > MAX_SCHEDULED_FOR_SEC) {
    return { ok: false, message: `${field} ${seconds} is too far in the future (after 9999-12-31T23:59:59Z)` };
  }
  const atMs = seconds * 1000;
  const lateMs = nowMs - atMs;
  if (lateMs > PAST_GRACE_MS) {
    return {
      ok: false,
      message: `${field} ${seconds} is in the past (${isoSeconds(atMs)}, ${duration(lateMs)} ago); ` +
        `send a future time in unix seconds, or omit ${field} to run now`,
    };
  }
  if (lateMs > 0) {
    return { ok: true, runAtMs: nowMs, scheduledForMs: atMs, note: `${field} was ${duration(lateMs)} in the past: the task runs now` };
  }
  return { ok: true, runAtMs: atMs, scheduledForMs: atMs };
}

/** Reads `scheduleSpacingSec`: absent means no stagger; an integer 0–MAX_SPACING_SEC otherwise. */
export function normalizeSpacing(value: unknown, field = 'scheduleSpacingSec'): { ok: true; spacingSec: number } | { ok: false; message: string } {
  if (value === undefined || value === null) return { ok: true, spacingSec: 0 };
  const n = typeof value === 'string' && /^\s*-?\d+\s*$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n)) return { ok: false, message: `${field} must be an integer (seconds)` };
  if (n < 0) return { ok: false, message: `${field} must not be negative` };
  if (n > MAX_SPACING_SEC) return { ok: false, message: `${field} must be at most ${MAX_SPACING_SEC} (one day)` };
  return { ok: true, spacingSec: n };
}

/**
 * Item `index` (0-based) of a batch that shares `base`, moved `index × spacingSec` later.
 * Item 0 is `base` itself; a later item counts as scheduled (it was asked to wait), so its
 * `scheduledForMs` is set even when the batch as a whole was not scheduled.
 */
export function staggered(base: Scheduled, index: number, spacingSec: number): Scheduled {
  if (!Number.isInteger(index) || index < 0) throw new RangeError(`index must be a non-negative integer, got ${index}`);
  if (!Number.isInteger(spacingSec) || spacingSec < 0) throw new RangeError(`spacingSec must be a non-negative integer, got ${spacingSec}`);
  const offsetMs = index * spacingSec * 1000;
  if (offsetMs === 0) return { ...base };
  return {
    ...base,
    runAtMs: base.runAtMs + offsetMs,
    scheduledForMs: (base.scheduledForMs ?? base.runAtMs) + offsetMs,
  };
}

function isoSeconds(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** "42 seconds", "12 minutes", "5 hours", "3 days": rounded down, enough to see the mistake. */
function duration(ms: number): string {
  const s = Math.floor(ms / 1000);
  const unit = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  if (s < 120) return unit(s, 'second');
  if (s < 120 * 60) return unit(Math.floor(s / 60), 'minute');
  if (s < 48 * 3600) return unit(Math.floor(s / 3600), 'hour');
  return unit(Math.floor(s / 86400), 'day');
}
