import assert from 'node:assert/strict';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import { idTime, newId } from '../../src/lib/ids.ts';
import { insertTasks, tenant } from './fixtures.ts';

forEachEngine('record ids', (h) => {
  it('ids carry their prefix and creation time and are unique', () => {
    const at = Date.UTC(2025, 0, 2, 3, 4, 5, 678);
    const id = newId('tsk', at);
    assert.match(id, /^tsk_[0-9A-HJKMNP-TV-Z]{26}$/);
    assert.equal(idTime(id), at);
    assert.equal(idTime('tsk_not-an-id'), null);
    const many = Array.from({ length: 10_000 }, () => newId('evt'));
    assert.equal(new Set(many).size, many.length);
  });

  it('ids made one after another sort in creation order as strings, within one millisecond too', () => {
    const ids = Array.from({ length: 5000 }, (_, i) => newId('tsk', 1_700_000_000_000 + Math.floor(i / 1000)));
    assert.deepEqual([...ids].sort(), ids);
    assert.ok(newId('tsk', 1) < newId('tsk', 2 ** 48 - 1));
    assert.throws(() => newId('tsk', 2 ** 48), RangeError);
  });

  it('the database orders task ids by creation time', async () => {
    const t = await tenant(h());
    const db = h().database.db;
    const ids = await insertTasks(db, t, Array.from({ length: 50 }, () => ({ state: 'finished' as const })));
    const stored = await db.selectFrom('tasks').select('id').where('org_id', '=', t.orgId).orderBy('id').execute();
    assert.deepEqual(stored.map((r) => r.id), ids);
  });
});
