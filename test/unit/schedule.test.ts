// normalizeScheduledFor, normalizeSpacing and staggered: how a submitted time becomes run_at.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { normalizeScheduledFor, normalizeSpacing, staggered, PAST_GRACE_MS } from '../../src/modules/tasks/schedule.ts';

const NOW = Date.parse('2025-01-15T12:00:00.250Z'); // not on a whole second, as a real clock
const NOW_SEC = Math.floor(NOW / 1000);

const message = (value: unknown, field?: string) => {
  const r = normalizeScheduledFor(value, NOW, field);
  assert.equal(r.ok, false, `expected ${JSON.stringify(value)} to be refused, got ${JSON.stringify(r)}`);
  return (r as { message: string }).message;
};

describe('normalizeScheduledFor', () => {
  it('runs now and records no schedule when scheduledFor is absent or null', () => {
    assert.deepEqual(normalizeScheduledFor(undefined, NOW), { ok: true, runAtMs: NOW, scheduledForMs: null });
    assert.deepEqual(normalizeScheduledFor(null, NOW), { ok: true, runAtMs: NOW, scheduledForMs: null });
  });

  it('reads 0 as not scheduled and says so in a note', () => {
    assert.deepEqual(normalizeScheduledFor(0, NOW), {
      ok: true, runAtMs: NOW, scheduledForMs: null, note: 'scheduledFor 0 is read as "not scheduled": the task runs now',
    });
  });

  it('schedules a future time given in unix seconds', () => {
    const at = NOW_SEC + 3600;
    assert.deepEqual(normalizeScheduledFor(at, NOW), { ok: true, runAtMs: at * 1000, scheduledForMs: at * 1000 });
  });

  it('reads a string of digits as the number it spells', () => {
    const at = NOW_SEC + 60;
    assert.deepEqual(normalizeScheduledFor(String(at), NOW), { ok: true, runAtMs: at * 1000, scheduledForMs: at * 1000 });
  });

  it('refuses a 13-digit value as milliseconds, saying to divide by 1000', () => {
    const ms = (NOW_SEC + 3600) * 1000;
    assert.equal(message(ms),
      `scheduledFor ${ms} looks like milliseconds (13 digits); scheduledFor is unix seconds, so divide by 1000 (${NOW_SEC + 3600})`);
    assert.match(message(1e12), /looks like milliseconds \(13 digits\)/);
    // Microseconds are refused the same way rather than read as a date in the year 50 000.
    assert.match(message(1_736_942_400_000_000), /looks like milliseconds \(16 digits\)/);
  });

  it('accepts the largest 12-digit value that is still a date, and refuses the ones after it', () => {
    const last = 253_402_300_799;
    assert.deepEqual(normalizeScheduledFor(last, NOW), { ok: true, runAtMs: last * 1000, scheduledForMs: last * 1000 });
    assert.equal(message(last + 1), 'scheduledFor 253402300800 is too far in the future (after 9999-12-31T23:59:59Z)');
    assert.equal(message(999_999_999_999), 'scheduledFor 999999999999 is too far in the future (after 9999-12-31T23:59:59Z)');
  });

  it('refuses a time in the past beyond the grace, naming the field, the time and how long ago', () => {
    assert.equal(message(NOW_SEC - 3 * 86_400),
      `scheduledFor ${NOW_SEC - 3 * 86_400} is in the past (2025-01-12T12:00:00Z, 3 days ago); ` +
      'send a future time in unix seconds, or omit scheduledFor to run now');
    assert.match(message(NOW_SEC - 600), /is in the past \(2025-01-15T11:50:00Z, 10 minutes ago\)/);
    assert.match(message(NOW_SEC - 5 * 3600), /5 hours ago/);
    assert.match(message(1), /is in the past \(1970-01-01T00:00:01Z, \d+ days ago\)/);
  });

  it('runs a time within the grace now, keeping the requested time and adding a note', () => {
    const at = NOW_SEC - 42;
    assert.deepEqual(normalizeScheduledFor(at, NOW), {
      ok: true, runAtMs: NOW, scheduledForMs: at * 1000, note: 'scheduledFor was 42 seconds in the past: the task runs now',
    });
  });

  it('puts the grace boundary at exactly five minutes', () => {
    assert.equal(PAST_GRACE_MS, 300_000);
    const edgeNow = 1_736_942_400_000; // a whole second, so the boundary is exact
    const atEdge = normalizeScheduledFor(edgeNow / 1000 - 300, edgeNow);
    assert.equal(atEdge.ok, true);
    assert.equal((atEdge as { runAtMs: number }).runAtMs, edgeNow);
    const beyond = normalizeScheduledFor(edgeNow / 1000 - 301, edgeNow);
    assert.equal(beyond.ok, false);
  });

  it('treats the current second as due now, not as a past schedule', () => {
    // NOW is 250 ms into NOW_SEC: the value is a quarter second "late", well inside the grace.
    const r = normalizeScheduledFor(NOW_SEC, NOW);
    assert.equal(r.ok, true);
    assert.equal((r as { runAtMs: number }).runAtMs, NOW);
  });

  it('refuses negatives, fractions, non-finite numbers and values that are not integers', () => {
    assert.equal(message(-1), 'scheduledFor must not be negative (unix seconds)');
    assert.equal(message('-5'), 'scheduledFor must not be negative (unix seconds)');
    assert.equal(message(NOW_SEC + 0.5), 'scheduledFor must be an integer (unix seconds)');
    assert.equal(message('2025-01-16T00:00:00Z'), 'scheduledFor must be an integer (unix seconds)');
    assert.equal(message('tomorrow'), 'scheduledFor must be an integer (unix seconds)');
    assert.equal(message(''), 'scheduledFor must be an integer (unix seconds)');
    assert.equal(message(true), 'scheduledFor must be an integer (unix seconds)');
    assert.equal(message({}), 'scheduledFor must be an integer (unix seconds)');
    assert.equal(message(Number.NaN), 'scheduledFor must be a finite number');
    assert.equal(message(Number.POSITIVE_INFINITY), 'scheduledFor must be a finite number');
  });

  it('names the field it was given, for batch items', () => {
    assert.equal(message(-1, 'targets[2].scheduledFor'), 'targets[2].scheduledFor must not be negative (unix seconds)');
    assert.match(message(1e12, 'targets[0].scheduledFor'), /^targets\[0\]\.scheduledFor 1000000000000 looks like milliseconds/);
  });
});

