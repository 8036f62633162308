// Do-not-call lists and an organization's compliance settings (docs/campaigns.md).
// A list belongs to a partner, a reseller or an organization; an organization's calls and texts
// are checked against its own list and its ancestors' (`listsOf`): at submission (the tasks
// module) and again at the moment of dialling or sending (run-task.ts). Numbers come by API, CSV,
// a STOP by text (conversations/sms.ts) or a spoken request the analysis recognised.
import { Readable } from 'node:stream';
import type { AccountRow, ComplianceSettingsRow, Db, DoNotCallRow, Executor } from '../../db/types.ts';
import type { Scope } from '../../http/auth.ts';
import { HttpError, Invalid, NotFound } from '../../http/errors.ts';
import { invalidPhoneMessage, normalizePhone } from '../../lib/phone.ts';
import { runWorkerTask, WorkerLimitError, WorkerTaskError, workerEntry } from '../../lib/worker-task.ts';
import { accountRepo } from '../accounts/repository.ts';
import { DNC_CSV_MAX_ROWS, exportRow, EXPORT_HEADER, type DncCsvInput, type DncCsvOutput } from './csv.ts';
import { complianceSettingsRepo, doNotCallRepo } from './repository.ts';
import { csvRow } from '../../lib/csv-cell.ts';

export const DNC_SOURCES = ['api', 'csv', 'sms-stop', 'call-analysis'] as const;
export type DncSource = (typeof DNC_SOURCES)[number];
/** Numbers one POST may add. */
export const MAX_DNC_NUMBERS = 1000;
export const MAX_DNC_NOTE = 500;
/** What HELP answers when the organization has not written its own. */
export const DEFAULT_HELP_TEXT = 'Reply STOP to stop receiving messages, START to receive them again. Msg & data rates may apply.';
export const MAX_HELP_TEXT = 320;

const CSV_WORKER = workerEntry(import.meta.url, './csv-worker');
const CSV_HEAP_MB = 256;
const CSV_TIMEOUT_MS = 60_000;
const EXPORT_PAGE = 1000;

/** The lists whose numbers an organization may not call or text: its own, its reseller's, its partner's (in that order). */
export function listsOf(org: Pick<AccountRow, 'id' | 'reseller_id' | 'partner_id'>): number[] {
  return [...new Set([org.id, org.reseller_id, org.partner_id].filter((id): id is number => typeof id === 'number'))];
}

/** Why a number may not be called or texted, naming whose list holds it. */
export function blockedReason(entry: DoNotCallRow, orgId: number): string {
  return `on the do-not-call list (${entry.owner_id === orgId ? 'the organization\'s own' : `of account ${entry.owner_id}, above the organization`}; added by ${entry.source})`;
}

/** Which of `numbers` (E.164) an organization may not reach, each with the entry that says so. */
export async function doNotCallBlocks(db: Executor, orgId: number, numbers: readonly string[]): Promise<Map<string, DoNotCallRow>> {
  if (numbers.length === 0) return new Map();
  const org = await accountRepo.findById(db, orgId);
  if (!org) return new Map();
  return doNotCallRepo.blocked(db, listsOf(org), numbers);
}

export interface ComplianceSettings {
  smsHelpText: string;
  redactPersonalData: boolean;
  keepRecordings: boolean;
}

export function presentSettings(row: ComplianceSettingsRow | undefined): ComplianceSettings {
  return {
    smsHelpText: row?.sms_help_text ?? DEFAULT_HELP_TEXT,
    redactPersonalData: row?.redact_personal_data === 1,
    keepRecordings: row ? row.keep_recordings === 1 : true,
  };
}

/** Whether an organization has its messages' personal data redacted before they are stored. */
export async function redactsPersonalData(db: Executor, orgId: number): Promise<boolean> {
  return (await complianceSettingsRepo.load(db, orgId))?.redact_personal_data === 1;
}

/** An organization's compliance settings (defaults when it never set them). */
export async function complianceSettingsOf(db: Executor, orgId: number): Promise<ComplianceSettings> {
  return presentSettings(await complianceSettingsRepo.load(db, orgId));
}

