// validateLimits and mergeLimits: every refusal names its field; updates merge as documented.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_LIMITS, mergeLimits, outcomeRetryDelayMs, validateLimits, validTimeZone } from '../../src/modules/limits/task-limits.ts';
import type { LimitsPatch } from '../../src/modules/limits/task-limits.ts';

const HOURS = { timezone: 'America/Chicago', days: [1, 2, 3, 4, 5], start: '09:00', end: '17:00' };

const valid = (input: unknown): LimitsPatch => {
  const r = validateLimits(input);
  assert.equal(r.ok, true, `expected ${JSON.stringify(input)} to be valid, got ${JSON.stringify(r)}`);
  return (r as { limits: LimitsPatch }).limits;
};
const refused = (input: unknown): string => {
  const r = validateLimits(input);
  assert.equal(r.ok, false, `expected ${JSON.stringify(input)} to be refused`);
  return (r as { message: string }).message;
};
const hours = (patch: Record<string, unknown>) => refused({ businessHours: { ...HOURS, ...patch } });

describe('validateLimits: the whole', () => {
  it('refuses anything that is not an object', () => {
    for (const input of [null, undefined, [], 'limits', 5]) assert.equal(refused(input), 'limits must be an object');
  });

  it('answers an empty update for an empty object, and ignores unknown top-level keys', () => {
    assert.deepEqual(valid({}), {});
    assert.deepEqual(valid({ success: true, somethingElse: 1 }), {});
  });

  it('normalizes a complete update: days sorted, zone in canonical case, digit strings read as integers', () => {
    assert.deepEqual(valid({
      businessHours: { timezone: 'america/chicago', days: [5, 1, '3'], start: '08:30', end: '24:00' },
      daily: { calls: 100, texts: '200', tasks: 0 },
      concurrencyPerRun: '10',
      cooldowns: { calls: 86_400, texts: 300 },
    }), {
      businessHours: { timezone: 'America/Chicago', days: [1, 3, 5], start: '08:30', end: '24:00' },
      daily: { calls: 100, texts: 200, tasks: 0 },
      concurrencyPerRun: 10,
      cooldowns: { calls: 86_400, texts: 300 },
    });
  });

  it('keeps nulls, which remove a limit, and leaves out what was not sent', () => {
    assert.deepEqual(valid({ businessHours: null, daily: { calls: null }, cooldowns: null, concurrencyPerRun: null }),
      { businessHours: null, daily: { calls: null }, cooldowns: null, concurrencyPerRun: null });
    assert.deepEqual(valid({ daily: { texts: 5 } }), { daily: { texts: 5 } });
  });
});

describe('validateLimits: businessHours', () => {
  it('must be an object or null', () => {
    assert.equal(refused({ businessHours: '9-5' }), 'businessHours must be an object or null');
    assert.equal(refused({ businessHours: [HOURS] }), 'businessHours must be an object or null');
  });

  it('requires every one of timezone, days, start and end', () => {
    for (const key of ['timezone', 'days', 'start', 'end']) {
      const partial: Record<string, unknown> = { ...HOURS };
      delete partial[key];
      assert.equal(refused({ businessHours: partial }), `businessHours.${key} is required`);
      assert.equal(hours({ [key]: null }), `businessHours.${key} is required`);
    }
  });

  it('refuses unknown keys, so a typo does not pass as a setting', () => {
    assert.equal(hours({ timeZone: 'UTC' }), 'businessHours.timeZone is not allowed');
  });

  it('requires a real IANA time zone', () => {
    assert.equal(hours({ timezone: 'Mars/Olympus_Mons' }), "businessHours.timezone 'Mars/Olympus_Mons' is not an IANA time zone");
    assert.equal(hours({ timezone: '+05:00' }), "businessHours.timezone '+05:00' is not an IANA time zone");
    assert.equal(hours({ timezone: 'local' }), "businessHours.timezone 'local' is not an IANA time zone");
    assert.equal(hours({ timezone: '' }), 'businessHours.timezone must be an IANA time zone name, such as America/New_York');
    assert.equal(hours({ timezone: 5 }), 'businessHours.timezone must be an IANA time zone name, such as America/New_York');
  });

  it('needs days as a non-empty array of unique integers 0 to 6', () => {
    assert.equal(hours({ days: 'weekdays' }), 'businessHours.days must be an array of days (0 = Sunday … 6 = Saturday)');
    assert.equal(hours({ days: [] }), 'businessHours.days must have at least one day');
    assert.equal(hours({ days: [1, 7] }), 'businessHours.days[1] must be an integer from 0 (Sunday) to 6 (Saturday)');
    assert.equal(hours({ days: [-1] }), 'businessHours.days[0] must be an integer from 0 (Sunday) to 6 (Saturday)');
    assert.equal(hours({ days: [1.5] }), 'businessHours.days[0] must be an integer from 0 (Sunday) to 6 (Saturday)');
    assert.equal(hours({ days: ['Mon'] }), 'businessHours.days[0] must be an integer from 0 (Sunday) to 6 (Saturday)');
    assert.equal(hours({ days: [1, 2, 2] }), 'businessHours.days must not repeat a day (2 appears twice)');
  });

  it('needs start as HH:MM from 00:00 to 23:59', () => {
    const msg = 'businessHours.start must be a time as HH:MM, from 00:00 to 23:59';
    for (const start of ['9:00', '24:00', '12:60', '25:00', 'noon', '09:00:00', 900]) assert.equal(hours({ start }), msg);
    assert.equal(valid({ businessHours: { ...HOURS, start: '00:00' } }).businessHours?.start, '00:00');
  });

  it('needs end as HH:MM, where 24:00 is the end of the day', () => {
    const msg = 'businessHours.end must be a time as HH:MM, from 00:01 to 24:00';
    for (const end of ['5pm', '24:01', '17:5', '']) assert.equal(hours({ end }), msg);
    assert.equal(valid({ businessHours: { ...HOURS, end: '23:59' } }).businessHours?.end, '23:59');
  });

  it('refuses an empty window and one that crosses midnight', () => {
    const msg = (start: string) => `businessHours.end must be after businessHours.start (${start}); ` +
      'windows that cross midnight are not supported, use 24:00 as the end of a day';
    assert.equal(hours({ start: '09:00', end: '09:00' }), msg('09:00'));
    assert.equal(hours({ start: '22:00', end: '06:00' }), msg('22:00'));
    assert.equal(hours({ start: '00:00', end: '00:00' }), msg('00:00'));
  });
});

