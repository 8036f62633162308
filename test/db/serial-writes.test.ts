// Database.serialWrites (src/db/index.ts), which lets the queues leave out the SELECT … FOR UPDATE
// that orders row locks before a multi-row update (src/queue/engine.ts): true only where every
// write transaction of every process runs one at a time. A PostgreSQL pool of one connection runs
// this process's transactions one at a time, but other processes share the database, so its
// lock ordering must stay.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openDatabase } from '../../src/db/index.ts';
import { PG_URL } from '../helpers/harness.ts';

describe('serial writes', () => {
  it('SQLite writes one transaction at a time', async () => {
    const database = openDatabase({});
    try {
      assert.equal(database.serialWrites, true);
      assert.equal(database.concurrentWriters, 1);
    } finally {
      await database.close();
    }
  });

  it('PostgreSQL never does, even through a pool of one connection', { skip: PG_URL ? false : 'set TEST_DATABASE_URL=postgres://… to run' }, async () => {
    const database = openDatabase({ databaseUrl: PG_URL!, poolSize: 1 });
    try {
      assert.equal(database.concurrentWriters, 1);
      assert.equal(database.serialWrites, false);
    } finally {
      await database.close();
    }
  });
});
