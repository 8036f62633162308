// Group commit on a real database of each engine: jobs submitted together share one transaction,
// a failing job fails alone (the others are committed), and later jobs form the next group.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { GroupCommit } from '../../src/db/group-commit.ts';
import type { NewTask } from '../../src/db/types.ts';
import { newId } from '../../src/lib/ids.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { tenant } from '../queue/fixtures.ts';

forEachEngine('group commit', (h) => {
  const row = (t: { orgId: number; agentId: number }, id = newId('tsk')): NewTask => {
    const now = Date.now();
    return { id, org_id: t.orgId, account_id: t.agentId, type: 'ping', run_at: now, created_at: now, updated_at: now };
  };
  const stored = async (ids: string[]) =>
    (await h().database.db.selectFrom('tasks').select('id').where('id', 'in', ids).execute()).map((r) => r.id).sort();

  /** A GroupCommit inserting each job's rows, recording every group it writes. */
  const inserter = (opts: { maxSize?: number } = {}) => {
    const groups: number[] = [];
    let commits = 0;
    const gc = new GroupCommit<NewTask[], string[]>({
      db: h().database.db,
      size: (rows) => rows.length,
      ...opts,
      write: async (tx, jobs) => {
        groups.push(jobs.length);
        await tx.insertInto('tasks').values(jobs.flat()).execute();
        return jobs.map((rows) => rows.map((r) => r.id));
      },
      committed: () => void commits++,
    });
    return { gc, groups, commits: () => commits };
  };

  it('writes jobs submitted in the same turn of the event loop in one transaction, each answered with its own result', async () => {
    const t = await tenant(h());
    const { gc, groups, commits } = inserter();
    const jobs = Array.from({ length: 10 }, (_, i) => [row(t), ...(i % 2 ? [row(t)] : [])]);
    const results = await Promise.all(jobs.map((j) => gc.submit(j)));
    assert.deepEqual(groups, [10]);
    assert.equal(commits(), 1);
    assert.deepEqual(results, jobs.map((j) => j.map((r) => r.id)));
    assert.deepEqual(await stored(jobs.flat().map((r) => r.id)), jobs.flat().map((r) => r.id).sort());
  });

  it('a failing job fails alone: the group is written again job by job and the others are committed', async () => {
    const t = await tenant(h());
    const { gc, groups } = inserter();
    const taken = row(t);
    await h().database.db.insertInto('tasks').values(taken).execute();
    const good1 = [row(t)];
    const bad = [row(t), row(t, taken.id)]; // a duplicate primary key: all of this job or none of it
    const good2 = [row(t), row(t)];
    const outcomes = await Promise.allSettled([gc.submit(good1), gc.submit(bad), gc.submit(good2)]);
    assert.equal(outcomes[0].status, 'fulfilled');
    assert.equal(outcomes[1].status, 'rejected');
    assert.equal(outcomes[2].status, 'fulfilled');
    assert.deepEqual(groups, [3, 1, 1, 1]);
    const ids = [...good1, ...good2].map((r) => r.id);
    assert.deepEqual(await stored(ids), ids.sort());
    assert.deepEqual(await stored([bad[0].id]), [], 'the failing job wrote none of its rows');
  });

  it('jobs arriving while a group is written go into the next group; maxSize bounds a group', async () => {
    const t = await tenant(h());
    const { gc, groups } = inserter({ maxSize: 4 });
    const first = gc.submit([row(t)]);
    await new Promise((r) => setImmediate(r)); // the first group has started
    const later = Array.from({ length: 6 }, () => gc.submit([row(t)]));
    await Promise.all([first, ...later]);
    assert.deepEqual(groups, [1, 4, 2]);
  });

  it('a job larger than maxSize is written on its own', async () => {
    const t = await tenant(h());
    const { gc, groups } = inserter({ maxSize: 2 });
    const big = Array.from({ length: 5 }, () => row(t));
    const [a, b] = await Promise.all([gc.submit(big), gc.submit([row(t)])]);
    assert.equal(a.length, 5);
    assert.equal(b.length, 1);
    assert.deepEqual(groups, [1, 1]);
  });
});
