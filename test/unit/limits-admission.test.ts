// admission: whether the queue may start a call or text now and, if not, when to look again.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { admission, CONCURRENCY_RECHECK_MS, DEFAULT_LIMITS, dayTimeZone, mergeLimits } from '../../src/modules/limits/task-limits.ts';
import type { AdmissionCounters, LimitsPatch } from '../../src/modules/limits/task-limits.ts';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();
const NY = 'America/New_York';
const limits = (patch: LimitsPatch) => mergeLimits(DEFAULT_LIMITS, patch);
const counters = (c: Partial<AdmissionCounters> = {}): AdmissionCounters => ({ today: {}, dayTimezone: NY, running: 0, ...c });
const nyWeekdays = { timezone: NY, days: [1, 2, 3, 4, 5], start: '09:00', end: '17:00' };

const MONDAY_NOON = at('2025-01-13T17:00:00Z'); // 12:00 EST
const deferred = (r: ReturnType<typeof admission>) => {
  assert.equal(r.admit, false, `expected a deferral, got ${JSON.stringify(r)}`);
  return r as { admit: false; until: number; code: string; reason: string };
};

describe('admission', () => {
  it('admits calls and texts under the default limits', () => {
    assert.deepEqual(admission('call', MONDAY_NOON, DEFAULT_LIMITS, counters()), { admit: true });
    assert.deepEqual(admission('text', MONDAY_NOON, DEFAULT_LIMITS, counters({ running: 4 })), { admit: true });
  });

  it('always admits pings, whatever the limits and counters say', () => {
    const everything = limits({
      businessHours: { timezone: NY, days: [6], start: '09:00', end: '10:00' },
      daily: { calls: 0, texts: 0, tasks: 0 }, concurrencyPerRun: 1, cooldowns: { calls: 3600, texts: 3600 },
    });
    const full = counters({ running: 50, today: { calls: 9, texts: 9, tasks: 9 }, lastAttemptAt: MONDAY_NOON - 1000 });
    assert.deepEqual(admission('ping', MONDAY_NOON, everything, full), { admit: true });
    assert.equal(admission('call', MONDAY_NOON, everything, full).admit, false);
  });

  it('defers when the organization already runs concurrencyPerRun tasks, and looks again shortly', () => {
    const r = deferred(admission('call', MONDAY_NOON, DEFAULT_LIMITS, counters({ running: 5 })));
    assert.equal(r.code, 'concurrency');
    assert.equal(r.until, MONDAY_NOON + CONCURRENCY_RECHECK_MS);
    assert.equal(r.reason, 'concurrency limit of 5 running tasks reached');
    assert.deepEqual(admission('call', MONDAY_NOON, limits({ concurrencyPerRun: 6 }), counters({ running: 5 })), { admit: true });
  });

  it('defers a call to the next local midnight once the daily call cap is reached', () => {
    const capped = limits({ daily: { calls: 10 } });
    assert.deepEqual(admission('call', MONDAY_NOON, capped, counters({ today: { calls: 9 } })), { admit: true });
    const r = deferred(admission('call', MONDAY_NOON, capped, counters({ today: { calls: 10 } })));
    assert.equal(r.code, 'daily_cap');
    assert.equal(iso(r.until), '2025-01-14T05:00:00.000Z');
    assert.equal(r.reason, 'daily call limit of 10 reached (resets 2025-01-14T05:00:00.000Z)');
    // The call cap says nothing about texts.
    assert.deepEqual(admission('text', MONDAY_NOON, capped, counters({ today: { calls: 10 } })), { admit: true });
  });

  it('counts calls and texts together against the daily task cap', () => {
    const capped = limits({ daily: { tasks: 3 } });
    const r = deferred(admission('text', MONDAY_NOON, capped, counters({ today: { calls: 2, tasks: 3 } })));
    assert.equal(r.code, 'daily_cap');
    assert.equal(r.reason, 'daily task limit of 3 reached (resets 2025-01-14T05:00:00.000Z)');
    assert.equal(admission('call', MONDAY_NOON, capped, counters({ today: { tasks: 3 } })).admit, false);
  });

  it('rolls daily caps over at midnight in the organization’s zone, not in UTC', () => {
    const capped = limits({ daily: { texts: 1 } });
    const tokyo = deferred(admission('text', MONDAY_NOON, capped, counters({ today: { texts: 1 }, dayTimezone: 'Asia/Tokyo' })));
    assert.equal(iso(tokyo.until), '2025-01-14T15:00:00.000Z'); // already Tuesday 02:00 in Tokyo: Wednesday 00:00 JST
    const utc = deferred(admission('text', MONDAY_NOON, capped, counters({ today: { texts: 1 }, dayTimezone: 'UTC' })));
    assert.equal(iso(utc.until), '2025-01-14T00:00:00.000Z');
  });

  it('rolls over after a 23-hour day on the March DST change', () => {
    const capped = limits({ daily: { calls: 1 } });
    const r = deferred(admission('call', at('2024-03-10T12:00:00Z'), capped, counters({ today: { calls: 1 } })));
    assert.equal(iso(r.until), '2024-03-11T04:00:00.000Z'); // 00:00 EDT
  });

  it('with a cap of 0 defers to each next midnight, so a raised cap takes effect', () => {
    const r = deferred(admission('call', MONDAY_NOON, limits({ daily: { calls: 0 } }), counters()));
    assert.equal(r.code, 'daily_cap');
    assert.equal(iso(r.until), '2025-01-14T05:00:00.000Z');
  });

  it('waits out the cooldown since the last attempt to the same target', () => {
    const cool = limits({ cooldowns: { calls: 300 } });
    const last = MONDAY_NOON - 100_000;
    const r = deferred(admission('call', MONDAY_NOON, cool, counters({ lastAttemptAt: last })));
    assert.equal(r.code, 'cooldown');
    assert.equal(r.until, last + 300_000);
    assert.equal(r.reason, `cooldown of 300s for this target until ${iso(last + 300_000)}`);
    assert.deepEqual(admission('call', MONDAY_NOON, cool, counters({ lastAttemptAt: MONDAY_NOON - 300_000 })), { admit: true });
    assert.deepEqual(admission('call', MONDAY_NOON, cool, counters({ lastAttemptAt: null })), { admit: true });
    // A call cooldown does not hold back texts.
    assert.deepEqual(admission('text', MONDAY_NOON, cool, counters({ lastAttemptAt: last })), { admit: true });
  });

  it('defers outside business hours to the next opening', () => {
    const windowed = limits({ businessHours: nyWeekdays });
    const saturday = at('2025-01-18T15:00:00Z');
    const r = deferred(admission('call', saturday, windowed, counters()));
    assert.equal(r.code, 'business_hours');
    assert.equal(iso(r.until), '2025-01-20T14:00:00.000Z');
    assert.equal(r.reason, 'outside business hours (opens 2025-01-20T14:00:00.000Z)');
    assert.deepEqual(admission('call', MONDAY_NOON, windowed, counters()), { admit: true });
  });

  it('moves a daily-cap deferral on to the next opening when midnight falls outside the window', () => {
    // Friday 16:00 EST, cap reached: midnight is Saturday, closed; Monday 09:00 is the answer.
    const both = limits({ businessHours: nyWeekdays, daily: { calls: 5 } });
    const r = deferred(admission('call', at('2025-01-17T21:00:00Z'), both, counters({ today: { calls: 5 } })));
    assert.equal(iso(r.until), '2025-01-20T14:00:00.000Z');
    assert.equal(r.code, 'business_hours');
    assert.equal(r.reason, 'daily call limit of 5 reached (resets 2025-01-18T05:00:00.000Z)');
  });

  it('moves a cooldown that ends after closing to the next opening', () => {
    const both = limits({ businessHours: nyWeekdays, cooldowns: { texts: 3600 } });
    const now = at('2025-01-14T21:30:00Z'); // Tuesday 16:30
    const r = deferred(admission('text', now, both, counters({ lastAttemptAt: now - 60_000 })));
    assert.equal(iso(r.until), '2025-01-15T14:00:00.000Z'); // Wednesday 09:00
  });

  it('takes the latest of several blocking limits and lists them all', () => {
    const all = limits({ daily: { calls: 1 }, cooldowns: { calls: 7200 }, concurrencyPerRun: 2 });
    const last = MONDAY_NOON - 60_000;
    const r = deferred(admission('call', MONDAY_NOON, all, counters({ running: 2, today: { calls: 1 }, lastAttemptAt: last })));
    assert.equal(r.code, 'daily_cap'); // midnight (12 hours away) is later than the cooldown's end
    assert.equal(iso(r.until), '2025-01-14T05:00:00.000Z');
    assert.equal(r.reason, [
      'daily call limit of 1 reached (resets 2025-01-14T05:00:00.000Z)',
      `cooldown of 7200s for this target until ${iso(last + 7_200_000)}`,
      'concurrency limit of 2 running tasks reached',
    ].join('; '));
    const noCap = deferred(admission('call', MONDAY_NOON, limits({ cooldowns: { calls: 7200 }, concurrencyPerRun: 2 }),
      counters({ running: 2, lastAttemptAt: last })));
    assert.equal(noCap.code, 'cooldown');
    assert.equal(noCap.until, last + 7_200_000);
  });
});

describe('dayTimeZone', () => {
  it('uses the organization’s zone, then the business-hours zone, then UTC', () => {
    const windowed = limits({ businessHours: { ...nyWeekdays, timezone: 'Europe/Berlin' } });
    assert.equal(dayTimeZone('Asia/Tokyo', windowed), 'Asia/Tokyo');
    assert.equal(dayTimeZone(null, windowed), 'Europe/Berlin');
    assert.equal(dayTimeZone(undefined, DEFAULT_LIMITS), 'UTC');
    assert.equal(dayTimeZone('', DEFAULT_LIMITS), 'UTC');
  });
});
