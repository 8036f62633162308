// RTP packets (RFC 3550) built and read back, and garbage from the network: never a throw, always null.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, it } from 'node:test';
import { buildRtp, parseRtp, RTP_MAX_BYTES, seqDiff, type RtpPacket } from '../../src/media/rtp.ts';

const base: RtpPacket = { marker: false, payloadType: 0, sequence: 1, timestamp: 160, ssrc: 0x11223344, csrc: [], payload: Buffer.alloc(160, 0xff) };

/** A packet as plain values, absent options as undefined, to compare what was built with what was read. */
const plain = (p: RtpPacket) => ({
  ...p, payload: [...p.payload], padding: p.padding || undefined,
  extension: p.extension ? { profile: p.extension.profile, data: [...p.extension.data] } : undefined,
});

describe('RTP packets', () => {
  it('builds the fixed header byte for byte', () => {
    const b = buildRtp({ ...base, marker: true, payloadType: 8, sequence: 0xabcd, timestamp: 0xdeadbeef, payload: Buffer.from([1, 2, 3]) });
    assert.equal(b.toString('hex'), '8088abcddeadbeef11223344010203');
  });

  it('round-trips every field: marker, type, sequence, timestamp, SSRC, CSRCs, extension, padding', () => {
    const cases: RtpPacket[] = [
      base,
      { ...base, marker: true, payloadType: 101, sequence: 0xffff, timestamp: 0xffffffff, ssrc: 0 },
      { ...base, csrc: [1, 0xffffffff, 3], payload: Buffer.from('hello') },
      { ...base, extension: { profile: 0xbede, data: Buffer.from([0x10, 0xaa, 0, 0]) } },
      { ...base, padding: 3, payload: Buffer.from([7, 8]) },
      { ...base, csrc: Array.from({ length: 15 }, (_, i) => i), extension: { profile: 1, data: Buffer.alloc(0) }, padding: 255, payload: Buffer.alloc(0) },
    ];
    for (const p of cases) {
      const parsed = parseRtp(buildRtp(p));
      assert.ok(parsed, JSON.stringify(p));
      assert.deepEqual(plain(parsed), plain(p));
    }
  });

  it('refuses to build what no packet can hold', () => {
    for (const bad of [{ payloadType: 128 }, { sequence: 65536 }, { timestamp: -1 }, { ssrc: 2 ** 32 }, { csrc: Array(16).fill(0) }, { padding: 256 }, { extension: { profile: 0, data: Buffer.alloc(3) } }]) {
      assert.throws(() => buildRtp({ ...base, ...bad }), RangeError, JSON.stringify(bad));
    }
  });

  it('reads null from what is not a well-formed version 2 packet', () => {
    const good = buildRtp(base);
    const tweak = (f: (b: Buffer) => void, from = good) => { const b = Buffer.from(from); f(b); return b; };
    const bad: Array<[string, Uint8Array]> = [
      ['empty', Buffer.alloc(0)],
      ['short', good.subarray(0, 11)],
      ['version 1', tweak((b) => { b[0] = 0x40; })],
      ['version 3', tweak((b) => { b[0] = 0xc0; })],
      ['CSRCs past the end', tweak((b) => { b[0] = 0x8f; }, good.subarray(0, 40))],
      ['extension header past the end', tweak((b) => { b[0] = 0x90; }, good.subarray(0, 14))],
      ['extension words past the end', tweak((b) => { b[0] = 0x90; b.writeUInt16BE(1000, 14); })],
      ['padding count 0', tweak((b) => { b[0] = 0xa0; b[b.length - 1] = 0; })],
      ['padding past the header', tweak((b) => { b[0] = 0xa0; b[b.length - 1] = 200; }, good.subarray(0, 20))],
      ['RTCP sender report', Buffer.from('80c8000611223344' + '00'.repeat(20), 'hex')],
      ['RTCP receiver report', Buffer.from('81c9000711223344' + '00'.repeat(24), 'hex')],
      ['too long', Buffer.alloc(RTP_MAX_BYTES + 1, 0x80)],
    ];
    for (const [what, b] of bad) assert.equal(parseRtp(b), null, what);
    assert.ok(parseRtp(Buffer.alloc(RTP_MAX_BYTES, 0x80)));
    // A plain Uint8Array works as well as a Buffer.
    assert.equal(parseRtp(new Uint8Array(good))?.ssrc, base.ssrc);
  });

  it('never throws on random bytes, and what it accepts is consistent with its length', () => {
    let accepted = 0;
    for (let i = 0; i < 20_000; i++) {
      const len = crypto.randomInt(0, 200);
      const b = crypto.randomBytes(len);
      if (i % 2) b[0] = (b[0] & 0x3f) | 0x80; // half of them version 2, to reach the deeper checks
      const p = parseRtp(b);
      if (!p) continue;
      accepted++;
      const ext = p.extension ? 4 + p.extension.data.length : 0;
      assert.equal(12 + 4 * p.csrc.length + ext + p.payload.length + (p.padding ?? 0), len);
      assert.ok(p.payloadType < 72 || p.payloadType > 76);
    }
    assert.ok(accepted > 1000, `${accepted} accepted`);
  });

  it('compares sequence numbers across the wrap', () => {
    assert.deepEqual([seqDiff(1, 0), seqDiff(0, 65535), seqDiff(65535, 0), seqDiff(5, 5), seqDiff(32767, 0), seqDiff(32768, 0)], [1, 1, -1, 0, 32767, -32768]);
  });
});
