// The SSRF guard: which addresses are refused and why, the URL check at configuration time, the
// CIDR form of CALLPLANE_ALLOW_PRIVATE_TARGETS, and refusals at connect time against a real
// receiver on 127.0.0.1 (a refused request must never reach it).
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Dispatcher } from 'undici';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { deliverOnce } from '../../src/webhooks/deliver.ts';
import {
  blockedReason, checkTargetUrl, guardedDispatcher, isBlockedAddress, policyFromConfig, refusalReason,
  type TargetPolicy,
} from '../../src/webhooks/ssrf.ts';

const CLOSED: TargetPolicy = { allowPrivate: false };
const OPEN: TargetPolicy = { allowPrivate: true };

describe('isBlockedAddress / blockedReason', () => {
  const blocked: Array<[string, RegExp]> = [
    ['127.0.0.1', /loopback/],
    ['127.255.255.254', /loopback/],
    ['10.0.0.1', /private/],
    ['172.16.0.1', /private/],
    ['172.31.255.255', /private/],
    ['192.168.1.1', /private/],
    ['169.254.169.254', /link-local.*metadata/],
    ['169.254.1.1', /link-local/],
    ['100.64.0.1', /carrier-grade NAT/],
    ['100.127.255.255', /carrier-grade NAT/],
    ['0.0.0.0', /unspecified/],
    ['224.0.0.1', /multicast/],
    ['239.255.255.250', /multicast/],
    ['255.255.255.255', /broadcast/],
    ['240.0.0.1', /reserved/],
    ['192.0.2.10', /documentation/],
    ['198.18.0.1', /special-purpose/],
    ['::1', /loopback/],
    ['[::1]', /loopback/],
    ['::', /unspecified/],
    ['fe80::1', /link-local/],
    ['fe80::1%eth0', /link-local/],
    ['fc00::1', /unique local/],
    ['fd12:3456::1', /unique local/],
    ['ff02::1', /multicast/],
    ['::ffff:127.0.0.1', /loopback address \(IPv4-mapped 127\.0\.0\.1\)/],
    ['::ffff:7f00:1', /loopback address \(IPv4-mapped 127\.0\.0\.1\)/],
    ['::ffff:10.0.0.1', /private/],
    ['::ffff:169.254.169.254', /metadata/],
    ['64:ff9b::7f00:1', /loopback address \(NAT64 127\.0\.0\.1\)/],
    ['64:ff9b::a9fe:a9fe', /metadata service\) \(NAT64 169\.254\.169\.254\)/],
    ['2002:7f00:1::1', /loopback address \(6to4 127\.0\.0\.1\)/],
    ['2001:0:4136:e378::1', /Teredo/],
    ['2001:db8::1', /documentation/],
    ['::127.0.0.1', /reserved/],
    ['100::1', /discard/],
    ['not-an-ip', /not an IP address/],
  ];
  for (const [ip, why] of blocked) {
    it(`refuses ${ip} (${why.source})`, () => {
      assert.equal(isBlockedAddress(ip), true);
      assert.match(blockedReason(ip) ?? '', why);
    });
  }

  it('lets public unicast addresses through, including public IPv4 behind the IPv6 embeddings', () => {
    for (const ip of ['8.8.8.8', '1.1.1.1', '93.184.216.34', '172.32.0.1', '100.128.0.1', '169.255.0.1',
      '2606:4700:4700::1111', '2a00:1450:4001::200e', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1']) {
      assert.equal(blockedReason(ip), null, ip);
      assert.equal(isBlockedAddress(ip), false, ip);
    }
  });
});

describe('refusalReason: the policy', () => {
  it('opens everything when private targets are allowed', () => {
    assert.equal(refusalReason('127.0.0.1', OPEN), null);
    assert.equal(refusalReason('169.254.169.254', OPEN), null);
  });

  it('opens only the listed ranges, IPv4-mapped forms included', () => {
    const policy: TargetPolicy = { allowPrivate: false, allowCidrs: ['10.1.0.0/16', 'fd00::/8', '127.0.0.1'] };
    assert.equal(refusalReason('10.1.2.3', policy), null);
    assert.equal(refusalReason('::ffff:10.1.2.3', policy), null);
    assert.equal(refusalReason('fd00::5', policy), null);
    assert.equal(refusalReason('127.0.0.1', policy), null);
    assert.match(refusalReason('127.0.0.2', policy) ?? '', /loopback/);
    assert.match(refusalReason('10.2.0.1', policy) ?? '', /private/);
    assert.match(refusalReason('169.254.169.254', policy) ?? '', /metadata/);
    assert.equal(refusalReason('8.8.8.8', policy), null);
  });
});

