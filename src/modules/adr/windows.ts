// Rotation windows of an activity-record export: aligned to the UTC day (a rotation divides 1,440
// minutes), each named for its start and length. docs/billing.md, "Activity records".

export const MINUTE_MS = 60_000;
/** Rotations that divide a day, so windows start at the same times every UTC day. */
export const ROTATIONS = Array.from({ length: 1440 }, (_, i) => i + 1).filter((m) => 1440 % m === 0);

/** The window holding `at` under a rotation of `minutes`: [start, end). */
export function windowOf(at: number, minutes: number): { start: number; end: number } {
  const len = minutes * MINUTE_MS;
  const start = Math.floor(at / len) * len;
  return { start, end: start + len };
}

/**
 * The window that starts at `start`: it ends at the next boundary of the rotation, so a window
 * after a change of rotation may be shorter than the rotation until it is aligned again.
 */
export function windowFrom(start: number, minutes: number): { start: number; end: number } {
  return { start, end: windowOf(start, minutes).end };
}

/** YYYYMMDDTHHMMZ of a UTC time. */
export function compactUtc(ms: number): string {
  const iso = new Date(ms).toISOString(); // 2026-11-26T17:00:00.000Z
  return `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}T${iso.slice(11, 13)}${iso.slice(14, 16)}Z`;
}

/** `adr-<account>-<YYYYMMDDTHHMMZ>-<minutes>.csv`: the account, the window's start (UTC) and its length in minutes. */
export function windowFileName(accountId: number, start: number, end: number): string {
  return `adr-${accountId}-${compactUtc(start)}-${Math.round((end - start) / MINUTE_MS)}.csv`;
}

/** The upload's temporary name beside the final one (renamed once complete). */
export const partName = (fileName: string) => `${fileName}.part`;
