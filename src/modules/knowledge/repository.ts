// Queries on knowledge_bases, kb_documents and kb_chunks. Every query is bound to one
// organization. The search is the engine's own full-text index (see src/db/fulltext.ts):
// FTS5 ranked by bm25 on SQLite, the tsv column ranked by ts_rank on PostgreSQL.
import { sql, type Insertable } from 'kysely';
import type { DB, Executor, KbDocumentRow, KnowledgeBaseRow } from '../../db/types.ts';
import { engineOf, fts5Query, tsQuery } from '../../db/fulltext.ts';

export interface KnowledgeBaseWithCount extends KnowledgeBaseRow { documents: number }

export interface ChunkHit {
  document_id: string;
  document_name: string;
  position: number;
  content: string;
  /** Higher is better: -bm25 on SQLite, ts_rank on PostgreSQL (not comparable across engines). */
  score: number;
}

export const knowledgeRepo = {
  async insertBase(db: Executor, row: Insertable<DB['knowledge_bases']>): Promise<KnowledgeBaseRow> {
    return db.insertInto('knowledge_bases').values(row).returningAll().executeTakeFirstOrThrow();
  },
  async countBases(db: Executor, orgId: number): Promise<number> {
    const r = await db.selectFrom('knowledge_bases').select((eb) => eb.fn.countAll<number>().as('n'))
      .where('org_id', '=', orgId).executeTakeFirstOrThrow();
    return Number(r.n);
  },
  async listBases(db: Executor, orgId: number): Promise<KnowledgeBaseWithCount[]> {
    const rows = await db.selectFrom('knowledge_bases as k').selectAll('k')
      .select((eb) => eb.selectFrom('kb_documents as d').whereRef('d.kb_id', '=', 'k.id')
        .select((e) => e.fn.countAll<number>().as('n')).as('documents'))
      .where('k.org_id', '=', orgId).orderBy('k.id').execute();
    return rows.map((r) => ({ ...r, documents: Number(r.documents ?? 0) }));
  },
  async findBase(db: Executor, orgId: number, id: string): Promise<KnowledgeBaseRow | undefined> {
    return db.selectFrom('knowledge_bases').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
  },
  /**
   * Which of these ids are knowledge bases of the organization (in no particular order): one
   * query, so an agent configuration's `knowledgeBases` is checked at once, and retrieval can
   * leave out the ids of knowledge bases deleted since the configuration was written.
   */
  async existingBases(db: Executor, orgId: number, ids: readonly string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await db.selectFrom('knowledge_bases').select('id').where('org_id', '=', orgId).where('id', 'in', ids).execute();
    return rows.map((r) => r.id);
  },
  /** Deletes a knowledge base with its documents and chunks (their index entries go with them). */
  async removeBase(db: Executor, orgId: number, id: string): Promise<boolean> {
    await db.deleteFrom('kb_chunks').where('org_id', '=', orgId).where('kb_id', '=', id).execute();
    await db.deleteFrom('kb_documents').where('org_id', '=', orgId).where('kb_id', '=', id).execute();
    const r = await db.deleteFrom('knowledge_bases').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  },
  async countDocuments(db: Executor, orgId: number, kbId: string): Promise<number> {
    const r = await db.selectFrom('kb_documents').select((eb) => eb.fn.countAll<number>().as('n'))
      .where('org_id', '=', orgId).where('kb_id', '=', kbId).executeTakeFirstOrThrow();
    return Number(r.n);
  },
  /** A document and its chunks, in order. */
  async insertDocument(db: Executor, row: Insertable<DB['kb_documents']>, chunks: readonly string[]): Promise<KbDocumentRow> {
    const doc = await db.insertInto('kb_documents').values(row).returningAll().executeTakeFirstOrThrow();
    const BATCH = 100;
    for (let i = 0; i < chunks.length; i += BATCH) {
      await db.insertInto('kb_chunks').values(chunks.slice(i, i + BATCH).map((content, j) => ({
        document_id: doc.id, kb_id: row.kb_id, org_id: row.org_id, position: i + j, content,
      }))).execute();
    }
    return doc;
  },
  async listDocuments(db: Executor, orgId: number, kbId: string, limit: number, offset: number): Promise<KbDocumentRow[]> {
    return db.selectFrom('kb_documents').selectAll().where('org_id', '=', orgId).where('kb_id', '=', kbId)
      .orderBy('id').limit(limit).offset(offset).execute();
  },
  /** Which of these ids are documents of the knowledge base. */
  async existingDocuments(db: Executor, orgId: number, kbId: string, ids: readonly string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await db.selectFrom('kb_documents').select('id')
      .where('org_id', '=', orgId).where('kb_id', '=', kbId).where('id', 'in', ids).execute();
    return rows.map((r) => r.id);
  },
  /** Deletes documents of the knowledge base, with their chunks; the number deleted. */
  async removeDocuments(db: Executor, orgId: number, kbId: string, ids: readonly string[]): Promise<number> {
    if (ids.length === 0) return 0;
    await db.deleteFrom('kb_chunks').where('org_id', '=', orgId).where('kb_id', '=', kbId).where('document_id', 'in', ids).execute();
    const r = await db.deleteFrom('kb_documents').where('org_id', '=', orgId).where('kb_id', '=', kbId).where('id', 'in', ids).executeTakeFirst();
    return Number(r.numDeletedRows);
  },
  /** The best chunks of the knowledge base for any of these words, best first. */
  async search(db: Executor, orgId: number, kbId: string, terms: readonly string[], limit: number): Promise<ChunkHit[]> {
    if (terms.length === 0) return [];
    if (engineOf(db) === 'postgres') {
      const r = await sql<ChunkHit>`
        SELECT c.document_id, d.name AS document_name, c.position, c.content, ts_rank(c.tsv, q.q) AS score
        FROM kb_chunks c JOIN kb_documents d ON d.id = c.document_id,
             to_tsquery('english', ${tsQuery(terms)}) AS q(q)
        WHERE c.org_id = ${orgId} AND c.kb_id = ${kbId} AND c.tsv @@ q.q
        ORDER BY score DESC, c.id LIMIT ${limit}`.execute(db);
      return r.rows.map((h) => ({ ...h, score: Number(h.score) }));
    }
    const r = await sql<ChunkHit>`
      SELECT c.document_id, d.name AS document_name, c.position, c.content, -bm25(kb_chunks_fts) AS score
      FROM kb_chunks_fts f JOIN kb_chunks c ON c.id = f.rowid JOIN kb_documents d ON d.id = c.document_id
      WHERE kb_chunks_fts MATCH ${fts5Query(terms)} AND c.org_id = ${orgId} AND c.kb_id = ${kbId}
      ORDER BY bm25(kb_chunks_fts), c.id LIMIT ${limit}`.execute(db);
    return r.rows.map((h) => ({ ...h, score: Number(h.score) }));
  },
};
