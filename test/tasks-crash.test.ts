// A worker killed with SIGKILL in the middle of a run, with real `node --import tsx src/main.ts
// serve` processes: every accepted task still ends, and no task ever ran twice at once. On
// PostgreSQL an API process and two workers share the database and the survivor rescues the dead
// worker's tasks; on SQLite (one process per DATA_DIR) the killed `--role all` process is replaced
// by a new one on the same DATA_DIR.
// @lane wall
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { openDatabase } from '../src/db/index.ts';
import { PG_URL } from './helpers/harness.ts';
import { startReceiver, type Receiver } from './helpers/receiver.ts';
import { createScratchPgDatabase } from './helpers/scratch-pg.ts';
import { eventsByTask, historyProblems, overlappingAttempts, attemptIntervals, type TaskEvent } from './helpers/task-events.ts';
import { killServes, serveRequest, startServe, stopServe, type ServeProcess as Proc } from './helpers/serve-process.ts';
import { waitFor as until } from './helpers/wait.ts';

const ADMIN = `crash-test-admin-${crypto.randomBytes(12).toString('hex')}`;
const LEASE_MS = 4000;
const CALLS = 150;
const PINGS = 50;
const LEASE_LOST = /lost its lease/;

const dirs: string[] = [];
const receivers: Receiver[] = [];
after(async () => {
  killServes();
  for (const r of receivers) await r.close();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

const serve = startServe;
const stop = stopServe;
const request = (port: number, method: string, url: string, body?: unknown) => serveRequest(port, ADMIN, method, url, body);

/** A task attempt the killed worker held when it died, as the database had it then. */
interface Held { id: string; attempt: number; leaseExpiresAt: number }

/**
 * What is wrong with the rescues: every rescue ("lost its lease") must be of an attempt the dead
 * worker held, made after that attempt's lease had expired (until then the worker might have been
 * alive and running it), and every attempt the dead worker held must have been rescued.
 */
function rescueProblems(held: Held[], events: Map<string, TaskEvent[]>): string[] {
  const problems: string[] = [];
  const heldBy = new Map(held.map((h) => [`${h.id}#${h.attempt}`, h]));
  const rescued = new Set<string>();
  for (const [id, list] of events) {
    for (const e of list) {
      if (!(e.type === 'task.retrying' || e.type === 'task.failed') || !LEASE_LOST.test(e.error ?? '')) continue;
      const key = `${id}#${e.attempt}`;
      const h = heldBy.get(key);
      if (!h) { problems.push(`${key} was rescued but the dead worker did not hold it (a live lease was taken)`); continue; }
      if (e.at <= h.leaseExpiresAt) problems.push(`${key} was rescued at ${e.at}, before its lease expired at ${h.leaseExpiresAt}`);
      rescued.add(key);
    }
  }
  for (const key of heldBy.keys()) if (!rescued.has(key)) problems.push(`${key} was held by the dead worker and never rescued`);
  return problems;
}

describe('task history checks used by the crash test', () => {
  const ev = (type: string, at: number, attempt: number, error: string | null = null): TaskEvent =>
    ({ id: `evt_${String(at).padStart(6, '0')}`, taskId: 't1', type: `task.${type}`, at, attempt, error });

  it('flag two attempts of one task running at the same time', () => {
    const overlapping = [ev('pending', 0, 0), ev('running', 10, 1), ev('running', 20, 2), ev('retrying', 30, 1), ev('finished', 40, 2)];
    assert.deepEqual(overlappingAttempts(attemptIntervals(overlapping).intervals), ['attempts 1 [10, 30] and 2 [20, 40] overlap']);
    const problems = historyProblems({ id: 't1', state: 'finished', attempt: 2 }, overlapping);
    assert.ok(problems.some((p) => /overlap/.test(p)), problems.join('\n'));
    assert.ok(problems.some((p) => /claimed while running/.test(p)), problems.join('\n'));
    // Even listed in an order that hides it, the pairing by attempt finds it.
    const hidden = [ev('pending', 0, 0), ev('running', 10, 1), ev('retrying', 30, 1), ev('running', 20, 2), ev('finished', 40, 2)];
    assert.equal(overlappingAttempts(attemptIntervals(hidden).intervals).length, 1);
  });

  it('accept a rescued attempt followed by a clean second one', () => {
    const ok = [ev('pending', 0, 0), ev('running', 10, 1), ev('retrying', 2100, 1, 'worker lost its lease'), ev('running', 2110, 2), ev('finished', 2600, 2)];
    assert.deepEqual(historyProblems({ id: 't1', state: 'finished', attempt: 2 }, ok), []);
    assert.deepEqual(rescueProblems([{ id: 't1', attempt: 1, leaseExpiresAt: 2050 }], new Map([['t1', ok]])), []);
  });

  it('flag a rescue before the lease expired, a rescue of a live worker\'s task, and a held task never rescued', () => {
    const early = [ev('pending', 0, 0), ev('running', 10, 1), ev('retrying', 500, 1, 'worker lost its lease'), ev('running', 510, 2), ev('finished', 900, 2)];
    assert.match(rescueProblems([{ id: 't1', attempt: 1, leaseExpiresAt: 2050 }], new Map([['t1', early]])).join(), /before its lease expired/);
    assert.match(rescueProblems([], new Map([['t1', early]])).join(), /did not hold it/);
    const clean = [ev('pending', 0, 0), ev('running', 10, 1), ev('finished', 500, 1)];
    assert.match(rescueProblems([{ id: 't1', attempt: 1, leaseExpiresAt: 2050 }], new Map([['t1', clean]])).join(), /never rescued/);
  });
});

async function crashRun(engine: 'sqlite' | 'postgres'): Promise<string> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-crash-'));
  dirs.push(dataDir);
  const scratch = engine === 'postgres' ? await createScratchPgDatabase(PG_URL!, 'callplane_crash') : undefined;
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    CALLPLANE_ADMIN_TOKEN: ADMIN,
    CALLPLANE_SECRET_KEY: crypto.randomBytes(32).toString('base64'),
    CALLPLANE_TASK_LEASE_MS: String(LEASE_MS),
    CALLPLANE_SIMULATED_CALL_SECONDS: '0.5',
    // Several processes on one machine: each SIP listener on a free loopback port.
    CALLPLANE_SIP_HOST: '127.0.0.1',
    CALLPLANE_SIP_PORT: '0',
    // The organization's task subscription (its events are the history checked below) goes to a loopback receiver.
    CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
    ...(scratch ? { DATABASE_URL: scratch.url } : {}),
  };
  const procs: Proc[] = [];
  const open = () => openDatabase(scratch ? { databaseUrl: scratch.url, poolSize: 2 } : { sqliteFile: path.join(dataDir, 'callplane.db') });
  try {
    // PostgreSQL: the API process migrates first, then two workers. SQLite: one process does all.
    let api = await serve(engine === 'postgres' ? 'api' : 'all', env);
    procs.push(api);
    let victim = api;
    if (engine === 'postgres') {
      victim = await serve('worker', env);
      procs.push(victim, await serve('worker', env));
    }

    const me = await request(api.port, 'GET', '/api/v2/account');
    assert.equal(me.status, 200, JSON.stringify(me.body));
    const reseller = await request(api.port, 'POST', `/api/v2/createReseller?targetPartnerId=${me.body.id}`, { resellerName: 'Crash reseller' });
    assert.equal(reseller.status, 201, JSON.stringify(reseller.body));
    const org = await request(api.port, 'POST', `/api/v2/createOrganization?targetResellerId=${reseller.body.reseller.id}`, { orgName: 'Crash org' });
    assert.equal(org.status, 201, JSON.stringify(org.body));
    const orgId: number = org.body.organization.id;
    const q = `targetAccountId=${orgId}`;
    // Task events are written for organizations with a task subscription only.
    const receiver = await startReceiver();
    receivers.push(receiver);
    const hook = await request(api.port, 'POST', `/api/v2/webhooks?${q}`, { url: `${receiver.url}/tasks`, label: 'history', type: 'task' });
    assert.equal(hook.status, 201, JSON.stringify(hook.body));
    assert.equal((await request(api.port, 'POST', `/api/v2/tasks/limits?${q}`, { concurrencyPerRun: 25 })).status, 200);

    const accepted: string[] = [];
    let nextNumber = 0;
    /** Submits `calls` calls (in batches of 5) and `pings` pings, pings first. */
    const submit = async (port: number, calls: number, pings: number) => {
      for (let i = 0; i < pings; i++) {
        const r = await request(port, 'POST', `/api/v2/tasks?${q}`, { type: 'ping' });
        assert.equal(r.status, 201, JSON.stringify(r.body));
        accepted.push(r.body.task.id);
      }
      for (let i = 0; i < calls; i += 5) {
        const targets = Array.from({ length: Math.min(5, calls - i) }, () => `+1500555${String(2000 + nextNumber++).padStart(4, '0')}`);
        const r = await request(port, 'POST', `/api/v2/agent/outboundCall?${q}`, { targets });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        accepted.push(...r.body.tasks.map((t: { id: string }) => t.id));
      }
    };

    // The first half, then SIGKILL while the victim is running several of them.
    await submit(api.port, CALLS / 2, PINGS / 2);
    const pid = victim.child.pid!;
    const db = open();
    let held: Held[];
    try {
      const victimRunning = () => db.db.selectFrom('tasks').select(['id', 'attempt', 'lease_expires_at'])
        .where('org_id', '=', orgId).where('state', '=', 'running').where('lease_owner', 'like', `%:${pid}:%`).execute();
      await until('the victim to be running several tasks', async () => (await victimRunning()).length >= 3, 20_000);
      victim.child.kill('SIGKILL');
      assert.equal((await victim.exited).signal, 'SIGKILL');
      // Nothing can change the dead worker's rows until a rescuer takes them after their leases.
      held = (await victimRunning()).map((r) => ({ id: r.id, attempt: r.attempt, leaseExpiresAt: Number(r.lease_expires_at) }));
    } finally {
      await db.close();
    }
    assert.ok(held.length >= 1, 'the kill found no task running: the test exercised nothing');

    if (engine === 'sqlite') {
      // The replacement takes over the stale pid file and the dead process's leases.
      api = await serve('all', env);
      procs.push(api);
    }
    await submit(api.port, CALLS / 2, PINGS / 2);
    assert.equal(accepted.length, CALLS + PINGS);

    // Every accepted task ends: the rescuer waits out the 4 s leases and checks every 5 s.
    await until('every accepted task to end', async () => {
      const s = await request(api.port, 'GET', `/api/v2/tasks/stats?${q}`);
      return s.status === 200 && s.body.total === accepted.length && s.body.byState.pending === 0 && s.body.byState.running === 0;
    }, 90_000);
    for (const p of procs) await stop(p);

    const check = open();
    try {
      const rows = await check.db.selectFrom('tasks').select(['id', 'state', 'attempt', 'error']).where('org_id', '=', orgId).execute();
      assert.deepEqual(rows.map((r) => r.id).sort(), [...accepted].sort());
      const notFinished = rows.filter((r) => r.state !== 'finished');
      assert.deepEqual(notFinished, [], 'every task ends finished');
      const events = await eventsByTask(check.db, accepted);
      assert.deepEqual(rows.flatMap((r) => historyProblems(r, events.get(r.id) ?? [])), []);
      assert.deepEqual(rescueProblems(held, events), []);
      // A rescued task ran exactly once more; every other task ran once.
      const heldIds = new Map(held.map((h) => [h.id, h.attempt]));
      for (const r of rows) assert.equal(r.attempt, (heldIds.get(r.id) ?? 0) + 1, `attempts of ${r.id}`);
      const semaphore = await check.db.selectFrom('org_semaphores').select('running').where('org_id', '=', orgId).executeTakeFirst();
      assert.equal(Number(semaphore?.running ?? 0), 0, 'the dead worker\'s semaphore slots were released by the rescues');
      const rescues = [...events.values()].flat().filter((e) => LEASE_LOST.test(e.error ?? '') && e.type === 'task.retrying');
      const waited = rescues.map((e) => e.at - held.find((h) => h.id === e.taskId)!.leaseExpiresAt);
      return `${held.length} tasks held by the killed worker, rescued ${Math.min(...waited)}–${Math.max(...waited)} ms after their leases expired`;
    } finally {
      await check.close();
    }
  } finally {
    for (const p of procs) p.child.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.exited));
    await scratch?.drop();
  }
}

describe('a worker killed in the middle of a run (SQLite: replaced on the same DATA_DIR)', () => {
  it(`all ${CALLS + PINGS} accepted tasks end finished; rescued attempts started only after the dead worker's leases expired; no attempts overlapped`,
    { timeout: 180_000 }, async (t) => t.diagnostic(await crashRun('sqlite')));
});

describe('a worker killed in the middle of a run (PostgreSQL: API + two workers, the survivor rescues)',
  { skip: PG_URL ? false : 'set TEST_DATABASE_URL=postgres://… to run the PostgreSQL half' }, () => {
    it(`all ${CALLS + PINGS} accepted tasks end finished; only the dead worker's tasks were rescued, after their leases expired; no attempts overlapped`,
      { timeout: 180_000 }, async (t) => t.diagnostic(await crashRun('postgres')));
  });
