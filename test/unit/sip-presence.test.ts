// Reading presence NOTIFYs: Subscription-State (RFC 6665 §8.2.3) and the PIDF <basic> (RFC 3863),
// against NOTIFYs Kamailio 5.6's presence server sent to callplane (test/fixtures/sip/presence,
// byte for byte) and against bodies and headers that are absent, odd or garbage.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { parseMessage, type SipRequest } from '../../src/sip/message.ts';
import { parsePidfBasic, parseSubscriptionState } from '../../src/sip/subscribe.ts';

const dir = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../fixtures/sip/presence');
const notify = (name: string) => parseMessage(fs.readFileSync(path.join(dir, name))) as SipRequest;

describe('presence NOTIFYs captured from Kamailio', () => {
  it('reads the Subscription-State and the PIDF basic of each', () => {
    const seen = fs.readdirSync(dir).filter((f) => f.endsWith('.txt')).sort().map((f) => {
      const m = notify(f);
      assert.equal(m.method, 'NOTIFY', f);
      return [f, parseSubscriptionState(m.headers.get('subscription-state')), parsePidfBasic(m.body)];
    });
    assert.deepEqual(seen, [
      ['kamailio-notify-1-active-no-body.txt', { state: 'active', expires: 60 }, null],
      ['kamailio-notify-2-active-open.txt', { state: 'active', expires: 59 }, 'open'],
      ['kamailio-notify-3-active-closed.txt', { state: 'active', expires: 58 }, 'closed'],
      ['kamailio-notify-4-terminated-timeout.txt', { state: 'terminated', reason: 'timeout' }, 'closed'],
    ]);
  });
});

describe('parseSubscriptionState', () => {
  it('reads states and their parameters, case and spaces aside', () => {
    assert.deepEqual(parseSubscriptionState('pending;expires=600'), { state: 'pending', expires: 600 });
    assert.deepEqual(parseSubscriptionState(' Terminated ; Reason=Probation ; retry-after=30'), { state: 'terminated', reason: 'probation', retryAfter: 30 });
    assert.deepEqual(parseSubscriptionState('terminated;reason=rejected'), { state: 'terminated', reason: 'rejected' });
    assert.deepEqual(parseSubscriptionState('terminated;reason="giveup";retry-after=5;x-extra=1'), { state: 'terminated', reason: 'giveup', retryAfter: 5 });
    // An extension state is kept as it is (a caller treats it as pending).
    assert.deepEqual(parseSubscriptionState('waiting'), { state: 'waiting' });
  });

  it('drops parameters it cannot read and refuses what is not a state', () => {
    assert.deepEqual(parseSubscriptionState('active;expires=soon;retry-after=-1;reason=a b'), { state: 'active' });
    assert.deepEqual(parseSubscriptionState('active;expires=1.5;expires'), { state: 'active' });
    for (const bad of [undefined, null, '', ' ', ';expires=3', 'act ive', '<active>', '\u0000']) {
      assert.equal(parseSubscriptionState(bad), undefined, JSON.stringify(bad));
    }
  });
});

describe('parsePidfBasic', () => {
  const pidf = (inner: string) => `<?xml version="1.0"?><presence xmlns="urn:ietf:params:xml:ns:pidf" entity="sip:a@b">${inner}</presence>`;

  it('open when any tuple is open, closed when all are closed', () => {
    assert.equal(parsePidfBasic(pidf('<tuple id="1"><status><basic>closed</basic></status></tuple><tuple id="2"><status><basic>open</basic></status></tuple>')), 'open');
    assert.equal(parsePidfBasic(pidf('<tuple id="1"><status><basic>closed</basic></status></tuple><tuple id="2"><status><basic> CLOSED </basic></status></tuple>')), 'closed');
    assert.equal(parsePidfBasic(Buffer.from(pidf('<tuple id="1"><status><basic>Open</basic></status></tuple>'))), 'open');
  });

  it('reads prefixed elements and attributes', () => {
    const doc = '<p:presence xmlns:p="urn:ietf:params:xml:ns:pidf" entity="pres:a@b"><p:tuple id="x"><p:status><p:basic xml:lang="en">open</p:basic></p:status></p:tuple></p:presence>';
    assert.equal(parsePidfBasic(doc), 'open');
  });

  it('null for absent, empty, foreign and garbage bodies, never throwing', () => {
    const cases: Array<Buffer | string | undefined | null> = [
      undefined, null, '', Buffer.alloc(0), 'not xml at all', pidf(''), pidf('<tuple id="1"><status></status></tuple>'),
      pidf('<tuple id="1"><status><basic>busy</basic></status></tuple>'), pidf('<tuple><status><basic>open'),
      '<basicx>open</basicx>', '<basic>open</other>', Buffer.from([0xff, 0xfe, 0x00, 0x3c, 0x62]), '<'.repeat(100_000),
      `${' '.repeat(70_000)}<basic>open</basic>`,
    ];
    for (const c of cases) assert.equal(parsePidfBasic(c), null, String(c).slice(0, 60));
  });
});
