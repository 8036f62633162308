// An organization's integration data (appData), by app id (slug) and version.
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Security } from '../../http/schemas.ts';
import type { IntegrationService } from './service.ts';

const tags = ['Integrations'];
const Params = Type.Object({
  integrationSlug: Type.String({ minLength: 1, maxLength: 200, description: 'The integration\'s appId', examples: ['acme'] }),
  integrationVersion: Type.String({ minLength: 1, maxLength: 50, description: 'The integration\'s appVersion', examples: ['v1'] }),
});
const Query = Type.Object({ targetAccountId: Type.Optional(AccountId('Organization whose integration it is; resellers and partners must name one')) });
const AppData = Type.Object({}, { additionalProperties: true, description: 'Integration-specific data; values under keys that name secrets are masked' });
const Answer = Envelope({ appId: Type.String(), appVersion: Type.String(), appData: AppData, updatedAt: Type.Integer() });

export async function integrationRoutes(app: App, { integrations }: { integrations: IntegrationService }): Promise<void> {
  app.get('/api/v2/integration/:integrationSlug/:integrationVersion', {
    schema: { operationId: 'getIntegrationData', tags, security: Security, summary: "Fetch an organization's integration data (secrets masked)",
      params: Params, querystring: Query, response: { 200: Answer, ...errors(400, 403, 404) } },
  }, async (req) => integrations.get(req.scope, req.query.targetAccountId, req.params.integrationSlug, req.params.integrationVersion));

  app.put('/api/v2/integration/:integrationSlug/:integrationVersion', {
    schema: { operationId: 'updateIntegrationData', tags, security: Security,
      summary: "Update an organization's integration data: keys sent replace theirs, null removes one (docs/api.md \"Integrations\")",
      params: Params, querystring: Query, body: Type.Object({ appData: Type.Unknown({ description: 'An object (see docs/api.md for its bounds)' }) }),
      response: { 200: Answer, ...errors(400, 403, 404) } },
  }, async (req) => integrations.update(req.scope, req.query.targetAccountId, req.params.integrationSlug, req.params.integrationVersion, req.body.appData));
}
