// Registration against a real Kamailio registrar with digest auth (test/helpers/sip-peers.ts):
// accepted bindings seen in its location table over UDP and TCP, refused credentials, an
// unreachable registrar, refresh at half the granted expiry, stale nonces, 423, unregister.
// @lane wall
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { parseChallenge } from '../../src/sip/digest.ts';
import { SipEndpoint, type Remote } from '../../src/sip/endpoint.ts';
import { parseCSeq, type SipMessage } from '../../src/sip/message.ts';
import { Registration, registerOnce, type RegistrationConfig, type RegistrationStatus } from '../../src/sip/register.ts';
import { freePort, peersSkip, sleep, startKamailio, waitFor, type Kamailio } from '../helpers/sip-peers.ts';

interface Seen { dir: 'in' | 'out'; msg: SipMessage; remote: Remote }

async function endpoint(host = '127.0.0.1') {
  const seen: Seen[] = [];
  const ep = new SipEndpoint({ host, port: 0, onMessage: (dir, msg, remote) => seen.push({ dir, msg, remote }) });
  await ep.start();
  return { ep, seen };
}

const registers = (seen: Seen[], callId?: string) => seen.filter((s) => s.dir === 'out' && s.msg.kind === 'request' && s.msg.method === 'REGISTER' && (!callId || s.msg.headers.get('call-id') === callId));
const responses = (seen: Seen[], status: number) => seen.filter((s) => s.dir === 'in' && s.msg.kind === 'response' && s.msg.status === status);

describe('registration with Kamailio', { skip: peersSkip(['kamailio']) }, () => {
  let kam: Kamailio;
  let ep: SipEndpoint;
  let seen: Seen[];
  const cfg = (user: string, over: Partial<RegistrationConfig> = {}): RegistrationConfig => ({
    aor: `sip:${user}@${kam.domain}`, authUsername: kam.user, password: kam.password,
    registrar: { transport: 'UDP', host: kam.host, port: kam.port }, ...over,
  });
  const ours = (user: string, transport: 'udp' | 'tcp') => kam.locations(`${user}@${kam.domain}`)
    .filter((l) => l.contact.startsWith(`sip:${user}@127.0.0.1:${ep.port}`) && (transport === 'tcp') === l.contact.includes('transport=tcp'));

  before(async () => {
    kam = await startKamailio({ host: '127.0.0.2', maxExpires: 120, minExpires: 1 });
    ({ ep, seen } = await endpoint());
  });
  after(async () => {
    await ep?.stop();
    await kam?.stop();
  });

  it('registers over UDP: 401, digest answer, 200, and the binding is in the location table', async () => {
    const r = await registerOnce(ep, cfg('udpuser'), { expires: 60 });
    assert.deepEqual(r, { ok: true, status: 200, reason: 'OK', expires: 60 });
    const [binding] = ours('udpuser', 'udp');
    assert.ok(binding, `location table: ${JSON.stringify(kam.locations(`udpuser@${kam.domain}`))}`);
    assert.ok(binding.expires > 0 && binding.expires <= 60);
    const sent = registers(seen).filter((s) => s.msg.headers.get('to')?.includes('udpuser'));
    assert.equal(sent.length, 2);
    assert.equal(sent[0].msg.headers.has('authorization'), false);
    assert.match(sent[1].msg.headers.get('authorization')!, /^Digest username="alice", realm="callplane.test", .*qop=auth, nc=00000001/);
  });

  it('registers over TCP with a Contact saying transport=tcp', async () => {
    const r = await registerOnce(ep, cfg('tcpuser', { registrar: { transport: 'TCP', host: kam.host, port: kam.port } }), { expires: 60 });
    assert.equal(r.ok, true, JSON.stringify(r));
    assert.equal(r.expires, 60);
    assert.equal(ours('tcpuser', 'tcp').length, 1, JSON.stringify(kam.locations(`tcpuser@${kam.domain}`)));
    assert.equal(ours('tcpuser', 'udp').length, 0);
    assert.ok(registers(seen).some((s) => s.remote.transport === 'TCP'));
  });

  it('takes the expiry the registrar granted, not the one asked for', async () => {
    const r = await registerOnce(ep, cfg('capped'), { expires: 3600 });
    assert.equal(r.ok, true);
    assert.equal(r.expires, 120); // kamailio's max_expires
  });

  it('reports a wrong password as 401 with credentials refused, and binds nothing', async () => {
    const r = await registerOnce(ep, cfg('wrongpw', { password: 'not-it' }), { expires: 60 });
    assert.equal(r.ok, false);
    assert.equal(r.status, 401);
    assert.match(r.error ?? '', /credentials refused/);
    assert.deepEqual(ours('wrongpw', 'udp'), []);
  });

  it('reports the registrar\'s 403 for a user it does not allow', async () => {
    const r = await registerOnce(ep, cfg('someone', { authUsername: 'mallory' }), { expires: 60 });
    assert.deepEqual([r.ok, r.status, r.reason], [false, 403, 'Forbidden']);
  });

  it('refuses a challenge for another realm when a realm is configured', async () => {
    const r = await registerOnce(ep, cfg('realmuser', { realm: 'elsewhere.example' }), { expires: 60 });
    assert.equal(r.ok, false);
    assert.equal(r.status, 401);
    assert.match(r.error ?? '', /realm callplane.test/);
  });

  it('unregister removes the binding (Expires: 0)', async () => {
    const reg = new Registration(ep, cfg('leaving'), { expires: 60 });
    assert.equal((await reg.start()).ok, true);
    assert.equal(ours('leaving', 'udp').length, 1);
    const r = await reg.unregister();
    assert.deepEqual([r.ok, r.expires], [true, 0]);
    assert.deepEqual(ours('leaving', 'udp'), []);
    const last = registers(seen, reg.session.callId).at(-1)!;
    assert.equal(last.msg.headers.get('expires'), '0');
    assert.match(last.msg.headers.get('contact')!, /;expires=0$/);
    assert.equal(reg.status.expiresAt, null);
    assert.equal(reg.status.nextAttemptAt, null);
  });
});

