// Knowledge bases: an organization's collections of documents, each split into chunks that the
// engine's own full-text search indexes. SQLite: an FTS5 table over the chunks (external
// content, kept in step by triggers, Porter stemming). PostgreSQL: a generated `tsvector`
// column (english configuration) with a GIN index. See docs/knowledge.md.
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../types.ts';
import { withId } from './0001-foundation.ts';

export function knowledge(dialect: Dialect) {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('knowledge_bases')
        .addColumn('id', 'text', (c) => c.primaryKey()) // kb_ + time-sortable id
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('knowledge_bases_org').on('knowledge_bases').columns(['org_id', 'id']).execute();

      await db.schema.createTable('kb_documents')
        .addColumn('id', 'text', (c) => c.primaryKey()) // doc_ + time-sortable id
        .addColumn('kb_id', 'text', (c) => c.notNull().references('knowledge_bases.id').onDelete('cascade'))
        .addColumn('org_id', 'integer', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('format', 'text', (c) => c.notNull()) // text | markdown | html | pdf
        .addColumn('bytes', 'integer', (c) => c.notNull())
        .addColumn('characters', 'integer', (c) => c.notNull())
        .addColumn('chunks', 'integer', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('kb_documents_kb').on('kb_documents').columns(['kb_id', 'id']).execute();

      let chunks = withId(db.schema.createTable('kb_chunks'), dialect)
        .addColumn('document_id', 'text', (c) => c.notNull().references('kb_documents.id').onDelete('cascade'))
        .addColumn('kb_id', 'text', (c) => c.notNull())
        .addColumn('org_id', 'integer', (c) => c.notNull())
        .addColumn('position', 'integer', (c) => c.notNull())
        .addColumn('content', 'text', (c) => c.notNull());
      if (dialect === 'postgres') {
        chunks = chunks.addColumn('tsv', sql`tsvector`, (c) => c.generatedAlwaysAs(sql`to_tsvector('english', content)`).stored());
      }
      await chunks.execute();
      await db.schema.createIndex('kb_chunks_document').on('kb_chunks').columns(['document_id', 'position']).execute();

      if (dialect === 'postgres') {
        await sql`CREATE INDEX kb_chunks_tsv ON kb_chunks USING gin (tsv)`.execute(db);
      } else {
        await sql`CREATE VIRTUAL TABLE kb_chunks_fts USING fts5(content, content='kb_chunks', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')`.execute(db);
        // External content: the index follows the chunks table (chunks are never updated).
        await sql`CREATE TRIGGER kb_chunks_ai AFTER INSERT ON kb_chunks BEGIN
          INSERT INTO kb_chunks_fts(rowid, content) VALUES (new.id, new.content); END`.execute(db);
        await sql`CREATE TRIGGER kb_chunks_ad AFTER DELETE ON kb_chunks BEGIN
          INSERT INTO kb_chunks_fts(kb_chunks_fts, rowid, content) VALUES ('delete', old.id, old.content); END`.execute(db);
      }
    },
    async down(db: Kysely<any>): Promise<void> {
      if (dialect === 'sqlite') await sql`DROP TABLE IF EXISTS kb_chunks_fts`.execute(db);
      await db.schema.dropTable('kb_chunks').ifExists().execute();
      await db.schema.dropTable('kb_documents').ifExists().execute();
      await db.schema.dropTable('knowledge_bases').ifExists().execute();
    },
  };
}
