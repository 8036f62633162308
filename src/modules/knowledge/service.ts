// Knowledge bases (callplane extension under /api/v2/kb): an organization's documents, split into
// chunks and indexed by the engine's full-text search, and the search that returns the best
// chunks for a question. Everything belongs to one organization: another's knowledge base,
// documents and search are 404. See docs/knowledge.md.
import type { AccountRow, Db, KbDocumentFormat, KbDocumentRow, KnowledgeBaseRow } from '../../db/types.ts';
import { queryTerms } from '../../db/fulltext.ts';
import type { Scope } from '../../http/auth.ts';
import { Conflict, Invalid, NotFound } from '../../http/errors.ts';
import { newId } from '../../lib/ids.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import { splitChunks } from './chunks.ts';
import { documentText } from './extract.ts';
import { knowledgeRepo, type ChunkHit } from './repository.ts';

/** Size of one uploaded file. */
export const MAX_UPLOAD_BYTES = 10 * 1024 * 1024;
/** Characters of text kept from one document (about 2,000 chunks). */
export const MAX_DOCUMENT_CHARS = 2_000_000;
export const MAX_KNOWLEDGE_BASES = 100;
export const MAX_DOCUMENTS = 10_000;
export const MAX_NAME_LENGTH = 200;
export const MAX_DESCRIPTION_LENGTH = 2000;
/** Ids one delete may name. */
export const MAX_DELETE_IDS = 1000;
export const DEFAULT_RESULTS = 5;
export const MAX_RESULTS = 50;

export interface KnowledgeServiceDeps { db: Db; now?: () => number }

export function presentBase(row: KnowledgeBaseRow, documents?: number) {
  return {
    id: row.id, name: row.name, description: row.description,
    ...(documents === undefined ? {} : { documents }),
    createdAt: toUnixSeconds(row.created_at), updatedAt: toUnixSeconds(row.updated_at),
  };
}

export function presentDocument(row: KbDocumentRow) {
  return {
    id: row.id, knowledgeBaseId: row.kb_id, name: row.name, format: row.format, bytes: row.bytes,
    characters: row.characters, chunks: row.chunks, createdAt: toUnixSeconds(row.created_at),
  };
}

function presentHit(h: ChunkHit) {
  return { documentId: h.document_id, documentName: h.document_name, chunk: h.position, content: h.content, score: h.score };
}

