// The reorder buffer on its own: order restored, late and duplicate packets dropped, gaps given up
// after `depth` packets or `maxWaitMs`, its size bounded, and the sequence wrap.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { JitterBuffer } from '../../src/media/jitter-buffer.ts';

describe('jitter buffer', () => {
  it('releases in order at once, and puts reordered packets back in order', () => {
    const jb = new JitterBuffer<number>({ depth: 4, maxWaitMs: 80 });
    assert.deepEqual(jb.push(10, 10), [10]);
    assert.deepEqual(jb.push(12, 12), []); // 11 is missing: 12 waits
    assert.deepEqual(jb.push(13, 13), []);
    assert.deepEqual(jb.push(11, 11), [11, 12, 13]);
    assert.deepEqual(jb.push(14, 14), [14]);
    assert.deepEqual(jb.stats, { released: 5, late: 0, duplicate: 0, lost: 0 });
  });

  it('drops duplicates and packets whose turn has passed', () => {
    const jb = new JitterBuffer<number>({ depth: 4, maxWaitMs: 80 });
    jb.push(1, 1);
    jb.push(3, 3);
    assert.deepEqual(jb.push(3, 3), []); // held twice
    assert.deepEqual(jb.push(1, 1), []); // already played
    assert.deepEqual(jb.push(0, 0), []); // before the first
    assert.deepEqual(jb.push(2, 2), [2, 3]);
    assert.deepEqual(jb.stats, { released: 3, late: 2, duplicate: 1, lost: 0 });
  });

  it('gives a gap up once `depth` packets wait behind it, so it never holds more', () => {
    const jb = new JitterBuffer<number>({ depth: 3, maxWaitMs: 1e9 });
    jb.push(0, 0);
    for (const s of [2, 3, 4]) assert.deepEqual(jb.push(s, s), []);
    assert.equal(jb.size, 3);
    assert.deepEqual(jb.push(5, 5), [2, 3, 4, 5]);
    assert.equal(jb.stats.lost, 1);
    assert.deepEqual(jb.push(1, 1), []); // too late now
    assert.equal(jb.stats.late, 1);
    // Bounded whatever arrives: a burst with many holes never holds more than depth.
    for (let s = 10; s < 200; s += 2) { jb.push(s, s); assert.ok(jb.size <= 3); }
  });

  it('gives a gap up after maxWaitMs when nothing more arrives', () => {
    const jb = new JitterBuffer<number>({ depth: 4, maxWaitMs: 80 });
    jb.push(0, 0, 1000);
    jb.push(2, 2, 1010);
    assert.deepEqual(jb.poll(1050), []);
    assert.deepEqual(jb.poll(1090), [2]);
    assert.equal(jb.stats.lost, 1);
  });

  it('follows the sequence across 65535 → 0, and restarts on a jump', () => {
    const jb = new JitterBuffer<number>({ depth: 4, maxWaitMs: 80 });
    assert.deepEqual(jb.push(65534, 1), [1]);
    assert.deepEqual(jb.push(0, 3), []);
    assert.deepEqual(jb.push(65535, 2), [2, 3]);
    assert.deepEqual(jb.push(30000, 4), [4]); // a restarted sender: a new sequence, not 30000 lost
    assert.deepEqual(jb.push(30001, 5), [5]);
    assert.throws(() => new JitterBuffer({ depth: 0, maxWaitMs: 1 }), RangeError);
  });
});
