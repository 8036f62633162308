// The agent a task runs as when it names none is the organization's oldest agent, as the accounts
// are at the moment of the request (SQLite keeps it between requests while accounts are unchanged).
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';

forEachEngine('default agent of a submission', (h) => {
  it('follows agents being deleted and created between submissions', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const submit = () => h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'ping' } });
    const first = await submit();
    assert.equal(first.status, 201, JSON.stringify(first.body));
    assert.equal(first.body.task.accountId, o.agentId);

    const second = await h().agent(o.id);
    const del = await h().call('DELETE', '/api/v2/deleteAccount', { token: o.token, query: { targetOrganizationId: o.id }, body: { targetAccountId: o.agentId } });
    assert.equal(del.status, 200, JSON.stringify(del.body));
    const after = await submit();
    assert.equal(after.status, 201, JSON.stringify(after.body));
    assert.equal(after.body.task.accountId, second.id, 'the next oldest agent');

    const del2 = await h().call('DELETE', '/api/v2/deleteAccount', { token: o.token, query: { targetOrganizationId: o.id }, body: { targetAccountId: second.id } });
    assert.equal(del2.status, 200, JSON.stringify(del2.body));
    const none = await submit();
    assert.equal(none.status, 400);
    assert.match(none.body.message, /has no agent account/);

    const third = await h().agent(o.id);
    const again = await submit();
    assert.equal(again.status, 201, JSON.stringify(again.body));
    assert.equal(again.body.task.accountId, third.id);
  });
});
