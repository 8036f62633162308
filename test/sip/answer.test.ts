// Answering an inbound call (src/sip/answer.ts) on a real SipEndpoint, with a raw UDP peer on
// loopback as the caller and UDP sockets as its media: an offer with no codec in common (488), a
// late offer whose answer comes in the ACK, ringing cut short by a CANCEL and a CANCEL that came
// before any ringing (487, no port taken, no 200), no free RTP port (503), a re-INVITE moving the
// media, our BYE and the far end's, the maximum duration, and a REFER with no Contact to send it to.
// @lane wall
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import dgram from 'node:dgram';
import { after, before, describe, it } from 'node:test';
import { PortPool } from '../../src/media/port-pool.ts';
import { IncomingCall, SipAnswering, type AnsweredSipCall, type Refusal } from '../../src/sip/answer.ts';
import { newBranch, SipEndpoint } from '../../src/sip/endpoint.ts';
import { parseMessage, type SipMessage, type SipRequest, type SipResponse } from '../../src/sip/message.ts';
import { buildOffer } from '../../src/sip/sdp.ts';
import { udpPeer, waitFor } from '../helpers/sip-peers.ts';

const HOST = '127.0.0.1';
const portMin = 34_000 + 2 * crypto.randomInt(0, 1_000);
const ports = new PortPool({ portMin, portMax: portMin + 2 * 9 });

let endpoint: SipEndpoint;
const answering = new SipAnswering();
/** What the test does with the next INVITE the endpoint hands over. */
let onInvite: (call: IncomingCall | Refusal) => void = () => {};
let peer: Awaited<ReturnType<typeof udpPeer>>;
const sockets: dgram.Socket[] = [];

before(async () => {
  endpoint = new SipEndpoint({
    host: HOST, port: 0,
    onRequest: (req, ctx) => {
      if (req.method === 'INVITE') onInvite(answering.receive(endpoint, req, ctx));
      else if (req.method === 'CANCEL') answering.cancel(req);
    },
  });
  await endpoint.start();
  peer = await udpPeer(HOST);
  // The caller answers our in-dialog requests (BYE) as a phone would.
  peer.sock.on('message', (b) => {
    if (!b.toString('latin1').startsWith('BYE ')) return;
    void peer.send(reply(parseMessage(b) as SipRequest, 200, 'OK'), endpoint.port);
  });
});
after(async () => {
  await answering.hangupAll();
  await endpoint.stop();
  peer.close();
  for (const s of sockets) s.close();
});

/** A UDP socket standing for the caller's RTP port, collecting the payload types that reach it. */
async function media(): Promise<{ port: number; payloadTypes: number[] }> {
  const sock = dgram.createSocket('udp4');
  sockets.push(sock);
  const payloadTypes: number[] = [];
  sock.on('message', (b) => { if (b.length >= 12) payloadTypes.push(b[1]! & 0x7f); });
  await new Promise<void>((r) => sock.bind({ address: HOST, port: 0 }, () => r()));
  return { port: sock.address().port, payloadTypes };
}

const crlf = (lines: string[], body = '') => [...lines, ...(body ? ['Content-Type: application/sdp'] : []), `Content-Length: ${Buffer.byteLength(body)}`, '', body].join('\r\n');
const via = (branch = newBranch()) => `Via: SIP/2.0/UDP ${HOST}:${peer.port};branch=${branch};rport`;

function invite(callId: string, o: { sdp?: string; toTag?: string; cseq?: number; contact?: boolean; branch?: string } = {}): string {
  return crlf([
    `INVITE sip:agent@${HOST}:${endpoint.port} SIP/2.0`, via(o.branch), 'Max-Forwards: 70', 'From: "Caller" <sip:+14155550100@pbx.test>;tag=caller',
    `To: <sip:agent@${HOST}>${o.toTag ? `;tag=${o.toTag}` : ''}`, `Call-ID: ${callId}`, `CSeq: ${o.cseq ?? 1} INVITE`,
    ...(o.contact === false ? [] : [`Contact: <sip:caller@${HOST}:${peer.port}>`]),
  ], o.sdp);
}

function inDialog(method: 'ACK' | 'CANCEL' | 'BYE', callId: string, o: { toTag?: string; cseq?: number; sdp?: string; branch?: string } = {}): string {
  return crlf([
    `${method} sip:agent@${HOST}:${endpoint.port} SIP/2.0`, via(o.branch), 'Max-Forwards: 70', 'From: "Caller" <sip:+14155550100@pbx.test>;tag=caller',
    `To: <sip:agent@${HOST}>${o.toTag ? `;tag=${o.toTag}` : ''}`, `Call-ID: ${callId}`, `CSeq: ${o.cseq ?? 1} ${method}`,
  ], o.sdp);
}