describe('checkTargetUrl', () => {
  const refused = (url: string, policy: TargetPolicy = CLOSED): string => {
    const r = checkTargetUrl(url, policy);
    assert.equal(r.ok, false, `expected ${url} to be refused`);
    return (r as { message: string }).message;
  };

  it('accepts absolute http and https URLs with names or public addresses', () => {
    for (const url of ['https://example.com/hook', 'http://hooks.example.com:8080/a?b=c', 'https://8.8.8.8/x', 'https://[2606:4700::1111]/']) {
      const r = checkTargetUrl(url, CLOSED);
      assert.equal(r.ok, true, url);
      assert.equal((r as { url: URL }).url.href, new URL(url).href);
    }
  });

  it('refuses relative URLs and other schemes', () => {
    assert.match(refused('/hooks/a'), /^url must be an absolute http or https URL/);
    assert.match(refused('example.com/hook'), /^url must be an absolute http or https URL/);
    assert.match(refused(''), /^url must be an absolute http or https URL/);
    assert.equal(refused('ftp://example.com/x'), "url must use http or https (got 'ftp')");
    assert.equal(refused('file:///etc/passwd'), "url must use http or https (got 'file')");
    assert.match(refused('javascript:alert(1)'), /got 'javascript'/);
  });

  it('refuses credentials in the URL', () => {
    assert.match(refused('https://user:pass@example.com/'), /must not carry credentials/);
    assert.match(refused('https://user@example.com/'), /must not carry credentials/);
  });

  it('refuses literal private addresses at configuration time, naming the address and why', () => {
    assert.match(refused('http://127.0.0.1:8080/x'), /^url points to 127\.0\.0\.1, a loopback address; private targets are not allowed/);
    assert.match(refused('http://10.0.0.1/'), /10\.0\.0\.1, a private/);
    assert.match(refused('http://169.254.169.254/latest/meta-data/'), /169\.254\.169\.254, a link-local address \(the cloud metadata service\)/);
    assert.match(refused('http://[::1]/'), /::1, a loopback address/);
    assert.match(refused('http://[::ffff:127.0.0.1]/'), /loopback address \(IPv4-mapped 127\.0\.0\.1\)/);
    // The URL parser turns these spellings into 127.0.0.1 before we look.
    assert.match(refused('http://2130706433/'), /127\.0\.0\.1, a loopback/);
    assert.match(refused('http://0x7f.1/'), /127\.0\.0\.1, a loopback/);
    assert.match(refused('http://[fd00::1]/'), /unique local/);
  });

  it('leaves names to connect time, and accepts private literals the policy opens', () => {
    assert.equal(checkTargetUrl('http://localhost:3000/', CLOSED).ok, true);
    assert.equal(checkTargetUrl('http://127.0.0.1:3000/', OPEN).ok, true);
    assert.equal(checkTargetUrl('http://10.1.0.9/', { allowPrivate: false, allowCidrs: ['10.1.0.0/16'] }).ok, true);
    assert.equal(checkTargetUrl('http://10.2.0.9/', { allowPrivate: false, allowCidrs: ['10.1.0.0/16'] }).ok, false);
  });
});

describe('CALLPLANE_ALLOW_PRIVATE_TARGETS and policyFromConfig', () => {
  const policy = (value: string | undefined) => policyFromConfig(loadConfig({ CALLPLANE_ALLOW_PRIVATE_TARGETS: value }));

  it('reads true/false and a CIDR list', () => {
    assert.deepEqual(policy(undefined), { allowPrivate: false, allowCidrs: [] });
    assert.deepEqual(policy('false'), { allowPrivate: false, allowCidrs: [] });
    assert.deepEqual(policy('true'), { allowPrivate: true, allowCidrs: [] });
    assert.deepEqual(policy(' 10.1.0.0/16, fd00::/8 ,127.0.0.1'), { allowPrivate: false, allowCidrs: ['10.1.0.0/16', 'fd00::/8', '127.0.0.1'] });
    assert.equal(loadConfig({ CALLPLANE_ALLOW_PRIVATE_TARGETS: '10.0.0.0/8' }).allowPrivateTargets, false);
  });

  it('refuses to start with a bad entry, naming it', () => {
    for (const [value, bad] of [['10.0.0.0/33', '10.0.0.0/33'], ['10.0.0.0/8,nonsense', 'nonsense'], ['maybe', 'maybe'], ['fd00::/129', 'fd00::/129'], ['10.0.0.0/8/1', '10.0.0.0/8/1']]) {
      assert.throws(() => loadConfig({ CALLPLANE_ALLOW_PRIVATE_TARGETS: value }), (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.ok(err.message.includes(`'${bad}' is not a CIDR range`), err.message);
        return true;
      });
    }
  });
});

