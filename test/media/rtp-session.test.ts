// RtpSession on 127.0.0.1: two sessions talking, pacing, clear() for barge-in, digits, the reorder
// buffer behind a real socket, latching onto a NATed peer, the media timeout, and the port pool.
// Timing checks are loose (hundreds of ms): the machine running them is busy.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import dgram from 'node:dgram';
import { after, describe, it } from 'node:test';
import alawmulaw from 'alawmulaw';
import { encodeG711 } from '../../src/media/g711.ts';
import { PortPool, PortsExhaustedError, checkPortRange } from '../../src/media/port-pool.ts';
import { buildRtp, parseRtp, type RtpPacket } from '../../src/media/rtp.ts';
import { RtpSession, type RtpSessionOptions } from '../../src/media/rtp-session.ts';

const HOST = '127.0.0.1';
const PCMU = { pt: 0, name: 'PCMU' };
const PCMA = { pt: 8, name: 'PCMA' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A pool on a random stretch of ports below Linux's ephemeral range (32768 up, where port 0 binds
 * land), so two test processes rarely meet (and skip each other's ports when they do).
 */
function testPool(ports = 40): PortPool {
  const portMin = 20_000 + 2 * crypto.randomInt(0, 6_000);
  return new PortPool({ portMin, portMax: portMin + 2 * (ports - 1) });
}
const pool = testPool();

async function waitFor(what: string, cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

const open: RtpSession[] = [];
async function session(o: Partial<RtpSessionOptions> = {}): Promise<RtpSession> {
  const s = await RtpSession.open({ host: HOST, pool, codec: PCMU, telephoneEvent: 101, ...o });
  open.push(s);
  return s;
}
/** Two sessions, each sending to the other's port. */
async function pair(o: Partial<RtpSessionOptions> = {}, ob: Partial<RtpSessionOptions> = o): Promise<[RtpSession, RtpSession]> {
  const a = await session(o);
  const b = await session(ob);
  a.setRemote({ address: HOST, port: b.port });
  b.setRemote({ address: HOST, port: a.port });
  return [a, b];
}
after(async () => {
  await Promise.all(open.map((s) => s.close()));
});

/** A frame whose every sample is the μ-law code 0xFF − i decoded: the receiver reads i back exactly. */
function markedFrame(i: number): Int16Array {
  return new Int16Array(160).fill(alawmulaw.mulaw.decodeSample(0xff - i));
}
const markOf = (frame: Int16Array) => 0xff - (alawmulaw.mulaw.encodeSample(frame[80]) & 0xff);
const energy = (f: Int16Array) => Math.sqrt(f.reduce((s, x) => s + x * x, 0) / f.length);

/** A plain UDP socket standing in for a far end. */
async function rawPeer() {
  const sock = dgram.createSocket('udp4');
  const got: Array<{ p: RtpPacket; at: number; port: number }> = [];
  sock.on('message', (b, r) => { const p = parseRtp(b); if (p) got.push({ p, at: Date.now(), port: r.port }); });
  await new Promise<void>((r) => sock.bind({ address: HOST, port: 0 }, () => r()));
  return {
    sock, got, port: sock.address().port,
    send: (to: number, p: Partial<RtpPacket> & { sequence: number }) => new Promise<void>((r) => sock.send(buildRtp({
      marker: false, payloadType: 0, timestamp: p.sequence * 160, ssrc: 0x5eed, csrc: [], payload: Buffer.alloc(160, 0xff), ...p,
    }), to, HOST, () => r())),
    close: () => new Promise<void>((r) => sock.close(() => r())),
  };
}

describe('RtpSession', () => {
  it('carries 2 s of audio from one session to another, in order and paced at 20 ms', async () => {
    const [a, b] = await pair();
    const marks: Array<{ i: number; at: number }> = [];
    b.on('audio', (f) => {
      assert.equal(f.length, 160);
      const i = markOf(f);
      if (i > 0) marks.push({ i, at: Date.now() });
    });
    const sent = Date.now();
    for (let i = 1; i <= 100; i++) a.send(markedFrame(i));
    let drained = false;
    a.once('drained', () => { drained = true; });
    await waitFor('the last frame', () => marks.some((m) => m.i === 100) || Date.now() - sent > 6000, 8000);
    const order = marks.map((m) => m.i);
    assert.deepEqual(order, [...order].sort((x, y) => x - y), 'in order');
    assert.ok(order.length >= 95, `${order.length} of 100 frames`);
    // 100 frames take ~2 s at 20 ms each: not a burst, not stalled.
    const span = marks.at(-1)!.at - marks[0].at;
    assert.ok(span > 1500 && span < 3500, `100 frames over ${span} ms`);
    await waitFor('drained', () => drained, 1000);
    // Silence keeps flowing after the audio (continuous RTP): B still hears A.
    const before = b.stats.packetsReceived;
    await sleep(200);
    assert.ok(b.stats.packetsReceived - before >= 4);
    assert.equal(b.stats.rejected + b.stats.invalid, 0);
  });

  it('carries PCMA, with a tone keeping its shape', async () => {
    const [a, b] = await pair({ codec: PCMA });
    const frames: Int16Array[] = [];
    b.on('audio', (f) => { if (energy(f) > 1000) frames.push(f); });
    const tone = Int16Array.from({ length: 8000 }, (_, i) => Math.round(8000 * Math.sin((2 * Math.PI * 1000 * i) / 8000)));
    a.send(tone);
    await waitFor('a second of tone', () => frames.length >= 45, 5000);
    const pcm = Int16Array.from(frames.flatMap((f) => [...f]));
    let crossings = 0;
    for (let i = 1; i < pcm.length; i++) if ((pcm[i - 1] < 0) !== (pcm[i] < 0)) crossings++;
    assert.ok(Math.abs(crossings / (pcm.length / 8000) / 2 - 1000) < 30);
    assert.ok(Math.abs(energy(pcm) / (8000 / Math.SQRT2) - 1) < 0.05);
  });

  it('clear() stops the audio within a frame and says how much it dropped', async () => {
    const [a, b] = await pair();
    let loud = 0;
    b.on('audio', (f) => { if (energy(f) > 1000) loud++; });
    a.send(new Int16Array(8000 * 5).fill(8000)); // 5 s
    await waitFor('audio flowing', () => loud >= 10);
    const dropped = a.clear();
    const atClear = loud;
    assert.ok(dropped > 8000 * 3 && dropped % 160 === 0, `dropped ${dropped}`);
    assert.equal(a.queuedSamples, 0);
    await sleep(300);
    assert.ok(loud - atClear <= 2, `${loud - atClear} frames after clear()`);
    // Silence continues, and new audio plays after a clear.
    a.send(new Int16Array(160 * 5).fill(8000));
    await waitFor('audio after clear', () => loud - atClear >= 5);
  });

  it('sends digits as telephone-events: each arrives once, and audio resumes after', async () => {
    const [a, b] = await pair();
    const keys: string[] = [];
    b.on('dtmf', (k) => keys.push(k));
    let loud = 0;
    b.on('audio', (f) => { if (energy(f) > 1000) loud++; });
    a.sendDigits('1#9A');
    a.send(new Int16Array(160 * 5).fill(8000)); // waits for the digits
    await waitFor('four keys', () => keys.length >= 4);
    assert.equal(loud, 0, 'no audio while the digits go out');
    await waitFor('the audio after them', () => loud >= 5);
    await sleep(100);
    assert.deepEqual(keys, ['1', '#', '9', 'A']);
    assert.throws(() => a.sendDigits('12x'), RangeError);
    const c = await session({ telephoneEvent: null });
    assert.throws(() => c.sendDigits('1'), /telephone-event/);
  });

  it('puts reordered packets back in order and drops duplicates and strangers', async () => {
    const peer = await rawPeer();
    const b = await session({ remote: { address: HOST, port: peer.port } });
    const marks: number[] = [];
    b.on('audio', (f) => marks.push(markOf(f)));
    const pkt = (i: number) => ({ sequence: 1000 + i, payload: encodeG711('PCMU', markedFrame(i)) });
    try {
      for (const i of [1, 3, 3, 2, 5, 4, 6, 1, 8, 7]) await peer.send(b.port, pkt(i));
      await peer.send(b.port, { ...pkt(9), payloadType: 18 }); // G.729: not negotiated
      await peer.send(b.port, { ...pkt(9), ssrc: 0xbad }); // another stream
      await waitFor('eight frames', () => marks.length >= 8, 2000);
      await sleep(100);
      assert.deepEqual(marks, [1, 2, 3, 4, 5, 6, 7, 8]);
      assert.deepEqual([b.stats.duplicate, b.stats.late, b.stats.rejected], [1, 1, 2]); // the second 3 while held, the second 1 after its turn
    } finally {
      await peer.close();
    }
  });

  it('latches onto a peer sending from another port than its SDP said, and keeps others out', async () => {
    const peer = await rawPeer();
    const intruder = await rawPeer();
    const unused = await rawPeer(); // where the SDP says the peer is: nothing will come from there
    const b = await session({ remote: { address: HOST, port: unused.port } });
    const latched: number[] = [];
    b.on('latched', (s) => latched.push(s.port));
    let heard = 0;
    b.on('audio', () => heard++);
    try {
      await sleep(100);
      assert.ok(unused.got.length > 0, 'before latching we send where the SDP says');
      // A packet of a type not negotiated does not latch.
      await peer.send(b.port, { sequence: 1, payloadType: 9 });
      await sleep(50);
      assert.deepEqual(latched, []);
      for (let s = 2; s <= 4; s++) await peer.send(b.port, { sequence: s });
      await waitFor('the latch', () => latched.length === 1);
      assert.deepEqual(latched, [peer.port]);
      assert.equal(b.destination?.port, peer.port);
      await waitFor('our packets at the peer\'s real port', () => peer.got.length >= 3);
      // Once latched: another source, even in sequence with the right SSRC, is not heard.
      const heardBefore = heard;
      for (let s = 5; s <= 10; s++) await intruder.send(b.port, { sequence: s });
      await sleep(100);
      assert.equal(heard, heardBefore);
      assert.equal(b.destination?.port, peer.port);
      assert.equal(intruder.got.length, 0);
      // The peer's PBX switching streams (a new SSRC from the same port) is followed after two packets in a row.
      for (let s = 50; s <= 53; s++) await peer.send(b.port, { sequence: s, ssrc: 0x2222 });
      await waitFor('the new SSRC', () => b.source?.ssrc === 0x2222);
      assert.equal(b.source?.port, peer.port);
    } finally {
      await Promise.all([peer.close(), intruder.close(), unused.close()]);
    }
  });

  it('without symmetric RTP, keeps sending where the SDP said', async () => {
    const peer = await rawPeer();
    const sdpSide = await rawPeer();
    const b = await session({ remote: { address: HOST, port: sdpSide.port }, symmetric: false });
    try {
      for (let s = 1; s <= 3; s++) await peer.send(b.port, { sequence: s });
      await waitFor('latched', () => b.source !== undefined);
      const before = sdpSide.got.length;
      await sleep(150);
      assert.ok(sdpSide.got.length > before);
      assert.equal(b.destination?.port, sdpSide.port);
    } finally {
      await Promise.all([peer.close(), sdpSide.close()]);
    }
  });

  it('keeps timestamps and sequence continuous across suppressed silence and marks each talkspurt', async () => {
    const peer = await rawPeer();
    const a = await session({ remote: { address: HOST, port: peer.port }, silence: 'suppress' });
    try {
      a.send(new Int16Array(160 * 3).fill(1000));
      await waitFor('three packets', () => peer.got.length >= 3);
      await sleep(200);
      assert.equal(peer.got.length, 3, 'nothing sent in silence');
      a.send(new Int16Array(160 * 2 + 50).fill(1000)); // a part-frame at the end is padded and sent
      await waitFor('three more packets', () => peer.got.length >= 6);
      const p = peer.got.map((g) => g.p);
      assert.deepEqual(p.map((x) => x.marker), [true, false, false, true, false, false]);
      for (let i = 1; i < p.length; i++) assert.equal((p[i].sequence - p[i - 1].sequence) & 0xffff, 1);
      for (const i of [1, 2, 4, 5]) assert.equal((p[i].timestamp - p[i - 1].timestamp) >>> 0, 160);
      const gap = (p[3].timestamp - p[2].timestamp) >>> 0;
      assert.ok(gap % 160 === 0 && gap >= 160 * 8, `timestamp advanced ${gap} over the silence`);
      assert.ok(p.every((x) => x.ssrc === a.ssrc && x.payloadType === 0 && x.payload.length === 160));
    } finally {
      await peer.close();
    }
  });

  it('reports a media timeout once when the peer goes quiet, and not while it talks', async () => {
    const [a, b] = await pair({ mediaTimeoutMs: 400 });
    let timeouts = 0;
    b.on('timeout', () => timeouts++);
    await sleep(800);
    assert.equal(timeouts, 0, 'silence packets keep the media alive');
    await a.close();
    await waitFor('the timeout', () => timeouts === 1, 3000);
    await sleep(600);
    assert.equal(timeouts, 1);
    // A peer that holds the call (recvonly: it sends nothing) is not timed out.
    const c = await session({ mediaTimeoutMs: 200, remote: { address: HOST, port: b.port, direction: 'recvonly' } });
    let held = 0;
    c.on('timeout', () => held++);
    await sleep(500);
    assert.equal(held, 0);
  });

  it('answers garbage with nothing, and random packets never latch', async () => {
    const peer = await rawPeer();
    const b = await session({ remote: { address: HOST, port: peer.port + 1 } });
    try {
      for (let i = 0; i < 300; i++) {
        await new Promise<void>((r) => peer.sock.send(crypto.randomBytes(crypto.randomInt(0, 400)), b.port, HOST, () => r()));
        if (i % 20 === 19) await sleep(5); // a socket's receive queue holds a few hundred datagrams
      }
      await new Promise<void>((r) => peer.sock.send(Buffer.alloc(9000, 0x80), b.port, HOST, () => r()));
      // What matters is that every one read was refused (loopback may still drop one of a burst).
      await waitFor('the garbage read', () => b.stats.packetsReceived >= 290, 3000);
      await sleep(100);
      assert.equal(b.source, undefined);
      assert.equal(b.stats.invalid + b.stats.rejected, b.stats.packetsReceived);
    } finally {
      await peer.close();
    }
  });
});

describe('PortPool', () => {
  it('validates its range', () => {
    assert.equal(checkPortRange({ portMin: 10000, portMax: 20000 }), null);
    for (const r of [{ portMin: 10001, portMax: 20000 }, { portMin: 10000, portMax: 10000 }, { portMin: 20000, portMax: 10000 }, { portMin: 1000, portMax: 2000 }, { portMin: 10000, portMax: 65536 }]) {
      assert.notEqual(checkPortRange(r), null, JSON.stringify(r));
      assert.throws(() => new PortPool(r), RangeError);
    }
  });

  it('hands out each even port once, refuses when all are held, and takes them back on close', async () => {
    const small = testPool(3);
    const { portMin, portMax } = small.range;
    const sessions = await Promise.all([1, 2, 3].map(() => RtpSession.open({ host: HOST, pool: small, codec: PCMU })));
    try {
      const ports = sessions.map((s) => s.port).sort((x, y) => x - y);
      assert.deepEqual(ports, [portMin, portMin + 2, portMax]);
      assert.equal(small.inUse, 3);
      await assert.rejects(RtpSession.open({ host: HOST, pool: small, codec: PCMU }), PortsExhaustedError);
      assert.equal(small.inUse, 3, 'a refused open holds nothing');
      const freed = sessions[1].port;
      await sessions[1].close();
      await sessions[1].close(); // twice is once
      assert.equal(small.inUse, 2);
      const again = await RtpSession.open({ host: HOST, pool: small, codec: PCMU });
      sessions[1] = again;
      assert.equal(again.port, freed);
    } finally {
      await Promise.all(sessions.map((s) => s.close()));
    }
    assert.equal(small.inUse, 0);
  });

  it('skips a port another process holds', async () => {
    const small = testPool(2);
    const others: dgram.Socket[] = [];
    const occupy = (port: number) => new Promise<void>((resolve, reject) => {
      const sock = dgram.createSocket('udp4');
      others.push(sock);
      sock.once('error', reject);
      sock.bind({ address: HOST, port }, () => resolve());
    });
    try {
      await occupy(small.range.portMin);
      const s = await RtpSession.open({ host: HOST, pool: small, codec: PCMU });
      assert.equal(s.port, small.range.portMax);
      await s.close();
      // …and with both taken that way, refuses.
      await occupy(small.range.portMax);
      await assert.rejects(small.bind(HOST), PortsExhaustedError);
      assert.equal(small.inUse, 0);
    } finally {
      for (const o of others) o.close();
    }
  });

  it('round robin: a port just given back is not the next handed out', () => {
    const p = testPool(4);
    const first = p.acquire()!;
    p.release(first);
    assert.notEqual(p.acquire(), first);
    const all = new Set([first]);
    for (let i = 0; i < 3; i++) all.add(p.acquire() ?? -1);
    assert.equal(p.inUse, 4);
    assert.equal(p.acquire(), null);
    assert.ok([...all].every((x) => x % 2 === 0 && x >= p.range.portMin && x <= p.range.portMax));
  });

  it('refuses an unknown codec', async () => {
    await assert.rejects(RtpSession.open({ host: HOST, pool, codec: { pt: 18, name: 'G729' } }), /PCMU or PCMA/);
  });
});
