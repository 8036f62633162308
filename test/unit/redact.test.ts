// The redaction of personal data (src/modules/compliance/redact.ts): each placeholder for the forms
// it claims, what must stay (numbers that are not personal data), and a message's data with our
// own ids kept. Its precision and recall on a generated set: bench/redaction.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { luhn, redactData, redactPersonalData as r } from '../../src/modules/compliance/redact.ts';

describe('redaction of personal data', () => {
  it('Luhn\'s check', () => {
    assert.equal(luhn('4111111111111111'), true);
    assert.equal(luhn('4111111111111112'), false);
    assert.equal(luhn('378282246310005'), true);
  });

  it('replaces each kind by its placeholder, in the forms it claims', () => {
    assert.equal(r('card 4111 1111 1111 1111, ok'), 'card [card], ok');
    assert.equal(r('amex 3782-822463-10005'), 'amex [card]');
    assert.equal(r('ssn 123-45-6789 and 123 45 6789'), 'ssn [ssn] and [ssn]');
    assert.equal(r('my social security number is 123456789'), 'my social security number is [ssn]');
    assert.equal(r('write to jane.roe+x@mail.example.co.uk.'), 'write to [email].');
    assert.equal(r('call (415) 555-2671, +44 20 7946 0958 or 1-800-555-0199'), 'call [phone], [phone] or [phone]');
    assert.equal(r('I live at 1600 Pennsylvania Avenue, Washington, DC 20500 now'), 'I live at [address] now');
    assert.equal(r('ship to 42 W. Oak St. Apt 4B'), 'ship to [address]');
  });

  it('leaves what is not personal data', () => {
    for (const text of ['card 4111 1111 1111 1112 fails Luhn', 'SSN-like 000-12-3456 and 666-12-3456', 'order 12345678 costs $1500.00',
      'see you at 5 pm on the way home', 'I have 3 dogs', 'room 101, version 2.4.1', 'the zip is 94105', '']) {
      assert.equal(r(text), text);
    }
  });

  it('redacts the strings of a message\'s data, keeping our own ids and the carrier\'s numbers', () => {
    const data = JSON.stringify({ name: 'send_text', messageSid: 'SM4111111111111111', from: '+14155552671', arguments: { message: 'mail me at a@b.co' }, result: ['4111111111111111'] });
    assert.deepEqual(JSON.parse(redactData(data)!), { name: 'send_text', messageSid: 'SM4111111111111111', from: '+14155552671', arguments: { message: 'mail me at [email]' }, result: ['[card]'] });
    assert.equal(redactData(null), null);
  });
});
