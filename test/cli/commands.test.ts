// The operator's commands as an operator runs them: the compiled `callplane` (dist/, built first
// when stale) as real processes with a clean environment — `bin/callplane.js`, the installed
// command, which runs these commands without loading the service, and `node dist/main.js` — against a real `callplane serve`
// process on each engine: tokens create/list/revoke, tasks import with a CSV (progress, the
// per-row report, the tasks queued), agents publish, calls watch following a SIMULATED call until
// SIGINT, and doctor on a good and on broken configurations.
// @lane wall
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createCallplaneClient, ok, type CallplaneClient } from '../../sdk/index.ts';
import { DIST_MAIN, ensureBuilt, ROOT } from '../helpers/dist.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { startFakeTwilio, type FakeTwilio } from '../helpers/fake-twilio.ts';
import { ENGINE_SKIP_REASON, ENGINES, PG_URL, SKIPPED_ENGINES } from '../helpers/harness.ts';
import { createScratchPgDatabase } from '../helpers/scratch-pg.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { freePort, waitFor } from '../helpers/wait.ts';

const TOKEN_RE = /cpl_[A-Za-z0-9_-]{43}/;
const dirs: string[] = [];
const running = new Set<ChildProcess>();
before(() => ensureBuilt());
after(() => {
  for (const c of running) c.kill('SIGKILL');
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-cli-'));
  dirs.push(d);
  return d;
}

interface Proc {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  waitFor(re: RegExp, ms?: number): Promise<void>;
  exit(ms?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const BIN = path.join(ROOT, 'bin', 'callplane.js');

/**
 * The compiled CLI with only PATH, HOME and `env` (nothing of the test runner's environment leaks
 * in): bin/callplane.js, or dist/main.js with `entry: 'main'`.
 */
function start(args: string[], env: Record<string, string>, entry: 'bin' | 'main' = 'bin'): Proc {
  const child = spawn(process.execPath, ['--enable-source-maps', entry === 'bin' ? BIN : DIST_MAIN, ...args], {
    cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: os.tmpdir(), ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let so = '', se = '';
  child.stdout.on('data', (b) => { so += b; });
  child.stderr.on('data', (b) => { se += b; });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => { running.delete(child); resolve({ code, signal }); }));
  return {
    child, stdout: () => so, stderr: () => se,
    async waitFor(re, ms = 30_000) {
      const deadline = Date.now() + ms;
      while (!re.test(so + se)) {
        if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode} before ${re}:\n${so}${se}`);
        if (Date.now() > deadline) throw new Error(`no ${re} within ${ms} ms:\n${so}${se}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async exit(ms = 60_000) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`no exit within ${ms} ms:\n${so}${se}`)), ms); });
      try { return await Promise.race([exited, timeout]); } finally { clearTimeout(timer); }
    },
  };
}

async function run(args: string[], env: Record<string, string>, entry: 'bin' | 'main' = 'bin') {
  const p = start(args, env, entry);
  const { code } = await p.exit();
  return { code, stdout: p.stdout(), stderr: p.stderr() };
}

