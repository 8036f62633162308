// The SIP API's text formats: outbound routes, addresses of record, whitelist entries.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  parseAor, parseHostPort, parseOutboundRoute, parseWhitelistIp, routeKey, whitelisted, whitelistMatcher,
} from '../../src/modules/sip/parse.ts';

function route(text: unknown) {
  const r = parseOutboundRoute(text);
  if (!r.ok) throw new Error(`expected ${String(text)} to parse: ${r.message}`);
  return r.value;
}

function routeError(text: unknown): string {
  const r = parseOutboundRoute(text);
  assert.equal(r.ok, false, `expected ${String(text)} to be refused`);
  return (r as { message: string }).message;
}

describe('outbound route format host[:port][;transport=…][;proxyAddress=host[:port]]', () => {
  it('reads a bare IPv4 host with UDP and no port', () => {
    assert.deepEqual(route('1.1.1.1'), { host: '1.1.1.1', port: undefined, transport: 'UDP', transportGiven: false });
  });

  it('reads the contract example 1.1.1.1:5060;transport=udp', () => {
    assert.deepEqual(route('1.1.1.1:5060;transport=udp'), { host: '1.1.1.1', port: 5060, transport: 'UDP', transportGiven: true });
  });

  it('reads a domain, TCP and a proxy with a port, parameters in any order and any case', () => {
    const r = route('PBX.Example.com:5080;ProxyAddress=10.0.0.1:5070;TRANSPORT=TCP');
    assert.deepEqual(r, { host: 'pbx.example.com', port: 5080, transport: 'TCP', transportGiven: true, proxy: { host: '10.0.0.1', port: 5070 } });
  });

  it('reads IPv6 hosts in brackets, with and without a port, and a bare IPv6 address', () => {
    assert.deepEqual(route('[2001:DB8::1]:5062'), { host: '2001:db8::1', port: 5062, transport: 'UDP', transportGiven: false });
    assert.equal(route('[2001:db8::1]').port, undefined);
    assert.equal(route('2001:db8::1').host, '2001:db8::1');
    assert.deepEqual(route('sip.example.com;proxyAddress=[2001:db8::2]').proxy, { host: '2001:db8::2' });
  });

  it('accepts tls as a transport besides udp and tcp', () => {
    assert.equal(route('pbx.example.com;transport=tls').transport, 'TLS');
  });

  it('names the bad part of a malformed route', () => {
    assert.match(routeError(''), /route must not be empty/);
    assert.match(routeError(42), /route must be a string/);
    assert.match(routeError('1.1.1.1:0'), /port '0' must be a number from 1 to 65535/);
    assert.match(routeError('1.1.1.1:65536'), /port '65536'/);
    assert.match(routeError('1.1.1.1:abc'), /port 'abc'/);
    assert.match(routeError('1.1.1.1;transport=sctp'), /transport 'sctp' must be udp, tcp or tls/);
    assert.match(routeError('1.1.1.1;transport'), /parameter 'transport' has no value/);
    assert.match(routeError('1.1.1.1;transport=udp;transport=tcp'), /'transport' is given twice/);
    assert.match(routeError('1.1.1.1;maddr=2.2.2.2'), /parameter 'maddr' is not known/);
    assert.match(routeError('1.1.1.1;;transport=udp'), /empty parameter/);
    assert.match(routeError('1.1.1.1;proxyAddress=bad_host!'), /proxyAddress host 'bad_host!' is not a valid host name/);
    assert.match(routeError('1.1.1.1;proxyAddress=10.0.0.1:99999'), /proxyAddress port '99999'/);
    assert.match(routeError('1.1.1.1;proxyAddress='), /proxyAddress must not be empty/);
    assert.match(routeError('999.1.1.1'), /host '999.1.1.1' is not a valid IPv4 address/);
    assert.match(routeError('-pbx.example.com'), /host '-pbx.example.com' is not a valid host name/);
    assert.match(routeError('sip:1.1.1.1'), /not a SIP URI/);
    assert.match(routeError('alice@1.1.1.1'), /must not carry a user part/);
    assert.match(routeError('1.1.1.1 ;transport=udp'), /must not contain spaces/);
    assert.match(routeError('2001:db8::1:5060x'), /IPv6 address with a port as \[address\]:port|not a valid/);
    assert.match(routeError('[2001:db8::1'), /unclosed \[/);
    assert.match(routeError('[pbx.example.com]:5060'), /not an IPv6 address/);
    assert.match(routeError(':5060'), /has no host/);
  });

  it('gives equivalent routes one key: default port and transport filled in, host lowercased', () => {
    assert.equal(routeKey(route('1.1.1.1')), routeKey(route('1.1.1.1:5060;transport=UDP')));
    assert.equal(routeKey(route('PBX.example.com;transport=tls')), 'pbx.example.com:5061;transport=tls');
    assert.notEqual(routeKey(route('1.1.1.1;transport=tcp')), routeKey(route('1.1.1.1')));
    assert.notEqual(routeKey(route('1.1.1.1;proxyAddress=2.2.2.2')), routeKey(route('1.1.1.1')));
    assert.equal(routeKey(route('1.1.1.1;proxyAddress=2.2.2.2')), routeKey(route('1.1.1.1;proxyAddress=2.2.2.2:5060')));
  });
});

describe('address of record', () => {
  it('reads sip: URIs and the contract\'s bare user@host form to the same key', () => {
    const a = parseAor('sip:1001@PBX.example.com');
    const b = parseAor('1001@pbx.example.com');
    assert.ok(a.ok && b.ok);
    assert.equal(a.value.key, 'sip:1001@pbx.example.com');
    assert.equal(b.value.key, a.value.key);
    const p = parseAor('SIP:alice@10.0.0.1:5070');
    assert.ok(p.ok);
    assert.deepEqual(p.value, { user: 'alice', host: '10.0.0.1', port: 5070, key: 'sip:alice@10.0.0.1:5070' });
  });

  it('keeps the user part\'s case (SIP users are case-sensitive)', () => {
    const a = parseAor('Alice@example.com');
    assert.ok(a.ok);
    assert.equal(a.value.key, 'sip:Alice@example.com');
  });

  it('refuses what is not a sip: address, naming why', () => {
    const msg = (t: string) => { const r = parseAor(t); assert.equal(r.ok, false, t); return (r as { message: string }).message; };
    assert.match(msg('pbx.example.com'), /user part is missing/);
    assert.match(msg('sip:@pbx.example.com'), /user part is empty/);
    assert.match(msg('tel:+15551234567'), /must be a sip: URI, not tel:/);
    assert.match(msg('sips:1001@pbx.example.com'), /sips: is not supported/);
    assert.match(msg('sip:1001@pbx.example.com;transport=tcp'), /without parameters/);
    assert.match(msg('sip:1001:pw@pbx.example.com'), /must not carry a password/);
    assert.match(msg('sip:10 01@pbx.example.com'), /without parameters, headers or spaces/);
    assert.match(msg('sip:1001@pbx_example'), /not a valid host name/);
    assert.match(msg('sip:1001@pbx.example.com:70000'), /port '70000'/);
    assert.match(msg(''), /must not be empty/);
  });
});

describe('host[:port]', () => {
  it('reads names, addresses and ports', () => {
    assert.deepEqual(parseHostPort('sip.example.com:5061', 'proxy'), { ok: true, value: { host: 'sip.example.com', port: 5061 } });
    assert.deepEqual(parseHostPort('127.0.0.2', 'proxy'), { ok: true, value: { host: '127.0.0.2' } });
    assert.deepEqual(parseHostPort('[::1]:5070', 'proxy'), { ok: true, value: { host: '::1', port: 5070 } });
    const r = parseHostPort('x:0', 'proxy');
    assert.equal(r.ok, false);
    assert.match((r as { message: string }).message, /^proxy port '0'/);
  });
});

describe('whitelist entries', () => {
  const norm = (t: string) => { const r = parseWhitelistIp(t); assert.ok(r.ok, t); return r.value.ip; };

  it('normalises addresses and ranges', () => {
    assert.equal(norm('192.168.1.1'), '192.168.1.1');
    assert.equal(norm(' 192.168.1.1/32 '), '192.168.1.1');
    assert.equal(norm('10.1.2.3/8'), '10.0.0.0/8');
    assert.equal(norm('2001:DB8:0:0::1'), '2001:db8::1');
    assert.equal(norm('2001:db8::1/32'), '2001:db8::/32');
    assert.equal(norm('::ffff:203.0.113.5'), '203.0.113.5');
    assert.equal(norm('::ffff:203.0.113.0/120'), '203.0.113.0/24');
    assert.equal(norm('0.0.0.0/0'), '0.0.0.0/0');
  });

  it('refuses what is not an address or range, naming the field', () => {
    const msg = (t: unknown) => { const r = parseWhitelistIp(t); assert.equal(r.ok, false); return (r as { message: string }).message; };
    assert.match(msg('example.com'), /^ip 'example.com' is not an IPv4 or IPv6 address/);
    assert.match(msg('192.168.1.256'), /not an IPv4 or IPv6 address/);
    assert.match(msg('10.0.0.0/33'), /prefix '\/33' must be a number from 0 to 32/);
    assert.match(msg('10.0.0.0/'), /prefix/);
    assert.match(msg('2001:db8::/129'), /from 0 to 128/);
    assert.match(msg(''), /must not be empty/);
    assert.match(msg(7), /must be a string/);
  });

  it('matches peers against addresses and ranges, IPv4-mapped peers as IPv4', () => {
    const list = whitelistMatcher(['127.0.0.5', '10.0.0.0/8', '2001:db8::/32']);
    assert.equal(whitelisted(list, '127.0.0.5'), true);
    assert.equal(whitelisted(list, '127.0.0.6'), false);
    assert.equal(whitelisted(list, '10.200.3.4'), true);
    assert.equal(whitelisted(list, '11.0.0.1'), false);
    assert.equal(whitelisted(list, '::ffff:10.1.1.1'), true);
    assert.equal(whitelisted(list, '2001:db8:1::9'), true);
    assert.equal(whitelisted(list, '2001:db9::1'), false);
    assert.equal(whitelisted(list, 'not-an-ip'), false);
  });
});
