// Wall-clock arithmetic in a time zone: local days, midnights and business-hour windows, across
// weekends and DST changes (America/New_York, Europe/Berlin, and zones with odd transitions).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isOpen, localDay, nextLocalMidnight, nextOpening } from '../../src/modules/limits/task-limits.ts';
import type { BusinessHours } from '../../src/modules/limits/task-limits.ts';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();
const HOUR = 3_600_000;
const NY = 'America/New_York';
const BERLIN = 'Europe/Berlin';
const nyWeekdays: BusinessHours = { timezone: NY, days: [1, 2, 3, 4, 5], start: '09:00', end: '17:00' };
const berlinWeekdays: BusinessHours = { timezone: BERLIN, days: [1, 2, 3, 4, 5], start: '09:00', end: '17:00' };

describe('localDay', () => {
  it('changes at local midnight, not at UTC midnight', () => {
    assert.equal(localDay(at('2025-01-15T04:59:59.999Z'), NY), '2025-01-14');
    assert.equal(localDay(at('2025-01-15T05:00:00Z'), NY), '2025-01-15');
    assert.equal(localDay(at('2025-01-15T23:30:00Z'), 'Asia/Tokyo'), '2025-01-16');
    assert.equal(localDay(at('2025-01-15T23:30:00Z'), 'UTC'), '2025-01-15');
    assert.equal(localDay(at('2025-01-15T09:59:59Z'), 'Pacific/Kiritimati'), '2025-01-15');
    assert.equal(localDay(at('2025-01-15T10:00:00Z'), 'Pacific/Kiritimati'), '2025-01-16');
  });

  it('follows the offset in force: midnight is 04:00Z in New York summer and 05:00Z in winter', () => {
    assert.equal(localDay(at('2024-07-04T03:59:59Z'), NY), '2024-07-03');
    assert.equal(localDay(at('2024-07-04T04:00:00Z'), NY), '2024-07-04');
    assert.equal(localDay(at('2024-03-31T21:59:59Z'), BERLIN), '2024-03-31');
    assert.equal(localDay(at('2024-03-31T22:00:00Z'), BERLIN), '2024-04-01');
  });

  it('refuses an unknown zone loudly instead of quietly using UTC', () => {
    assert.throws(() => localDay(Date.now(), 'Mars/Olympus_Mons'), RangeError);
    assert.throws(() => nextLocalMidnight(Date.now(), 'Not/AZone'), RangeError);
    assert.throws(() => isOpen(Date.now(), { ...nyWeekdays, timezone: 'Nowhere' }), RangeError);
  });
});

describe('nextLocalMidnight', () => {
  it('is the start of the next local day', () => {
    assert.equal(iso(nextLocalMidnight(at('2025-01-15T12:00:00Z'), NY)), '2025-01-16T05:00:00.000Z');
    assert.equal(iso(nextLocalMidnight(at('2025-01-15T12:00:00Z'), 'UTC')), '2025-01-16T00:00:00.000Z');
    assert.equal(iso(nextLocalMidnight(at('2025-01-15T12:00:00Z'), 'Asia/Kolkata')), '2025-01-15T18:30:00.000Z');
  });

  it('at local midnight itself is the following midnight, a day later', () => {
    assert.equal(iso(nextLocalMidnight(at('2025-01-16T05:00:00Z'), NY)), '2025-01-17T05:00:00.000Z');
    assert.equal(iso(nextLocalMidnight(at('2025-01-16T04:59:59.999Z'), NY)), '2025-01-16T05:00:00.000Z');
  });

  it('makes the spring-forward day 23 hours long in New York (March)', () => {
    const dayStart = at('2024-03-10T05:00:00Z'); // 00:00 EST
    assert.equal(iso(nextLocalMidnight(at('2024-03-09T17:00:00Z'), NY)), iso(dayStart));
    const next = nextLocalMidnight(dayStart, NY);
    assert.equal(iso(next), '2024-03-11T04:00:00.000Z'); // 00:00 EDT
    assert.equal(next - dayStart, 23 * HOUR);
  });

  it('makes the fall-back day 25 hours long in New York (November)', () => {
    const dayStart = at('2024-11-03T04:00:00Z'); // 00:00 EDT
    const next = nextLocalMidnight(at('2024-11-03T06:30:00Z'), NY); // 01:30 EST, the second one
    assert.equal(iso(next), '2024-11-04T05:00:00.000Z');
    assert.equal(next - dayStart, 25 * HOUR);
  });

  it('follows Europe/Berlin across both changes', () => {
    assert.equal(iso(nextLocalMidnight(at('2024-03-31T10:00:00Z'), BERLIN)), '2024-03-31T22:00:00.000Z');
    assert.equal(iso(nextLocalMidnight(at('2024-03-30T10:00:00Z'), BERLIN)), '2024-03-30T23:00:00.000Z');
    assert.equal(iso(nextLocalMidnight(at('2024-10-27T10:00:00Z'), BERLIN)), '2024-10-27T23:00:00.000Z');
    assert.equal(iso(nextLocalMidnight(at('2024-10-26T10:00:00Z'), BERLIN)), '2024-10-26T22:00:00.000Z');
  });

  it('begins the day at the first instant that exists where midnight itself is skipped', () => {
    // Chile moved clocks from 00:00 to 01:00 on 2024-09-08: that day begins at 01:00 -03.
    assert.equal(iso(nextLocalMidnight(at('2024-09-07T15:00:00Z'), 'America/Santiago')), '2024-09-08T04:00:00.000Z');
    assert.equal(localDay(at('2024-09-08T04:00:00Z'), 'America/Santiago'), '2024-09-08');
    // Samoa skipped 2011-12-30 entirely: the day after the 29th began as the 31st.
    const next = nextLocalMidnight(at('2011-12-29T12:00:00Z'), 'Pacific/Apia');
    assert.equal(iso(next), '2011-12-30T10:00:00.000Z');
    assert.equal(localDay(next, 'Pacific/Apia'), '2011-12-31');
    assert.equal(localDay(next - 1, 'Pacific/Apia'), '2011-12-29');
  });

  it('always lands on a later local day whose start it is, through a whole year in several zones', () => {
    for (const tz of [NY, BERLIN, 'Australia/Lord_Howe', 'America/Santiago', 'Asia/Kathmandu', 'UTC']) {
      for (let t = at('2024-01-01T00:17:00Z'); t < at('2025-01-01T00:00:00Z'); t += 7 * HOUR + 13 * 60_000) {
        const m = nextLocalMidnight(t, tz);
        assert.ok(m > t, `${tz} ${iso(t)}`);
        assert.ok(localDay(m, tz) > localDay(t, tz), `${tz} ${iso(t)} → ${iso(m)}`);
        assert.equal(localDay(m - 1, tz), localDay(t, tz), `${tz}: nothing between ${iso(t)} and ${iso(m)} is another day`);
      }
    }
  });
});

