// GET /api/v2/logs?format=csv: the log entries as CSV (RFC 4180, CRLF, a header row of the field
// names), streamed a batch at a time. Counterparts, their names and transcripts are what strangers
// typed, so a cell a spreadsheet would take as a formula (starting with =, +, -, @, a tab or a
// carriage return) is written with a leading apostrophe.
import type { LogValue } from './present.ts';

/** Rows read per statement while streaming. */
export const CSV_BATCH = 1000;

const FORMULA_START = /^[=+\-@\t\r]/;

/** A cell's text: neutralised when a spreadsheet would evaluate it, quoted when it holds a separator, quote or line break. */
export function csvCell(value: LogValue | undefined): string {
  if (value === null || value === undefined) return '';
  let text = typeof value === 'number' ? String(value) : value;
  if (typeof value === 'string' && FORMULA_START.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function csvLine(values: readonly (LogValue | undefined)[]): string {
  return `${values.map(csvCell).join(',')}\r\n`;
}

/** The download's name: `logs-<org>-<start>-<end>.csv` (UTC dates of the window). */
export function csvFilename(orgId: number, start: number, end: number): string {
  const day = (s: number) => new Date(s * 1000).toISOString().slice(0, 10).replace(/-/g, '');
  return `logs-${orgId}-${day(start)}-${day(end)}.csv`;
}
