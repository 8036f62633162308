// One owner per SIP registration across processes: two SIP runtimes (each with its own database
// connections and SIP port, as two worker processes would have) on one database — PostgreSQL, or
// one SQLite file opened twice — and one Kamailio. Each registration is REGISTERed by exactly one of them; when its owner dies without
// giving its leases back, the other takes its registrations over once the lease has expired;
// a clean stop gives them back at once.
// @lane wall
import { Wakeups } from '../../src/queue/waker.ts';
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openDatabase, type Database } from '../../src/db/index.ts';
import { SipWorker } from '../../src/modules/sip/sip-worker.ts';
import { ENGINES, SKIPPED_ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { peersSkip, sleep, startKamailio, waitFor, type Kamailio } from '../helpers/sip-peers.ts';

const LEASE_MS = 1500;

for (const engine of SKIPPED_ENGINES) describe(`SIP registration ownership across processes [${engine}]`, { skip: 'set TEST_DATABASE_URL=postgres://… to run' }, () => {});
for (const engine of ENGINES) describe(`SIP registration ownership across processes [${engine}]`, { skip: peersSkip(['kamailio']) }, () => {
  let kam: Kamailio;
  let h: Harness;
  let second: Database;
  let a: SipWorker;
  let b: SipWorker;
  const users: string[] = [];
  const contactsOf = (u: string) => kam.locations(`${u}@${kam.domain}`).map((l) => Number(/@127\.0\.0\.1:(\d+)/.exec(l.contact)?.[1]));

  before(async () => {
    kam = await startKamailio({ host: '127.0.0.7', maxExpires: 60, minExpires: 1 });
    const runtime = { leaseMs: LEASE_MS, pollMs: 100, registerTimeoutMs: 2000, claimBatch: 2 };
    h = await startHarness(engine, { CALLPLANE_SIP_REGISTER_EXPIRES: '60', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, { sip: runtime });
    a = h.sip!;
    // A second "process": its own connections to the same database, its own SIP port.
    second = openDatabase({ databaseUrl: h.config.databaseUrl, sqliteFile: path.join(h.config.dataDir, 'callplane.db'), poolSize: 3 });
    b = new SipWorker({ database: second, config: h.config, box: h.box, wakeups: new Wakeups(), host: '127.0.0.1', port: 0, ...runtime });
    await b.start();
  });
  after(async () => {
    await b?.stop();
    await second?.close();
    await h?.close();
    await kam?.stop();
  });

  it('REGISTERs each registration from exactly one of two runtimes claiming at once', async () => {
    const now = Date.now();
    for (let i = 0; i < 8; i++) {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const u = `lease${i}`;
      users.push(u);
      // Stored as POST /sip/registration stores them, all due at the same moment.
      await h.database.db.insertInto('sip_registrations').values({
        org_id: o.id, aor: `sip:${u}@${kam.domain}`, aor_key: `sip:${u}@${kam.domain}`, username: u, auth_username: kam.user,
        password: h.box.seal(kam.password), proxy: `${kam.host}:${kam.port}`, transport: 'UDP', created_at: now, updated_at: now,
      }).execute();
    }
    a.notify();
    b.notify();
    const rows = await waitFor('every registration registered', async () => {
      const all = await h.database.db.selectFrom('sip_registrations').selectAll().execute();
      return all.length === 8 && all.every((r) => r.registered === 1) ? all : undefined;
    }, 20_000);
    const ports = new Map([[a.ownerId, a.endpoint!.port], [b.ownerId, b.endpoint!.port]]);
    for (const row of rows) {
      assert.ok(ports.has(row.lease_owner!), `owner ${row.lease_owner}`);
      // One binding, from the owner's port: the other runtime never REGISTERed it.
      assert.deepEqual(contactsOf(row.username), [ports.get(row.lease_owner!)], `${row.username}: ${JSON.stringify(kam.locations(`${row.username}@${kam.domain}`))}`);
    }
    const ownedByA = new Set(a.owned);
    const ownedByB = new Set(b.owned);
    assert.equal([...ownedByA].filter((id) => ownedByB.has(id)).length, 0, 'no registration runs in both');
    assert.equal(ownedByA.size + ownedByB.size, 8);
    // Some more turns change nothing: leases are renewed, not taken.
    await sleep(LEASE_MS * 2);
    const later = await h.database.db.selectFrom('sip_registrations').select(['id', 'lease_owner']).orderBy('id').execute();
    assert.deepEqual(later, rows.map((r) => ({ id: r.id, lease_owner: r.lease_owner })).sort((x, y) => x.id - y.id));
    for (const u of users) assert.equal(contactsOf(u).length, 1, u);
  });

  it('takes over a dead owner\'s registrations once its lease has expired, not before', async () => {
    const mine = await h.database.db.selectFrom('sip_registrations').select(['id', 'username']).where('lease_owner', '=', a.ownerId).execute();
    if (mine.length === 0) {
      // b claimed everything: move one to a the way a claim would, and let a run it.
      const one = await h.database.db.selectFrom('sip_registrations').select(['id', 'username']).limit(1).executeTakeFirstOrThrow();
      await b.stop();
      await h.database.db.updateTable('sip_registrations').set({ lease_owner: null, lease_expires_at: null }).where('id', '=', one.id).execute();
      a.notify();
      await waitFor('a to own one', () => a.owned.includes(one.id));
      b = new SipWorker({ database: second, config: h.config, box: h.box, wakeups: new Wakeups(), host: '127.0.0.1', port: 0, leaseMs: LEASE_MS, pollMs: 100, registerTimeoutMs: 2000 });
      await b.start();
      mine.push(one);
    }
    const aPort = a.endpoint!.port;
    const crashedAt = Date.now();
    await a.stop({ release: false }); // as if the process died: leases stay until they expire
    const right = await h.database.db.selectFrom('sip_registrations').select('lease_owner').where('id', '=', mine[0].id).executeTakeFirstOrThrow();
    assert.equal(right.lease_owner, a.ownerId, 'not taken while the lease runs');
    await waitFor('b to take them over', async () => {
      const rows = await h.database.db.selectFrom('sip_registrations').select(['lease_owner', 'registered']).where('id', 'in', mine.map((m) => m.id)).execute();
      return rows.every((r) => r.lease_owner === b.ownerId && r.registered === 1);
    }, 15_000);
    assert.ok(Date.now() - crashedAt >= 800, 'taken after the lease ran out (at least 2/3 of it was left)');
    for (const m of mine) {
      // b's binding is there; a's stays until it expires at the registrar (nobody removes it).
      const ports = contactsOf(m.username);
      assert.ok(ports.includes(b.endpoint!.port), `${m.username}: ${ports.join(',')}`);
      assert.ok(ports.includes(aPort));
    }
    assert.ok(mine.every((m) => b.owned.includes(m.id)));
  });

  it('gives its leases back on a clean stop', async () => {
    assert.ok(b.owned.length > 0);
    await b.stop();
    const held = await h.database.db.selectFrom('sip_registrations').select('id').where('lease_owner', 'is not', null).execute();
    assert.deepEqual(held, []);
  });
});
