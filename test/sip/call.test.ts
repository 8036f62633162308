// Outbound calls against sipp as the far end (test/helpers/sip-peers.ts, scenarios in
// test/fixtures/sip): a full call INVITE → 180 → 200 → ACK → BYE over UDP and TCP, busy, declined,
// no answer with CANCEL, a BYE from the far end, digest answers to 401 and 407, and aborts.
// @lane wall
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { placeSipCall, type PlaceCallOptions } from '../../src/sip/call.ts';
import { verifyAuthorization } from '../../src/sip/digest.ts';
import { SipEndpoint, type Remote } from '../../src/sip/endpoint.ts';
import { parseCSeq, parseMessage, parseNameAddr, parseVia, type SipMessage, type SipRequest } from '../../src/sip/message.ts';
import { parseSdp } from '../../src/sip/sdp.ts';
import { peersSkip, sippFlow, startSipp, waitFor, type Sipp } from '../helpers/sip-peers.ts';
import { within } from '../helpers/wait.ts';

interface Seen { dir: 'in' | 'out'; msg: SipMessage; remote: Remote }

/** sipp's log once it holds `n` messages (it writes a line after sending, so it can trail what we saw). */
async function flowOf(sipp: Sipp, n: number): Promise<string[]> {
  await waitFor(`${n} messages in sipp's log`, () => sippFlow(sipp).length >= n, 3000).catch(() => undefined);
  return sippFlow(sipp);
}

const finished = (sipp: Sipp) => within(sipp.exited, 5000, () => 'still running');