export function knowledgeService(deps: KnowledgeServiceDeps) {
  const { db } = deps;
  const now = deps.now ?? Date.now;

  /** Knowledge bases belong to an organization: its own token, or targetAccountId for resellers and partners. */
  const organization = (scope: Scope, targetAccountId: number | undefined): Promise<AccountRow> =>
    scope.target(targetAccountId, ['organization']);

  async function base(scope: Scope, targetAccountId: number | undefined, kbId: string): Promise<{ org: AccountRow; kb: KnowledgeBaseRow }> {
    const org = await organization(scope, targetAccountId);
    const kb = await knowledgeRepo.findBase(db, org.id, kbId);
    if (!kb) throw new NotFound('Knowledge base not found');
    return { org, kb };
  }

  function checkName(name: string, field: string): string {
    const n = name.trim();
    if (!n) throw new Invalid(`${field} must not be empty`);
    if (n.length > MAX_NAME_LENGTH) throw new Invalid(`${field} must be at most ${MAX_NAME_LENGTH} characters`);
    return n;
  }

  return {
    async createBase(scope: Scope, targetAccountId: number | undefined, body: { name: string; description?: string }) {
      const org = await organization(scope, targetAccountId);
      const name = checkName(body.name, 'name');
      const description = (body.description ?? '').trim();
      if (description.length > MAX_DESCRIPTION_LENGTH) throw new Invalid(`description must be at most ${MAX_DESCRIPTION_LENGTH} characters`);
      if (await knowledgeRepo.countBases(db, org.id) >= MAX_KNOWLEDGE_BASES) {
        throw new Conflict(`An organization may have at most ${MAX_KNOWLEDGE_BASES} knowledge bases`);
      }
      const t = now();
      const row = await knowledgeRepo.insertBase(db, { id: newId('kb', t), org_id: org.id, name, description, created_at: t, updated_at: t });
      return { success: true as const, message: 'Knowledge base created', knowledgeBase: presentBase(row, 0) };
    },

    async listBases(scope: Scope, targetAccountId: number | undefined) {
      const org = await organization(scope, targetAccountId);
      const rows = await knowledgeRepo.listBases(db, org.id);
      return { success: true as const, knowledgeBases: rows.map((r) => presentBase(r, r.documents)) };
    },

    async getBase(scope: Scope, targetAccountId: number | undefined, kbId: string) {
      const { org, kb } = await base(scope, targetAccountId, kbId);
      return { success: true as const, knowledgeBase: presentBase(kb, await knowledgeRepo.countDocuments(db, org.id, kb.id)) };
    },

    async removeBase(scope: Scope, targetAccountId: number | undefined, kbId: string) {
      const { org, kb } = await base(scope, targetAccountId, kbId);
      await db.transaction().execute((tx) => knowledgeRepo.removeBase(tx, org.id, kb.id));
      return { success: true as const, message: 'Knowledge base deleted' };
    },

    /** Checks the knowledge base before the upload is read. */
    async uploadTarget(scope: Scope, targetAccountId: number | undefined, kbId: string) {
      const { org, kb } = await base(scope, targetAccountId, kbId);
      return { orgId: org.id, kbId: kb.id };
    },

    async addDocument(target: { orgId: number; kbId: string }, file: { name: string; format: KbDocumentFormat; bytes: Buffer }) {
      const name = checkName(file.name, 'name');
      const text = await documentText(file.bytes, file.format, MAX_DOCUMENT_CHARS);
      if (!text) throw new Invalid('file has no text to index (a scanned PDF needs OCR first)');
      const chunks = splitChunks(text);
      const doc = await db.transaction().execute(async (tx) => {
        if (await knowledgeRepo.countDocuments(tx, target.orgId, target.kbId) >= MAX_DOCUMENTS) {
          throw new Conflict(`A knowledge base may hold at most ${MAX_DOCUMENTS} documents`);
        }
        const t = now();
        return knowledgeRepo.insertDocument(tx, {
          id: newId('doc', t), kb_id: target.kbId, org_id: target.orgId, name, format: file.format,
          bytes: file.bytes.length, characters: text.length, chunks: chunks.length, created_at: t,
        }, chunks);
      });
      return { success: true as const, message: 'Document added', document: presentDocument(doc) };
    },

    async listDocuments(scope: Scope, targetAccountId: number | undefined, kbId: string, page: { limit?: number; offset?: number }) {
      const { org, kb } = await base(scope, targetAccountId, kbId);
      const [total, rows] = await Promise.all([
        knowledgeRepo.countDocuments(db, org.id, kb.id),
        knowledgeRepo.listDocuments(db, org.id, kb.id, page.limit ?? 100, page.offset ?? 0),
      ]);
      return { success: true as const, total, documents: rows.map(presentDocument) };
    },

    /**
     * Deletes the documents named, all or none: when one is not a document of this knowledge
     * base, nothing is deleted and the 404 lists the missing ids (the contract's answer).
     */
    async removeDocuments(scope: Scope, targetAccountId: number | undefined, kbId: string, ids: readonly string[]) {
      const unique = [...new Set(ids)];
      if (unique.length === 0) throw new Invalid('documentIds must name at least one document');
      if (unique.length > MAX_DELETE_IDS) throw new Invalid(`documentIds must name at most ${MAX_DELETE_IDS} documents`);
      const { org, kb } = await base(scope, targetAccountId, kbId);
      return db.transaction().execute(async (tx) => {
        const found = new Set(await knowledgeRepo.existingDocuments(tx, org.id, kb.id, unique));
        const missing = unique.filter((id) => !found.has(id));
        if (missing.length > 0) return { deleted: 0, notFoundDocumentIds: missing };
        return { deleted: await knowledgeRepo.removeDocuments(tx, org.id, kb.id, unique), notFoundDocumentIds: [] };
      });
    },

    /**
     * The best chunks for what was just said across the knowledge bases an agent names (the
     * conversation engine's retrieval): the organization's own bases only, best first, deleted
     * bases skipped. Scores of different bases are merged as they are (same engine, same scale).
     */
    async retrieve(orgId: number, kbIds: readonly string[], text: string, limit: number): Promise<Array<{ kbId: string; document: string; content: string; score: number }>> {
      const terms = queryTerms(text);
      if (terms.length === 0 || kbIds.length === 0) return [];
      const hits = await Promise.all(kbIds.slice(0, 20).map(async (kbId) =>
        (await knowledgeRepo.search(db, orgId, kbId, terms, limit)).map((h) => ({ kbId, document: h.document_name, content: h.content, score: h.score }))));
      return hits.flat().sort((a, b) => b.score - a.score).slice(0, limit);
    },

    async search(scope: Scope, targetAccountId: number | undefined, kbId: string, body: { query: string; limit?: number }) {
      const { org, kb } = await base(scope, targetAccountId, kbId);
      const terms = queryTerms(body.query);
      if (terms.length === 0) throw new Invalid('query must contain at least one word');
      const hits = await knowledgeRepo.search(db, org.id, kb.id, terms, Math.min(body.limit ?? DEFAULT_RESULTS, MAX_RESULTS));
      return { success: true as const, results: hits.map(presentHit) };
    },
  };
}

export type KnowledgeService = ReturnType<typeof knowledgeService>;
