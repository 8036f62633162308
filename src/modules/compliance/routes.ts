// Do-not-call lists and compliance settings (extension operations; docs/campaigns.md).
import multipart from '@fastify/multipart';
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { HttpError, Invalid } from '../../http/errors.ts';
import { AccountId, Envelope, errors, Nullable, Obj, Security } from '../../http/schemas.ts';
import { DNC_CSV_MAX_BYTES } from './csv.ts';
import { MAX_DNC_NOTE, MAX_DNC_NUMBERS, MAX_HELP_TEXT, type ComplianceService } from './service.ts';

const tags = ['Do-not-call'];
const ext = ' (callplane extension; docs/campaigns.md)';
const Target = { targetAccountId: Type.Optional(AccountId('The partner, reseller or organization whose list this is (default: your own)')) };
const Phone = (description: string) => Type.String({ minLength: 1, maxLength: 64, description });
const Entry = Obj({
  number: Type.String({ description: 'E.164' }),
  source: Type.String({ description: 'How it came: api, csv, sms-stop (a STOP by text) or call-analysis (a spoken request the analysis recognised)' }),
  evidence: Nullable(Type.String({ description: 'The conversation it came from' })),
  note: Nullable(Type.String()),
  createdAt: Type.Integer({ description: 'Unix seconds' }),
  listOf: Type.Integer({ description: 'The account whose list holds it' }),
}, 'A number on a do-not-call list');
const Settings = Obj({
  smsHelpText: Type.String({ description: 'What a HELP by text is answered with' }),
  redactPersonalData: Type.Boolean({ description: 'Card numbers, SSNs, emails, phone numbers and street addresses replaced by [card], [ssn], [email], [phone], [address] before messages are stored' }),
  keepRecordings: Type.Boolean({ description: 'Whether calls are recorded at all (false: no recording is written, whatever the process\'s CALLPLANE_CALL_RECORDING says)' }),
}, 'An organization\'s compliance settings');