describe('validateLimits: daily, concurrencyPerRun, cooldowns', () => {
  it('needs daily as an object of known caps', () => {
    assert.equal(refused({ daily: 100 }), 'daily must be an object or null');
    assert.equal(refused({ daily: { call: 5 } }), 'daily.call is not allowed (known: calls, texts, tasks)');
  });

  it('needs each daily cap to be a non-negative integer up to a billion, or null', () => {
    assert.equal(refused({ daily: { calls: -1 } }), 'daily.calls must be a non-negative integer or null');
    assert.equal(refused({ daily: { texts: 2.5 } }), 'daily.texts must be a non-negative integer or null');
    assert.equal(refused({ daily: { tasks: 'many' } }), 'daily.tasks must be a non-negative integer or null');
    assert.equal(refused({ daily: { tasks: true } }), 'daily.tasks must be a non-negative integer or null');
    assert.equal(refused({ daily: { calls: 1_000_000_001 } }), 'daily.calls must be at most 1000000000');
    assert.deepEqual(valid({ daily: { calls: 1_000_000_000 } }), { daily: { calls: 1_000_000_000 } });
  });

  it('needs concurrencyPerRun from 1 to 1000', () => {
    const msg = 'concurrencyPerRun must be an integer from 1 to 1000';
    for (const c of [0, -3, 1001, 2.5, 'ten', {}]) assert.equal(refused({ concurrencyPerRun: c }), msg);
    assert.deepEqual(valid({ concurrencyPerRun: 1 }), { concurrencyPerRun: 1 });
    assert.deepEqual(valid({ concurrencyPerRun: 1000 }), { concurrencyPerRun: 1000 });
  });

  it('needs cooldowns as calls and texts in seconds, up to a year', () => {
    assert.equal(refused({ cooldowns: 'short' }), 'cooldowns must be an object or null');
    assert.equal(refused({ cooldowns: { tasks: 5 } }), 'cooldowns.tasks is not allowed (known: calls, texts)');
    assert.equal(refused({ cooldowns: { calls: -5 } }), 'cooldowns.calls must be a non-negative integer (seconds) or null');
    assert.equal(refused({ cooldowns: { texts: 0.5 } }), 'cooldowns.texts must be a non-negative integer (seconds) or null');
    assert.equal(refused({ cooldowns: { calls: 31_536_001 } }), 'cooldowns.calls must be at most 31536000 seconds (365 days)');
  });
});

describe('validTimeZone', () => {
  it('gives the canonical spelling of a zone written in another case', () => {
    assert.deepEqual(validTimeZone('america/new_york'), { ok: true, value: 'America/New_York' });
    assert.deepEqual(validTimeZone('utc'), { ok: true, value: 'UTC' });
  });

  it('keeps an alias as written instead of the runtime’s older canonical name', () => {
    assert.deepEqual(validTimeZone('Asia/Kolkata'), { ok: true, value: 'Asia/Kolkata' });
    assert.deepEqual(validTimeZone('Europe/Kyiv'), { ok: true, value: 'Europe/Kyiv' });
    assert.deepEqual(validTimeZone('US/Eastern'), { ok: true, value: 'US/Eastern' });
  });
});

