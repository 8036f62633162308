// Rate limits of the token-authenticated API (src/http/rate-limits.ts): per token and per source
// address, 429 in our envelope with Retry-After, reset after the window, off with 0, and on
// PostgreSQL one count shared by every API process on the database.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildApp } from '../../src/app.ts';
import { loadConfig, ConfigError } from '../../src/config.ts';
import { openDatabase } from '../../src/db/index.ts';
import { addToWindow, pruneEndedWindows } from '../../src/db/rate-limit-counters.ts';
import { maintenanceJobs } from '../../src/maintenance.ts';
import { SharedRateLimitStore } from '../../src/http/shared-rate-limit-store.ts';
import { SecretBox } from '../../src/lib/crypto.ts';
import { createPlatform } from '../../src/platform.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { PG_URL, startHarness, type Harness } from '../helpers/harness.ts';
import crypto from 'node:crypto';

async function get(h: Harness, url: string, opts: { token?: string; ip?: string } = {}) {
  const res = await h.app.inject({
    method: 'GET', url, remoteAddress: opts.ip ?? '127.0.0.1',
    ...(opts.token !== undefined ? { query: { token: opts.token } } : {}),
  });
  let body: any = res.body;
  try { body = res.json(); } catch { /* not JSON */ }
  return { status: res.statusCode, headers: res.headers, body };
}

