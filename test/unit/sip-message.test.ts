// SIP message parsing, serialising and stream framing, against messages captured from kamailio and
// sipp (test/fixtures/sip) and the header grammar corner cases RFC 3261 and RFC 4475 call out.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import {
  formatNameAddr, formatUri, formatVia, parseCSeq, parseMessage, parseNameAddr, parseParams, parseUri, parseVia,
  serialize, SipHeaders, SipParseError, splitList, StreamFramer, type SipMessage, type SipRequest, type SipResponse,
} from '../../src/sip/message.ts';

const dir = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../fixtures/sip');
const fixture = (name: string) => fs.readFileSync(path.join(dir, name));
const fixtures = fs.readdirSync(dir).filter((f) => f.endsWith('.txt')).sort();
const crlf = (...lines: string[]) => Buffer.from(lines.join('\r\n'));
const req = (m: SipMessage) => { assert.equal(m.kind, 'request'); return m as SipRequest; };
const res = (m: SipMessage) => { assert.equal(m.kind, 'response'); return m as SipResponse; };

describe('SIP fixtures captured from kamailio and sipp', () => {
  it('keeps CRLF line ends in the fixture files', () => {
    assert.ok(fixtures.length >= 20);
    for (const f of fixtures) {
      const text = fixture(f).toString('latin1');
      assert.ok(text.includes('\r\n\r\n'), `${f} has CRLF line ends`);
      assert.equal(/[^\r]\n/.test(text), false, `${f} has no bare LF`);
    }
  });

  it('parses every captured message and serialises it back to an equal message', () => {
    for (const f of fixtures) {
      const m = parseMessage(fixture(f));
      const again = parseMessage(serialize(m));
      assert.equal(again.kind, m.kind, f);
      if (m.kind === 'request') assert.deepEqual([req(again).method, req(again).uri], [m.method, m.uri], f);
      else assert.deepEqual([res(again).status, res(again).reason], [m.status, m.reason], f);
      const strip = (h: SipHeaders) => h.entries().filter(([n]) => n !== 'Content-Length');
      assert.deepEqual(strip(again.headers), strip(m.headers), f);
      assert.deepEqual(again.body, m.body, f);
      assert.equal(Number(m.headers.get('content-length')), m.body.length, `${f}: Content-Length matches the body`);
    }
  });

  it('reads sipp\'s INVITE: request line, headers, padded Content-Length and the SDP body', () => {
    const m = req(parseMessage(fixture('sipp-udp-call-01-sent-invite.txt')));
    assert.equal(m.method, 'INVITE');
    assert.equal(m.uri, 'sip:alice@127.0.0.3:5090');
    assert.equal(m.headers.get('content-length'), '129');
    assert.equal(m.body.length, 129);
    assert.match(m.body.toString(), /^v=0\r\n/);
    assert.match(m.body.toString(), /m=audio 6200 RTP\/AVP 0\r\n/);
    const from = parseNameAddr(m.headers.get('from')!);
    assert.deepEqual(from, { display: 'sipp', uri: 'sip:sipp@127.0.0.4:5091', params: { tag: '1558SIPpTag001' } });
    assert.deepEqual(parseCSeq(m.headers.get('cseq')!), { seq: 1, method: 'INVITE' });
    const via = parseVia(m.headers.getAll('via')[0]);
    assert.deepEqual(via, { transport: 'UDP', host: '127.0.0.4', port: 5091, params: { branch: 'z9hG4bK-1558-1-0' } });
  });

  it('reads kamailio\'s 200 to REGISTER with two bindings and the received/rport it noted', () => {
    const m = res(parseMessage(fixture('kamailio-tcp-04-received-200.txt')));
    assert.equal(m.status, 200);
    const contacts = m.headers.getAll('contact').map(parseNameAddr);
    assert.equal(contacts.length, 2);
    assert.equal(parseUri(contacts[1].uri).params.transport, 'tcp');
    assert.equal(contacts[0].params.expires, '30');
    const via = parseVia(m.headers.getAll('via')[0]);
    assert.equal(via.transport, 'TCP');
    assert.equal(via.params.received, '127.0.0.1');
    assert.match(via.params.rport ?? '', /^\d+$/);
    assert.equal(m.headers.get('server'), 'kamailio (5.6.3 (x86_64/linux))');
  });

  it('reads kamailio\'s challenge as one WWW-Authenticate value despite its commas', () => {
    const m = res(parseMessage(fixture('kamailio-udp-stale-02-received-401.txt')));
    const all = m.headers.getAll('www-authenticate');
    assert.equal(all.length, 1);
    assert.match(all[0], /^Digest realm="callplane.test", nonce="[^"]+", qop="auth", stale=true$/);
  });
});

