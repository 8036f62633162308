// Agent tests (docs/testing-agents.md): an agent's suites (versioned documents of scenarios),
// their import and export as YAML or JSON, runs (durable jobs: run-queue.ts) against the agent's
// staging or live configuration or a stored version, their results, the comparison of a run with
// the previous run on the published (live) configuration, and the publish gate (publishGate).
import type { AccountRow, Db, Executor } from '../../db/types.ts';
import type { Scope } from '../../http/auth.ts';
import { Conflict, Invalid, NotFound, TooManyRequests } from '../../http/errors.ts';
import { newId } from '../../lib/ids.ts';
import type { AgentService, PublishGate } from '../agents/service.ts';
import { agentIdOf } from '../agents/service.ts';
import { configHash } from '../agents/settings.ts';
import type { Observation, Verdict } from './checks.ts';
import { messageRepo, conversationRepo } from '../conversations/repository.ts';
import type { ModelsService } from '../models/service.ts';
import { checkSuite, formatSuite, LIMITS, parseSuite, type DocumentFormat, type Scenario, type SuiteDocument } from './document.ts';
import { resultRepo, runRepo, suiteRepo, type ResultRow, type RunRow, type SuiteRow } from './repository.ts';
import type { AgentTestProducer } from './run-queue.ts';

/** Scenario conversations one run may hold (scenarios × iterations). */
export const MAX_RUN_CONVERSATIONS = 500;
export const DEFAULT_CONCURRENCY = 4;
/** Runs a list answers, at most. */
const MAX_LISTED_RUNS = 100;

export interface AgentTestServiceDeps {
  db: Db;
  agents: Pick<AgentService, 'agent' | 'testTarget'>;
  /** The organization's model catalog: a suite's callerModel and judgeModel must be in it. */
  models: Pick<ModelsService, 'modelIds'>;
  runs: AgentTestProducer;
  /** Runs one organization may have queued or running (CALLPLANE_AGENT_TEST_RUNS_PER_ORG). */
  runsPerOrg: number;
  now?: () => number;
}

export interface StartRunBody {
  suiteId: string;
  /** staging (default), live, or a stored version's versionId. */
  version?: string | number;
  iterations?: number;
  concurrency?: number;
  mode?: string;
}

const SUITE_ID = /^ats_[0-9A-Z]{26}$/;
const RUN_ID = /^atr_[0-9A-Z]{26}$/;
const seconds = (ms: number | null) => (ms === null ? null : Math.floor(ms / 1000));

function presentSuite(r: SuiteRow) {
  const doc = JSON.parse(r.document) as SuiteDocument;
  return { id: r.id, agentId: agentIdOf(r.account_id), name: r.name, version: r.version, scenarios: doc.scenarios.length, createdAt: seconds(r.created_at)!, updatedAt: seconds(r.updated_at)! };
}

function presentRun(r: RunRow) {
  return {
    id: r.id, agentId: agentIdOf(r.account_id), suiteId: r.suite_id, suiteVersion: r.suite_version,
    target: r.target, agentVersion: r.agent_version, configHash: r.config_hash, mode: r.mode,
    iterations: r.iterations, concurrency: r.concurrency, state: r.state,
    progress: { done: r.done, total: r.total },
    passed: r.passed === null ? null : r.passed === 1,
    attempt: r.attempt, lastError: r.last_error,
    createdAt: seconds(r.created_at)!, finishedAt: seconds(r.finished_at),
  };
}

/** Pass rates per scenario and per check, with each iteration's conversation and reasons. */
export function summarise(results: readonly ResultRow[]) {
  const byScenario = new Map<number, ResultRow[]>();
  for (const r of results) byScenario.set(r.scenario, [...(byScenario.get(r.scenario) ?? []), r]);
  const scenarios = [...byScenario.entries()].sort(([a], [b]) => a - b).map(([index, rows]) => {
    const iterations = rows.map((r) => ({
      iteration: r.iteration, passed: r.passed === 1, conversationId: r.conversation_id, turns: r.turns, error: r.error,
      checks: JSON.parse(r.checks) as Verdict[],
      ...(r.voice ? { voice: JSON.parse(r.voice) as NonNullable<Observation['voice']> } : {}),
    }));
    const checks = new Map<string, { check: string; what: string; passed: number; decided: number; simulated: boolean }>();
    for (const it of iterations) {
      for (const v of it.checks) {
        const c = checks.get(v.what) ?? { check: v.check, what: v.what, passed: 0, decided: 0, simulated: false };
        if (v.decides) c.decided++;
        if (v.decides && v.passed) c.passed++;
        if (v.simulated) c.simulated = true;
        checks.set(v.what, c);
      }
    }
    const passed = rows.filter((r) => r.passed === 1).length;
    return {
      index, name: rows[0]!.scenario_name, passRate: passed / rows.length, passed: passed === rows.length,
      checks: [...checks.values()].map((c) => ({ check: c.check, what: c.what, passRate: c.decided === 0 ? null : c.passed / c.decided, simulated: c.simulated })),
      iterations,
    };
  });
  const passed = results.filter((r) => r.passed === 1).length;
  return { passRate: results.length === 0 ? null : passed / results.length, scenarios };
}

