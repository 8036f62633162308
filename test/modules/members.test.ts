// Members and admin users: the people invited to a partner, reseller or organization account.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import type { Reply } from '../helpers/harness.ts';

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  assert.equal(typeof res.body.message, 'string');
  for (const w of words) assert.ok(res.body.message.includes(w), `"${res.body.message}" should name ${w}`);
}

forEachEngine('members', (h) => {
  let seq = 0;
  const mail = (tag = 'm') => `${tag}${++seq}@example.com`;

  async function tenant() {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    return { r, o };
  }

  async function invite(token: string, body: Record<string, unknown>, query: Record<string, unknown> = {}) {
    return h().call('POST', '/api/v2/member', { token, body, query });
  }

  async function userRow(id: number) {
    return h().database.db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
  }

  it('an organization invites a member: 201 Invitation sent, email lowercased, role admin by default', async () => {
    const { o } = await tenant();
    const res = await invite(o.token, { email: 'Jane.Doe@Example.COM', redirectUrl: 'https://app.example.com/welcome' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.success, true);
    assert.equal(res.body.message, 'Invitation sent');
    const m = res.body.member;
    assert.equal(m.email, 'jane.doe@example.com');
    assert.equal(m.role, 'admin');
    assert.deepEqual(m.permittedAccountIds, []);
    assert.equal(m.sendWelcomeEmail, true);
    assert.equal(m.accountId, o.id);
    const row = await userRow(m.id);
    assert.equal(row?.account_id, o.id);
    assert.equal(row?.email, 'jane.doe@example.com');
    assert.equal(row?.role, 'admin');
    assert.equal(row?.redirect_url, 'https://app.example.com/welcome');
    assert.equal(row?.send_welcome_email, 1);
  });

  it('sendWelcomeEmail false is stored and shown back', async () => {
    const { o } = await tenant();
    const res = await invite(o.token, { email: mail(), sendWelcomeEmail: false, role: 'member' });
    assert.equal(res.status, 201);
    assert.equal(res.body.member.sendWelcomeEmail, false);
    assert.equal(res.body.member.role, 'member');
    assert.equal((await userRow(res.body.member.id))?.send_welcome_email, 0);
    const upper = await invite(o.token, { email: mail(), role: ' Viewer ' });
    assert.equal(upper.status, 201);
    assert.equal(upper.body.member.role, 'viewer', 'a role is stored in lowercase');
    const got = await h().call('GET', '/api/v2/member', { token: o.token, query: { targetMemberId: res.body.member.id } });
    assert.equal(got.status, 200);
    assert.equal(got.body.member.sendWelcomeEmail, false);
  });

  it('lists and fetches the members of the caller\'s own account only', async () => {
    const a = await tenant();
    const b = await tenant();
    const mine = await invite(a.o.token, { email: mail('mine') });
    const theirs = await invite(b.o.token, { email: mail('theirs') });
    const list = await h().call('GET', '/api/v2/members', { token: a.o.token });
    assert.equal(list.status, 200);
    assert.equal(list.body.success, true);
    assert.deepEqual(list.body.members.map((m: any) => m.id), [mine.body.member.id]);
    const one = await h().call('GET', '/api/v2/member', { token: a.o.token, query: { targetMemberId: mine.body.member.id } });
    assert.equal(one.status, 200);
    assert.equal(one.body.member.email, mine.body.member.email);
    const other = await h().call('GET', '/api/v2/member', { token: a.o.token, query: { targetMemberId: theirs.body.member.id } });
    expectError(other, 404, 'targetMemberId');
  });

  it('the same email twice in one account is 409, whatever its case; another account may use it', async () => {
    const a = await tenant();
    const b = await tenant();
    const email = mail('dup');
    assert.equal((await invite(a.o.token, { email })).status, 201);
    expectError(await invite(a.o.token, { email: email.toUpperCase() }), 409, email);
    assert.equal((await invite(b.o.token, { email })).status, 201);
    const rows = await h().database.db.selectFrom('users').select('id').where('email', '=', email).execute();
    assert.equal(rows.length, 2);
  });

  it('rejects a bad email, a missing email and a bad role with a 400 naming the field', async () => {
    const { o } = await tenant();
    expectError(await invite(o.token, { email: 'not-an-email' }), 400, 'email');
    expectError(await invite(o.token, { email: '' }), 400, 'email');
    expectError(await invite(o.token, { email: 'a b@example.com' }), 400, 'email');
    expectError(await invite(o.token, { email: `${'x'.repeat(320)}@example.com` }), 400, 'email');
    expectError(await invite(o.token, { email: { a: 1 } }), 400, 'email');
    expectError(await invite(o.token, { redirectUrl: 'https://x.example' }), 400, 'email is required');
    expectError(await invite(o.token, { email: mail(), role: 'bad role!' }), 400, 'role');
    expectError(await invite(o.token, { email: mail(), role: '' }), 400, 'role');
    expectError(await invite(o.token, { email: mail(), role: 'r'.repeat(33) }), 400, 'role');
    expectError(await invite(o.token, { email: mail(), sendWelcomeEmail: 'perhaps' }), 400, 'sendWelcomeEmail');
    expectError(await invite(o.token, { email: mail(), redirectUrl: 'x'.repeat(2001) }), 400, 'redirectUrl');
    expectError(await invite(o.token, { email: mail(), redirectUrl: 'javascript:alert(1)' }), 400, 'redirectUrl');
    expectError(await invite(o.token, { email: mail(), redirectUrl: 'not a url' }), 400, 'redirectUrl');
    expectError(await invite(o.token, { email: mail(), permittedAccountIds: 'all' }), 400, 'permittedAccountIds');
    expectError(await invite(o.token, { email: mail(), permittedAccountIds: ['abc'] }), 400, 'permittedAccountIds[0]');
    expectError(await invite(o.token, { email: mail(), permittedAccountIds: [0] }), 400, 'permittedAccountIds[0]');
    expectError(await h().call('POST', '/api/v2/member', { token: o.token, payload: '{"email":', headers: { 'content-type': 'application/json' } }), 400);
    expectError(await h().call('POST', '/api/v2/member', { token: o.token }), 400, 'body');
    const list = await h().call('GET', '/api/v2/members', { token: o.token });
    assert.deepEqual(list.body.members, []);
  });

  it('permittedAccountIds must be agent accounts of that organization', async () => {
    const { r, o } = await tenant();
    const own = await h().agent(o.id);
    const sibling = await h().organization(r.id);
    const foreign = await tenant();

    const ok = await invite(o.token, { email: mail(), permittedAccountIds: [own.id, o.agentId, own.id] });
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    assert.deepEqual(ok.body.member.permittedAccountIds, [own.id, o.agentId]);
    assert.equal((await userRow(ok.body.member.id))?.permitted_account_ids, JSON.stringify([own.id, o.agentId]));

    // An agent of another organization of the same reseller is visible to the reseller, still refused.
    const email = mail();
    expectError(await invite(r.token, { email, permittedAccountIds: [sibling.agentId] }, { targetAccountId: o.id }), 404, 'permittedAccountIds', String(sibling.agentId));
    expectError(await invite(o.token, { email, permittedAccountIds: [own.id, foreign.o.agentId] }), 404, 'permittedAccountIds', String(foreign.o.agentId));
    // The organization itself is not an agent account.
    expectError(await invite(o.token, { email, permittedAccountIds: [o.id] }), 404, 'permittedAccountIds');
    expectError(await invite(o.token, { email, permittedAccountIds: [2147483000] }), 404, 'permittedAccountIds');
    const rows = await h().database.db.selectFrom('users').select('id').where('email', '=', email).execute();
    assert.equal(rows.length, 0, 'nothing is recorded when permittedAccountIds is refused');
  });

  it('PUT updates email, role and permittedAccountIds with 201 Member updated; [] clears restrictions', async () => {
    const { o } = await tenant();
    const agent = await h().agent(o.id);
    const m = (await invite(o.token, { email: mail(), permittedAccountIds: [agent.id] })).body.member;
    const email = mail('new').toUpperCase();
    const res = await h().call('PUT', '/api/v2/member', { token: o.token, body: { targetMemberId: m.id, email, role: 'viewer' } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.message, 'Member updated');
    assert.equal(res.body.member.email, email.toLowerCase());
    assert.equal(res.body.member.role, 'viewer');
    assert.deepEqual(res.body.member.permittedAccountIds, [agent.id]);
    const cleared = await h().call('PUT', '/api/v2/member', { token: o.token, body: { targetMemberId: m.id, permittedAccountIds: [] } });
    assert.equal(cleared.status, 201);
    assert.deepEqual(cleared.body.member.permittedAccountIds, []);
    const row = await userRow(m.id);
    assert.equal(row?.email, email.toLowerCase());
    assert.equal(row?.role, 'viewer');
    assert.equal(row?.permitted_account_ids, '[]');
  });

  it('PUT refuses bad input, a taken email and a foreign agent without changing the member', async () => {
    const { r, o } = await tenant();
    const other = await h().organization(r.id);
    const a = (await invite(o.token, { email: mail('a') })).body.member;
    const b = (await invite(o.token, { email: mail('b') })).body.member;
    const put = (body: unknown) => h().call('PUT', '/api/v2/member', { token: o.token, body });
    expectError(await put({ targetMemberId: a.id }), 400, 'nothing to update');
    expectError(await put({ email: mail() }), 400, 'targetMemberId is required');
    expectError(await put({ targetMemberId: 'x', role: 'admin' }), 400, 'targetMemberId');
    expectError(await put({ targetMemberId: a.id, email: 'nope' }), 400, 'email');
    expectError(await put({ targetMemberId: a.id, role: 'Not OK' }), 400, 'role');
    expectError(await put({ targetMemberId: a.id, permittedAccountIds: [-1] }), 400, 'permittedAccountIds[0]');
    expectError(await put({ targetMemberId: a.id, email: b.email.toUpperCase() }), 409, b.email);
    expectError(await put({ targetMemberId: a.id, permittedAccountIds: [other.agentId] }), 404, 'permittedAccountIds');
    expectError(await put({ targetMemberId: 999999, role: 'viewer' }), 404, 'targetMemberId');
    const row = await userRow(a.id);
    assert.equal(row?.email, a.email);
    assert.equal(row?.role, 'admin');
    assert.equal(row?.permitted_account_ids, '[]');
  });

  it('DELETE removes a member with 201 and the contract\'s message', async () => {
    const { o } = await tenant();
    const m = (await invite(o.token, { email: mail() })).body.member;
    const res = await h().call('DELETE', '/api/v2/member', { token: o.token, body: { targetMemberId: m.id } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.deepEqual({ success: res.body.success, message: res.body.message },
      { success: true, message: 'Member successfully removed from your organization' });
    assert.equal(await userRow(m.id), undefined);
    expectError(await h().call('GET', '/api/v2/member', { token: o.token, query: { targetMemberId: m.id } }), 404, 'targetMemberId');
    expectError(await h().call('DELETE', '/api/v2/member', { token: o.token, body: { targetMemberId: m.id } }), 404, 'targetMemberId');
    expectError(await h().call('DELETE', '/api/v2/member', { token: o.token, body: {} }), 400, 'targetMemberId is required');
    expectError(await h().call('DELETE', '/api/v2/member', { token: o.token, body: { targetMemberId: 'abc' } }), 400, 'targetMemberId');
  });

  it('another tenant\'s member ids are 404 on every route and stay untouched', async () => {
    const mine = await tenant();
    const theirs = await tenant();
    const victim = (await invite(theirs.o.token, { email: mail('victim') })).body.member;
    const t = mine.o.token;
    expectError(await h().call('GET', '/api/v2/member', { token: t, query: { targetMemberId: victim.id } }), 404);
    expectError(await h().call('PUT', '/api/v2/member', { token: t, body: { targetMemberId: victim.id, role: 'owned' } }), 404);
    expectError(await h().call('DELETE', '/api/v2/member', { token: t, body: { targetMemberId: victim.id } }), 404);
    expectError(await h().call('DELETE', '/api/v2/deleteAdminUser', { token: t, body: { targetUserId: victim.id } }), 404);
    // A reseller reaching for an organization of another reseller.
    expectError(await h().call('GET', '/api/v2/members', { token: mine.r.token, query: { targetAccountId: theirs.o.id } }), 404, 'targetAccountId');
    expectError(await h().call('DELETE', '/api/v2/member', { token: mine.r.token, query: { targetAccountId: theirs.o.id }, body: { targetMemberId: victim.id } }), 404);
    expectError(await invite(mine.o.token, { email: mail() }, { targetAccountId: theirs.o.id }), 404, 'targetAccountId');
    const row = await userRow(victim.id);
    assert.equal(row?.role, 'admin');
    assert.equal(row?.email, victim.email);
  });

  it('an agent token gets 403 on every member and admin-user route', async () => {
    const { o } = await tenant();
    const m = (await invite(o.token, { email: mail() })).body.member;
    const agentToken = await h().tokenFor(o.agentId);
    const calls: [string, string, Record<string, unknown>?, unknown?][] = [
      ['GET', '/api/v2/members'],
      ['GET', '/api/v2/member', { targetMemberId: m.id }],
      ['POST', '/api/v2/member', {}, { email: mail() }],
      ['PUT', '/api/v2/member', {}, { targetMemberId: m.id, role: 'viewer' }],
      ['DELETE', '/api/v2/member', {}, { targetMemberId: m.id }],
      ['GET', '/api/v2/listAdminUsers'],
      ['POST', '/api/v2/inviteAdminUser', {}, { email: mail() }],
      ['DELETE', '/api/v2/deleteAdminUser', {}, { targetUserId: m.id }],
      // Naming its own account does not lift the agent to a member holder.
      ['GET', '/api/v2/members', { targetAccountId: o.agentId }],
      ['POST', '/api/v2/member', { targetAccountId: o.agentId }, { email: mail() }],
    ];
    for (const [method, url, query, body] of calls) {
      const res = await h().call(method, url, { token: agentToken, query, body });
      expectError(res, 403);
    }
    const row = await userRow(m.id);
    assert.equal(row?.role, 'admin');
    const count = await h().database.db.selectFrom('users').select('id').where('account_id', '=', o.id).execute();
    assert.equal(count.length, 1);
  });

  it('a reseller manages an organization\'s members through targetAccountId', async () => {
    const { r, o } = await tenant();
    const agent = await h().agent(o.id);
    const q = { targetAccountId: o.id };
    const inv = await invite(r.token, { email: mail(), permittedAccountIds: [agent.id] }, q);
    assert.equal(inv.status, 201, JSON.stringify(inv.body));
    assert.equal(inv.body.member.accountId, o.id);
    assert.equal((await userRow(inv.body.member.id))?.account_id, o.id);
    // The organization sees it as its own member; the reseller's own list does not.
    const orgList = await h().call('GET', '/api/v2/members', { token: o.token });
    assert.deepEqual(orgList.body.members.map((m: any) => m.id), [inv.body.member.id]);
    const resellerOwn = await h().call('GET', '/api/v2/members', { token: r.token });
    assert.equal(resellerOwn.status, 200);
    assert.ok(!resellerOwn.body.members.some((m: any) => m.id === inv.body.member.id));
    const viaReseller = await h().call('GET', '/api/v2/members', { token: r.token, query: q });
    assert.deepEqual(viaReseller.body.members.map((m: any) => m.id), [inv.body.member.id]);
    const got = await h().call('GET', '/api/v2/member', { token: r.token, query: { ...q, targetMemberId: inv.body.member.id } });
    assert.equal(got.status, 200);
    const upd = await h().call('PUT', '/api/v2/member', { token: r.token, query: q, body: { targetMemberId: inv.body.member.id, role: 'viewer' } });
    assert.equal(upd.status, 201);
    assert.equal((await userRow(inv.body.member.id))?.role, 'viewer');
    // Without targetAccountId the reseller looks in its own account: the org's member is not there.
    expectError(await h().call('DELETE', '/api/v2/member', { token: r.token, body: { targetMemberId: inv.body.member.id } }), 404);
    const del = await h().call('DELETE', '/api/v2/member', { token: r.token, query: q, body: { targetMemberId: inv.body.member.id } });
    assert.equal(del.status, 201);
    assert.equal(await userRow(inv.body.member.id), undefined);
  });

  it('a partner and a reseller may hold members of their own', async () => {
    const r = await h().reseller();
    const res = await invite(r.token, { email: mail('reseller') });
    assert.equal(res.status, 201);
    assert.equal(res.body.member.accountId, r.id);
    const p = await invite(h().adminToken, { email: mail('partner') });
    assert.equal(p.status, 201);
    assert.equal(p.body.member.accountId, h().partnerId);
  });

  it('an organization cannot name another organization, or a reseller, as targetAccountId', async () => {
    const { r, o } = await tenant();
    const sibling = await h().organization(r.id);
    expectError(await h().call('GET', '/api/v2/members', { token: o.token, query: { targetAccountId: sibling.id } }), 404, 'targetAccountId');
    expectError(await h().call('GET', '/api/v2/members', { token: o.token, query: { targetAccountId: r.id } }), 404, 'targetAccountId');
  });

  it('bad ids in the query are 400 naming the field, never a 5xx', async () => {
    const { o } = await tenant();
    const cases: [string, string, Record<string, unknown>, string, unknown?][] = [
      ['GET', '/api/v2/member', {}, 'targetMemberId'],
      ['GET', '/api/v2/member', { targetMemberId: 'abc' }, 'targetMemberId'],
      ['GET', '/api/v2/member', { targetMemberId: 0 }, 'targetMemberId'],
      ['GET', '/api/v2/member', { targetMemberId: 1.5 }, 'targetMemberId'],
      ['GET', '/api/v2/member', { targetMemberId: '99999999999999999999' }, 'targetMemberId'],
      ['GET', '/api/v2/members', { targetAccountId: 'me' }, 'targetAccountId'],
      ['GET', '/api/v2/members', { targetAccountId: -3 }, 'targetAccountId'],
      ['GET', '/api/v2/members', { targetAccountId: 3000000000 }, 'targetAccountId'],
      ['GET', '/api/v2/listAdminUsers', { targetAccountId: 'x' }, 'targetAccountId'],
      ['PUT', '/api/v2/member', {}, 'targetMemberId', { targetMemberId: 3000000000, role: 'x' }],
      ['DELETE', '/api/v2/member', {}, 'targetMemberId', { targetMemberId: 3000000000 }],
      ['DELETE', '/api/v2/deleteAdminUser', {}, 'targetUserId', { targetUserId: 3000000000 }],
      ['POST', '/api/v2/member', {}, 'permittedAccountIds', { email: 'z@example.com', permittedAccountIds: [3000000000] }],
    ];
    for (const [method, url, query, field, body] of cases) {
      const res = await h().call(method, url, { token: o.token, query, body });
      expectError(res, 400, field);
    }
  });

  // ── admin users ─────────────────────────────────────────────────────────────

  it('inviteAdminUser records an admin with 201 and listAdminUsers shows admins only', async () => {
    const { o } = await tenant();
    const res = await h().call('POST', '/api/v2/inviteAdminUser', { token: o.token, body: { email: 'Boss@Example.com', redirectUrl: 'https://x.example/in' } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.message, 'Invitation sent');
    assert.equal(res.body.user.email, 'boss@example.com');
    assert.equal(res.body.user.role, 'admin');
    const viewer = (await invite(o.token, { email: mail(), role: 'viewer' })).body.member;
    const defaultRole = (await invite(o.token, { email: mail() })).body.member;
    const list = await h().call('GET', '/api/v2/listAdminUsers', { token: o.token });
    assert.equal(list.status, 200);
    const ids = list.body.users.map((u: any) => u.id);
    assert.deepEqual(ids, [res.body.user.id, defaultRole.id]);
    assert.ok(!ids.includes(viewer.id));
  });

  it('inviteAdminUser refuses a bad or missing email and a duplicate', async () => {
    const { o } = await tenant();
    const post = (body: unknown) => h().call('POST', '/api/v2/inviteAdminUser', { token: o.token, body });
    expectError(await post({ email: 'nope' }), 400, 'email');
    expectError(await post({}), 400, 'email is required');
    expectError(await post({ email: mail(), redirectUrl: { u: 1 } }), 400, 'redirectUrl');
    expectError(await post({ email: mail(), redirectUrl: 'data:text/html,hi' }), 400, 'redirectUrl');
    const email = mail();
    assert.equal((await post({ email })).status, 201);
    expectError(await post({ email }), 409, email);
  });

  it('deleteAdminUser removes an admin; a non-admin member is 404 and stays', async () => {
    const { o } = await tenant();
    const admin = (await h().call('POST', '/api/v2/inviteAdminUser', { token: o.token, body: { email: mail() } })).body.user;
    const viewer = (await invite(o.token, { email: mail(), role: 'viewer' })).body.member;
    const del = (targetUserId: unknown) => h().call('DELETE', '/api/v2/deleteAdminUser', { token: o.token, body: { targetUserId } });
    expectError(await del(viewer.id), 404, 'targetUserId', String(viewer.id));
    assert.ok(await userRow(viewer.id), 'the non-admin member is still there');
    const ok = await del(admin.id);
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.success, true);
    assert.equal(ok.body.message, 'Admin user successfully removed from your organization');
    assert.equal(await userRow(admin.id), undefined);
    expectError(await del(admin.id), 404, 'targetUserId');
    expectError(await del('abc'), 400, 'targetUserId');
    expectError(await h().call('DELETE', '/api/v2/deleteAdminUser', { token: o.token, body: {} }), 400, 'targetUserId is required');
  });

  it('createOrganization with email records that email as an invited admin user of the new organization', async () => {
    const r = await h().reseller();
    const created = await h().call('POST', '/api/v2/createOrganization', {
      token: r.token, query: { targetResellerId: r.id }, body: { orgName: 'Acme Solar', email: 'Owner@AcmeSolar.com' },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const orgId = created.body.organization.id;
    const viaReseller = await h().call('GET', '/api/v2/listAdminUsers', { token: r.token, query: { targetAccountId: orgId } });
    assert.equal(viaReseller.status, 200);
    assert.equal(viaReseller.body.users.length, 1);
    assert.equal(viaReseller.body.users[0].email, 'owner@acmesolar.com');
    assert.equal(viaReseller.body.users[0].role, 'admin');
    assert.equal(viaReseller.body.users[0].status, 'invited');
    assert.equal(viaReseller.body.users[0].accountId, orgId);
    const orgToken = await h().tokenFor(orgId);
    const own = await h().call('GET', '/api/v2/listAdminUsers', { token: orgToken });
    assert.deepEqual(own.body.users.map((u: any) => u.email), ['owner@acmesolar.com']);
    // The reseller's own admin list does not gain the organization's admin.
    const resellerList = await h().call('GET', '/api/v2/listAdminUsers', { token: r.token });
    assert.ok(!resellerList.body.users.some((u: any) => u.email === 'owner@acmesolar.com'));
    // And an organization created without email has no admin users.
    const bare = await h().organization(r.id);
    const none = await h().call('GET', '/api/v2/listAdminUsers', { token: bare.token });
    assert.deepEqual(none.body.users, []);
  });

  it('a reseller manages an organization\'s admin users through targetAccountId', async () => {
    const { r, o } = await tenant();
    const q = { targetAccountId: o.id };
    const inv = await h().call('POST', '/api/v2/inviteAdminUser', { token: r.token, query: q, body: { email: mail() } });
    assert.equal(inv.status, 201);
    assert.equal((await userRow(inv.body.user.id))?.account_id, o.id);
    const del = await h().call('DELETE', '/api/v2/deleteAdminUser', { token: r.token, query: q, body: { targetUserId: inv.body.user.id } });
    assert.equal(del.status, 200);
    assert.equal(await userRow(inv.body.user.id), undefined);
  });

  it('unauthenticated calls are 401', async () => {
    expectError(await h().call('GET', '/api/v2/members', { token: null }), 401);
    expectError(await h().call('POST', '/api/v2/inviteAdminUser', { token: 'cpl_nope', body: { email: 'x@example.com' } }), 401);
  });
});
