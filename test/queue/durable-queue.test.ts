// The durable-queue class every queue of a process is: rows enqueued in a transaction wake its
// runners (this process's at once, another process's through NOTIFY on commit), its worker is
// made at start and what runs beside the runner starts after it and stops around it, a queue
// built before its worker takes it by join, and a producer made before its queue (the turn and
// analysis queues': the conversation service adds rows with it) wakes the queue built on it later.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { DurableQueue, type DurableQueueSpec } from '../../src/queue/durable-queue.ts';
import { QueueProducer } from '../../src/queue/producer.ts';
import { errorText } from '../../src/queue/runner.ts';
import { listenForWakeups, Wakeups } from '../../src/queue/waker.ts';
import type { Database } from '../../src/db/index.ts';
import type { Executor } from '../../src/db/types.ts';
import { newId } from '../../src/lib/ids.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { insertTasks, secondDatabase, sleep, task, tenant, waitFor } from './fixtures.ts';

forEachEngine('durable queue', (h) => {
  const queues: DurableQueue<'tasks'>[] = [];
  /** A queue over tasks with a long poll, so only a wake-up explains a fast start; stopped at the end of its test. */
  const queue = (spec: Partial<DurableQueueSpec<'tasks'>> = {}, database: Database = h().database, wakeups = new Wakeups()) => {
    const q = new DurableQueue({ database, wakeups, pollMs: 5000, rescueEveryMs: 0 }, {
      producer: new QueueProducer('tasks', wakeups), name: 'test', leaseMs: 2000, concurrency: 2, errorPatch: (err) => ({ error: errorText(err) }), ...spec,
    });
    queues.push(q);
    return q;
  };
  const stopAll = async () => {
    await Promise.all(queues.map((q) => q.stop({ timeoutMs: 2000 })));
    queues.length = 0;
  };
  /** One due ping, written in the caller's transaction. */
  const add = async (tx: Executor, t: { orgId: number; agentId: number }) => {
    const now = Date.now();
    const id = newId('tsk');
    await tx.insertInto('tasks').values({ id, org_id: t.orgId, account_id: t.agentId, type: 'ping', run_at: now, created_at: now, updated_at: now }).execute();
    return id;
  };
  const finished = (id: string) => waitFor(`${id} to settle`, async () => {
    const row = await task(h().database.db, id);
    return row.state === 'finished' ? row : undefined;
  });

  it('rows enqueued in a transaction are run at once by an idle worker, and ended rows get finished_at', async () => {
    try {
      const t = await tenant(h());
      const ran: string[] = [];
      const q = queue({ worker: () => ({ handler: async (row) => void ran.push(row.id) }) });
      q.startWorker();
      await sleep(50); // idle: it has looked, found nothing, and sleeps on its 5 s poll
      const t0 = Date.now();
      const id = await q.enqueue(h().database.db, (tx) => add(tx, t));
      const row = await finished(id);
      assert.ok(Date.now() - t0 < 1000, `took ${Date.now() - t0} ms`);
      assert.deepEqual(ran, [id]);
      assert.ok(row.finished_at !== null && Number(row.finished_at) >= t0);
    } finally {
      await stopAll();
    }
  });

  it('another process\'s idle worker is woken by the NOTIFY the transaction sent (PostgreSQL)', async (t) => {
    if (h().engine !== 'postgres') return t.skip('one process on SQLite');
    const second = secondDatabase(h());
    const otherBus = new Wakeups();
    const listener = await listenForWakeups(second.database, otherBus);
    try {
      const ten = await tenant(h());
      const other = queue({ worker: () => ({ handler: async () => {} }) }, second.database, otherBus);
      other.startWorker();
      await sleep(50);
      const producer = queue(); // this process: no worker, its own bus
      const t0 = Date.now();
      const id = await producer.enqueue(h().database.db, (tx) => add(tx, ten));
      const row = await finished(id);
      assert.ok(Date.now() - t0 < 1000, `took ${Date.now() - t0} ms`);
      assert.equal(row.state, 'finished');
    } finally {
      await stopAll();
      await listener.close();
      await second.close();
    }
  });

  it('what runs beside the runner starts after it, stops before it, and what the handlers used is closed after them', async () => {
    try {
      const t = await tenant(h());
      const events: string[] = [];
      let letGo!: () => void;
      const held = new Promise<void>((r) => { letGo = r; });
      const q = queue({
        worker: () => ({
          handler: async () => { events.push('handler'); await held; events.push('handler done'); },
          started: () => void events.push('started'),
          stopping: async () => { events.push('stopping'); letGo(); },
          stopped: async () => void events.push('stopped'),
        }),
      });
      const [id] = await insertTasks(h().database.db, t, [{}]);
      q.startWorker();
      q.startWorker(); // once: a second start changes nothing
      q.notify();
      await waitFor('the handler to run', async () => events.includes('handler'));
      await q.stop({ timeoutMs: 2000 });
      assert.deepEqual(events, ['started', 'handler', 'stopping', 'handler done', 'stopped']);
      assert.equal((await task(h().database.db, id)).state, 'finished');
      await q.stop(); // stopped already: nothing runs again
      assert.equal(events.length, 5);
    } finally {
      await stopAll();
    }
  });

  it('a producer made before its queue: what it enqueues is run at once by the queue built on it; a write that added nothing due wakes nobody', async () => {
    try {
      const t = await tenant(h());
      const bus = new Wakeups();
      const producer = new QueueProducer('tasks', bus);
      let wakes = 0;
      bus.on('tasks', () => { wakes++; });
      // Nothing due (a write whose `due` says so): no wake-up, whatever it returned.
      assert.deepEqual(await producer.enqueue(h().database.db, async () => ({ added: false }), (r) => r.added), { added: false });
      assert.equal(await producer.enqueue(h().database.db, async () => null), null);
      assert.equal(wakes, 0);
      // A queue on another bus than the producer's would never hear it: refused when built.
      assert.throws(() => queue({ producer }), /another bus/);
      const ran: string[] = [];
      const q = queue({ producer, worker: () => ({ handler: async (row) => void ran.push(row.id) }) }, h().database, bus);
      assert.equal(q.producer, producer);
      q.startWorker();
      await sleep(50); // idle on its 5 s poll
      const t0 = Date.now();
      const id = await producer.enqueue(h().database.db, (tx) => add(tx, t));
      await finished(id);
      assert.ok(Date.now() - t0 < 1000, `took ${Date.now() - t0} ms`);
      assert.deepEqual(ran, [id]);
      assert.equal(wakes, 1);
    } finally {
      await stopAll();
    }
  });

  it('a queue built without a worker refuses to start until one is joined, then runs it', async () => {
    try {
      const t = await tenant(h());
      const q = queue();
      assert.throws(() => q.startWorker(), /no worker/);
      const ran: string[] = [];
      assert.equal(q.join(() => ({ handler: async (row) => void ran.push(row.id) })), q);
      q.startWorker();
      const id = await q.enqueue(h().database.db, (tx) => add(tx, t));
      await finished(id);
      assert.deepEqual(ran, [id]);
    } finally {
      await stopAll();
    }
  });
});