describe('isOpen', () => {
  it('is always open without business hours', () => {
    assert.equal(isOpen(at('2025-01-18T03:00:00Z'), null), true);
    assert.equal(isOpen(at('2025-01-18T03:00:00Z'), undefined), true);
  });

  it('opens at start and closes at end, in local time (winter, EST)', () => {
    assert.equal(isOpen(at('2025-01-13T13:59:59Z'), nyWeekdays), false); // Monday 08:59:59
    assert.equal(isOpen(at('2025-01-13T14:00:00Z'), nyWeekdays), true); // 09:00
    assert.equal(isOpen(at('2025-01-13T21:59:59Z'), nyWeekdays), true); // 16:59:59
    assert.equal(isOpen(at('2025-01-13T22:00:00Z'), nyWeekdays), false); // 17:00
  });

  it('moves the window with daylight saving time (summer, EDT)', () => {
    assert.equal(isOpen(at('2025-07-14T12:59:00Z'), nyWeekdays), false); // Monday 08:59 EDT
    assert.equal(isOpen(at('2025-07-14T13:00:00Z'), nyWeekdays), true); // 09:00 EDT
    assert.equal(isOpen(at('2025-07-14T21:00:00Z'), nyWeekdays), false); // 17:00 EDT
  });

  it('is closed on days not listed, judged by the local weekday', () => {
    assert.equal(isOpen(at('2025-01-18T15:00:00Z'), nyWeekdays), false); // Saturday 10:00
    assert.equal(isOpen(at('2025-01-19T15:00:00Z'), nyWeekdays), false); // Sunday
    // Saturday 01:00 UTC is still Friday 20:00 in New York: a Friday-evening window is open.
    const fridayEvening: BusinessHours = { timezone: NY, days: [5], start: '18:00', end: '22:00' };
    assert.equal(isOpen(at('2025-01-18T01:00:00Z'), fridayEvening), true);
  });

  it('keeps a window that ends at 24:00 open until the last moment of the day', () => {
    const late: BusinessHours = { timezone: BERLIN, days: [3], start: '20:00', end: '24:00' };
    assert.equal(isOpen(at('2025-01-15T22:59:59Z'), late), true); // Wednesday 23:59:59 CET
    assert.equal(isOpen(at('2025-01-15T23:00:00Z'), late), false); // Thursday 00:00
  });

  it('opens twice on the fall-back night for a window inside the repeated hour', () => {
    const repeated: BusinessHours = { timezone: NY, days: [0], start: '01:00', end: '01:45' };
    assert.equal(isOpen(at('2024-11-03T05:30:00Z'), repeated), true); // 01:30 EDT
    assert.equal(isOpen(at('2024-11-03T05:50:00Z'), repeated), false); // 01:50 EDT
    assert.equal(isOpen(at('2024-11-03T06:30:00Z'), repeated), true); // 01:30 EST
  });
});

