// GET /api/v2/logs?format=csv: the log entries as CSV (RFC 4180, CRLF, a header row of the field
// names), streamed a batch at a time. Counterparts, their names and transcripts are what strangers
// typed, so every cell goes through the one encoder, src/lib/csv-cell.ts (formula-looking parts
// neutralised with a leading apostrophe, separators quoted).
import { csvRow } from '../../lib/csv-cell.ts';
import type { LogValue } from './present.ts';

/** Rows read per statement while streaming. */
export const CSV_BATCH = 1000;

/** One row of the export; an object (`extracted`) is written as its JSON text. */
export function csvLine(values: readonly (LogValue | undefined)[]): string {
  return csvRow(values.map((v) => (v !== null && typeof v === 'object' ? JSON.stringify(v) : v)));
}

/** The download's name: `logs-<org>-<start>-<end>.csv` (UTC dates of the window). */
export function csvFilename(orgId: number, start: number, end: number): string {
  const day = (s: number) => new Date(s * 1000).toISOString().slice(0, 10).replace(/-/g, '');
  return `logs-${orgId}-${day(start)}-${day(end)}.csv`;
}
