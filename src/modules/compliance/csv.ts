// Do-not-call lists as CSV: the import (POST /api/v2/do-not-call/csv, read in a worker thread:
// csv-worker.ts) and the export (GET /api/v2/do-not-call/csv, streamed a page at a time).
// The file's first column is the number; a header row (`number`, optionally `note`) may name the
// columns, and is recognised by its first cell not being a number. docs/campaigns.md.
import { invalidPhoneMessage, normalizePhone } from '../../lib/phone.ts';
import { csvRow } from '../../lib/csv-cell.ts';
import type { DoNotCallRow } from '../../db/types.ts';

/** Largest file read. */
export const DNC_CSV_MAX_BYTES = 10 * 1024 * 1024;
/** Rows one file may hold. */
export const DNC_CSV_MAX_ROWS = 200_000;
/** Refused rows listed in the answer (the count covers all). */
export const DNC_MAX_LISTED = 1000;
const NOTE_MAX = 500;

export interface DncCsvInput { text: string }
export interface DncCsvEntry { line: number; number: string; note: string | null }
export interface DncCsvOutput {
  entries: DncCsvEntry[];
  errors: { line: number; message: string }[];
  invalid: number;
  /** Rows past DNC_CSV_MAX_ROWS were not read. */
  cut: boolean;
}

/** Reads the file (in the worker): each row's number normalised, refusals with their line. */
export async function readDoNotCallCsv(input: DncCsvInput): Promise<DncCsvOutput> {
  const { parse } = await import('csv-parse/sync');
  const records = parse(input.text, {
    bom: true, relax_quotes: true, relax_column_count: true, skip_empty_lines: true, info: true, max_record_size: 64 * 1024,
  }) as unknown as { record: string[]; info: { lines: number } }[];
  const out: DncCsvOutput = { entries: [], errors: [], invalid: 0, cut: false };
  let noteColumn = 1;
  let first = true;
  let rows = 0;
  for (const { record, info } of records) {
    const cells = record.map((c) => c.trim());
    if (first) {
      first = false;
      const head = cells.map((c) => c.toLowerCase());
      if (!/^[+(\d]/.test((cells[0] ?? '').replace(/^'/, ''))) {
        const n = head.findIndex((c) => c === 'number' || c === 'phone' || c === 'target');
        if (n !== 0) {
          out.invalid++;
          out.errors.push({ line: info.lines, message: 'the header\'s first column must be number (or phone, target)' });
          return out;
        }
        noteColumn = head.indexOf('note');
        continue;
      }
    }
    if (++rows > DNC_CSV_MAX_ROWS) { out.cut = true; break; }
    // An export of ours writes a number as '+1…, so a spreadsheet keeps it as text: read it back.
    const phone = normalizePhone(cells[0].replace(/^'/, ''));
    if (!phone.ok) {
      out.invalid++;
      if (out.errors.length < DNC_MAX_LISTED) out.errors.push({ line: info.lines, message: invalidPhoneMessage('number', cells[0], phone.reason) });
      continue;
    }
    const note = noteColumn > 0 && cells[noteColumn] ? cells[noteColumn].slice(0, NOTE_MAX) : null;
    out.entries.push({ line: info.lines, number: phone.e164, note });
  }
  return out;
}

export const EXPORT_HEADER = ['number', 'source', 'evidence', 'note', 'createdAt', 'listOf'] as const;

/** One entry as a row of the export. */
export function exportRow(r: DoNotCallRow): string {
  return csvRow([r.number, r.source, r.evidence, r.note, new Date(r.created_at).toISOString(), r.owner_id]);
}
