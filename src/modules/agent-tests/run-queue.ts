// Agent test runs as durable jobs (docs/testing-agents.md, "Runs"): a queue over agent_test_runs,
// its producer made first (the service starts runs through it), the queue on it, both by
// src/platform.ts; in a worker, the handler below runs a run's scenario iterations, a few at once.
//
// Each iteration's verdict is one agent_test_results row, written once it is decided, and the
// run's progress (done of total) with it. A worker that dies mid-run loses its lease; the rescuer
// hands the run back, and the next attempt runs only the iterations without a verdict (a
// conversation the dead attempt left open is closed as idle like any test session). After the last
// attempt the run is `failed` with the reason in last_error, which its status shows.
import { setMaxListeners } from 'node:events';
import type { Config } from '../../config.ts';
import type { Db } from '../../db/types.ts';
import { ModelError } from '../../llm/types.ts';
import { DurableQueue, endedStamp, type DurableQueueDeps } from '../../queue/durable-queue.ts';
import { QueueEngine } from '../../queue/engine.ts';
import { QueueProducer } from '../../queue/producer.ts';
import type { HandlerContext, Outcome } from '../../queue/runner.ts';
import type { Wakeups } from '../../queue/waker.ts';
import { accountRepo } from '../accounts/repository.ts';
import { resolveAgentSettings, type AgentSettings } from '../agents/settings.ts';
import type { AgentConfig } from '../agents/validation.ts';
import { usageRepo } from '../billing/repository.ts';
import type { ModelsService } from '../models/service.ts';
import { decideCheck, describeCheck, passes, type Verdict } from './checks.ts';
import type { SuiteDocument } from './document.ts';
import { judge } from './judge.ts';
import { AGENT_TEST_RUNS, resultRepo, runRepo, suiteRepo, type RunRow } from './repository.ts';
import type { ScenarioRunner, textRunner } from './text-runner.ts';

export type AgentTestProducer = QueueProducer<typeof AGENT_TEST_RUNS>;
export type AgentTestQueue = DurableQueue<typeof AGENT_TEST_RUNS>;

export function agentTestProducer(wakeups: Wakeups): AgentTestProducer {
  return new QueueProducer(AGENT_TEST_RUNS, wakeups);
}

/** Runs one worker runs at once (each runs its own scenarios `concurrency` at a time). */
export const RUN_CONCURRENCY = 2;

export interface RunHandlerDeps {
  db: Db;
  models: Pick<ModelsService, 'resolve'>;
  /** The text mode's runner (its `analyse` makes the analysis outcome checks read). */
  text: ReturnType<typeof textRunner>;
  /** Voice mode's runner (a call over a loopback SIP leg); without it a voice run fails saying so. */
  voice?: ScenarioRunner;
  now(): number;
  log?: { warn(obj: object, msg: string): void };
}

export interface AgentTestQueueDeps extends DurableQueueDeps {
  config: Pick<Config, 'taskLeaseMs'>;
  producer: AgentTestProducer;
  handler: Omit<RunHandlerDeps, 'now'>;
  backoff?: (attempt: number) => number;
}

/** What a run's status says when the rescuer gives up on it (its workers kept dying). */
export const LOST_RUN = 'the worker running this run stopped before it finished (its lease expired) and its attempts are spent';

export function agentTestQueue(deps: AgentTestQueueDeps): AgentTestQueue {
  return new DurableQueue(deps, {
    producer: deps.producer, name: 'agent-tests', leaseMs: deps.config.taskLeaseMs, concurrency: RUN_CONCURRENCY, backoff: deps.backoff,
    // A run the rescuer fails (its last worker died) says why, as every other failed run does.
    engine: (base) => new QueueEngine<typeof AGENT_TEST_RUNS>({
      table: AGENT_TEST_RUNS, ...base, backoff: deps.backoff,
      stamp: (t) => ({ ...endedStamp(t), ...(t.cause === 'rescue' && t.to === 'failed' ? { last_error: LOST_RUN } : {}) }),
    }),
    worker: (now) => ({ handler: createRunHandler({ ...deps.handler, now }) }),
  });
}