describe('callplane --help', () => {
  it('lists every command, and each command has its own help', async () => {
    for (const entry of ['bin', 'main'] as const) {
      const main = await run(['--help'], {}, entry);
      assert.equal(main.code, 0);
      for (const c of ['serve', 'migrate', 'token ', 'doctor', 'tokens create|list|revoke', 'tasks import FILE.csv', 'agents publish AGENT_ID', 'calls watch']) {
        assert.ok(main.stdout.includes(c), `${entry} --help names ${c}:\n${main.stdout}`);
      }
    }
    // The service's own commands answer from dist/main.js through either entry.
    const serveHelp = await run(['serve', '--help'], {});
    assert.equal(serveHelp.code, 0);
    assert.match(serveHelp.stdout, /usage: callplane \[serve\] \[--role api\|worker\|all\]/);
    for (const [args, re] of [
      [['tokens', '--help'], /callplane tokens revoke TOKEN_OR_PREFIX/],
      [['tasks', '--help'], /callplane tasks import FILE\.csv \[--dry-run\]/],
      [['agents', '--help'], /callplane agents publish AGENT_ID/],
      [['calls', '--help'], /callplane calls watch \[--interval SECONDS\]/],
      [['doctor', '--help'], /callplane doctor \[--timeout SECONDS\]/],
      [['migrate', '--help'], /callplane migrate/],
      [['help', 'tasks'], /callplane tasks import/],
    ] as const) {
      const r = await run([...args], {});
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stdout, re);
    }
  });

  it('refuses an unknown command or option with exit code 2 and the usage', async () => {
    const unknown = await run(['frobnicate'], {}, 'main');
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown command 'frobnicate'/);
    assert.match(unknown.stderr, /usage: callplane <command>/);
    const option = await run(['tokens', 'list', '--colour'], {});
    assert.equal(option.code, 2);
    assert.match(option.stderr, /--colour/);
    const noUrl = await run(['tokens', 'list'], {});
    assert.equal(noUrl.code, 2);
    assert.match(noUrl.stderr, /the service URL is missing: pass --url .* or set CALLPLANE_URL/);
  });
});

