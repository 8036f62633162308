// Which billing period an organization is in, as the usage query and the enforcement of included
// amounts both read it (docs/billing.md, "Usage"): the last period an ancestor set (previous: the
// one before), else the subscription's in force (previous: the term before it), else the calendar
// month in the account's time zone. Pure: the rows are read by the callers.
import { localDay, nextLocalMidnight } from '../limits/task-limits.ts';

export interface PeriodRow { start_at: number; end_at: number }

export interface Period {
  /** First and last local day (YYYY-MM-DD) in the zone. */
  fromDay: string;
  lastDay: string;
  /** The period's bounds (ms) when it is a set or subscription period; null for a calendar month. */
  start: number | null;
  end: number | null;
}

/** YYYY-MM-DD of a Date built from UTC fields. */
const ymd = (d: Date) => d.toISOString().slice(0, 10);

/** The first and last day of the month `back` months before the one of `day`. */
export function monthBounds(day: string, back: number): [string, string] {
  const [y, m] = day.split('-').map(Number) as [number, number];
  return [ymd(new Date(Date.UTC(y, m - 1 - back, 1))), ymd(new Date(Date.UTC(y, m - back, 0)))];
}

/** The start of the period of one term that ends at `startMs` (the same day and time a month or year earlier, clamped to the month's last day). */
export function periodStartBefore(startMs: number, term: string): number {
  const d = new Date(startMs);
  const months = term === 'year' ? 12 : 1;
  const total = d.getUTCFullYear() * 12 + d.getUTCMonth() - months;
  const y = Math.floor(total / 12); const m = total % 12;
  const lastDay = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
  return Date.UTC(y, m, Math.min(d.getUTCDate(), lastDay), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds());
}

/**
 * The organization's `which` period at `at`: `set` is its last two set periods that started by
 * `at` (newest first), `sub` its subscription in force.
 */
export function periodOf(which: 'current' | 'previous', set: readonly PeriodRow[], sub: { period_start: number; period_end: number; term: string } | undefined,
  at: number, zone: string): Period {
  let start: number; let end: number;
  if (set.length > 0) {
    const [current, before] = set as [PeriodRow, PeriodRow | undefined];
    if (which === 'current') {
      start = current.start_at; end = current.end_at;
    } else if (before) {
      start = before.start_at; end = before.end_at;
    } else {
      end = current.start_at; start = periodStartBefore(current.start_at, sub?.term ?? 'month');
    }
  } else if (sub) {
    start = Number(sub.period_start); end = Number(sub.period_end);
    if (which === 'previous') { end = start; start = periodStartBefore(start, sub.term); }
  } else {
    const [fromDay, lastDay] = monthBounds(localDay(at, zone), which === 'previous' ? 1 : 0);
    return { fromDay, lastDay, start: null, end: null };
  }
  return { fromDay: localDay(start, zone), lastDay: localDay(end - 1, zone), start, end };
}

/** The instant the local month after the one of `at` begins in `zone` (its first local midnight). */
export function nextMonthStart(at: number, zone: string): number {
  const month = localDay(at, zone).slice(0, 7);
  // At most 31 midnights ahead; each step is one local day (23 to 25 hours across DST).
  let t = at;
  for (let i = 0; i < 32; i++) {
    t = nextLocalMidnight(t, zone);
    if (localDay(t, zone).slice(0, 7) !== month) return t;
  }
  return t;
}

/** The instant local day `day` (YYYY-MM-DD) begins in `zone`. */
export function localDayStart(day: string, zone: string): number {
  // The day's midnight lies within 14 hours of the same date's UTC midnight; start before it and step to it.
  let t = nextLocalMidnight(Date.parse(`${day}T00:00:00Z`) - 15 * 3_600_000, zone);
  while (localDay(t, zone) < day) t = nextLocalMidnight(t, zone);
  return t;
}
