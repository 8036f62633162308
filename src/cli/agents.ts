// `callplane agents publish AGENT_ID`: an agent's staging configuration goes live, through the API.
// `callplane agents test AGENT_ID`: runs the agent's test suites (or one from a file) and exits 0
// when every scenario passed, 1 otherwise, so a customer's CI can gate on it (docs/testing-agents.md).
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { ok, type CallplaneClient } from '../../sdk/client.js';
import { accountId, API_OPTIONS, apiClient } from './api-client.ts';
import { HELP, UsageError } from './usage.ts';

export async function agentsCommand(argv: string[], out: NodeJS.WritableStream = process.stdout, err: NodeJS.WritableStream = process.stderr): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv, allowPositionals: true,
    options: {
      ...API_OPTIONS, help: { type: 'boolean', short: 'h' },
      suite: { type: 'string' }, 'suite-id': { type: 'string' }, version: { type: 'string' }, mode: { type: 'string' },
      iterations: { type: 'string' }, junit: { type: 'string' }, timeout: { type: 'string' },
    },
  });
  if (values.help) return void out.write(HELP.agents + '\n'), 0;
  const [action, ...rest] = positionals;
  if (action !== 'publish' && action !== 'test') throw new UsageError(action ? `unknown agents action '${action}'` : 'agents needs an action: publish or test', HELP.agents);
  if (rest.length !== 1) throw new UsageError(`agents ${action} takes one agent id`, HELP.agents);
  const agent = accountId(rest[0], 'AGENT_ID')!;
  if (action === 'test') return agentsTest(agent, values, out, err);
  const answer = await ok(apiClient(values).POST('/api/v2/agent/publish', { params: { query: { targetAccountId: agent } } }));
  out.write(`agent ${agent} published: ${answer.message ?? 'staging is live'}\n`);
  out.write(`the live configuration it replaced is version ${answer.previousVersionId} (restore it to undo)\n`);
  return 0;
}

interface TestOptions {
  url?: string; token?: string; 'token-file'?: string;
  suite?: string; 'suite-id'?: string; version?: string; mode?: string; iterations?: string; junit?: string; timeout?: string;
}

type Run = Awaited<ReturnType<typeof getRun>>;
const getRun = async (client: CallplaneClient, agentId: string, runId: string) =>
  ok(client.GET('/api/v2/agent/{agentId}/tests/runs/{runId}', { params: { path: { agentId, runId } } }));

const xml = (s: string) => s.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!)
  // Characters XML 1.0 cannot carry.
  // eslint-disable-next-line no-control-regex
  .replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F]/g, '');

/** The runs as JUnit XML: a testsuite per suite, a testcase per scenario, its failed checks' reasons as the failure. */
export function junitXml(runs: Array<{ suite: string; answer: Run }>): string {
  const suites = runs.map(({ suite, answer }) => {
    const cases = answer.results.scenarios.map((s) => {
      const failures = s.iterations.filter((i) => !i.passed).map((i) => {
        const reasons = i.checks.filter((c) => c.decides && c.passed !== true).map((c) => `${c.what}: ${c.reason}`);
        return `iteration ${i.iteration + 1} (conversation ${i.conversationId ?? 'none'}):\n  ${reasons.join('\n  ') || i.error || 'failed'}`;
      });
      const body = failures.length ? `<failure message="${xml(`${failures.length} of ${s.iterations.length} iterations failed`)}">${xml(failures.join('\n'))}</failure>` : '';
      return `    <testcase classname="${xml(suite)}" name="${xml(s.name)}">${body}</testcase>`;
    });
    const failed = answer.results.scenarios.filter((s) => !s.passed).length;
    const error = answer.run.state !== 'finished' ? `\n    <system-err>${xml(`run ${answer.run.id} ${answer.run.state}: ${answer.run.lastError ?? ''}`)}</system-err>` : '';
    return `  <testsuite name="${xml(suite)}" tests="${answer.results.scenarios.length}" failures="${failed}" errors="${answer.run.state === 'finished' ? 0 : 1}">\n${cases.join('\n')}${error}\n  </testsuite>`;
  });
  return `<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n${suites.join('\n')}\n</testsuites>\n`;
}

