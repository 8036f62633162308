// A queued conversation turn whose process is killed (SIGKILL) after its tools ran, with real
// `node --import tsx src/main.ts serve --role all` processes (issue 23): the model (a fake on
// loopback, test/helpers/fake-llm.ts) asks for send_text and queue_follow_up, and when the turn
// comes back to the model with their results the process is killed, mid-request. A new process on
// the same database rescues the turn once its lease has expired and resumes it after the tools:
// exactly one text task, one follow-up, one reply. And a webhook action whose POST was out when
// the process died is not sent again: the model is told its answer is unknown. On both engines
// (SQLite: the same DATA_DIR).
// @lane wall
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { openDatabase } from '../src/db/index.ts';
import { startFakeLlm, type FakeLlm } from './helpers/fake-llm.ts';
import { PG_URL } from './helpers/harness.ts';
import { startReceiver, type Receiver } from './helpers/receiver.ts';
import { createScratchPgDatabase } from './helpers/scratch-pg.ts';
import { killServes, serveRequest, startServe, type ServeProcess as Proc } from './helpers/serve-process.ts';
import { sleep, waitFor as until } from './helpers/wait.ts';

const ADMIN = `turn-crash-admin-${crypto.randomBytes(12).toString('hex')}`;
const LEASE_MS = 3000;
const PERSON = '+14155550177';

const dirs: string[] = [];
const closers: Array<() => Promise<void>> = [];
after(async () => {
  killServes();
  for (const close of closers) await close();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

const serve = (env: Record<string, string>) => startServe('all', env);
const request = (port: number, method: string, url: string, body?: unknown, token = ADMIN) => serveRequest(port, token, method, url, body);

async function crashRun(engine: 'sqlite' | 'postgres', scenario: 'texts' | 'action'): Promise<string> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-turn-crash-'));
  dirs.push(dataDir);
  const scratch = engine === 'postgres' ? await createScratchPgDatabase(PG_URL!, 'callplane_turn_crash') : undefined;
  const llm: FakeLlm = await startFakeLlm({ models: ['fake-model'] });
  closers.push(() => llm.close());
  const replies: Receiver = await startReceiver();
  closers.push(() => replies.close());
  // The webhook action's receiver never answers: the process is killed while the POST is out.
  const action: Receiver = await startReceiver(() => new Promise(() => {}));
  closers.push(() => action.close());
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    CALLPLANE_ADMIN_TOKEN: ADMIN,
    CALLPLANE_SECRET_KEY: crypto.randomBytes(32).toString('base64'),
    CALLPLANE_TASK_LEASE_MS: String(LEASE_MS),
    CALLPLANE_SIMULATED_CALL_SECONDS: '0.5',
    CALLPLANE_SIP_HOST: '127.0.0.1',
    CALLPLANE_SIP_PORT: '0',
    CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
    CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0',
    ...(scratch ? { DATABASE_URL: scratch.url } : {}),
  };
  const procs: Proc[] = [];
  try {
    let proc = await serve(env);
    procs.push(proc);
    const me = await request(proc.port, 'GET', '/api/v2/account');
    assert.equal(me.status, 200, JSON.stringify(me.body));
    const reseller = await request(proc.port, 'POST', `/api/v2/createReseller?targetPartnerId=${me.body.id}`, { resellerName: 'Crash reseller' });
    assert.equal(reseller.status, 201, JSON.stringify(reseller.body));
    const org = await request(proc.port, 'POST', `/api/v2/createOrganization?targetResellerId=${reseller.body.reseller.id}`, { orgName: 'Crash org' });
    assert.equal(org.status, 201, JSON.stringify(org.body));
    const orgId: number = org.body.organization.id;
    const agentId: number = org.body.organization.defaultAccountId;
    const token = await request(proc.port, 'POST', `/api/v2/tokens?targetAccountId=${agentId}`, { type: 'admin', description: 'crash test' });
    assert.equal(token.status, 200, JSON.stringify(token.body));
    const agentToken: string = token.body.token.token;
    const config = scenario === 'texts'
      ? { actions: ['text', 'followup'] }
      : { webhookActions: [{ name: 'book', description: 'Book it', url: `${action.url}/book`, timeoutSeconds: 30, parameters: { day: { type: 'string', required: true } } }] };
    assert.equal((await request(proc.port, 'POST', '/api/v2/agent', config, agentToken)).status, 200);
    assert.equal((await request(proc.port, 'POST', '/api/v2/agent/publish', undefined, agentToken)).status, 200);
    if (scenario === 'action') return await actionRun(proc, env, procs, { llm, replies, action, agentId, orgId, dataDir, scratch });

    llm.script.push(
      { toolCalls: [{ name: 'send_text', arguments: { message: 'Your cleaning is Tuesday at 9.' } }, { name: 'queue_follow_up', arguments: { type: 'text', delayMinutes: 60, message: 'Reminder: cleaning tomorrow at 9.' } }] },
      // The turn comes back with the tools' results: the process is killed while this request is open.
      { hang: true },
      { text: 'Texted you the time, and a reminder comes in an hour.' },
    );
    const sent = await request(proc.port, 'POST', '/api/v2/agent/receiveMessage', {
      targetAgent: String(agentId), sourceAddress: PERSON, message: 'book me and text me', outboundMessageWebhookUrl: replies.url,
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    await until('the model to be asked again after the tools ran', async () => llm.requests.length >= 2, 20_000);
    assert.equal(llm.requests[1]!.body.messages.filter((m) => m.role === 'tool').length, 2, 'both tools ran before the kill');
    proc.child.kill('SIGKILL');
    assert.equal((await proc.exited).signal, 'SIGKILL');

    // The replacement rescues the turn after its lease and resumes it after the tools.
    proc = await serve(env);
    procs.push(proc);
    const [reply] = await replies.waitFor(1, 60_000);
    const body = JSON.parse(reply!.body.toString('utf8'));
    assert.equal(body.type, 'message', JSON.stringify(body));
    assert.equal(body.message, 'Texted you the time, and a reminder comes in an hour.');
    assert.equal(body.inReplyTo, sent.body.messageUuid);
    assert.equal(llm.requests.length, 3, 'the model was not asked from the start again');
    const resumed = llm.requests[2]!.body.messages;
    assert.equal(resumed.filter((m) => m.role === 'tool').length, 2);
    // Nothing more comes (a second reply, more tasks).
    await sleep(2000);
    assert.equal(replies.requests.length, 1, 'one reply');
    const tasks = await request(proc.port, 'GET', `/api/v2/tasks?targetAccountId=${orgId}`);
    assert.equal(tasks.status, 200, JSON.stringify(tasks.body));
    const made = (tasks.body.tasks as Array<{ type: string; target: string; scheduledFor: number | null }>).map((t) => `${t.type}:${t.target}:${t.scheduledFor ? 'scheduled' : 'now'}`).sort();
    assert.deepEqual(made, [`text:${PERSON}:now`, `text:${PERSON}:scheduled`], 'one text and one follow-up');
    const db = openDatabase(scratch ? { databaseUrl: scratch.url, poolSize: 1 } : { sqliteFile: path.join(dataDir, 'callplane.db') });
    try {
      const effects = await db.db.selectFrom('tool_effects').select(['tool', 'state']).where('org_id', '=', orgId).orderBy('call_key').execute();
      assert.deepEqual(effects.map((e) => `${e.tool}:${e.state}`), ['send_text:done', 'queue_follow_up:done']);
    } finally {
      await db.close();
    }
    return `the turn resumed in the new process after the kill; ${llm.requests.length} model requests in all`;
  } finally {
    for (const p of procs) p.child.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.exited));
    await scratch?.drop();
  }
}