/** The publish gate (agents' PublishGate port): every suite's latest finished run on this staging configuration passed. */
export function testPublishGate(): PublishGate {
  return async (tx: Executor, account: AccountRow, staging) => {
    const hash = configHash(staging);
    const suites = await suiteRepo.list(tx, account.id);
    if (suites.length === 0) return 'testGate is on, but the agent has no test suite: add one, run it on the staging configuration, then publish (docs/testing-agents.md)';
    const problems: string[] = [];
    for (const suite of suites) {
      const run = await runRepo.latestFinished(tx, suite.id, 'staging', { configHash: hash, suiteVersion: suite.version });
      if (!run) {
        problems.push(`suite '${suite.name}' has no finished run of its version ${suite.version} on this staging configuration (staging or the suite changed since its last run, or it never ran)`);
      } else if (run.passed !== 1) {
        const failed = [...new Set((await resultRepo.ofRun(tx, run.id)).filter((r) => r.passed !== 1).map((r) => r.scenario_name))];
        problems.push(`suite '${suite.name}' run ${run.id} failed scenarios: ${failed.map((n) => `'${n}'`).join(', ')}`);
      }
    }
    return problems.length ? `publish refused by testGate: ${problems.join('; ')}` : undefined;
  };
}

export function agentTestService(deps: AgentTestServiceDeps) {
  const { db, agents } = deps;
  const clock = deps.now ?? Date.now;

  async function suiteOf(account: AccountRow, suiteId: string): Promise<SuiteRow> {
    const s = SUITE_ID.test(suiteId) ? await suiteRepo.find(db, account.id, suiteId) : undefined;
    if (!s) throw new NotFound(`suiteId ${suiteId} was not found`);
    return s;
  }

  async function runOf(account: AccountRow, runId: string): Promise<RunRow> {
    const r = RUN_ID.test(runId) ? await runRepo.find(db, runId) : undefined;
    if (!r || r.account_id !== account.id) throw new NotFound(`runId ${runId} was not found`);
    return r;
  }

  /** Creates the suite, or (`replace`) writes the next version of the one with its name. */
  async function store(account: AccountRow, doc: SuiteDocument, existingId?: string): Promise<SuiteRow> {
    // The models it names must be the organization's to use (as an agent's agentModel).
    const named = (['callerModel', 'judgeModel'] as const).filter((k) => doc.settings?.[k] !== undefined);
    if (named.length > 0) {
      const catalog = await deps.models.modelIds(account.org_id!);
      for (const k of named) {
        if (!catalog.has(doc.settings![k]!)) throw new Invalid(`settings.${k} ${JSON.stringify(doc.settings![k])} is not a model this organization can use (GET /api/v2/models/supported lists them)`);
      }
    }
    const now = clock();
    const document = JSON.stringify(doc);
    return db.transaction().execute(async (tx) => {
      const current = existingId ? await suiteRepo.lock(tx, account.id, existingId) : undefined;
      if (existingId && !current) throw new NotFound(`suiteId ${existingId} was not found`);
      const clash = await suiteRepo.byName(tx, account.id, doc.name);
      if (clash && clash.id !== current?.id) throw new Invalid(`name '${doc.name}' is the name of another suite of this agent (${clash.id})`);
      if (!current) {
        const row: SuiteRow = { id: newId('ats', now), org_id: account.org_id!, account_id: account.id, name: doc.name, version: 1, document, created_at: now, updated_at: now };
        await suiteRepo.insert(tx, row);
        return row;
      }
      // The same document again is no new version.
      if (current.document === document) return current;
      await suiteRepo.update(tx, current.id, { name: doc.name, version: current.version + 1, document }, now);
      return { ...current, name: doc.name, version: current.version + 1, document, updated_at: now };
    });
  }

  const withDocument = (r: SuiteRow, versions: Array<{ version: number; created_at: number }>, document?: string) => ({
    ...presentSuite(r), document: JSON.parse(document ?? r.document) as SuiteDocument,
    versions: versions.map((v) => ({ version: v.version, createdAt: seconds(v.created_at)! })),
  });

  return {
    async listSuites(scope: Scope, agentId: string) {
      const account = await agents.agent(scope, agentId);
      return { success: true as const, suites: (await suiteRepo.list(db, account.id)).map(presentSuite) };
    },

    async createSuite(scope: Scope, agentId: string, body: unknown) {
      const doc = checkSuite(body);
      const account = await agents.agent(scope, agentId);
      const row = await store(account, doc);
      return { success: true as const, suite: withDocument(row, await suiteRepo.versions(db, row.id)) };
    },

    async getSuite(scope: Scope, agentId: string, suiteId: string, version?: number) {
      const account = await agents.agent(scope, agentId);
      const row = await suiteOf(account, suiteId);
      const document = version === undefined ? row.document : await suiteRepo.version(db, row.id, version);
      if (document === undefined) throw new NotFound(`version ${version} of suite ${suiteId} was not found`);
      return { success: true as const, suite: { ...withDocument(row, await suiteRepo.versions(db, row.id), document), ...(version !== undefined ? { shownVersion: version } : {}) } };
    },

    async replaceSuite(scope: Scope, agentId: string, suiteId: string, body: unknown) {
      const doc = checkSuite(body);
      const account = await agents.agent(scope, agentId);
      await suiteOf(account, suiteId);
      const row = await store(account, doc, suiteId);
      return { success: true as const, suite: withDocument(row, await suiteRepo.versions(db, row.id)) };
    },

    async deleteSuite(scope: Scope, agentId: string, suiteId: string) {
      const account = await agents.agent(scope, agentId);
      await suiteOf(account, suiteId);
      // With the suite's row locked: a run started meanwhile waits for this, and finds it gone.
      await db.transaction().execute(async (tx) => {
        if (!await suiteRepo.lock(tx, account.id, suiteId)) throw new NotFound(`suiteId ${suiteId} was not found`);
        if (await runRepo.openOfSuite(tx, suiteId) > 0) throw new Conflict(`suiteId ${suiteId} has a run queued or running: delete it once the run ends`);
        await suiteRepo.remove(tx, account.id, suiteId);
      });
      return { success: true as const, message: `Suite ${suiteId} deleted` };
    },

    /** A suite from YAML or JSON text: a new suite, or the next version of the agent's suite of the same name. */
    async importSuite(scope: Scope, agentId: string, body: { format?: DocumentFormat; document: string }) {
      const account = await agents.agent(scope, agentId);
      const doc = await parseSuite(body.document, body.format ?? 'yaml');
      const existing = await suiteRepo.byName(db, account.id, doc.name);
      const row = await store(account, doc, existing?.id);
      return { success: true as const, created: existing === undefined, suite: withDocument(row, await suiteRepo.versions(db, row.id)) };
    },

    async exportSuite(scope: Scope, agentId: string, suiteId: string, format: DocumentFormat, version?: number) {
      const account = await agents.agent(scope, agentId);
      const row = await suiteOf(account, suiteId);
      const document = version === undefined ? row.document : await suiteRepo.version(db, row.id, version);
      if (document === undefined) throw new NotFound(`version ${version} of suite ${suiteId} was not found`);
      return { success: true as const, format, version: version ?? row.version, document: formatSuite(JSON.parse(document) as SuiteDocument, format) };
    },

    async startRun(scope: Scope, agentId: string, body: StartRunBody) {
      const account = await agents.agent(scope, agentId);
      const suite = await suiteOf(account, body.suiteId);
      if (body.mode !== undefined && body.mode !== 'text' && body.mode !== 'voice') throw new Invalid(`mode '${body.mode}' must be text or voice`);
      const mode: 'text' | 'voice' = body.mode === 'voice' ? 'voice' : 'text';
      const v = body.version ?? 'staging';
      let target: 'staging' | 'live' | number;
      if (v === 'staging' || v === 'live') target = v;
      else if (typeof v === 'number' || /^[1-9]\d{0,15}$/.test(v)) target = Number(v);
      else throw new Invalid('version must be staging, live or a stored version\'s versionId');
      const doc = JSON.parse(suite.document) as SuiteDocument;
      const iterations = body.iterations ?? doc.settings?.iterations ?? 1;
      const concurrency = body.concurrency ?? doc.settings?.concurrency ?? DEFAULT_CONCURRENCY;
      const total = doc.scenarios.length * iterations;
      if (total === 0) throw new Invalid(`suiteId ${suite.id} has no scenarios to run`);
      if (total > MAX_RUN_CONVERSATIONS) throw new Invalid(`iterations: ${doc.scenarios.length} scenarios × ${iterations} iterations is more than ${MAX_RUN_CONVERSATIONS} conversations in one run`);
      const config = await agents.testTarget(account, target);
      if (await runRepo.openCount(db, account.org_id!) >= deps.runsPerOrg) {
        throw new TooManyRequests(`the organization has ${deps.runsPerOrg} agent test runs queued or running, the most it may; start this one when one of them ends`, 10_000);
      }
      const now = clock();
      const row = {
        id: newId('atr', now), org_id: account.org_id!, account_id: account.id, suite_id: suite.id, suite_version: suite.version,
        target: typeof target === 'number' ? 'version' as const : target, agent_version: typeof target === 'number' ? target : null,
        config: JSON.stringify(config), config_hash: configHash(config), mode, iterations, concurrency, total,
        run_at: now, created_at: now, updated_at: now,
      };
      await deps.runs.enqueue(db, async (tx) => {
        // The suite's row locked: a deletion racing this start goes first (then 404) or after (then 409).
        if (!await suiteRepo.lock(tx, account.id, suite.id)) throw new NotFound(`suiteId ${suite.id} was not found`);
        await runRepo.insert(tx, row);
        return true;
      });
      return { success: true as const, run: presentRun((await runRepo.find(db, row.id))!) };
    },

    /**
     * A draft scenario from one of the agent's conversations (docs/testing-agents.md, "From a
     * conversation"): the person's lines become the persona and the opening; the reviewer adds the
     * checks and puts it in a suite. Nothing is stored.
     */
    async scenarioFromConversation(scope: Scope, agentId: string, conversationId: string) {
      const account = await agents.agent(scope, agentId);
      const c = /^[0-9a-f-]{36}$/i.test(conversationId) ? await conversationRepo.find(db, conversationId) : undefined;
      if (!c || c.account_id !== account.id) throw new NotFound(`conversationId ${conversationId} was not found among agent ${agentIdOf(account.id)}'s conversations`);
      const said = (await messageRepo.ofConversation(db, c.id)).filter((m) => m.direction === 'inbound' && m.text.trim() !== '').map((m) => m.text.trim());
      if (said.length === 0) throw new Invalid(`conversationId ${conversationId}: the person said nothing in it, so there is no caller to play`);
      const head = `You are the person in a real conversation (${c.channel}, ${new Date(c.started_at).toISOString().slice(0, 10)}). `
        + 'Say what they said, in this order, one line at a time, and adapt when the agent answers differently than it did then:\n';
      let lines = '';
      for (const line of said) {
        const next = `- ${line.replace(/\s+/g, ' ').slice(0, 500)}\n`;
        if (head.length + lines.length + next.length > LIMITS.personaChars) break;
        lines += next;
      }
      const scenario: Scenario = {
        name: `From conversation ${c.id.slice(0, 8)}`.slice(0, LIMITS.nameChars),
        persona: { instructions: (head + lines).trim(), opening: said[0]!.slice(0, LIMITS.openingChars) },
        maxTurns: Math.min(LIMITS.maxTurns, said.length + 2),
        checks: [],
      };
      return { success: true as const, scenario, conversationId: c.id };
    },

    async listRuns(scope: Scope, agentId: string, suiteId?: string) {
      const account = await agents.agent(scope, agentId);
      if (suiteId !== undefined) await suiteOf(account, suiteId);
      return { success: true as const, runs: (await runRepo.list(db, account.id, suiteId, MAX_LISTED_RUNS)).map(presentRun) };
    },

    async getRun(scope: Scope, agentId: string, runId: string) {
      const account = await agents.agent(scope, agentId);
      const run = await runOf(account, runId);
      return { success: true as const, run: presentRun(run), results: summarise(await resultRepo.ofRun(db, run.id)) };
    },

    /**
     * The run against the previous finished run of its suite on the published (live) configuration:
     * which scenarios regressed (passed less often), improved, or are new or gone.
     */
    async compare(scope: Scope, agentId: string, runId: string) {
      const account = await agents.agent(scope, agentId);
      const run = await runOf(account, runId);
      const baseline = await runRepo.latestFinished(db, run.suite_id, 'live', { before: { at: run.created_at, id: run.id } });
      const mine = summarise(await resultRepo.ofRun(db, run.id));
      if (!baseline) return { success: true as const, run: presentRun(run), baseline: null, regressed: [], improved: [], unchanged: [], added: mine.scenarios.map((s) => s.name), removed: [] };
      const theirs = summarise(await resultRepo.ofRun(db, baseline.id));
      const before = new Map(theirs.scenarios.map((s) => [s.name, s.passRate]));
      const now = new Map(mine.scenarios.map((s) => [s.name, s.passRate]));
      const row = (name: string) => ({ name, before: before.get(name)!, after: now.get(name)! });
      const both = [...now.keys()].filter((n) => before.has(n));
      return {
        success: true as const, run: presentRun(run), baseline: presentRun(baseline),
        regressed: both.filter((n) => now.get(n)! < before.get(n)!).map(row),
        improved: both.filter((n) => now.get(n)! > before.get(n)!).map(row),
        unchanged: both.filter((n) => now.get(n) === before.get(n)).map(row),
        added: [...now.keys()].filter((n) => !before.has(n)),
        removed: [...before.keys()].filter((n) => !now.has(n)),
      };
    },
  };
}

export type AgentTestService = ReturnType<typeof agentTestService>;
