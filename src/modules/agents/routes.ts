// Agents: the staging and live (default) configuration of an agent account, publishing, and
// stored versions (docs/agents.md).
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Obj, Security } from '../../http/schemas.ts';
import { Held } from '../phone-numbers/schemas.ts';
import type { AgentService } from './service.ts';
import { AgentBody, AgentSettingsRef } from './validation.ts';

const tags = ['Agents'];
const TargetAccount = Type.Object({
  targetAccountId: Type.Optional(AccountId('Agent account (or organization, for its default agent) to act on instead of your own')),
});
const AgentParams = Type.Object({ agentId: Type.String({ maxLength: 100, description: 'Agent id: camp<accountId>, or the account id' }) });
const VersionParams = Type.Object({
  agentId: Type.String({ maxLength: 100, description: 'Agent id: camp<accountId>, or the account id' }),
  versionId: Type.String({ maxLength: 20, description: 'Epoch-ms score identifying the snapshot' }),
});
/** A slot as answered: the agent's ids beside its configuration's fields. */
const Config = Type.Intersect([Type.Object({ id: Type.String(), accountId: Type.Integer() }), AgentSettingsRef],
  { description: 'The agent configuration (docs/agents.md)' });
const SlotName = Type.String({ enum: ['staging', 'default'], default: 'staging' });
const Title = Type.String({ maxLength: 200 });
const Version = Obj({
  title: Type.String(), versionId: Type.Integer(), createdAt: Type.Integer(), updatedAt: Type.Integer(),
  snapshot: Type.Optional(Type.Intersect([AgentSettingsRef], { description: 'Only present when includeData=true' })),
});

const ReviewLabel = {
  reviewEngine: Type.String({ enum: ['model', 'rules'], description: 'model: the agent\'s language model wrote the suggestions; rules: the rule-based review (no model configured, or the model\'s answer was set aside)' }),
  model: Type.Optional(Type.String()),
  provider: Type.Optional(Type.String()),
  fallbackReason: Type.Optional(Type.String({ description: 'Why the model\'s review was set aside for the rules\'' })),
  findings: Type.Array(Obj({ field: Type.String(), severity: Type.String({ enum: ['error', 'warning', 'info'] }), message: Type.String() }),
    { description: 'What the rule checks found (timings, context size, missing greeting or descriptions)' }),
};
const FieldReview = Obj({ key: Type.String(), value: Type.String(), promptSuggestion: Type.String(), ...ReviewLabel });
const AgentReview = Obj({
  agentId: Type.String(), agentInstructionsSuggestion: Type.String(), greetingSuggestion: Type.String(),
  actionSuggestions: Type.Array(Obj({ name: Type.String(), promptSuggestion: Type.String() })),
  appSuggestions: Type.Array(Obj({ appId: Type.String(), version: Type.String(), promptSuggestion: Type.String() })),
  ...ReviewLabel,
});
const ReviewBody = Type.Object({
  mode: Type.String({ enum: ['fields', 'agent'], default: 'fields' }),
  templateId: Type.Optional(Type.String({ maxLength: 200, description: 'Accepted and ignored: callplane has no agent templates (send the values in fields)' })),
  agentId: Type.Optional(Type.String({ maxLength: 100, description: 'Required in agent mode; in fields mode the values are read from this agent\'s staging configuration' })),
  fields: Type.Optional(Type.Array(Type.Object({
    key: Type.String({ minLength: 1, maxLength: 100 }),
    value: Type.Optional(Type.String({ maxLength: 100_000 })),
  }, { additionalProperties: true }), { maxItems: 50, description: 'Fields mode: {key, value}; value is ignored when agentId is given. greeting means welcomeMessage, instructions agentInstructions' })),
}, { additionalProperties: true });

