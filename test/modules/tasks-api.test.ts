// The Tasks API as served: submitting (every field checked, Idempotency-Key), listing, reading,
// updating, canceling and deleting, statistics and daily counts, limits, and who may see what.
// Most tests keep tasks pending (no worker); the last suite runs a worker with short SIMULATED
// calls for what needs a task to run (finished, running, daily counts).
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness, Reply } from '../helpers/harness.ts';
import { keepTaskHistory } from '../helpers/task-events.ts';
import { waitFor } from '../helpers/wait.ts';

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  assert.equal(typeof res.body.message, 'string');
  for (const w of words) assert.ok(res.body.message.includes(w), `"${res.body.message}" should name ${w}`);
}

const nowSec = () => Math.floor(Date.now() / 1000);
const PHONE = '+14155552671';
const PHONE2 = '+14155550100';

/** Calls shared by both suites, bound to a harness. */
function api(h: () => Harness) {
  const create = (token: string, body: unknown, opts: { query?: Record<string, unknown>; headers?: Record<string, string> } = {}) =>
    h().call('POST', '/api/v2/tasks', { token, body, ...opts });
  const get = (token: string, id: string, query?: Record<string, unknown>) => h().call('GET', `/api/v2/tasks/${id}`, { token, query });
  const update = (token: string, id: string, body: unknown, query?: Record<string, unknown>) =>
    h().call('POST', `/api/v2/tasks/${id}`, { token, body, query });
  const remove = (token: string, id: string, query?: Record<string, unknown>) => h().call('DELETE', `/api/v2/tasks/${id}`, { token, query });
  const list = (token: string, query: Record<string, unknown> = {}) => h().call('GET', '/api/v2/tasks', { token, query });
  const stats = async (token: string, query?: Record<string, unknown>) => {
    const res = await h().call('GET', '/api/v2/tasks/stats', { token, query });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body;
  };
  /** Creates a task that must be accepted; answers the created task. */
  const made = async (token: string, body: Record<string, unknown>, query?: Record<string, unknown>) => {
    const res = await create(token, body, { query });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.success, true);
    return res.body.task;
  };
  /** Rows of an organization in the database, whatever the API says. */
  const rowsOf = (orgId: number) => h().database.db.selectFrom('tasks').selectAll().where('org_id', '=', orgId).execute();
  const tenant = async (body?: Record<string, unknown>) => {
    const r = await h().reseller();
    const o = await h().organization(r.id, body);
    // Some tests read a task's history from its events.
    await keepTaskHistory(h(), o);
    return { r, o };
  };
  return { create, get, update, remove, list, stats, made, rowsOf, tenant };
}