describe('nextOpening', () => {
  it('is now when the window is open or there is none', () => {
    const now = at('2025-01-13T15:00:00Z');
    assert.equal(nextOpening(now, nyWeekdays), now);
    assert.equal(nextOpening(at('2025-01-18T03:00:00Z'), null), at('2025-01-18T03:00:00Z'));
  });

  it('is later the same day before the window opens', () => {
    assert.equal(iso(nextOpening(at('2025-01-13T11:00:00Z'), nyWeekdays)), '2025-01-13T14:00:00.000Z');
  });

  it('skips the weekend: Friday evening and Saturday both open on Monday', () => {
    assert.equal(iso(nextOpening(at('2025-01-17T22:00:00Z'), nyWeekdays)), '2025-01-20T14:00:00.000Z');
    assert.equal(iso(nextOpening(at('2025-01-18T16:00:00Z'), nyWeekdays)), '2025-01-20T14:00:00.000Z');
  });

  it('opens at 09:00 local after the March change in New York, an hour earlier in UTC', () => {
    // Friday 2024-03-08 18:00 EST; the clocks go forward on Sunday; Monday 09:00 is EDT.
    assert.equal(iso(nextOpening(at('2024-03-08T23:00:00Z'), nyWeekdays)), '2024-03-11T13:00:00.000Z');
  });

  it('opens at 09:00 local after the November change in New York, an hour later in UTC', () => {
    assert.equal(iso(nextOpening(at('2024-11-01T22:00:00Z'), nyWeekdays)), '2024-11-04T14:00:00.000Z');
  });

  it('opens at 09:00 local after both changes in Berlin', () => {
    // Saturday 2024-03-30 (CET) → Monday 2024-04-01 09:00 CEST.
    assert.equal(iso(nextOpening(at('2024-03-30T12:00:00Z'), berlinWeekdays)), '2024-04-01T07:00:00.000Z');
    // Friday 2024-10-25 18:00 CEST → Monday 2024-10-28 09:00 CET.
    assert.equal(iso(nextOpening(at('2024-10-25T16:00:00Z'), berlinWeekdays)), '2024-10-28T08:00:00.000Z');
  });

  it('opens at the end of the gap when the opening time is skipped by the clocks going forward', () => {
    const early: BusinessHours = { timezone: NY, days: [0, 1, 2, 3, 4, 5, 6], start: '02:30', end: '04:00' };
    assert.equal(iso(nextOpening(at('2024-03-10T05:00:00Z'), early)), '2024-03-10T07:00:00.000Z'); // 03:00 EDT
  });

  it('does not open on a day whose whole window falls in the gap', () => {
    const gap: BusinessHours = { timezone: NY, days: [0, 1], start: '02:00', end: '03:00' };
    // Sunday 2024-03-10 02:00–03:00 never happens; Monday's 02:00 EDT is the next opening.
    assert.equal(iso(nextOpening(at('2024-03-10T05:00:00Z'), gap)), '2024-03-11T06:00:00.000Z');
  });

  it('finds the second opening of a window inside the repeated fall-back hour', () => {
    const repeated: BusinessHours = { timezone: NY, days: [0], start: '01:00', end: '01:45' };
    assert.equal(iso(nextOpening(at('2024-11-03T05:50:00Z'), repeated)), '2024-11-03T06:00:00.000Z'); // 01:00 EST
    assert.equal(iso(nextOpening(at('2024-11-03T06:50:00Z'), repeated)), '2024-11-10T06:00:00.000Z'); // next Sunday, EST
  });

  it('waits a whole week for a one-day window that just closed', () => {
    const saturday: BusinessHours = { timezone: BERLIN, days: [6], start: '10:00', end: '12:00' };
    assert.equal(iso(nextOpening(at('2025-01-18T11:00:00Z'), saturday)), '2025-01-25T09:00:00.000Z');
  });

  it('always returns an open instant with nothing open before it, through a year of samples', () => {
    const windows: BusinessHours[] = [
      nyWeekdays, berlinWeekdays,
      { timezone: 'Australia/Lord_Howe', days: [0, 6], start: '01:45', end: '02:15' },
      { timezone: 'America/Santiago', days: [0, 3], start: '00:00', end: '00:30' },
      { timezone: 'Asia/Kathmandu', days: [2], start: '23:15', end: '24:00' },
    ];
    const STEP = 15 * 60_000;
    for (const hours of windows) {
      for (let now = at('2024-01-01T03:07:00Z'); now < at('2025-01-01T00:00:00Z'); now += 61 * HOUR + 17 * 60_000) {
        const open = nextOpening(now, hours);
        assert.ok(open >= now, `${hours.timezone} ${iso(now)}`);
        assert.equal(isOpen(open, hours), true, `${hours.timezone}: opening ${iso(open)} from ${iso(now)} is open`);
        if (open > now) {
          assert.equal(isOpen(open - 1000, hours), false, `${hours.timezone}: ${iso(open)} is where the window opens`);
          for (let t = now; t < open; t += STEP) assert.equal(isOpen(t, hours), false, `${hours.timezone}: ${iso(t)} before ${iso(open)}`);
        }
      }
    }
  });
});