describe('registration timing with Kamailio: refresh, stale nonces, 423', { skip: peersSkip(['kamailio']) }, () => {
  let kam: Kamailio;
  let ep: SipEndpoint;
  let seen: Seen[];
  const cfg = (user: string): RegistrationConfig => ({
    aor: `sip:${user}@${kam.domain}`, authUsername: kam.user, password: kam.password, registrar: { transport: 'UDP', host: kam.host, port: kam.port },
  });

  before(async () => {
    // Bindings last at most 4 s and nonces 3 s: refreshes come every 2 s and the third meets a stale nonce.
    kam = await startKamailio({ host: '127.0.0.5', maxExpires: 4, nonceExpire: 3 });
    ({ ep, seen } = await endpoint('127.0.0.4'));
  });
  after(async () => {
    await ep?.stop();
    await kam?.stop();
  });

  it('refreshes at half the granted expiry with the same Call-ID and a rising CSeq, keeping the binding alive', async () => {
    const statuses: RegistrationStatus[] = [];
    const reg = new Registration(ep, cfg('refresher'), { expires: 3600, onStatus: (s) => statuses.push(s) });
    const first = await reg.start();
    assert.deepEqual([first.ok, first.expires], [true, 4]);
    const next = reg.status.nextAttemptAt!.getTime() - reg.status.lastAttemptAt!.getTime();
    assert.ok(next >= 1900 && next <= 2100, `refresh planned ${next} ms after the attempt`);
    await sleep(6500); // past the 4 s binding: only refreshes keep it
    reg.stop();
    const sent = registers(seen, reg.session.callId);
    const oks = responses(seen, 200).filter((s) => s.msg.headers.get('call-id') === reg.session.callId);
    assert.ok(oks.length >= 3, `${oks.length} accepted REGISTERs`);
    const cseqs = sent.map((s) => parseCSeq(s.msg.headers.get('cseq')!).seq);
    assert.deepEqual(cseqs, [...cseqs].sort((a, b) => a - b));
    assert.equal(new Set(cseqs).size, cseqs.length);
    assert.ok(kam.locations(`refresher@${kam.domain}`).some((l) => l.contact.includes(`127.0.0.4:${ep.port}`)));
    assert.ok(statuses.every((s) => s.ok), 'no attempt failed');
    await reg.unregister();
  });

  it('answers a stale nonce (401 stale=true) again without counting a failure', async () => {
    const statuses: RegistrationStatus[] = [];
    const reg = new Registration(ep, cfg('stale'), { expires: 3600, onStatus: (s) => statuses.push(s) });
    assert.equal((await reg.start()).ok, true);
    await waitFor('a stale nonce', () => reg.stats.staleAnswered > 0, 9000);
    await waitFor('the refresh after it', () => reg.status.lastAttemptAt && responses(seen, 200).filter((s) => s.msg.headers.get('call-id') === reg.session.callId).length >= 3, 4000);
    reg.stop();
    const mine = seen.filter((s) => s.msg.headers.get('call-id') === reg.session.callId);
    const staleAt = mine.findIndex((s) => s.msg.kind === 'response' && s.msg.status === 401 && parseChallenge(s.msg.headers.get('www-authenticate') ?? '', 'www')?.stale);
    assert.ok(staleAt > 0, 'a 401 with stale=true arrived');
    const after401 = mine.slice(staleAt + 1);
    assert.equal(after401[0].dir, 'out');
    assert.match(after401[0].msg.headers.get('authorization')!, /nc=00000001/);
    assert.ok(after401.some((s) => s.msg.kind === 'response' && s.msg.status === 200));
    assert.ok(statuses.every((s) => s.ok && s.failures === 0), JSON.stringify(statuses.filter((s) => !s.ok)));
    await reg.unregister();
  });
});