describe('StreamFramer', () => {
  const exchange = fixtures.filter((f) => f.startsWith('sipp-tcp-call-')).map(fixture);
  // A keep-alive (RFC 5626 double CRLF) between two messages, and a lone CRLF before another.
  const stream = Buffer.concat(exchange.flatMap((b, i) => (i === 2 ? [Buffer.from('\r\n\r\n'), b] : i === 4 ? [Buffer.from('\r\n'), b] : [b])));

  it('cuts a TCP exchange split at every byte into the same messages, each with its own bytes', () => {
    const framer = new StreamFramer();
    const got: Array<{ msg: SipMessage; raw: Buffer }> = [];
    for (let i = 0; i < stream.length; i++) got.push(...framer.pushRaw(stream.subarray(i, i + 1)));
    assert.equal(got.length, exchange.length);
    got.forEach((g, i) => {
      assert.deepEqual(g.raw, exchange[i]);
      assert.deepEqual(serialize(g.msg), serialize(parseMessage(exchange[i])));
    });
  });

  it('cuts the same stream delivered in one chunk and in uneven chunks', () => {
    assert.equal(new StreamFramer().push(stream).length, exchange.length);
    const framer = new StreamFramer();
    let n = 0;
    for (let i = 0, size = 1; i < stream.length; i += size, size = (size * 7) % 97 + 1) n += framer.push(stream.subarray(i, i + size)).length;
    assert.equal(n, exchange.length);
  });

  it('frames by Content-Length even when the body holds a blank line, and waits for a partial body', () => {
    const body = 'first\r\n\r\nsecond';
    const one = crlf('MESSAGE sip:a@b SIP/2.0', 'Via: SIP/2.0/TCP h;branch=z9hG4bK1', 'l: ' + body.length, '', body);
    const framer = new StreamFramer();
    assert.deepEqual(framer.push(one.subarray(0, one.length - 3)), []);
    const [m] = framer.push(Buffer.concat([one.subarray(one.length - 3), one.subarray(0, 10)]));
    assert.equal(m.body.toString(), body);
    assert.equal(framer.push(one.subarray(10)).length, 1);
  });

  it('refuses a message without Content-Length on a stream', () => {
    assert.throws(() => new StreamFramer().push(crlf('OPTIONS sip:a@b SIP/2.0', 'Via: SIP/2.0/TCP h', '', '')), SipParseError);
  });

  it('refuses headers growing past the message limit instead of buffering forever', () => {
    const framer = new StreamFramer();
    framer.push(Buffer.from('OPTIONS sip:a@b SIP/2.0\r\n'));
    assert.throws(() => { for (let i = 0; i < 1000; i++) framer.push(Buffer.from(`X-Pad: ${'x'.repeat(100)}\r\n`)); }, SipParseError);
  });
});

