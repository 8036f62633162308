// Agent tests (issue 36, docs/testing-agents.md), on both engines, with scripted models on loopback
// (test/helpers/fake-llm.ts): the agent's model is the deployment's, the simulated caller's and the
// judge's are the organization's own provider (a second fake server). A scenario passes on a good
// staging configuration and fails on a broken one with the reasons named; tool mocks answer the
// agent and nothing leaves (a real loopback webhook receiver gets nothing, no text task is made,
// tool_effects say `mocked`); the publish gate refuses and allows; a suite round-trips through YAML
// and JSON with versions kept; bad documents are refused naming the field's path; another tenant
// reaches nothing; a 10-scenario suite finishes in seconds; a run is compared with the live one.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { agentReply, BOOK_SLOT, callerReply, judgeReply, system } from '../helpers/agent-test-models.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { waitFor } from '../helpers/wait.ts';

const SCENARIO = {
  name: 'books a Tuesday cleaning',
  persona: { instructions: 'You are Sam. You want a dental cleaning on Tuesday morning.', language: 'en-US' },
  context: 'Sam is an existing patient.',
  variables: { patient: 'Sam' },
  maxTurns: 5,
  toolMocks: [{ tool: 'book_slot', args: { day: 'Tuesday' }, result: { ok: true, slot: 'Tue 9:00' } }],
  checks: [
    { toolCalled: { name: 'book_slot', args: { day: 'Tuesday' } } },
    { said: 'confirm' },
    { neverSaid: 'many slots' },
    { endedCall: true },
    { maxTurns: 4 },
    { turnLatencyMs: 1500 },
    { judge: 'The agent confirmed the date before booking' },
  ],
};