for (const engine of ENGINES) {
  describe(`callplane commands [${engine}]`, () => {
    let serve: Proc;
    let url: string;
    let adminToken: string;
    let admin: CallplaneClient;
    let dataDir: string;
    let databaseUrl: string | undefined;
    let drop = async () => {};
    let orgId: number;
    let orgToken: string;
    let agentId: number;
    let fakeLlm: FakeLlm;
    let fakeTwilio: FakeTwilio;
    let resellerId: number;
    /** The environment serve runs with, which doctor reads too. */
    let serverEnv: Record<string, string>;
    const api = () => ({ CALLPLANE_URL: url, CALLPLANE_TOKEN: orgToken });

    before(async () => {
      dataDir = tempDir();
      if (engine === 'postgres') {
        const created = await createScratchPgDatabase(PG_URL!);
        databaseUrl = created.url;
        drop = created.drop;
      }
      fakeLlm = await startFakeLlm();
      fakeTwilio = await startFakeTwilio();
      const port = await freePort();
      serverEnv = {
        DATA_DIR: dataDir, ...(databaseUrl ? { DATABASE_URL: databaseUrl, CALLPLANE_SECRET_KEY: 'ab'.repeat(32) } : {}),
        HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', CALLPLANE_METRICS_PORT: '0', CALLPLANE_SIP_PORT: '0',
        // Long enough for calls watch to see the call in progress.
        CALLPLANE_SIMULATED_CALL_SECONDS: '20',
        CALLPLANE_LLM_BASE_URL: fakeLlm.baseUrl, CALLPLANE_LLM_MODEL: 'fake-model',
        // The fake Twilio on loopback fetches our TwiML and posts the caller's words here.
        CALLPLANE_PUBLIC_URL: `http://127.0.0.1:${port}`, CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
      };
      serve = start(['serve'], serverEnv, 'main');
      await serve.waitFor(/"msg":"ready"/);
      adminToken = TOKEN_RE.exec(serve.stdout())![0];
      url = `http://127.0.0.1:${port}`;
      admin = createCallplaneClient({ baseUrl: url, token: adminToken });
      const { reseller } = await ok(admin.POST('/api/v2/createReseller', { params: { query: { targetPartnerId: 1 } }, body: { resellerName: 'CLI Reseller' } }));
      resellerId = reseller.id;
      const { organization } = await ok(admin.POST('/api/v2/createOrganization', { params: { query: { targetResellerId: reseller.id } }, body: { orgName: 'CLI Org' } }));
      orgId = organization.id as number;
      agentId = organization.defaultAccountId as number;
      orgToken = (await ok(admin.POST('/api/v2/tokens', { params: { query: { targetAccountId: orgId } }, body: { type: 'admin', description: 'cli test' } }))).token.token;
    });
    after(async () => {
      if (serve && serve.child.exitCode === null) {
        serve.child.kill('SIGTERM');
        await serve.exit(20_000);
      }
      await fakeLlm?.close();
      await fakeTwilio?.close();
      await drop();
    });

    it('tokens create, list and revoke an account\'s tokens through the API', async () => {
      const created = await run(['tokens', 'create', '--description', 'nightly export', '--account', String(orgId), '--url', url, '--token', adminToken], {});
      assert.equal(created.code, 0, created.stderr);
      const token = created.stdout.trim();
      assert.match(token, new RegExp(`^${TOKEN_RE.source}$`), 'stdout is the token alone');
      assert.match(created.stderr, new RegExp(`token created for account ${orgId} \\(nightly export\\); it is shown this once`));
      // The new token works: the organization's account answers to it.
      const mine = await ok(createCallplaneClient({ baseUrl: url, token }).GET('/api/v2/account'));
      assert.equal(mine.id, orgId);

      // Listed by prefix, never whole (the environment's URL and token this time).
      const listed = await run(['tokens', 'list', '--account', String(orgId)], { CALLPLANE_URL: url, CALLPLANE_TOKEN: adminToken });
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, /^PREFIX\s+TYPE\s+CREATED\s+DESCRIPTION$/m);
      assert.match(listed.stdout, new RegExp(`^${token.slice(0, 12)}…\\s+admin\\s+\\d{4}-\\d\\d-\\d\\dT[\\d:]+Z\\s+nightly export$`, 'm'));
      assert.ok(!listed.stdout.includes(token), 'the whole token is never listed');

      const revoked = await run(['tokens', 'revoke', token, '--account', String(orgId)], { CALLPLANE_URL: url, CALLPLANE_TOKEN: adminToken }, 'main');
      assert.equal(revoked.code, 0, revoked.stderr);
      const after = await run(['tokens', 'list', '--account', String(orgId)], { CALLPLANE_URL: url, CALLPLANE_TOKEN: adminToken });
      assert.ok(!after.stdout.includes('nightly export'), after.stdout);
      // The revoked token is refused: the command says what the API answered, exit code 1.
      const refused = await run(['tokens', 'list'], { CALLPLANE_URL: url, CALLPLANE_TOKEN: token });
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /^callplane: the API answered 401: /m);
    });

    it('warns when --token is on the command line, and takes the token from a file or the environment without a warning', async () => {
      const warning = /warning: --token on the command line can be read by anyone on this machine .*CALLPLANE_TOKEN.*--token-file/;
      const flagged = await run(['tokens', 'list', '--url', url, '--token', orgToken], {});
      assert.equal(flagged.code, 0, flagged.stderr);
      assert.match(flagged.stderr, warning);
      assert.ok(!flagged.stderr.includes(orgToken), 'the warning does not repeat the token');

      const fromEnv = await run(['tokens', 'list'], api());
      assert.equal(fromEnv.code, 0, fromEnv.stderr);
      assert.doesNotMatch(fromEnv.stderr, /warning/);

      const file = path.join(tempDir(), 'token');
      fs.writeFileSync(file, `${orgToken}\n`, { mode: 0o600 });
      for (const [args, env] of [[['--token-file', file], {}], [[], { CALLPLANE_TOKEN_FILE: file }]] as const) {
        const r = await run(['tokens', 'list', '--url', url, ...args], { ...env });
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stdout, /^PREFIX\s+TYPE/m);
        assert.doesNotMatch(r.stderr, /warning/);
      }
      // A file others can read works, with a warning that says how to fix it.
      fs.chmodSync(file, 0o644);
      const open = await run(['tokens', 'list', '--url', url, '--token-file', file], {});
      assert.equal(open.code, 0, open.stderr);
      assert.match(open.stderr, /can be read by other users \(mode 644\): chmod 600/);
      const both = await run(['tokens', 'list', '--url', url, '--token-file', file, '--token', orgToken], {});
      assert.equal(both.code, 2);
      assert.match(both.stderr, /--token or --token-file, not both/);
      const missing = await run(['tokens', 'list', '--url', url, '--token-file', path.join(tempDir(), 'none')], {});
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, /--token-file: cannot read .*ENOENT/);
      const help = await run(['tokens', '--help'], {});
      assert.match(help.stdout, /--token-file FILE/);
    });

    it('tasks import uploads a CSV with progress, prints the per-row report and queues the good rows', async () => {
      const dir = tempDir();
      const file = path.join(dir, 'leads.csv');
      const rows = ['type,target,greeting,externalTaskId', 'text,+14155552671,Hello,cli-1', 'call,+1555,Hi,cli-2', 'text,+14155552672,Hello again,cli-3'];
      // Enough rows that the upload takes several chunks: progress is reported as it goes.
      for (let i = 0; i < 3000; i++) rows.push(`ping,,,cli-ping-${i}`);
      fs.writeFileSync(file, rows.join('\n') + '\n');
      const r = await run(['tasks', 'import', file], api());
      assert.equal(r.code, 1, 'a refused row makes the exit code 1');
      assert.match(r.stdout, /^3002 tasks queued; 3003 rows: 3002 valid, 1 refused\.$/m);
      assert.match(r.stdout, /^rows: 3003, valid: 3002, refused: 1, queued: 3002$/m);
      assert.match(r.stdout, /^line 3: refused: target '\+1555' is not a valid phone number \(too short\)$/m);
      // Not a terminal: one progress line per quarter, from 0 % to 100 %.
      assert.match(r.stderr, /^uploading leads\.csv:\s+0% /m);
      assert.match(r.stderr, /^uploading leads\.csv: 100% [\d.]+ KB\/[\d.]+ KB$/m);
      assert.match(r.stderr, /read to the end/);
      const { tasks, total } = await ok(createCallplaneClient({ baseUrl: url, token: orgToken }).GET('/api/v2/tasks', { params: { query: { type: 'text' } } }));
      assert.equal(total, 2);
      assert.deepEqual(tasks.map((t) => t.externalTaskId).sort(), ['cli-1', 'cli-3']);

      // A dry run checks and queues nothing; --json prints the API's answer.
      const dry = await run(['tasks', 'import', file, '--dry-run', '--json'], api());
      const report = JSON.parse(dry.stdout);
      assert.equal(report.dryRun, true);
      assert.equal(report.inserted, 0);
      assert.equal(report.invalid, 1);
      const again = await ok(createCallplaneClient({ baseUrl: url, token: orgToken }).GET('/api/v2/tasks', { params: { query: { type: 'text' } } }));
      assert.equal(again.total, 2);

      const good = path.join(dir, 'good.csv');
      fs.writeFileSync(good, 'type,target,greeting\ntext,+14155552673,Hi\n');
      const clean = await run(['tasks', 'import', good], api());
      assert.equal(clean.code, 0, clean.stdout + clean.stderr);
      const missing = await run(['tasks', 'import', path.join(dir, 'nope.csv')], api());
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, /cannot read .*nope\.csv/);
    });

    it('agents publish puts the staging configuration live', async () => {
      const org = createCallplaneClient({ baseUrl: url, token: orgToken });
      await ok(org.POST('/api/v2/agent', { params: { query: { targetAccountId: agentId } }, body: { welcomeMessage: 'Published by the CLI' } }));
      const live = async () => (await ok(org.GET('/api/v2/agent/{agentId}', { params: { path: { agentId: String(agentId) } } }))).sponsorship as Record<string, any>;
      const before = await live();
      assert.equal(before.staging.welcomeMessage, 'Published by the CLI');
      assert.notEqual(before.welcomeMessage, 'Published by the CLI');
      const r = await run(['agents', 'publish', String(agentId)], api());
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, new RegExp(`^agent ${agentId} published: `, 'm'));
      const version = /replaced is version (\d+) \(restore it to undo\)/.exec(r.stdout)?.[1];
      assert.ok(version, r.stdout);
      const versions = await ok(org.GET('/api/v2/agent/{agentId}/versions', { params: { path: { agentId: String(agentId) } } }));
      assert.ok(JSON.stringify(versions).includes(version), 'the printed version is listed');
      const now = await live();
      assert.equal(now.welcomeMessage, 'Published by the CLI');
      assert.equal(typeof now.publishedAt, 'number');

      const unknown = await run(['agents', 'publish', '999999'], api());
      assert.equal(unknown.code, 1);
      assert.match(unknown.stderr, /the API answered 404: .*999999/);
    });

    it('calls watch shows a SIMULATED call in progress and how it ended, and exits 0 on SIGINT', async () => {
      const watch = start(['calls', 'watch', '--interval', '0.3'], api());
      await watch.waitFor(/watching live calls every 0\.3 s/);
      const org = createCallplaneClient({ baseUrl: url, token: orgToken });
      const { task } = await ok(org.POST('/api/v2/tasks', { body: { type: 'call', target: '+14155552690' } }));
      await watch.waitFor(new RegExp(`^\\+ call ${task.id} to \\+14155552690 via .*: running since \\d\\d:\\d\\d:\\d\\d$`, 'm'));
      // Ended early (canceled through the API): the watch says how.
      await ok(org.POST('/api/v2/tasks/{taskId}', { params: { path: { taskId: task.id } }, body: { state: 'canceled' } }));
      await watch.waitFor(new RegExp(`^- call ${task.id} ended: canceled`, 'm'));
      watch.child.kill('SIGINT');
      const { code, signal } = await watch.exit(10_000);
      assert.equal(signal, null);
      assert.equal(code, 0);
      assert.match(watch.stderr(), /stopped\n$/);
    });

    it('doctor passes on the serving configuration', { skip: toolsSkip('espeak-ng', 'pocketsphinx') }, async () => {
      const seen = fakeLlm.modelListRequests;
      const r = await run(['doctor', '--timeout', '10'], serverEnv);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.match(r.stdout, /^OK\s+configuration\s+valid/m);
      assert.match(r.stdout, new RegExp(`^OK\\s+database\\s+${engine === 'postgres' ? 'postgres://' : 'sqlite:'}\\S+ answers and every migration is applied$`, 'm'));
      assert.match(r.stdout, /^WARN\s+carriers\s+no carrier configured: calls and texts run on the SIMULATED carrier/m);
      assert.match(r.stdout, /^OK\s+sip\s+CALLPLANE_SIP_PORT=0/m);
      assert.match(r.stdout, /^OK\s+text to speech\s+espeak-ng: /m);
      assert.match(r.stdout, /^OK\s+speech to text\s+pocketsphinx_continuous and the en-us model/m);
      assert.match(r.stdout, new RegExp(`^OK\\s+model default\\s+${fakeLlm.baseUrl.replace(/[.]/g, '\\.')} answers \\(200\\)$`, 'm'));
      assert.match(r.stdout, /^6 ok, 1 warning, 0 failed$/m);
      assert.equal(fakeLlm.modelListRequests, seen + 1, 'the model provider was asked');
    });

    it('doctor fails on a broken configuration, saying what is wrong and how to fix it', async () => {
      // An invalid variable: nothing else can be checked.
      const bad = await run(['doctor'], { ...serverEnv, CALLPLANE_RTP_PORT_MIN: '80' });
      assert.equal(bad.code, 1);
      assert.match(bad.stdout, /^FAIL\s+configuration\s+CALLPLANE_RTP_PORT_MIN must be/m);
      assert.match(bad.stdout, /fix: correct that variable/);

      // Valid, but: a database that is not migrated, a model server that is gone, no speech programs, a SIP port taken.
      const closed = await freePort();
      const empty = tempDir();
      let unmigrated: Record<string, string>;
      let dropEmpty = async () => {};
      if (engine === 'postgres') {
        const created = await createScratchPgDatabase(PG_URL!);
        dropEmpty = created.drop;
        unmigrated = { DATABASE_URL: created.url };
      } else {
        fs.writeFileSync(path.join(empty, 'callplane.db'), '');
        unmigrated = {};
      }
      const emptyPath = tempDir();
      try {
        const r = await run(['doctor', '--timeout', '3'], {
          DATA_DIR: empty, ...unmigrated, CALLPLANE_SIP_PORT: '0', PATH: emptyPath,
          CALLPLANE_LLM_BASE_URL: `http://127.0.0.1:${closed}/v1`,
        });
        assert.equal(r.code, 1, r.stdout);
        assert.match(r.stdout, /^FAIL\s+database\s+\S+ answers, but migrations are pending/m);
        assert.match(r.stdout, /fix: run `callplane migrate`/);
        assert.match(r.stdout, new RegExp(`^FAIL\\s+model default\\s+http://127\\.0\\.0\\.1:${closed}/v1 cannot be reached: ECONNREFUSED$`, 'm'));
        assert.match(r.stdout, /^FAIL\s+text to speech\s+CALLPLANE_TTS=offline, but espeak-ng does not run/m);
        assert.match(r.stdout, /fix: apt-get install espeak-ng/);
        assert.match(r.stdout, /^FAIL\s+speech to text\s+CALLPLANE_STT=offline, but pocketsphinx_continuous is not on the PATH/m);
        assert.match(r.stdout, /^\d ok, \d warnings?, 4 failed$/m);
      } finally {
        await dropEmpty();
      }

      // A database that cannot be reached at all.
      const gone = await run(['doctor', '--timeout', '3'], { DATA_DIR: empty, DATABASE_URL: `postgres://postgres@127.0.0.1:${closed}/none`, CALLPLANE_SIP_PORT: '0' });
      assert.equal(gone.code, 1);
      assert.match(gone.stdout, new RegExp(`^FAIL\\s+database\\s+cannot use postgres://127\\.0\\.0\\.1:${closed}/none: .*ECONNREFUSED`, 'm'));
      assert.match(gone.stdout, /fix: check DATABASE_URL/);
    });

    // After the doctor tests: this organization's Twilio provider would change what doctor says of carriers.
    it('calls watch shows a Twilio call\'s transcript as it is spoken, and how the call ended', async () => {
      const { organization } = await ok(admin.POST('/api/v2/createOrganization', { params: { query: { targetResellerId: resellerId } }, body: { orgName: 'Voice Org' } }));
      const voiceOrg = organization.id as number;
      await ok(admin.POST('/api/v2/numberingProvider', {
        params: { query: { targetOrganizationId: voiceOrg } },
        body: { providerId: 'twilio', config: { accountSid: fakeTwilio.accountSid, authToken: fakeTwilio.authToken, phoneNumber: '+15005550006', apiBaseUrl: fakeTwilio.url } },
      }));
      const token = (await ok(admin.POST('/api/v2/tokens', { params: { query: { targetAccountId: voiceOrg } }, body: { type: 'admin', description: 'voice' } }))).token.token;
      const org = createCallplaneClient({ baseUrl: url, token });
      await ok(org.POST('/api/v2/agent', { body: { welcomeMessage: 'Hello, this is Ada from Acme Dental.' } }));
      await ok(org.POST('/api/v2/agent/publish'));

      const watch = start(['calls', 'watch', '--interval', '0.3', '--lines', '5'], { CALLPLANE_URL: url, CALLPLANE_TOKEN: token });
      await watch.waitFor(/watching live calls/);
      // The reseller above it watches too, with its own token and no --account (issue 38: a 403 before):
      // across its organizations, from the live feed alone.
      const resellerToken = (await ok(admin.POST('/api/v2/tokens', { params: { query: { targetAccountId: resellerId } }, body: { type: 'admin', description: 'watch' } }))).token.token;
      const across = start(['calls', 'watch', '--interval', '0.3', '--lines', '5'], { CALLPLANE_URL: url, CALLPLANE_TOKEN: resellerToken });
      await across.waitFor(/this account has no tasks of its own: following the live feed across the organizations below it/);
      await across.waitFor(/^following the live feed$/m);
      const { task } = await ok(org.POST('/api/v2/tasks', { body: { type: 'call', target: '+14155552691' } }));
      const sid = await waitFor('the call placed on the fake Twilio', async () => {
        const { task: t } = await ok(org.GET('/api/v2/tasks/{taskId}', { params: { path: { taskId: task.id } } }));
        return t.state === 'running' && t.providerRef ? t.providerRef : undefined;
      }, 20_000, 100);
      // New (+), or named once the carrier reported it (~) when the watch saw it running before that.
      await watch.waitFor(new RegExp(`^[+~] call ${task.id} to \\+14155552691 via twilio: running since `, 'm'));
      // Answered: Twilio fetches the TwiML, which greets; the caller speaks and the agent (the fake model) answers.
      const twiml = await fakeTwilio.fetchTwiml(sid);
      assert.equal(twiml.status, 200, twiml.body);
      await watch.waitFor(new RegExp(`^  ${task.id} agent: Hello, this is Ada from Acme Dental\\.$`, 'm'));
      const gather = /<Gather [^>]*action="([^"]+)"/.exec(twiml.body)![1].replace(/&amp;/g, '&');
      const said = await fakeTwilio.postSigned(gather, {
        AccountSid: fakeTwilio.accountSid, ApiVersion: '2010-04-01', CallSid: sid, CallStatus: 'in-progress', Direction: 'outbound-api',
        SpeechResult: 'I would like an appointment', Confidence: '0.92', Language: 'en-US',
      });
      assert.equal(said.status, 200, said.body);
      await watch.waitFor(new RegExp(`^  ${task.id} caller: I would like an appointment$`, 'm'));
      await watch.waitFor(new RegExp(`^  ${task.id} agent: reply to: I would like an appointment$`, 'm'));
      // The carrier reports the end.
      await fakeTwilio.progressCall(sid, 'completed');
      await watch.waitFor(new RegExp(`^- call ${task.id} ended: finished \\(completed\\) on twilio$`, 'm'));
      watch.child.kill('SIGINT');
      assert.equal((await watch.exit(10_000)).code, 0);
      // The reseller saw the same call, named with its organization, its lines, and its end (the feed's).
      await across.waitFor(new RegExp(`^- call ${task.id} ended: \\S+`, 'm'));
      across.child.kill('SIGINT');
      assert.equal((await across.exit(10_000)).code, 0);
      assert.match(across.stdout(), new RegExp(`^\\+ call ${task.id} \\(organization ${voiceOrg}\\) to \\+14155552691 via voice: in progress since `, 'm'));
      assert.match(across.stdout(), new RegExp(`^  ${task.id} agent: Hello, this is Ada from Acme Dental\\.$`, 'm'));
      assert.match(across.stdout(), new RegExp(`^  ${task.id} caller: I would like an appointment$`, 'm'));
      assert.doesNotMatch(across.stderr(), /the API answered|polling/);
      // Each line once: the transcript is printed as it grows, not again on every poll.
      assert.equal(watch.stdout().split('\n').filter((l) => l.endsWith('caller: I would like an appointment')).length, 1);
      // The lines came pushed, from the live feed (GET /api/v2/conversations/live), not polled.
      assert.match(watch.stderr(), /^following the live feed$/m);
      assert.doesNotMatch(watch.stderr(), /polling/);
    });
  });
}
for (const engine of SKIPPED_ENGINES) {
  describe(`callplane commands [${engine}]`, { skip: ENGINE_SKIP_REASON }, () => {});
}