export async function agentRoutes(app: App, { agents }: { agents: AgentService }): Promise<void> {
  app.get('/api/v2/agentEventRules/staging', {
    schema: { operationId: 'getStagingAgent', tags, security: Security, summary: 'Fetch your staging agent configuration',
      querystring: TargetAccount, response: { 200: Envelope({ agent: Config }), ...errors(400, 403, 404) } },
  }, async (req) => agents.getSlot(req.scope, 'staging', req.query.targetAccountId));

  app.get('/api/v2/agentEventRules/default', {
    schema: { operationId: 'getLiveAgent', tags, security: Security, summary: 'Fetch your live (default) agent configuration',
      querystring: TargetAccount, response: { 200: Envelope({ agent: Config }), ...errors(400, 403, 404) } },
  }, async (req) => agents.getSlot(req.scope, 'default', req.query.targetAccountId));

  app.get('/api/v2/agent/:agentId', {
    schema: { operationId: 'getAgent', tags, security: Security, summary: 'Fetch an agent: its live configuration, with staging',
      params: AgentParams, response: { 200: Envelope({
        sponsorship: Type.Intersect([Type.Object({
          id: Type.String(), accountId: Type.Integer(),
          staging: AgentSettingsRef,
          publishedAt: Type.Union([Type.Integer(), Type.Null()], { description: 'When live was last published (unix seconds); null before the first publish' }),
        }), AgentSettingsRef], { description: 'The live configuration, with the staging one beside it' }),
        phoneNumbers: Type.Array(Held, { description: 'callplane extension: the numbers this agent holds (docs/numbers.md)' }),
      }), ...errors(400, 403, 404) } },
  }, async (req) => agents.get(req.scope, req.params.agentId));

  app.post('/api/v2/agent', {
    schema: { operationId: 'updateAgent', tags, security: Security, summary: 'Update the staging agent (fields not sent are kept)',
      querystring: TargetAccount, body: AgentBody,
      response: { 200: Envelope({ campaignId: Type.String() }), ...errors(400, 403, 404) } },
    // The body is checked as sent, before the schema's type coercion (which would take "100" for
    // 100 and null for "" or 0), by the same check a stored version's snapshot gets.
    preValidation: async (req) => { req.body = agents.checkConfig(req.body); },
  }, async (req) => agents.update(req.scope, req.body, req.query.targetAccountId));

  app.post('/api/v2/agent/autoReviewAgentConfiguration', {
    schema: { operationId: 'autoReviewAgentConfiguration', tags, security: Security, summary: 'Get LLM feedback for agent configuration or specific fields',
      description: 'fields mode answers [{key, value, promptSuggestion}], agent mode {agentId, agentInstructionsSuggestion, greetingSuggestion, actionSuggestions, appSuggestions}. '
        + 'The agent\'s model reviews when it resolves to a configured provider; otherwise (or when its answer is not the JSON asked for) a rule-based review answers, labelled reviewEngine: rules.',
      querystring: TargetAccount, body: ReviewBody,
      response: { 200: Type.Union([Type.Array(FieldReview), AgentReview]), ...errors(400, 403, 404) } },
  }, async (req) => agents.review(req.scope, req.body, req.query.targetAccountId));

  app.post('/api/v2/agent/publish', {
    schema: { operationId: 'publishAgent', tags, security: Security, summary: 'Publish the staging agent to live (the replaced live is kept as a version)',
      description: 'With the staging configuration\'s testGate on (extension), 409 naming the failed scenarios unless the latest test run of each of the agent\'s suites on this staging configuration passed (docs/testing-agents.md).',
      querystring: TargetAccount, response: { 200: Envelope({ previousVersionId: Type.Integer() }), ...errors(400, 403, 404, 409) } },
  }, async (req) => agents.publish(req.scope, req.query.targetAccountId));

  app.post('/api/v2/agent/revert', {
    schema: { operationId: 'revertAgent', tags, security: Security, summary: 'Revert the staging agent to the live configuration',
      querystring: TargetAccount, response: { 200: Envelope({}), ...errors(400, 403, 404) } },
  }, async (req) => agents.revert(req.scope, req.query.targetAccountId));

  app.get('/api/v2/agent/:agentId/versions', {
    schema: { operationId: 'listAgentVersions', tags, security: Security, summary: 'List the stored versions of an agent, newest first',
      params: AgentParams,
      querystring: Type.Object({ includeData: Type.Optional(Type.Boolean({ description: 'Include each version\'s snapshot' })) }),
      response: { 200: Envelope({ versions: Type.Array(Version) }), ...errors(400, 403, 404) } },
  }, async (req) => agents.listVersions(req.scope, req.params.agentId, req.query.includeData === true));

  app.post('/api/v2/agent/:agentId/versions', {
    schema: { operationId: 'createAgentVersion', tags, security: Security, summary: 'Store the staging or live configuration as a named version',
      params: AgentParams, body: Type.Object({ title: Title, source: Type.Optional(SlotName) }),
      response: { 201: Envelope({ createdVersion: Obj({ title: Type.String(), versionId: Type.Integer() }) }), ...errors(400, 403, 404) } },
  }, async (req, reply) => reply.status(201).send(await agents.createVersion(req.scope, req.params.agentId, req.body.title, req.body.source === 'default' ? 'default' : 'staging')));

  app.post('/api/v2/agent/:agentId/versions/:versionId', {
    schema: { operationId: 'replaceAgentVersion', tags, security: Security, summary: 'Replace a stored version\'s snapshot (validated like POST /agent)',
      params: VersionParams, body: Type.Object({ snapshot: Obj({}, 'The agent configuration to store') }),
      response: { 200: Envelope({ versionId: Type.Integer() }), ...errors(400, 403, 404) } },
  }, async (req) => agents.replaceVersion(req.scope, req.params.agentId, req.params.versionId, req.body.snapshot));

  app.post('/api/v2/agent/:agentId/versions/:versionId/restore', {
    schema: { operationId: 'restoreAgentVersion', tags, security: Security, summary: 'Copy a stored version into the staging or live (default) slot',
      params: VersionParams, body: Type.Object({ target: Type.Optional(SlotName) }, { description: 'Optional: without a body the target is staging' }),
      response: { 200: Envelope({ restored: Config, target: SlotName }), ...errors(400, 403, 404) } },
    // The contract's body is optional: none means target staging.
    preValidation: async (req) => { req.body ??= {}; },
  }, async (req) => agents.restoreVersion(req.scope, req.params.agentId, req.params.versionId, req.body.target === 'default' ? 'default' : 'staging'));

  app.put('/api/v2/agent/:agentId/versions/:versionId/title', {
    schema: { operationId: 'renameAgentVersion', tags, security: Security, summary: 'Rename a stored version',
      params: VersionParams, body: Type.Object({ title: Title }),
      response: { 200: Envelope({ versionId: Type.Integer(), newTitle: Type.String() }), ...errors(400, 403, 404) } },
  }, async (req) => agents.renameVersion(req.scope, req.params.agentId, req.params.versionId, req.body.title));
}