forEachEngine('tasks API', (h) => {
  const { create, get, update, remove, list, stats, made, rowsOf, tenant } = api(h);

  // ── POST /api/v2/tasks: every field ─────────────────────────────────────────

  it('a call is created (201) with every field as sent, and GET answers the same task', async () => {
    const { o } = await tenant();
    const at = nowSec() + 3600;
    const res = await create(o.token, {
      type: 'call', target: PHONE, context: 'Name: Ada', taskContext: 'Ask about the demo', greeting: 'Hello Ada',
      waitToGreet: true, scheduledFor: at, meta: { campaign: 'spring', n: 2, nested: { ok: true } }, externalTaskId: 'crm-42',
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.success, true);
    assert.equal(res.body.message, 'Task created successfully.');
    assert.equal(res.body.warnings, undefined);
    const t = res.body.task;
    assert.match(t.id, /^tsk/);
    assert.equal(t.type, 'call');
    assert.equal(t.state, 'pending');
    assert.equal(t.target, PHONE);
    assert.equal(t.context, 'Name: Ada');
    assert.equal(t.taskContext, 'Ask about the demo');
    assert.equal(t.greeting, 'Hello Ada');
    assert.equal(t.content, null);
    assert.equal(t.waitToGreet, true);
    assert.equal(t.accountId, o.agentId);
    assert.equal(t.organizationId, o.id);
    assert.equal(t.externalTaskId, 'crm-42');
    assert.deepEqual(t.meta, { campaign: 'spring', n: 2, nested: { ok: true } });
    assert.equal(t.scheduledFor, at);
    assert.equal(t.runAt, at);
    assert.ok(Math.abs(t.createdAt - nowSec()) <= 2, `createdAt ${t.createdAt}`);
    assert.equal(t.updatedAt, t.createdAt);
    for (const k of ['startedAt', 'finishedAt', 'cancelRequestedAt', 'provider', 'providerRef', 'result', 'error']) assert.equal(t[k], null, k);
    assert.equal(t.attempts, 0);
    assert.equal(t.maxAttempts, 3);

    const again = await get(o.token, t.id);
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.deepEqual(again.body.task, t);
    const rows = await rowsOf(o.id);
    assert.equal(rows.length, 1);
    assert.equal(rows[0].id, t.id);
  });

  it('type is required and must be call, text or ping', async () => {
    const { o } = await tenant();
    expectError(await create(o.token, { target: PHONE }), 400, 'type');
    expectError(await create(o.token, { type: 'fax', target: PHONE }), 400, 'type', 'fax');
    expectError(await create(o.token, { type: '', target: PHONE }), 400, 'type');
    expectError(await create(o.token, { type: 'CALL', target: PHONE }), 400, 'type');
    assert.equal((await rowsOf(o.id)).length, 0, 'nothing stored for refused requests');
    const ping = await made(o.token, { type: 'ping' });
    assert.equal(ping.type, 'ping');
    assert.ok(!('target' in ping), 'a ping without a target has none (the contract types target as a string, so not null)');
  });

  it('target is required for calls and texts, must be a valid number, and is stored as E.164', async () => {
    const { o } = await tenant();
    expectError(await create(o.token, { type: 'call' }), 400, 'target', 'required');
    expectError(await create(o.token, { type: 'text', content: 'hi' }), 400, 'target', 'required');
    expectError(await create(o.token, { type: 'call', target: '' }), 400, 'target');
    for (const [bad, why] of [
      ['+1234567890', 'too short'], // the contract's other example: not even possible for +1 (+15551234567 is possible: accepted with a warning)
      ['+1415abc2671', 'letters'],
      ['+1415555267', 'too short'],
      ['4155552671', 'country code'],
      ['+1-415-555-2671; ext 9', 'letters'],
      ['++14155552671', 'characters'],
    ]) {
      const res = await create(o.token, { type: 'call', target: bad });
      expectError(res, 400, 'target', `'${bad}'`, why);
    }
    expectError(await create(o.token, { type: 'text', target: '+1234567890', content: 'hi' }), 400, 'target');
    assert.equal((await rowsOf(o.id)).length, 0);

    const t = await made(o.token, { type: 'call', target: '+1 (415) 555-2671' });
    assert.equal(t.target, '+14155552671');
    assert.equal((await made(o.token, { type: 'call', target: '0044 20 7946 0958' })).target, '+442079460958');
    assert.equal((await made(o.token, { type: 'call', target: '  +1.415.555.0100  ' })).target, PHONE2);
  });

  it('a text as the contract writes it (target, context, no content) is accepted: the agent writes it; message is content\'s alias; an empty content falls back to the greeting with a warning', async () => {
    const { o } = await tenant();
    const contract = await create(o.token, { type: 'text', target: PHONE, context: 'Remind them of Tuesday' });
    assert.equal(contract.status, 201, JSON.stringify(contract.body));
    assert.equal(contract.body.task.content, null);
    assert.equal(contract.body.task.context, 'Remind them of Tuesday');
    assert.equal(contract.body.warnings, undefined);
    assert.equal((await made(o.token, { type: 'text', target: PHONE, content: '' })).content, null);

    const plain = await create(o.token, { type: 'text', target: PHONE, content: 'Your table is ready' });
    assert.equal(plain.status, 201, JSON.stringify(plain.body));
    assert.equal(plain.body.task.content, 'Your table is ready');
    assert.equal(plain.body.warnings, undefined);

    const alias = await made(o.token, { type: 'text', target: PHONE, message: 'Sent as message' });
    assert.equal(alias.content, 'Sent as message');
    // Both given: content wins.
    assert.equal((await made(o.token, { type: 'text', target: PHONE, content: 'C', message: 'M' })).content, 'C');

    const fallback = await create(o.token, { type: 'text', target: PHONE, greeting: 'Hi from the greeting' });
    assert.equal(fallback.status, 201, JSON.stringify(fallback.body));
    assert.equal(fallback.body.task.content, 'Hi from the greeting');
    assert.ok(fallback.body.warnings.some((w: string) => w.includes('content') && w.includes('greeting')), JSON.stringify(fallback.body.warnings));

    expectError(await create(o.token, { type: 'text', target: PHONE, content: 'x'.repeat(1601) }), 400, 'content', '1600');
    expectError(await create(o.token, { type: 'text', target: PHONE, message: 'x'.repeat(1601) }), 400, 'message', '1600');
    assert.equal((await made(o.token, { type: 'text', target: PHONE, content: 'x'.repeat(1600) })).content.length, 1600);
  });

  it('context, taskContext and greeting are limited to 10,000 characters', async () => {
    const { o } = await tenant();
    for (const field of ['context', 'taskContext', 'greeting']) {
      expectError(await create(o.token, { type: 'call', target: PHONE, [field]: 'x'.repeat(10_001) }), 400, field, '10000');
      const t = await made(o.token, { type: 'call', target: PHONE, [field]: 'y'.repeat(10_000) });
      assert.equal(t[field].length, 10_000);
    }
    assert.equal((await rowsOf(o.id)).length, 3);
  });

  it('waitToGreet must be a boolean', async () => {
    const { o } = await tenant();
    expectError(await create(o.token, { type: 'call', target: PHONE, waitToGreet: 'maybe' }), 400, 'waitToGreet');
    expectError(await create(o.token, { type: 'call', target: PHONE, waitToGreet: { yes: true } }), 400, 'waitToGreet');
    assert.equal((await rowsOf(o.id)).length, 0);
    assert.equal((await made(o.token, { type: 'call', target: PHONE, waitToGreet: true })).waitToGreet, true);
    assert.equal((await made(o.token, { type: 'call', target: PHONE, waitToGreet: false })).waitToGreet, false);
    assert.equal((await made(o.token, { type: 'call', target: PHONE })).waitToGreet, false);
  });

  it('accountId: the organization\'s first agent by default, another agent of it when named, never one of another organization', async () => {
    const { r, o } = await tenant();
    const second = await h().agent(o.id);
    const other = await h().organization(r.id);
    assert.equal((await made(o.token, { type: 'call', target: PHONE })).accountId, o.agentId);
    assert.ok(o.agentId < second.id);
    assert.equal((await made(o.token, { type: 'call', target: PHONE, accountId: second.id })).accountId, second.id);
    assert.equal((await made(o.token, { type: 'call', target: PHONE, accountId: String(second.id) })).accountId, second.id);
    const before = (await rowsOf(o.id)).length;

    expectError(await create(o.token, { type: 'call', target: PHONE, accountId: other.agentId }), 400, 'accountId', String(other.agentId));
    // The organization itself is not an agent, nor is the reseller.
    expectError(await create(o.token, { type: 'call', target: PHONE, accountId: o.id }), 400, 'accountId');
    expectError(await create(o.token, { type: 'call', target: PHONE, accountId: r.id }), 400, 'accountId');
    expectError(await create(o.token, { type: 'call', target: PHONE, accountId: 'abc' }), 400, 'accountId');
    expectError(await create(o.token, { type: 'call', target: PHONE, accountId: 0 }), 400, 'accountId');
    expectError(await create(o.token, { type: 'call', target: PHONE, accountId: 999_999_999 }), 400, 'accountId');
    assert.equal((await rowsOf(o.id)).length, before);
    assert.equal((await rowsOf(other.id)).length, 0);
  });

  it('scheduledFor: unix seconds in the future, 0 or slightly past runs now, milliseconds and the far past are refused', async () => {
    const { o } = await tenant();
    const now = nowSec();
    const ms = await create(o.token, { type: 'call', target: PHONE, scheduledFor: Date.now() + 60_000 });
    expectError(ms, 400, 'scheduledFor', 'milliseconds');
    expectError(await create(o.token, { type: 'call', target: PHONE, scheduledFor: now - 3600 }), 400, 'scheduledFor', 'past');
    expectError(await create(o.token, { type: 'call', target: PHONE, scheduledFor: now - 6 * 60 }), 400, 'scheduledFor', 'past');
    expectError(await create(o.token, { type: 'call', target: PHONE, scheduledFor: -5 }), 400, 'scheduledFor');
    expectError(await create(o.token, { type: 'call', target: PHONE, scheduledFor: 'tomorrow' }), 400, 'scheduledFor');
    expectError(await create(o.token, { type: 'call', target: PHONE, scheduledFor: 1.5 }), 400, 'scheduledFor');
    assert.equal((await rowsOf(o.id)).length, 0);

    const late = await create(o.token, { type: 'call', target: PHONE, scheduledFor: now - 60 });
    assert.equal(late.status, 201, JSON.stringify(late.body));
    assert.equal(late.body.task.scheduledFor, now - 60, 'the requested time is kept');
    assert.ok(late.body.task.runAt >= now, `runs now, not in the past: runAt ${late.body.task.runAt}`);
    assert.ok(late.body.warnings.some((w: string) => w.includes('scheduledFor') && w.includes('past')), JSON.stringify(late.body));

    const zero = await create(o.token, { type: 'call', target: PHONE, scheduledFor: 0 });
    assert.equal(zero.status, 201, JSON.stringify(zero.body));
    assert.equal(zero.body.task.scheduledFor, null);
    assert.ok(Math.abs(zero.body.task.runAt - nowSec()) <= 2, `runAt ${zero.body.task.runAt}`);
    assert.ok(zero.body.warnings.some((w: string) => w.includes('scheduledFor')), JSON.stringify(zero.body));

    const unset = await made(o.token, { type: 'call', target: PHONE });
    assert.equal(unset.scheduledFor, null);
    assert.ok(Math.abs(unset.runAt - nowSec()) <= 2);

    const at = nowSec() + 86_400;
    const future = await made(o.token, { type: 'call', target: PHONE, scheduledFor: at });
    assert.equal(future.scheduledFor, at);
    assert.equal(future.runAt, at);
    const asString = await made(o.token, { type: 'call', target: PHONE, scheduledFor: String(at + 1) });
    assert.equal(asString.scheduledFor, at + 1);
    const row = (await rowsOf(o.id)).find((x) => x.id === future.id)!;
    assert.equal(Number(row.run_at), at * 1000, 'stored in milliseconds');
  });

  it('meta must be a JSON object; externalTaskId at most 255 characters', async () => {
    const { o } = await tenant();
    for (const meta of ['not json', [1, 2], 5, '[1]', true]) {
      expectError(await create(o.token, { type: 'call', target: PHONE, meta }), 400, 'meta');
    }
    expectError(await create(o.token, { type: 'call', target: PHONE, meta: { big: 'x'.repeat(17 * 1024) } }), 400, 'meta', 'bytes');
    expectError(await create(o.token, { type: 'call', target: PHONE, externalTaskId: 'e'.repeat(256) }), 400, 'externalTaskId', '255');
    assert.equal((await rowsOf(o.id)).length, 0);
    const t = await made(o.token, { type: 'call', target: PHONE, meta: '{"from":"csv"}', externalTaskId: 'e'.repeat(255) });
    assert.deepEqual(t.meta, { from: 'csv' });
    assert.equal(t.externalTaskId.length, 255);
  });

  it('an organization without any agent cannot create tasks (400), rather than owning tasks no agent runs', async () => {
    const { o } = await tenant();
    await h().database.db.deleteFrom('accounts').where('id', '=', o.agentId).execute();
    expectError(await create(o.token, { type: 'call', target: PHONE }), 400, 'agent');
  });

  // ── Idempotency-Key ─────────────────────────────────────────────────────────

  it('Idempotency-Key: the same key and body answer the first task, marked idempotent-replayed', async () => {
    const { o } = await tenant();
    const body = { type: 'call', target: PHONE, context: 'once', meta: { a: 1, b: 2 } };
    const first = await create(o.token, body, { headers: { 'idempotency-key': 'key-1' } });
    assert.equal(first.status, 201, JSON.stringify(first.body));
    assert.equal(first.headers['idempotent-replayed'], undefined);
    // Same body, keys in another order: the same request.
    const second = await create(o.token, { meta: { b: 2, a: 1 }, context: 'once', target: PHONE, type: 'call' }, { headers: { 'idempotency-key': 'key-1' } });
    assert.equal(second.status, 201, JSON.stringify(second.body));
    assert.equal(second.headers['idempotent-replayed'], 'true');
    assert.equal(second.body.task.id, first.body.task.id);
    assert.deepEqual(second.body.task, first.body.task);
    assert.equal((await rowsOf(o.id)).length, 1);

    const other = await create(o.token, { ...body, context: 'twice' }, { headers: { 'idempotency-key': 'key-1' } });
    expectError(other, 422, 'key-1', first.body.task.id);
    assert.equal((await rowsOf(o.id)).length, 1);

    // Another key is another task; no key is always a new task.
    const fresh = await create(o.token, body, { headers: { 'idempotency-key': 'key-2' } });
    assert.equal(fresh.status, 201);
    assert.notEqual(fresh.body.task.id, first.body.task.id);
    assert.equal((await create(o.token, body)).status, 201);
    assert.equal((await create(o.token, body)).status, 201);
    assert.equal((await rowsOf(o.id)).length, 4);
  });

  it('Idempotency-Key must be 1 to 255 characters', async () => {
    const { o } = await tenant();
    expectError(await create(o.token, { type: 'ping' }, { headers: { 'idempotency-key': 'k'.repeat(256) } }), 400, 'Idempotency-Key');
    expectError(await create(o.token, { type: 'ping' }, { headers: { 'idempotency-key': '' } }), 400, 'Idempotency-Key');
    assert.equal((await rowsOf(o.id)).length, 0);
    assert.equal((await create(o.token, { type: 'ping' }, { headers: { 'idempotency-key': 'k'.repeat(255) } })).status, 201);
  });

  it('Idempotency-Key: organizations use the same key independently', async () => {
    const { r, o } = await tenant();
    const o2 = await h().organization(r.id);
    const body = { type: 'call', target: PHONE };
    const a = await create(o.token, body, { headers: { 'idempotency-key': 'shared' } });
    const b = await create(o2.token, { ...body, context: 'different body' }, { headers: { 'idempotency-key': 'shared' } });
    assert.equal(a.status, 201, JSON.stringify(a.body));
    assert.equal(b.status, 201, JSON.stringify(b.body));
    assert.equal(b.headers['idempotent-replayed'], undefined);
    assert.notEqual(a.body.task.id, b.body.task.id);
    assert.equal(b.body.task.organizationId, o2.id);
    // Each replays its own.
    const a2 = await create(o.token, body, { headers: { 'idempotency-key': 'shared' } });
    assert.equal(a2.body.task.id, a.body.task.id);
    // The reseller acting on o2 shares o2's keys.
    const b2 = await create(r.token, { ...body, context: 'different body' }, { query: { targetAccountId: o2.id }, headers: { 'idempotency-key': 'shared' } });
    assert.equal(b2.status, 201);
    assert.equal(b2.body.task.id, b.body.task.id);
    assert.equal(b2.headers['idempotent-replayed'], 'true');
  });

  it('Idempotency-Key: an agent does not get another agent\'s task back through its organization\'s key (422, the task not named)', async () => {
    const { o } = await tenant();
    const b = await h().agent(o.id);
    const headers = { 'idempotency-key': 'org-key' };
    const byOrg = await create(o.token, { type: 'ping' }, { headers });
    assert.equal(byOrg.status, 201);
    assert.equal(byOrg.body.task.accountId, o.agentId);
    const byAgent = await create(b.token, { type: 'ping' }, { headers });
    expectError(byAgent, 422, 'org-key');
    assert.ok(!byAgent.body.message.includes(byOrg.body.task.id), byAgent.body.message);
    expectError(await create(b.token, { type: 'call', target: PHONE }, { headers }), 422, 'org-key');
    assert.ok(!(await create(b.token, { type: 'call', target: PHONE }, { headers })).body.message.includes(byOrg.body.task.id));
    assert.equal((await rowsOf(o.id)).length, 1);
    // The agent's own keys replay for it, and the organization (which sees all) may replay them.
    const own = await create(b.token, { type: 'ping' }, { headers: { 'idempotency-key': 'agent-key' } });
    assert.equal(own.body.task.accountId, b.id);
    const ownAgain = await create(b.token, { type: 'ping' }, { headers: { 'idempotency-key': 'agent-key' } });
    assert.equal(ownAgain.headers['idempotent-replayed'], 'true');
    assert.equal(ownAgain.body.task.id, own.body.task.id);
    const orgAgain = await create(o.token, { type: 'ping' }, { headers: { 'idempotency-key': 'agent-key' } });
    assert.equal(orgAgain.status, 201);
    assert.equal(orgAgain.body.task.id, own.body.task.id);
  });

  it('Idempotency-Key: a key first used more than 24 hours ago is free again', async () => {
    const { o } = await tenant();
    const headers = { 'idempotency-key': 'daily-run' };
    const first = await create(o.token, { type: 'call', target: PHONE }, { headers });
    assert.equal(first.status, 201);
    // 23 hours old: still held.
    await h().database.db.updateTable('tasks').set({ created_at: Date.now() - 23 * 3600_000 }).where('id', '=', first.body.task.id).execute();
    expectError(await create(o.token, { type: 'call', target: PHONE2 }, { headers }), 422, 'daily-run');
    // 25 hours old: free, even with another body.
    await h().database.db.updateTable('tasks').set({ created_at: Date.now() - 25 * 3600_000 }).where('id', '=', first.body.task.id).execute();
    const again = await create(o.token, { type: 'call', target: PHONE2 }, { headers });
    assert.equal(again.status, 201, JSON.stringify(again.body));
    assert.equal(again.headers['idempotent-replayed'], undefined);
    assert.notEqual(again.body.task.id, first.body.task.id);
    assert.equal(again.body.task.target, PHONE2);
    // The key now belongs to the new task.
    const replay = await create(o.token, { type: 'call', target: PHONE2 }, { headers });
    assert.equal(replay.body.task.id, again.body.task.id);
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    const rows = await rowsOf(o.id);
    assert.equal(rows.length, 2);
    assert.equal(rows.find((x) => x.id === first.body.task.id)!.idempotency_key, null);
  });

  it('Idempotency-Key: five concurrent identical requests create exactly one task', async () => {
    const { o } = await tenant();
    for (let round = 0; round < 3; round++) {
      const headers = { 'idempotency-key': `burst-${round}` };
      const answers = await Promise.all(Array.from({ length: 5 }, () => create(o.token, { type: 'call', target: PHONE }, { headers })));
      for (const a of answers) assert.equal(a.status, 201, JSON.stringify(a.body));
      assert.equal(new Set(answers.map((a) => a.body.task.id)).size, 1);
      assert.equal(answers.filter((a) => a.headers['idempotent-replayed'] === undefined).length, 1, 'one created it, four replayed');
    }
    assert.equal((await rowsOf(o.id)).length, 3);
    const s = await stats(o.token);
    assert.equal(s.byState.pending, 3, 'counts follow the rows, not the requests');
  });

  // ── GET /api/v2/tasks ───────────────────────────────────────────────────────

  it('list: limit, offset and total', async () => {
    const { o } = await tenant();
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await made(o.token, { type: 'ping' })).id);
    const page1 = await list(o.token, { limit: 3 });
    assert.equal(page1.status, 200, JSON.stringify(page1.body));
    assert.equal(page1.body.success, true);
    assert.equal(page1.body.total, 7);
    assert.equal(page1.body.limit, 3);
    assert.equal(page1.body.offset, 0);
    assert.equal(page1.body.tasks.length, 3);
    const page3 = await list(o.token, { limit: 3, offset: 6 });
    assert.equal(page3.body.total, 7);
    assert.equal(page3.body.tasks.length, 1);
    const beyond = await list(o.token, { limit: 3, offset: 10 });
    assert.equal(beyond.body.total, 7);
    assert.deepEqual(beyond.body.tasks, []);
    const all = await list(o.token);
    assert.equal(all.body.limit, 100);
    assert.deepEqual(all.body.tasks.map((t: any) => t.id), [...ids].reverse(), 'newest first by default');
    const pages = [];
    for (let off = 0; off < 7; off += 3) pages.push(...(await list(o.token, { limit: 3, offset: off })).body.tasks.map((t: any) => t.id));
    assert.deepEqual(pages, [...ids].reverse(), 'pages neither repeat nor skip');
    expectError(await list(o.token, { limit: 0 }), 400, 'limit');
    expectError(await list(o.token, { limit: 1001 }), 400, 'limit');
    expectError(await list(o.token, { offset: -1 }), 400, 'offset');
  });

  it('list: sort by createdAt, updatedAt or scheduledFor, ascending or descending', async () => {
    const { o } = await tenant();
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push((await made(o.token, { type: 'ping' })).id);
    // Distinct times per column, in three different orders.
    const base = Date.now() - 3600_000;
    const times: Record<string, [number, number, number]> = {
      [ids[0]]: [1, 3, 2], [ids[1]]: [2, 1, 4], [ids[2]]: [3, 4, 1], [ids[3]]: [4, 2, 3],
    };
    for (const [id, [c, u, s]] of Object.entries(times)) {
      await h().database.db.updateTable('tasks')
        .set({ created_at: base + c * 60_000, updated_at: base + u * 60_000, scheduled_for: base + 3600_000 + s * 60_000 })
        .where('id', '=', id).execute();
    }
    const order = async (sort: string, ord?: string) => {
      const res = await list(o.token, { sort, ...(ord ? { order: ord } : {}) });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.tasks.map((t: any) => t.id);
    };
    const by = (col: 0 | 1 | 2) => [...ids].sort((a, b) => times[a][col] - times[b][col]);
    assert.deepEqual(await order('createdAt', 'asc'), by(0));
    assert.deepEqual(await order('createdAt', 'desc'), by(0).reverse());
    assert.deepEqual(await order('createdAt'), by(0).reverse(), 'desc by default');
    assert.deepEqual(await order('updatedAt', 'asc'), by(1));
    assert.deepEqual(await order('updatedAt', 'desc'), by(1).reverse());
    assert.deepEqual(await order('scheduledFor', 'asc'), by(2));
    assert.deepEqual(await order('scheduledFor', 'DESC'), by(2).reverse());
    const res = await list(o.token, { sort: 'scheduledFor', order: 'asc' });
    assert.deepEqual(res.body.tasks.map((t: any) => t.scheduledFor), by(2).map((id) => Math.floor((base + 3600_000 + times[id][2] * 60_000) / 1000)));

    // Tasks without a schedule come after the scheduled ones in either order, on both engines
    // (SQLite and PostgreSQL put NULLs at opposite ends by themselves); among themselves by id.
    const u1 = (await made(o.token, { type: 'ping' })).id;
    const u2 = (await made(o.token, { type: 'ping' })).id;
    assert.deepEqual(await order('scheduledFor', 'asc'), [...by(2), u1, u2]);
    assert.deepEqual(await order('scheduledFor', 'desc'), [...by(2).reverse(), u2, u1]);

    expectError(await list(o.token, { sort: 'target' }), 400, 'sort', 'createdAt');
    expectError(await list(o.token, { order: 'up' }), 400, 'order');
  });

  it('list: since and until bound updatedAt (inclusive, unix seconds)', async () => {
    const { o } = await tenant();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await made(o.token, { type: 'ping' })).id);
    const base = (nowSec() - 10_000) * 1000;
    // updated_at: base+0s, +100s, +200s (plus 500 ms), +300s, +400s; created_at in reverse order.
    for (const [i, id] of ids.entries()) {
      await h().database.db.updateTable('tasks')
        .set({ updated_at: base + i * 100_000 + (i === 2 ? 500 : 0), created_at: base - i * 1000 }).where('id', '=', id).execute();
    }
    const s0 = base / 1000;
    const ids_ = async (q: Record<string, unknown>) => {
      const res = await list(o.token, { sort: 'updatedAt', order: 'asc', ...q });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.total, res.body.tasks.length);
      return res.body.tasks.map((t: any) => t.id);
    };
    assert.deepEqual(await ids_({ since: s0 + 100 }), ids.slice(1));
    assert.deepEqual(await ids_({ since: s0 + 101 }), ids.slice(2));
    assert.deepEqual(await ids_({ until: s0 + 200 }), ids.slice(0, 3), 'until covers its whole second');
    assert.deepEqual(await ids_({ until: s0 + 199 }), ids.slice(0, 2));
    assert.deepEqual(await ids_({ since: s0 + 100, until: s0 + 300 }), ids.slice(1, 4));
    assert.deepEqual(await ids_({ since: s0 + 200, until: s0 + 200 }), [ids[2]]);
    assert.deepEqual(await ids_({ since: s0 + 1000 }), []);
    expectError(await list(o.token, { since: s0 + 300, until: s0 + 100 }), 400, 'since', 'until');
    expectError(await list(o.token, { since: 'yesterday' }), 400, 'since');
  });

  it('list: filters by state, type and accountId; bad values are 400 naming the parameter', async () => {
    const { o } = await tenant();
    const second = await h().agent(o.id);
    const call = await made(o.token, { type: 'call', target: PHONE });
    const text = await made(o.token, { type: 'text', target: PHONE, content: 'hi' });
    const ping = await made(o.token, { type: 'ping' });
    const mine = await made(o.token, { type: 'call', target: PHONE2, accountId: second.id });
    assert.equal((await update(o.token, call.id, { state: 'canceled' })).status, 200);
    const ids = async (q: Record<string, unknown>) => {
      const res = await list(o.token, q);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.total, res.body.tasks.length);
      return res.body.tasks.map((t: any) => t.id).sort();
    };
    assert.deepEqual(await ids({ state: 'canceled' }), [call.id]);
    assert.deepEqual(await ids({ state: 'pending' }), [text.id, ping.id, mine.id].sort());
    assert.deepEqual(await ids({ state: 'finished' }), []);
    assert.deepEqual(await ids({ type: 'call' }), [call.id, mine.id].sort());
    assert.deepEqual(await ids({ type: 'text' }), [text.id]);
    assert.deepEqual(await ids({ type: 'ping' }), [ping.id]);
    assert.deepEqual(await ids({ accountId: second.id }), [mine.id]);
    assert.deepEqual(await ids({ accountId: o.agentId }), [call.id, text.id, ping.id].sort());
    assert.deepEqual(await ids({ type: 'call', state: 'pending' }), [mine.id]);
    assert.deepEqual(await ids({ accountId: second.id, state: 'canceled' }), []);

    expectError(await list(o.token, { state: 'done' }), 400, 'state', 'pending');
    expectError(await list(o.token, { type: 'fax' }), 400, 'type');
    expectError(await list(o.token, { accountId: 'abc' }), 400, 'accountId');
  });

  // ── GET / POST / DELETE /api/v2/tasks/{taskId} ──────────────────────────────

  it('a missing task and another organization\'s task are 404 for GET, POST and DELETE; the other\'s task is unchanged', async () => {
    const { r, o } = await tenant();
    const o2 = await h().organization(r.id);
    const theirs = await made(o2.token, { type: 'call', target: PHONE, context: 'theirs' });
    for (const id of ['tsk_missing', theirs.id, 'x'.repeat(90)]) {
      expectError(await get(o.token, id), 404, 'not found');
      expectError(await update(o.token, id, { context: 'mine now' }), 404, 'not found');
      expectError(await update(o.token, id, { state: 'canceled' }), 404, 'not found');
      expectError(await remove(o.token, id), 404, 'not found');
    }
    // The same reseller, acting on the wrong organization, does not reach it either.
    expectError(await get(r.token, theirs.id, { targetAccountId: o.id }), 404);
    expectError(await remove(r.token, theirs.id, { targetAccountId: o.id }), 404);
    const still = await get(o2.token, theirs.id);
    assert.equal(still.status, 200);
    assert.deepEqual(still.body.task, theirs);
    assert.equal((await get(r.token, theirs.id, { targetAccountId: o2.id })).body.task.id, theirs.id);
  });

  it('a pending task\'s context, taskContext, greeting, waitToGreet and scheduledFor can be changed', async () => {
    const { o } = await tenant();
    const t = await made(o.token, { type: 'call', target: PHONE, context: 'old', greeting: 'Hi', meta: { keep: true }, externalTaskId: 'x1' });
    await h().database.db.updateTable('tasks').set({ updated_at: Date.now() - 60_000 }).where('id', '=', t.id).execute();
    const at = nowSec() + 7200;
    const res = await update(o.token, t.id, { context: 'new', taskContext: 'only this call', greeting: 'Hello again', waitToGreet: true, scheduledFor: at });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.success, true);
    assert.equal(res.body.message, 'Task updated successfully.');
    const u = res.body.task;
    assert.equal(u.context, 'new');
    assert.equal(u.taskContext, 'only this call');
    assert.equal(u.greeting, 'Hello again');
    assert.equal(u.waitToGreet, true);
    assert.equal(u.scheduledFor, at);
    assert.equal(u.runAt, at);
    assert.equal(u.state, 'pending');
    assert.ok(u.updatedAt >= nowSec() - 2, 'updatedAt moves');
    // Untouched fields stay.
    assert.equal(u.target, PHONE);
    assert.deepEqual(u.meta, { keep: true });
    assert.equal(u.externalTaskId, 'x1');
    assert.equal(u.createdAt, t.createdAt);
    assert.deepEqual((await get(o.token, t.id)).body.task, u);

    // One field at a time leaves the others; null clears a text field.
    const only = await update(o.token, t.id, { waitToGreet: false });
    assert.equal(only.status, 200);
    assert.equal(only.body.task.waitToGreet, false);
    assert.equal(only.body.task.context, 'new');
    assert.equal(only.body.task.scheduledFor, at);
    const cleared = await update(o.token, t.id, { greeting: null });
    assert.equal(cleared.status, 200, JSON.stringify(cleared.body));
    assert.equal(cleared.body.task.greeting, null);
    assert.equal(cleared.body.task.context, 'new');
    // scheduledFor 0 makes it due now again.
    const now = await update(o.token, t.id, { scheduledFor: 0 });
    assert.equal(now.status, 200);
    assert.equal(now.body.task.scheduledFor, null);
    assert.ok(Math.abs(now.body.task.runAt - nowSec()) <= 2);
  });

  it('an update is checked like a new task: bad values are 400 naming the field and change nothing', async () => {
    const { o } = await tenant();
    const t = await made(o.token, { type: 'text', target: PHONE, content: 'hello', context: 'c' });
    expectError(await update(o.token, t.id, { scheduledFor: Date.now() + 60_000 }), 400, 'scheduledFor', 'milliseconds');
    expectError(await update(o.token, t.id, { scheduledFor: nowSec() - 3600 }), 400, 'scheduledFor', 'past');
    expectError(await update(o.token, t.id, { context: 'x'.repeat(10_001) }), 400, 'context');
    expectError(await update(o.token, t.id, { waitToGreet: 'perhaps' }), 400, 'waitToGreet');
    expectError(await update(o.token, t.id, { content: 'x'.repeat(1601) }), 400, 'content');
    expectError(await update(o.token, t.id, { state: 'running' }), 400, 'state', 'canceled');
    expectError(await update(o.token, t.id, { state: 'finished' }), 400, 'state');
    expectError(await update(o.token, t.id, { state: 'pending', context: 'sneaky' }), 400, 'state');
    expectError(await update(o.token, t.id, {}), 400, 'nothing to update');
    // Unknown fields are ignored, as everywhere: alone they are nothing to update.
    expectError(await update(o.token, t.id, { note: 'x', targetNumber: PHONE2 }), 400, 'nothing to update');
    assert.deepEqual((await get(o.token, t.id)).body.task, t);
    const ok = await update(o.token, t.id, { content: 'changed' });
    assert.equal(ok.status, 200);
    assert.equal(ok.body.task.content, 'changed');
  });

  it('a call\'s voicemail choice is changed by update and cleared with null (the agent\'s choice again); it is checked like a new task\'s', async () => {
    const { o } = await tenant();
    const t = await made(o.token, { type: 'call', target: PHONE });
    assert.equal(t.voicemail, null);
    const set = await update(o.token, t.id, { voicemail: { action: 'leave-message', message: 'Please call us back.' } });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.deepEqual(set.body.task.voicemail, { action: 'leave-message', message: 'Please call us back.' });
    assert.deepEqual((await get(o.token, t.id)).body.task.voicemail, { action: 'leave-message', message: 'Please call us back.' });
    // Other fields leave it alone.
    assert.deepEqual((await update(o.token, t.id, { context: 'new' })).body.task.voicemail, { action: 'leave-message', message: 'Please call us back.' });
    expectError(await update(o.token, t.id, { voicemail: { action: 'shout' } }), 400, 'voicemail.action');
    expectError(await update(o.token, t.id, { voicemail: { action: 'hangup', beep: true } }), 400, 'voicemail.beep');
    const cleared = await update(o.token, t.id, { voicemail: null });
    assert.equal(cleared.status, 200, JSON.stringify(cleared.body));
    assert.equal(cleared.body.task.voicemail, null);
    const text = await made(o.token, { type: 'text', target: PHONE, content: 'hi' });
    expectError(await update(o.token, text.id, { voicemail: { action: 'hangup' } }), 400, 'voicemail', 'call tasks');
  });

  it('canceling a pending task: canceled with finishedAt and a task.canceled event; again is harmless; then nothing can change', async () => {
    const { o } = await tenant();
    const t = await made(o.token, { type: 'call', target: PHONE, scheduledFor: nowSec() + 3600 });
    const res = await update(o.token, t.id, { state: 'canceled' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.message, 'Task canceled.');
    assert.equal(res.body.task.state, 'canceled');
    assert.ok(res.body.task.finishedAt >= t.createdAt && res.body.task.finishedAt <= nowSec());
    assert.equal(res.body.task.startedAt, null);
    assert.equal(res.body.task.runAt, null);
    assert.deepEqual((await get(o.token, t.id)).body.task, res.body.task);
    const events = await h().database.db.selectFrom('task_events').selectAll().where('task_id', '=', t.id).orderBy('id').execute();
    assert.deepEqual(events.map((e) => e.type), ['task.pending', 'task.canceled']);
    assert.equal(events[1].org_id, o.id);
    const payload = JSON.parse(events[1].payload);
    assert.equal(payload.task.id, t.id);
    assert.equal(payload.task.state, 'canceled');

    const again = await update(o.token, t.id, { state: 'canceled' });
    assert.equal(again.status, 200);
    assert.match(again.body.message, /already canceled/);
    // An unknown field beside the cancel changes nothing about that.
    const withReason = await update(o.token, t.id, { state: 'canceled', reason: 'customer asked' });
    assert.equal(withReason.status, 200, JSON.stringify(withReason.body));
    assert.match(withReason.body.message, /already canceled/);
    expectError(await update(o.token, t.id, { context: 'too late' }), 409, 'canceled', 'pending');
    expectError(await update(o.token, t.id, { scheduledFor: nowSec() + 60 }), 409);
    assert.equal((await h().database.db.selectFrom('task_events').select('id').where('task_id', '=', t.id).execute()).length, 2);
    const s = await stats(o.token);
    assert.equal(s.byState.pending, 0);
    assert.equal(s.byState.canceled, 1);
  });

  it('changes and a cancel in one request: the changes are saved and the task canceled', async () => {
    const { o } = await tenant();
    const t = await made(o.token, { type: 'call', target: PHONE });
    const res = await update(o.token, t.id, { context: 'why it was canceled', state: 'canceled' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.task.state, 'canceled');
    assert.equal(res.body.task.context, 'why it was canceled');
  });

  it('deleting a pending or canceled task removes it and its count', async () => {
    const { o } = await tenant();
    const a = await made(o.token, { type: 'call', target: PHONE });
    const b = await made(o.token, { type: 'call', target: PHONE });
    const c = await made(o.token, { type: 'text', target: PHONE, content: 'x' });
    assert.equal((await update(o.token, c.id, { state: 'canceled' })).status, 200);
    assert.deepEqual((await stats(o.token)).byState.pending, 2);
    const res = await remove(o.token, a.id);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.success, true);
    assert.equal(res.body.message, 'Task deleted successfully.');
    expectError(await get(o.token, a.id), 404);
    expectError(await remove(o.token, a.id), 404);
    const events = await h().database.db.selectFrom('task_events').select('id').where('task_id', '=', a.id).execute();
    assert.deepEqual(events, [], 'its events went with it');
    let s = await stats(o.token);
    assert.equal(s.byState.pending, 1);
    assert.equal(s.total, 2);
    assert.equal((await remove(o.token, c.id)).status, 200);
    s = await stats(o.token);
    assert.equal(s.byState.canceled, 0);
    assert.equal(s.total, 1);
    assert.deepEqual((await rowsOf(o.id)).map((x) => x.id), [b.id]);
    assert.equal((await list(o.token)).body.total, 1);
  });

  // ── stats ───────────────────────────────────────────────────────────────────

  it('stats count tasks by state as they are created, canceled and deleted', async () => {
    const { r, o } = await tenant();
    const zero = await stats(o.token);
    assert.deepEqual(zero, { success: true, total: 0, byState: { pending: 0, running: 0, finished: 0, failed: 0, canceled: 0, errored: 0 } });
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push((await made(o.token, { type: i % 2 ? 'text' : 'call', target: PHONE, content: 'x' })).id);
    await made(o.token, { type: 'ping' });
    await update(o.token, ids[0], { state: 'canceled' });
    await update(o.token, ids[1], { state: 'canceled' });
    await remove(o.token, ids[2]);
    const s = await stats(o.token);
    assert.deepEqual(s.byState, { pending: 3, running: 0, finished: 0, failed: 0, canceled: 2, errored: 0 });
    assert.equal(s.total, 5);
    // The same numbers through the reseller; another organization's are its own.
    assert.deepEqual(await stats(r.token, { targetAccountId: o.id }), s);
    const o2 = await h().organization(r.id);
    assert.equal((await stats(o2.token)).total, 0);
    // They agree with the rows.
    const rows = await rowsOf(o.id);
    assert.equal(rows.filter((x) => x.state === 'pending').length, 3);
    assert.equal(rows.filter((x) => x.state === 'canceled').length, 2);
  });

  // ── limits ──────────────────────────────────────────────────────────────────

  const getLimits = (token: string, query?: Record<string, unknown>) => h().call('GET', '/api/v2/tasks/limits', { token, query });
  const setLimits = (token: string, body: unknown, query?: Record<string, unknown>) =>
    h().call('POST', '/api/v2/tasks/limits', { token, body, query });
  const DEFAULTS = { daily: {}, concurrencyPerRun: 5, cooldowns: {},
    retries: {} };
  const HOURS = { timezone: 'America/New_York', days: [5, 1, 2, 3, 4], start: '09:00', end: '17:30' };

  it('limits: defaults are no business hours, no daily caps, 5 at once, no cooldowns', async () => {
    const { r, o } = await tenant();
    const res = await getLimits(o.token);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body, { success: true, limits: DEFAULTS });
    assert.deepEqual((await getLimits(r.token, { targetAccountId: o.id })).body.limits, DEFAULTS);
  });

  it('limits: an organization sets its business hours, cooldowns and retries, but not daily caps or concurrency (403)', async () => {
    const { r, o } = await tenant();
    const res = await setLimits(o.token, { businessHours: HOURS, cooldowns: { calls: 3600 }, retries: { busy: 2 } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.success, true);
    assert.equal(res.body.message, 'Task limits updated successfully.');
    const expected = {
      ...DEFAULTS, businessHours: { ...HOURS, days: [1, 2, 3, 4, 5] }, cooldowns: { calls: 3600 },
      retries: { busy: 2 },
    };
    assert.deepEqual(res.body.limits, expected);
    assert.deepEqual((await getLimits(o.token)).body.limits, expected);

    expectError(await setLimits(o.token, { daily: { calls: 100 } }), 403, 'daily');
    expectError(await setLimits(o.token, { concurrencyPerRun: 50 }), 403, 'concurrencyPerRun');
    // Nothing of a refused request is applied, not even its allowed parts.
    expectError(await setLimits(o.token, { cooldowns: { texts: 60 }, concurrencyPerRun: 50 }), 403, 'concurrencyPerRun');
    // The organization's own token with its own id as target is still the organization.
    expectError(await setLimits(o.token, { daily: { calls: 100 } }, { targetAccountId: o.id }), 403, 'daily');
    assert.deepEqual((await getLimits(o.token)).body.limits, expected);
    // An agent changes none of it.
    const agentToken = await h().tokenFor(o.agentId);
    expectError(await setLimits(agentToken, { cooldowns: { calls: 1 } }), 403);
    assert.deepEqual((await getLimits(agentToken)).body.limits, expected, 'but reads them');

    const byReseller = await setLimits(r.token, { daily: { calls: 100, texts: 0 }, concurrencyPerRun: 2 }, { targetAccountId: o.id });
    assert.equal(byReseller.status, 200, JSON.stringify(byReseller.body));
    assert.deepEqual(byReseller.body.limits, { ...expected, daily: { calls: 100, texts: 0 }, concurrencyPerRun: 2 });
    const byPartner = await setLimits(h().adminToken, { concurrencyPerRun: 3 }, { targetAccountId: o.id });
    assert.equal(byPartner.status, 200, JSON.stringify(byPartner.body));
    assert.equal(byPartner.body.limits.concurrencyPerRun, 3);
    assert.deepEqual((await getLimits(o.token)).body.limits.daily, { calls: 100, texts: 0 });
    const sem = await h().database.db.selectFrom('org_semaphores').selectAll().where('org_id', '=', o.id).executeTakeFirst();
    assert.equal(sem?.max_running, 3, 'the semaphore follows concurrencyPerRun');
  });

  it('limits: every refusal is a 400 naming the field, and changes nothing', async () => {
    const { r, o } = await tenant();
    const q = { targetAccountId: o.id };
    // The row the organization's plan wrote when it was created (docs/billing.md), untouched by every refusal.
    const stored = () => h().database.db.selectFrom('org_task_limits').selectAll().where('org_id', '=', o.id).executeTakeFirst();
    const before = await stored();
    const cases: [unknown, string][] = [
      [{ businessHours: { ...HOURS, timezone: 'Mars/Olympus_Mons' } }, 'businessHours.timezone'],
      [{ businessHours: { ...HOURS, timezone: '' } }, 'businessHours.timezone'],
      [{ businessHours: { ...HOURS, days: [1, 7] } }, 'businessHours.days[1]'],
      [{ businessHours: { ...HOURS, days: [] } }, 'businessHours.days'],
      [{ businessHours: { ...HOURS, days: [1, 1] } }, 'businessHours.days'],
      [{ businessHours: { ...HOURS, days: 'weekdays' } }, 'businessHours.days'],
      [{ businessHours: { ...HOURS, start: '25:00' } }, 'businessHours.start'],
      [{ businessHours: { ...HOURS, start: '9am' } }, 'businessHours.start'],
      [{ businessHours: { ...HOURS, end: '24:30' } }, 'businessHours.end'],
      [{ businessHours: { ...HOURS, start: '17:00', end: '09:00' } }, 'businessHours.end'],
      [{ businessHours: { ...HOURS, start: '09:00', end: '09:00' } }, 'businessHours.end'],
      [{ businessHours: { ...HOURS, lunch: '12:00' } }, 'businessHours.lunch'],
      [{ businessHours: { timezone: 'UTC', days: [1] } }, 'businessHours.start'],
      [{ businessHours: 'always' }, 'businessHours'],
      [{ daily: { call: 5 } }, 'daily.call'],
      [{ daily: { calls: -1 } }, 'daily.calls'],
      [{ daily: { texts: 1.5 } }, 'daily.texts'],
      [{ daily: 10 }, 'daily'],
      [{ concurrencyPerRun: 0 }, 'concurrencyPerRun'],
      [{ concurrencyPerRun: 1001 }, 'concurrencyPerRun'],
      [{ concurrencyPerRun: 'many' }, 'concurrencyPerRun'],
      [{ cooldowns: { sms: 60 } }, 'cooldowns.sms'],
      [{ cooldowns: { calls: -1 } }, 'cooldowns.calls'],
      [{ cooldowns: { calls: 400 * 86_400 } }, 'cooldowns.calls'],
      [{ cooldowns: 'short' }, 'cooldowns'],
      [{ retries: { busy: 6 } }, 'retries.busy'],
      [{ retries: { noAnswer: -1 } }, 'retries.noAnswer'],
      [{ retries: { delaySec: 86_401 } }, 'retries.delaySec'],
      [{ retries: { failed: 1 } }, 'retries.failed'],
      [[], 'body'],
    ];
    for (const [body, field] of cases) {
      expectError(await setLimits(r.token, body, q), 400, field);
    }
    // The organization gets the same 400 for what it may change.
    expectError(await setLimits(o.token, { businessHours: { ...HOURS, days: [7] } }), 400, 'businessHours.days[0]');
    expectError(await setLimits(o.token, { cooldowns: { call: 1 } }), 400, 'cooldowns.call');
    assert.deepEqual((await getLimits(o.token)).body.limits, DEFAULTS);
    assert.deepEqual(await stored(), before);
  });

  it('limits persist and merge: daily and cooldowns key by key, businessHours as a whole, null removes', async () => {
    const { r, o } = await tenant();
    const q = { targetAccountId: o.id };
    const set = async (body: unknown, token = r.token, query: Record<string, unknown> | undefined = q) => {
      const res = await setLimits(token, body, query);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual((await getLimits(o.token)).body.limits, res.body.limits, 'what was answered is what is stored');
      return res.body.limits;
    };
    let l = await set({ daily: { calls: 10 } });
    assert.deepEqual(l.daily, { calls: 10 });
    l = await set({ daily: { texts: 5 } });
    assert.deepEqual(l.daily, { calls: 10, texts: 5 });
    l = await set({ cooldowns: { calls: 60 } }, o.token, undefined);
    assert.deepEqual(l.cooldowns, { calls: 60 });
    l = await set({ cooldowns: { texts: 30 } }, o.token, undefined);
    assert.deepEqual(l.cooldowns, { calls: 60, texts: 30 });
    assert.deepEqual(l.daily, { calls: 10, texts: 5 }, 'the organization\'s change kept the reseller\'s caps');
    l = await set({ businessHours: HOURS }, o.token, undefined);
    assert.deepEqual(l.businessHours, { ...HOURS, days: [1, 2, 3, 4, 5] }, 'days kept sorted');
    l = await set({ businessHours: { timezone: 'Europe/Berlin', days: [6], start: '10:00', end: '24:00' } }, o.token, undefined);
    assert.deepEqual(l.businessHours, { timezone: 'Europe/Berlin', days: [6], start: '10:00', end: '24:00' }, 'replaced as a whole');
    l = await set({ concurrencyPerRun: 9 });
    assert.equal(l.concurrencyPerRun, 9);
    l = await set({ daily: { calls: null } });
    assert.deepEqual(l.daily, { texts: 5 });
    l = await set({ cooldowns: null }, o.token, undefined);
    assert.deepEqual(l.cooldowns, {});
    l = await set({ businessHours: null }, o.token, undefined);
    assert.ok(!('businessHours' in l), 'a removed window is left out, not null (the contract types it as an object)');
    l = await set({ concurrencyPerRun: null });
    assert.equal(l.concurrencyPerRun, 5);
    l = await set({ retries: { noAnswer: 1, delaySec: 60 } }, o.token, undefined);
    assert.deepEqual(l.retries, { noAnswer: 1, delaySec: 60 });
    l = await set({ retries: { busy: 3 } }, o.token, undefined);
    assert.deepEqual(l.retries, { busy: 3, noAnswer: 1, delaySec: 60 });
    l = await set({ retries: null });
    assert.deepEqual(l.retries, {});
    l = await set({ daily: null });
    assert.deepEqual(l, DEFAULTS);
    // Unknown top-level keys are ignored, as elsewhere; an empty update changes nothing.
    assert.deepEqual(await set({ somethingElse: 1 }), DEFAULTS);
    assert.deepEqual(await set({}), DEFAULTS);
  });

  it('limits: a time zone is stored by its canonical name', async () => {
    const { o } = await tenant();
    const res = await setLimits(o.token, { businessHours: { ...HOURS, timezone: 'america/new_york' } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.limits.businessHours.timezone, 'America/New_York');
  });

  // ── tenancy ─────────────────────────────────────────────────────────────────

  it('a reseller must name the organization (403 without targetAccountId) and only reaches its own subtree (404)', async () => {
    const { r, o } = await tenant();
    const r2 = await h().reseller();
    const t = await made(o.token, { type: 'call', target: PHONE });
    const calls: [string, string, unknown?][] = [
      ['POST', '/api/v2/tasks', { type: 'call', target: PHONE }],
      ['GET', '/api/v2/tasks'],
      ['GET', '/api/v2/tasks/stats'],
      ['GET', '/api/v2/tasks/dailyCounts'],
      ['GET', '/api/v2/tasks/limits'],
      ['POST', '/api/v2/tasks/limits', { cooldowns: { calls: 5 } }],
      ['GET', `/api/v2/tasks/${t.id}`],
      ['POST', `/api/v2/tasks/${t.id}`, { state: 'canceled' }],
      ['DELETE', `/api/v2/tasks/${t.id}`],
    ];
    for (const [method, url, body] of calls) {
      expectError(await h().call(method, url, { token: r.token, body }), 403, 'targetAccountId');
      expectError(await h().call(method, url, { token: r2.token, body, query: { targetAccountId: o.id } }), 404);
      // A reseller is not a target for task operations either.
      expectError(await h().call(method, url, { token: r.token, body, query: { targetAccountId: r.id } }), 404, 'not an Organization');
    }
    assert.deepEqual((await get(o.token, t.id)).body.task, t, 'untouched');
    assert.equal((await rowsOf(o.id)).length, 1);
    assert.deepEqual((await getLimits(o.token)).body.limits, DEFAULTS);
    // Its own reseller and the partner above reach it.
    const viaReseller = await create(r.token, { type: 'ping' }, { query: { targetAccountId: o.id } });
    assert.equal(viaReseller.status, 201, JSON.stringify(viaReseller.body));
    assert.equal(viaReseller.body.task.organizationId, o.id);
    assert.equal(viaReseller.body.task.accountId, o.agentId);
    assert.equal((await list(h().adminToken, { targetAccountId: o.id })).body.total, 2);
  });

  it('an agent acts on its organization but sees, changes and creates only its own tasks', async () => {
    const { r, o } = await tenant();
    const b = await h().agent(o.id);
    const aToken = await h().tokenFor(o.agentId);
    const ofA = await made(o.token, { type: 'call', target: PHONE });
    const ofB = await made(o.token, { type: 'call', target: PHONE2, accountId: b.id });
    const byB = await made(b.token, { type: 'text', target: PHONE, content: 'from b' });
    assert.equal(byB.accountId, b.id, 'an agent\'s task runs as that agent');
    assert.equal(byB.organizationId, o.id);
    expectError(await create(b.token, { type: 'call', target: PHONE, accountId: o.agentId }), 400, 'accountId');
    assert.equal((await made(b.token, { type: 'ping', accountId: b.id })).accountId, b.id);

    const listed = await list(b.token);
    assert.equal(listed.status, 200);
    assert.equal(listed.body.total, 3);
    assert.ok(listed.body.tasks.every((t: any) => t.accountId === b.id));
    assert.ok(listed.body.tasks.some((t: any) => t.id === ofB.id));
    expectError(await list(b.token, { accountId: o.agentId }), 404, 'accountId');
    assert.equal((await list(b.token, { accountId: b.id })).body.total, 3);
    assert.deepEqual((await list(aToken)).body.tasks.map((t: any) => t.id), [ofA.id]);
    // The organization sees all of them.
    assert.equal((await list(o.token)).body.total, 4);

    expectError(await get(b.token, ofA.id), 404);
    expectError(await update(b.token, ofA.id, { state: 'canceled' }), 404);
    expectError(await remove(b.token, ofA.id), 404);
    assert.equal((await get(aToken, ofA.id)).body.task.state, 'pending');
    assert.equal((await get(b.token, ofB.id)).status, 200);
    assert.equal((await update(b.token, ofB.id, { context: 'b changed it' })).status, 200);

    // A reseller naming the agent acts as it.
    const asB = await list(r.token, { targetAccountId: b.id });
    assert.equal(asB.body.total, 3);
    expectError(await get(r.token, ofA.id, { targetAccountId: b.id }), 404);
    const madeAsB = await made(r.token, { type: 'ping' }, { targetAccountId: b.id });
    assert.equal(madeAsB.accountId, b.id);
  });
});