describe('normalizeSpacing', () => {
  const refused = (v: unknown) => {
    const r = normalizeSpacing(v);
    assert.equal(r.ok, false);
    return (r as { message: string }).message;
  };

  it('means no stagger when absent, and reads integers and digit strings', () => {
    assert.deepEqual(normalizeSpacing(undefined), { ok: true, spacingSec: 0 });
    assert.deepEqual(normalizeSpacing(null), { ok: true, spacingSec: 0 });
    assert.deepEqual(normalizeSpacing(30), { ok: true, spacingSec: 30 });
    assert.deepEqual(normalizeSpacing('15'), { ok: true, spacingSec: 15 });
    assert.deepEqual(normalizeSpacing(86_400), { ok: true, spacingSec: 86_400 });
  });

  it('refuses negatives, fractions, text and more than a day', () => {
    assert.equal(refused(-1), 'scheduleSpacingSec must not be negative');
    assert.equal(refused(1.5), 'scheduleSpacingSec must be an integer (seconds)');
    assert.equal(refused('soon'), 'scheduleSpacingSec must be an integer (seconds)');
    assert.equal(refused(86_401), 'scheduleSpacingSec must be at most 86400 (one day)');
  });
});

describe('staggered', () => {
  const unscheduled = { runAtMs: NOW, scheduledForMs: null };

  it('leaves the first item of a batch where the batch starts', () => {
    assert.deepEqual(staggered(unscheduled, 0, 30), unscheduled);
  });

  it('moves item n later by n times the spacing, and records it as scheduled', () => {
    assert.deepEqual(staggered(unscheduled, 3, 30), { runAtMs: NOW + 90_000, scheduledForMs: NOW + 90_000 });
  });

  it('staggers from a requested time when the batch was scheduled', () => {
    const base = { runAtMs: 1_800_000_000_000, scheduledForMs: 1_800_000_000_000 };
    assert.deepEqual(staggered(base, 2, 15), { runAtMs: 1_800_000_030_000, scheduledForMs: 1_800_000_030_000 });
  });

  it('changes nothing with a spacing of 0, and does not alter its input', () => {
    const base = { runAtMs: NOW, scheduledForMs: null };
    assert.deepEqual(staggered(base, 7, 0), base);
    staggered(base, 2, 10);
    assert.deepEqual(base, { runAtMs: NOW, scheduledForMs: null });
  });

  it('throws on a negative or fractional index or spacing: those are programming errors', () => {
    assert.throws(() => staggered(unscheduled, -1, 10), RangeError);
    assert.throws(() => staggered(unscheduled, 1.5, 10), RangeError);
    assert.throws(() => staggered(unscheduled, 1, -10), RangeError);
  });
});