describe('SIP calls against sipp', { skip: peersSkip(['sipp']) }, () => {
  let ep: SipEndpoint;
  const seen: Seen[] = [];
  before(async () => {
    ep = new SipEndpoint({ host: '127.0.0.1', port: 0, onMessage: (dir, msg, remote) => seen.push({ dir, msg, remote }) });
    await ep.start();
  });
  after(async () => {
    await ep?.stop();
  });
  const call = (sipp: Sipp, over: Partial<PlaceCallOptions> = {}) => placeSipCall(ep, {
    target: '+15551230000', from: 'callplane', route: { host: sipp.host, port: sipp.port }, ringTimeoutMs: 5000, maxDurationMs: 600, ...over,
  });
  const ofCall = (callId: string) => seen.filter((s) => s.msg.headers.get('call-id') === callId);
  const requests = (callId: string, method: string) => ofCall(callId).filter((s) => s.dir === 'out' && s.msg.kind === 'request' && s.msg.method === method).map((s) => s.msg as SipRequest);

  for (const transport of ['UDP', 'TCP'] as const) {
    it(`completes a call over ${transport}: INVITE with our SDP offer, 180, 200, ACK to the Contact, BYE after the maximum duration`, async () => {
      const sipp = await startSipp({ transport });
      try {
        const phases: string[] = [];
        const r = await call(sipp, { route: { host: sipp.host, port: sipp.port, transport }, onProgress: (e) => phases.push(e.phase) });
        assert.equal(r.outcome, 'completed', JSON.stringify(r));
        assert.deepEqual([r.status, r.endedBy], [200, 'local']);
        assert.ok(r.durationMs >= 590 && r.durationMs < 5000, `held ${r.durationMs} ms`);
        assert.deepEqual(phases, ['trying', 'ringing', 'answered', 'ended']);
        assert.deepEqual(await flowOf(sipp, 6), ['> INVITE', '< 180', '< 200', '> ACK', '> BYE', '< 200']);

        const [invite] = requests(r.callId, 'INVITE');
        assert.equal(invite.uri, `sip:+15551230000@${sipp.host}:${sipp.port}${transport === 'TCP' ? ';transport=tcp' : ''}`);
        assert.equal(parseVia(invite.headers.getAll('via')[0]).transport, transport);
        const offer = parseSdp(invite.body.toString())!;
        assert.deepEqual(offer.codecs.map((c) => `${c.pt} ${c.name}/${c.rate}`), ['0 PCMU/8000', '8 PCMA/8000', '101 telephone-event/8000']);
        assert.deepEqual([offer.address, offer.port], ['127.0.0.1', r.media?.localPort]);
        assert.deepEqual(r.media?.remote?.codecs.map((c) => c.name), ['PCMU']);

        const [ack] = requests(r.callId, 'ACK');
        const [bye] = requests(r.callId, 'BYE');
        const contact = parseNameAddr(ofCall(r.callId).find((s) => s.msg.kind === 'response' && s.msg.status === 200)!.msg.headers.get('contact')!).uri;
        assert.equal(ack.uri, contact);
        assert.equal(bye.uri, contact);
        assert.equal(parseCSeq(ack.headers.get('cseq')!).seq, parseCSeq(invite.headers.get('cseq')!).seq);
        assert.notEqual(parseVia(ack.headers.getAll('via')[0]).params.branch, parseVia(invite.headers.getAll('via')[0]).params.branch);
        assert.equal(parseCSeq(bye.headers.get('cseq')!).seq, parseCSeq(invite.headers.get('cseq')!).seq + 1);
        assert.match(ack.headers.get('to')!, /;tag=/);
      } finally {
        await sipp.stop();
      }
    });
  }

  for (const [status, reason, outcome] of [[486, 'Busy Here', 'busy'], [600, 'Busy Everywhere', 'busy'], [603, 'Decline', 'declined'], [480, 'Temporarily Unavailable', 'no-answer'], [503, 'Service Unavailable', 'failed'], [404, 'Not Found', 'failed']] as const) {
    it(`maps ${status} ${reason} to ${outcome} and ACKs it`, async () => {
      const sipp = await startSipp({ scenario: 'uas-reject.xml', vars: { status: String(status), reason } });
      try {
        const r = await call(sipp);
        assert.deepEqual([r.outcome, r.status, r.reason, r.durationMs], [outcome, status, reason, 0]);
        assert.equal(await finished(sipp), 0, sipp.output().slice(-1000)); // sipp's scenario ends with our ACK
        const [ack] = requests(r.callId, 'ACK');
        const [invite] = requests(r.callId, 'INVITE');
        assert.equal(ack.headers.getAll('via')[0], invite.headers.getAll('via')[0], 'the ACK of a non-2xx final is in the INVITE transaction');
      } finally {
        await sipp.stop();
      }
    });
  }

  it('CANCELs when it rings past the ring timeout: 200 to the CANCEL, 487, ACK, outcome no-answer', async () => {
    const sipp = await startSipp({ scenario: 'uas-no-answer.xml' });
    try {
      const started = Date.now();
      const r = await call(sipp, { ringTimeoutMs: 800 });
      assert.deepEqual([r.outcome, r.status, r.durationMs], ['no-answer', 487, 0]);
      assert.ok(Date.now() - started >= 790);
      assert.equal(await finished(sipp), 0, sipp.output().slice(-1000));
      assert.deepEqual(await flowOf(sipp, 6), ['> INVITE', '< 180', '> CANCEL', '< 200', '< 487', '> ACK']);
      const [cancel] = requests(r.callId, 'CANCEL');
      const [invite] = requests(r.callId, 'INVITE');
      assert.equal(cancel.uri, invite.uri);
      assert.equal(cancel.headers.getAll('via')[0], invite.headers.getAll('via')[0]);
      assert.equal(parseCSeq(cancel.headers.get('cseq')!).seq, parseCSeq(invite.headers.get('cseq')!).seq);
    } finally {
      await sipp.stop();
    }
  });

  it('CANCELs at the ring timeout after a bare 100 Trying too (a 100 ends Timer B, so nothing else would end the call)', async () => {
    const sipp = await startSipp({ scenario: 'uas-trying.xml' });
    try {
      const phases: string[] = [];
      const r = await Promise.race([
        call(sipp, { ringTimeoutMs: 800, inviteTimeoutMs: 1500, onProgress: (e) => phases.push(e.phase) }),
        new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 8000)),
      ]);
      assert.notEqual(r, 'hung', 'the call never ended');
      if (r === 'hung') return;
      assert.deepEqual([r.outcome, r.status], ['no-answer', 487]);
      assert.deepEqual(phases, ['trying', 'ended'], 'a 100 is not ringing');
      assert.equal(await finished(sipp), 0, sipp.output().slice(-1000));
      assert.deepEqual(await flowOf(sipp, 6), ['> INVITE', '< 100', '> CANCEL', '< 200', '< 487', '> ACK']);
    } finally {
      await sipp.stop();
    }
  });

  it('an abort while ringing CANCELs and ends as canceled', async () => {
    const sipp = await startSipp({ scenario: 'uas-no-answer.xml' });
    try {
      const ac = new AbortController();
      const r = await call(sipp, { signal: ac.signal, onProgress: (e) => { if (e.phase === 'ringing') setTimeout(() => ac.abort(), 100); } });
      assert.deepEqual([r.outcome, r.status], ['canceled', 487]);
      assert.equal(await finished(sipp), 0);
    } finally {
      await sipp.stop();
    }
  });

  it('an abort after the answer sends BYE and ends as completed', async () => {
    const sipp = await startSipp();
    try {
      const ac = new AbortController();
      const r = await call(sipp, { maxDurationMs: 30_000, signal: ac.signal, onProgress: (e) => { if (e.phase === 'answered') setTimeout(() => ac.abort(), 200); } });
      assert.deepEqual([r.outcome, r.endedBy], ['completed', 'local']);
      assert.ok(r.durationMs < 10_000);
      assert.deepEqual(await flowOf(sipp, 6), ['> INVITE', '< 180', '< 200', '> ACK', '> BYE', '< 200']);
    } finally {
      await sipp.stop();
    }
  });

  it('a BYE from the far end ends the call as completed, answered with 200', async () => {
    const sipp = await startSipp({ scenario: 'uas-remote-bye.xml' });
    try {
      const r = await call(sipp, { maxDurationMs: 30_000 });
      assert.deepEqual([r.outcome, r.endedBy], ['completed', 'remote']);
      assert.ok(r.durationMs < 10_000);
      assert.equal(await finished(sipp), 0, sipp.output().slice(-1000));
      assert.deepEqual(r.media?.remote?.codecs.map((c) => c.name), ['PCMA', 'telephone-event']);
      assert.equal(requests(r.callId, 'BYE').length, 0, 'we sent no BYE of our own');
      const ok = ofCall(r.callId).find((s) => s.dir === 'out' && s.msg.kind === 'response');
      assert.equal(ok?.msg.kind === 'response' && ok.msg.status, 200);
    } finally {
      await sipp.stop();
    }
  });

  it('answers a 401 with Authorization that sipp verifies (qop=auth), and a wrong password is refused', async () => {
    for (const [password, outcome, status] of [['b0bpw', 'completed', 200], ['wrong', 'failed', 403]] as const) {
      const sipp = await startSipp({ scenario: 'uas-auth.xml' });
      try {
        const r = await call(sipp, { credentials: { username: 'bob', password } });
        assert.deepEqual([r.outcome, r.status], [outcome, status]);
        const invites = requests(r.callId, 'INVITE');
        assert.equal(invites.length, 2);
        assert.equal(parseCSeq(invites[1].headers.get('cseq')!).seq, parseCSeq(invites[0].headers.get('cseq')!).seq + 1);
        assert.match(invites[1].headers.get('authorization')!, /qop=auth, nc=00000001/);
      } finally {
        await sipp.stop();
      }
    }
  });

  it('answers a 407 from a proxy with Proxy-Authorization', async () => {
    const sipp = await startSipp({ scenario: 'uas-proxy-auth.xml' });
    try {
      const r = await call(sipp, { credentials: { username: 'bob', password: 'b0bpw' } });
      assert.equal(r.outcome, 'completed');
      const invites = requests(r.callId, 'INVITE');
      assert.equal(invites[0].headers.has('proxy-authorization'), false);
      const credentials = invites[1].headers.get('proxy-authorization')!;
      assert.equal(verifyAuthorization(credentials, { username: 'bob', password: 'b0bpw' }, 'INVITE'), true);
      assert.match(credentials, /realm="sipp.test", nonce="4a6f6e6573313233"/);
      // sipp echoes what it received.
      const ok = ofCall(r.callId).find((s) => s.msg.kind === 'response' && s.msg.status === 200)!;
      assert.equal(ok.msg.headers.get('x-seen-credentials'), credentials);
    } finally {
      await sipp.stop();
    }
  });

  it('without credentials a 407 is a failure', async () => {
    const sipp = await startSipp({ scenario: 'uas-proxy-auth.xml' });
    try {
      const r = await call(sipp);
      assert.deepEqual([r.outcome, r.status], ['failed', 407]);
    } finally {
      await sipp.stop();
    }
  });

  it('sends through an outbound proxy with a preloaded Route, keeping the Request-URI', async () => {
    const sipp = await startSipp();
    try {
      const r = await call(sipp, { route: { host: 'pbx.callplane.test', port: 5060, proxy: { host: sipp.host, port: sipp.port } } });
      assert.equal(r.outcome, 'completed', JSON.stringify(r));
      const [invite] = requests(r.callId, 'INVITE');
      assert.equal(invite.uri, 'sip:+15551230000@pbx.callplane.test:5060');
      assert.equal(invite.headers.get('route'), `<sip:${sipp.host}:${sipp.port};lr>`);
      const [received] = sipp.messages().split(/-{47} [^\n]*\n/).filter((p) => /message received/.test(p)).map((p) => parseMessage(Buffer.from(p.slice(p.indexOf('\n\n') + 2))));
      assert.equal(received.kind === 'request' && received.uri, 'sip:+15551230000@pbx.callplane.test:5060');
    } finally {
      await sipp.stop();
    }
  });

  it('fails with a timeout when nobody answers the INVITE at all', async () => {
    const sipp = await startSipp();
    await sipp.stop(); // its port is now silent
    const r = await call(sipp, { ringTimeoutMs: 1000, inviteTimeoutMs: 1500 });
    assert.equal(r.outcome, 'failed');
    assert.match(r.reason ?? '', /^no SIP answer from udp:[\d.]+:\d+: refused, unreachable or timed out$/);
  });
});
