// Context notes about one person: POST appends, GET returns them oldest first; targets are
// normalised (E.164, lowercased usernames); sizes are bounded; tenancy keeps organizations apart.
// @engines sqlite
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import type { Reply } from '../helpers/harness.ts';

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  for (const w of words) assert.ok(res.body.message.includes(w), `"${res.body.message}" should name ${w}`);
}

forEachEngine('context notes', (h) => {
  async function tenant() {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    return { r, o };
  }
  const post = (token: string, body: unknown, query: Record<string, unknown> = {}) =>
    h().call('POST', '/api/v2/context', { token, body, query });
  const get = (token: string, target: string, query: Record<string, unknown> = {}) =>
    h().call('GET', '/api/v2/context', { token, query: { target, ...query } });

  it('a second POST appends: GET returns every note, oldest first, for the normalised number', async () => {
    const { o } = await tenant();
    const a = await post(o.token, { target: '+1 (415) 555-2671', context: 'Customer Name: John Doe' });
    assert.equal(a.status, 201, JSON.stringify(a.body));
    assert.deepEqual([a.body.success, a.body.message, a.body.target, a.body.notes], [true, 'Context added successfully', '+14155552671', 1]);
    const b = await post(o.token, { target: '0014155552671', context: 'Car Model: Toyota Camry' });
    assert.equal(b.status, 201, JSON.stringify(b.body));
    assert.equal(b.body.notes, 2);
    const res = await get(o.token, '+14155552671');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.success, true);
    assert.equal(res.body.context, 'Customer Name: John Doe\nCar Model: Toyota Camry');
    assert.deepEqual(res.body.notes.map((n: any) => n.context), ['Customer Name: John Doe', 'Car Model: Toyota Camry']);
    assert.equal(typeof res.body.notes[0].createdAt, 'number');
    // The same person written another way reads the same notes.
    assert.equal((await get(o.token, '+1 415-555-2671')).body.context, res.body.context);
  });

  it('usernames are case-insensitive; a person without notes is 404', async () => {
    const { o } = await tenant();
    assert.equal((await post(o.token, { target: 'John_Doe', context: 'Prefers mornings' })).status, 201);
    assert.equal((await get(o.token, 'john_doe')).body.context, 'Prefers mornings');
    expectError(await get(o.token, 'jane_doe'), 404, 'jane_doe');
  });

  it('refuses bad targets and bad or oversized notes, naming the field', async () => {
    const { o } = await tenant();
    expectError(await post(o.token, { target: '+1555', context: 'x' }), 400, 'target');
    expectError(await post(o.token, { target: '   ', context: 'x' }), 400, 'target');
    expectError(await post(o.token, { target: 'john doe', context: 'x' }), 400, 'target');
    expectError(await post(o.token, { target: 'u'.repeat(129), context: 'x' }), 400, 'target');
    expectError(await post(o.token, { context: 'x' }), 400, 'target');
    expectError(await post(o.token, { target: 'john' }), 400, 'context');
    expectError(await post(o.token, { target: 'john', context: '  ' }), 400, 'context');
    expectError(await post(o.token, { target: 'john', context: 'x'.repeat(4001) }), 400, 'context', '4000');
    expectError(await get(o.token, 'not a phone or name'), 400, 'target');
    assert.equal((await post(o.token, { target: 'john', context: 'x'.repeat(4000) })).status, 201);
  });

  it('keeps at most 50 notes per person, even when appends race; the 51st is a 400 naming context', async () => {
    const { o } = await tenant();
    const replies = await Promise.all(Array.from({ length: 55 }, (_, i) => post(o.token, { target: '+14155550100', context: `note ${i}` })));
    assert.equal(replies.filter((r) => r.status === 201).length, 50, JSON.stringify(replies.filter((r) => r.status !== 201).map((r) => r.body)));
    for (const r of replies.filter((x) => x.status !== 201)) expectError(r, 400, 'context', '50');
    const res = await get(o.token, '+14155550100');
    assert.equal(res.body.notes.length, 50);
    // Another person is not affected.
    assert.equal((await post(o.token, { target: '+14155550101', context: 'fine' })).status, 201);
  });

  it("agents share their organization's notes; resellers name the organization with targetAccountId", async () => {
    const { r, o } = await tenant();
    const agent = await h().agent(o.id);
    assert.equal((await post(agent.token, { target: 'caller', context: 'from the agent' })).status, 201);
    assert.equal((await post(r.token, { target: 'caller', context: 'from the reseller' }, { targetAccountId: o.id })).status, 201);
    assert.equal((await post(h().adminToken, { target: 'caller', context: 'via the agent id' }, { targetAccountId: agent.id })).status, 201);
    const res = await get(o.token, 'caller');
    assert.equal(res.body.context, 'from the agent\nfrom the reseller\nvia the agent id');
    assert.equal((await get(agent.token, 'caller')).body.context, res.body.context);
    assert.equal((await get(r.token, 'caller', { targetAccountId: o.id })).body.context, res.body.context);
    // A reseller must say which organization.
    expectError(await post(r.token, { target: 'caller', context: 'x' }), 403);
    expectError(await get(r.token, 'caller'), 403);
  });

  it("another organization's notes are never visible: 404, and its ids are not found", async () => {
    const a = await tenant();
    const b = await tenant();
    assert.equal((await post(a.o.token, { target: '+14155552671', context: 'secret of A' })).status, 201);
    expectError(await get(b.o.token, '+14155552671'), 404);
    expectError(await get(b.o.token, '+14155552671', { targetAccountId: a.o.id }), 404, 'targetAccountId');
    expectError(await get(b.r.token, '+14155552671', { targetAccountId: a.o.id }), 404, 'targetAccountId');
    expectError(await post(b.o.token, { target: '+14155552671', context: 'x' }, { targetAccountId: a.o.id }), 404, 'targetAccountId');
    assert.equal((await post(b.o.token, { target: '+14155552671', context: 'B only' })).status, 201);
    assert.equal((await get(a.o.token, '+14155552671')).body.context, 'secret of A');
    assert.equal((await get(b.o.token, '+14155552671')).body.context, 'B only');
  });

  it('stores notes in context_notes for the organization', async () => {
    const { o } = await tenant();
    const agent = await h().agent(o.id);
    assert.equal((await post(agent.token, { target: '+14155552671', context: 'kept' })).status, 201);
    const rows = await h().database.db.selectFrom('context_notes').selectAll().where('org_id', '=', o.id).execute();
    assert.deepEqual(rows.map((r) => [r.target, r.seq, r.note]), [['+14155552671', 1, 'kept']]);
  });
});
