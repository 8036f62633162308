// Suspension (accounts.active = 0, set by updateOrganization/updateAccount with active:false or a
// reseller created with resellerStatus:disabled) at every level of the ladder, on both engines:
// the suspended account's tokens and those of everything below it are refused with a 403 naming
// the suspended account; an ancestor may still read and reactivate it but not act through it; its
// pending tasks stay pending and run after reactivation; an INVITE for a suspended organization is
// refused with 480. Reactivation restores all of it.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { AuthCache } from '../../src/http/auth.ts';
import { newBranch } from '../../src/sip/endpoint.ts';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness } from '../helpers/harness.ts';
import { udpPeer, waitFor } from '../helpers/sip-peers.ts';

const FINAL = ['finished', 'failed', 'canceled'];

async function whoAmI(h: Harness, token: string) {
  return h.call('GET', '/api/v2/account', { token });
}

/** Asserts a 403 `{success:false, message}` whose message matches. */
function assertSuspended(r: { status: number; body: any }, message: RegExp) {
  assert.equal(r.status, 403, JSON.stringify(r.body));
  assert.equal(r.body.success, false);
  assert.match(r.body.message, message);
}

async function setOrgActive(h: Harness, token: string, orgId: number, active: boolean) {
  const r = await h.call('POST', '/api/v2/updateOrganization', { token, query: { targetOrganizationId: orgId }, body: { active } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.updatedSettings, ['active']);
}

async function setAgentActive(h: Harness, token: string, agentId: number, active: boolean) {
  const r = await h.call('POST', '/api/v2/updateAccount', { token, query: { targetAccountId: agentId }, body: { active } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
}

async function submit(h: Harness, token: string, body: Record<string, unknown>, query: Record<string, unknown> = {}) {
  const r = await h.call('POST', '/api/v2/tasks', { token, body, query });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body.task.id as string;
}

const taskRow = (h: Harness, id: string) => h.database.db.selectFrom('tasks').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

async function settled(h: Harness, ids: string[], timeoutMs = 15_000) {
  return waitFor(`${ids.length} task(s) to end`, async () => {
    const rows = await h.database.db.selectFrom('tasks').selectAll().where('id', 'in', ids).execute();
    return rows.length === ids.length && rows.every((r) => FINAL.includes(r.state)) ? rows : undefined;
  }, timeoutMs);
}

/** An INVITE to the organization's number (what assigns an inbound call to an organization). */
const NUMBER = '+15550100123';
function invite(o: { via: string; callId: string }): string {
  return [
    `INVITE sip:${NUMBER}@127.0.0.1 SIP/2.0`, `Via: ${o.via}`, 'Max-Forwards: 70', 'From: <sip:caller@pbx.example.test>;tag=c1',
    `To: <sip:${NUMBER}@127.0.0.1>`, `Call-ID: ${o.callId}`, 'CSeq: 1 INVITE', 'Contact: <sip:caller@127.0.0.1>', 'Content-Length: 0', '', '',
  ].join('\r\n');
}

forEachEngine('suspension', (h) => {
  it('an organization suspended by its reseller: its and its agents\' tokens answer 403 naming it; the reseller still reads it but cannot act through it; reactivation restores', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const agent = await h().agent(o.id);
    const sibling = await h().organization(r.id);
    // Used first, so SQLite's authentication cache holds these lookups when the account changes.
    for (const t of [o.token, agent.token, sibling.token]) assert.equal((await whoAmI(h(), t)).status, 200);
    if (h().engine === 'sqlite') assert.ok(AuthCache.for(h().database.db), 'the lookups are cached on SQLite');

    await setOrgActive(h(), r.token, o.id, false);
    const named = new RegExp(`^Organization ${o.id} is suspended`);
    assertSuspended(await whoAmI(h(), o.token), named);
    assertSuspended(await whoAmI(h(), agent.token), named);
    assertSuspended(await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'ping' } }), named);
    assertSuspended(await h().call('POST', '/api/v2/tasks', { token: agent.token, body: { type: 'ping' } }), named);
    assertSuspended(await h().call('GET', '/api/v2/tokens', { token: o.token }), named);
    assert.equal((await whoAmI(h(), sibling.token)).status, 200, 'a sibling organization is untouched');
    assert.equal((await whoAmI(h(), r.token)).status, 200, 'the reseller is untouched');

    // The reseller sees it suspended, and may manage it …
    const seen = await h().call('GET', '/api/v2/account', { token: r.token, query: { targetAccountId: o.id } });
    assert.equal(seen.status, 200, JSON.stringify(seen.body));
    assert.equal(seen.body.details.active, false);
    const listed = await h().call('GET', '/api/v2/listAccounts', { token: r.token, query: { targetOrganizationId: o.id } });
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    assert.equal((await h().call('GET', '/api/v2/tokens', { token: r.token, query: { targetAccountId: o.id } })).status, 200);
    // … but not act through it: tasks, new tokens, new agents, SIP settings, for it or below it.
    assertSuspended(await h().call('POST', '/api/v2/tasks', { token: r.token, query: { targetAccountId: o.id }, body: { type: 'ping' } }),
      new RegExp(`^targetAccountId ${o.id}: Organization ${o.id} is suspended`));
    assertSuspended(await h().call('POST', '/api/v2/tasks', { token: r.token, query: { targetAccountId: agent.id }, body: { type: 'ping' } }),
      new RegExp(`^targetAccountId ${agent.id} is out of service: Organization ${o.id} is suspended`));
    assertSuspended(await h().call('POST', '/api/v2/tokens', { token: r.token, query: { targetAccountId: o.id }, body: { type: 'admin', description: 'x' } }),
      new RegExp(`^targetAccountId ${o.id}: Organization ${o.id} is suspended`));
    assertSuspended(await h().call('POST', '/api/v2/createAccount', { token: r.token, query: { targetOrganizationId: o.id }, body: {} }),
      new RegExp(`^targetOrganizationId ${o.id}: Organization ${o.id} is suspended`));
    assertSuspended(await h().call('GET', '/api/v2/sip/ipWhitelist', { token: r.token, query: { targetAccountId: o.id } }),
      new RegExp(`Organization ${o.id} is suspended`));
    // The partner above the reseller is refused the same way.
    assertSuspended(await h().call('POST', '/api/v2/tasks', { query: { targetAccountId: o.id }, body: { type: 'ping' } }),
      new RegExp(`Organization ${o.id} is suspended`));

    // A write outside any service (an operator's shell on the app's own connection) is seen at once too.
    await h().database.db.updateTable('accounts').set({ active: 1 }).where('id', '=', o.id).execute();
    assert.equal((await whoAmI(h(), o.token)).status, 200);
    await h().database.db.updateTable('accounts').set({ active: 0 }).where('id', '=', o.id).execute();
    assertSuspended(await whoAmI(h(), o.token), named);

    await setOrgActive(h(), r.token, o.id, true);
    for (const t of [o.token, agent.token]) assert.equal((await whoAmI(h(), t)).status, 200);
    assert.equal((await h().call('POST', '/api/v2/tasks', { token: r.token, query: { targetAccountId: o.id }, body: { type: 'ping', scheduledFor: Math.ceil(Date.now() / 1000) + 3600 } })).status, 201);
  });

  it('a suspended organization\'s pending tasks stay pending while it is suspended and run once it is reactivated', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const other = await h().organization(r.id);
    const soon = Math.ceil(Date.now() / 1000) + 2;
    const ids = [
      await submit(h(), o.token, { type: 'ping', scheduledFor: soon }),
      await submit(h(), o.token, { type: 'call', target: '+15005551001', scheduledFor: soon }),
    ];
    await setOrgActive(h(), r.token, o.id, false);
    const control = await submit(h(), other.token, { type: 'ping', scheduledFor: soon });
    await settled(h(), [control]);
    await new Promise((res) => setTimeout(res, 1500));
    for (const id of ids) {
      const row = await taskRow(h(), id);
      assert.equal(row.state, 'pending', `${id} started while its organization was suspended`);
      assert.equal(row.attempt, 0);
      assert.equal(row.run_at, soon * 1000, 'the schedule is left as it was (deferred, not moved or failed)');
    }
    // The runner polls once a minute here: only reactivation's wake-up starts them within seconds.
    await setOrgActive(h(), r.token, o.id, true);
    const rows = await settled(h(), ids, 20_000);
    assert.deepEqual(rows.map((x) => x.state), ['finished', 'finished']);
  });

  it('a suspended agent: its token answers 403, the organization\'s other agents work, and its tasks wait for reactivation', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const a = await h().agent(o.id);
    const b = await h().agent(o.id);
    await setAgentActive(h(), r.token, a.id, false);
    assertSuspended(await whoAmI(h(), a.token), new RegExp(`^Account ${a.id} is suspended`));
    assertSuspended(await h().call('POST', '/api/v2/tasks', { token: a.token, body: { type: 'ping' } }), new RegExp(`^Account ${a.id} is suspended`));
    assert.equal((await whoAmI(h(), b.token)).status, 200);
    assert.equal((await whoAmI(h(), o.token)).status, 200, 'the organization itself is in service');
    // The organization acting for its suspended agent is refused; a task naming it in the body waits.
    assertSuspended(await h().call('POST', '/api/v2/tasks', { token: o.token, query: { targetAccountId: a.id }, body: { type: 'ping' } }),
      new RegExp(`^targetAccountId ${a.id}: Account ${a.id} is suspended`));
    const waiting = await submit(h(), o.token, { type: 'ping', accountId: a.id });
    const running = await submit(h(), o.token, { type: 'ping', accountId: b.id });
    await settled(h(), [running]);
    await new Promise((res) => setTimeout(res, 1000));
    assert.equal((await taskRow(h(), waiting)).state, 'pending');
    await setAgentActive(h(), r.token, a.id, true);
    assert.equal((await whoAmI(h(), a.token)).status, 200);
    const [row] = await settled(h(), [waiting]);
    assert.equal(row.state, 'finished');
  });

  it('a reseller created disabled: the partner reads it but creates nothing under it and issues it no token; a token it got while enabled answers 403 and creates no organization', async () => {
    const c = await h().call('POST', '/api/v2/createReseller', { query: { targetPartnerId: h().partnerId }, body: { resellerName: 'Disabled', resellerStatus: 'disabled' } });
    assert.equal(c.status, 201, JSON.stringify(c.body));
    const disabled = c.body.reseller.id as number;
    assert.equal(c.body.reseller.resellerStatus, 'disabled');
    const named = new RegExp(`Reseller ${disabled} is suspended`);
    // The partner still reads it, but creates nothing under it and issues no token for it.
    const seen = await h().call('GET', '/api/v2/account', { query: { targetAccountId: disabled } });
    assert.equal(seen.status, 200, JSON.stringify(seen.body));
    assert.equal(seen.body.details.resellerStatus, 'disabled');
    const listed = await h().call('GET', '/api/v2/listOrganizations', { query: { targetResellerId: disabled } });
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    assertSuspended(await h().call('POST', '/api/v2/createOrganization', { query: { targetResellerId: disabled }, body: { orgName: 'Under disabled' } }),
      new RegExp(`^targetResellerId ${disabled}: Reseller ${disabled} is suspended`));
    assertSuspended(await h().call('POST', '/api/v2/tokens', { query: { targetAccountId: disabled }, body: { type: 'admin', description: 'x' } }), named);
    // A token it was given while enabled (an operator flips the flag around its issue) is refused.
    const db = h().database.db;
    await db.updateTable('accounts').set({ active: 1 }).where('id', '=', disabled).execute();
    const token = await h().tokenFor(disabled);
    await db.updateTable('accounts').set({ active: 0 }).where('id', '=', disabled).execute();
    assertSuspended(await whoAmI(h(), token), new RegExp(`^${named.source}`));
    assertSuspended(await h().call('POST', '/api/v2/createOrganization', { token, query: { targetResellerId: disabled }, body: { orgName: 'By disabled' } }), named);
    const orgs = await h().call('GET', '/api/v2/listOrganizations', { query: { targetResellerId: disabled } });
    assert.equal(orgs.body.organizations.length, 0, 'a disabled reseller created an organization');
  });

  it('an ancestor suspended after the fact (an operator setting the reseller or partner inactive) suspends everything below it, and lifting it restores', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    assert.equal((await whoAmI(h(), o.token)).status, 200);
    const soon = Math.ceil(Date.now() / 1000) + 1;
    const task = await submit(h(), o.token, { type: 'ping', scheduledFor: soon });
    const db = h().database.db;
    await db.updateTable('accounts').set({ active: 0 }).where('id', '=', r.id).execute();
    assertSuspended(await whoAmI(h(), r.token), new RegExp(`^Reseller ${r.id} is suspended`));
    assertSuspended(await whoAmI(h(), o.token), new RegExp(`^Reseller ${r.id} is suspended`));
    assertSuspended(await h().call('POST', '/api/v2/tasks', { query: { targetAccountId: o.id }, body: { type: 'ping' } }),
      new RegExp(`^targetAccountId ${o.id} is out of service: Reseller ${r.id} is suspended`));
    await new Promise((res) => setTimeout(res, 2000));
    assert.equal((await taskRow(h(), task)).state, 'pending', 'a suspended reseller\'s organization\'s task started');

    // The partner: no operation suspends it (updateOrganization and updateAccount name an
    // organization or an agent), but an inactive partner row is honoured like any other.
    const notOrg = await h().call('POST', '/api/v2/updateOrganization', { query: { targetOrganizationId: h().partnerId }, body: { active: false } });
    assert.equal(notOrg.status, 404, JSON.stringify(notOrg.body));
    const notAgent = await h().call('POST', '/api/v2/updateAccount', { query: { targetAccountId: h().partnerId }, body: { active: false } });
    assert.equal(notAgent.status, 404, JSON.stringify(notAgent.body));
    await db.updateTable('accounts').set({ active: 0 }).where('id', '=', h().partnerId).execute();
    try {
      assertSuspended(await whoAmI(h(), h().adminToken), new RegExp(`^Partner ${h().partnerId} is suspended`));
      assertSuspended(await whoAmI(h(), o.token), new RegExp(`^Partner ${h().partnerId} is suspended`));
    } finally {
      await db.updateTable('accounts').set({ active: 1 }).where('id', '=', h().partnerId).execute();
    }
    assert.equal((await whoAmI(h(), h().adminToken)).status, 200);

    await db.updateTable('accounts').set({ active: 1 }).where('id', '=', r.id).execute();
    h().tasks.notify();
    for (const t of [r.token, o.token]) assert.equal((await whoAmI(h(), t)).status, 200);
    const [row] = await settled(h(), [task]);
    assert.equal(row.state, 'finished');
  });

  it('an INVITE for a suspended organization from its whitelisted trunk is refused with 480 (a stranger still gets 403); reactivated, it is answered', async () => {
    const FRIEND = '127.0.0.31';
    const STRANGER = '127.0.0.32';
    const r = await h().reseller();
    const o = await h().organization(r.id);
    assert.equal((await h().call('POST', '/api/v2/sip/ipWhitelist', { token: o.token, body: { ip: FRIEND, label: 'PBX' } })).status, 201);
    const owned = await h().call('POST', '/api/v2/numberingProvider', {
      token: r.token, query: { targetOrganizationId: o.id }, body: { providerId: 'simulated', config: { phoneNumber: NUMBER } },
    });
    assert.equal(owned.status, 200, JSON.stringify(owned.body));
    const port = h().sip!.endpoint!.port;
    const friend = await udpPeer(FRIEND);
    const stranger = await udpPeer(STRANGER);
    const finalFor = (peer: typeof friend, callId: string) => waitFor(`a final answer to ${callId}`, () => {
      const m = peer.got.find((x) => x.kind === 'response' && x.status >= 200 && x.headers.get('call-id') === callId);
      return m && m.kind === 'response' ? m.status : undefined;
    }, 5000);
    const send = async (peer: typeof friend, host: string, callId: string) => {
      await peer.send(invite({ via: `SIP/2.0/UDP ${host}:${peer.port};branch=${newBranch()};rport`, callId }), port, '127.0.0.1');
      return finalFor(peer, callId);
    };
    try {
      await setOrgActive(h(), r.token, o.id, false);
      assert.equal(await send(friend, FRIEND, `susp-${h().engine}-1`), 480);
      assert.equal(await send(stranger, STRANGER, `susp-${h().engine}-2`), 403);
      await setOrgActive(h(), r.token, o.id, true);
      assert.equal(await send(friend, FRIEND, `susp-${h().engine}-3`), 200);
    } finally {
      friend.close();
      stranger.close();
    }
  });
}, { CALLPLANE_SIMULATED_CALL_SECONDS: '0.2', CALLPLANE_CALL_MAX_SECONDS: '1', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, { worker: true, runtime: { pollMs: 60_000 }, sip: { pollMs: 100 } });