describe('mergeLimits', () => {
  it('starts from the defaults: no window, no caps, concurrency 5, no cooldowns', () => {
    assert.deepEqual(DEFAULT_LIMITS, {
      businessHours: null, daily: { calls: null, texts: null, tasks: null }, concurrencyPerRun: 5, cooldowns: { calls: null, texts: null },
      retries: { busy: null, noAnswer: null, delaySec: null }, callingWindow: null,
    });
    assert.ok(Object.isFrozen(DEFAULT_LIMITS) && Object.isFrozen(DEFAULT_LIMITS.daily));
  });

  it('applies nothing for an empty update, and returns a copy', () => {
    const merged = mergeLimits(DEFAULT_LIMITS, {});
    assert.deepEqual(merged, DEFAULT_LIMITS);
    merged.daily.calls = 3;
    assert.equal(DEFAULT_LIMITS.daily.calls, null);
  });

  it('merges daily caps and cooldowns key by key; null removes one, or all when given for the whole', () => {
    const a = mergeLimits(DEFAULT_LIMITS, { daily: { calls: 10, texts: 20 }, cooldowns: { calls: 60 } });
    const b = mergeLimits(a, { daily: { texts: null, tasks: 30 }, cooldowns: { texts: 5 } });
    assert.deepEqual(b.daily, { calls: 10, texts: null, tasks: 30 });
    assert.deepEqual(b.cooldowns, { calls: 60, texts: 5 });
    const c = mergeLimits(b, { daily: null, cooldowns: null });
    assert.deepEqual(c.daily, { calls: null, texts: null, tasks: null });
    assert.deepEqual(c.cooldowns, { calls: null, texts: null });
  });

  it('replaces business hours as a whole, and removes them with null', () => {
    const a = mergeLimits(DEFAULT_LIMITS, { businessHours: HOURS });
    const b = mergeLimits(a, { businessHours: { timezone: 'Europe/Berlin', days: [6], start: '10:00', end: '12:00' } });
    assert.deepEqual(b.businessHours, { timezone: 'Europe/Berlin', days: [6], start: '10:00', end: '12:00' });
    assert.deepEqual(a.businessHours, HOURS, 'the earlier limits are not changed');
    assert.equal(mergeLimits(b, { businessHours: null }).businessHours, null);
    assert.deepEqual(mergeLimits(b, { daily: { calls: 1 } }).businessHours, b.businessHours, 'untouched when not sent');
  });

  it('merges outcome retries key by key and checks their bounds', () => {
    const r = validateLimits({ retries: { busy: 2, delaySec: '60' } });
    assert.equal(r.ok, true);
    const a = mergeLimits(DEFAULT_LIMITS, (r as { limits: LimitsPatch }).limits);
    assert.deepEqual(a.retries, { busy: 2, noAnswer: null, delaySec: 60 });
    assert.deepEqual(mergeLimits(a, { retries: { busy: null, noAnswer: 1 } }).retries, { busy: null, noAnswer: 1, delaySec: 60 });
    assert.deepEqual(mergeLimits(a, { retries: null }).retries, { busy: null, noAnswer: null, delaySec: null });
    const refused = (v: unknown) => { const x = validateLimits({ retries: v }); return x.ok ? 'accepted' : x.message; };
    assert.equal(refused({ busy: 6 }), 'retries.busy must be at most 5 further attempts');
    assert.equal(refused({ noAnswer: -1 }), 'retries.noAnswer must be a non-negative integer or null');
    assert.equal(refused({ delaySec: 86_401 }), 'retries.delaySec must be at most 86400 seconds (one day)');
    assert.equal(refused({ failed: 1 }), 'retries.failed is not allowed (known: busy, noAnswer, delaySec)');
  });

  it('after a busy or unanswered call, asks for another attempt only while retries allow it', () => {
    const limits = mergeLimits(DEFAULT_LIMITS, { retries: { busy: 2, noAnswer: 0 } });
    assert.equal(outcomeRetryDelayMs(DEFAULT_LIMITS, 'busy', 1), null, 'by default busy ends the task');
    assert.equal(outcomeRetryDelayMs(limits, 'busy', 1), 300_000);
    assert.equal(outcomeRetryDelayMs(limits, 'busy', 2), 300_000);
    assert.equal(outcomeRetryDelayMs(limits, 'busy', 3), null, 'two further attempts, then the outcome stands');
    assert.equal(outcomeRetryDelayMs(limits, 'no-answer', 1), null);
    assert.equal(outcomeRetryDelayMs(limits, 'completed', 1), null);
  });

  it('sets concurrency, and restores the default with null', () => {
    const a = mergeLimits(DEFAULT_LIMITS, { concurrencyPerRun: 40 });
    assert.equal(a.concurrencyPerRun, 40);
    assert.equal(mergeLimits(a, { concurrencyPerRun: null }).concurrencyPerRun, 5);
  });

  it('turns a validated update into the limits in force', () => {
    const r = validateLimits({ daily: { calls: '7' }, businessHours: { ...HOURS, days: [5, 1] } });
    assert.equal(r.ok, true);
    const merged = mergeLimits(DEFAULT_LIMITS, (r as { limits: LimitsPatch }).limits);
    assert.deepEqual(merged, {
      businessHours: { ...HOURS, days: [1, 5] }, daily: { calls: 7, texts: null, tasks: null }, concurrencyPerRun: 5,
      cooldowns: { calls: null, texts: null }, retries: { busy: null, noAnswer: null, delaySec: null }, callingWindow: null,
    });
  });
});
