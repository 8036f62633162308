// Digest authentication: the RFC 2069/2617/7616 test vectors, and a real exchange with kamailio
// (its challenges and the answer it accepted) from test/fixtures/sip.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { authorize, challengesOf, parseChallenge, verifyAuthorization, type Challenge } from '../../src/sip/digest.ts';
import { parseMessage, SipHeaders, splitList, unquote } from '../../src/sip/message.ts';

const dir = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../fixtures/sip');
const message = (name: string) => parseMessage(fs.readFileSync(path.join(dir, name)));

/** The fields of an Authorization value. */
function fields(value: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of splitList(value.replace(/^Digest\s+/i, ''))) {
    const eq = part.indexOf('=');
    out[part.slice(0, eq).trim()] = unquote(part.slice(eq + 1).trim());
  }
  return out;
}

describe('digest test vectors', () => {
  it('RFC 2617 §3.5: MD5 with qop=auth', () => {
    const c = parseChallenge('Digest realm="testrealm@host.com", qop="auth,auth-int", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", opaque="5ccc069c403ebaf9f0171e9517f40e41"', 'www')!;
    assert.deepEqual(c.qop, ['auth', 'auth-int']);
    assert.equal(c.algorithm, 'MD5');
    const a = authorize(c, { username: 'Mufasa', password: 'Circle Of Life' }, 'GET', '/dir/index.html', 1, '0a4f113b');
    assert.equal(a.name, 'Authorization');
    const f = fields(a.value);
    assert.equal(f.response, '6629fae49393a05397450978507c4ef1');
    assert.deepEqual([f.qop, f.nc, f.cnonce, f.opaque, f.uri], ['auth', '00000001', '0a4f113b', '5ccc069c403ebaf9f0171e9517f40e41', '/dir/index.html']);
    assert.equal(verifyAuthorization(a.value, { username: 'Mufasa', password: 'Circle Of Life' }, 'GET'), true);
    assert.equal(verifyAuthorization(a.value, { username: 'Mufasa', password: 'Circle of Life' }, 'GET'), false);
    assert.equal(verifyAuthorization(a.value, { username: 'Mufasa', password: 'Circle Of Life' }, 'POST'), false);
  });

  it('RFC 2069: no qop, so no nc or cnonce', () => {
    const c = parseChallenge('Digest realm="testrealm@host.com", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", opaque="5ccc069c403ebaf9f0171e9517f40e41"', 'www')!;
    const a = authorize(c, { username: 'Mufasa', password: 'CircleOfLife' }, 'GET', '/dir/index.html', 1);
    const f = fields(a.value);
    assert.equal(f.response, '1949323746fe6a43ef61f9606e7febea');
    assert.equal('nc' in f || 'cnonce' in f || 'qop' in f, false);
    assert.equal(verifyAuthorization(a.value, { username: 'Mufasa', password: 'CircleOfLife' }, 'GET'), true);
  });

  const rfc7616 = (algorithm: string) => parseChallenge(
    `Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=${algorithm}, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"`, 'www')!;
  const cnonce7616 = 'f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ';

  it('RFC 7616 §3.9.1: SHA-256', () => {
    const a = authorize(rfc7616('SHA-256'), { username: 'Mufasa', password: 'Circle of Life' }, 'GET', '/dir/index.html', 1, cnonce7616);
    const f = fields(a.value);
    assert.equal(f.response, '753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1');
    assert.equal(f.algorithm, 'SHA-256');
    assert.equal(verifyAuthorization(a.value, { username: 'Mufasa', password: 'Circle of Life' }, 'GET'), true);
  });

  it('RFC 7616 §3.9.1: MD5', () => {
    const a = authorize(rfc7616('MD5'), { username: 'Mufasa', password: 'Circle of Life' }, 'GET', '/dir/index.html', 1, cnonce7616);
    assert.equal(fields(a.value).response, '8ca523f5e9506fed4657c9700eebdbec');
  });

  it('-sess variants fold the nonce and cnonce into HA1, so the same cnonce differs from the plain answer', () => {
    for (const algorithm of ['MD5-sess', 'SHA-256-sess']) {
      const c = rfc7616(algorithm);
      assert.equal(c.algorithm, algorithm.toUpperCase());
      const sess = authorize(c, { username: 'Mufasa', password: 'Circle of Life' }, 'GET', '/dir/index.html', 1, cnonce7616);
      const plain = authorize(rfc7616(algorithm.replace('-sess', '')), { username: 'Mufasa', password: 'Circle of Life' }, 'GET', '/dir/index.html', 1, cnonce7616);
      assert.notEqual(fields(sess.value).response, fields(plain.value).response);
      assert.equal(verifyAuthorization(sess.value, { username: 'Mufasa', password: 'Circle of Life' }, 'GET'), true);
    }
  });

  it('counts nonce uses in nc as eight hex digits', () => {
    const a = authorize(rfc7616('MD5'), { username: 'u', password: 'p' }, 'REGISTER', 'sip:x', 26);
    assert.equal(fields(a.value).nc, '0000001a');
  });
});