/** The webhook action scenario, from the configured agent on. */
async function actionRun(first: Proc, env: Record<string, string>, procs: Proc[], o: {
  llm: FakeLlm; replies: Receiver; action: Receiver; agentId: number; orgId: number; dataDir: string; scratch?: { url: string };
}): Promise<string> {
  o.llm.script.push({ toolCalls: [{ name: 'book', arguments: { day: 'Tuesday' } }] }, { text: 'I could not confirm the booking; please check your email.' });
  const sent = await request(first.port, 'POST', '/api/v2/agent/receiveMessage', {
    targetAgent: String(o.agentId), sourceAddress: PERSON, message: 'book tuesday', outboundMessageWebhookUrl: o.replies.url,
  });
  assert.equal(sent.status, 200, JSON.stringify(sent.body));
  await o.action.waitFor(1, 20_000);
  first.child.kill('SIGKILL');
  assert.equal((await first.exited).signal, 'SIGKILL');
  const proc = await serve(env);
  procs.push(proc);
  const [reply] = await o.replies.waitFor(1, 60_000);
  assert.equal(JSON.parse(reply!.body.toString('utf8')).message, 'I could not confirm the booking; please check your email.');
  await sleep(2000);
  assert.equal(o.action.requests.length, 1, 'the action was POSTed once');
  assert.equal(o.llm.requests.length, 2);
  const told = o.llm.requests[1]!.body.messages.filter((m) => m.role === 'tool').map((m) => m.content);
  assert.equal(told.length, 1);
  assert.match(told[0]!, /^book was already sent once in this turn, which was then interrupted before its answer came back; it is not sent again/);
  assert.equal(o.replies.requests.length, 1, 'one reply');
  const db = openDatabase(o.scratch ? { databaseUrl: o.scratch.url, poolSize: 1 } : { sqliteFile: path.join(o.dataDir, 'callplane.db') });
  try {
    const effects = await db.db.selectFrom('tool_effects').select(['tool', 'state']).where('org_id', '=', o.orgId).execute();
    assert.deepEqual(effects.map((e) => `${e.tool}:${e.state}`), ['book:started'], 'its answer never came');
  } finally {
    await db.close();
  }
  return 'the action was not sent again after the kill';
}

describe('a queued turn killed after its tools ran (SQLite: replaced on the same DATA_DIR)', () => {
  it('is resumed by the new process: one text task, one follow-up, one reply', { timeout: 120_000 }, async (t) => t.diagnostic(await crashRun('sqlite', 'texts')));
  it('killed while a webhook action\'s POST is out: the action is not sent again and the model is told', { timeout: 120_000 }, async (t) => t.diagnostic(await crashRun('sqlite', 'action')));
});

describe('a queued turn killed after its tools ran (PostgreSQL: replaced on the same database)',
  { skip: PG_URL ? false : 'set TEST_DATABASE_URL=postgres://… to run the PostgreSQL half' }, () => {
    it('is resumed by the new process: one text task, one follow-up, one reply', { timeout: 120_000 }, async (t) => t.diagnostic(await crashRun('postgres', 'texts')));
    it('killed while a webhook action\'s POST is out: the action is not sent again and the model is told', { timeout: 120_000 }, async (t) => t.diagnostic(await crashRun('postgres', 'action')));
  });
