// Knowledge bases under /api/v2/kb. The contract has one operation, GET
// /kb/knowledgebase/{kbId}/documents, which deletes documents (body `documentIds`; we also take
// them in the query, since many clients drop a GET's body); the rest are callplane extensions:
// create, list, read and delete knowledge bases, upload, list and delete documents, search.
import multipart from '@fastify/multipart';
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { App } from '../../http/types.ts';
import { HttpError, Invalid } from '../../http/errors.ts';
import { AccountId, Envelope, errors, LimitOffsetQuery, Obj, Security } from '../../http/schemas.ts';
import { drainRequest } from '../../http/drain.ts';
import { FORMATS, formatOf } from './extract.ts';
import { CHUNK_CHARS, CHUNK_OVERLAP } from './chunks.ts';
import {
  DEFAULT_RESULTS, MAX_DELETE_IDS, MAX_DESCRIPTION_LENGTH, MAX_NAME_LENGTH, MAX_RESULTS, MAX_UPLOAD_BYTES,
  type KnowledgeService,
} from './service.ts';

const tags = ['KnowledgeBase'];
const TargetQuery = Type.Object({
  targetAccountId: Type.Optional(AccountId('Organization to act on (resellers and partners; an organization token acts on itself)')),
});
const KbParams = Type.Object({ kbId: Type.String({ minLength: 1, maxLength: 64, description: 'The ID of the knowledge base' }) });
/** Largest JSON body read from a GET (the contract's delete sends documentIds there). */
const MAX_GET_BODY_BYTES = 256 * 1024;
const FRAMING_BYTES = 64 * 1024;

const KnowledgeBase = Obj({
  id: Type.String({ description: 'kb_…' }), name: Type.String(), description: Type.String(),
  documents: Type.Optional(Type.Integer({ description: 'Documents it holds' })),
  createdAt: Type.Number({ description: 'unix seconds' }), updatedAt: Type.Number({ description: 'unix seconds' }),
}, 'A knowledge base (callplane extension). See docs/knowledge.md.');
const Document = Obj({
  id: Type.String({ description: 'doc_…' }), knowledgeBaseId: Type.String(), name: Type.String(),
  format: Type.String({ description: 'text, markdown, html or pdf' }), bytes: Type.Integer({ description: 'Size of the upload' }),
  characters: Type.Integer({ description: 'Characters of text extracted' }), chunks: Type.Integer({ description: 'Chunks indexed' }),
  createdAt: Type.Number({ description: 'unix seconds' }),
}, 'A document of a knowledge base');
const Hit = Obj({
  documentId: Type.String(), documentName: Type.String(), chunk: Type.Integer({ description: '0-based position of the chunk in its document' }),
  content: Type.String(), score: Type.Number({ description: 'Higher is better (-bm25 on SQLite, ts_rank on PostgreSQL); compare only within one answer' }),
}, 'A chunk that matches the query');

/** documentIds from the query: repeated (`?documentIds=a&documentIds=b`) or comma-separated. */
function idsFromQuery(v: string | string[] | undefined): string[] {
  if (v === undefined) return [];
  return (Array.isArray(v) ? v : [v]).flatMap((s) => s.split(',')).map((s) => s.trim()).filter(Boolean);
}