function reply(req: SipRequest, status: number, reason: string): string {
  return crlf([
    `SIP/2.0 ${status} ${reason}`, ...req.headers.getAll('via').map((v) => `Via: ${v}`), `From: ${req.headers.get('from')}`,
    `To: ${req.headers.get('to')}`, `Call-ID: ${req.headers.get('call-id')}`, `CSeq: ${req.headers.get('cseq')}`,
  ]);
}

const responses = (callId: string, method = 'INVITE') => peer.got.filter((m): m is SipResponse => m.kind === 'response' && m.headers.get('call-id') === callId && m.headers.get('cseq')!.endsWith(` ${method}`));
const statuses = (callId: string, method = 'INVITE') => responses(callId, method).map((r) => r.status);
const requests = (callId: string, method: string) => peer.got.filter((m): m is SipMessage & { kind: 'request' } => m.kind === 'request' && m.method === method && m.headers.get('call-id') === callId);

/** Sends an INVITE and resolves with what SipAnswering.receive made of it. */
async function received(text: string): Promise<IncomingCall | Refusal> {
  const got = new Promise<IncomingCall | Refusal>((resolve) => { onInvite = resolve; });
  await peer.send(text, endpoint.port);
  return got;
}

async function incoming(text: string): Promise<IncomingCall> {
  const r = await received(text);
  if (!(r instanceof IncomingCall)) assert.fail(`refused: ${r.status} ${r.why}`);
  return r;
}

async function answered(call: IncomingCall, o: { maxDurationMs?: number } = {}): Promise<AnsweredSipCall> {
  const r = await call.answer({ ports, maxDurationMs: o.maxDurationMs ?? 60_000, mediaTimeoutMs: 0 });
  if ('why' in r) assert.fail(`refused: ${r.status} ${r.why}`);
  return r;
}

const ourTag = (callId: string) => /;tag=([^;>\s]+)/.exec(responses(callId).find((r) => r.status === 200)!.headers.get('to')!)![1]!;