export async function complianceRoutes(app: App, { compliance }: { compliance: ComplianceService }): Promise<void> {
  await app.register(multipart, { limits: { fileSize: DNC_CSV_MAX_BYTES, files: 1, fields: 5, fieldSize: DNC_CSV_MAX_BYTES, parts: 6 }, throwFileSizeLimit: false });

  app.get('/api/v2/do-not-call', {
    schema: {
      operationId: 'listDoNotCall', tags, security: Security, summary: `Fetch a do-not-call list, newest first${ext}`,
      querystring: Type.Object({
        ...Target,
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'At most this many (default 100)' })),
        offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000_000 })),
        number: Type.Optional(Phone('Only this number (any way of writing it)')),
      }),
      response: { 200: Envelope({ total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer(), numbers: Type.Array(Entry) }), ...errors(400, 403, 404) },
    },
  }, async (req) => compliance.list(req.scope, req.query));

  app.post('/api/v2/do-not-call', {
    schema: {
      operationId: 'addDoNotCall', tags, security: Security, summary: `Add numbers to a do-not-call list${ext}`,
      description: 'Tasks to these numbers are refused from now on, and pending ones are not dialled or sent: they end canceled.',
      querystring: Type.Object(Target),
      body: Type.Object({
        number: Type.Optional(Phone('One number')),
        numbers: Type.Optional(Type.Array(Phone('A number'), { maxItems: MAX_DNC_NUMBERS, description: `Up to ${MAX_DNC_NUMBERS} numbers` })),
        note: Type.Optional(Type.String({ maxLength: MAX_DNC_NOTE })),
      }),
      response: { 200: Envelope({ added: Type.Integer({ description: 'Numbers that were not on the list yet' }), numbers: Type.Array(Type.String()) }), ...errors(400, 403, 404) },
    },
  }, async (req) => compliance.add(req.scope, req.query.targetAccountId, req.body));

  app.delete('/api/v2/do-not-call/:number', {
    schema: {
      operationId: 'removeDoNotCall', tags, security: Security, summary: `Remove a number from a do-not-call list${ext}`,
      params: Type.Object({ number: Phone('The number (E.164; URL-encode the +)') }), querystring: Type.Object(Target),
      response: { 200: Envelope({}), ...errors(400, 403, 404) },
    },
  }, async (req) => compliance.remove(req.scope, req.query.targetAccountId, req.params.number));

  app.get('/api/v2/do-not-call/csv', {
    schema: {
      operationId: 'exportDoNotCall', tags, security: Security, summary: `Export a do-not-call list as CSV${ext}`,
      description: 'Columns number, source, evidence, note, createdAt (ISO 8601), listOf; oldest first. Numbers are written \'+1… so spreadsheets keep them as text; the import reads them back.',
      querystring: Type.Object(Target),
      produces: ['text/csv'],
      response: { 200: Type.String({ description: 'text/csv' }), ...errors(403, 404) },
    },
  }, async (req, reply) => {
    const r = await compliance.exportCsv(req.scope, req.query.targetAccountId);
    return reply.type('text/csv; charset=utf-8').header('content-disposition', `attachment; filename="${r.filename}"`).send(r.stream as never);
  });

  app.post('/api/v2/do-not-call/csv', {
    schema: {
      operationId: 'importDoNotCall', tags, security: Security, summary: `Add numbers to a do-not-call list from a CSV file${ext}`,
      description: `multipart/form-data with the file in field csv (at most ${DNC_CSV_MAX_BYTES / 1024 / 1024} MB): the number in the first column, `
        + 'an optional header row (number, note). Refused rows are listed with their line; the rest are added.',
      consumes: ['multipart/form-data'],
      querystring: Type.Object(Target),
      body: {
        content: {
          'multipart/form-data': {
            schema: { type: 'object', nullable: true, required: ['csv'], properties: { csv: { type: 'string', format: 'binary', description: 'CSV file' } } },
          },
        },
      },
      response: {
        200: Envelope({
          rows: Type.Integer(), valid: Type.Integer(), invalid: Type.Integer(), added: Type.Integer(), complete: Type.Boolean(),
          errors: Type.Array(Obj({ line: Type.Integer(), message: Type.String() })),
        }),
        ...errors(400, 403, 404, 413, 415, 503),
      },
    },
  }, async (req) => {
    if (!req.isMultipart()) throw new HttpError(415, 'Send multipart/form-data with the CSV file in field csv (e.g. curl -F csv=@numbers.csv)');
    for await (const part of req.parts()) {
      if (part.fieldname !== 'csv') {
        if (part.type === 'file') part.file.resume();
        continue;
      }
      const text = part.type === 'file' ? (await part.toBuffer()).toString('utf8') : String(part.value);
      if (part.type === 'file' && part.file.truncated) throw new HttpError(413, `csv must be at most ${DNC_CSV_MAX_BYTES / 1024 / 1024} MB; split the file`);
      return compliance.importCsv(req.scope, req.query.targetAccountId, text);
    }
    throw new Invalid('csv is required: send the CSV file in multipart field csv');
  });

  app.get('/api/v2/compliance/settings', {
    schema: {
      operationId: 'getComplianceSettings', tags, security: Security, summary: `Fetch an organization's compliance settings${ext}`,
      querystring: Type.Object({ targetAccountId: Type.Optional(AccountId('The organization (resellers and partners)')) }),
      response: { 200: Envelope({ settings: Settings }), ...errors(403, 404) },
    },
  }, async (req) => compliance.getSettings(req.scope, req.query.targetAccountId));

  app.post('/api/v2/compliance/settings', {
    schema: {
      operationId: 'updateComplianceSettings', tags, security: Security, summary: `Change an organization's compliance settings${ext}`,
      querystring: Type.Object({ targetAccountId: Type.Optional(AccountId('The organization (resellers and partners)')) }),
      body: Type.Object({
        smsHelpText: Type.Optional(Nullable(Type.String({ maxLength: MAX_HELP_TEXT, description: 'null: the default' }))),
        redactPersonalData: Type.Optional(Type.Boolean()),
        keepRecordings: Type.Optional(Type.Boolean()),
      }, { additionalProperties: false }),
      response: { 200: Envelope({ settings: Settings }), ...errors(400, 403, 404) },
    },
  }, async (req) => compliance.setSettings(req.scope, req.query.targetAccountId, req.body));
}
