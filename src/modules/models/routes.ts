// Language models: the contract's catalog (GET /api/v2/models/supported) and our extension for an
// organization's own providers (GET /api/v2/llm/providers, PUT and DELETE …/{name}); see
// docs/conversations.md, "Language models".
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Obj, Security } from '../../http/schemas.ts';
import { MAX_API_KEY_LENGTH, MAX_BASE_URL_LENGTH, MAX_ORG_PROVIDERS, MAX_PROVIDER_MODELS, type ModelsService } from './service.ts';

const Entry = Type.Object({
  provider: Type.String({ description: 'Provider of the model: the hosted platform\'s nominal one (openai, anthropic, google), or the name of the configured provider that serves it' }),
  canReason: Type.Boolean({ description: 'Whether the model reasons before answering' }),
});

const ProviderName = Type.Object({
  name: Type.String({ maxLength: 100, description: 'Provider name: 1-40 of a-z, 0-9, _, ., - (starting with a letter or digit)' }),
});

const Provider = Obj({
  name: Type.String(),
  baseUrl: Type.String({ description: 'OpenAI-compatible base URL (…/v1)' }),
  apiKey: Type.Union([Type.String(), Type.Null()], { description: 'The key, masked (****1234); null when none is stored' }),
  models: Type.Array(Type.String(), { description: 'Model ids this provider serves for the organization' }),
  createdAt: Type.Integer({ description: 'unix seconds' }),
  updatedAt: Type.Integer({ description: 'unix seconds' }),
}, 'An organization\'s own language-model provider');

const TargetOrg = Type.Object({
  targetAccountId: Type.Optional(AccountId('Organization to act on (resellers and partners; an organization token acts on itself)')),
});

const PutBody = Type.Object({
  baseUrl: Type.String({ maxLength: MAX_BASE_URL_LENGTH, description: 'OpenAI-compatible base URL, such as https://api.groq.com/openai/v1; must be a public address' }),
  // nullable rather than a union: the validator's coercion would turn null into "" in a union's string branch.
  apiKey: Type.Optional(Type.Unsafe<string | null>({
    type: 'string', nullable: true, maxLength: MAX_API_KEY_LENGTH,
    description: 'The provider\'s API key, stored sealed and never answered in full. Omitted: the stored key is kept, unless baseUrl changes its origin (scheme, host or port): then 400 until it is sent again; null: removed',
  })),
  models: Type.Array(Type.String({ maxLength: 200 }), { minItems: 1, maxItems: MAX_PROVIDER_MODELS, description: 'Model ids this provider serves (agents may then name them)' }),
}, { additionalProperties: true });

export async function modelsRoutes(app: App, { models }: { models: ModelsService }): Promise<void> {
  app.get('/api/v2/models/supported', {
    schema: {
      operationId: 'getSupportedModels', tags: ['Models'], security: Security, summary: 'List supported AI models',
      description: 'The models agents may name in agentModel and agentThinkingModel, keyed by model id: the hosted platform\'s names, '
        + 'the models of the deployment\'s providers (declared and listed), and the organization\'s own providers\' models.',
      querystring: Type.Object({
        targetAccountId: Type.Optional(AccountId('Organization (or agent) whose catalog to show, for resellers and partners; without it, the deployment\'s')),
      }),
      response: { 200: Type.Record(Type.String(), Entry, { description: 'Model id → {provider, canReason}' }), ...errors(400, 403, 404) },
    },
  }, async (req) => models.supported(req.scope, req.query.targetAccountId));

  app.get('/api/v2/models/answering', {
    schema: {
      operationId: 'getAnsweringModel', tags: ['Models'], security: Security, summary: 'Which model and provider would answer for a model id (callplane extension)',
      description: 'How the organization\'s agents naming `model` are answered: the model and provider chosen (docs/conversations.md, "Which model answers"), '
        + '`simulated` when no provider is configured and the SIMULATED engine answers, `substituted` when another model answers instead.',
      querystring: Type.Object({
        model: Type.String({ minLength: 1, maxLength: 200, description: 'A model id, as agentModel names it' }),
        targetAccountId: Type.Optional(AccountId('Organization (or agent) whose agents it is for; required for resellers and partners')),
      }),
      response: { 200: Envelope({ model: Type.String(), provider: Type.String(), simulated: Type.Boolean(), substituted: Type.Boolean() }), ...errors(400, 403, 404) },
    },
  }, async (req) => models.answering(req.scope, req.query.targetAccountId, req.query.model));

  const tags = ['Language model providers'];
  app.get('/api/v2/llm/providers', {
    schema: {
      operationId: 'listLlmProviders', tags, security: Security, summary: 'List the organization\'s own model providers (keys masked)',
      querystring: TargetOrg, response: { 200: Envelope({ providers: Type.Array(Provider) }), ...errors(400, 403, 404) },
    },
  }, async (req) => models.listProviders(req.scope, req.query.targetAccountId));

  app.put('/api/v2/llm/providers/:name', {
    schema: {
      operationId: 'putLlmProvider', tags, security: Security, summary: 'Create or replace one of the organization\'s own model providers',
      description: `201 when created, 200 when replaced. At most ${MAX_ORG_PROVIDERS} per organization (409).`,
      params: ProviderName, querystring: TargetOrg, body: PutBody,
      response: { 200: Envelope({ provider: Provider }), 201: Envelope({ provider: Provider }), ...errors(400, 403, 404, 409) },
    },
  }, async (req, reply) => {
    const r = await models.putProvider(req.scope, req.query.targetAccountId, req.params.name, req.body);
    return reply.status(r.created ? 201 : 200).send(r.body);
  });

  app.delete('/api/v2/llm/providers/:name', {
    schema: {
      operationId: 'deleteLlmProvider', tags, security: Security, summary: 'Delete one of the organization\'s own model providers',
      params: ProviderName, querystring: TargetOrg, response: { 200: Envelope({}), ...errors(400, 403, 404) },
    },
  }, async (req) => models.removeProvider(req.scope, req.query.targetAccountId, req.params.name));
}
