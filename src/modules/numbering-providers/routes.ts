// Numbering provider operations (the carriers an organization uses).
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Obj, Security } from '../../http/schemas.ts';
import type { NumberingService } from './service.ts';

const tags = ['Phone Numbers'];
const Provider = Obj({ providerId: Type.String(), default: Type.Boolean(), enabled: Type.Boolean(), config: Type.Record(Type.String(), Type.String()) });
const Body = (requireConfig: boolean) => Type.Object({
  providerId: Type.String({ minLength: 1, maxLength: 50 }),
  default: Type.Optional(Type.Boolean()),
  enabled: Type.Optional(Type.Boolean()),
  config: requireConfig ? Type.Record(Type.String(), Type.String({ maxLength: 4000 }))
    : Type.Optional(Type.Record(Type.String(), Type.String({ maxLength: 4000 }))),
});
const TargetOrg = Type.Object({ targetOrganizationId: AccountId('Organization id') });

export async function numberingRoutes(app: App, { numbering }: { numbering: NumberingService }): Promise<void> {
  app.get('/api/v2/numberingProviders', {
    schema: { operationId: 'listNumberingProviders', tags, security: Security,
      summary: 'List supported numbering providers and what each needs (reseller or partner token)',
      response: { 200: Envelope({ numberingProviders: Type.Array(Obj({ providerId: Type.String() })) }), ...errors(403) } },
  }, async (req) => numbering.catalog(req.scope));

  app.post('/api/v2/numberingProvider', {
    schema: { operationId: 'addNumberingProvider', tags, security: Security, summary: 'Add a numbering provider to an organization',
      querystring: TargetOrg, body: Body(true),
      response: { 200: Envelope({ numberingProvider: Provider }), ...errors(400, 403, 404) } },
  }, async (req) => numbering.add(req.scope, req.query.targetOrganizationId, req.body));

  app.put('/api/v2/numberingProvider', {
    schema: { operationId: 'updateNumberingProvider', tags, security: Security, summary: 'Update, make default or disable a numbering provider',
      querystring: TargetOrg, body: Body(false),
      response: { 200: Envelope({ numberingProvider: Provider }), ...errors(400, 403, 404) } },
  }, async (req) => numbering.update(req.scope, req.query.targetOrganizationId, req.body));
}