describe('parseMessage', () => {
  it('maps compact header names to the full ones', () => {
    const m = parseMessage(crlf(
      'INVITE sip:bob@biloxi.example.com SIP/2.0', 'v: SIP/2.0/UDP pc33.atlanta.example.com;branch=z9hG4bKnashds8',
      'f: Alice <sip:alice@atlanta.example.com>;tag=1928301774', 't: Bob <sip:bob@biloxi.example.com>', 'i: a84b4c76e66710',
      'CSeq: 314159 INVITE', 'm: <sip:alice@pc33.atlanta.example.com>', 'c: application/sdp', 'k: 100rel', 's: hi', 'l: 0', '', '',
    ));
    assert.equal(m.headers.get('Via'), 'SIP/2.0/UDP pc33.atlanta.example.com;branch=z9hG4bKnashds8');
    assert.equal(m.headers.get('From'), 'Alice <sip:alice@atlanta.example.com>;tag=1928301774');
    assert.equal(m.headers.get('call-id'), 'a84b4c76e66710');
    assert.equal(m.headers.get('CONTACT'), '<sip:alice@pc33.atlanta.example.com>');
    assert.equal(m.headers.get('content-type'), 'application/sdp');
    assert.equal(m.headers.get('supported'), '100rel');
    assert.equal(m.headers.get('subject'), 'hi');
    assert.equal(m.headers.get('t'), 'Bob <sip:bob@biloxi.example.com>');
    assert.match(serialize(m).toString(), /\r\nCall-ID: a84b4c76e66710\r\n/);
  });

  it('joins folded header lines and tolerates space around the colon (RFC 4475 §3.1.1.1)', () => {
    const m = parseMessage(crlf(
      'OPTIONS sip:a@b SIP/2.0', 'Via  :  SIP/2.0/UDP h;branch=z9hG4bK1', 'Subject: I know you\'re there,', '     pick up the phone', '\t and talk to me!',
      'To: <sip:a@b>', '', '',
    ));
    assert.equal(m.headers.get('subject'), 'I know you\'re there, pick up the phone and talk to me!');
    assert.equal(m.headers.get('via'), 'SIP/2.0/UDP h;branch=z9hG4bK1');
  });

  it('keeps Via values in order across comma lists and repeated headers', () => {
    const m = parseMessage(crlf(
      'SIP/2.0 200 OK', 'Via: SIP/2.0/UDP first.example.com:4000;branch=z9hG4bKa, SIP/2.0/TCP second.example.com;branch=z9hG4bKb',
      'Via: SIP/2.0/UDP [2001:db8::9:1]:5070;branch=z9hG4bKc;received=2001:db8::9:255;rport=5070', 'Content-Length: 0', '', '',
    ));
    const vias = m.headers.getAll('via').map(parseVia);
    assert.deepEqual(vias.map((v) => v.params.branch), ['z9hG4bKa', 'z9hG4bKb', 'z9hG4bKc']);
    assert.deepEqual(vias.map((v) => [v.transport, v.host, v.port]), [['UDP', 'first.example.com', 4000], ['TCP', 'second.example.com', undefined], ['UDP', '[2001:db8::9:1]', 5070]]);
    assert.equal(vias[2].params.received, '2001:db8::9:255');
    assert.equal(formatVia(vias[2]), 'SIP/2.0/UDP [2001:db8::9:1]:5070;branch=z9hG4bKc;received=2001:db8::9:255;rport=5070');
  });

  it('splits Contact lists without breaking quoted display names that hold commas', () => {
    const m = parseMessage(crlf(
      'SIP/2.0 200 OK', 'Contact: "Doe, John" <sip:john@a.example.com>;q=0.7;expires=60, <sip:x@[2001:db8::10]:5070;transport=tcp>;expires=30',
      'm: "A \\"quoted\\" name, too" <sip:q@b>', 'Content-Length: 0', '', '',
    ));
    const contacts = m.headers.getAll('contact').map(parseNameAddr);
    assert.equal(contacts.length, 3);
    assert.deepEqual(contacts[0], { display: 'Doe, John', uri: 'sip:john@a.example.com', params: { q: '0.7', expires: '60' } });
    assert.deepEqual(parseUri(contacts[1].uri), { scheme: 'sip', user: 'x', password: undefined, host: '[2001:db8::10]', port: 5070, params: { transport: 'tcp' } });
    assert.equal(contacts[2].display, 'A "quoted" name, too');
    assert.equal(formatNameAddr(contacts[2]), '"A \\"quoted\\" name, too" <sip:q@b>');
  });

  it('does not split headers that are never lists (From, challenges, Date)', () => {
    const m = parseMessage(crlf('SIP/2.0 401 Unauthorized', 'From: "Smith, Bob" <sip:bob@b>;tag=1', 'Date: Sat, 13 Nov 2010 23:29:00 GMT', 'Content-Length: 0', '', ''));
    assert.deepEqual(m.headers.getAll('from'), ['"Smith, Bob" <sip:bob@b>;tag=1']);
    assert.deepEqual(m.headers.getAll('date'), ['Sat, 13 Nov 2010 23:29:00 GMT']);
  });

  it('cuts a datagram body to Content-Length and refuses a Content-Length beyond the datagram', () => {
    const head = ['MESSAGE sip:a@b SIP/2.0', 'Via: SIP/2.0/UDP h;branch=z9hG4bK1'];
    assert.equal(parseMessage(crlf(...head, 'Content-Length: 5', '', 'hello world')).body.toString(), 'hello');
    assert.equal(parseMessage(crlf(...head, '', 'no length given')).body.toString(), 'no length given');
    assert.throws(() => parseMessage(crlf(...head, 'Content-Length: 50', '', 'short')), /longer than the body/);
    assert.throws(() => parseMessage(crlf(...head, 'Content-Length: five', '', 'short')), /bad Content-Length/);
  });

  it('accepts bare LF line ends and leading CRLF keep-alives', () => {
    const m = res(parseMessage(Buffer.from('\r\n\r\nSIP/2.0 180 Ringing\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\nContent-Length: 4\n\nbody')));
    assert.deepEqual([m.status, m.reason, m.body.toString()], [180, 'Ringing', 'body']);
    // A CRLF message whose body holds LF LF is still split at its own blank line.
    const n = parseMessage(crlf('MESSAGE sip:a@b SIP/2.0', 'Via: SIP/2.0/UDP h;branch=z9hG4bK1', 'Content-Length: 6', '', 'a\n\nb\r\n'));
    assert.equal(n.body.toString(), 'a\n\nb\r\n');
    // …and an LF message whose body holds CRLF CRLF at its own.
    const o = parseMessage(Buffer.from('MESSAGE sip:a@b SIP/2.0\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\nContent-Length: 6\n\nx\r\n\r\ny'));
    assert.equal(o.headers.get('content-length'), '6');
    assert.equal(o.body.toString(), 'x\r\n\r\ny');
  });

  it('reads a status line without a reason phrase and refuses impossible codes', () => {
    assert.equal(res(parseMessage(crlf('SIP/2.0 200', 'Content-Length: 0', '', ''))).reason, '');
    assert.throws(() => parseMessage(crlf('SIP/2.0 099 Low', '', '')), SipParseError);
    assert.throws(() => parseMessage(crlf('SIP/2.0 700 High', '', '')), SipParseError);
  });

  it('refuses garbage with SipParseError only: truncations, flipped bytes and noise never throw anything else', () => {
    const bad = [
      Buffer.from('hello'), Buffer.from('\r\n\r\n'), crlf('INVITE sip:a@b HTTP/1.1', '', ''), crlf('INVITE sip:a@b SIP/2.0', 'NoColonHere', '', ''),
      crlf('INVITE sip:a@b SIP/2.0', ' folded first', '', ''), crlf('INVITE sip:a@b SIP/2.0', 'Bad Name: x', '', ''), Buffer.alloc(70_000, 65),
    ];
    for (const b of bad) assert.throws(() => parseMessage(b), SipParseError, JSON.stringify(b.subarray(0, 40).toString()));
    // Deterministic pseudo-random damage over every fixture.
    let seed = 42;
    const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
    for (const f of fixtures) {
      const good = fixture(f);
      for (let cut = 0; cut < good.length; cut += 7) {
        try { parseMessage(good.subarray(0, cut)); } catch (err) { assert.ok(err instanceof SipParseError, `${f} cut at ${cut}: ${String(err)}`); }
      }
      for (let k = 0; k < 200; k++) {
        const copy = Buffer.from(good);
        for (let j = 0; j < 3; j++) copy[Math.floor(rand() * copy.length)] = Math.floor(rand() * 256);
        try {
          const m = parseMessage(copy);
          serialize(m);
        } catch (err) { assert.ok(err instanceof SipParseError, `${f} damaged: ${String(err)}`); }
      }
    }
  });
});