const present = (r: DoNotCallRow) => ({
  number: r.number, source: r.source, evidence: r.evidence, note: r.note,
  createdAt: Math.floor(r.created_at / 1000), listOf: r.owner_id,
});

export interface AddBody { number?: string; numbers?: string[]; note?: string }

export function complianceService(deps: { db: Db }) {
  const { db } = deps;

  /** The account whose list a request acts on: the caller's own, or a descendant it names. */
  async function owner(scope: Scope, targetAccountId: number | undefined): Promise<AccountRow> {
    return scope.target(targetAccountId, ['partner', 'reseller', 'organization']);
  }

  async function organization(scope: Scope, targetAccountId: number | undefined): Promise<AccountRow> {
    return scope.target(targetAccountId, ['organization']);
  }

  function number(raw: string, field: string): string {
    const phone = normalizePhone(raw);
    if (!phone.ok) throw new Invalid(invalidPhoneMessage(field, raw, phone.reason));
    return phone.e164;
  }

  /**
   * Adds a number a person asked not to be reached at (a STOP by text, a spoken request): on the
   * organization's own list, with the conversation as evidence. True when it was not there yet.
   */
  async function addFromConversation(orgId: number, raw: string, source: DncSource, conversationId: string): Promise<boolean> {
    const phone = normalizePhone(raw);
    if (!phone.ok) return false;
    return (await doNotCallRepo.add(db, [{ owner_id: orgId, number: phone.e164, source, evidence: conversationId, note: null, created_at: Date.now() }])) > 0;
  }

  return {
    addFromConversation,

    /** A START by text: the number leaves the organization's own list (a reseller's or partner's entry stays). */
    async removeFromConversation(orgId: number, raw: string): Promise<boolean> {
      const phone = normalizePhone(raw);
      return phone.ok ? doNotCallRepo.remove(db, orgId, phone.e164) : false;
    },

    async list(scope: Scope, q: { targetAccountId?: number; limit?: number; offset?: number; number?: string }) {
      const acct = await owner(scope, q.targetAccountId);
      const limit = q.limit ?? 100;
      const offset = q.offset ?? 0;
      if (q.number !== undefined) {
        const n = number(q.number, 'number');
        const row = await doNotCallRepo.find(db, acct.id, n);
        return { success: true, total: row ? 1 : 0, limit, offset: 0, numbers: row ? [present(row)] : [] };
      }
      const { rows, total } = await doNotCallRepo.list(db, acct.id, limit, offset);
      return { success: true, total, limit, offset, numbers: rows.map(present) };
    },

    async add(scope: Scope, targetAccountId: number | undefined, body: AddBody) {
      const acct = await owner(scope, targetAccountId);
      if ((body.number === undefined) === (body.numbers === undefined)) throw new Invalid('send either number or numbers');
      const raws = body.numbers ?? [body.number!];
      if (raws.length === 0) throw new Invalid('numbers must not be empty');
      if (raws.length > MAX_DNC_NUMBERS) throw new Invalid(`numbers may hold at most ${MAX_DNC_NUMBERS}; upload more with POST /api/v2/do-not-call/csv`);
      const note = body.note?.trim() || null;
      if (note && note.length > MAX_DNC_NOTE) throw new Invalid(`note must be at most ${MAX_DNC_NOTE} characters`);
      const numbers = raws.map((r, i) => number(r, body.numbers ? `numbers[${i}]` : 'number'));
      const now = Date.now();
      const added = await doNotCallRepo.add(db, [...new Set(numbers)].map((n) => ({ owner_id: acct.id, number: n, source: 'api', evidence: null, note, created_at: now })));
      return { success: true, message: `${added} number${added === 1 ? '' : 's'} added to the do-not-call list of account ${acct.id}.`, added, numbers: [...new Set(numbers)] };
    },

    async remove(scope: Scope, targetAccountId: number | undefined, raw: string) {
      const acct = await owner(scope, targetAccountId);
      const n = number(raw, 'number');
      if (!(await doNotCallRepo.remove(db, acct.id, n))) throw new NotFound(`${n} is not on the do-not-call list of account ${acct.id}`);
      return { success: true, message: `${n} removed from the do-not-call list of account ${acct.id}.` };
    },

    /** The CSV import: the file read and its numbers normalised in a worker thread, then added in batches. */
    async importCsv(scope: Scope, targetAccountId: number | undefined, text: string) {
      const acct = await owner(scope, targetAccountId);
      let read: DncCsvOutput;
      try {
        read = await runWorkerTask<DncCsvInput, DncCsvOutput>(CSV_WORKER, { text }, { maxHeapMb: CSV_HEAP_MB, timeoutMs: CSV_TIMEOUT_MS });
      } catch (err) {
        if (err instanceof WorkerLimitError) {
          if (err.limit === 'busy' || err.limit === 'stopped') throw new HttpError(503, `csv cannot be read now: ${err.message}`);
          throw new HttpError(413, `csv could not be read within ${err.limit === 'memory' ? `${CSV_HEAP_MB} MB` : `${CSV_TIMEOUT_MS / 1000} s`}; split the file`);
        }
        if (err instanceof WorkerTaskError) throw new Invalid(`csv cannot be read: ${err.message}`);
        throw err;
      }
      const now = Date.now();
      const added = await doNotCallRepo.add(db, read.entries.map((e) => ({ owner_id: acct.id, number: e.number, source: 'csv', evidence: null, note: e.note, created_at: now })));
      const errors = read.cut ? [...read.errors, { line: 0, message: `only the first ${DNC_CSV_MAX_ROWS} rows were read; split the file` }] : read.errors;
      return {
        success: true,
        message: `${added} number${added === 1 ? '' : 's'} added to the do-not-call list of account ${acct.id}; ${read.entries.length} valid, ${read.invalid} refused.`,
        rows: read.entries.length + read.invalid, valid: read.entries.length, invalid: read.invalid, added, complete: !read.cut, errors,
      };
    },

    /** The list as CSV, streamed a page at a time (oldest first). */
    async exportCsv(scope: Scope, targetAccountId: number | undefined) {
      const acct = await owner(scope, targetAccountId);
      async function* rows(): AsyncGenerator<string> {
        yield csvRow([...EXPORT_HEADER]);
        let after: { createdAt: number; number: string } | null = null;
        for (;;) {
          const page = await doNotCallRepo.page(db, acct.id, after, EXPORT_PAGE);
          if (page.length > 0) yield page.map(exportRow).join('');
          if (page.length < EXPORT_PAGE) return;
          const last = page[page.length - 1]!;
          after = { createdAt: last.created_at, number: last.number };
        }
      }
      return { filename: `do-not-call-${acct.id}.csv`, stream: Readable.from(rows()) };
    },

    async getSettings(scope: Scope, targetAccountId: number | undefined) {
      const org = await organization(scope, targetAccountId);
      return { success: true, settings: await complianceSettingsOf(db, org.id) };
    },

    async setSettings(scope: Scope, targetAccountId: number | undefined, body: { smsHelpText?: string | null; redactPersonalData?: boolean; keepRecordings?: boolean }) {
      const org = await organization(scope, targetAccountId);
      const row = await complianceSettingsRepo.load(db, org.id);
      let help = row?.sms_help_text ?? null;
      if (body.smsHelpText !== undefined) {
        help = body.smsHelpText === null ? null : body.smsHelpText.trim();
        if (help === '') throw new Invalid('smsHelpText must not be empty (send null for the default)');
        if (help !== null && help.length > MAX_HELP_TEXT) throw new Invalid(`smsHelpText must be at most ${MAX_HELP_TEXT} characters`);
      }
      const next: ComplianceSettingsRow = {
        org_id: org.id, sms_help_text: help,
        redact_personal_data: body.redactPersonalData === undefined ? (row?.redact_personal_data ?? 0) : body.redactPersonalData ? 1 : 0,
        keep_recordings: body.keepRecordings === undefined ? (row?.keep_recordings ?? 1) : body.keepRecordings ? 1 : 0,
        updated_at: Date.now(),
      };
      await complianceSettingsRepo.save(db, next);
      return { success: true, message: 'Compliance settings updated.', settings: presentSettings(next) };
    },
  };
}

export type ComplianceService = ReturnType<typeof complianceService>;
