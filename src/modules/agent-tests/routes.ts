// callplane extension: agent tests (docs/testing-agents.md) — an agent's suites of scenarios,
// their import and export, runs, results and the comparison with the published configuration.
// Every route names the agent in its path, as the agent versions' routes do: any token whose
// subtree holds the agent; another tenant's agent is 404.
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { Envelope, errors, Nullable, Obj, Security } from '../../http/schemas.ts';
import { CHECK_KINDS, LIMITS } from './document.ts';
import type { AgentTestService } from './service.ts';

const tags = ['Agent tests'];
const AgentId = Type.String({ maxLength: 100, description: 'Agent id: camp<accountId>, or the account id' });
const SuiteId = Type.String({ maxLength: 40, description: 'Suite id (ats_…)' });
const RunId = Type.String({ maxLength: 40, description: 'Run id (atr_…)' });
const Format = Type.String({ enum: ['yaml', 'json'], default: 'yaml' });

const Json = Type.Unknown();
const Check = Type.Object({
  toolCalled: Type.Optional(Type.Union([Type.String(), Type.Object({ name: Type.String(), args: Type.Optional(Type.Record(Type.String(), Json)), not: Type.Optional(Type.Boolean()) })])),
  said: Type.Optional(Type.String()), neverSaid: Type.Optional(Type.String()), outcome: Type.Optional(Type.String()),
  analysis: Type.Optional(Type.Object({ field: Type.String(), equals: Json })),
  endedCall: Type.Optional(Type.Boolean()), maxTurns: Type.Optional(Type.Integer()), turnLatencyMs: Type.Optional(Type.Integer()),
  judge: Type.Optional(Type.String()),
}, { additionalProperties: true, description: `One check: an object with exactly one of ${CHECK_KINDS.join(', ')} (docs/testing-agents.md, "Checks")` });
const Scenario = Type.Object({
  name: Type.String(),
  persona: Type.Object({ instructions: Type.String(), language: Type.Optional(Type.String()), voice: Type.Optional(Type.String()), opening: Type.Optional(Type.String()) }, { additionalProperties: true }),
  context: Type.Optional(Type.String()),
  variables: Type.Optional(Type.Record(Type.String(), Type.Union([Type.String(), Type.Number(), Type.Boolean()]))),
  callerNumber: Type.Optional(Type.String()),
  maxTurns: Type.Optional(Type.Integer()),
  toolMocks: Type.Optional(Type.Array(Type.Object({ tool: Type.String(), args: Type.Optional(Type.Record(Type.String(), Json)), result: Json }, { additionalProperties: true }))),
  checks: Type.Array(Check),
}, { additionalProperties: true });
const SuiteDocument = Type.Object({
  name: Type.String(),
  description: Type.Optional(Type.String()),
  settings: Type.Optional(Type.Object({
    callerModel: Type.Optional(Type.String()), judgeModel: Type.Optional(Type.String()),
    iterations: Type.Optional(Type.Integer()), concurrency: Type.Optional(Type.Integer()),
  }, { additionalProperties: true })),
  scenarios: Type.Array(Scenario),
}, { additionalProperties: true, description: `A suite document (docs/testing-agents.md, "The suite document"): at most ${LIMITS.scenarios} scenarios; checked in full, each refusal naming the field's path` });

const SuiteSummary = {
  id: Type.String(), agentId: Type.String(), name: Type.String(), version: Type.Integer({ description: 'Bumped by every change; earlier versions are kept' }),
  scenarios: Type.Integer({ description: 'Scenarios in the current version' }), createdAt: Type.Integer(), updatedAt: Type.Integer(),
};
const Suite = Obj({
  ...SuiteSummary, document: SuiteDocument,
  versions: Type.Array(Obj({ version: Type.Integer(), createdAt: Type.Integer() }), { description: 'Every version, newest first' }),
  shownVersion: Type.Optional(Type.Integer({ description: 'The version whose document is shown, when one was asked for' })),
});
const Run = Obj({
  id: Type.String(), agentId: Type.String(), suiteId: Type.String(), suiteVersion: Type.Integer(),
  target: Type.String({ enum: ['staging', 'live', 'version'] }), agentVersion: Nullable(Type.Integer(), 'The stored version run against (target version)'),
  configHash: Type.String({ description: 'SHA-256 of the configuration run against (the publish gate compares it with staging\'s)' }),
  mode: Type.String({ enum: ['text', 'voice'] }), iterations: Type.Integer(), concurrency: Type.Integer(),
  state: Type.String({ enum: ['pending', 'running', 'finished', 'failed', 'canceled'] }),
  progress: Obj({ done: Type.Integer(), total: Type.Integer() }),
  passed: Nullable(Type.Boolean(), 'Every scenario passed; null until the run finished'),
  attempt: Type.Integer(), lastError: Nullable(Type.String(), 'Why the run failed (or its last attempt did)'),
  createdAt: Type.Integer(), finishedAt: Nullable(Type.Integer()),
});
const Verdict = Obj({
  check: Type.String(), what: Type.String(), passed: Nullable(Type.Boolean()), reason: Type.String(),
  decides: Type.Boolean({ description: 'false: shown, not counted (a SIMULATED judge or caller, a latency check in text mode)' }),
  simulated: Type.Optional(Type.Boolean()),
});
const Results = Obj({
  passRate: Nullable(Type.Number()),
  scenarios: Type.Array(Obj({
    index: Type.Integer(), name: Type.String(), passRate: Type.Number(), passed: Type.Boolean(),
    checks: Type.Array(Obj({ check: Type.String(), what: Type.String(), passRate: Nullable(Type.Number()), simulated: Type.Boolean() })),
    iterations: Type.Array(Obj({
      iteration: Type.Integer(), passed: Type.Boolean(), conversationId: Nullable(Type.String(), 'The test conversation (GET /api/v2/conversations/{uuid}/messages)'),
      turns: Type.Integer(), error: Nullable(Type.String()), checks: Type.Array(Verdict),
      voice: Type.Optional(Obj({
        latenciesMs: Type.Array(Type.Integer(), { description: 'Each agent turn\'s latency as the caller heard it: from the end of its line to the agent\'s first sound' }),
        bargeIns: Type.Integer({ description: 'Agent replies the caller cut short' }),
        heard: Type.Array(Obj({ who: Type.String({ enum: ['agent', 'caller'] }), text: Type.String() }), { description: 'The call as the caller heard it: the agent\'s lines through the recogniser, its own as it said them' }),
      }, 'Voice mode only: what the call measured')),
    })),
  })),
});
const Change = Obj({ name: Type.String(), before: Type.Number(), after: Type.Number() });