describe('registration through a proxy that challenges with 407', { skip: peersSkip(['kamailio']) }, () => {
  let kam: Kamailio;
  let ep: SipEndpoint;
  let seen: Seen[];
  const cfg = (user: string, password?: string): RegistrationConfig => ({
    aor: `sip:${user}@${kam.domain}`, authUsername: kam.user, password: password ?? kam.password, registrar: { transport: 'UDP', host: kam.host, port: kam.port },
  });
  before(async () => {
    // Proxy-Authenticate instead of WWW-Authenticate; bindings last 4 s and nonces 3 s, so a refresh meets a stale nonce.
    kam = await startKamailio({ host: '127.0.0.10', challenge: 'proxy', maxExpires: 4, nonceExpire: 3 });
    ({ ep, seen } = await endpoint());
  });
  after(async () => {
    await ep?.stop();
    await kam?.stop();
  });

  it('answers 407 with Proxy-Authorization (qop=auth), refreshes through a stale 407, and reports a wrong password as 407', async () => {
    const reg = new Registration(ep, cfg('proxied'), { expires: 3600 });
    const first = await reg.start();
    assert.deepEqual([first.ok, first.status, first.expires], [true, 200, 4], JSON.stringify(first));
    const mine = () => seen.filter((s) => s.msg.headers.get('call-id') === reg.session.callId);
    assert.deepEqual(mine().slice(0, 4).map((s) => (s.msg.kind === 'response' ? `in ${s.msg.status}` : `out ${s.msg.method}`)), ['out REGISTER', 'in 407', 'out REGISTER', 'in 200']);
    const answer = registers(seen, reg.session.callId)[1].msg;
    assert.equal(answer.headers.has('authorization'), false);
    assert.match(answer.headers.get('proxy-authorization')!, /^Digest username="alice", realm="callplane.test", .*qop=auth, nc=00000001/);
    assert.equal(kam.locations(`proxied@${kam.domain}`).length, 1);

    await waitFor('a stale 407 answered', () => reg.stats.staleAnswered > 0, 9000);
    await waitFor('the refresh after it', () => responses(seen, 200).filter((s) => s.msg.headers.get('call-id') === reg.session.callId).length >= 3, 4000);
    assert.equal(reg.status.failures, 0);
    assert.equal(kam.locations(`proxied@${kam.domain}`).length, 1, 'kept alive');
    assert.equal((await reg.unregister()).ok, true);
    assert.deepEqual(kam.locations(`proxied@${kam.domain}`), []);

    const wrong = await registerOnce(ep, cfg('proxied2', 'not-it'), { expires: 60 });
    assert.deepEqual([wrong.ok, wrong.status, wrong.error], [false, 407, 'credentials refused']);
  });
});

describe('registration: 423 Interval Too Brief', { skip: peersSkip(['kamailio']) }, () => {
  let kam: Kamailio;
  let ep: SipEndpoint;
  before(async () => {
    kam = await startKamailio({ host: '127.0.0.6', minExpires: 90, maxExpires: 600 });
    ({ ep } = await endpoint());
  });
  after(async () => {
    await ep?.stop();
    await kam?.stop();
  });

  it('asks again with Min-Expires', async () => {
    const r = await registerOnce(ep, {
      aor: `sip:brief@${kam.domain}`, authUsername: kam.user, password: kam.password, registrar: { transport: 'UDP', host: kam.host, port: kam.port },
    }, { expires: 30 });
    assert.deepEqual([r.ok, r.expires], [true, 90]);
  });
});

