// normalizePhone: what passes as a dialable E.164 number and how refusals read.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { invalidPhoneMessage, normalizePhone } from '../../src/lib/phone.ts';

const accepted = (input: unknown, country?: string) => {
  const r = normalizePhone(input, country);
  assert.equal(r.ok, true, `expected ${JSON.stringify(input)} to be accepted, got ${JSON.stringify(r)}`);
  return r as { ok: true; e164: string; country?: string };
};
const reason = (input: unknown, country?: string) => {
  const r = normalizePhone(input, country);
  assert.equal(r.ok, false, `expected ${JSON.stringify(input)} to be refused, got ${JSON.stringify(r)}`);
  return (r as { ok: false; reason: string }).reason;
};

describe('normalizePhone', () => {
  it('keeps a valid E.164 number as it is and names its country', () => {
    assert.deepEqual(normalizePhone('+14155552671'), { ok: true, e164: '+14155552671', country: 'US', assigned: true });
    assert.deepEqual(normalizePhone('+491701234567'), { ok: true, e164: '+491701234567', country: 'DE', assigned: true });
  });

  it('drops spaces, dashes, dots, parentheses and surrounding whitespace', () => {
    assert.equal(accepted('+1 (415) 555-2671').e164, '+14155552671');
    assert.equal(accepted('  +44 20 7946 0958 ').e164, '+442079460958');
    assert.equal(accepted('+33.6.12.34.56.78').e164, '+33612345678');
    assert.equal(accepted('+1\u00a0415\u00a0555\u00a02671').e164, '+14155552671');
  });

  it('reads a leading 00 as the international +', () => {
    assert.equal(accepted('0044 20 7946 0958').e164, '+442079460958');
    assert.equal(accepted('001-415-555-2671').e164, '+14155552671');
  });

  it('reads a national number in the default country, in any letter case', () => {
    assert.equal(accepted('(415) 555-2671', 'US').e164, '+14155552671');
    assert.equal(accepted('020 7946 0958', 'GB').e164, '+442079460958');
    assert.equal(accepted('030 123456', 'de').e164, '+4930123456');
    // An international number ignores the default country.
    assert.equal(accepted('+442079460958', 'US').e164, '+442079460958');
  });

  it('refuses a national number when no default country says where it is', () => {
    assert.equal(reason('415 555 2671'), 'no country code; use the international format +<country code><number>');
  });

  it('refuses an unknown default country instead of throwing', () => {
    assert.equal(reason('415 555 2671', 'XX'), "unknown default country 'XX'");
  });

  it('refuses letters: vanity numbers and extensions are not guessed at', () => {
    assert.equal(reason('+1 800 FLOWERS'), 'contains letters');
    assert.equal(reason('+1 415 555 2671 ext 5'), 'contains letters');
    assert.equal(reason('abc'), 'contains letters');
    assert.equal(reason('tel:+14155552671'), 'contains letters');
  });

  it('refuses other characters and a + anywhere but the start', () => {
    const other = 'contains characters other than digits, spaces, dashes, dots, parentheses and a leading +';
    assert.equal(reason('+1#4155552671'), other);
    assert.equal(reason('1+4155552671'), other);
    assert.equal(reason('++14155552671'), other);
    assert.equal(reason('+1/415/555/2671'), other);
  });

  it('says when a number is too short or too long', () => {
    assert.equal(reason('+1555'), 'too short');
    assert.equal(reason('+1 415'), 'too short');
    assert.equal(reason('+1555123456789012'), 'too long');
    assert.equal(reason('+1' + '4'.repeat(70)), 'too long');
  });

  it('accepts a possible number that no numbering plan assigns, and says it is not assigned', () => {
    // The contract's own example number is in the fictional 555 range: possible, not assigned.
    assert.deepEqual(normalizePhone('+15551234567'), { ok: true, e164: '+15551234567', assigned: false });
    assert.deepEqual(normalizePhone('+1 (555) 000-0000'), { ok: true, e164: '+15550000000', assigned: false });
    assert.equal(reason('+44 1234'), 'too short');
    // Not even possible: the contract's other example has one digit too few for +1.
    assert.equal(reason('+1234567890'), 'too short');
  });

  it('refuses an unknown country calling code', () => {
    assert.equal(reason('+999 123456789'), 'unknown country code');
  });

  it('refuses empty input, a bare + and values that are not strings', () => {
    assert.equal(reason(''), 'empty');
    assert.equal(reason('   '), 'empty');
    assert.equal(reason('+'), 'not a number');
    assert.equal(reason('00'), 'not a number');
    assert.equal(reason('( - )'), 'not a number');
    assert.equal(reason(14155552671), 'not a string');
    assert.equal(reason(null), 'not a string');
    assert.equal(reason(undefined), 'not a string');
  });
});

describe('invalidPhoneMessage', () => {
  it('reads as one sentence naming the field, the value and the reason', () => {
    const r = normalizePhone('+1555');
    assert.equal(r.ok, false);
    assert.equal(invalidPhoneMessage('target', '+1555', (r as { reason: string }).reason),
      "target '+1555' is not a valid phone number (too short)");
  });

  it('shows values that are not strings without quotes, and cuts very long input', () => {
    assert.equal(invalidPhoneMessage('targets[1]', 42, 'not a string'), 'targets[1] 42 is not a valid phone number (not a string)');
    assert.equal(invalidPhoneMessage('target', undefined, 'not a string'), 'target undefined is not a valid phone number (not a string)');
    const long = '1'.repeat(200);
    assert.equal(invalidPhoneMessage('target', long, 'too long'), `target '${'1'.repeat(64)}…' is not a valid phone number (too long)`);
  });
});
