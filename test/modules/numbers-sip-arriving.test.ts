// A SIP INVITE whose callee is a held number (docs/numbers.md, Arriving), with the runtime's own
// SIP listener and agent runtime, on both engines: the number's agent answers (not the
// organization's first); a number another organization holds is a 404 even from a trunk this one
// whitelisted; the agent's cnamAutoRejectRegex refuses with cnamAutoRejectCode; preAnswerRingTime
// is a 180 Ringing before the 200.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { newBranch } from '../../src/sip/endpoint.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { udpPeer, waitFor } from '../helpers/sip-peers.ts';
import { numberCalls } from '../helpers/numbers.ts';

const TRUNK_A = '127.0.0.21';
const TRUNK_B = '127.0.0.22';

function invite(o: { via: string; number: string; port: number; callId: string; fromName?: string; contact?: string }): string {
  return [
    `INVITE sip:${o.number}@127.0.0.1:${o.port} SIP/2.0`, `Via: ${o.via}`, 'Max-Forwards: 70',
    `From: ${o.fromName ? `"${o.fromName}" ` : ''}<sip:+14155550142@pbx.example.test>;tag=c1`,
    `To: <sip:${o.number}@trunk.callplane.test>`, `Call-ID: ${o.callId}`, 'CSeq: 1 INVITE', `Contact: <${o.contact ?? 'sip:caller@127.0.0.1'}>`,
    'Content-Length: 0', '', '',
  ].join('\r\n');
}

/** What the SIP runtime logged (its endpoint's debug lines among them). */
const sipLog = {
  lines: [] as Array<{ obj: Record<string, unknown>; msg?: string }>,
  debug(obj: object, msg?: string) { this.lines.push({ obj: obj as Record<string, unknown>, msg }); },
  info() {}, warn() {}, error() {},
};