const urlTags = ['Agent URLs'];
const TargetUsername = Type.String({ maxLength: 320, description: 'The agent: its username (email or account-<id>), agent id (camp<id>) or account id; without it, your agent (an organization: its default agent)' });
const Slug = Type.String({ maxLength: 100, description: '3–40 characters of a–z, 0–9 and single hyphens, case-insensitive (stored lower-case); not a reserved word (docs/agents.md)' });

export async function agentUrlRoutes(app: App, { agents }: { agents: AgentService }): Promise<void> {
  app.get('/api/v2/checkAgentUrl', {
    schema: { operationId: 'checkAgentUrl', tags: urlTags, security: Security, summary: 'Check whether a slug is available for an agent',
      querystring: Type.Object({ targetUsername: Type.Optional(TargetUsername), slug: Slug }),
      response: { 200: Envelope({ available: Type.Boolean(), slug: Type.String() }), ...errors(400, 403, 404) } },
  }, async (req) => agents.checkUrl(req.scope, req.query.targetUsername, req.query.slug));

  app.get('/api/v2/agentUrl', {
    schema: { operationId: 'getAgentUrl', tags: urlTags, security: Security, summary: 'Fetch an agent\'s slug (404 when it has none)',
      querystring: Type.Object({ targetUsername: Type.Optional(TargetUsername) }),
      response: { 200: Envelope({ slug: Type.String() }), ...errors(400, 403, 404) } },
  }, async (req) => agents.getUrl(req.scope, req.query.targetUsername));

  app.post('/api/v2/agentUrl', {
    schema: { operationId: 'setAgentUrl', tags: urlTags, security: Security, summary: 'Set or replace an agent\'s slug (the old one is freed)',
      body: Type.Object({ targetUsername: Type.Optional(TargetUsername), slug: Slug }),
      response: { 200: Envelope({ slug: Type.String() }), ...errors(400, 403, 404, 409) } },
  }, async (req) => agents.setUrl(req.scope, req.body.targetUsername, req.body.slug));
}