/** Fastify does not read a GET's body: read it here (JSON, bounded), when there is one. */
async function getBody(req: FastifyRequest): Promise<unknown> {
  const raw = req.raw;
  const length = Number(req.headers['content-length']);
  if (!(length > 0) && req.headers['transfer-encoding'] === undefined) return undefined;
  if (length > MAX_GET_BODY_BYTES) throw new HttpError(413, `the body must be at most ${MAX_GET_BODY_BYTES} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of raw as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_GET_BODY_BYTES) throw new HttpError(413, `the body must be at most ${MAX_GET_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (!text) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new Invalid('the body must be JSON: {"documentIds": ["doc_…"]}');
  }
}

function idsFromBody(body: unknown): string[] {
  if (body === undefined || body === null) return [];
  const ids = (body as { documentIds?: unknown }).documentIds;
  if (typeof body !== 'object' || Array.isArray(body) || !Array.isArray(ids) || !ids.every((i) => typeof i === 'string' && i.length <= 64)) {
    throw new Invalid('documentIds must be an array of document ids');
  }
  return ids as string[];
}

/** The upload route, with multipart parsing registered for its own plugin scope only. */
async function uploadRoutes(app: App, { knowledge }: { knowledge: KnowledgeService }): Promise<void> {
  await app.register(multipart, {
    limits: { fileSize: MAX_UPLOAD_BYTES, files: 1, fields: 5, fieldSize: 1024, parts: 6, headerPairs: 100 },
    throwFileSizeLimit: true,
  });
  app.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
  app.addHook('onError', async (req, reply) => {
    if (!(await drainRequest(req.raw, MAX_UPLOAD_BYTES + FRAMING_BYTES, 15_000))) void reply.header('connection', 'close');
  });

  app.post('/api/v2/kb/knowledgebase/:kbId/documents/upload', {
    schema: {
      operationId: 'uploadKnowledgeDocument', tags, security: Security,
      summary: 'Upload a document to a knowledge base (callplane extension)',
      description: `multipart/form-data with the file in field \`file\`: ${FORMATS}, at most ${MAX_UPLOAD_BYTES / 1024 / 1024} MB. `
        + `Its text is split into chunks of at most ${CHUNK_CHARS} characters overlapping by ${CHUNK_OVERLAP} and indexed for search. `
        + 'The format comes from the file name\'s extension, else its content type. The text is read with limits '
        + '(pages, unpacked bytes, characters, memory, time: a 413 names the one passed; 503 when the server is busy reading others). '
        + 'See docs/knowledge.md.',
      consumes: ['multipart/form-data'],
      params: KbParams,
      querystring: Type.Object({
        ...TargetQuery.properties,
        name: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH, description: 'Document name (default: the file name)' })),
      }),
      body: {
        content: {
          'multipart/form-data': {
            schema: {
              type: 'object', nullable: true, required: ['file'],
              properties: { file: { type: 'string', format: 'binary', description: FORMATS } },
            },
          },
        },
      },
      response: { 201: Envelope({ document: Document }), ...errors(400, 403, 404, 409, 413, 415, 503) },
    },
  }, async (req, reply) => {
    if (!req.isMultipart()) throw new HttpError(415, 'Send multipart/form-data with the document in field file (e.g. curl -F file=@faq.pdf)');
    const length = Number(req.headers['content-length']);
    if (Number.isFinite(length) && length > MAX_UPLOAD_BYTES + FRAMING_BYTES) {
      throw new HttpError(413, `file must be at most ${MAX_UPLOAD_BYTES / 1024 / 1024} MB (the request is ${length} bytes)`);
    }
    const target = await knowledge.uploadTarget(req.scope, req.query.targetAccountId, req.params.kbId);
    let file: { name: string; format: ReturnType<typeof formatOf>; bytes: Buffer } | undefined;
    try {
      for await (const part of req.parts()) {
        if (part.type === 'field') continue;
        if (part.fieldname !== 'file' || file) {
          part.file.resume();
          throw new Invalid(`file is required: send the document in multipart field file (got a file in field '${part.fieldname.slice(0, 60)}')`);
        }
        const format = formatOf(part.filename, part.mimetype);
        file = { name: req.query.name ?? (part.filename || 'document'), format, bytes: await part.toBuffer() };
      }
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === 'FST_REQ_FILE_TOO_LARGE') throw new HttpError(413, `file must be at most ${MAX_UPLOAD_BYTES / 1024 / 1024} MB`);
      if (code === 'FST_FILES_LIMIT' || code === 'FST_PARTS_LIMIT' || code === 'FST_FIELDS_LIMIT') throw new Invalid('send one file, in field file');
      throw err;
    }
    if (!file) throw new Invalid('file is required: send the document in multipart field file (e.g. curl -F file=@faq.pdf)');
    return reply.status(201).send(await knowledge.addDocument(target, file));
  });
}

