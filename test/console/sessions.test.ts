// Console sessions end with the token they were made from (issue 33): deleting that token (or its
// expiry) ends them, they are listed (origin prefix, created, last used) and revocable by the
// account and its ancestors, a console session is never traded for another, and a console token
// counts only as the cookie with the console's header — never as ?token= or a bearer.
// @engines sqlite
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { hashToken } from '../../src/lib/crypto.ts';
import { tokenRepo } from '../../src/modules/tokens/repository.ts';

const HEADER = { 'x-callplane-console': '1' };

async function signIn(h: Harness, token: string) {
  const res = await h.app.inject({ method: 'POST', url: '/console/session', payload: { token } });
  const line = ([] as string[]).concat((res.headers['set-cookie'] as string[] | string | undefined) ?? [])
    .find((c) => c.startsWith('callplane_console='));
  return { status: res.statusCode, body: res.json(), cookie: line?.slice('callplane_console='.length).split(';')[0], attrs: line };
}

const withCookie = (h: Harness, cookie: string, method: 'GET' | 'DELETE', url: string) =>
  h.app.inject({ method, url, headers: { ...HEADER, cookie: `callplane_console=${cookie}` } });

/** A new API token of the account, with its listed prefix. */
async function newToken(h: Harness, owner: string, targetAccountId?: number) {
  const r = await h.call('POST', '/api/v2/tokens', { token: owner, query: { targetAccountId }, body: { type: 'admin', description: 'for the console' } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const full: string = r.body.token.token;
  const prefix = (await tokenRepo.findByHash(h.database.db, hashToken(full)))!.prefix;
  return { full, prefix };
}

for (const engine of ENGINES) {
  describe(`console sessions end with their token (${engine})`, () => {
    let h: Harness;
    let reseller: { id: number; token: string };
    let org: { id: number; agentId: number; token: string };
    let other: { id: number; agentId: number; token: string };
    before(async () => {
      h = await startHarness(engine);
      reseller = await h.reseller();
      org = await h.organization(reseller.id);
      other = await h.organization(reseller.id);
    });
    after(async () => h.close());

    it('deleting the token a session was made from ends the session at once', async () => {
      const t = await newToken(h, org.token);
      const s = await signIn(h, t.full);
      assert.equal(s.status, 200, JSON.stringify(s.body));
      assert.equal((await withCookie(h, s.cookie!, 'GET', '/console/session')).statusCode, 200);
      const del = await h.call('DELETE', '/api/v2/tokens', { token: org.token, body: { token: t.prefix } });
      assert.equal(del.status, 200, JSON.stringify(del.body));
      const after = await withCookie(h, s.cookie!, 'GET', '/api/v2/tasks/stats');
      assert.equal(after.statusCode, 401, after.body);
      assert.match(after.json().message, /unknown or deleted token/);
      assert.equal(await tokenRepo.findByHash(h.database.db, hashToken(s.cookie!)), undefined, 'the session\'s token row is gone');
    });

    it('a session never outlasts its origin token\'s expiry', async () => {
      const t = await newToken(h, org.token);
      const expiresAt = Date.now() + 90_000;
      await h.database.db.updateTable('tokens').set({ expires_at: expiresAt }).where('hash', '=', hashToken(t.full)).execute();
      const s = await signIn(h, t.full);
      assert.equal(s.status, 200, JSON.stringify(s.body));
      assert.equal(s.body.expiresAt, Math.floor(expiresAt / 1000), 'the session expires with its origin, not 12 hours later');
      const maxAge = Number(/Max-Age=(\d+)/.exec(s.attrs!)?.[1]);
      assert.ok(maxAge <= 90 && maxAge >= 85, s.attrs);
      const row = await tokenRepo.findByHash(h.database.db, hashToken(s.cookie!));
      assert.equal(row?.expires_at, expiresAt);
    });

    it('refuses a console session as the token to trade (no renewal)', async () => {
      const s = await signIn(h, org.token);
      const again = await signIn(h, s.cookie!);
      assert.equal(again.status, 401, JSON.stringify(again.body));
      assert.equal(again.body.success, false);
      assert.match(again.body.message, /console session, which cannot be traded/);
      assert.equal(again.cookie, undefined);
    });

    it('accepts a console token only as the cookie with the console header', async () => {
      const s = await signIn(h, org.token);
      const asQuery = await h.call('GET', '/api/v2/tasks/stats', { token: s.cookie! });
      assert.equal(asQuery.status, 401, JSON.stringify(asQuery.body));
      assert.match(asQuery.body.message, /accepted only as the console's cookie/);
      const asBearer = await h.app.inject({ method: 'GET', url: '/api/v2/tasks/stats', headers: { authorization: `Bearer ${s.cookie!}` } });
      assert.equal(asBearer.statusCode, 401, asBearer.body);
      const asBearerWithHeader = await h.app.inject({ method: 'GET', url: '/api/v2/tasks/stats', headers: { ...HEADER, authorization: `Bearer ${s.cookie!}` } });
      assert.equal(asBearerWithHeader.statusCode, 401, asBearerWithHeader.body);
      assert.equal((await withCookie(h, s.cookie!, 'GET', '/api/v2/tasks/stats')).statusCode, 200);
    });

    it('lists an account\'s sessions with their origin, and its ancestors may end them; no one else sees them', async () => {
      const t = await newToken(h, org.token);
      const s = await signIn(h, t.full);
      const listed = await h.call('GET', '/api/v2/tokens/sessions', { token: org.token });
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
      const mine = listed.body.sessions.find((x: { origin: string }) => x.origin === `${t.prefix}…`);
      assert.ok(mine, JSON.stringify(listed.body.sessions));
      assert.equal(mine.accountId, org.id);
      assert.equal(mine.originType, 'admin');
      assert.ok(Math.abs(mine.createdAt - Date.now() / 1000) < 60);
      assert.ok(Math.abs(mine.lastUsedAt - Date.now() / 1000) < 60);
      assert.equal(typeof mine.expiresAt, 'number');
      assert.equal(mine.current, false);
      assert.ok(!JSON.stringify(listed.body).includes(s.cookie!), 'the session token itself is never listed');
      // Its last use is recorded (at most once a minute).
      await h.database.db.updateTable('console_sessions').set({ last_used_at: Date.now() - 3_600_000 }).where('token_id', '=', mine.sessionId).execute();
      // The session itself sees it as its own.
      const own = await withCookie(h, s.cookie!, 'GET', '/api/v2/tokens/sessions');
      assert.equal(own.json().sessions.find((x: { sessionId: number }) => x.sessionId === mine.sessionId).current, true);
      const relisted = await h.call('GET', '/api/v2/tokens/sessions', { token: org.token });
      const used = relisted.body.sessions.find((x: { sessionId: number }) => x.sessionId === mine.sessionId);
      assert.ok(Math.abs(used.lastUsedAt - Date.now() / 1000) < 60, JSON.stringify(used));

      // Another organization neither sees nor ends it.
      const foreignList = await h.call('GET', '/api/v2/tokens/sessions', { token: other.token, query: { targetAccountId: org.id } });
      assert.equal(foreignList.status, 404, JSON.stringify(foreignList.body));
      const foreignEnd = await h.call('DELETE', `/api/v2/tokens/sessions/${mine.sessionId}`, { token: other.token });
      assert.equal(foreignEnd.status, 404, JSON.stringify(foreignEnd.body));
      assert.match(foreignEnd.body.message, /sessionId/);
      // Nor does an agent of the organization (below it).
      const agentToken = await h.tokenFor(org.agentId);
      assert.equal((await h.call('DELETE', `/api/v2/tokens/sessions/${mine.sessionId}`, { token: agentToken })).status, 404);
      assert.equal((await withCookie(h, s.cookie!, 'GET', '/console/session')).statusCode, 200);

      // The reseller lists and ends it.
      const byReseller = await h.call('GET', '/api/v2/tokens/sessions', { token: reseller.token, query: { targetAccountId: org.id } });
      assert.ok(byReseller.body.sessions.some((x: { sessionId: number }) => x.sessionId === mine.sessionId));
      const ended = await h.call('DELETE', `/api/v2/tokens/sessions/${mine.sessionId}`, { token: reseller.token });
      assert.equal(ended.status, 200, JSON.stringify(ended.body));
      assert.equal((await withCookie(h, s.cookie!, 'GET', '/console/session')).statusCode, 401);
      assert.equal((await h.call('DELETE', `/api/v2/tokens/sessions/${mine.sessionId}`, { token: reseller.token })).status, 404);
      // An API token's id is not a session's.
      const apiRow = await tokenRepo.findByHash(h.database.db, hashToken(t.full));
      assert.equal((await h.call('DELETE', `/api/v2/tokens/sessions/${apiRow!.id}`, { token: org.token })).status, 404);
      assert.equal((await h.call('GET', '/api/v2/tasks/stats', { token: t.full })).status, 200);
      const bad = await h.call('DELETE', '/api/v2/tokens/sessions/abc', { token: org.token });
      assert.equal(bad.status, 400);
      assert.match(bad.body.message, /sessionId/);
    });

    it('a session from a one-time link names the link\'s prefix and outlives the spent link', async () => {
      const invited = await h.call('POST', '/api/v2/member', { token: org.token, body: { email: 'sessions@example.com' } });
      assert.ok(invited.status < 300, JSON.stringify(invited.body));
      const one = await h.call('GET', '/api/v2/auth/account/oneTimeAuthToken', { token: reseller.token, query: { email: 'sessions@example.com', customerId: org.id } });
      const s = await signIn(h, one.body.authToken);
      assert.equal(s.status, 200);
      const oneRow = await tokenRepo.findByHash(h.database.db, hashToken(one.body.authToken));
      await tokenRepo.pruneExpired(h.database.db, Date.now() + 2 * 3_600_000);
      // Pruning an expired one-time token (minutes after its use) leaves the sessions made from it.
      assert.equal(await tokenRepo.findByHash(h.database.db, hashToken(one.body.authToken)), undefined);
      const listed = await h.call('GET', '/api/v2/tokens/sessions', { token: org.token });
      assert.ok(listed.body.sessions.some((x: { origin: string; originType: string }) => x.origin === `${oneRow!.prefix}…` && x.originType === 'one-time'),
        JSON.stringify(listed.body.sessions));
    });
    it('peeks at a token without spending it or signing in, and ends the browser\'s previous session when it signs in', async () => {
      const invited = await h.call('POST', '/api/v2/member', { token: other.token, body: { email: 'peek@example.com' } });
      assert.ok(invited.status < 300, JSON.stringify(invited.body));
      const one = await h.call('GET', '/api/v2/auth/account/oneTimeAuthToken', { token: reseller.token, query: { email: 'peek@example.com', customerId: other.id } });
      const peek = await h.app.inject({ method: 'POST', url: '/console/session', payload: { token: one.body.authToken, peek: true } });
      assert.equal(peek.statusCode, 200, peek.body);
      assert.equal(peek.json().account.id, other.id);
      assert.equal(peek.headers['set-cookie'], undefined);
      assert.equal((await tokenRepo.findByHash(h.database.db, hashToken(one.body.authToken)))?.used_at, null, 'peeking does not spend the link');
      const mine = await signIn(h, org.token);
      const asConsole = await h.app.inject({ method: 'POST', url: '/console/session', payload: { token: mine.cookie, peek: true } });
      assert.equal(asConsole.statusCode, 401, 'a console session is not looked at either');
      // Signing in from a browser that has a session replaces it: the old one ends.
      const swapped = await h.app.inject({ method: 'POST', url: '/console/session', payload: { token: one.body.authToken },
        headers: { ...HEADER, cookie: `callplane_console=${mine.cookie!}` } });
      assert.equal(swapped.statusCode, 200, swapped.body);
      assert.equal(swapped.json().account.id, other.id);
      assert.equal((await withCookie(h, mine.cookie!, 'GET', '/console/session')).statusCode, 401);
      const spent = await h.app.inject({ method: 'POST', url: '/console/session', payload: { token: one.body.authToken, peek: true } });
      assert.equal(spent.statusCode, 401);
      assert.match(spent.json().message, /already been used/);
    });
  });
}
