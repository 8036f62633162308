// engine.completeMany: several held rows settled in one transaction, each guarded like complete(),
// with the batch hook called once per final state (or the per-row hook when there is none).
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import { QueueEngine, type QueueOptions } from '../../src/queue/engine.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { insertTasks, task, tenant } from './fixtures.ts';

type Tasks = QueueOptions<'tasks'>;

forEachEngine('queue engine completeMany', (h) => {
  const engine = (opts: Partial<Tasks> = {}) =>
    new QueueEngine<'tasks'>({ table: 'tasks', workerId: 'w-many', leaseMs: 60_000, ...opts });

  it('settles every held row, skips a lost lease, and calls the batch hook once per final state', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    const calls: { ids: string[]; from: string; to: string }[] = [];
    const e = engine({ onTransitions: async (_tx, rows, from, to) => void calls.push({ ids: rows.map((r) => r.id), from, to }) });
    const ids = await insertTasks(db, t, [{ run_at: Date.now() - 10 }, { run_at: Date.now() - 9 }, { run_at: Date.now() - 8 }, { run_at: Date.now() - 7 }]);
    const claimed = (await e.claim(db, 10)).filter((r) => ids.includes(r.id));
    assert.equal(claimed.length, 4);
    calls.length = 0;
    const [a, b, c, d] = ids.map((id) => claimed.find((r) => r.id === id)!);
    const out = await e.completeMany(db, [
      { lease: a, state: 'finished', set: { result: '"a"' } },
      { lease: b, state: 'failed', set: { error: 'b failed' } },
      { lease: { id: c.id, attempt: c.attempt + 1 }, state: 'finished' }, // not the attempt this worker holds
      { lease: d, state: 'finished' },
    ]);
    assert.deepEqual(out.map((r) => r?.state), ['finished', 'failed', undefined, 'finished']);
    assert.equal((await task(db, a.id)).result, '"a"');
    assert.equal((await task(db, b.id)).error, 'b failed');
    assert.equal((await task(db, c.id)).state, 'running', 'a lost lease changes nothing');
    assert.deepEqual(calls.sort((x, y) => x.to.localeCompare(y.to)), [
      { ids: [b.id], from: 'running', to: 'failed' },
      { ids: [a.id, d.id], from: 'running', to: 'finished' },
    ]);
    await e.complete(db, c, { state: 'finished' });
  });

  it('one statement writes each row its own values: text, numbers and nulls per row, alike or not, and unset columns kept', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    const e = engine();
    const ids = await insertTasks(db, t, [0, 1, 2, 3, 4].map((i) => ({ run_at: Date.now() - 10 + i })));
    const claimed = (await e.claim(db, 10)).filter((r) => ids.includes(r.id));
    const [a, b, c, d, x] = ids.map((id) => claimed.find((r) => r.id === id)!);
    await db.updateTable('tasks').set({ provider: 'kept', error: 'old error' }).where('id', 'in', ids).execute();
    const out = await e.completeMany(db, [
      { lease: a, state: 'finished', set: { result: '{"n":1}', provider: 'twilio', max_attempts: 7 } },
      { lease: b, state: 'finished', set: { result: '{"n":2}', error: null, max_attempts: 5 } },
      { lease: c, state: 'finished', set: { result: "it's \"quoted\"; drop table tasks; --", provider: 'twilio' } },
      { lease: d, state: 'finished', set: { error: null } },
      { lease: { id: x.id, attempt: x.attempt + 1 }, state: 'finished', set: { result: 'not mine' } },
    ]);
    assert.deepEqual(out.map((r) => r?.id), [a.id, b.id, c.id, d.id, undefined]);
    const rows = new Map((await db.selectFrom('tasks').selectAll().where('id', 'in', ids).execute()).map((r) => [r.id, r]));
    const pick = (id: string) => { const r = rows.get(id)!; return [r.state, r.result, r.error, r.provider, r.max_attempts]; };
    assert.deepEqual(pick(a.id), ['finished', '{"n":1}', 'old error', 'twilio', 7]);
    assert.deepEqual(pick(b.id), ['finished', '{"n":2}', null, 'kept', 5]);
    assert.deepEqual(pick(c.id), ['finished', "it's \"quoted\"; drop table tasks; --", 'old error', 'twilio', a.max_attempts]);
    assert.deepEqual(pick(d.id), ['finished', null, null, 'kept', a.max_attempts]);
    assert.deepEqual(pick(x.id).slice(0, 2), ['running', null], 'a lost lease changes nothing');
    for (const id of [a.id, b.id, c.id, d.id]) assert.equal(rows.get(id)!.lease_owner, null);
  });

  it('a patch with an SQL expression is written row by row, beside the others', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    const e = engine();
    const ids = await insertTasks(db, t, [{ run_at: Date.now() - 10 }, { run_at: Date.now() - 9 }]);
    const claimed = (await e.claim(db, 10)).filter((r) => ids.includes(r.id));
    const [a, b] = ids.map((id) => claimed.find((r) => r.id === id)!);
    const out = await e.completeMany(db, [
      { lease: a, state: 'failed', set: { error: sql<string>`'computed ' || ${'here'}` } },
      { lease: b, state: 'failed', set: { error: 'plain' } },
    ]);
    assert.deepEqual(out.map((r) => r?.error), ['computed here', 'plain']);
  });

  it('without a batch hook the per-row hook runs for each row that moved', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    const seen: string[] = [];
    const e = engine({ onTransition: async (_tx, row, _from, to) => void seen.push(`${row.id}:${to}`) });
    const ids = await insertTasks(db, t, [{ run_at: Date.now() - 10 }, { run_at: Date.now() - 9 }]);
    const claimed = (await e.claim(db, 10)).filter((r) => ids.includes(r.id));
    seen.length = 0;
    await e.completeMany(db, claimed.map((lease) => ({ lease, state: 'canceled' as const })));
    assert.deepEqual(seen.sort(), ids.map((id) => `${id}:canceled`).sort());
  });
});