function assertRefused(r: { status: number; headers: Record<string, unknown>; body: any }, kind: RegExp): void {
  assert.equal(r.status, 429, JSON.stringify(r.body));
  assert.equal(r.body.success, false);
  assert.match(r.body.message, /^rate limit exceeded: more than \d+ requests .+, retry in \d+ s$/);
  assert.match(r.body.message, kind);
  const retryAfter = Number(r.headers['retry-after']);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After ${String(r.headers['retry-after'])}`);
  assert.ok(r.body.message.endsWith(`retry in ${retryAfter} s`), 'the message and Retry-After agree');
  assert.equal(r.headers['x-ratelimit-remaining'], '0');
  assert.ok(r.headers['x-ratelimit-limit'] !== undefined && r.headers['x-ratelimit-reset'] !== undefined);
}

forEachEngine('rate limit per token', (harness) => {
  it('refuses a token past its limit with 429 while another tenant in the same window is served', async () => {
    const h = harness();
    const reseller = await h.reseller();
    const a = await h.organization(reseller.id);
    const b = await h.organization(reseller.id);
    for (let i = 1; i <= 20; i++) {
      const r = await get(h, '/api/v2/account', { token: a.token });
      assert.equal(r.status, 200, `request ${i}`);
      assert.equal(r.headers['x-ratelimit-limit'], '20');
      assert.equal(r.headers['x-ratelimit-remaining'], String(20 - i));
    }
    assertRefused(await get(h, '/api/v2/account', { token: a.token }), /with one token/);
    assertRefused(await get(h, '/api/v2/tasks', { token: a.token }), /with one token/);
    // No starvation: the other organization, and the partner, are counted on their own.
    const other = await get(h, '/api/v2/account', { token: b.token });
    assert.equal(other.status, 200);
    assert.equal(other.body.id, b.id);
    assert.equal((await get(h, '/api/v2/account', { token: h.adminToken })).status, 200);
  });

  it('counts a request without a valid token against its address only', async () => {
    const h = harness();
    for (let i = 0; i < 30; i++) assert.equal((await get(h, '/api/v2/account', { token: 'cpl_not_a_token' })).status, 401);
    assert.equal((await get(h, '/api/v2/account')).status, 401);
  });

  it('keeps no token in a key', async () => {
    const h = harness();
    if (h.engine !== 'postgres') return; // SQLite counts in memory
    const rows = await h.database.db.selectFrom('rate_limit_counters').select('key').execute();
    assert.ok(rows.some((r) => /^t:\d+$/.test(r.key)), JSON.stringify(rows));
    for (const r of rows) assert.match(r.key, /^(t:\d+|a:[0-9a-f.:/]+)$/);
  });
}, { CALLPLANE_RATE_LIMIT_PER_TOKEN: '20', CALLPLANE_RATE_LIMIT_PER_ADDRESS: '0' });

forEachEngine('rate limit per address', (harness) => {
  it('refuses an address past its limit before authentication, and not another address', async () => {
    const h = harness();
    const ip = '203.0.113.5';
    for (let i = 0; i < 10; i++) assert.equal((await get(h, '/api/v2/account', { token: 'cpl_bad', ip })).status, 401);
    // Even with a valid token: the address is spent.
    assertRefused(await get(h, '/api/v2/account', { token: h.adminToken, ip }), /from one address/);
    assert.equal((await get(h, '/api/v2/account', { token: h.adminToken, ip: '203.0.113.6' })).status, 200);
  });

  it('counts an IPv6 /64 as one address', async () => {
    const h = harness();
    for (let i = 0; i < 10; i++) {
      assert.equal((await get(h, '/api/v2/account', { token: h.adminToken, ip: `2001:db8:1:2::${(i + 1).toString(16)}` })).status, 200);
    }
    assertRefused(await get(h, '/api/v2/account', { token: h.adminToken, ip: '2001:db8:1:2:ffff:ffff:ffff:ffff' }), /from one address/);
    assert.equal((await get(h, '/api/v2/account', { token: h.adminToken, ip: '2001:db8:1:3::1' })).status, 200);
  });

  it('leaves health, metrics, documents and provider callbacks alone', async () => {
    const h = harness();
    const ip = '198.51.100.7';
    for (let i = 0; i < 11; i++) await get(h, '/api/v2/account', { ip });
    assert.equal((await get(h, '/api/v2/account', { ip })).status, 429);
    for (let i = 0; i < 15; i++) {
      assert.equal((await get(h, '/healthz', { ip })).status, 200);
      assert.equal((await get(h, '/metrics', { ip })).status, 200);
      assert.equal((await get(h, '/api/v2/openapi.json', { ip })).status, 200);
      const callback = await h.app.inject({ method: 'POST', url: '/api/v2/providers/twilio/status', remoteAddress: ip, payload: 'CallSid=CA1', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      assert.notEqual(callback.statusCode, 429);
    }
  });
}, { CALLPLANE_RATE_LIMIT_PER_TOKEN: '0', CALLPLANE_RATE_LIMIT_PER_ADDRESS: '10' });

forEachEngine('rate limit window', (harness) => {
  it('serves a refused token again once the window has passed', async () => {
    const h = harness();
    const org = { token: h.adminToken };
    // Windows of one second: on PostgreSQL they are aligned to whole seconds, so start just after one begins.
    await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 20));
    for (let i = 0; i < 3; i++) assert.equal((await get(h, '/api/v2/account', { token: org.token })).status, 200);
    const refused = await get(h, '/api/v2/account', { token: org.token });
    assertRefused(refused, /3 requests a second with one token/);
    assert.equal(refused.headers['retry-after'], '1');
    await new Promise((r) => setTimeout(r, 1100));
    assert.equal((await get(h, '/api/v2/account', { token: org.token })).status, 200);
  });
}, { CALLPLANE_RATE_LIMIT_PER_TOKEN: '3', CALLPLANE_RATE_LIMIT_PER_ADDRESS: '0', CALLPLANE_RATE_LIMIT_WINDOW_SECONDS: '1' });

forEachEngine('rate limits off', (harness) => {
  it('limits nothing with 0', async () => {
    const h = harness();
    for (let i = 0; i < 40; i++) {
      const r = await get(h, '/api/v2/account', { token: h.adminToken });
      assert.equal(r.status, 200);
      assert.equal(r.headers['x-ratelimit-limit'], undefined);
    }
  });
}, { CALLPLANE_RATE_LIMIT_PER_TOKEN: '0', CALLPLANE_RATE_LIMIT_PER_ADDRESS: '0' });

forEachEngine('rate limit per address behind a proxy', (harness) => {
  it('counts the client a trusted proxy names, and ignores the header from anyone else', async () => {
    const h = harness();
    const via = async (remoteAddress: string, client: string) => (await h.app.inject({
      method: 'GET', url: '/api/v2/account', query: { token: h.adminToken }, remoteAddress, headers: { 'x-forwarded-for': client },
    })).statusCode;
    for (let i = 0; i < 5; i++) assert.equal(await via('10.1.2.3', '192.0.2.10'), 200);
    assert.equal(await via('10.1.2.3', '192.0.2.10'), 429);
    // Another client through the same proxy is counted on its own.
    assert.equal(await via('10.1.2.3', '192.0.2.11'), 200);
    // Not from the proxy: the header is not believed, the connection's address counts.
    for (let i = 0; i < 5; i++) assert.equal(await via('198.51.100.1', '192.0.2.12'), 200);
    assert.equal(await via('198.51.100.1', '192.0.2.13'), 429);
  });
}, { CALLPLANE_RATE_LIMIT_PER_TOKEN: '0', CALLPLANE_RATE_LIMIT_PER_ADDRESS: '5', CALLPLANE_TRUST_PROXY: '10.0.0.0/8' });

describe('rate limit settings', () => {
  it('defaults to 1200 per token and 3000 per address a minute', () => {
    const c = loadConfig({});
    assert.deepEqual([c.rateLimitPerToken, c.rateLimitPerAddress, c.rateLimitWindowSeconds], [1200, 3000, 60]);
    assert.equal(loadConfig({ CALLPLANE_RATE_LIMIT_PER_TOKEN: '0' }).rateLimitPerToken, 0);
  });

  it('refuses values that are not whole numbers of requests, or windows out of range', () => {
    for (const bad of ['-1', '1.5', 'lots', '1e3', '10000001']) {
      assert.throws(() => loadConfig({ CALLPLANE_RATE_LIMIT_PER_TOKEN: bad }),
        (e: unknown) => e instanceof ConfigError && e.message.startsWith('CALLPLANE_RATE_LIMIT_PER_TOKEN must be a whole number') && e.message.includes(`'${bad}'`));
    }
    assert.throws(() => loadConfig({ CALLPLANE_RATE_LIMIT_PER_ADDRESS: 'x' }), /CALLPLANE_RATE_LIMIT_PER_ADDRESS must be/);
    assert.throws(() => loadConfig({ CALLPLANE_RATE_LIMIT_WINDOW_SECONDS: '0' }), /CALLPLANE_RATE_LIMIT_WINDOW_SECONDS must be an integer between 1 and 86400/);
    assert.throws(() => loadConfig({ CALLPLANE_TRUST_PROXY: '10.0.0.0/8,proxy.local' }), /CALLPLANE_TRUST_PROXY must be a comma-separated list .*'proxy.local' is neither/);
    assert.deepEqual(loadConfig({ CALLPLANE_TRUST_PROXY: ' 10.0.0.0/8, ::1 ' }).trustProxy, ['10.0.0.0/8', '::1']);
    assert.deepEqual(loadConfig({}).trustProxy, []);
  });
});

// The shared store's reservations, on each engine's SQL (only PostgreSQL uses it in service): two
// stores on one database, as two processes, never admit more than the limit between them, and
// leave at most one batch each unused.
forEachEngine('shared rate-limit store', (harness) => {
  it('admits at most the limit across two stores, and nearly all of it', async () => {
    const h = harness();
    const add = (key: string, ws: number, n: number) => addToWindow(h.database.db, key, ws, n);
    const stores = [new SharedRateLimitStore(add), new SharedRateLimitStore(add)];
    const max = 500;
    const windowMs = 3_600_000;
    let admitted = 0;
    let refused = 0;
    await Promise.all(stores.map(async (s) => {
      for (let round = 0; round < 40; round++) {
        const results = await Promise.all(Array.from({ length: 10 }, () => s.take('test:shared', windowMs, max)));
        for (const r of results) {
          if (r.current <= max) admitted++;
          else refused++;
          assert.ok(r.ttl > 0 && r.ttl <= windowMs);
        }
      }
    }));
    assert.equal(admitted + refused, 800);
    assert.ok(admitted <= max, `admitted ${admitted} of ${max}`);
    assert.ok(admitted >= max - 2 * 10, `admitted ${admitted}: more than two batches went unused`);
    // Once full, a store refuses without asking the database again.
    let asked = 0;
    const counting = new SharedRateLimitStore((k, ws, n) => { asked++; return add(k, ws, n); });
    for (let i = 0; i < 5; i++) assert.ok((await counting.take('test:shared', windowMs, max)).current > max);
    assert.equal(asked, 1);
  });

  it('counts a key in one row, starts it over in a new window, and prunes ended windows', async () => {
    const h = harness();
    const db = h.database.db;
    assert.deepEqual(await addToWindow(db, 'test:prune-old', 60_000, 3), { count: 3, windowStart: 60_000 });
    assert.deepEqual(await addToWindow(db, 'test:prune-old', 60_000, 2), { count: 5, windowStart: 60_000 });
    // A process whose clock is behind counts in the row's later window.
    assert.deepEqual(await addToWindow(db, 'test:prune-old', 0, 1), { count: 6, windowStart: 60_000 });
    assert.deepEqual(await addToWindow(db, 'test:prune-old', 120_000, 1), { count: 1, windowStart: 120_000 });
    await addToWindow(db, 'test:prune-new', 10_000_000, 1);
    const job = maintenanceJobs(h.database, { taskRetentionDays: 30 }).find((j) => j.name === 'prune-rate-limit-counters');
    assert.ok(job);
    assert.equal(await pruneEndedWindows(db, 1_000_000, 1000), 1);
    const left = await db.selectFrom('rate_limit_counters').select('key').where('key', 'like', 'test:prune-%').execute();
    assert.deepEqual(left.map((r) => r.key), ['test:prune-new']);
    // The job removes what is left from long ago (and what the other tests here counted is recent).
    await job.run();
    assert.equal((await db.selectFrom('rate_limit_counters').select('key').where('key', '=', 'test:prune-new').execute()).length, 0);
  });

  it('reserves batches: far below the limit most requests need no round trip', async () => {
    const h = harness();
    let asked = 0;
    const s = new SharedRateLimitStore((k, ws, n) => { asked++; return addToWindow(h.database.db, k, ws, n); });
    for (let i = 1; i <= 100; i++) assert.equal((await s.take('test:batch', 3_600_000, 1200)).current, i);
    assert.ok(asked <= 5, `${asked} round trips for 100 requests`);
  });
});

if (PG_URL) {
  describe('rate limits shared by two API processes [postgres]', () => {
    it('counts a token once across two apps on the same database', async () => {
      const env = { CALLPLANE_RATE_LIMIT_PER_TOKEN: '10', CALLPLANE_RATE_LIMIT_PER_ADDRESS: '0' };
      const h = await startHarness('postgres', env);
      const database = openDatabase({ databaseUrl: h.config.databaseUrl, poolSize: 2 });
      const config = loadConfig({ DATA_DIR: h.config.dataDir, DATABASE_URL: h.config.databaseUrl!, ...env });
      const platform = createPlatform({ config, database, box: new SecretBox(crypto.randomBytes(32)) });
      const second = await buildApp({ config, database, services: platform.services });
      try {
        const reseller = await h.reseller();
        const org = await h.organization(reseller.id);
        const apps = [h.app, second];
        for (let i = 0; i < 10; i++) {
          const res = await apps[i % 2]!.inject({ method: 'GET', url: '/api/v2/account', query: { token: org.token } });
          assert.equal(res.statusCode, 200, `request ${i + 1}`);
        }
        for (const app of apps) {
          const res = await app.inject({ method: 'GET', url: '/api/v2/account', query: { token: org.token } });
          assert.equal(res.statusCode, 429);
          assert.match((res.json() as { message: string }).message, /more than 10 requests a minute with one token/);
        }
      } finally {
        await second.close();
        await platform.close();
        await database.close();
        await h.close();
      }
    });
  });
}
