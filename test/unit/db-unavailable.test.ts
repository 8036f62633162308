// Which database errors the API answers with 503 (try again) rather than 500: the server could not
// be reached or went away, never a problem with the statement itself.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isDatabaseUnavailable, whileDatabaseAway } from '../../src/db/errors.ts';

const coded = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('isDatabaseUnavailable', () => {
  it('recognises refused and cut connections, a server shutting down, crashed or starting up, and pool timeouts', () => {
    for (const err of [
      coded('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'),
      coded('ECONNRESET'),
      coded('57P01', 'terminating connection due to administrator command'),
      coded('57P02', 'terminating connection because of crash of another server process'),
      coded('57P03', 'the database system is starting up'),
      coded('08006', 'connection failure'),
      coded('53300', 'sorry, too many clients already'),
      new Error('Connection terminated unexpectedly'),
      new Error('Client has encountered a connection error and is not queryable'),
      new Error('timeout exceeded when trying to connect'),
      new Error('Connection terminated due to connection timeout', { cause: new Error('Connection terminated unexpectedly') }),
      new AggregateError([coded('ECONNREFUSED'), coded('ECONNREFUSED')], ''),
      new Error('wrapped', { cause: coded('ECONNREFUSED') }),
    ]) assert.equal(isDatabaseUnavailable(err), true, String((err as Error).message));
  });

  it('leaves statement errors, constraint violations and everything else to be a 500 (or what they are)', () => {
    for (const err of [
      coded('23505', 'duplicate key value violates unique constraint'),
      coded('42P01', 'relation "x" does not exist'),
      coded('40001', 'could not serialize access'),
      coded('SQLITE_BUSY', 'database is locked'),
      coded('ENOENT'),
      new Error('Internal server error'),
      new TypeError('x is undefined'),
      undefined, null, 'a string', 42,
    ]) assert.equal(isDatabaseUnavailable(err), false, String(err instanceof Error ? err.message : err));
  });
});

describe('whileDatabaseAway', () => {
  it('runs the step again while the database is away, and answers what it answers once it is back', async () => {
    let calls = 0;
    const waits: unknown[] = [];
    const started = Date.now();
    const value = await whileDatabaseAway(async () => {
      calls++;
      if (calls < 3) throw new Error('Connection terminated unexpectedly');
      return 'recorded';
    }, { giveUp: () => false, onFirstWait: (err) => waits.push(err) });
    assert.equal(value, 'recorded');
    assert.equal(calls, 3);
    assert.equal(waits.length, 1, 'told once, at the first wait');
    assert.ok(Date.now() - started >= 290, 'waited 100 ms, then 200 ms');
  });

  it('throws a statement error at once, and a database-away error once told to give up', async () => {
    let calls = 0;
    await assert.rejects(whileDatabaseAway(async () => { calls++; throw coded('23505', 'duplicate key'); }, { giveUp: () => false }), /duplicate key/);
    assert.equal(calls, 1);
    calls = 0;
    await assert.rejects(whileDatabaseAway(async () => { calls++; throw coded('ECONNREFUSED', 'refused'); }, { giveUp: () => calls >= 2 }), /refused/);
    assert.equal(calls, 2);
  });
});
