// RFC 4733 telephone-events: what a key press is sent as, and a receiver that reports each press
// once however its packets arrive (repeated end packets, duplicates, reordering, a lost start).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DtmfReceiver, dtmfEventCode, encodeDtmf, type DtmfInput } from '../../src/media/dtmf.ts';

/** A sender's packets for a string of keys: each event's timestamp is where it starts. */
function packetsFor(keys: string, gap = 3): Array<DtmfInput & { seq: number }> {
  const out: Array<DtmfInput & { seq: number }> = [];
  let ts = 1000;
  let seq = 0;
  for (const k of keys) {
    const packets = encodeDtmf(k);
    for (const p of packets) out.push({ timestamp: ts, marker: p.marker, payload: p.payload, seq: seq++ });
    ts += (packets.length + gap) * 160;
  }
  return out;
}

describe('DTMF telephone-events', () => {
  it('sends a key press as marked start, updates, and three identical end packets, one timestamp', () => {
    const packets = encodeDtmf('5', { durationMs: 100, volume: 12 });
    assert.equal(packets.length, 7); // 4 updates (20…80 ms) + 3 ends (100 ms)
    assert.deepEqual(packets.map((p) => p.marker), [true, false, false, false, false, false, false]);
    assert.deepEqual(packets.map((p) => p.end), [false, false, false, false, true, true, true]);
    assert.deepEqual(packets.map((p) => p.payload.toString('hex')), [
      '050c00a0', '050c0140', '050c01e0', '050c0280', '058c0320', '058c0320', '058c0320',
    ]);
    // A press no longer than one interval is the three end packets, the first one marked.
    assert.deepEqual(encodeDtmf('#', { durationMs: 10 }).map((p) => [p.marker, p.end, p.payload.toString('hex')]),
      [[true, true, '0b8a00a0'], [false, true, '0b8a00a0'], [false, true, '0b8a00a0']]);
  });

  it('knows the sixteen keys and nothing else', () => {
    assert.deepEqual([...'0123456789*#ABCDabcd'].map(dtmfEventCode), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 12, 13, 14, 15]);
    for (const k of ['E', '', '12', ' ', '!']) assert.equal(dtmfEventCode(k), null);
    assert.throws(() => encodeDtmf('x'), RangeError);
  });

  it('reports each key once from a clean stream', () => {
    const rx = new DtmfReceiver();
    const keys = packetsFor('1234567890*#ABCD').map((p) => rx.push(p)).filter((k) => k !== null);
    assert.equal(keys.join(''), '1234567890*#ABCD');
  });

  it('reports each key once with duplicated, reordered and lost packets, and a key pressed twice', () => {
    const packets = packetsFor('1223#');
    // Every packet twice, shuffled within a window of five, the start packet of the second '2' lost.
    const secondTwoStart = packets.filter((p) => p.payload[0] === 2 && p.marker)[1];
    const mangled = packets.filter((p) => p !== secondTwoStart).flatMap((p) => [p, p]);
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
    for (let i = 0; i < mangled.length; i++) {
      const j = Math.min(mangled.length - 1, i + Math.floor(rand() * 5));
      [mangled[i], mangled[j]] = [mangled[j], mangled[i]];
    }
    const rx = new DtmfReceiver();
    assert.equal(mangled.map((p) => rx.push(p)).filter((k) => k !== null).join(''), '1223#');
    // The end packets of a finished event arriving again much later say nothing.
    for (const p of packets.filter((x) => x.payload[1] & 0x80)) assert.equal(rx.push(p), null);
  });

  it('counts a long press split into segments once, and ignores short payloads and non-key events', () => {
    const rx = new DtmfReceiver();
    const seg = (ts: number, marker: boolean, end: boolean, duration: number): DtmfInput => ({
      timestamp: ts, marker, payload: Buffer.from([9, end ? 0x80 : 0, duration >> 8, duration & 0xff]),
    });
    assert.equal(rx.push(seg(0, true, false, 160)), '9');
    assert.equal(rx.push(seg(0, false, false, 0xffff)), null);
    assert.equal(rx.push(seg(0xffff, false, false, 160)), null); // the next segment: same press
    assert.equal(rx.push(seg(0xffff, false, true, 800)), null);
    assert.equal(rx.push(seg(0xffff + 2000, true, false, 160)), '9'); // a new press
    assert.equal(rx.push({ timestamp: 99, marker: true, payload: Buffer.from([1, 0]) }), null);
    assert.equal(rx.push({ timestamp: 100, marker: true, payload: Buffer.from([16, 0x80, 0, 160]) }), null); // flash
  });
});
