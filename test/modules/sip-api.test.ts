// The SIP API without SIP peers: validation (every 400 names its field or the bad part), tenancy
// of every SIP route (organization token, targetAccountId for ancestors, agents read-only, other
// tenants 404), the whitelist and outbound routes as stored and listed, captures scoped to the
// organization, and registration when no SIP worker answers (502, nothing kept; DELETE removes).
// @engines sqlite
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { newId } from '../../src/lib/ids.ts';
import { forEachEngine } from '../helpers/engines.ts';
import type { Reply } from '../helpers/harness.ts';

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  for (const w of words) assert.ok(String(res.body.message).includes(w), `"${res.body.message}" should name ${w}`);
}

forEachEngine('SIP API', (h) => {
  const call = (method: string, path: string, token: string, opts: { body?: unknown; query?: Record<string, unknown> } = {}) =>
    h().call(method, `/api/v2/sip/${path}`, { token, ...opts });

  async function tenant() {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const agent = await h().agent(o.id);
    return { r, o, agent };
  }

  it('adds, relabels, lists and removes whitelist entries, normalised, with the contract\'s shapes', async () => {
    const { o } = await tenant();
    const added = await call('POST', 'ipWhitelist', o.token, { body: { ip: '192.168.1.1', label: 'Office IP' } });
    assert.equal(added.status, 201, JSON.stringify(added.body));
    assert.equal(added.body.message, 'IP entry created successfully');
    assert.equal(added.body.whitelist.length, 1);
    const [entry] = added.body.whitelist;
    assert.deepEqual({ userId: entry.userId, label: entry.label, ip: entry.ip }, { userId: o.id, label: 'Office IP', ip: '192.168.1.1' });
    assert.ok(Math.abs(entry.timestamp - Date.now() / 1000) < 60, 'timestamp is unix seconds');

    assert.equal((await call('POST', 'ipWhitelist', o.token, { body: { ip: '10.9.8.7/24', label: 'LAN' } })).status, 201);
    assert.equal((await call('POST', 'ipWhitelist', o.token, { body: { ip: '2001:DB8::1', label: 'v6' } })).status, 201);
    // The same range written differently is the same entry: 200, relabelled.
    const again = await call('POST', 'ipWhitelist', o.token, { body: { ip: '10.9.8.0/24', label: 'Private' } });
    assert.equal(again.status, 200);
    assert.match(again.body.message, /already exists/);

    const list = await call('GET', 'ipWhitelist', o.token);
    assert.equal(list.status, 200);
    assert.equal(list.body.message, 'Success');
    assert.deepEqual(list.body.whitelist.map((w: any) => [w.ip, w.label]), [['192.168.1.1', 'Office IP'], ['10.9.8.0/24', 'Private'], ['2001:db8::1', 'v6']]);

    const removed = await call('DELETE', 'ipWhitelist', o.token, { body: { ip: '10.9.8.1/24' } });
    assert.equal(removed.status, 200);
    assert.deepEqual(removed.body, { success: true, message: 'IP entry deleted successfully' });
    expectError(await call('DELETE', 'ipWhitelist', o.token, { body: { ip: '10.9.8.0/24' } }), 404, '10.9.8.0/24');
    assert.deepEqual((await call('GET', 'ipWhitelist', o.token)).body.whitelist.map((w: any) => w.ip), ['192.168.1.1', '2001:db8::1']);
  });

  it('takes an entry without a label (an extension); re-added without one it keeps its label', async () => {
    const { o } = await tenant();
    assert.equal((await call('POST', 'ipWhitelist', o.token, { body: { ip: '10.0.0.1' } })).status, 201);
    assert.equal((await call('POST', 'ipWhitelist', o.token, { body: { ip: '10.0.0.2', label: '   ' } })).status, 201);
    assert.equal((await call('POST', 'ipWhitelist', o.token, { body: { ip: '10.0.0.3', label: 'Trunk' } })).status, 201);
    assert.equal((await call('POST', 'ipWhitelist', o.token, { body: { ip: '10.0.0.3' } })).status, 200);
    const list = await call('GET', 'ipWhitelist', o.token);
    assert.deepEqual(list.body.whitelist.map((w: any) => [w.ip, w.label]), [['10.0.0.1', ''], ['10.0.0.2', ''], ['10.0.0.3', 'Trunk']]);
  });

  it('says where to send calls, from the configuration: host, port, transports and the Request-URI forms', async () => {
    const { o, r } = await tenant();
    const res = await call('GET', 'ingress', o.token);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const cfg = h().config;
    const host = cfg.sipAdvertiseHost ?? (cfg.sipHost === '0.0.0.0' ? undefined : cfg.sipHost);
    if (host !== undefined) assert.equal(res.body.ingress.host, host);
    else assert.match(res.body.ingress.host, /^[\d.]+$/);
    assert.equal(res.body.ingress.port, cfg.sipPort === 0 ? null : cfg.sipPort);
    assert.equal(res.body.ingress.enabled, cfg.sipEnabled);
    assert.deepEqual(res.body.ingress.transports, ['udp', 'tcp']);
    const at = cfg.sipPort === 0 ? res.body.ingress.host : `${res.body.ingress.host}:${cfg.sipPort}`;
    assert.deepEqual(res.body.ingress.uriForms.map((u: any) => u.form), [`sip:<number>@${at}`, `sip:<user>@${at}`]);
    // A reseller reads it for its organization; a stranger's organization is not reachable.
    assert.equal((await call('GET', 'ingress', r.token, { query: { targetAccountId: o.id } })).status, 200);
    const other = await tenant();
    assert.equal((await call('GET', 'ingress', other.r.token, { query: { targetAccountId: o.id } })).status, 404);
  });

  it('refuses bad whitelist input naming the field', async () => {
    const { o } = await tenant();
    expectError(await call('POST', 'ipWhitelist', o.token, { body: { ip: 'pbx.example.com', label: 'x' } }), 400, 'ip', 'pbx.example.com');
    expectError(await call('POST', 'ipWhitelist', o.token, { body: { ip: '10.0.0.0/40', label: 'x' } }), 400, 'ip', '/40');
    expectError(await call('POST', 'ipWhitelist', o.token, { body: { ip: '10.0.0.1', label: 'x'.repeat(201) } }), 400, 'label');
    expectError(await call('POST', 'ipWhitelist', o.token, { body: { label: 'x' } }), 400, 'ip');
    expectError(await call('POST', 'ipWhitelist', o.token, { body: { ip: 7, label: 'x' } }), 400, 'ip');
    expectError(await call('DELETE', 'ipWhitelist', o.token, { body: {} }), 400, 'ip');
    expectError(await call('DELETE', 'ipWhitelist', o.token, { body: { ip: 'nope' } }), 400, 'ip');
    assert.deepEqual((await call('GET', 'ipWhitelist', o.token)).body.whitelist, []);
  });

  it('refuses over-broad whitelist entries (wider than /24 or /48, unspecified, multicast, loopback without the private-targets setting) naming ip', async () => {
    const { o } = await tenant();
    for (const [ip, why] of [
      ['0.0.0.0/0', /covers too many addresses.*\/24/], ['10.0.0.0/8', /covers too many addresses/], ['203.0.113.0/23', /covers too many addresses/],
      ['::/0', /covers too many addresses.*\/48/], ['2001:db8::/47', /covers too many addresses/], ['::ffff:0.0.0.0/96', /covers too many addresses/],
      ['0.0.0.0', /unspecified/], ['0.1.2.0/24', /unspecified/], ['::', /unspecified/], ['::/64', /unspecified/],
      ['224.0.0.1', /multicast/], ['239.1.1.0/24', /multicast/], ['255.255.255.255', /broadcast/], ['ff02::1', /multicast/],
      ['127.0.0.1', /loopback.*CALLPLANE_ALLOW_PRIVATE_TARGETS/], ['127.0.0.0/24', /loopback/], ['::1', /loopback/], ['::ffff:127.0.0.1', /loopback/],
    ] as Array<[string, RegExp]>) {
      const res = await call('POST', 'ipWhitelist', o.token, { body: { ip, label: 'too wide' } });
      expectError(res, 400, 'ip');
      assert.match(res.body.message, why, ip);
    }
    // The widest allowed, and an address just beside the special blocks.
    assert.equal((await call('POST', 'ipWhitelist', o.token, { body: { ip: '203.0.113.0/24', label: 'trunk' } })).status, 201);
    assert.equal((await call('POST', 'ipWhitelist', o.token, { body: { ip: '2001:db8:1::/48', label: 'site' } })).status, 201);
    assert.equal((await call('POST', 'ipWhitelist', o.token, { body: { ip: '223.255.255.0/24', label: 'edge' } })).status, 201);
    assert.deepEqual((await call('GET', 'ipWhitelist', o.token)).body.whitelist.map((w: any) => w.ip), ['203.0.113.0/24', '2001:db8:1::/48', '223.255.255.0/24']);
  });

  it('refuses SIP targets the address policy refuses (loopback, the metadata address, names resolving to them) naming the field; opens only what CALLPLANE_ALLOW_PRIVATE_TARGETS lists', async () => {
    const { o } = await tenant();
    const policy = /private targets are not allowed \(CALLPLANE_ALLOW_PRIVATE_TARGETS\)/;
    const refused = async (path: string, body: Record<string, unknown>, field: string, why: RegExp) => {
      const res = await call('POST', path, o.token, { body });
      expectError(res, 400, field);
      assert.match(res.body.message, why, JSON.stringify(body));
      assert.match(res.body.message, policy);
    };
    const reg = { aor: 'sip:1001@pbx.example.com', password: 'secret' };
    await refused('registration', { ...reg, proxy: '127.0.0.1:5060' }, 'proxy', /^proxy host 127\.0\.0\.1 is a loopback address/);
    await refused('registration', { ...reg, proxy: 'sip:169.254.169.254' }, 'proxy', /cloud metadata/);
    await refused('registration', { ...reg, proxy: '[::1]:5060' }, 'proxy', /loopback/);
    // A name refused says so, never what it resolved to.
    await refused('registration', { ...reg, proxy: 'localhost' }, 'proxy', /^proxy host localhost: the address policy refused the target; /);
    await refused('registration', { ...reg, aor: 'sip:1001@169.254.169.254' }, 'aor', /^aor host 169\.254\.169\.254 is a link-local address \(the cloud metadata service\)/);
    await refused('registration', { ...reg, aor: 'sip:1001@localhost:5080' }, 'aor', /^aor host localhost: the address policy refused the target; /);
    await refused('registration', { username: '1001', sipRealm: '127.0.0.2', password: 'secret' }, 'sipRealm', /^sipRealm host 127\.0\.0\.2 is a loopback address/);
    await refused('registration', { ...reg, proxy: '192.168.1.10' }, 'proxy', /private \(RFC 1918\)/);
    await refused('outboundRoutes', { route: '127.0.0.1:5060' }, 'route', /^route host 127\.0\.0\.1 is a loopback address/);
    await refused('outboundRoutes', { route: '169.254.169.254;transport=tcp' }, 'route', /cloud metadata/);
    await refused('outboundRoutes', { route: 'localhost:5061;transport=tls' }, 'route', /^route host localhost: the address policy refused the target; /);
    await refused('outboundRoutes', { route: '[::ffff:127.0.0.1]:5060' }, 'route', /loopback/);
    await refused('outboundRoutes', { route: 'pbx.example.com;proxyAddress=127.0.0.1:5070' }, 'route proxyAddress', /^route proxyAddress host 127\.0\.0\.1 is a loopback address/);
    await refused('outboundRoutes', { route: 'pbx.example.com;proxyAddress=localhost' }, 'route proxyAddress', /^route proxyAddress host localhost: the address policy refused the target; /);
    assert.deepEqual((await call('GET', 'outboundRoutes', o.token)).body.routes, []);
    expectError(await call('GET', 'registration', o.token), 404);
    // The range the setting lists (10.0.0.0/8 here) is open; behind a proxy the route's own host is not contacted.
    assert.equal((await call('POST', 'outboundRoutes', o.token, { body: { route: '10.1.2.3:5060' } })).status, 201);
    assert.equal((await call('POST', 'outboundRoutes', o.token, { body: { route: 'pbx.internal;proxyAddress=10.0.0.1' } })).status, 201);
  });

  it('adds, lists and removes outbound routes; an equivalent route is the same route', async () => {
    const { o } = await tenant();
    const added = await call('POST', 'outboundRoutes', o.token, { body: { route: '1.1.1.1:5060;transport=udp' } });
    assert.equal(added.status, 201, JSON.stringify(added.body));
    assert.deepEqual(added.body, { success: true, message: 'Route added successfully', routes: ['1.1.1.1:5060;transport=udp'] });
    const same = await call('POST', 'outboundRoutes', o.token, { body: { route: '1.1.1.1' } });
    assert.equal(same.status, 200);
    assert.equal(same.body.message, 'Route already exists');
    const second = await call('POST', 'outboundRoutes', o.token, { body: { route: 'PBX.example.com:5080;transport=TCP;proxyAddress=10.0.0.1:5070' } });
    assert.equal(second.status, 201);
    assert.deepEqual((await call('GET', 'outboundRoutes', o.token)).body, {
      success: true, message: 'Success', routes: ['1.1.1.1:5060;transport=udp', 'PBX.example.com:5080;transport=TCP;proxyAddress=10.0.0.1:5070'],
    });
    const row = await h().database.db.selectFrom('sip_outbound_routes').selectAll().where('org_id', '=', o.id).where('host', '=', 'pbx.example.com').executeTakeFirstOrThrow();
    assert.deepEqual([row.port, row.transport, row.proxy_host, row.proxy_port], [5080, 'TCP', '10.0.0.1', 5070]);

    const removed = await call('DELETE', 'outboundRoutes', o.token, { body: { route: '1.1.1.1;transport=UDP' } });
    assert.deepEqual(removed.body, { success: true, message: 'Route removed successfully' });
    expectError(await call('DELETE', 'outboundRoutes', o.token, { body: { route: '1.1.1.1' } }), 404, '1.1.1.1');
    assert.deepEqual((await call('GET', 'outboundRoutes', o.token)).body.routes, ['PBX.example.com:5080;transport=TCP;proxyAddress=10.0.0.1:5070']);
  });

  it('refuses a malformed route naming the bad part', async () => {
    const { o } = await tenant();
    const bad = async (route: unknown, ...words: string[]) => expectError(await call('POST', 'outboundRoutes', o.token, { body: { route } }), 400, ...words);
    await bad('1.1.1.1:99999', 'port', '99999');
    await bad('1.1.1.1;transport=sctp', 'transport', 'sctp');
    await bad('1.1.1.1;proxyAddress=bad host', 'spaces');
    await bad('1.1.1.1;proxyAddress=bad_host', 'proxyAddress', 'bad_host');
    await bad('1.1.1.1;foo=bar', "'foo'");
    await bad('', 'route');
    await bad(12, 'route');
    expectError(await call('POST', 'outboundRoutes', o.token, { body: {} }), 400, 'route');
    expectError(await call('DELETE', 'outboundRoutes', o.token, { body: { route: 'x:0' } }), 400, 'port');
    assert.deepEqual((await call('GET', 'outboundRoutes', o.token)).body.routes, []);
  });

  it('keeps each organization\'s lists to itself; ancestors act through targetAccountId; agents read but do not change', async () => {
    const a = await tenant();
    const b = await tenant();
    assert.equal((await call('POST', 'ipWhitelist', a.o.token, { body: { ip: '203.0.113.5', label: 'A' } })).status, 201);
    assert.equal((await call('POST', 'outboundRoutes', a.o.token, { body: { route: 'a.example.com' } })).status, 201);
    // Another organization sees nothing of it and cannot remove it.
    assert.deepEqual((await call('GET', 'ipWhitelist', b.o.token)).body.whitelist, []);
    assert.deepEqual((await call('GET', 'outboundRoutes', b.o.token)).body.routes, []);
    expectError(await call('DELETE', 'ipWhitelist', b.o.token, { body: { ip: '203.0.113.5' } }), 404);
    expectError(await call('DELETE', 'outboundRoutes', b.o.token, { body: { route: 'a.example.com' } }), 404);
    // Its reseller acts on it with targetAccountId (the organization, or one of its agents).
    assert.deepEqual((await call('GET', 'ipWhitelist', a.r.token, { query: { targetAccountId: a.o.id } })).body.whitelist.map((w: any) => w.ip), ['203.0.113.5']);
    assert.deepEqual((await call('GET', 'outboundRoutes', a.r.token, { query: { targetAccountId: a.agent.id } })).body.routes, ['a.example.com']);
    assert.equal((await call('POST', 'ipWhitelist', a.r.token, { query: { targetAccountId: a.o.id }, body: { ip: '203.0.113.6', label: 'by reseller' } })).status, 201);
    // …the partner too; another reseller cannot, and a reseller without targetAccountId is not an organization.
    assert.equal((await call('GET', 'ipWhitelist', h().adminToken, { query: { targetAccountId: a.o.id } })).body.whitelist.length, 2);
    expectError(await call('GET', 'ipWhitelist', b.r.token, { query: { targetAccountId: a.o.id } }), 404, 'targetAccountId');
    expectError(await call('POST', 'outboundRoutes', b.r.token, { query: { targetAccountId: a.o.id }, body: { route: 'x.example.com' } }), 404);
    expectError(await call('GET', 'ipWhitelist', a.r.token), 403, 'targetAccountId');
    // An agent reads its organization's settings but may not change them.
    assert.equal((await call('GET', 'ipWhitelist', a.agent.token)).body.whitelist.length, 2);
    assert.deepEqual((await call('GET', 'outboundRoutes', a.agent.token)).body.routes, ['a.example.com']);
    expectError(await call('POST', 'ipWhitelist', a.agent.token, { body: { ip: '198.51.100.1', label: 'x' } }), 403, 'organization');
    expectError(await call('DELETE', 'outboundRoutes', a.agent.token, { body: { route: 'a.example.com' } }), 403);
    expectError(await call('POST', 'registration', a.agent.token, { body: { aor: 'sip:1@x.example.com', password: 'p' } }), 403);
    expectError(await call('DELETE', 'registration', a.agent.token), 403);
    // Without a token: 401, on every SIP route.
    for (const [m, p] of [['GET', 'ipWhitelist'], ['POST', 'outboundRoutes'], ['GET', 'registration'], ['DELETE', 'registration'], ['POST', 'registration/available'], ['GET', 'captures']]) {
      expectError(await h().call(m, `/api/v2/sip/${p}`, { token: null, body: m === 'GET' || m === 'DELETE' ? undefined : {} }), 401);
    }
  });

  it('refuses bad registrations naming the field, before anything is stored', async () => {
    const { o } = await tenant();
    const post = (body: Record<string, unknown>) => call('POST', 'registration', o.token, { body });
    const ok = { aor: 'sip:1001@pbx.example.com', password: 'secret' };
    expectError(await post({ ...ok, aor: 'pbx.example.com' }), 400, 'aor', 'user part');
    expectError(await post({ ...ok, aor: 'tel:+15551234567' }), 400, 'aor', 'sip:');
    expectError(await post({ ...ok, aor: 'sip:1001@bad_host' }), 400, 'aor', 'bad_host');
    expectError(await post({ password: 'secret' }), 400, 'aor');
    expectError(await post({ username: '1001', password: 'secret' }), 400, 'aor', 'sipRealm');
    expectError(await post({ username: 'bad user', sipRealm: 'pbx.example.com', password: 'secret' }), 400, 'username');
    expectError(await post({ username: '1001', sipRealm: 'bad realm!', password: 'secret' }), 400, 'sipRealm');
    expectError(await post({ aor: ok.aor }), 400, 'password');
    expectError(await post({ ...ok, transport: 'SCTP' }), 400, 'transport', 'UDP, TCP or TLS');
    expectError(await post({ ...ok, port: 0 }), 400, 'port');
    expectError(await post({ ...ok, port: 65536 }), 400, 'port');
    expectError(await post({ ...ok, port: 'x' }), 400, 'port');
    expectError(await post({ ...ok, proxy: 'proxy.example.com:0' }), 400, 'proxy');
    expectError(await post({ ...ok, proxy: 'bad proxy' }), 400, 'proxy');
    expectError(await post({ ...ok, subscribe: 'yes' }), 400, 'subscribe');
    expectError(await post({ ...ok, authUsername: 'a"b' }), 400, 'authUsername');
    expectError(await post({ ...ok, password: 'line\nbreak' }), 400, 'password');
    expectError(await call('GET', 'registration', o.token), 404, 'Registration not found');
    expectError(await call('DELETE', 'registration', o.token), 404, 'Registration not found');
    assert.equal(await h().database.db.selectFrom('sip_registrations').select('id').where('org_id', '=', o.id).executeTakeFirst(), undefined);
  });

  it('answers whether an AOR is free, from aor or username + sipRealm', async () => {
    const { o } = await tenant();
    const other = await tenant();
    const avail = (token: string, body: Record<string, unknown>) => call('POST', 'registration/available', token, { body });
    assert.deepEqual((await avail(o.token, { aor: 'sip:2001@pbx.example.com' })).body, { success: true, available: true, message: 'AOR is available' });
    // Held by another organization (a row as the API stores it; no worker runs here).
    const now = Date.now();
    await h().database.db.insertInto('sip_registrations').values({
      org_id: other.o.id, aor: '2001@PBX.example.com', aor_key: 'sip:2001@pbx.example.com', username: '2001', password: h().box.seal('x'),
      transport: 'UDP', created_at: now, updated_at: now,
    }).execute();
    const taken = await avail(o.token, { username: '2001', sipRealm: 'pbx.example.com' });
    assert.deepEqual(taken.body, { success: true, available: false, message: 'AOR is already registered by another organization' });
    assert.equal((await avail(o.token, { aor: '2001@pbx.example.com' })).body.available, false);
    assert.equal((await avail(other.o.token, { aor: 'sip:2001@pbx.example.com' })).body.available, true);
    assert.equal((await avail(o.token, { aor: 'sip:2002@pbx.example.com' })).body.available, true);
    // The holder's own registration is shown to it only, and 409 meets anyone else taking the AOR.
    assert.equal((await call('GET', 'registration', other.o.token)).body.registration.aor, '2001@PBX.example.com');
    expectError(await call('GET', 'registration', o.token), 404);
    expectError(await call('POST', 'registration', o.token, { body: { aor: 'sip:2001@pbx.example.com', password: 'x' } }), 409, 'another organization');
    expectError(await avail(o.token, {}), 400, 'aor');
    expectError(await avail(o.token, { aor: 'nope' }), 400, 'aor');
  });

  it('shows captures of the caller\'s organization only, as json or text', async () => {
    const a = await tenant();
    const b = await tenant();
    const callId = 'abc123@pbx.example.com';
    const t0 = Date.now() - 5000;
    const invite = 'INVITE sip:+15551230000@10.0.0.9 SIP/2.0\r\nCall-ID: abc123@pbx.example.com\r\nCSeq: 1 INVITE\r\n\r\n';
    const ok = 'SIP/2.0 200 OK\r\nCall-ID: abc123@pbx.example.com\r\nCSeq: 1 INVITE\r\n\r\n';
    await h().database.db.insertInto('sip_captures').values([
      { id: newId('cap', t0), org_id: a.o.id, call_id: callId, direction: 'out', transport: 'UDP', remote: '10.0.0.9:5060', local: '10.0.0.1:5060', message: invite, created_at: t0 },
      { id: newId('cap', t0 + 100), org_id: a.o.id, call_id: callId, direction: 'in', transport: 'UDP', remote: '10.0.0.9:5060', local: '10.0.0.1:5060', message: ok, created_at: t0 + 100 },
      // The same Call-ID seen by another organization stays its own.
      { id: newId('cap', t0 + 200), org_id: b.o.id, call_id: callId, direction: 'in', transport: 'TCP', remote: '192.0.2.1:5060', local: '10.0.0.1:5060', message: 'OPTIONS sip:x SIP/2.0\r\n\r\n', created_at: t0 + 200 },
    ]).execute();

    const json = await call('GET', 'captures', a.o.token, { query: { sipCallId: callId } });
    assert.equal(json.status, 200, JSON.stringify(json.body));
    assert.equal(json.body.sipCallId, callId);
    assert.deepEqual(json.body.captures.map((c: any) => [c.direction, c.source, c.destination, c.message]), [
      ['out', '10.0.0.1:5060', '10.0.0.9:5060', invite],
      ['in', '10.0.0.9:5060', '10.0.0.1:5060', ok],
    ]);
    assert.equal(json.body.captures[0].timestamp, t0);
    // Window in epoch millis.
    assert.deepEqual((await call('GET', 'captures', a.o.token, { query: { sipCallId: callId, from: t0 + 50 } })).body.captures.map((c: any) => c.direction), ['in']);
    expectError(await call('GET', 'captures', a.o.token, { query: { sipCallId: callId, to: t0 - 1 } }), 404);
    // The contract's bounds are numbers: fractions and huge values are bounds too, not a 500 from a bigint column.
    assert.deepEqual((await call('GET', 'captures', a.o.token, { query: { sipCallId: callId, from: t0 + 99.5, to: 1e308 } })).body.captures.map((c: any) => c.direction), ['in']);
    assert.deepEqual((await call('GET', 'captures', a.o.token, { query: { sipCallId: callId, to: t0 + 0.5 } })).body.captures.map((c: any) => c.direction), ['out']);

    const text = await call('GET', 'captures', a.o.token, { query: { sipCallId: callId, format: 'text' } });
    assert.equal(text.status, 200);
    assert.match(String(text.headers['content-type']), /^text\/plain/);
    assert.match(text.body, /^\d{4}-\d\d-\d\dT[\d:.]+Z UDP 10\.0\.0\.1:5060 -> 10\.0\.0\.9:5060\nINVITE sip:\+15551230000@10\.0\.0\.9 SIP\/2\.0\n/);
    assert.match(text.body, /10\.0\.0\.9:5060 -> 10\.0\.0\.1:5060\nSIP\/2\.0 200 OK\n/);
    assert.ok(!text.body.includes('OPTIONS'), 'another organization\'s message is not shown');

    assert.deepEqual((await call('GET', 'captures', b.o.token, { query: { sipCallId: callId } })).body.captures.map((c: any) => c.transport), ['TCP']);
    assert.equal((await call('GET', 'captures', a.r.token, { query: { sipCallId: callId, targetAccountId: a.o.id } })).body.captures.length, 2);
    expectError(await call('GET', 'captures', b.r.token, { query: { sipCallId: callId, targetAccountId: a.o.id } }), 404);
    expectError(await call('GET', 'captures', a.o.token, { query: { sipCallId: 'unknown@x' } }), 404, 'unknown@x');
    // pcap and transaction are answered (test/modules/sip-captures-export.test.ts); an unknown format names them all.
    expectError(await call('GET', 'captures', a.o.token, { query: { sipCallId: callId, format: 'gif' } }), 400, 'format', 'gif', 'json, text, pcap, transaction');
    expectError(await call('GET', 'captures', a.o.token, { query: {} }), 400, 'sipCallId');
    expectError(await call('GET', 'captures', a.o.token, { query: { sipCallId: callId, from: 'yesterday' } }), 400, 'from');
  });

  it('lists the organization\'s captured Call-IDs, the most recently active first, its own only (extension)', async () => {
    const a = await tenant();
    const b = await tenant();
    const t0 = Date.now() - 60_000;
    const msg = (first: string, callId: string) => `${first}\r\nCall-ID: ${callId}\r\nCSeq: 1 REGISTER\r\n\r\n`;
    const row = (org: number, callId: string, at: number, first: string, direction: 'in' | 'out' = 'out') => ({
      id: newId('cap', at), org_id: org, call_id: callId, direction, transport: 'UDP', remote: '10.0.0.9:5060', local: '10.0.0.1:5060', message: msg(first, callId), created_at: at,
    });
    await h().database.db.insertInto('sip_captures').values([
      row(a.o.id, 'reg-1@callplane', t0, 'REGISTER sip:pbx.example.com SIP/2.0'),
      row(a.o.id, 'reg-1@callplane', t0 + 10, 'SIP/2.0 401 Unauthorized', 'in'),
      row(a.o.id, 'reg-1@callplane', t0 + 20, 'REGISTER sip:pbx.example.com SIP/2.0'),
      row(a.o.id, 'reg-1@callplane', t0 + 30_000, 'SIP/2.0 200 OK', 'in'),
      row(a.o.id, 'late@pbx', t0 + 1000, 'SIP/2.0 200 OK', 'in'),
      row(a.o.id, 'invite-9@pbx', t0 + 5000, 'INVITE sip:1001@10.0.0.1 SIP/2.0', 'in'),
      row(b.o.id, 'theirs@pbx', t0 + 40_000, 'INVITE sip:2002@10.0.0.1 SIP/2.0', 'in'),
    ]).execute();

    const res = await call('GET', 'captures/calls', a.o.token);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.count, 3);
    assert.deepEqual(res.body.calls, [
      { sipCallId: 'reg-1@callplane', firstAt: t0, lastAt: t0 + 30_000, count: 4, firstLine: 'REGISTER sip:pbx.example.com SIP/2.0', method: 'REGISTER' },
      { sipCallId: 'invite-9@pbx', firstAt: t0 + 5000, lastAt: t0 + 5000, count: 1, firstLine: 'INVITE sip:1001@10.0.0.1 SIP/2.0', method: 'INVITE' },
      { sipCallId: 'late@pbx', firstAt: t0 + 1000, lastAt: t0 + 1000, count: 1, firstLine: 'SIP/2.0 200 OK', method: null },
    ]);
    assert.deepEqual((await call('GET', 'captures/calls', a.o.token, { query: { limit: 1 } })).body.calls.map((c: any) => c.sipCallId), ['reg-1@callplane']);
    // Its reseller reads them with targetAccountId; an agent reads its organization's; another reseller and strangers do not.
    assert.equal((await call('GET', 'captures/calls', a.r.token, { query: { targetAccountId: a.o.id } })).body.count, 3);
    assert.equal((await call('GET', 'captures/calls', a.agent.token)).body.count, 3);
    expectError(await call('GET', 'captures/calls', b.r.token, { query: { targetAccountId: a.o.id } }), 404);
    assert.deepEqual((await call('GET', 'captures/calls', b.o.token)).body.calls.map((c: any) => c.sipCallId), ['theirs@pbx']);
    assert.deepEqual((await call('GET', 'captures/calls', (await tenant()).o.token)).body, { success: true, message: 'Success', count: 0, calls: [] });
    expectError(await call('GET', 'captures/calls', a.o.token, { query: { limit: 0 } }), 400, 'limit');
    expectError(await h().call('GET', '/api/v2/sip/captures/calls', { token: null }), 401);
  });

  it('answers 502 and keeps nothing when no SIP worker takes a new registration; DELETE without a worker still removes', async () => {
    const { o } = await tenant();
    const started = Date.now();
    const res = await call('POST', 'registration', o.token, { body: { aor: 'sip:3001@pbx.example.com', password: 'secret' } });
    expectError(res, 502, 'No SIP worker', 'not kept');
    assert.ok(Date.now() - started >= 500, 'waited for a worker');
    expectError(await call('GET', 'registration', o.token), 404);
    assert.equal((await call('POST', 'registration/available', o.token, { body: { aor: 'sip:3001@pbx.example.com' } })).body.available, true);

    // A stored registration nobody owns: DELETE removes it and says the registrar was not told.
    const now = Date.now();
    await h().database.db.insertInto('sip_registrations').values({
      org_id: o.id, aor: 'sip:3002@pbx.example.com', aor_key: 'sip:3002@pbx.example.com', username: '3002', password: h().box.seal('x'),
      transport: 'UDP', created_at: now, updated_at: now,
    }).execute();
    assert.equal((await call('GET', 'registration', o.token)).body.registration.status, 'pending');
    const del = await call('DELETE', 'registration', o.token);
    assert.equal(del.status, 200, JSON.stringify(del.body));
    assert.equal(del.body.unregistered, false);
    assert.match(del.body.message, /did not confirm/);
    expectError(await call('GET', 'registration', o.token), 404);
    const events = await h().database.db.selectFrom('sip_events').selectAll().where('org_id', '=', o.id).execute();
    assert.deepEqual(events.map((e) => e.type), ['registration.unregistered']);
  });
}, { CALLPLANE_ALLOW_PRIVATE_TARGETS: '10.0.0.0/8' }, { sipWorkerWaitMs: 600 });