forEachEngine('SIP calls arriving on a held number', (h) => {
  const port = () => h().sip!.endpoint!.port;
  /** The final responses an INVITE got, each once (UDP retransmits a final response until ACKed). */
  const finals = (statuses: number[]) => [...new Set(statuses.filter((s) => s >= 200))];
  const n = numberCalls(h);

  /** An organization whitelisting `trunk`, with a second agent configured with `config` that holds a simulated number. */
  async function holder(trunk: string, config: Record<string, unknown> = {}) {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    assert.equal((await h().call('POST', '/api/v2/sip/ipWhitelist', { token: o.token, body: { ip: trunk, label: 'trunk' } })).status, 201);
    const agent = await h().agent(o.id, { name: 'Front desk' });
    if (Object.keys(config).length > 0) {
      assert.equal((await h().call('POST', '/api/v2/agent', { token: agent.token, body: config })).status, 200);
      assert.equal((await h().call('POST', '/api/v2/agent/publish', { token: agent.token })).status, 200);
    }
    const found = await n.locality(o.token, { city: 'austin', region: 'TX', country: 'US' });
    assert.equal(found.status, 200, JSON.stringify(found.body));
    const mine = new Set((await h().database.db.selectFrom('phone_numbers').select('number').execute()).map((x) => x.number));
    const number = (found.body.numbers as Array<{ number: string }>).map((x) => x.number).find((x) => !mine.has(x))!;
    const bought = await n.assign(o.token, { number, country: 'US' }, { targetAccountId: agent.id });
    assert.equal(bought.status, 200, JSON.stringify(bought.body));
    return { o, agent, number };
  }

  /** Sends the INVITEs from `trunk`; the responses each got (status codes in order), once each has a final one. */
  async function call(trunk: string, invites: Array<{ callId: string; number: string; fromName?: string }>) {
    const peer = await udpPeer(trunk);
    try {
      const via = () => `SIP/2.0/UDP ${trunk}:${peer.port};branch=${newBranch()};rport`;
      for (const i of invites) await peer.send(invite({ via: via(), port: port(), ...i }), port(), '127.0.0.1');
      return await waitFor('a final answer to each INVITE', () => {
        const byCall = new Map<string, number[]>();
        for (const m of peer.got) if (m.kind === 'response') byCall.set(m.headers.get('call-id')!, [...(byCall.get(m.headers.get('call-id')!) ?? []), m.status]);
        return invites.every((i) => byCall.get(i.callId)?.some((s) => s >= 200)) ? byCall : undefined;
      }, 15_000);
    } finally {
      peer.close();
    }
  }

  it('the number\'s agent answers its SIP call; another organization\'s number is 404 from this one\'s trunk; nothing opens for the 404', async () => {
    const e = h().engine;
    const a = await holder(TRUNK_A);
    const b = await holder(TRUNK_B);
    const got = await call(TRUNK_A, [{ callId: `held-${e}`, number: a.number }, { callId: `foreign-${e}`, number: b.number }]);
    assert.ok(got.get(`held-${e}`)!.includes(200), JSON.stringify([...got]));
    assert.deepEqual(finals(got.get(`foreign-${e}`)!), [404]);
    const c = await waitFor('the held call\'s conversation', async () =>
      h().database.db.selectFrom('conversations').selectAll().where('carrier_ref', '=', `held-${e}`).executeTakeFirst(), 10_000);
    assert.deepEqual([c.org_id, c.account_id], [a.o.id, a.agent.id]);
    assert.notEqual(a.agent.id, a.o.agentId);
    assert.equal(await h().database.db.selectFrom('conversations').select('id').where('carrier_ref', '=', `foreign-${e}`).executeTakeFirst(), undefined);
  });

  it('a BYO number reaches its agent over the customer\'s whitelisted trunk; returned, it is 404 like any number nobody holds', async () => {
    const e = h().engine;
    const a = await holder(TRUNK_B);
    const own = '+14155550166';
    const bound = await n.byo(h().adminToken, { number: own }, { targetAccountId: a.agent.id });
    assert.equal(bound.status, 200, JSON.stringify(bound.body));
    const got = await call(TRUNK_B, [{ callId: `byo-${e}`, number: own }]);
    assert.ok(got.get(`byo-${e}`)!.includes(200), JSON.stringify([...got]));
    const c = await waitFor('the BYO call\'s conversation', async () =>
      h().database.db.selectFrom('conversations').selectAll().where('carrier_ref', '=', `byo-${e}`).executeTakeFirst(), 10_000);
    assert.deepEqual([c.org_id, c.account_id], [a.o.id, a.agent.id]);
    assert.equal((await n.ret(h().adminToken, { number: own }, { targetAccountId: a.o.id })).status, 200);
    const after = await call(TRUNK_B, [{ callId: `byo-gone-${e}`, number: own }]);
    assert.deepEqual(finals(after.get(`byo-gone-${e}`)!), [404]);
  });

  it('a returned number and one nobody ever held are 404 from the trunk that used to reach it; nothing opens', async () => {
    const e = h().engine;
    const a = await holder(TRUNK_A);
    assert.equal((await n.ret(a.o.token, { number: a.number })).status, 200);
    const got = await call(TRUNK_A, [{ callId: `returned-${e}`, number: a.number }, { callId: `never-${e}`, number: '+13055550177' }]);
    assert.deepEqual(finals(got.get(`returned-${e}`)!), [404]);
    assert.deepEqual(finals(got.get(`never-${e}`)!), [404]);
    for (const id of [`returned-${e}`, `never-${e}`]) {
      assert.equal(await h().database.db.selectFrom('conversations').select('id').where('carrier_ref', '=', id).executeTakeFirst(), undefined);
    }
  });

  it('cnamAutoRejectRegex on the caller name refuses with cnamAutoRejectCode; preAnswerRingTime rings (180) before the 200', async () => {
    const e = h().engine;
    const a = await holder(TRUNK_A, { cnamAutoRejectRegex: '^SPAM', cnamAutoRejectCode: 607, preAnswerRingTime: 1 });
    const got = await call(TRUNK_A, [{ callId: `spam-${e}`, number: a.number, fromName: 'SPAM LIKELY' }, { callId: `jane-${e}`, number: a.number, fromName: 'Jane Doe' }]);
    assert.deepEqual(finals(got.get(`spam-${e}`)!), [607]);
    const jane = got.get(`jane-${e}`)!;
    assert.ok(jane.includes(180) && jane.includes(200) && jane.indexOf(180) < jane.indexOf(200), JSON.stringify(jane));
  });

  it('cnamAutoTransferRegex on the caller name hands the call on by REFER to cnamAutoTransferDestination, without the agent (no conversation)', async () => {
    const e = h().engine;
    const a = await holder(TRUNK_A, { cnamAutoTransferRegex: 'ROBO', cnamAutoTransferDestination: '+14155550100' });
    const peer = await udpPeer(TRUNK_A);
    try {
      const via = `SIP/2.0/UDP ${TRUNK_A}:${peer.port};branch=${newBranch()};rport`;
      const callId = `robo-${e}`;
      await peer.send(invite({ via, port: port(), callId, number: a.number, fromName: 'ROBOCALLER INC', contact: `sip:caller@${TRUNK_A}:${peer.port}` }), port(), '127.0.0.1');
      const ok = await waitFor('the 200 to the INVITE', () => peer.got.find((m) => m.kind === 'response' && m.headers.get('call-id') === callId && m.status === 200), 10_000);
      await peer.send([
        `ACK sip:${a.number}@127.0.0.1:${port()} SIP/2.0`, `Via: SIP/2.0/UDP ${TRUNK_A}:${peer.port};branch=${newBranch()};rport`, 'Max-Forwards: 70',
        'From: <sip:+14155550142@pbx.example.test>;tag=c1', `To: ${ok.headers.get('to')!}`, `Call-ID: ${callId}`, 'CSeq: 1 ACK', 'Content-Length: 0', '', '',
      ].join('\r\n'), port(), '127.0.0.1');
      const refer = await waitFor('the REFER', () => peer.got.find((m) => m.kind === 'request' && m.method === 'REFER' && m.headers.get('call-id') === callId), 10_000);
      assert.match(refer.headers.get('refer-to') ?? '', /^<sip:\+14155550100@/);
      // The agent never answered it: no conversation for the call.
      assert.equal(await h().database.db.selectFrom('conversations').select('id').where('carrier_ref', '=', callId).executeTakeFirst(), undefined);
      // A caller the rule does not match is the agent's.
      const got = await call(TRUNK_A, [{ callId: `person-${e}`, number: a.number, fromName: 'Jane Doe' }]);
      assert.ok(got.get(`person-${e}`)!.includes(200));
      await waitFor('the person\'s conversation', async () =>
        h().database.db.selectFrom('conversations').select('account_id').where('carrier_ref', '=', `person-${e}`).executeTakeFirst(), 10_000);
    } finally {
      peer.close();
    }
  });

  it('a caller who hangs up while it rings (CANCEL) gets 200 for the CANCEL and nothing else, 487 for the INVITE, and is never answered', async () => {
    const e = h().engine;
    const a = await holder(TRUNK_A, { preAnswerRingTime: 3 });
    const peer = await udpPeer(TRUNK_A);
    try {
      const via = `SIP/2.0/UDP ${TRUNK_A}:${peer.port};branch=${newBranch()};rport`;
      const callId = `cancel-${e}`;
      await peer.send(invite({ via, port: port(), callId, number: a.number }), port(), '127.0.0.1');
      const statuses = () => peer.got.filter((m) => m.kind === 'response' && m.headers.get('call-id') === callId && m.headers.get('cseq') === '1 INVITE')
        .map((m) => (m.kind === 'response' ? m.status : 0));
      await waitFor('180 Ringing', () => statuses().includes(180) || undefined, 10_000);
      await peer.send([
        `CANCEL sip:${a.number}@127.0.0.1:${port()} SIP/2.0`, `Via: ${via}`, 'Max-Forwards: 70', 'From: <sip:+14155550142@pbx.example.test>;tag=c1',
        `To: <sip:${a.number}@trunk.callplane.test>`, `Call-ID: ${callId}`, 'CSeq: 1 CANCEL', 'Content-Length: 0', '', '',
      ].join('\r\n'), port(), '127.0.0.1');
      await waitFor('487', () => statuses().includes(487) || undefined, 10_000);
      await new Promise((r) => setTimeout(r, 4000)); // past the ring time: nothing more
      assert.deepEqual(finals(statuses()), [487]);
      // The CANCEL itself is answered 200 once, and by nothing else (no 405 beside it).
      const cancelStatuses = peer.got.filter((m) => m.kind === 'response' && m.headers.get('call-id') === callId && m.headers.get('cseq') === '1 CANCEL')
        .map((m) => (m.kind === 'response' ? m.status : 0));
      assert.deepEqual([...new Set(cancelStatuses)], [200], JSON.stringify(cancelStatuses));
      // Nor was a second answer to it attempted (the endpoint drops one after the 200: a 405 there was never meant).
      const second = sipLog.lines.filter((l) => l.msg?.startsWith('second final response') && l.obj.method === 'CANCEL');
      assert.deepEqual(second, []);
      assert.equal(await h().database.db.selectFrom('conversations').select('id').where('carrier_ref', '=', callId).executeTakeFirst(), undefined);
    } finally {
      peer.close();
    }
  });
}, { CALLPLANE_CALL_MAX_SECONDS: '1', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, { sip: { pollMs: 100, log: sipLog } });
