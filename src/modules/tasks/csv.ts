// POST /api/v2/tasks/csv: tasks from an uploaded CSV file, read as a stream. Rows are checked
// as they arrive, exactly like POST /tasks items, and the good ones are inserted in batches of
// CSV_BATCH rows (one transaction each) while the rest of the file is still being read; reading
// waits for each insert (backpressure), so memory holds one batch, never the file. Bad rows are
// reported with their physical line number (the header is line 1) and the reason, naming the
// column. A dry run checks every row the same way and inserts nothing.
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import multipart from '@fastify/multipart';
import { Type } from '@sinclair/typebox';
// Types only: the parser is loaded with the first import (an idle service need not hold it).
import type { CsvError, Parser } from 'csv-parse';
import { drainRequest } from '../../http/drain.ts';
import type { App } from '../../http/types.ts';
import type { TaskRow } from '../../db/types.ts';
import { HttpError, Invalid } from '../../http/errors.ts';
import { AccountId, Envelope, errors, Obj, Security } from '../../http/schemas.ts';
import { checkTask, type RawTask } from './validation.ts';
import type { TaskService, TaskTenant } from './service.ts';

/** Rows per insert transaction. */
export const CSV_BATCH = 1000;
/** Rows checked between two turns of the event loop. */
const CHECK_SLICE = 100;
/** Bad rows (and warnings) listed in the answer; the counts always cover every row. */
export const MAX_LISTED = 1000;
/** Characters in one row; a longer one is almost always a quote that is never closed. */
export const MAX_ROW_CHARS = 128 * 1024;
/** A CSV sent as a text field (no filename) is held in memory, so it is kept small. */
const MAX_TEXT_FIELD_BYTES = 1024 * 1024;
/** Room for the multipart framing around the file when comparing with Content-Length. */
const FRAMING_BYTES = 64 * 1024;

/** Header names (compared case-insensitively) → the task field they fill. */
const COLUMNS: Record<string, keyof RawTask> = Object.fromEntries(
  (['type', 'target', 'context', 'taskContext', 'greeting', 'waitToGreet', 'accountId', 'scheduledFor',
    'message', 'content', 'externalTaskId', 'meta', 'voicemail', 'callingWindow', 'retryRules'] as const).map((c) => [c.toLowerCase(), c]),
);
const KNOWN = 'type, target, context, taskContext, greeting, waitToGreet, accountId, scheduledFor, message (or content), externalTaskId, meta, voicemail, callingWindow, retryRules';

export interface LineMessage { line: number; message: string }

export interface CsvResult {
  success: true;
  message: string;
  dryRun: boolean;
  /** Every row was read (false when reading stopped early; the last error says where and why). */
  complete: boolean;
  rows: number;
  valid: number;
  invalid: number;
  inserted: number;
  errors: LineMessage[];
  errorsTruncated: boolean;
  warnings: LineMessage[];
  warningsTruncated: boolean;
}

/** `true`/`false` (any case), `1`/`0`; anything else is refused naming the field. */
export function readFlag(value: string, name: string): boolean {
  const v = value.trim().toLowerCase();
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0' || v === '') return false;
  throw new Invalid(`${name} must be true or false (got ${JSON.stringify(value.slice(0, 40))})`);
}

/**
 * Feeds the parser whole lines only, with \r\n turned into \n.
 * - csv-parse counts a \r\n inside a quoted field as two lines, which would shift every later
 *   line number; with bare \n (or bare \r) its count is the physical one.
 * - A source cut at the size limit ends in the middle of a line: that partial line is dropped
 *   (`cut` says so), so the parser never reads half a row as a row. The bytes after the last
 *   line break wait for the next chunk; a "line" longer than MAX_HELD is passed on as it is
 *   (the parser's row limit then stops the file).
 */
