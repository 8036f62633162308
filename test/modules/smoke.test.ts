import assert from 'node:assert/strict';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';

forEachEngine('ladder smoke', (h) => {
  it('builds partner → reseller → organization → agent and reads each with its own token', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const a = await h().agent(o.id);
    for (const [id, token] of [[r.id, r.token], [o.id, o.token], [a.id, a.token]] as const) {
      const res = await h().call('GET', '/api/v2/account', { token });
      assert.equal(res.status, 200);
      assert.equal(res.body.id, id);
    }
  });
});
