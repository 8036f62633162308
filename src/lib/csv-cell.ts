// The one CSV cell encoder of every CSV this service writes (today GET /api/v2/logs?format=csv).
// What goes into a cell is often typed by strangers (a caller's name, an SMS), and a spreadsheet
// opening the file may run it as a formula (OWASP, "CSV Injection"). Two things make that so:
// - a cell, or any part of it a spreadsheet may cut off as a cell of its own, starting with a
//   formula character: `=`, `+`, `-`, `@`, a tab or a carriage return (and their full-width forms
//   `＝` `＋` `－` `＠`, which some East Asian spreadsheets read the same). A spreadsheet in a locale
//   whose list separator is `;` (or one told to split on tabs) cuts `x;=1+1` into `x` and `=1+1`.
// - a cell left unquoted although it holds such a separator.
// So every part that starts the cell or follows a separator (`,` `;` a tab, a carriage return or
// a line feed), after any spaces, and starts with a formula character gets a `'` before that
// character (Excel and LibreOffice then show the text as typed, without the apostrophe); and a cell
// holding `"`, `,`, `;`, a tab, CR or LF is quoted (RFC 4180, `"` doubled).
// Numbers (a JS number: durations, counts — ours, never a stranger's text) are written as they
// are, so `-5` stays a number. Text that merely looks like a number is still text: a phone number
// is written `'+14155552671`.

export type CsvValue = string | number | boolean | null | undefined;

const FORMULA = '=+\\-@\\t\\r\\uFF1D\\uFF0B\\uFF0D\\uFF20';
/** A formula character at the start of the text or of a part after a separator (spaces skipped). */
const FORMULA_PART = new RegExp(`(^|[,;\\t\\r\\n])( *)(?=[${FORMULA}])`, 'g');
/** What makes a cell need quotes. */
const NEEDS_QUOTES = /[",;\t\r\n]/;

/** A cell's text: every formula-looking part neutralised, quoted when it holds a separator, quote or line break. */
export function csvCell(value: CsvValue): string {
  if (value === null || value === undefined) return '';
  if (typeof value !== 'string') return String(value);
  const text = value.replace(FORMULA_PART, "$1$2'");
  return NEEDS_QUOTES.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** One CRLF-terminated row. */
export function csvRow(values: readonly CsvValue[]): string {
  return `${values.map(csvCell).join(',')}\r\n`;
}