/** Runs `jobs` with at most `limit` at once; the first failure stops new ones and is thrown once the running ones end. */
async function pool<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed: Error | undefined;
  const lane = async () => {
    while (failed === undefined && next < items.length) {
      const item = items[next++]!;
      try {
        await fn(item);
      } catch (err) {
        failed ??= err instanceof Error ? err : new Error(String(err));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  if (failed !== undefined) throw failed;
}

export function createRunHandler(deps: RunHandlerDeps) {
  const { db } = deps;

  return async (row: RunRow, ctx: HandlerContext): Promise<Outcome<RunRow>> => {
    const [account, documentText] = await Promise.all([
      accountRepo.findById(db, row.account_id),
      suiteRepo.version(db, row.suite_id, row.suite_version),
    ]);
    if (!account || documentText === undefined) return { kind: 'complete', state: 'canceled', set: { last_error: 'the agent or the suite was deleted' } };
    const doc = JSON.parse(documentText) as SuiteDocument;
    const config: AgentSettings = resolveAgentSettings(JSON.parse(row.config) as AgentConfig);
    if (row.mode === 'voice' && !deps.voice) return { kind: 'complete', state: 'failed', set: { last_error: 'voice mode is not available on this worker (it runs no voice engines)' } };
    const runner: ScenarioRunner = row.mode === 'voice' ? deps.voice! : deps.text;
    const decided = new Set((await resultRepo.ofRun(db, row.id)).map((r) => `${r.scenario}.${r.iteration}`));
    const jobs: Array<{ index: number; iteration: number }> = [];
    doc.scenarios.forEach((_, index) => {
      for (let iteration = 0; iteration < row.iterations; iteration++) if (!decided.has(`${index}.${iteration}`)) jobs.push({ index, iteration });
    });
    const judgeChoice = doc.scenarios.some((s) => s.checks.some((c) => 'judge' in c))
      ? await deps.models.resolve(row.org_id, doc.settings?.judgeModel ?? config.agentModel) : undefined;

    await pool(jobs, row.concurrency, async ({ index, iteration }) => {
      const scenario = doc.scenarios[index]!;
      let verdicts: Verdict[];
      let conversationId: string | null = null;
      let turns = 0;
      let error: string | null = null;
      let voice: string | null = null;
      // The iteration's own signal, aborted with the run's: every model request of its conversation listens on it.
      const job = new AbortController();
      setMaxListeners(100, job.signal);
      const abort = () => job.abort(ctx.signal.reason);
      ctx.signal.addEventListener('abort', abort, { once: true });
      const signal = job.signal;
      try {
        const out = await runner.run({ runId: row.id, account, config, scenario, index, iteration, settings: doc.settings ?? {}, signal });
        conversationId = out.conversation.id;
        turns = out.observation.turns;
        const o = out.observation;
        if (o.voice) voice = JSON.stringify(o.voice);
        if (scenario.checks.some((c) => 'outcome' in c || 'analysis' in c)) o.analysis = await deps.text.analyse(out.conversation, config, signal);
        verdicts = [];
        for (const c of scenario.checks) {
          if (!('judge' in c)) {
            verdicts.push(decideCheck(c, o));
            continue;
          }
          const j = await judge(judgeChoice!, { criterion: c.judge, lines: o.lines, toolCalls: o.toolCalls.map((t) => ({ name: t.name, args: t.args, result: t.result })) }, describeCheck(c).what, signal);
          if (j.tokens > 0) await db.transaction().execute((tx) => usageRepo.add(tx, row.org_id, deps.now(), { testTokens: j.tokens }));
          verdicts.push(j.verdict);
        }
        if (out.simulatedCaller) {
          verdicts.push({ check: 'judge', what: 'simulated caller', passed: null, decides: false, simulated: true, reason: 'SIMULATED: no language model is configured for the caller, so the SIMULATED engine played it (it echoes the agent)' });
        }
      } catch (err) {
        // A model that fails is this iteration's failure, with its reason; anything else (the
        // lease lost, the database away) ends the attempt, and the next one resumes here.
        if (ctx.signal.aborted || !(err instanceof ModelError)) throw err;
        error = err.message.slice(0, 1000);
        verdicts = [{ check: 'judge', what: 'the conversation ran', passed: false, decides: true, reason: `a model failed: ${error}` }];
      } finally {
        ctx.signal.removeEventListener('abort', abort);
      }
      await resultRepo.insert(db, {
        run_id: row.id, scenario: index, iteration, scenario_name: scenario.name, conversation_id: conversationId,
        passed: passes(verdicts) ? 1 : 0, checks: JSON.stringify(verdicts), turns, error, voice, created_at: deps.now(),
      });
      await runRepo.progress(db, row.id, await resultRepo.count(db, row.id), deps.now());
    });
    const results = await resultRepo.ofRun(db, row.id);
    const passed = results.length === row.total && results.every((r) => r.passed === 1);
    return { kind: 'complete', state: 'finished', set: { passed: passed ? 1 : 0, done: results.length, last_error: null } };
  };
}