describe('challenges', () => {
  it('reads kamailio\'s 401 and stale 401', () => {
    const fresh = challengesOf(message('kamailio-udp-02-received-401.txt').headers, 401);
    assert.equal(fresh.length, 1);
    assert.equal(fresh[0].kind, 'www');
    assert.equal(fresh[0].realm, 'callplane.test');
    assert.deepEqual(fresh[0].qop, ['auth']);
    assert.equal(fresh[0].stale, false);
    const stale = challengesOf(message('kamailio-udp-stale-02-received-401.txt').headers, 401);
    assert.equal(stale[0].stale, true);
  });

  it('reproduces the answer kamailio accepted, byte for byte, and that answer verifies', () => {
    const challenge = challengesOf(message('kamailio-udp-02-received-401.txt').headers, 401)[0];
    const sent = message('kamailio-udp-03-sent-register.txt');
    const accepted = sent.headers.get('authorization')!;
    const ok = message('kamailio-udp-04-received-200.txt');
    assert.equal(ok.kind === 'response' ? ok.status : 0, 200);
    const f = fields(accepted);
    const again = authorize(challenge, { username: 'alice', password: 's3cret' }, 'REGISTER', 'sip:callplane.test', parseInt(f.nc, 16), f.cnonce);
    assert.equal(again.value, accepted);
    assert.equal(verifyAuthorization(accepted, { username: 'alice', password: 's3cret' }, 'REGISTER'), true);
    assert.equal(verifyAuthorization(accepted, { username: 'alice', password: 'wrong' }, 'REGISTER'), false);
    assert.equal(verifyAuthorization(accepted, { username: 'bob', password: 's3cret' }, 'REGISTER'), false);
  });

  it('prefers SHA-256 over MD5, drops algorithms it cannot answer and non-Digest schemes', () => {
    const h = new SipHeaders()
      .append('WWW-Authenticate', 'Basic realm="x"')
      .append('WWW-Authenticate', 'Digest realm="r", nonce="n1", algorithm=MD5')
      .append('WWW-Authenticate', 'Digest realm="r", nonce="n2", algorithm=SHA-512-256')
      .append('WWW-Authenticate', 'Digest realm="r", nonce="n3", algorithm=SHA-256, qop="auth"');
    assert.deepEqual(challengesOf(h, 401).map((c: Challenge) => c.nonce), ['n3', 'n1']);
  });

  it('answers 407 with Proxy-Authorization from Proxy-Authenticate', () => {
    const h = new SipHeaders().append('Proxy-Authenticate', 'Digest realm="proxy", nonce="abc", qop="auth"').append('WWW-Authenticate', 'Digest realm="other", nonce="zzz"');
    const [c] = challengesOf(h, 407);
    assert.deepEqual([c.kind, c.realm], ['proxy', 'proxy']);
    assert.equal(authorize(c, { username: 'u', password: 'p' }, 'INVITE', 'sip:b@c', 1).name, 'Proxy-Authorization');
  });

  it('refuses challenges without realm or nonce, and reads parameters in any case and order', () => {
    assert.equal(parseChallenge('Digest nonce="x"', 'www'), null);
    assert.equal(parseChallenge('Digest realm="x"', 'www'), null);
    const c = parseChallenge('digest NONCE="a,b", Stale=TRUE, REALM="Realm, Inc."', 'www')!;
    assert.deepEqual([c.nonce, c.realm, c.stale, c.algorithm], ['a,b', 'Realm, Inc.', true, 'MD5']);
  });
});