// ── With a worker: tasks that run ─────────────────────────────────────────────

forEachEngine('tasks API with a worker', (h) => {
  const { get, update, remove, stats, made, tenant } = api(h);

  const settle = (token: string, id: string, states = ['finished', 'failed', 'canceled']) =>
    waitFor(`task ${id} in ${states.join('|')}`, async () => {
      const res = await get(token, id);
      return states.includes(res.body.task?.state) ? res.body.task : undefined;
    });

  it('a finished task can be neither canceled nor changed (409), and can be deleted', async () => {
    const { o } = await tenant();
    const t = await made(o.token, { type: 'call', target: PHONE, context: 'run me' });
    const done = await settle(o.token, t.id);
    assert.equal(done.state, 'finished', JSON.stringify(done));
    assert.ok(done.startedAt !== null && done.finishedAt !== null);
    assert.equal(done.provider, 'simulated');
    expectError(await update(o.token, t.id, { state: 'canceled' }), 409, 'finished');
    expectError(await update(o.token, t.id, { context: 'changed' }), 409, 'finished', 'pending');
    expectError(await update(o.token, t.id, { scheduledFor: nowSec() + 60 }), 409, 'finished');
    assert.deepEqual((await get(o.token, t.id)).body.task, done, 'unchanged');
    assert.equal((await stats(o.token)).byState.finished, 1);
    const res = await remove(o.token, t.id);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    expectError(await get(o.token, t.id), 404);
    const s = await stats(o.token);
    assert.equal(s.byState.finished, 0);
    assert.equal(s.total, 0);
  });

  it('a running task cannot be deleted (409); canceling it ends the call and it becomes canceled', async () => {
    const { r, o } = await tenant();
    // This organization's SIMULATED calls last 30 s, long enough to be caught running.
    const p = await h().call('POST', '/api/v2/numberingProvider', {
      token: r.token, query: { targetOrganizationId: o.id }, body: { providerId: 'simulated', config: { callSeconds: '30' }, default: true },
    });
    assert.equal(p.status, 200, JSON.stringify(p.body));
    const t = await made(o.token, { type: 'call', target: PHONE });
    const running = await settle(o.token, t.id, ['running']);
    assert.ok(running.startedAt !== null);
    expectError(await remove(o.token, t.id), 409, 'running', 'cancel');
    expectError(await update(o.token, t.id, { context: 'mid-call' }), 409, 'running');
    assert.equal((await stats(o.token)).byState.running, 1);

    // An unknown field beside the cancel is ignored (it is not a change of a running task).
    const cancel = await update(o.token, t.id, { state: 'canceled', reason: 'customer asked' });
    assert.equal(cancel.status, 200, JSON.stringify(cancel.body));
    assert.match(cancel.body.message, /Cancel requested/);
    assert.ok(cancel.body.task.cancelRequestedAt !== null);
    const ended = await settle(o.token, t.id);
    assert.equal(ended.state, 'canceled', JSON.stringify(ended));
    assert.ok(ended.finishedAt - ended.startedAt < 20, 'ended early, not after the 30 s call');
    const events = await h().database.db.selectFrom('task_events').select('type').where('task_id', '=', t.id).orderBy('id').execute();
    assert.deepEqual(events.map((e) => e.type), ['task.pending', 'task.running', 'task.canceled']);
    const s = await stats(o.token);
    assert.equal(s.byState.running, 0);
    assert.equal(s.byState.canceled, 1);
    assert.equal((await remove(o.token, t.id)).status, 200);
  });

  it('stats after runs: finished, failed and pending as they happened', async () => {
    const { o } = await tenant();
    const ids = [
      (await made(o.token, { type: 'call', target: PHONE })).id,
      (await made(o.token, { type: 'call', target: PHONE2 })).id,
      (await made(o.token, { type: 'text', target: PHONE, content: 'hello' })).id,
      (await made(o.token, { type: 'call', target: '+15005550004' })).id, // the SIMULATED carrier fails it
      (await made(o.token, { type: 'ping' })).id,
    ];
    const later = await made(o.token, { type: 'call', target: PHONE, scheduledFor: nowSec() + 3600 });
    const states = [];
    for (const id of ids) states.push((await settle(o.token, id)).state);
    assert.deepEqual(states, ['finished', 'finished', 'finished', 'failed', 'finished']);
    const s = await stats(o.token);
    assert.deepEqual(s.byState, { pending: 1, running: 0, finished: 4, failed: 1, canceled: 0, errored: 1 });
    assert.equal(s.total, 6);
    assert.equal((await get(o.token, later.id)).body.task.state, 'pending');
  });

  it('dailyCounts count the calls and texts started today, on the organization\'s own date', async () => {
    const r = await h().reseller();
    // 25 hours apart: at any instant these two zones are on different dates.
    const zones = ['Pacific/Kiritimati', 'Pacific/Pago_Pago', undefined];
    const localDate = (tz: string) => new Intl.DateTimeFormat('en-CA', { timeZone: tz, year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());
    for (const zone of zones) {
      const o = await h().organization(r.id, zone ? { timezone: zone } : {});
      const tz = zone ?? 'UTC';
      const dayBefore = localDate(tz);
      const ids = [
        (await made(o.token, { type: 'call', target: PHONE })).id,
        (await made(o.token, { type: 'call', target: '+15005550004' })).id, // fails, but it was started
        (await made(o.token, { type: 'text', target: PHONE2, content: 'hi' })).id,
        (await made(o.token, { type: 'ping' })).id, // pings are not counted
      ];
      await made(o.token, { type: 'call', target: PHONE, scheduledFor: nowSec() + 3600 }); // not started
      for (const id of ids) await settle(o.token, id);
      const res = await h().call('GET', '/api/v2/tasks/dailyCounts', { token: o.token });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      if (localDate(tz) !== dayBefore) continue; // midnight passed in that zone while the test ran
      assert.deepEqual(res.body.counts, { calls: 2, texts: 1, tasks: 3, date: dayBefore, timezone: tz }, zone);
      assert.deepEqual(res.body.limits, {});
      const viaReseller = await h().call('GET', '/api/v2/tasks/dailyCounts', { token: r.token, query: { targetAccountId: o.id } });
      assert.deepEqual(viaReseller.body.counts, res.body.counts);
      // Another day has none.
      const other = await h().call('GET', '/api/v2/tasks/dailyCounts', { token: o.token, query: { date: '2001-02-03' } });
      assert.equal(other.status, 200);
      assert.deepEqual(other.body.counts, { calls: 0, texts: 0, tasks: 0, date: '2001-02-03', timezone: tz });
    }
    const r2 = await h().reseller();
    const o2 = await h().organization(r2.id);
    expectError(await h().call('GET', '/api/v2/tasks/dailyCounts', { token: o2.token, query: { date: '03/02/2001' } }), 400, 'date');
    expectError(await h().call('GET', '/api/v2/tasks/dailyCounts', { token: o2.token, query: { date: '2026-02-30' } }), 400, 'date');
    expectError(await h().call('GET', '/api/v2/tasks/dailyCounts', { token: o2.token, query: { date: '2026-13-01' } }), 400, 'date');
    assert.equal((await h().call('GET', '/api/v2/tasks/dailyCounts', { token: o2.token, query: { date: '2028-02-29' } })).status, 200, 'a leap day exists');
  });

  it('daily caps set by the reseller are reported with the counts', async () => {
    const { r, o } = await tenant();
    const set = await h().call('POST', '/api/v2/tasks/limits', { token: r.token, query: { targetAccountId: o.id }, body: { daily: { calls: 50, texts: 20 } } });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    const res = await h().call('GET', '/api/v2/tasks/dailyCounts', { token: o.token });
    assert.deepEqual(res.body.limits, { calls: 50, texts: 20 });
  });
}, { CALLPLANE_SIMULATED_CALL_SECONDS: '0.2' }, { worker: true });