for (const engine of ENGINES) {
  describe(`agent tests [${engine}]`, () => {
    let h: Harness;
    let agentLlm: FakeLlm;
    let testLlm: FakeLlm;
    let hook: Receiver;
    before(async () => {
      agentLlm = await startFakeLlm({ models: ['agent-model'] });
      agentLlm.respond = agentReply;
      testLlm = await startFakeLlm({ models: ['caller-model', 'judge-model'] });
      testLlm.respond = (b) => (b.model === 'judge-model' ? judgeReply(b) : callerReply(b));
      hook = await startReceiver();
      h = await startHarness(engine, {
        CALLPLANE_LLM_BASE_URL: agentLlm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'agent-model', CALLPLANE_LLM_MAX_RETRIES: '0',
        CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_AGENT_TEST_RUNS_PER_ORG: '3',
      }, { agentTests: true, agentTestRuntime: { pollMs: 50 } });
    });
    after(async () => { await h?.close(); await agentLlm?.close(); await testLlm?.close(); await hook?.close(); });

    /** An organization whose own provider serves the caller and judge models, and its agent's staging configuration. */
    async function setup(instructions: string) {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const put = await h.call('PUT', '/api/v2/llm/providers/tester', { token: o.token, body: { baseUrl: testLlm.baseUrl, apiKey: 'sk-test', models: ['caller-model', 'judge-model'] } });
      assert.equal(put.status, 201, JSON.stringify(put.body));
      const agentId = `camp${o.agentId}`;
      await stage(o.token, instructions);
      return { r, o, agentId };
    }
    async function stage(token: string, instructions: string, extra: Record<string, unknown> = {}) {
      const res = await h.call('POST', '/api/v2/agent', { token, body: {
        agentInstructions: instructions, agentModel: 'agent-model', actions: ['hangup', 'sendtext'],
        webhookActions: [{ ...BOOK_SLOT, url: `${hook.url}/book` }], ...extra,
      } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
    }
    const suiteDoc = (scenarios = [SCENARIO], name = 'Booking') => ({ name, settings: { callerModel: 'caller-model', judgeModel: 'judge-model' }, scenarios });
    async function createSuite(token: string, agentId: string, doc = suiteDoc()) {
      const res = await h.call('POST', `/api/v2/agent/${agentId}/tests/suites`, { token, body: doc });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return res.body.suite as { id: string; version: number };
    }
    async function run(token: string, agentId: string, body: Record<string, unknown>) {
      const started = await h.call('POST', `/api/v2/agent/${agentId}/tests/runs`, { token, body });
      assert.equal(started.status, 202, JSON.stringify(started.body));
      const id = started.body.run.id as string;
      return waitFor(`run ${id} to end`, async () => {
        const res = await h.call('GET', `/api/v2/agent/${agentId}/tests/runs/${id}`, { token });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        return ['finished', 'failed', 'canceled'].includes(res.body.run.state) ? res.body : undefined;
      }, 30_000, 50);
    }

    it('a scenario passes on a good staging configuration, with tool mocks answering and nothing leaving', async () => {
      const { o, agentId } = await setup('GOOD: book with book_slot, then confirm the day.');
      const suite = await createSuite(o.token, agentId);
      const done = await run(o.token, agentId, { suiteId: suite.id });
      assert.equal(done.run.state, 'finished', JSON.stringify(done.run));
      assert.equal(done.run.passed, true, JSON.stringify(done.results, null, 1));
      assert.deepEqual(done.run.progress, { done: 1, total: 1 });
      assert.equal(done.run.target, 'staging');
      const s = done.results.scenarios[0];
      assert.equal(s.name, 'books a Tuesday cleaning');
      assert.equal(s.passRate, 1);
      const it0 = s.iterations[0];
      const byKind = Object.fromEntries(it0.checks.map((v: { check: string }) => [v.check, v]));
      assert.match(byKind.toolCalled.reason, /book_slot was called with \{"day":"Tuesday","time":"9:00"\}/);
      assert.match(byKind.said.reason, /I confirm your cleaning/);
      assert.equal(byKind.endedCall.passed, true);
      assert.equal(byKind.turnLatencyMs.decides, false, 'no latency in text mode');
      assert.equal(byKind.judge.passed, true);
      assert.match(byKind.judge.reason, /confirmed Tuesday/);

      // Nothing left: the webhook receiver got nothing, no text task was made, the tool effects say mocked.
      assert.equal(hook.requests.length, 0, 'no webhook action reached the receiver');
      const db = h.database.db;
      assert.equal((await db.selectFrom('tasks').select('id').where('org_id', '=', o.id).execute()).length, 0, 'no text was sent');
      const effects = await db.selectFrom('tool_effects').selectAll().where('conversation_id', '=', it0.conversationId).orderBy('call_key').execute();
      assert.deepEqual(effects.map((e) => [e.tool, e.state]), [['send_text', 'mocked'], ['book_slot', 'mocked']]);
      assert.match(effects[0]!.outcome!, /not mocked in this test/);
      assert.match(effects[1]!.outcome!, /Tue 9:00/);
      // What the agent's model was told: the mock's result, and "not mocked" for send_text.
      const told = agentLlm.requests.flatMap((r) => r.body.messages).filter((m) => m.role === 'tool').map((m) => m.content ?? '');
      assert.ok(told.some((t) => t.includes('"slot":"Tue 9:00"')), JSON.stringify(told));
      assert.ok(told.some((t) => t.includes('not mocked in this test: send_text')));
      // The agent's prompt carried the scenario's context and variables, as a task's.
      const firstAgent = agentLlm.requests.find((r) => system(r.body).includes('GOOD'))!;
      assert.match(system(firstAgent.body), /Sam is an existing patient/);
      assert.match(system(firstAgent.body), /"patient":"Sam"/);
      // The caller followed the persona (the organization's provider served it).
      assert.ok(testLlm.requests.some((r) => r.body.model === 'caller-model' && system(r.body).includes('You are Sam')));

      // A real conversation on the test channel: its transcript is viewable, its usage is test usage.
      const c = await db.selectFrom('conversations').selectAll().where('id', '=', it0.conversationId).executeTakeFirstOrThrow();
      assert.equal(c.channel, 'test');
      assert.equal(c.outcome, 'ended_by_agent');
      const transcript = await h.call('GET', `/api/v2/conversation/${c.account_id}:${c.room_id}/${c.id}`, { token: o.token });
      assert.equal(transcript.status, 200, JSON.stringify(transcript.body));
      assert.match(JSON.stringify(transcript.body), /I confirm your cleaning on Tuesday/);
      assert.match(JSON.stringify(transcript.body), /Hi, I would like to book a cleaning on Tuesday/);
      const usage = await h.call('GET', '/api/v2/stats/usage', { token: o.token, query: { allItems: true } });
      assert.equal(usage.body.usage.modelTokens, 0, JSON.stringify(usage.body.usage));
      assert.ok(usage.body.usage.testTokens > 0);
    });

    it('fails on a broken staging configuration (never books, never confirms) with the reasons named', async () => {
      const { o, agentId } = await setup('BROKEN: chat about slots.');
      const suite = await createSuite(o.token, agentId);
      const done = await run(o.token, agentId, { suiteId: suite.id, iterations: 2 });
      assert.equal(done.run.state, 'finished');
      assert.equal(done.run.passed, false);
      assert.deepEqual(done.run.progress, { done: 2, total: 2 });
      const s = done.results.scenarios[0];
      assert.equal(s.passRate, 0);
      assert.equal(s.iterations.length, 2);
      const reasons = Object.fromEntries(s.iterations[0].checks.map((v: { check: string; reason: string }) => [v.check, v.reason]));
      assert.match(reasons.toolCalled, /book_slot was never called/);
      assert.match(reasons.said, /no line of the agent's \d+ matched \/confirm\/i/);
      assert.match(reasons.neverSaid, /We have many slots/);
      assert.match(reasons.endedCall, /did not end the conversation/);
      assert.match(reasons.judge, /never confirmed/);
      const perCheck = Object.fromEntries(s.checks.map((c: { check: string; passRate: number | null }) => [c.check, c.passRate]));
      assert.equal(perCheck.toolCalled, 0);
      assert.equal(perCheck.turnLatencyMs, null);
      assert.equal(hook.requests.length, 0);
    });

    it('the publish gate refuses until the latest run on this staging configuration passed, and a staging change invalidates it', async () => {
      const { o, agentId } = await setup('BROKEN: chat about slots.');
      const publish = () => h.call('POST', '/api/v2/agent/publish', { token: o.token });
      // Off by default: publishing works without any run.
      assert.equal((await publish()).status, 200);
      await stage(o.token, 'BROKEN: chat about slots.', { testGate: true });
      let res = await publish();
      assert.equal(res.status, 409);
      assert.match(res.body.message, /no test suite/);
      const suite = await createSuite(o.token, agentId);
      res = await publish();
      assert.equal(res.status, 409);
      assert.match(res.body.message, /suite 'Booking' has no finished run of its version 1 on this staging configuration/);
      const failed = await run(o.token, agentId, { suiteId: suite.id });
      assert.equal(failed.run.passed, false);
      res = await publish();
      assert.equal(res.status, 409);
      assert.match(res.body.message, /failed scenarios: 'books a Tuesday cleaning'/);

      await stage(o.token, 'GOOD: book with book_slot, then confirm the day.', { testGate: true });
      const passed = await run(o.token, agentId, { suiteId: suite.id });
      assert.equal(passed.run.passed, true, JSON.stringify(passed.results));
      // A change after the passing run: refused again until it runs.
      await stage(o.token, 'GOOD: book with book_slot, then confirm the day. Be brief.', { testGate: true });
      res = await publish();
      assert.equal(res.status, 409);
      assert.match(res.body.message, /has no finished run of its version 1 on this staging configuration/);
      const again = await run(o.token, agentId, { suiteId: suite.id });
      assert.equal(again.run.passed, true);
      assert.equal(again.run.configHash !== passed.run.configHash, true);
      // A change of the suite after the passing run: its new version must run too.
      const edited = await h.call('PUT', `/api/v2/agent/${agentId}/tests/suites/${suite.id}`, { token: o.token, body: { ...suiteDoc(), description: 'v2' } });
      assert.equal(edited.body.suite.version, 2);
      res = await publish();
      assert.equal(res.status, 409);
      assert.match(res.body.message, /has no finished run of its version 2 on this staging configuration/);
      await run(o.token, agentId, { suiteId: suite.id });
      res = await publish();
      assert.equal(res.status, 200, JSON.stringify(res.body));

      // The comparison: this staging run against the earlier run on the published configuration.
      await stage(o.token, 'BROKEN: chat about slots.', { testGate: true });
      const onLive = await run(o.token, agentId, { suiteId: suite.id, version: 'live' });
      assert.equal(onLive.run.target, 'live');
      assert.equal(onLive.run.passed, true);
      const broken = await run(o.token, agentId, { suiteId: suite.id });
      const cmp = await h.call('GET', `/api/v2/agent/${agentId}/tests/runs/${broken.run.id}/comparison`, { token: o.token });
      assert.equal(cmp.status, 200, JSON.stringify(cmp.body));
      assert.equal(cmp.body.baseline.id, onLive.run.id);
      assert.deepEqual(cmp.body.regressed, [{ name: 'books a Tuesday cleaning', before: 1, after: 0 }]);
      assert.deepEqual(cmp.body.improved, []);
    });

    it('imports and exports a suite as YAML and JSON (a round trip), keeps versions, and refuses bad documents naming the field', async () => {
      const { o, agentId } = await setup('GOOD');
      const yamlText = [
        'name: Imported',
        'settings: { callerModel: caller-model, iterations: 2 }',
        'scenarios:',
        '  - name: asks for hours',
        '    persona:',
        '      instructions: You want the opening hours.',
        '      opening: When are you open?',
        '    toolMocks:',
        '      - tool: book_slot',
        '        args: { day: Monday }',
        '        result: booked',
        '    checks:',
        '      - said: "open|hours"',
        '      - toolCalled: { name: book_slot, not: true }',
        '      - analysis: { field: day, equals: null }',
        '      - judge: The agent gave the hours',
        '',
      ].join('\n');
      const imported = await h.call('POST', `/api/v2/agent/${agentId}/tests/suites/import`, { token: o.token, body: { format: 'yaml', document: yamlText } });
      assert.equal(imported.status, 200, JSON.stringify(imported.body));
      assert.equal(imported.body.created, true);
      const suite = imported.body.suite;
      assert.equal(suite.version, 1);
      assert.equal(suite.document.scenarios[0].persona.opening, 'When are you open?');
      assert.deepEqual(suite.document.scenarios[0].checks[1], { toolCalled: { name: 'book_slot', not: true } });

      for (const format of ['yaml', 'json'] as const) {
        const exported = await h.call('GET', `/api/v2/agent/${agentId}/tests/suites/${suite.id}/export`, { token: o.token, query: { format } });
        assert.equal(exported.status, 200, JSON.stringify(exported.body));
        const parsed = format === 'yaml' ? parse(exported.body.document) : JSON.parse(exported.body.document);
        assert.deepEqual(parsed, suite.document, `${format} export is the stored document`);
        // Imported again unchanged: the same suite, no new version.
        const back = await h.call('POST', `/api/v2/agent/${agentId}/tests/suites/import`, { token: o.token, body: { format, document: exported.body.document } });
        assert.equal(back.status, 200, JSON.stringify(back.body));
        assert.equal(back.body.created, false);
        assert.equal(back.body.suite.id, suite.id);
        assert.equal(back.body.suite.version, 1);
      }
      // A change is the next version; the earlier one is kept and readable.
      const changed = { ...suite.document, description: 'now described' };
      const put = await h.call('PUT', `/api/v2/agent/${agentId}/tests/suites/${suite.id}`, { token: o.token, body: changed });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal(put.body.suite.version, 2);
      assert.deepEqual(put.body.suite.versions.map((v: { version: number }) => v.version), [2, 1]);
      const v1 = await h.call('GET', `/api/v2/agent/${agentId}/tests/suites/${suite.id}`, { token: o.token, query: { version: 1 } });
      assert.equal(v1.body.suite.document.description, undefined);
      assert.equal(v1.body.suite.shownVersion, 1);

      // Refusals name the path inside the document.
      const bad = async (doc: unknown, field: RegExp) => {
        const res = await h.call('POST', `/api/v2/agent/${agentId}/tests/suites`, { token: o.token, body: doc });
        assert.equal(res.status, 400, JSON.stringify(res.body));
        assert.equal(res.body.success, false);
        assert.match(res.body.message, field);
      };
      const one = (patch: Record<string, unknown>) => ({ name: 'Bad', scenarios: [{ ...SCENARIO, ...patch }] });
      await bad(one({ checks: [{ said: '(a+)+$' }] }), /^scenarios\[0\]\.checks\[0\]\.said could backtrack/);
      await bad(one({ checks: [{ said: 'x', neverSaid: 'y' }] }), /^scenarios\[0\]\.checks\[0\] must have exactly one of/);
      await bad(one({ checks: [{ smiled: true }] }), /^scenarios\[0\]\.checks\[0\] must have exactly one of/);
      await bad(one({ toolMocks: [{ tool: 'book_slot' }] }), /^scenarios\[0\]\.toolMocks\[0\]\.result is required/);
      await bad(one({ persona: { instructions: '' } }), /^scenarios\[0\]\.persona\.instructions must not be empty/);
      await bad(one({ maxTurns: 0 }), /^scenarios\[0\]\.maxTurns must be an integer from 1 to 30/);
      await bad({ name: 'Bad', scenarios: [SCENARIO, SCENARIO] }, /^scenarios\[1\]\.name repeats/);
      await bad({ name: 'Bad', settings: { judgeModel: 'no-such-model' }, scenarios: [SCENARIO] }, /^settings\.judgeModel "no-such-model" is not a model this organization can use/);
      const badYaml = await h.call('POST', `/api/v2/agent/${agentId}/tests/suites/import`, { token: o.token, body: { format: 'yaml', document: 'name: [unclosed' } });
      assert.equal(badYaml.status, 400);
      assert.match(badYaml.body.message, /^document is not valid YAML/);
      const badField = await h.call('POST', `/api/v2/agent/${agentId}/tests/suites/import`, { token: o.token, body: { format: 'json', document: JSON.stringify(one({ checks: [{ maxTurns: 'many' }] })) } });
      assert.equal(badField.status, 400);
      assert.match(badField.body.message, /^scenarios\[0\]\.checks\[0\]\.maxTurns must be an integer/);
    });

    it('no tenant reaches another\'s suites or runs; an ancestor acts for its descendant', async () => {
      const mine = await setup('GOOD: book with book_slot, then confirm the day.');
      const other = await setup('GOOD');
      const suite = await createSuite(mine.o.token, mine.agentId);
      const started = await run(mine.o.token, mine.agentId, { suiteId: suite.id });
      const runId = started.run.id as string;
      const refused = [
        await h.call('GET', `/api/v2/agent/${mine.agentId}/tests/suites`, { token: other.o.token }),
        await h.call('GET', `/api/v2/agent/${mine.agentId}/tests/suites/${suite.id}`, { token: other.o.token }),
        await h.call('POST', `/api/v2/agent/${mine.agentId}/tests/runs`, { token: other.o.token, body: { suiteId: suite.id } }),
        await h.call('GET', `/api/v2/agent/${mine.agentId}/tests/runs/${runId}`, { token: other.r.token }),
        // Their own agent's path, my suite and run ids: not theirs either.
        await h.call('GET', `/api/v2/agent/${other.agentId}/tests/suites/${suite.id}`, { token: other.o.token }),
        await h.call('GET', `/api/v2/agent/${other.agentId}/tests/runs/${runId}`, { token: other.o.token }),
        await h.call('POST', `/api/v2/agent/${other.agentId}/tests/runs`, { token: other.o.token, body: { suiteId: suite.id } }),
        await h.call('DELETE', `/api/v2/agent/${other.agentId}/tests/suites/${suite.id}`, { token: other.o.token }),
      ];
      for (const res of refused) {
        assert.equal(res.status, 404, JSON.stringify(res.body));
        assert.equal(res.body.success, false);
      }
      // A conversation becomes a draft scenario (the person's lines as persona and opening); not another tenant's.
      const conversationId = started.results.scenarios[0].iterations[0].conversationId as string;
      const draft = await h.call('POST', `/api/v2/agent/${mine.agentId}/tests/scenarioFromConversation`, { token: mine.o.token, body: { conversationId } });
      assert.equal(draft.status, 200, JSON.stringify(draft.body));
      assert.equal(draft.body.scenario.persona.opening, 'Hi, I would like to book a cleaning on Tuesday.');
      assert.match(draft.body.scenario.persona.instructions, /- Great, thanks, bye\./);
      assert.deepEqual(draft.body.scenario.checks, []);
      const withChecks = { ...draft.body.scenario, checks: [{ toolCalled: 'book_slot' }] };
      const put = await h.call('PUT', `/api/v2/agent/${mine.agentId}/tests/suites/${suite.id}`, { token: mine.o.token, body: { ...suiteDoc(), scenarios: [SCENARIO, withChecks] } });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      for (const [agentId, token] of [[other.agentId, other.o.token], [mine.agentId, other.o.token]] as const) {
        const theirs = await h.call('POST', `/api/v2/agent/${agentId}/tests/scenarioFromConversation`, { token, body: { conversationId } });
        assert.equal(theirs.status, 404, JSON.stringify(theirs.body));
      }

      // My reseller (an ancestor) reads and runs my agent's tests.
      const list = await h.call('GET', `/api/v2/agent/${mine.agentId}/tests/runs`, { token: mine.r.token });
      assert.equal(list.status, 200);
      assert.deepEqual(list.body.runs.map((r: { id: string }) => r.id), [runId]);
      const exported = await h.call('GET', `/api/v2/agent/${mine.agentId}/tests/suites/${suite.id}/export`, { token: mine.r.token });
      assert.equal(exported.status, 200);
    });

    it('a 10-scenario suite with scripted models finishes in seconds', async () => {
      const { o, agentId } = await setup('GOOD: book with book_slot, then confirm the day.');
      const scenarios = Array.from({ length: 10 }, (_, i) => ({ ...SCENARIO, name: `scenario ${i + 1}` }));
      const suite = await createSuite(o.token, agentId, { ...suiteDoc(scenarios, 'Ten'), settings: { callerModel: 'caller-model', judgeModel: 'judge-model', concurrency: 5 } } as never);
      const started = Date.now();
      const pending = run(o.token, agentId, { suiteId: suite.id });
      await waitFor('the run to start', async () => (await h.call('GET', `/api/v2/agent/${agentId}/tests/runs`, { token: o.token })).body.runs.length > 0);
      const early = await h.call('DELETE', `/api/v2/agent/${agentId}/tests/suites/${suite.id}`, { token: o.token });
      assert.equal(early.status, 409, 'not while its run is queued or running');
      const done = await pending;
      const took = Date.now() - started;
      assert.equal(done.run.passed, true, JSON.stringify(done.run));
      assert.deepEqual(done.run.progress, { done: 10, total: 10 });
      assert.equal(done.results.scenarios.length, 10);
      assert.ok(took < 15_000, `took ${took} ms`);
      const gone = await h.call('DELETE', `/api/v2/agent/${agentId}/tests/suites/${suite.id}`, { token: o.token });
      assert.equal(gone.status, 200);
      assert.equal((await h.call('GET', `/api/v2/agent/${agentId}/tests/runs/${done.run.id}`, { token: o.token })).status, 404, 'its runs went with it');
    });
  });
}

for (const engine of ENGINES) {
  describe(`agent test runs after a worker died [${engine}]`, () => {
    let h: Harness;
    let agentLlm: FakeLlm;
    let testLlm: FakeLlm;
    before(async () => {
      agentLlm = await startFakeLlm({ models: ['agent-model'] });
      agentLlm.respond = agentReply;
      testLlm = await startFakeLlm({ models: ['caller-model', 'judge-model'] });
      testLlm.respond = (b) => (b.model === 'judge-model' ? judgeReply(b) : callerReply(b));
      // The worker is started by the test, after the "dead" worker took its run; short leases and rescues.
      h = await startHarness(engine, {
        CALLPLANE_LLM_BASE_URL: agentLlm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'agent-model', CALLPLANE_LLM_MAX_RETRIES: '0',
        CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_AGENT_TEST_RUNS_PER_ORG: '5',
      }, { agentTestRuntime: { leaseMs: 600, heartbeatMs: 100, rescueEveryMs: 100, pollMs: 50 } });
    });
    after(async () => { await h?.close(); await agentLlm?.close(); await testLlm?.close(); });

    it('a run whose worker died resumes after its recorded verdicts; one whose attempts are spent fails and says why', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      assert.equal((await h.call('PUT', '/api/v2/llm/providers/tester', { token: o.token, body: { baseUrl: testLlm.baseUrl, apiKey: 'sk-test', models: ['caller-model', 'judge-model'] } })).status, 201);
      assert.equal((await h.call('POST', '/api/v2/agent', { token: o.token, body: {
        agentInstructions: 'GOOD: book with book_slot, then confirm the day.', agentModel: 'agent-model', actions: ['hangup'],
        webhookActions: [{ ...BOOK_SLOT, url: 'http://127.0.0.1:9/book' }],
      } })).status, 200);
      const agentId = `camp${o.agentId}`;
      const created = await h.call('POST', `/api/v2/agent/${agentId}/tests/suites`, { token: o.token, body: {
        name: 'Crash', settings: { callerModel: 'caller-model', judgeModel: 'judge-model' },
        scenarios: [{ ...SCENARIO, name: 'first' }, { ...SCENARIO, name: 'second' }],
      } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const start = async () => {
        const res = await h.call('POST', `/api/v2/agent/${agentId}/tests/runs`, { token: o.token, body: { suiteId: created.body.suite.id } });
        assert.equal(res.status, 202, JSON.stringify(res.body));
        return res.body.run.id as string;
      };
      const db = h.database.db;
      // A worker claims the run, decides the first scenario, and dies (nobody heartbeats its lease).
      const resumed = await start();
      const [claimed] = await h.agentTests.engine.claim(db, 1);
      assert.equal(claimed?.id, resumed);
      await db.insertInto('agent_test_results').values({
        run_id: resumed, scenario: 0, iteration: 0, scenario_name: 'first', conversation_id: null, passed: 1,
        checks: JSON.stringify([{ check: 'said', what: 'decided by the attempt that died', passed: true, reason: 'before the crash', decides: true }]),
        turns: 2, error: null, created_at: Date.now(),
      }).execute();
      // Another, whose attempts are spent when its worker dies.
      const lost = await start();
      await db.updateTable('agent_test_runs').set({ max_attempts: 1 }).where('id', '=', lost).execute();
      const [claimedLost] = await h.agentTests.engine.claim(db, 1);
      assert.equal(claimedLost?.id, lost);

      h.agentTests.startWorker();
      const ended = (id: string) => waitFor(`run ${id} to end`, async () => {
        const res = await h.call('GET', `/api/v2/agent/${agentId}/tests/runs/${id}`, { token: o.token });
        return ['finished', 'failed'].includes(res.body.run.state) ? res.body : undefined;
      }, 30_000, 50);
      const done = await ended(resumed);
      assert.equal(done.run.state, 'finished', JSON.stringify(done.run));
      assert.equal(done.run.attempt, 2, 'the second attempt finished it');
      assert.deepEqual(done.run.progress, { done: 2, total: 2 });
      assert.equal(done.run.passed, true, JSON.stringify(done.results));
      const [first, second] = done.results.scenarios;
      assert.equal(first.iterations[0].checks[0].what, 'decided by the attempt that died', 'the recorded verdict stands');
      assert.equal(first.iterations[0].conversationId, null, 'the first scenario was not run again');
      assert.ok(second.iterations[0].conversationId, 'the second was run by the new attempt');
      const rooms = await db.selectFrom('conversation_rooms').select('counterpart').where('org_id', '=', o.id).execute();
      assert.deepEqual(rooms.map((x) => x.counterpart).filter((c) => c.includes(resumed)), [`web:agent-test-${resumed}-1-0`]);

      const failed = await ended(lost);
      assert.equal(failed.run.state, 'failed');
      assert.equal(failed.run.passed, null);
      assert.match(failed.run.lastError, /stopped before it finished .* attempts are spent/);
    });
  });

  describe(`agent tests on the SIMULATED engine [${engine}]`, () => {
    let h: Harness;
    before(async () => { h = await startHarness(engine, {}, { agentTests: true, agentTestRuntime: { pollMs: 50 } }); });
    after(async () => { await h?.close(); });

    it('the judge and the caller are labelled simulated and do not decide; the deterministic checks do', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      assert.equal((await h.call('POST', '/api/v2/agent', { token: o.token, body: { actions: ['hangup'] } })).status, 200);
      const agentId = `camp${o.agentId}`;
      const created = await h.call('POST', `/api/v2/agent/${agentId}/tests/suites`, { token: o.token, body: {
        name: 'Offline',
        scenarios: [
          { name: 'says goodbye', persona: { instructions: 'You say goodbye.', opening: 'Goodbye!' }, checks: [{ endedCall: true }, { said: 'simulated' }, { outcome: 'resolved' }, { judge: 'The agent was polite' }] },
          { name: 'never ends', persona: { instructions: 'You chat.', opening: 'Please call me back tomorrow' }, maxTurns: 2, checks: [{ endedCall: true }, { outcome: 'resolved' }, { judge: 'The agent was polite' }] },
        ],
      } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const started = await h.call('POST', `/api/v2/agent/${agentId}/tests/runs`, { token: o.token, body: { suiteId: created.body.suite.id } });
      assert.equal(started.status, 202, JSON.stringify(started.body));
      const done = await waitFor('the run to end', async () => {
        const res = await h.call('GET', `/api/v2/agent/${agentId}/tests/runs/${started.body.run.id}`, { token: o.token });
        return ['finished', 'failed'].includes(res.body.run.state) ? res.body : undefined;
      }, 30_000, 50);
      assert.equal(done.run.state, 'finished');
      const [bye, chat] = done.results.scenarios;
      assert.equal(bye.passed, true, JSON.stringify(bye));
      assert.equal(chat.passed, false, 'endedCall decided it');
      for (const s of [bye, chat]) {
        const judged = s.iterations[0].checks.filter((v: { check: string }) => v.check === 'judge');
        assert.equal(judged.length, 2, 'the criterion and the simulated caller');
        for (const v of judged) {
          assert.equal(v.simulated, true);
          assert.equal(v.decides, false);
          assert.equal(v.passed, null);
          assert.match(v.reason, /^SIMULATED: /);
        }
      }
      assert.equal(chat.iterations[0].turns, 2);
      // The outcome check had the conversation analysed (by the rules, on the SIMULATED engine).
      const outcomeOf = (x: { iterations: Array<{ checks: Array<{ check: string; passed: boolean; reason: string }> }> }) => x.iterations[0]!.checks.find((v) => v.check === 'outcome')!;
      assert.equal(outcomeOf(bye).passed, true);
      assert.equal(outcomeOf(chat).passed, false);
      assert.equal(outcomeOf(chat).reason, 'the outcome was callback-requested, not resolved');
    });
  });
}