describe('registration without a registrar', () => {
  it('times out against a silent UDP address after retransmitting (T1 doubling)', async () => {
    const { ep, seen } = await endpoint();
    try {
      const port = await freePort('127.0.0.9');
      const started = Date.now();
      const r = await registerOnce(ep, { aor: 'sip:nobody@callplane.test', password: 'x', registrar: { transport: 'UDP', host: '127.0.0.9', port } }, { expires: 60, timeoutMs: 1800 });
      assert.equal(r.ok, false);
      assert.equal(r.status, undefined);
      assert.equal(r.error, `no SIP answer from udp:127.0.0.9:${port}: refused, unreachable or timed out`);
      assert.ok(Date.now() - started >= 1700);
      // Sent at 0, 0.5 and 1.5 s.
      assert.equal(registers(seen).length, 3);
    } finally {
      await ep.stop();
    }
  });

  it('fails at once when a TCP registrar refuses the connection', async () => {
    const { ep } = await endpoint();
    try {
      const port = await freePort('127.0.0.9');
      const r = await registerOnce(ep, { aor: 'sip:nobody@callplane.test', password: 'x', registrar: { transport: 'TCP', host: '127.0.0.9', port } }, { expires: 60, timeoutMs: 5000 });
      assert.equal(r.ok, false);
      assert.equal(r.error, `no SIP answer from tcp:127.0.0.9:${port}: refused, unreachable or timed out`);
    } finally {
      await ep.stop();
    }
  });

  it('says the same of a closed TCP port, an open one that hangs up and an open one that stays silent (no port scanner)', async () => {
    const { ep } = await endpoint();
    const hangsUp = net.createServer((s) => s.destroy());
    const silent = net.createServer(() => undefined);
    const held: net.Socket[] = [];
    silent.on('connection', (s) => held.push(s));
    try {
      await new Promise<void>((res) => hangsUp.listen(0, '127.0.0.9', res));
      await new Promise<void>((res) => silent.listen(0, '127.0.0.9', res));
      const closed = await freePort('127.0.0.9');
      const errors: string[] = [];
      for (const port of [closed, (hangsUp.address() as net.AddressInfo).port, (silent.address() as net.AddressInfo).port]) {
        const r = await registerOnce(ep, { aor: 'sip:nobody@callplane.test', password: 'x', registrar: { transport: 'TCP', host: '127.0.0.9', port } }, { expires: 60, timeoutMs: 1500 });
        assert.equal(r.ok, false);
        errors.push((r.error ?? '').replace(`:${port}:`, ':PORT:'));
      }
      assert.deepEqual(errors, Array(3).fill('no SIP answer from tcp:127.0.0.9:PORT: refused, unreachable or timed out'));
    } finally {
      for (const s of held) s.destroy();
      hangsUp.close();
      silent.close();
      await ep.stop();
    }
  });

  it('a Registration backs off exponentially up to the cap while the registrar stays away', async () => {
    const { ep } = await endpoint();
    const statuses: RegistrationStatus[] = [];
    const port = await freePort('127.0.0.9');
    const reg = new Registration(ep, { aor: 'sip:nobody@callplane.test', password: 'x', registrar: { transport: 'TCP', host: '127.0.0.9', port } }, {
      retryMinMs: 100, retryMaxMs: 400, onStatus: (s) => statuses.push(s),
    });
    try {
      const first = await reg.start();
      assert.equal(first.ok, false);
      await waitFor('five failures', () => reg.status.failures >= 5, 10_000);
      reg.stop();
      const gaps = statuses.filter((s) => s.nextAttemptAt && s.lastAttemptAt && !s.ok).map((s) => s.nextAttemptAt!.getTime() - s.lastAttemptAt!.getTime());
      assert.ok(gaps.length >= 5, JSON.stringify(gaps));
      // 100, 200, 400, 400, 400 ms, each ±10 %.
      for (const [i, base] of [100, 200, 400, 400, 400].entries()) assert.ok(gaps[i] >= base * 0.9 - 2 && gaps[i] <= base * 1.1 + 2, `gap ${i}: ${gaps[i]} ms`);
      assert.equal(reg.status.ok, false);
      assert.match(reg.status.error ?? '', /^no SIP answer from tcp:127\.0\.0\.9:\d+: refused, unreachable or timed out$/);
    } finally {
      reg.stop();
      await ep.stop();
    }
  });
});