describe('guardedDispatcher: refusals at connect time', () => {
  it('refuses a policy with a bad range when it is built, not on each request', () => {
    assert.throws(() => guardedDispatcher({ allowPrivate: false, allowCidrs: ['10.0.0.0/8', 'nope'] }), /'nope' is not a CIDR range/);
  });

  let server: http.Server;
  let port = 0;
  let received = 0;
  const dispatchers: Dispatcher[] = [];
  const guard = (policy: TargetPolicy, opts?: Parameters<typeof guardedDispatcher>[1]) => {
    const d = guardedDispatcher(policy, opts);
    dispatchers.push(d);
    return d;
  };
  const post = (url: string, dispatcher: Dispatcher) => deliverOnce({
    url, body: Buffer.from('{"a":1}'), contentType: 'application/json', headers: {}, timeoutMs: 5000, successStatusCodes: [200],
  }, dispatcher);

  before(async () => {
    server = http.createServer((req, res) => {
      received++;
      req.resume();
      req.on('end', () => res.end(`host=${req.headers.host}`));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    await Promise.all(dispatchers.map((d) => d.close()));
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('refuses literal private addresses, names them and why, and the receiver gets nothing', async () => {
    const before = received;
    const d = guard(CLOSED);
    const cases: Array<[string, RegExp]> = [
      [`http://127.0.0.1:${port}/hook`, /^refused: 127\.0\.0\.1 is a loopback address/],
      [`http://10.0.0.1:${port}/hook`, /^refused: 10\.0\.0\.1 is a private/],
      [`http://169.254.169.254/latest/meta-data/`, /^refused: 169\.254\.169\.254 is a link-local address \(the cloud metadata service\)/],
      [`http://[::1]:${port}/hook`, /^refused: ::1 is a loopback address/],
      [`http://[::ffff:127.0.0.1]:${port}/hook`, /^refused: ::ffff:7f00:1 is a loopback address \(IPv4-mapped 127\.0\.0\.1\)/],
      [`https://127.0.0.1:${port}/hook`, /^refused: 127\.0\.0\.1 is a loopback address/],
    ];
    for (const [url, why] of cases) {
      const r = await post(url, d);
      assert.equal(r.ok, false, url);
      assert.equal(r.statusCode, undefined, url);
      assert.match(r.error ?? '', why, url);
    }
    assert.equal(received, before);
  });

  it('refuses a name that resolves to 127.0.0.1 (localhost) and the receiver gets nothing; the error says the policy refused it, only our log says the address', async () => {
    const before = received;
    const heard: Array<Record<string, unknown>> = [];
    const r = await post(`http://localhost:${port}/hook`, guard(CLOSED, { log: { warn: (obj) => heard.push(obj as Record<string, unknown>) } }));
    assert.equal(r.ok, false);
    assert.equal(r.error, 'refused: localhost: the address policy refused the target; private targets are not allowed (CALLPLANE_ALLOW_PRIVATE_TARGETS)');
    assert.doesNotMatch(r.error ?? '', /127\.0\.0\.1|::1|loopback|resolves/);
    assert.equal(heard.length, 1);
    assert.equal(heard[0]!.host, 'localhost');
    assert.match(String(heard[0]!.address), /^(127\.0\.0\.1|::1)$/);
    assert.equal(heard[0]!.reason, 'a loopback address');
    assert.equal(received, before);
  });

  it('refuses a name when any one of its addresses is refused', async () => {
    const before = received;
    let calls = 0;
    const d = guard(CLOSED, {
      resolve: async () => {
        calls++;
        return [{ address: '93.184.216.34', family: 4 }, { address: '127.0.0.1', family: 4 }];
      },
    });
    const r = await post(`http://hooks.example.test:${port}/hook`, d);
    assert.equal(r.ok, false);
    assert.equal(r.error, 'refused: hooks.example.test: the address policy refused the target; private targets are not allowed (CALLPLANE_ALLOW_PRIVATE_TARGETS)');
    assert.equal(calls, 1);
    assert.equal(received, before);
  });

  it('connects to the very address it checked: a name only our resolver knows reaches the receiver once allowed', async () => {
    // The system resolver has never heard of this name, so reaching the receiver proves the socket
    // used the checked answer rather than resolving again.
    const resolved: string[] = [];
    const resolve = async (hostname: string) => {
      resolved.push(hostname);
      return [{ address: '127.0.0.1', family: 4 }];
    };
    const refusedHere = await post(`http://rebind.callplane.invalid:${port}/hook`, guard(CLOSED, { resolve }));
    assert.match(refusedHere.error ?? '', /^refused: rebind\.callplane\.invalid: the address policy refused the target; /);

    const r = await post(`http://rebind.callplane.invalid:${port}/hook`, guard({ allowPrivate: false, allowCidrs: ['127.0.0.0/8'] }, { resolve }));
    assert.equal(r.ok, true, r.error);
    assert.equal(r.responseExcerpt, `host=rebind.callplane.invalid:${port}`);
    assert.deepEqual(resolved, ['rebind.callplane.invalid', 'rebind.callplane.invalid']);
  });

  it('lets loopback through when private targets are allowed, or when the CIDR list covers it', async () => {
    const before = received;
    const open = await post(`http://127.0.0.1:${port}/hook`, guard(OPEN));
    assert.equal(open.ok, true, open.error);
    const byName = await post(`http://localhost:${port}/hook`, guard(OPEN));
    assert.equal(byName.ok, true, byName.error);
    const listed = await post(`http://127.0.0.1:${port}/hook`, guard({ allowPrivate: false, allowCidrs: ['127.0.0.0/8'] }));
    assert.equal(listed.ok, true, listed.error);
    const notListed = await post(`http://127.0.0.1:${port}/hook`, guard({ allowPrivate: false, allowCidrs: ['10.0.0.0/8'] }));
    assert.match(notListed.error ?? '', /^refused: 127\.0\.0\.1 is a loopback address/);
    assert.equal(received, before + 3);
  });
});