describe('header grammar', () => {
  it('parses SIP URIs with users, passwords, IPv6 hosts, params and headers', () => {
    assert.deepEqual(parseUri('sip:alice:secret@Atlanta.Example.com:5061;transport=TCP;lr?subject=project%20x'), {
      scheme: 'sip', user: 'alice', password: 'secret', host: 'atlanta.example.com', port: 5061, params: { transport: 'TCP', lr: null }, headers: 'subject=project%20x',
    });
    assert.deepEqual(parseUri('sips:[::1]'), { scheme: 'sips', user: undefined, password: undefined, host: '[::1]', port: undefined, params: {} });
    assert.equal(parseUri('sip:+15551234567@gw.example.com;user=phone').user, '+15551234567');
    assert.equal(formatUri(parseUri('sip:bob@[2001:db8::1]:5070;transport=tcp')), 'sip:bob@[2001:db8::1]:5070;transport=tcp');
    for (const bad of ['http://a', 'sip:', 'sip:a@b:0', 'sip:a@b:70000', 'tel:+1555']) assert.throws(() => parseUri(bad), SipParseError, bad);
  });

  it('reads name-addr forms with and without angle brackets', () => {
    assert.deepEqual(parseNameAddr('sip:alice@a.example.com;tag=88sja8x'), { uri: 'sip:alice@a.example.com', params: { tag: '88sja8x' } });
    assert.deepEqual(parseNameAddr('Bob Smith <sip:bob@b.example.com;transport=tcp>;tag=a6c85cf'), {
      display: 'Bob Smith', uri: 'sip:bob@b.example.com;transport=tcp', params: { tag: 'a6c85cf' },
    });
    assert.deepEqual(parseNameAddr('"<not a uri>" <sip:c@d>'), { display: '<not a uri>', uri: 'sip:c@d', params: {} });
    assert.throws(() => parseNameAddr('"x" <sip:unterminated'), SipParseError);
  });

  it('parses params with quoted values and flags', () => {
    assert.deepEqual(parseParams(';Branch=z9hG4bK1;rport;reason="a;b"'), { branch: 'z9hG4bK1', rport: null, reason: 'a;b' });
    assert.deepEqual(splitList('a, "b, c", <sip:d,e@f>, , g'), ['a', '"b, c"', '<sip:d,e@f>', 'g']);
  });

  it('reads CSeq and refuses malformed ones', () => {
    assert.deepEqual(parseCSeq(' 4711   invite '), { seq: 4711, method: 'INVITE' });
    assert.throws(() => parseCSeq('INVITE 1'), SipParseError);
  });

  it('SipHeaders: case-insensitive, ordered, canonical names, no CR/LF injection', () => {
    const h = new SipHeaders([['via', 'a'], ['CALL-ID', 'x']]);
    h.prepend('v', 'top').append('WWW-AUTHENTICATE', 'Digest realm="r"');
    assert.deepEqual(h.entries().map(([n]) => n), ['Via', 'Via', 'Call-ID', 'WWW-Authenticate']);
    assert.equal(h.get('VIA'), 'top');
    h.set('via', 'only');
    assert.deepEqual(h.getAll('v'), ['only']);
    assert.equal(h.has('call-id'), true);
    h.delete('i');
    assert.equal(h.has('call-id'), false);
    assert.throws(() => h.append('Subject', 'x\r\nVia: injected'), SipParseError);
  });

  it('serialises with Content-Length from the body, replacing a wrong one', () => {
    const m: SipRequest = { kind: 'request', method: 'MESSAGE', uri: 'sip:a@b', headers: new SipHeaders([['Content-Length', '99'], ['To', '<sip:a@b>']]), body: Buffer.from('héllo') };
    const text = serialize(m).toString();
    assert.equal(text, 'MESSAGE sip:a@b SIP/2.0\r\nTo: <sip:a@b>\r\nContent-Length: 6\r\n\r\nhéllo');
  });
});
