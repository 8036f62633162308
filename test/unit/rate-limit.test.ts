// The in-process fixed-window limiter (src/lib/rate-limit.ts): counting, waits, all-or-nothing
// admission over several limiters, the bound on tracked keys, and address buckets.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { addressBucket, admitAll, FixedWindowLimiter } from '../../src/lib/rate-limit.ts';

describe('FixedWindowLimiter', () => {
  it('admits `limit` events per window, then says how long to wait; a new window starts afresh', () => {
    const l = new FixedWindowLimiter(3, 1000);
    for (let i = 0; i < 3; i++) assert.deepEqual(l.take('k', 100 + i), { ok: true });
    assert.deepEqual(l.take('k', 400), { ok: false, retryAfterMs: 700 });
    assert.equal(l.wait('k', 1099), 1);
    assert.equal(l.wait('other', 400), 0);
    assert.deepEqual(l.take('k', 1100), { ok: true });
    assert.equal(l.wait('k', 1100), 0);
  });

  it('admitAll counts on every limiter or on none', () => {
    const a = new FixedWindowLimiter(2, 1000);
    const b = new FixedWindowLimiter(1, 5000);
    assert.deepEqual(admitAll(0, [a, 'x'], [b, 'y']), { ok: true });
    assert.deepEqual(admitAll(10, [a, 'x'], [b, 'y']), { ok: false, retryAfterMs: 4990 });
    // The refusal counted nothing on `a`: one event is still left in its window.
    assert.deepEqual(a.take('x', 20), { ok: true });
    assert.equal(a.take('x', 30).ok, false);
  });

  it('tracks at most maxKeys keys: expired windows go first, then the oldest', () => {
    const l = new FixedWindowLimiter(1, 1000, 3);
    l.take('a', 0);
    l.take('b', 500);
    l.take('c', 600);
    l.take('d', 1200); // a expired: dropped
    assert.equal(l.size, 3);
    assert.equal(l.wait('b', 1200), 300);
    l.take('e', 1300); // b expired (started at 500): dropped
    assert.equal(l.size, 3);
    l.take('f', 1400); // c expired (started at 600): dropped
    l.take('g', 1450); // all live: the oldest (d) is forgotten
    assert.equal(l.size, 3);
    assert.equal(l.wait('d', 1450), 0);
    assert.equal(l.wait('g', 1450), 1000);
    for (let i = 0; i < 10_000; i++) l.take(`k${i}`, 2000 + i);
    assert.equal(l.size, 3);
  });
});

describe('addressBucket', () => {
  it('is the IPv4 address (mapped ones too), and the /64 of an IPv6 one', () => {
    assert.equal(addressBucket('203.0.113.9'), '203.0.113.9');
    assert.equal(addressBucket('::ffff:203.0.113.9'), '203.0.113.9');
    assert.equal(addressBucket('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64');
    assert.equal(addressBucket('2001:db8:1:2:bbbb:cccc:dddd:eeee'), '2001:db8:1:2::/64');
    assert.equal(addressBucket('not an address'), 'not an address');
  });
});