async function agentsTest(agent: number, values: TestOptions, out: NodeJS.WritableStream, err: NodeJS.WritableStream): Promise<number> {
  if (values.mode !== undefined && values.mode !== 'text' && values.mode !== 'voice') throw new UsageError(`--mode ${values.mode}: text or voice`, HELP.agents);
  const mode = values.mode === 'voice' ? 'voice' as const : 'text' as const;
  if (values.suite !== undefined && values['suite-id'] !== undefined) throw new UsageError('pass --suite FILE or --suite-id ID, not both', HELP.agents);
  let iterations: number | undefined;
  if (values.iterations !== undefined) {
    if (!/^\d{1,2}$/.test(values.iterations) || Number(values.iterations) < 1 || Number(values.iterations) > 20) throw new UsageError('--iterations must be 1–20', HELP.agents);
    iterations = Number(values.iterations);
  }
  const version = values.version;
  if (version !== undefined && !/^(staging|live|[1-9]\d{0,15})$/.test(version)) throw new UsageError('--version must be staging, live or a stored version\'s id', HELP.agents);
  const timeoutMs = (values.timeout === undefined ? 1800 : Number(values.timeout)) * 1000;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new UsageError('--timeout must be a number of seconds', HELP.agents);
  let fileText: string | undefined;
  if (values.suite !== undefined) {
    try {
      fileText = fs.readFileSync(values.suite, 'utf8');
    } catch (e) {
      throw new UsageError(`--suite: cannot read ${values.suite}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  }
  const client = apiClient(values);
  const agentId = String(agent);
  let suites: Array<{ id: string; name: string }>;
  if (fileText !== undefined) {
    const format = /\.json$/i.test(values.suite!) ? 'json' : 'yaml';
    const imported = await ok(client.POST('/api/v2/agent/{agentId}/tests/suites/import', { params: { path: { agentId } }, body: { format, document: fileText } }));
    err.write(`suite '${imported.suite.name}' ${imported.created ? 'created' : 'is'} at version ${imported.suite.version}\n`);
    suites = [{ id: imported.suite.id, name: imported.suite.name }];
  } else if (values['suite-id'] !== undefined) {
    const s = await ok(client.GET('/api/v2/agent/{agentId}/tests/suites/{suiteId}', { params: { path: { agentId, suiteId: values['suite-id'] } } }));
    suites = [{ id: s.suite.id, name: s.suite.name }];
  } else {
    suites = (await ok(client.GET('/api/v2/agent/{agentId}/tests/suites', { params: { path: { agentId } } }))).suites;
    if (suites.length === 0) {
      err.write(`agent ${agent} has no test suites: pass --suite FILE.yaml (docs/testing-agents.md)\n`);
      return 1;
    }
  }
  const deadline = Date.now() + timeoutMs;
  const results: Array<{ suite: string; answer: Run }> = [];
  for (const suite of suites) {
    const started = await ok(client.POST('/api/v2/agent/{agentId}/tests/runs', {
      params: { path: { agentId } },
      body: { suiteId: suite.id, ...(version !== undefined ? { version } : {}), ...(iterations !== undefined ? { iterations } : {}), mode },
    }));
    const runId = started.run.id;
    err.write(`suite '${suite.name}': run ${runId} against ${version ?? 'staging'}\n`);
    let answer = await getRun(client, agentId, runId);
    let shown = -1;
    while (answer.run.state === 'pending' || answer.run.state === 'running') {
      if (Date.now() > deadline) {
        err.write(`run ${runId} did not end within ${timeoutMs / 1000} s (it goes on on the server)\n`);
        return 1;
      }
      if (answer.run.progress.done !== shown) {
        shown = answer.run.progress.done;
        err.write(`  ${shown}/${answer.run.progress.total} scenario conversations done\n`);
      }
      await new Promise((r) => setTimeout(r, 500));
      answer = await getRun(client, agentId, runId);
    }
    results.push({ suite: suite.name, answer });
    out.write(`suite '${suite.name}' run ${runId}: ${answer.run.state === 'finished' ? (answer.run.passed ? 'PASSED' : 'FAILED') : answer.run.state.toUpperCase()}\n`);
    if (answer.run.state !== 'finished') out.write(`  ${answer.run.lastError ?? ''}\n`);
    for (const s of answer.results.scenarios) {
      out.write(`  ${s.passed ? 'pass' : 'FAIL'}  ${s.name} (${Math.round(s.passRate * 100)}% of ${s.iterations.length})\n`);
      for (const i of s.iterations.filter((x) => !x.passed).slice(0, 1)) {
        for (const c of i.checks.filter((x) => x.decides && x.passed !== true)) out.write(`        ${c.what}: ${c.reason}\n`);
        out.write(`        conversation ${i.conversationId ?? 'none'}\n`);
      }
      for (const c of s.iterations[0]?.checks.filter((x) => x.simulated) ?? []) out.write(`        (${c.what}: ${c.reason})\n`);
    }
  }
  if (values.junit !== undefined) fs.writeFileSync(values.junit, junitXml(results));
  return results.every((r) => r.answer.run.state === 'finished' && r.answer.run.passed === true) ? 0 : 1;
}