class LineFeeder extends Transform {
  private tail: Buffer = Buffer.alloc(0);
  cut = false;
  constructor(private readonly truncated: () => boolean) { super(); }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const buf = this.tail.length > 0 ? Buffer.concat([this.tail, chunk]) : chunk;
    const last = Math.max(buf.lastIndexOf(0x0a), buf.lastIndexOf(0x0d));
    // A final \r waits: the \n of its \r\n may start the next chunk.
    let end = last < 0 ? 0 : buf[last] === 0x0d && last === buf.length - 1 ? last : last + 1;
    if (end === 0 && buf.length > MAX_HELD) end = buf.length;
    this.tail = Buffer.from(buf.subarray(end));
    done(null, end > 0 ? lf(buf.subarray(0, end)) : undefined);
  }
  override _flush(done: TransformCallback): void {
    if (this.truncated()) {
      this.cut = true;
      return done();
    }
    done(null, this.tail.length > 0 ? lf(this.tail) : undefined);
  }
}

const lf = (buf: Buffer): Buffer => buf.includes('\r\n') ? Buffer.from(buf.toString('latin1').replace(/\r\n/g, '\n'), 'latin1') : buf;
const MAX_HELD = 4 * MAX_ROW_CHARS;

/** 52428800 → '50 MB'; 65536 → '64 KB'. */
export function megabytes(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${+(bytes / 1024 / 1024).toFixed(1)} MB` : `${+(bytes / 1024).toFixed(1)} KB`;
}

function lineBreaks(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) { const c = s.charCodeAt(i); if (c === 10 || c === 13) n++; }
  return n;
}

/** The header's columns, or a 400 naming what is wrong with it. */
function readHeader(cells: string[]): (keyof RawTask)[] {
  const names = cells.map((c) => c.trim());
  if (names.every((n) => n === '')) throw new Invalid('csv: the first line must be a header naming the columns (' + KNOWN + ')');
  const blank = names.findIndex((n) => n === '');
  if (blank >= 0) throw new Invalid(`csv: column ${blank + 1} of the header has no name; recognised columns: ${KNOWN}`);
  const unknown = names.filter((n) => !Object.hasOwn(COLUMNS, n.toLowerCase()));
  if (unknown.length > 0) {
    throw new Invalid(`csv: unknown column${unknown.length > 1 ? 's' : ''} ${unknown.map((n) => `'${n.slice(0, 60)}'`).join(', ')} in the header (line 1); recognised columns: ${KNOWN}`);
  }
  const fields = names.map((n) => COLUMNS[n.toLowerCase()]);
  const dup = fields.find((f, i) => fields.indexOf(f) !== i);
  if (dup) throw new Invalid(`csv: column ${dup} appears twice in the header`);
  if (fields.includes('message') && fields.includes('content')) throw new Invalid('csv: columns message and content are the same field; keep one');
  return fields;
}

/** One data row as a submitted task; a string when the row is refused before checking. */
function rowToTask(cells: string[], fields: (keyof RawTask)[]): RawTask | string {
  if (cells.length !== fields.length) return `the row has ${cells.length} field${cells.length === 1 ? '' : 's'}; the header has ${fields.length}`;
  const raw: RawTask = {};
  for (let i = 0; i < fields.length; i++) {
    const value = cells[i].trim();
    if (value.includes('\0')) return `${fields[i]} must not contain NUL characters`;
    raw[fields[i]] = value;
  }
  // Spreadsheets write TRUE/FALSE and Call; the JSON API's values are lower-case.
  for (const f of ['type', 'waitToGreet'] as const) if (typeof raw[f] === 'string') raw[f] = (raw[f] as string).toLowerCase();
  if (raw.type === undefined || raw.type === '') raw.type = 'call';
  return raw;
}

function parserMessage(err: CsvError, line: number): string {
  if (err.code === 'CSV_QUOTE_NOT_CLOSED' || err.code === 'CSV_MAX_RECORD_SIZE') {
    return `a row starting at or after this line is not closed: a quoted field runs ${err.code === 'CSV_QUOTE_NOT_CLOSED' ? 'to the end of the file' : `past ${MAX_ROW_CHARS} characters`} (a missing closing quote?); reading stopped here, lines from ${line} on were not read`;
  }
  return `the CSV cannot be read here (${err.message}); reading stopped, lines from ${line} on were not read`;
}

export interface CsvImportOptions {
  service: TaskService;
  tenant: TaskTenant;
  dryRun: boolean;
  source: Readable;
  /** The size limit (bytes), for the message when the source is cut at it. */
  maxBytes: number;
  /** Whether the source was cut at the size limit (checked when it ends). */
  truncated?: () => boolean;
}

/** Reads, checks and (unless a dry run) inserts every row of a CSV stream. */
export async function importCsv(opts: CsvImportOptions): Promise<Omit<CsvResult, 'message' | 'success'>> {
  const { service, tenant, dryRun } = opts;
  // The organization must have an agent to run tasks; refused before a single row is read.
  await service.itemContext(tenant, [], Date.now());
  const errs: LineMessage[] = [];
  const warnings: LineMessage[] = [];
  let invalid = 0;
  let valid = 0;
  let inserted = 0;
  let warningCount = 0;
  let fields: (keyof RawTask)[] | undefined;
  let stop: LineMessage | undefined;
  let lastEnd = 0;
  const bad = (line: number, message: string) => {
    invalid++;
    if (errs.length < MAX_LISTED) errs.push({ line, message });
  };
  const warn = (line: number, message: string) => {
    warningCount++;
    if (warnings.length < MAX_LISTED) warnings.push({ line, message });
  };

  // Rows refused before checking wait in the batch too, so errors are listed in line order.
  let batch: { line: number; raw: RawTask | string }[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const now = Date.now();
    const ctx = await service.itemContext(tenant, batch.flatMap((b) => typeof b.raw === 'string' ? [] : [b.raw]), now);
    const rows: TaskRow[] = [];
    const lines: number[] = [];
    let checkedInSlice = 0;
    for (const { line, raw } of batch) {
      // Checking a row (its phone number above all) costs up to a millisecond: a whole batch at
      // once held the event loop for 100–600 ms, again and again through a 50 MB file.
      if (++checkedInSlice === CHECK_SLICE) {
        checkedInSlice = 0;
        await yieldToLoop();
      }
      if (typeof raw === 'string') { bad(line, raw); continue; }
      const checked = checkTask(raw, ctx);
      if (!checked.ok) { bad(line, checked.message); continue; }
      for (const note of checked.notes) warn(line, note);
      rows.push(checked.task);
      lines.push(line);
    }
    batch = [];
    // A number on a do-not-call list refuses its row (docs/campaigns.md); the rest go in.
    const listed = await service.doNotCallRefusals(tenant.org, rows);
    for (const [i, message] of listed) bad(lines[i]!, message);
    valid += rows.length - listed.size;
    const accepted = listed.size > 0 ? rows.filter((_, i) => !listed.has(i)) : rows;
    if (!dryRun && accepted.length > 0) inserted += (await service.insertChecked(accepted, now)).length;
  };

  type Item = { record: string[]; info: { lines: number } } | { skip: CsvError };
  const { Parser: CsvParser } = await import('csv-parse');
  const parser: Parser = new CsvParser({
    bom: true,
    info: true,
    relax_quotes: true,
    relax_column_count: true,
    skip_empty_lines: true,
    skip_records_with_empty_values: true,
    skip_records_with_error: true,
    max_record_size: MAX_ROW_CHARS,
    // In-band, so a parse error arrives in order with the records around it.
    on_skip: (err: CsvError | undefined) => { if (err) parser.push({ skip: err }); },
  });
  const feeder = new LineFeeder(opts.truncated ?? (() => false));
  // What stopped the reading (a refused header, a failed insert) is kept and thrown once the
  // pipeline has settled: thrown inside it, it would reach the caller as the AbortError of the
  // streams the pipeline tears down (a 500) instead of itself.
  let failure: { err: unknown } | undefined;
  await pipeline(opts.source, feeder, parser, async (items: AsyncIterable<Item>) => {
    try {
      for await (const item of items) {
        if ('skip' in item) {
          stop = { line: lastEnd + 1, message: parserMessage(item.skip, lastEnd + 1) };
          return;
        }
        const end = item.info.lines;
        const line = end - item.record.reduce((n, c) => n + lineBreaks(c), 0);
        lastEnd = end;
        if (!fields) { fields = readHeader(item.record); continue; }
        batch.push({ line, raw: rowToTask(item.record, fields) });
        if (batch.length >= CSV_BATCH) await flush();
      }
    } catch (err) {
      failure = { err };
    }
  }).catch((err: unknown) => { failure ??= { err }; });
  if (failure) throw failure.err;
  // A cut source may also have left a quote open: the size is the reason given.
  if (feeder.cut) {
    stop = { line: lastEnd + 1, message: `the file is larger than ${megabytes(opts.maxBytes)}; reading stopped here, lines from ${lastEnd + 1} on were not read` };
  }
  if (!fields) throw new Invalid(stop ? `csv: ${stop.message}` : 'csv is empty: the first line must be a header naming the columns (' + KNOWN + ')');
  await flush();
  // Where reading stopped comes last, after the rows read before it.
  if (stop) bad(stop.line, stop.message);
  const complete = stop === undefined;
  if (valid + invalid === 0) throw new Invalid('csv has a header but no rows');
  return {
    dryRun, complete, rows: valid + invalid, valid, invalid, inserted,
    errors: errs, errorsTruncated: invalid > errs.length,
    warnings, warningsTruncated: warningCount > warnings.length,
  };
}

/** How long a refused upload's remaining body is read (and dropped) before the answer. */
const DRAIN_MS = 15_000;

const LineList = Type.Array(Obj({ line: Type.Integer(), message: Type.String() }));

/** The CSV route, with multipart parsing registered for its own plugin scope only. */
export async function taskCsvRoutes(app: App, opts: { tasks: TaskService; maxBytes: number }): Promise<void> {
  const { tasks, maxBytes } = opts;
  await app.register(multipart, {
    limits: { fileSize: maxBytes, files: 1, fields: 20, fieldSize: MAX_TEXT_FIELD_BYTES, parts: 25, headerPairs: 100 },
    throwFileSizeLimit: false,
  });
  // Any other content type reaches the handler (unread), which answers 415 in our shape with
  // what to send instead; JSON is still parsed by the application's parser.
  app.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
  // The upload is read as it arrives, so a refusal (a bad header, a wrong form, a 415) can come
  // while the client is still sending: what is left is read and dropped before answering, or the
  // connection would wait on the unread body; past the size limit (or DRAIN_MS) the answer
  // closes the connection instead.
  app.addHook('onError', async (req, reply) => {
    if (!(await drainRequest(req.raw, maxBytes + FRAMING_BYTES, DRAIN_MS))) void reply.header('connection', 'close');
  });

  app.post('/api/v2/tasks/csv', {
    schema: {
      operationId: 'uploadTasksCsv', tags: ['Tasks'], security: Security, summary: 'Create multiple tasks via CSV upload',
      description: 'multipart/form-data with the file in field `csv` (header row required) and optionally `dryRun` '
        + '(before the file, or as a query parameter). Bad rows are reported with their line number; the good ones are '
        + 'inserted. See docs/tasks.md for the columns and limits.',
      consumes: ['multipart/form-data'],
      querystring: Type.Object({
        targetAccountId: Type.Optional(AccountId('Organization or agent to act on (resellers and partners; an organization or agent token acts on itself)')),
        dryRun: Type.Optional(Type.Boolean({ description: 'Check every row, insert nothing' })),
      }),
      // Documents the form; validation passes (the parts are read as a stream, not as a body).
      body: {
        content: {
          'multipart/form-data': {
            schema: {
              type: 'object', nullable: true, required: ['csv'],
              properties: {
                csv: { type: 'string', format: 'binary', description: 'CSV file (text/csv), header row first' },
                dryRun: { type: 'boolean', description: 'Validate only; do not enqueue jobs' },
              },
            },
          },
        },
      },
      response: {
        200: Envelope({
          dryRun: Type.Boolean(), complete: Type.Boolean(), rows: Type.Integer(), valid: Type.Integer(), invalid: Type.Integer(),
          inserted: Type.Integer(), errors: LineList, errorsTruncated: Type.Boolean(), warnings: LineList, warningsTruncated: Type.Boolean(),
        }),
        ...errors(400, 403, 404, 413, 415),
      },
    },
  }, async (req) => {
    if (!req.isMultipart()) {
      throw new HttpError(415, 'Send multipart/form-data with the CSV file in field csv (e.g. curl -F csv=@tasks.csv)');
    }
    const length = Number(req.headers['content-length']);
    if (Number.isFinite(length) && length > maxBytes + FRAMING_BYTES) {
      throw new HttpError(413, `csv must be at most ${megabytes(maxBytes)} (the request is ${length} bytes); split the file`);
    }
    const tenant = await tasks.tenant(req.scope, req.query.targetAccountId);
    let dryRun = req.query.dryRun === true;
    let result: Omit<CsvResult, 'message' | 'success'> | undefined;
    const late: string[] = [];
    try {
      for await (const part of req.parts()) {
        if (result) {
          // Parts after the file arrive when its rows have been handled: reported, never refused.
          if (part.type === 'file') part.file.resume();
          else if (part.fieldname === 'dryRun' && !dryRun && /^\s*(true|1)\s*$/i.test(String(part.value))) {
            late.push('dryRun arrived after the csv file, when its rows had already been handled: it was ignored. Send dryRun before the file, or as ?dryRun=true');
          }
          continue;
        }
        if (part.type === 'field') {
          if (part.fieldname === 'dryRun') dryRun = readFlag(String(part.value), 'dryRun') || dryRun;
          else if (part.fieldname === 'csv') {
            if (part.valueTruncated) throw new HttpError(413, `csv sent as a text field must be at most ${MAX_TEXT_FIELD_BYTES / 1024 / 1024} MB; send it as a file part (curl -F csv=@tasks.csv)`);
            result = await importCsv({ service: tasks, tenant, dryRun, maxBytes, source: Readable.from([Buffer.from(String(part.value))]) });
          }
          continue;
        }
        if (part.fieldname !== 'csv') {
          part.file.resume();
          throw new Invalid(`csv is required: send the CSV file in multipart field csv (got a file in field '${part.fieldname.slice(0, 60)}')`);
        }
        const file = part.file;
        result = await importCsv({
          service: tasks, tenant, dryRun, maxBytes, source: file,
          truncated: () => file.truncated === true,
        });
      }
    } catch (err) {
      const code = (err as { code?: string }).code;
      // After the file has been handled its rows are done: what went wrong later is reported.
      if (result) late.push(code === 'FST_FILES_LIMIT' ? 'only one file is read per upload: the other files were ignored'
        : `the form after the csv file could not be read: ${(err as Error).message}`);
      else if (code === 'FST_FILES_LIMIT') throw new Invalid('send one file, in field csv');
      else if (code === 'FST_PARTS_LIMIT' || code === 'FST_FIELDS_LIMIT') throw new Invalid('too many form fields: send csv and optionally dryRun');
      else throw err;
    }
    if (!result) throw new Invalid('csv is required: send the CSV file in multipart field csv (e.g. curl -F csv=@tasks.csv)');
    const warnings = [...late.map((message) => ({ line: 0, message })), ...result.warnings];
    const counts = `${result.rows} row${result.rows === 1 ? '' : 's'}: ${result.valid} valid, ${result.invalid} refused`;
    const message = result.dryRun ? `Dry run: nothing was inserted; ${counts}.`
      : `${result.inserted} task${result.inserted === 1 ? '' : 's'} queued; ${counts}${result.complete ? '' : '; reading stopped early (see errors)'}.`;
    return { success: true as const, message, ...result, warnings };
  });
}
