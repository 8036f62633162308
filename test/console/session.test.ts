// The web console's sign-in and its pages as served (src/modules/console/routes.ts): a token, or a
// reseller's one-time token, is traded for an HttpOnly session cookie that counts only with the
// console's header, is scoped like the token, and stops working when signed out or expired.
// @engines sqlite
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { tokenRepo } from '../../src/modules/tokens/repository.ts';

const HEADER = { 'x-callplane-console': '1' };

function cookieOf(setCookie: unknown): { value: string; attrs: string } {
  const line = ([] as string[]).concat(setCookie as string[] | string).find((c) => c.startsWith('callplane_console='));
  assert.ok(line, `no console cookie in ${JSON.stringify(setCookie)}`);
  const value = line.slice('callplane_console='.length).split(';')[0];
  return { value, attrs: line };
}

async function signIn(h: Harness, token: string) {
  const res = await h.app.inject({ method: 'POST', url: '/console/session', payload: { token } });
  return { status: res.statusCode, body: res.json(), headers: res.headers };
}

const as = (h: Harness, cookie: string, method: 'GET' | 'DELETE', url: string, headers: Record<string, string> = HEADER) =>
  h.app.inject({ method, url, headers: { ...headers, cookie: `callplane_console=${cookie}` } });

for (const engine of ENGINES) {
  describe(`web console sign-in (${engine})`, () => {
    let h: Harness;
    let org: { id: number; agentId: number; token: string };
    let other: { id: number; agentId: number; token: string };
    let reseller: { id: number; token: string };
    before(async () => {
      h = await startHarness(engine);
      reseller = await h.reseller();
      org = await h.organization(reseller.id);
      other = await h.organization(reseller.id);
    });
    after(async () => h.close());

    it('trades a token for an HttpOnly, SameSite=Strict cookie that is not the token and is not listed among tokens', async () => {
      const r = await signIn(h, org.token);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual(r.body.account, { id: org.id, kind: 'organization', label: 'Organization', name: r.body.account.name });
      const { value, attrs } = cookieOf(r.headers['set-cookie']);
      assert.notEqual(value, org.token);
      assert.match(attrs, /; HttpOnly/);
      assert.match(attrs, /; SameSite=Strict/);
      assert.match(attrs, /; Path=\//);
      assert.match(attrs, /; Max-Age=43200/);
      assert.doesNotMatch(attrs, /; Secure/, 'served over http here, so not Secure');
      assert.ok(Math.abs(r.body.expiresAt - (Date.now() / 1000 + 43200)) < 60);
      const listed = await h.call('GET', '/api/v2/tokens', { token: org.token });
      assert.equal(listed.status, 200);
      assert.ok(listed.body.tokens.every((t: { type: string }) => t.type === 'admin'), JSON.stringify(listed.body.tokens));
    });

    it('counts the cookie only with the console header, and scopes it like the token', async () => {
      const { value } = cookieOf((await signIn(h, org.token)).headers['set-cookie']);
      assert.equal((await as(h, value, 'GET', '/console/session', {})).statusCode, 401, 'no header: the cookie is not read');
      const me = await as(h, value, 'GET', '/console/session');
      assert.equal(me.statusCode, 200);
      assert.equal(me.json().account.id, org.id);
      assert.equal(me.json().tokenType, 'console');
      assert.equal((await as(h, value, 'GET', '/api/v2/tasks/stats')).statusCode, 200);
      const foreign = await as(h, value, 'GET', `/api/v2/tasks/stats?targetAccountId=${other.id}`);
      assert.equal(foreign.statusCode, 404, foreign.body);
    });

    it('refuses a bad token with the API\'s own answer and sets no cookie', async () => {
      const r = await signIn(h, 'cpl_not-a-token');
      assert.equal(r.status, 401);
      assert.equal(r.body.success, false);
      assert.match(r.body.message, /unknown or deleted token/);
      assert.equal(r.headers['set-cookie'], undefined);
      const empty = await signIn(h, '');
      assert.equal(empty.status, 400);
      assert.match(empty.body.message, /token/);
    });

    it('takes a reseller\'s one-time token once', async () => {
      const invited = await h.call('POST', '/api/v2/member', { token: org.token, body: { email: 'ops@example.com' } });
      assert.ok(invited.status < 300, JSON.stringify(invited.body));
      const one = await h.call('GET', '/api/v2/auth/account/oneTimeAuthToken', { token: reseller.token, query: { email: 'ops@example.com', customerId: org.id } });
      assert.equal(one.status, 200, JSON.stringify(one.body));
      const first = await signIn(h, one.body.authToken);
      assert.equal(first.status, 200);
      assert.equal(first.body.account.id, org.id);
      const { value } = cookieOf(first.headers['set-cookie']);
      assert.equal((await as(h, value, 'GET', '/console/session')).statusCode, 200, 'the session outlives the one-time token');
      const again = await signIn(h, one.body.authToken);
      assert.equal(again.status, 401);
      assert.match(again.body.message, /already been used/);
    });

    it('signs out: the session stops working at once and the cookie is cleared', async () => {
      const { value } = cookieOf((await signIn(h, org.token)).headers['set-cookie']);
      const out = await as(h, value, 'DELETE', '/console/session');
      assert.equal(out.statusCode, 200);
      assert.match(String(out.headers['set-cookie']), /callplane_console=;.*Expires=Thu, 01 Jan 1970/);
      assert.equal((await as(h, value, 'GET', '/console/session')).statusCode, 401);
      // Signing out with an API token deletes nothing.
      const viaToken = await h.app.inject({ method: 'DELETE', url: '/console/session', headers: { authorization: `Bearer ${org.token}` } });
      assert.equal(viaToken.statusCode, 200);
      assert.equal((await h.call('GET', '/api/v2/tasks/stats', { token: org.token })).status, 200);
    });

    it('an expired session is refused and then pruned', async () => {
      const { value } = cookieOf((await signIn(h, org.token)).headers['set-cookie']);
      const { hashToken } = await import('../../src/lib/crypto.ts');
      const row = await tokenRepo.findByHash(h.database.db, hashToken(value));
      assert.equal(row?.type, 'console');
      await h.database.db.updateTable('tokens').set({ expires_at: Date.now() - 1000 }).where('id', '=', row!.id).execute();
      const r = await as(h, value, 'GET', '/console/session');
      assert.equal(r.statusCode, 401);
      assert.match(r.json().message, /expired/);
      assert.ok(await tokenRepo.pruneExpired(h.database.db, Date.now()) >= 1);
      assert.equal(await tokenRepo.findByHash(h.database.db, hashToken(value)), undefined);
    });
  });
}

describe('the console sign-in is limited per address like the API', () => {
  it('answers 429 once an address has sent its share, whatever the tokens', async () => {
    const h = await startHarness('sqlite', { CALLPLANE_RATE_LIMIT_PER_ADDRESS: '3', CALLPLANE_RATE_LIMIT_WINDOW_SECONDS: '60' });
    try {
      const codes: number[] = [];
      for (let i = 0; i < 4; i++) codes.push((await signIn(h, `cpl_guess-${i}`)).status);
      assert.deepEqual(codes, [401, 401, 401, 429]);
    } finally {
      await h.close();
    }
  });
});

describe('the console\'s pages as served', () => {
  let h: Harness;
  before(async () => { h = await startHarness('sqlite'); });
  after(async () => h.close());

  it('serves the built page at /console/ with a strict content policy, and its assets as immutable', async () => {
    assert.equal((await h.app.inject({ method: 'GET', url: '/console' })).statusCode, 200);
    const page = await h.app.inject({ method: 'GET', url: '/console/' });
    assert.equal(page.statusCode, 200, page.body);
    assert.match(String(page.headers['content-type']), /text\/html/);
    assert.match(String(page.headers['content-security-policy']), /script-src 'self'/);
    assert.match(String(page.headers['content-security-policy']), /frame-ancestors 'none'/);
    assert.equal(page.headers['cache-control'], 'no-cache');
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(page.body)?.[1];
    assert.ok(script, page.body);
    const asset = await h.app.inject({ method: 'GET', url: script });
    assert.equal(asset.statusCode, 200);
    assert.match(String(asset.headers['cache-control']), /immutable/);
    assert.equal((await h.app.inject({ method: 'GET', url: '/console/assets/nothing.js' })).statusCode, 404);
    // Nothing outside the built folder, however the path is spelled; no directory listing.
    for (const url of ['/console/../package.json', '/console/%2e%2e/package.json', '/console/assets/%2e%2e/%2e%2e/package.json', '/console/..%2fpackage.json', '/console/assets', '/console/assets/']) {
      const r = await h.app.inject({ method: 'GET', url });
      assert.ok([400, 403, 404].includes(r.statusCode), `${url}: ${r.statusCode}`);
      assert.doesNotMatch(r.body, /"name": "callplane"/, url);
    }
    // A second request for the page is answered 304 when the browser has it.
    const again = await h.app.inject({ method: 'GET', url: '/console/', headers: { 'if-none-match': String(page.headers.etag) } });
    assert.equal(again.statusCode, 304);
  });

  it('says how to build the console when it is not built', async () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-console-'));
    const bare = await startHarness('sqlite', { CALLPLANE_CONSOLE_DIR: empty });
    try {
      const r = await bare.app.inject({ method: 'GET', url: '/console/' });
      assert.equal(r.statusCode, 503);
      assert.equal(r.json().success, false);
      assert.match(r.json().message, /npm run build/);
    } finally {
      await bare.close();
    }
  });
});
