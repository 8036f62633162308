// The activity-record (ADR) export operations: the contract's POST /api/v2/billing/adrExportConfig,
// and our extensions, on paths of their own (the contract's path keeps the one method it declares):
// GET and DELETE /api/v2/billing/adrExportSettings (read it masked, turn it off) and
// GET /api/v2/billing/adrExports (the windows and the shipment log).
// docs/billing.md, "Activity records"; docs/api.md, "Billing".
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Obj, Security, Nullable } from '../../http/schemas.ts';
import type { AdrService } from './service.ts';

const tags = ['Billing'];
const TargetQuery = Type.Object({
  targetAccountId: Type.Optional(AccountId('An organization below the token\'s reseller or partner, whose own export this is; default: the token\'s account')),
});
const Config = Obj({
  accountId: Type.Integer({ description: 'Whose export: an organization (its records) or a reseller or partner (every organization below it)' }),
  deliveryProtocol: Type.String({ description: 'sftp, ftps (explicit, AUTH TLS) or ftp' }),
  rotationMinutes: Type.String({ description: 'Minutes of records in each file' }),
  host: Type.String(), port: Type.Integer(), username: Type.String(),
  password: Type.String({ description: 'Masked' }),
  path: Nullable(Type.String({ description: 'The folder files go to; null: the login\'s home' })),
  hostKeyFingerprint: Nullable(Type.String({ description: 'callplane extension: the SFTP server\'s pinned host key (SHA256:…), or trust-on-first-use until the first connection records it; null for FTP and FTPS' })),
  enabled: Type.Boolean(),
  nextWindowStart: Type.Integer({ description: 'Unix seconds: the start of the next window to ship' }),
  createdAt: Type.Integer(), updatedAt: Type.Integer(),
}, 'An activity-record export (the password masked)');

export async function adrRoutes(app: App, deps: { adr: AdrService }) {
  const { adr } = deps;

  app.post('/api/v2/billing/adrExportConfig', {
    schema: {
      operationId: 'adrExportConfig', tags, security: Security, summary: 'Configure ADR Export Settings',
      description: 'Configure or update your ADR export settings. An organization exports its own records; a reseller or partner those of every organization below it (or, with targetAccountId, an organization\'s own export). The password may be left out on an update that keeps deliveryProtocol, host, port and username.',
      querystring: TargetQuery,
      body: Type.Object({
        deliveryProtocol: Type.String({ maxLength: 10, description: 'SFTP, FTPS, or FTP' }),
        rotationMinutes: Type.Optional(Type.Union([Type.String({ maxLength: 10 }), Type.Integer()], { description: 'How many minutes of records should be contained in each file (a divisor of 1440); default 60' })),
        host: Type.String({ maxLength: 253, description: 'hostname or IP address where to ship the ADR files to' }),
        port: Type.Integer({ description: 'Port for the SFTP or FTP service' }),
        username: Type.String({ maxLength: 200, description: 'username for the sftp or ftp account' }),
        password: Type.Optional(Type.String({ maxLength: 500, description: 'password for the sftp or ftp account; required when creating, or when deliveryProtocol, host, port or username changes' })),
        path: Type.Optional(Type.String({ maxLength: 1000, description: 'Folder path to deposit the files to. Defaults to the users home directory' })),
        hostKeyFingerprint: Type.Optional(Type.String({ maxLength: 100, description: 'callplane extension, sftp only: the server\'s host key as ssh-keygen -lf prints it (SHA256:…), checked on every connection, or trust-on-first-use to record the key the first connection sees. Required for sftp, and again when deliveryProtocol, host, port or username changes' })),
      }),
      response: { 200: Envelope({ config: Config }), ...errors(400, 403, 404) },
    },
  }, async (req) => adr.configure(req.scope, req.query.targetAccountId, req.body));

  app.get('/api/v2/billing/adrExportSettings', {
    schema: {
      operationId: 'getAdrExportConfig', tags, security: Security, summary: 'View ADR export settings (callplane extension)',
      querystring: TargetQuery,
      response: { 200: Envelope({ config: Config }), ...errors(403, 404) },
    },
  }, async (req) => adr.get(req.scope, req.query.targetAccountId));

  app.delete('/api/v2/billing/adrExportSettings', {
    schema: {
      operationId: 'disableAdrExport', tags, security: Security, summary: 'Turn the ADR export off (callplane extension)',
      description: 'No new windows are made; windows already made are still shipped. POST turns it on again from the current window.',
      querystring: TargetQuery,
      response: { 200: Envelope({ config: Config }), ...errors(403, 404) },
    },
  }, async (req) => adr.disable(req.scope, req.query.targetAccountId));

  app.get('/api/v2/billing/adrExports', {
    schema: {
      operationId: 'adrExports', tags, security: Security, summary: 'ADR windows and shipment log (callplane extension)',
      description: 'The latest windows (state, file, size, checksum, attempts) and every attempt to ship one (outcome and the server\'s message), newest first.',
      querystring: Type.Object({
        ...TargetQuery.properties,
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, description: 'Windows and log entries answered (each); default 50' })),
      }),
      response: {
        200: Envelope({
          accountId: Type.Integer(),
          windows: Type.Array(Obj({
            windowId: Type.String(), fileName: Type.String(), windowStart: Type.Integer(), windowEnd: Type.Integer(),
            state: Type.String({ description: 'pending, running, finished (shipped) or failed (attempts spent)' }),
            attempts: Type.Integer(), nextAttemptAt: Nullable(Type.Integer()), records: Nullable(Type.Integer()), bytes: Nullable(Type.Integer()),
            checksum: Nullable(Type.String({ description: 'sha256:<hex> of the file' })), shippedAt: Nullable(Type.Integer()), lastError: Nullable(Type.String()),
          })),
          shipments: Type.Array(Obj({
            shipmentId: Type.String(), windowId: Type.String(), attempt: Type.Integer(),
            outcome: Type.String({ description: 'shipped, found (already on the server from an earlier attempt) or failed' }),
            message: Type.String({ description: 'What happened; for a failure, the server\'s or the connection\'s message' }),
            bytes: Nullable(Type.Integer()), durationMs: Type.Integer(), nextAttemptAt: Nullable(Type.Integer()), at: Type.Integer(),
          })),
        }),
        ...errors(403, 404),
      },
    },
  }, async (req) => adr.exports(req.scope, req.query.targetAccountId, req.query));
}
