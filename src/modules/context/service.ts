// Context notes: what an organization tells its agents about one person (a phone number or a
// username). A POST appends a note; GET returns the person's notes, oldest first, joined.
import type { AccountRow, Db } from '../../db/types.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { Invalid, NotFound } from '../../http/errors.ts';
import type { Scope } from '../../http/auth.ts';
import { invalidPhoneMessage, normalizePhone } from '../../lib/phone.ts';
import { nowMs } from '../../lib/time.ts';
import { contextRepo } from './repository.ts';

/** Characters in one note. */
export const MAX_NOTE_LENGTH = 4000;
/** Notes kept per person and organization; the next POST is a 400, none is dropped. */
export const MAX_NOTES_PER_PERSON = 50;
/** Characters in a username target. */
export const MAX_USERNAME_LENGTH = 128;
/** Between two notes in GET's `context`. */
export const NOTE_SEPARATOR = '\n';

/**
 * The person a note is about: an E.164 number (any way of writing it that src/lib/phone.ts
 * accepts), or a username (anything not starting with +, ( or a digit), trimmed and lowercased.
 */
export function normalizeTarget(raw: string): string {
  const text = raw.trim();
  if (text === '') throw new Invalid('target must not be empty');
  if (/^[+(\d]/.test(text)) {
    const phone = normalizePhone(text);
    if (!phone.ok) throw new Invalid(invalidPhoneMessage('target', raw, phone.reason));
    return phone.e164;
  }
  if (text.length > MAX_USERNAME_LENGTH) throw new Invalid(`target is too long: a username has at most ${MAX_USERNAME_LENGTH} characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\s\u0000-\u001f\u007f]/.test(text)) throw new Invalid('target must be a phone number or a username without spaces or control characters');
  return text.toLowerCase();
}

export function contextService(deps: { db: Db }) {
  const { db } = deps;

  /** The organization a request acts on: its own (organization or agent token), else targetAccountId's. */
  async function organizationOf(scope: Scope, targetAccountId: number | undefined): Promise<number> {
    const row: AccountRow = await scope.target(targetAccountId, ['organization', 'agent']);
    return row.kind === 'agent' ? row.org_id! : row.id;
  }

  /** The person's notes as the agent reads them (empty when there are none). */
  async function forPerson(orgId: number, target: string): Promise<string> {
    const notes = await contextRepo.list(db, orgId, target);
    return notes.map((n) => n.note).join(NOTE_SEPARATOR);
  }

  return {
    forPerson,

    async add(scope: Scope, targetAccountId: number | undefined, body: { target: string; context: string }) {
      const orgId = await organizationOf(scope, targetAccountId);
      const target = normalizeTarget(body.target);
      const note = body.context.trim();
      if (note === '') throw new Invalid('context must not be empty');
      if (note.length > MAX_NOTE_LENGTH) throw new Invalid(`context is too long: a note has at most ${MAX_NOTE_LENGTH} characters`);
      // Two concurrent appends may read the same last place; the unique (org, target, seq) lets
      // only one take it and the other tries the next one.
      for (let attempt = 0; ; attempt++) {
        const seq = (await contextRepo.lastSeq(db, orgId, target)) + 1;
        if (seq > MAX_NOTES_PER_PERSON) {
          throw new Invalid(`context: target ${target} already has ${MAX_NOTES_PER_PERSON} notes, the most kept per person`);
        }
        try {
          await contextRepo.insert(db, { org_id: orgId, target, seq, note, created_at: nowMs() });
          return { success: true, message: 'Context added successfully', target, notes: seq };
        } catch (err) {
          // Each lost race means another note took the place, so within MAX_NOTES_PER_PERSON
          // rounds this one is stored or the person is full.
          if (!isUniqueViolation(err) || attempt > MAX_NOTES_PER_PERSON) throw err;
        }
      }
    },

    async get(scope: Scope, targetAccountId: number | undefined, rawTarget: string) {
      const orgId = await organizationOf(scope, targetAccountId);
      const target = normalizeTarget(rawTarget);
      const notes = await contextRepo.list(db, orgId, target);
      // Another organization's notes about the same person are never read: to this one they
      // are the same as none.
      if (notes.length === 0) throw new NotFound(`No context was found for target ${target}`);
      return {
        success: true, message: 'Context fetched successfully', target,
        context: notes.map((n) => n.note).join(NOTE_SEPARATOR),
        notes: notes.map((n) => ({ context: n.note, createdAt: Math.floor(n.created_at / 1000) })),
      };
    },
  };
}

export type ContextService = ReturnType<typeof contextService>;