describe('answering an INVITE (src/sip/answer.ts)', () => {
  it('an offer with no codec in common gets 100 Trying, then 488; a re-INVITE for a dialog we do not have 481', async () => {
    const g729 = ['v=0', `o=- 1 1 IN IP4 ${HOST}`, 's=-', `c=IN IP4 ${HOST}`, 't=0 0', 'm=audio 40000 RTP/AVP 18', 'a=rtpmap:18 G729/8000', ''].join('\r\n');
    const refused = await received(invite('no-codec', { sdp: g729 }));
    assert.deepEqual(refused, { status: 488, reason: 'Not Acceptable Here', why: 'no audio codec in common (we take PCMU and PCMA)' });
    await waitFor('the 488', () => statuses('no-codec').includes(488), 3000);
    assert.deepEqual(statuses('no-codec'), [100, 488]);

    const stray = await received(invite('stray-reinvite', { toTag: 'ours-long-ago', cseq: 2 }));
    assert.equal((stray as Refusal).status, 481);
    await waitFor('the 481', () => statuses('stray-reinvite').includes(481), 3000);
    assert.deepEqual(statuses('stray-reinvite'), [481]);
  });

  it('a late offer: our offer goes in the 200, the ACK\'s answer chooses the codec and where RTP goes; the caller\'s BYE ends it', async () => {
    const m = await media();
    const call = await answered(await incoming(invite('late-offer')));
    await waitFor('the 200', () => statuses('late-offer').includes(200), 3000);
    const ok = responses('late-offer').find((r) => r.status === 200)!;
    assert.match(ok.body.toString(), /m=audio \d+ RTP\/AVP 0 8 101/);
    assert.equal(m.payloadTypes.length, 0, 'nothing is sent before the answer says where');
    const answer = buildOffer({ address: HOST, port: m.port, codecs: [{ pt: 8, name: 'PCMA', rate: 8000 }] });
    await peer.send(inDialog('ACK', 'late-offer', { toTag: ourTag('late-offer'), sdp: answer }), endpoint.port);
    await waitFor('PCMA from the call', () => m.payloadTypes.includes(8), 3000);
    assert.ok(m.payloadTypes.every((pt) => pt === 8), `payload types ${[...new Set(m.payloadTypes)].join(', ')}`);

    await peer.send(inDialog('BYE', 'late-offer', { toTag: ourTag('late-offer'), cseq: 2 }), endpoint.port);
    assert.equal(await call.ended, 'remote');
    await waitFor('the BYE answered', () => statuses('late-offer', 'BYE').includes(200), 3000);
    await call.rtp.close();
  });

  it('ringing is cut short by a CANCEL: 180, then 487 for the INVITE and 200 for the CANCEL, and nothing is answered', async () => {
    const branch = newBranch();
    const call = await incoming(invite('cancel-ringing', { branch, sdp: buildOffer({ address: HOST, port: 40_002 }) }));
    const started = Date.now();
    const ringing = call.ring(20_000);
    await waitFor('the 180', () => statuses('cancel-ringing').includes(180), 3000);
    // A CANCEL names the INVITE's transaction: the same branch (RFC 3261 §9.1).
    await peer.send(inDialog('CANCEL', 'cancel-ringing', { branch }), endpoint.port);
    await ringing;
    assert.ok(Date.now() - started < 10_000, 'the ringing ended at the CANCEL');
    const held = ports.inUse;
    assert.deepEqual(await call.answer({ ports, maxDurationMs: 60_000 }), { status: 487, reason: 'Request Terminated', why: 'the caller cancelled it (CANCEL) before it was answered' });
    assert.equal(ports.inUse, held, 'no RTP port was taken');
    await waitFor('the 487', () => statuses('cancel-ringing').includes(487), 3000);
    assert.deepEqual(statuses('cancel-ringing', 'CANCEL'), [200]);
    assert.deepEqual(statuses('cancel-ringing'), [100, 180, 487]);
  });

  it('a CANCEL before any ringing (while the application prepares): no 180, no 200, and a refusal sends nothing more', async () => {
    const branch = newBranch();
    const call = await incoming(invite('cancel-early', { branch, sdp: buildOffer({ address: HOST, port: 40_004 }) }));
    await peer.send(inDialog('CANCEL', 'cancel-early', { branch }), endpoint.port);
    await waitFor('the 487', () => statuses('cancel-early').includes(487), 3000);
    await call.ring(20_000);
    assert.equal(call.refuse({ status: 480, reason: 'Temporarily Unavailable', why: 'nobody' }).status, 487);
    assert.equal((await call.answer({ ports, maxDurationMs: 60_000 }) as Refusal).status, 487);
    assert.deepEqual(statuses('cancel-early'), [100, 487]);
  });

  it('no RTP port free: 503', async () => {
    const full = new PortPool({ portMin: portMin + 100, portMax: portMin + 102 });
    assert.ok(full.acquire() !== null && full.acquire() !== null && full.acquire() === null, 'every port of the pool is held');
    const call = await incoming(invite('no-port', { sdp: buildOffer({ address: HOST, port: 40_006 }) }));
    const r = await call.answer({ ports: full, maxDurationMs: 60_000 });
    assert.equal((r as Refusal).status, 503);
    assert.match((r as Refusal).why, /^no RTP port: /);
    await waitFor('the 503', () => statuses('no-port').includes(503), 3000);
    assert.deepEqual(statuses('no-port'), [100, 503]);
  });

  it('a re-INVITE moves where we send (answered with the same SDP); hangup() is our BYE, ended by us', async () => {
    const first = await media();
    const second = await media();
    const call = await answered(await incoming(invite('moved', { sdp: buildOffer({ address: HOST, port: first.port }) })));
    await waitFor('the 200', () => statuses('moved').includes(200), 3000);
    const sdp = responses('moved').find((r) => r.status === 200)!.body.toString();
    await peer.send(inDialog('ACK', 'moved', { toTag: ourTag('moved') }), endpoint.port);
    await waitFor('RTP at the first address', () => first.payloadTypes.length > 0, 3000);

    await peer.send(invite('moved', { toTag: ourTag('moved'), cseq: 2, sdp: buildOffer({ address: HOST, port: second.port }) }), endpoint.port);
    await waitFor('the re-INVITE answered', () => responses('moved').some((r) => r.status === 200 && r.headers.get('cseq') === '2 INVITE'), 3000);
    assert.equal(responses('moved').find((r) => r.headers.get('cseq') === '2 INVITE' && r.status === 200)!.body.toString(), sdp);
    await waitFor('RTP at the new address', () => second.payloadTypes.length > 0, 3000);

    await call.hangup();
    assert.equal(await call.ended, 'local');
    assert.equal(requests('moved', 'BYE').length, 1);
    await call.rtp.close();
  });

  it('the maximum duration ends the call from our side; without a Contact nothing can be referred or sent a BYE', async () => {
    const call = await answered(await incoming(invite('no-contact', { contact: false, sdp: buildOffer({ address: HOST, port: 40_008 }) })), { maxDurationMs: 300 });
    assert.deepEqual(await call.refer(`sip:+14155550199@${HOST}`), { ok: false, status: 0, reason: 'the caller gave no Contact to transfer' });
    assert.equal(await call.ended, 'local');
    assert.equal(requests('no-contact', 'BYE').length, 0);
    await call.rtp.close();
  });
});
