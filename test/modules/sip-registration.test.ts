// SIP registration through the API against a real Kamailio registrar with digest auth
// (test/helpers/sip-peers.ts): the worker's SIP runtime runs in the harness on 127.0.0.1, Kamailio
// on 127.0.0.4. Bindings are read from Kamailio's location table; events from sip_events and the
// signed `registration` webhook a receiver gets.
// @lane wall
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { forEachEngine } from '../helpers/engines.ts';
import type { Reply } from '../helpers/harness.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { freePort, peersSkip, sleep, startKamailio, waitFor, type Kamailio } from '../helpers/sip-peers.ts';

/** Everything the SIP runtimes (and their endpoints) log, as JSON lines: checked for secrets. */
const logged: string[] = [];
const record = (level: string) => (obj: object, msg?: string) => {
  logged.push(JSON.stringify({ level, msg, ...obj }, (_k, v) => (v instanceof Error ? { message: v.message, stack: v.stack, cause: String(v.cause) } : v)));
};
const log = { debug: record('debug'), info: record('info'), warn: record('warn'), error: record('error') };

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  for (const w of words) assert.ok(String(res.body.message).includes(w), `"${res.body.message}" should name ${w}`);
}

describe('SIP registration with Kamailio', { skip: peersSkip(['kamailio']) }, () => {
  let kam: Kamailio;
  let receiver: Receiver;
  before(async () => {
    kam = await startKamailio({ host: '127.0.0.4', maxExpires: 60, minExpires: 1 });
    receiver = await startReceiver();
  });
  after(async () => {
    await kam?.stop();
    await receiver?.close();
  });

  forEachEngine('registration', (h) => {
    // Both engines register with the same Kamailio: their users differ.
    let n = 0;
    const user = () => `${h().engine === 'sqlite' ? 'lite' : 'pg'}${++n}`;
    const bindings = (u: string) => kam.locations(`${u}@${kam.domain}`);
    const ours = (u: string, contactUser = u) => bindings(u).filter((l) => l.contact.startsWith(`sip:${contactUser}@127.0.0.1:${h().sip!.endpoint!.port}`));
    const body = (u: string, over: Record<string, unknown> = {}) => ({
      aor: `sip:${u}@${kam.domain}`, authUsername: kam.user, password: kam.password, proxy: `${kam.host}:${kam.port}`, ...over,
    });
    const post = (token: string, b: Record<string, unknown>, query?: Record<string, unknown>) => h().call('POST', '/api/v2/sip/registration', { token, body: b, query });
    async function org() {
      const r = await h().reseller();
      return { r, o: await h().organization(r.id) };
    }

    it('creates a registration: 201 once Kamailio accepted it, the binding in its location table, status shown, password never returned', async () => {
      const { o } = await org();
      const path = `/registration-${h().engine}`;
      const sub = await h().call('POST', '/api/v2/webhooks', { token: o.token, body: { url: `${receiver.url}${path}`, label: 'sip', type: 'registration' } });
      assert.equal(sub.status, 201, JSON.stringify(sub.body));
      const u = user();
      const res = await post(o.token, body(u));
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.message, 'Registration created successfully');
      const reg = res.body.registration;
      assert.deepEqual([reg.aor, reg.username, reg.authUsername, reg.transport, reg.status, reg.registered, reg.lastCode, reg.lastReason],
        [`sip:${u}@${kam.domain}`, u, kam.user, 'UDP', 'registered', true, 200, 'OK']);
      assert.ok(reg.expiresAt > Date.now() / 1000 + 50 && reg.expiresAt <= Date.now() / 1000 + 61, `expiresAt ${reg.expiresAt}`);
      assert.equal(JSON.stringify(res.body).includes(kam.password), false);
      assert.equal(ours(u).length, 1, JSON.stringify(bindings(u)));

      const got = await h().call('GET', '/api/v2/sip/registration', { token: o.token });
      assert.equal(got.status, 200);
      assert.equal(got.body.registration.status, 'registered');
      assert.equal(JSON.stringify(got.body).includes(kam.password), false);
      const row = await h().database.db.selectFrom('sip_registrations').selectAll().where('org_id', '=', o.id).executeTakeFirstOrThrow();
      assert.ok(!row.password.includes(kam.password) && h().box.open(row.password) === kam.password, 'sealed at rest');
      assert.equal(row.lease_owner, h().sip!.ownerId);
      // The realm Kamailio challenged with (its To domain) is kept: calls answer only that realm with this password (docs/sip.md, "Credentials").
      assert.equal(row.challenge_realm, kam.domain);

      // Every message of the registration is captured for the organization.
      const cap = await waitFor('captures', () => h().database.db.selectFrom('sip_captures').select('call_id').where('org_id', '=', o.id).executeTakeFirst());
      const caps = await waitFor('four captured messages', async () => {
        const c = await h().call('GET', '/api/v2/sip/captures', { token: o.token, query: { sipCallId: cap.call_id } });
        return c.status === 200 && c.body.captures.length >= 4 ? c : undefined;
      });
      assert.deepEqual(caps.body.captures.slice(0, 4).map((c: any) => `${c.direction} ${c.message.split('\r\n')[0]}`), [
        `out REGISTER sip:${kam.domain} SIP/2.0`, 'in SIP/2.0 401 Unauthorized', `out REGISTER sip:${kam.domain} SIP/2.0`, 'in SIP/2.0 200 OK',
      ]);

      // The lifecycle event, signed, at the organization's `registration` webhook.
      const delivered = await waitFor('the registration webhook', () => receiver.requests.find((r) => r.path === path), 15_000);
      const secret = sub.body.webhook?.signingSecret ?? sub.body.signingSecret;
      const event = new Webhook(secret).verify(delivered.body.toString(), delivered.headers as Record<string, string>) as any;
      assert.equal(event.type, 'registration.registered');
      assert.deepEqual([event.data.aor, event.data.registered, event.data.code], [`sip:${u}@${kam.domain}`, true, 200]);
    });

    it('answers 502 naming the SIP status when Kamailio refuses the password, and keeps nothing', async () => {
      const { o } = await org();
      const u = user();
      const res = await post(o.token, body(u, { password: 'wrong' }));
      expectError(res, 502, '401', 'not kept');
      assert.deepEqual([res.body.sipStatus, res.body.sipReason], [401, 'Unauthorized']);
      expectError(await h().call('GET', '/api/v2/sip/registration', { token: o.token }), 404);
      assert.equal((await h().call('POST', '/api/v2/sip/registration/available', { token: o.token, body: { aor: `sip:${u}@${kam.domain}` } })).body.available, true);
      assert.deepEqual(bindings(u), []);
      const events = await h().database.db.selectFrom('sip_events').select(['type', 'payload']).where('org_id', '=', o.id).execute();
      assert.deepEqual(events.map((e) => e.type), ['registration.failed']);
    });

    it('answers 502 with 403 when the registrar forbids the user', async () => {
      const { o } = await org();
      const res = await post(o.token, body(user(), { authUsername: 'mallory' }));
      expectError(res, 502, '403 Forbidden');
      assert.equal(res.body.sipStatus, 403);
    });

    it('answers 502 when the registrar does not answer (UDP) or refuses the connection (TCP)', async () => {
      const { o } = await org();
      const silent = await freePort('127.0.0.4');
      const started = Date.now();
      const res = await post(o.token, body(user(), { proxy: `127.0.0.4:${silent}` }));
      expectError(res, 502, 'did not answer', 'not kept');
      assert.equal(res.body.sipStatus, null);
      assert.ok(Date.now() - started < 10_000, 'bounded by the REGISTER timeout');
      const tcp = await post(o.token, body(user(), { proxy: `127.0.0.4:${silent}`, transport: 'TCP' }));
      expectError(tcp, 502, 'did not answer');
      expectError(await h().call('GET', '/api/v2/sip/registration', { token: o.token }), 404);
    });

    it('registers over TCP too', async () => {
      const { o } = await org();
      const u = user();
      const res = await post(o.token, body(u, { transport: 'tcp' }));
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.registration.transport, 'TCP');
      const b = ours(u);
      assert.equal(b.length, 1, JSON.stringify(bindings(u)));
      assert.match(b[0].contact, /transport=tcp/);
    });

    it('updates: 200, the new binding replaces the old one; a wrong update is undone and the old binding kept', async () => {
      const { o } = await org();
      const u = user();
      assert.equal((await post(o.token, body(u))).status, 201);
      assert.equal(ours(u).length, 1);
      // A new contact user: the old binding is removed before the new one is made.
      const changed = await post(o.token, body(u, { username: `${u}desk`, password: undefined }));
      assert.equal(changed.status, 200, JSON.stringify(changed.body));
      assert.equal(changed.body.message, 'Registration updated successfully');
      assert.equal(changed.body.registration.username, `${u}desk`);
      assert.deepEqual(bindings(u).map((b) => b.contact.split('@')[0]), [`sip:${u}desk`]);
      // A wrong password: 502, and the working configuration comes back (and registers again).
      const wrong = await post(o.token, body(u, { username: `${u}desk`, password: 'wrong' }));
      expectError(wrong, 502, '401', 'previous configuration was restored');
      await waitFor('the restored configuration to register', async () => {
        const g = await h().call('GET', '/api/v2/sip/registration', { token: o.token });
        return g.body.registration.status === 'registered' && g.body.registration.username === `${u}desk`;
      });
      const row = await h().database.db.selectFrom('sip_registrations').select('password').where('org_id', '=', o.id).executeTakeFirstOrThrow();
      assert.equal(h().box.open(row.password), kam.password);
    });

    it('refuses an AOR another organization holds with 409, and says it is not available to it', async () => {
      const a = await org();
      const b = await org();
      const u = user();
      assert.equal((await post(a.o.token, body(u))).status, 201);
      expectError(await post(b.o.token, body(u)), 409, 'another organization');
      // The same AOR spelled without the scheme is the same AOR.
      expectError(await post(b.o.token, body(u, { aor: `${u}@${kam.domain.toUpperCase()}` })), 409);
      const avail = (token: string) => h().call('POST', '/api/v2/sip/registration/available', { token, body: { username: u, sipRealm: kam.domain } });
      assert.equal((await avail(b.o.token)).body.available, false);
      assert.equal((await avail(a.o.token)).body.available, true);
      assert.equal(ours(u).length, 1);
      expectError(await h().call('GET', '/api/v2/sip/registration', { token: b.o.token }), 404);
    });

    it('DELETE un-REGISTERs (Expires: 0) before removing: the binding is gone from the location table at once', async () => {
      const { r, o } = await org();
      const u = user();
      assert.equal((await post(r.token, body(u), { targetAccountId: o.id })).status, 201);
      assert.equal(ours(u).length, 1);
      const del = await h().call('DELETE', '/api/v2/sip/registration', { token: o.token });
      assert.equal(del.status, 200, JSON.stringify(del.body));
      assert.deepEqual(del.body, { success: true, message: 'Registration deleted successfully', unregistered: true });
      // Kamailio would keep it for 60 s otherwise.
      assert.deepEqual(bindings(u), []);
      expectError(await h().call('GET', '/api/v2/sip/registration', { token: o.token }), 404);
      expectError(await h().call('DELETE', '/api/v2/sip/registration', { token: o.token }), 404);
      const events = await h().database.db.selectFrom('sip_events').select('type').where('org_id', '=', o.id).orderBy('id').execute();
      assert.deepEqual(events.map((e) => e.type), ['registration.registered', 'registration.unregistered']);
      // Captures are written in batches: the un-REGISTER shows up within moments.
      await waitFor('the un-REGISTER in the captures', async () => (await h().database.db.selectFrom('sip_captures').select('message')
        .where('org_id', '=', o.id).where('direction', '=', 'out').execute()).some((m) => /\r\nExpires: 0\r\n/.test(m.message)));
    });

    it('never logs a password, neither the right one nor a refused one', async () => {
      const { o } = await org();
      const refused = 'Wr0ngPassw0rd!';
      expectError(await post(o.token, body(user(), { password: refused })), 502, '401');
      assert.ok(logged.some((l) => l.includes('SIP REGISTER')), 'the runtime logs its REGISTERs');
      for (const secret of [kam.password, refused]) {
        assert.deepEqual(logged.filter((l) => l.includes(secret)), [], `${secret} in the logs`);
      }
    });
  }, { CALLPLANE_SIP_REGISTER_EXPIRES: '60', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, {
    sip: { pollMs: 100, registerTimeoutMs: 2000, retryMinMs: 30_000, log }, deliveries: true,
  });

  forEachEngine('registration refresh', (h) => {
    it('refreshes at half the granted expiry: the binding stays, one registered event', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const u = `${h().engine}refresh`;
      const res = await h().call('POST', '/api/v2/sip/registration', {
        token: o.token, body: { aor: `sip:${u}@${kam.domain}`, authUsername: kam.user, password: kam.password, proxy: `${kam.host}:${kam.port}` },
      });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const first = res.body.registration.lastAttemptAt;
      const firstRow = await h().database.db.selectFrom('sip_registrations').select('last_attempt_at').where('org_id', '=', o.id).executeTakeFirstOrThrow();
      // Granted 2 s: refreshed every second; after 3.5 s the binding is still there and was renewed.
      await sleep(3500);
      const row = await h().database.db.selectFrom('sip_registrations').selectAll().where('org_id', '=', o.id).executeTakeFirstOrThrow();
      assert.ok(row.last_attempt_at! - firstRow.last_attempt_at! >= 2000, `last attempt moved ${row.last_attempt_at! - firstRow.last_attempt_at!} ms`);
      assert.equal(row.registered, 1);
      assert.ok(first <= Math.floor(row.last_attempt_at! / 1000));
      assert.equal(kam.locations(`${u}@${kam.domain}`).length, 1);
      const registers = await h().database.db.selectFrom('sip_captures').select('message').where('org_id', '=', o.id).where('direction', '=', 'out').execute();
      assert.ok(registers.length >= 4, `${registers.length} REGISTERs sent`);
      const events = await h().database.db.selectFrom('sip_events').select('type').where('org_id', '=', o.id).execute();
      assert.deepEqual(events.map((e) => e.type), ['registration.registered']);
    });
  }, { CALLPLANE_SIP_REGISTER_EXPIRES: '2', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, { sip: { pollMs: 100, registerTimeoutMs: 2000 } });
});