export async function agentTestRoutes(app: App, { agentTests }: { agentTests: AgentTestService }): Promise<void> {
  const base = '/api/v2/agent/:agentId/tests';
  const AgentParams = Type.Object({ agentId: AgentId });
  const SuiteParams = Type.Object({ agentId: AgentId, suiteId: SuiteId });
  const RunParams = Type.Object({ agentId: AgentId, runId: RunId });
  const VersionQuery = Type.Object({ version: Type.Optional(Type.Integer({ minimum: 1, description: 'An earlier version of the suite' })) });

  app.get(`${base}/suites`, {
    schema: { operationId: 'listAgentTestSuites', tags, security: Security, summary: 'callplane extension: list an agent\'s test suites',
      params: AgentParams, response: { 200: Envelope({ suites: Type.Array(Obj(SuiteSummary)) }), ...errors(400, 403, 404) } },
  }, async (req) => agentTests.listSuites(req.scope, req.params.agentId));

  app.post(`${base}/suites`, {
    schema: { operationId: 'createAgentTestSuite', tags, security: Security, summary: 'callplane extension: create a test suite (version 1)',
      description: 'The body is the suite document; a refusal names the field\'s path inside it (scenarios[0].checks[1].said).',
      params: AgentParams, body: SuiteDocument, response: { 201: Envelope({ suite: Suite }), ...errors(400, 403, 404) } },
  }, async (req, reply) => reply.status(201).send(await agentTests.createSuite(req.scope, req.params.agentId, req.body)));

  app.get(`${base}/suites/:suiteId`, {
    schema: { operationId: 'getAgentTestSuite', tags, security: Security, summary: 'callplane extension: a test suite, its document and versions',
      params: SuiteParams, querystring: VersionQuery, response: { 200: Envelope({ suite: Suite }), ...errors(400, 403, 404) } },
  }, async (req) => agentTests.getSuite(req.scope, req.params.agentId, req.params.suiteId, req.query.version));

  app.put(`${base}/suites/:suiteId`, {
    schema: { operationId: 'replaceAgentTestSuite', tags, security: Security, summary: 'callplane extension: replace a test suite\'s document (its next version; the same document again changes nothing)',
      params: SuiteParams, body: SuiteDocument, response: { 200: Envelope({ suite: Suite }), ...errors(400, 403, 404) } },
  }, async (req) => agentTests.replaceSuite(req.scope, req.params.agentId, req.params.suiteId, req.body));

  app.delete(`${base}/suites/:suiteId`, {
    schema: { operationId: 'deleteAgentTestSuite', tags, security: Security, summary: 'callplane extension: delete a test suite with its versions and runs',
      description: '409 while one of its runs is queued or running.',
      params: SuiteParams, response: { 200: Envelope({}), ...errors(400, 403, 404, 409) } },
  }, async (req) => agentTests.deleteSuite(req.scope, req.params.agentId, req.params.suiteId));

  app.post(`${base}/suites/import`, {
    schema: { operationId: 'importAgentTestSuite', tags, security: Security, summary: 'callplane extension: import a suite from YAML or JSON text',
      description: 'A new suite, or the next version of the agent\'s suite with the document\'s name. The text is parsed off the event loop with limits; a refusal names the field\'s path.',
      params: AgentParams,
      body: Type.Object({ format: Type.Optional(Format), document: Type.String({ maxLength: LIMITS.documentBytes, description: 'The suite document as YAML or JSON text' }) }),
      response: { 200: Envelope({ created: Type.Boolean(), suite: Suite }), ...errors(400, 403, 404, 413, 503) } },
  }, async (req) => agentTests.importSuite(req.scope, req.params.agentId, { format: req.body.format as 'yaml' | 'json' | undefined, document: req.body.document }));

  app.get(`${base}/suites/:suiteId/export`, {
    schema: { operationId: 'exportAgentTestSuite', tags, security: Security, summary: 'callplane extension: a suite\'s document as YAML or JSON text',
      params: SuiteParams, querystring: Type.Object({ format: Type.Optional(Format), version: Type.Optional(Type.Integer({ minimum: 1 })) }),
      response: { 200: Envelope({ format: Format, version: Type.Integer(), document: Type.String() }), ...errors(400, 403, 404) } },
  }, async (req) => agentTests.exportSuite(req.scope, req.params.agentId, req.params.suiteId, req.query.format === 'json' ? 'json' : 'yaml', req.query.version));

  app.post(`${base}/scenarioFromConversation`, {
    schema: { operationId: 'agentTestScenarioFromConversation', tags, security: Security,
      summary: 'callplane extension: a draft scenario from one of the agent\'s conversations (its person\'s lines as the persona and opening)',
      description: 'Nothing is stored: add checks to the answered scenario and put it in a suite (PUT …/suites/{suiteId}). 404 for a conversation not of this agent, 400 when the person said nothing in it.',
      params: AgentParams, body: Type.Object({ conversationId: Type.String({ maxLength: 64, description: 'The conversation uuid' }) }),
      response: { 200: Envelope({ scenario: Scenario, conversationId: Type.String() }), ...errors(400, 403, 404) } },
  }, async (req) => agentTests.scenarioFromConversation(req.scope, req.params.agentId, req.body.conversationId));

  app.post(`${base}/runs`, {
    schema: { operationId: 'startAgentTestRun', tags, security: Security, summary: 'callplane extension: run a test suite (a durable job)',
      description: 'Against the staging configuration (default), the live one, or a stored version (its versionId). Answers 202 with the run; '
        + 'GET the run for its progress and results. 429 when the organization has CALLPLANE_AGENT_TEST_RUNS_PER_ORG runs queued or running.',
      params: AgentParams,
      body: Type.Object({
        suiteId: SuiteId,
        version: Type.Optional(Type.Union([Type.String({ maxLength: 20 }), Type.Integer({ minimum: 1 })], { description: 'staging (default), live, or a stored version\'s versionId' })),
        iterations: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.iterations, description: 'Runs of each scenario (default the suite\'s settings, else 1)' })),
        concurrency: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.concurrency, description: 'Conversations at once (default the suite\'s settings, else 4)' })),
        mode: Type.Optional(Type.String({ enum: ['text', 'voice'], description: 'text (default): the caller and the agent exchange text through the turn runner; voice: the caller speaks into a real call into the agent over a loopback SIP leg and hears it through the configured recogniser (docs/testing-agents.md, "Voice mode")' })),
      }),
      response: { 202: Envelope({ run: Run }), ...errors(400, 403, 404, 429) } },
  }, async (req, reply) => reply.status(202).send(await agentTests.startRun(req.scope, req.params.agentId, req.body)));

  app.get(`${base}/runs`, {
    schema: { operationId: 'listAgentTestRuns', tags, security: Security, summary: 'callplane extension: an agent\'s test runs, newest first (100 at most)',
      params: AgentParams, querystring: Type.Object({ suiteId: Type.Optional(SuiteId) }),
      response: { 200: Envelope({ runs: Type.Array(Run) }), ...errors(400, 403, 404) } },
  }, async (req) => agentTests.listRuns(req.scope, req.params.agentId, req.query.suiteId));

  app.get(`${base}/runs/:runId`, {
    schema: { operationId: 'getAgentTestRun', tags, security: Security, summary: 'callplane extension: a test run\'s state, progress and results',
      params: RunParams, response: { 200: Envelope({ run: Run, results: Results }), ...errors(400, 403, 404) } },
  }, async (req) => agentTests.getRun(req.scope, req.params.agentId, req.params.runId));

  app.get(`${base}/runs/:runId/comparison`, {
    schema: { operationId: 'compareAgentTestRun', tags, security: Security, summary: 'callplane extension: a run against the previous run of its suite on the published configuration',
      params: RunParams,
      response: { 200: Envelope({
        run: Run, baseline: Nullable(Run, 'The previous finished run of the suite on the live configuration; null when there is none'),
        regressed: Type.Array(Change), improved: Type.Array(Change), unchanged: Type.Array(Change),
        added: Type.Array(Type.String()), removed: Type.Array(Type.String()),
      }), ...errors(400, 403, 404) } },
  }, async (req) => agentTests.compare(req.scope, req.params.agentId, req.params.runId));
}