export async function knowledgeRoutes(app: App, { knowledge }: { knowledge: KnowledgeService }): Promise<void> {
  await app.register(uploadRoutes, { knowledge });

  app.post('/api/v2/kb/knowledgebase', {
    schema: {
      operationId: 'createKnowledgeBase', tags, security: Security, summary: 'Create a knowledge base (callplane extension)',
      querystring: TargetQuery,
      body: Type.Object({
        name: Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH }),
        description: Type.Optional(Type.String({ maxLength: MAX_DESCRIPTION_LENGTH })),
      }, { additionalProperties: false }),
      response: { 201: Envelope({ knowledgeBase: KnowledgeBase }), ...errors(400, 403, 404, 409) },
    },
  }, async (req, reply) => reply.status(201).send(await knowledge.createBase(req.scope, req.query.targetAccountId, req.body)));

  app.get('/api/v2/kb/knowledgebase', {
    schema: {
      operationId: 'listKnowledgeBases', tags, security: Security, summary: 'List the organization\'s knowledge bases (callplane extension)',
      querystring: TargetQuery,
      response: { 200: Envelope({ knowledgeBases: Type.Array(KnowledgeBase) }), ...errors(403, 404) },
    },
  }, async (req) => knowledge.listBases(req.scope, req.query.targetAccountId));

  app.get('/api/v2/kb/knowledgebase/:kbId', {
    schema: {
      operationId: 'getKnowledgeBase', tags, security: Security, summary: 'Fetch a knowledge base (callplane extension)',
      params: KbParams, querystring: TargetQuery,
      response: { 200: Envelope({ knowledgeBase: KnowledgeBase }), ...errors(403, 404) },
    },
  }, async (req) => knowledge.getBase(req.scope, req.query.targetAccountId, req.params.kbId));

  app.delete('/api/v2/kb/knowledgebase/:kbId', {
    schema: {
      operationId: 'deleteKnowledgeBase', tags, security: Security, summary: 'Delete a knowledge base and its documents (callplane extension)',
      params: KbParams, querystring: TargetQuery,
      response: { 200: Envelope({}), ...errors(403, 404) },
    },
  }, async (req) => knowledge.removeBase(req.scope, req.query.targetAccountId, req.params.kbId));

  app.get('/api/v2/kb/knowledgebase/:kbId/documents', {
    schema: {
      operationId: 'deleteKnowledgeDocuments', tags, security: Security, summary: 'Delete multiple documents',
      description: 'Deletes multiple documents from a knowledge base by their IDs: all of them, or none when one is not a document '
        + 'of this knowledge base (404 listing notFoundDocumentIds). The ids come in the JSON body `{"documentIds": [...]}` '
        + '(as the contract shows) or in the query (`documentIds`, repeated or comma-separated), since many clients drop a GET\'s body. '
        + `At most ${MAX_DELETE_IDS} ids. To list documents: GET …/documents/list.`,
      params: KbParams,
      querystring: Type.Object({
        ...TargetQuery.properties,
        documentIds: Type.Optional(Type.Union([Type.String({ maxLength: 65536 }), Type.Array(Type.String({ maxLength: 64 }), { maxItems: MAX_DELETE_IDS })],
          { description: 'Document ids (instead of the body): repeated or comma-separated' })),
      }),
      response: {
        204: Type.Null({ description: 'Successfully deleted' }),
        404: Obj({ success: Type.Literal(false), message: Type.String(), notFoundDocumentIds: Type.Optional(Type.Array(Type.String())) }, 'One or more documents not found'),
        ...errors(400, 403, 413),
      },
    },
  }, async (req, reply) => {
    const ids = [...idsFromQuery(req.query.documentIds), ...idsFromBody(await getBody(req))];
    const r = await knowledge.removeDocuments(req.scope, req.query.targetAccountId, req.params.kbId, ids);
    if (r.notFoundDocumentIds.length > 0) {
      return reply.status(404).send({ success: false, message: 'Some documents not found', notFoundDocumentIds: r.notFoundDocumentIds });
    }
    return reply.status(204).send(null);
  });

  app.get('/api/v2/kb/knowledgebase/:kbId/documents/list', {
    schema: {
      operationId: 'listKnowledgeDocuments', tags, security: Security, summary: 'List a knowledge base\'s documents, oldest first (callplane extension)',
      params: KbParams,
      querystring: Type.Object({
        ...TargetQuery.properties,
        ...LimitOffsetQuery,
      }),
      response: { 200: Envelope({ total: Type.Integer(), documents: Type.Array(Document) }), ...errors(400, 403, 404) },
    },
  }, async (req) => knowledge.listDocuments(req.scope, req.query.targetAccountId, req.params.kbId, req.query));

  app.delete('/api/v2/kb/knowledgebase/:kbId/documents/:documentId', {
    schema: {
      operationId: 'deleteKnowledgeDocument', tags, security: Security, summary: 'Delete one document (callplane extension)',
      params: Type.Object({ ...KbParams.properties, documentId: Type.String({ minLength: 1, maxLength: 64 }) }),
      querystring: TargetQuery,
      response: { 204: Type.Null({ description: 'Deleted' }), ...errors(403, 404) },
    },
  }, async (req, reply) => {
    const r = await knowledge.removeDocuments(req.scope, req.query.targetAccountId, req.params.kbId, [req.params.documentId]);
    if (r.notFoundDocumentIds.length > 0) throw new HttpError(404, 'Document not found');
    return reply.status(204).send(null);
  });

  app.post('/api/v2/kb/knowledgebase/:kbId/search', {
    schema: {
      operationId: 'searchKnowledgeBase', tags, security: Security, summary: 'The chunks that best match a query (callplane extension)',
      description: 'Full-text search of the knowledge base\'s chunks for any of the query\'s words, best first (bm25 on SQLite, '
        + 'ts_rank on PostgreSQL, with English stemming). Only words count: punctuation and search-syntax characters are ignored.',
      params: KbParams, querystring: TargetQuery,
      body: Type.Object({
        query: Type.String({ minLength: 1, maxLength: 2000 }),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_RESULTS, description: `At most this many chunks (default ${DEFAULT_RESULTS})` })),
      }, { additionalProperties: false }),
      response: { 200: Envelope({ results: Type.Array(Hit) }), ...errors(400, 403, 404) },
    },
  }, async (req) => knowledge.search(req.scope, req.query.targetAccountId, req.params.kbId, req.body));
}
