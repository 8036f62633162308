// `callplane agents test` (issue 36, docs/cli.md) against a real HTTP server on loopback with
// scripted models (test/helpers/agent-test-models.ts): a suite from a YAML file is imported and run
// against the staging configuration; exit 0 and pass lines when every scenario passed, 1 with the
// failed checks' reasons and a JUnit file naming them when one did not; 2 for a wrong command line.
// The command runs in this process (its function), through the typed client, as the installed one does.
// @engines sqlite
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { agentsCommand } from '../../src/cli/agents.ts';
import { UsageError } from '../../src/cli/usage.ts';
import { agentReply, BOOK_SLOT, callerReply, judgeReply } from '../helpers/agent-test-models.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { freePort } from '../helpers/wait.ts';

const SUITE = `name: CI suite
settings:
  callerModel: caller-model
  judgeModel: judge-model
scenarios:
  - name: books a Tuesday cleaning
    persona:
      instructions: You are Sam and want a cleaning on Tuesday.
    maxTurns: 5
    toolMocks:
      - tool: book_slot
        args: { day: Tuesday }
        result: { ok: true, slot: "Tue 9:00" }
    checks:
      - toolCalled: { name: book_slot, args: { day: Tuesday } }
      - said: confirm
      - judge: The agent confirmed the date before booking
`;

for (const engine of ENGINES) {
  describe(`callplane agents test [${engine}]`, () => {
    let h: Harness;
    let agentLlm: FakeLlm;
    let testLlm: FakeLlm;
    let hook: Receiver;
    let url: string;
    let dir: string;
    before(async () => {
      agentLlm = await startFakeLlm({ models: ['agent-model'] });
      agentLlm.respond = agentReply;
      testLlm = await startFakeLlm({ models: ['caller-model', 'judge-model'] });
      testLlm.respond = (b) => (b.model === 'judge-model' ? judgeReply(b) : callerReply(b));
      hook = await startReceiver();
      h = await startHarness(engine, {
        CALLPLANE_LLM_BASE_URL: agentLlm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'agent-model', CALLPLANE_LLM_MAX_RETRIES: '0',
        CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
      }, { agentTests: true, agentTestRuntime: { pollMs: 50 } });
      const port = await freePort();
      await h.app.listen({ port, host: '127.0.0.1' });
      url = `http://127.0.0.1:${port}`;
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-agents-test-'));
    });
    after(async () => { await h?.close(); await agentLlm?.close(); await testLlm?.close(); await hook?.close(); fs.rmSync(dir, { recursive: true, force: true }); });

    async function cli(args: string[]) {
      const out = new PassThrough();
      const err = new PassThrough();
      let so = '', se = '';
      out.on('data', (b) => { so += b; });
      err.on('data', (b) => { se += b; });
      const code = await agentsCommand(args, out, err);
      return { code, stdout: so, stderr: se };
    }

    it('imports the suite file, runs it on staging, exits 0 when it passed and 1 with the reasons and a JUnit file when it did not', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      assert.equal((await h.call('PUT', '/api/v2/llm/providers/tester', { token: o.token, body: { baseUrl: testLlm.baseUrl, apiKey: 'sk-test', models: ['caller-model', 'judge-model'] } })).status, 201);
      const stage = async (instructions: string) => assert.equal((await h.call('POST', '/api/v2/agent', { token: o.token, body: {
        agentInstructions: instructions, agentModel: 'agent-model', actions: ['hangup'], webhookActions: [{ ...BOOK_SLOT, url: `${hook.url}/book` }],
      } })).status, 200);
      const tokenFile = path.join(dir, 'token');
      fs.writeFileSync(tokenFile, `${o.token}\n`, { mode: 0o600 });
      const suiteFile = path.join(dir, 'suite.yaml');
      fs.writeFileSync(suiteFile, SUITE);
      const junit = path.join(dir, 'junit.xml');
      const api = ['--url', url, '--token-file', tokenFile];

      await stage('GOOD: book with book_slot, then confirm the day.');
      const good = await cli(['test', String(o.agentId), '--suite', suiteFile, '--junit', junit, ...api]);
      assert.equal(good.code, 0, good.stdout + good.stderr);
      assert.match(good.stdout, /suite 'CI suite' run atr_\w+: PASSED/);
      assert.match(good.stdout, /pass {2}books a Tuesday cleaning \(100% of 1\)/);
      assert.match(good.stderr, /suite 'CI suite' created at version 1/);
      assert.match(fs.readFileSync(junit, 'utf8'), /<testsuite name="CI suite" tests="1" failures="0" errors="0">/);

      await stage('BROKEN: chat about slots.');
      const bad = await cli(['test', String(o.agentId), '--suite', suiteFile, '--junit', junit, '--iterations', '2', ...api]);
      assert.equal(bad.code, 1, bad.stdout + bad.stderr);
      assert.match(bad.stdout, /: FAILED/);
      assert.match(bad.stdout, /FAIL {2}books a Tuesday cleaning \(0% of 2\)/);
      assert.match(bad.stdout, /tool called: book_slot with \{"day":"Tuesday"\}: book_slot was never called/);
      assert.match(bad.stdout, /judge: The agent confirmed the date before booking: The agent never confirmed a date\./);
      assert.match(bad.stderr, /suite 'CI suite' is at version 1/, 'the same file again: the same version');
      const xml = fs.readFileSync(junit, 'utf8');
      assert.match(xml, /<testsuite name="CI suite" tests="1" failures="1" errors="0">/);
      assert.match(xml, /<failure message="2 of 2 iterations failed">/);
      assert.match(xml, /book_slot was never called/);

      // Without --suite: every suite of the agent (here the imported one), against the live configuration.
      const live = await cli(['test', String(o.agentId), '--version', 'live', ...api]);
      assert.equal(live.code, 1, 'live is the default configuration, which never books');
      assert.match(live.stderr, /against live/);
      assert.equal(hook.requests.length, 0, 'no webhook action left');

      await assert.rejects(cli(['test', String(o.agentId), '--mode', 'video', ...api]), (e: unknown) => e instanceof UsageError && /text or voice/.test(e.message));
      await assert.rejects(cli(['test', String(o.agentId), '--iterations', '0', ...api]), UsageError);
      await assert.rejects(cli(['test', String(o.agentId), '--suite', path.join(dir, 'nope.yaml'), ...api]), (e: unknown) => e instanceof UsageError && /cannot read/.test(e.message));
    });
  });
}
