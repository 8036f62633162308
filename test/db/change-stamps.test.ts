// Change stamps (src/db/change-stamps.ts) on a real database of each engine: this process's own
// writes move the stamp once they have committed (a cache then drops what it read before), inside
// a transaction at its COMMIT, and a savepoint's rollback is not mistaken for the end of one.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import { changeStamp } from '../../src/db/index.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { waitFor } from '../helpers/wait.ts';

forEachEngine('change stamps', (h) => {
  const stampOf = () => {
    const stamp = changeStamp(h().database.db, ['accounts', 'tokens'])!;
    assert.ok(stamp, 'both engines offer a stamp of accounts and tokens');
    return stamp;
  };
  /** PostgreSQL's stamp is "off" (moves at every reading) until its listener is up. */
  const live = async () => {
    const stamp = stampOf();
    await waitFor('the change listener', async () => (stamp() === stamp() ? true : undefined), 5000, 20);
    return stamp;
  };
  const rename = (name: string) => h().database.db.updateTable('accounts').set({ name }).where('kind', '=', 'partner');

  it('holds still while nothing is written, and moves once a write of this process has committed', async () => {
    const stamp = await live();
    const s0 = stamp();
    assert.equal(stamp(), s0);
    await rename('Stamp partner 1').execute();
    assert.notEqual(stamp(), s0, 'moved as the write returned');
  });

  it('a write inside a transaction moves it by the time the transaction has committed', async () => {
    const stamp = await live();
    const s0 = stamp();
    let inside = '';
    await h().database.db.transaction().execute(async (tx) => {
      await tx.updateTable('accounts').set({ name: 'Stamp partner 2' }).where('kind', '=', 'partner').execute();
      inside = stamp();
    });
    assert.notEqual(stamp(), s0);
    // PostgreSQL moves it at the COMMIT: a read made by another request meanwhile saw the old row
    // and must not be kept under a stamp taken after the write. (SQLite counts the write as it is
    // prepared; its one connection has no other reader to race with.)
    if (h().engine === 'postgres') assert.equal(inside, s0, 'not before the commit');
  });

  it('a savepoint rolled back inside a transaction is not its end: the commit still moves the stamp, at once', async () => {
    const stamp = await live();
    const s0 = stamp();
    const started = Date.now();
    await h().database.db.transaction().execute(async (tx) => {
      await sql`savepoint before_rename`.execute(tx);
      await tx.updateTable('accounts').set({ name: 'Stamp partner 3' }).where('kind', '=', 'partner').execute();
      await sql`rollback to savepoint before_rename`.execute(tx);
      await tx.updateTable('tokens').set({ description: 'stamp test' }).where('id', '<', 0).execute();
    });
    assert.notEqual(stamp(), s0);
    // Taking the savepoint's rollback for the end would send the marker inside the transaction,
    // where it cannot arrive before the commit: the write would wait out the marker's 2 s.
    assert.ok(Date.now() - started < 1500, `committed in ${Date.now() - started} ms`);
  });

  it('a transaction begun with an isolation level (START TRANSACTION …) is followed like one begun with BEGIN', async () => {
    const stamp = await live();
    const s0 = stamp();
    const started = Date.now();
    let inside = '';
    await h().database.db.transaction().setIsolationLevel('serializable').execute(async (tx) => {
      await tx.updateTable('accounts').set({ name: 'Stamp partner 4' }).where('kind', '=', 'partner').execute();
      inside = stamp();
    });
    assert.notEqual(stamp(), s0);
    if (h().engine === 'postgres') assert.equal(inside, s0, 'not before the commit');
    // Taken for a write outside a transaction, its marker would wait inside the transaction for 2 s.
    assert.ok(Date.now() - started < 1500, `committed in ${Date.now() - started} ms`);
  });

  it('PostgreSQL refuses to stamp a table without a change trigger', (t) => {
    if (h().engine === 'sqlite') return t.skip('SQLite counts writes to any table');
    assert.throws(() => changeStamp(h().database.db, ['tasks']), /no change trigger on tasks/);
  });
});
