// The SIP endpoint's transport and transaction behaviour, with raw UDP/TCP/TLS peers on loopback:
// binding errors, garbage, our own address as next hop, retransmissions both ways, received/rport,
// ACK of non-2xx finals, CANCEL of an inbound INVITE, TLS trust, IPv6, host names.
// @lane wall
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import dgram from 'node:dgram';
import dns from 'node:dns/promises';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { after, describe, it } from 'node:test';
import { newBranch, SipEndpoint, SipTargetRefusedError, SipTimeoutError, SipTransportError, type SipEndpointOptions } from '../../src/sip/endpoint.ts';
import { addressRefusal } from '../../src/webhooks/ssrf.ts';
import { parseCSeq, parseMessage, parseVia, SipHeaders, StreamFramer, type SipMessage, type SipRequest, type SipResponse } from '../../src/sip/message.ts';
import { freePort, sleep, udpPeer as rawUdpPeer, waitFor } from '../helpers/sip-peers.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

const endpoints: SipEndpoint[] = [];
async function endpoint(opts: Partial<SipEndpointOptions> = {}): Promise<SipEndpoint> {
  const ep = new SipEndpoint({ host: '127.0.0.1', port: 0, ...opts });
  await ep.start();
  endpoints.push(ep);
  return ep;
}
const peers: Array<{ close(): void }> = [];
after(async () => {
  for (const ep of endpoints) await ep.stop();
  for (const p of peers) p.close();
});

async function udpPeer(host = '127.0.0.1') {
  const peer = await rawUdpPeer(host);
  peers.push(peer);
  return peer;
}

const crlf = (...lines: string[]) => lines.join('\r\n');
function request(method: string, opts: { via: string; callId?: string; cseq?: number; extra?: string[]; uri?: string }): string {
  return crlf(
    `${method} ${opts.uri ?? 'sip:callplane@127.0.0.1'} SIP/2.0`, `Via: ${opts.via}`, 'Max-Forwards: 70', 'From: <sip:peer@example.test>;tag=peer1',
    'To: <sip:callplane@example.test>', `Call-ID: ${opts.callId ?? 'call-' + Math.random().toString(36).slice(2)}`, `CSeq: ${opts.cseq ?? 1} ${method}`,
    ...(opts.extra ?? []), 'Content-Length: 0', '', '',
  );
}
function reply(req: SipRequest, status: number, reason: string, extra: string[] = []): string {
  return crlf(`SIP/2.0 ${status} ${reason}`, ...req.headers.getAll('via').map((v) => `Via: ${v}`), `From: ${req.headers.get('from')}`,
    `To: ${req.headers.get('to')}${status > 100 ? ';tag=far' : ''}`, `Call-ID: ${req.headers.get('call-id')}`, `CSeq: ${req.headers.get('cseq')}`, ...extra, 'Content-Length: 0', '', '');
}
function options(uri: string): SipRequest {
  const h = new SipHeaders([['From', '<sip:callplane@example.test>;tag=a1'], ['To', `<${uri}>`], ['Call-ID', `opt-${Math.random()}`], ['CSeq', '1 OPTIONS']]);
  return { kind: 'request', method: 'OPTIONS', uri, headers: h, body: Buffer.alloc(0) };
}

describe('SipEndpoint: listening', () => {
  it('start() names the transport, host and port when UDP is taken', async () => {
    const holder = dgram.createSocket('udp4');
    await new Promise<void>((r) => holder.bind({ address: '127.0.0.1', port: 0, exclusive: true }, () => r()));
    peers.push(holder);
    const port = holder.address().port;
    await assert.rejects(new SipEndpoint({ host: '127.0.0.1', port }).start(), { message: `SIP endpoint cannot listen on UDP 127.0.0.1:${port}: address already in use` });
  });

  it('start() names TCP when only TCP is taken, and frees the UDP port it had bound', async () => {
    const port = await freePort('127.0.0.1');
    const holder = net.createServer();
    await new Promise<void>((r) => holder.listen({ host: '127.0.0.1', port }, () => r()));
    try {
      await assert.rejects(new SipEndpoint({ host: '127.0.0.1', port }).start(), { message: `SIP endpoint cannot listen on TCP 127.0.0.1:${port}: address already in use` });
      const udp = dgram.createSocket('udp4');
      await new Promise<void>((resolve, reject) => { udp.once('error', reject); udp.bind({ address: '127.0.0.1', port }, () => resolve()); });
      udp.close();
    } finally {
      holder.close();
    }
  });

  it('start() refuses a host name or an address this machine does not have', async () => {
    await assert.rejects(new SipEndpoint({ host: 'localhost', port: 0 }).start(), /must be an IP address/);
    await assert.rejects(new SipEndpoint({ host: '192.0.2.77', port: 0 }).start(), /cannot listen on UDP 192\.0\.2\.77:0: address not available/);
  });

  it('port 0 gets one port for both UDP and TCP', async () => {
    const ep = await endpoint({ host: '127.0.0.7' });
    assert.ok(ep.port > 0);
    await assert.rejects(new SipEndpoint({ host: '127.0.0.7', port: ep.port, listen: ['TCP'] }).start(), /TCP 127\.0\.0\.7/);
  });
});

describe('SipEndpoint: server side', () => {
  it('survives garbage datagrams and streams, and keeps answering', async () => {
    let handled = 0;
    const ep = await endpoint({ onRequest: (req, ctx) => { handled++; ep.respond(req, ctx, 200, 'OK'); } });
    const peer = await udpPeer();
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) % 256);
    for (let i = 0; i < 200; i++) await peer.send(Buffer.from(Array.from({ length: 1 + (i * 37) % 1400 }, rand)), ep.port);
    for (const junk of ['INVITE sip:x SIP/2.0\r\n\r\n', 'SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 1.2.3.4;branch=z9hG4bKnone\r\nCSeq: 1 INVITE\r\n\r\n', 'OPTIONS sip:a@b SIP/2.0\r\nVia: garbage\r\nCall-ID: x\r\nCSeq: 1 OPTIONS\r\nFrom: <sip:a@b>\r\nTo: <sip:a@b>\r\n\r\n', '\r\n\r\n', '']) {
      await peer.send(junk, ep.port);
    }
    // A stream that loses framing is closed; the listener stays.
    const bad = net.connect({ host: '127.0.0.1', port: ep.port });
    await new Promise((r) => bad.once('connect', r));
    bad.write('OPTIONS sip:a@b SIP/2.0\r\nVia: SIP/2.0/TCP h;branch=z9hG4bK1\r\n\r\n');
    await new Promise((r) => bad.once('close', r));
    await peer.send(request('OPTIONS', { via: `SIP/2.0/UDP 127.0.0.1:${peer.port};branch=${newBranch()}` }), ep.port);
    await waitFor('an answer', () => peer.got.some((m) => m.kind === 'response' && m.status === 200), 3000);
    assert.equal(handled, 1);
  });

  it('absorbs a retransmitted request: one dispatch, the last response repeated', async () => {
    let handled = 0;
    const ep = await endpoint({ onRequest: async (req, ctx) => { handled++; await sleep(150); ep.respond(req, ctx, 202, 'Accepted'); } });
    const peer = await udpPeer();
    const msg = request('MESSAGE', { via: `SIP/2.0/UDP 127.0.0.1:${peer.port};branch=${newBranch()};rport` });
    await peer.send(msg, ep.port);
    await peer.send(msg, ep.port); // while the handler is still working: dropped
    await waitFor('the answer', () => peer.got.length === 1, 2000);
    await peer.send(msg, ep.port);
    await peer.send(msg, ep.port);
    await waitFor('two repeats', () => peer.got.length === 3, 2000);
    assert.equal(handled, 1);
    const [a, b, c] = peer.got.map((m) => m as SipResponse);
    assert.deepEqual([a.status, b.status, c.status], [202, 202, 202]);
    assert.equal(a.headers.get('to'), c.headers.get('to'));
    assert.match(a.headers.get('to')!, /;tag=\w+/);
  });

  it('answers to the source port with rport (RFC 3581), to the Via port without it', async () => {
    const ep = await endpoint({ onRequest: (req, ctx) => ep.respond(req, ctx, 200, 'OK') });
    const sender = await udpPeer();
    const elsewhere = await udpPeer();
    await sender.send(request('OPTIONS', { via: `SIP/2.0/UDP 198.51.100.7:5999;branch=${newBranch()};rport` }), ep.port);
    await waitFor('the rport answer', () => sender.got.length === 1, 2000);
    const via = parseVia((sender.got[0] as SipResponse).headers.getAll('via')[0]);
    assert.deepEqual([via.host, via.port, via.params.received, via.params.rport], ['198.51.100.7', 5999, '127.0.0.1', String(sender.port)]);
    // No rport: the response goes to the address it came from and the port in Via.
    await sender.send(request('OPTIONS', { via: `SIP/2.0/UDP 127.0.0.1:${elsewhere.port};branch=${newBranch()}` }), ep.port);
    await waitFor('the Via-port answer', () => elsewhere.got.length === 1, 2000);
    assert.equal(sender.got.length, 1);
    assert.equal(parseVia((elsewhere.got[0] as SipResponse).headers.getAll('via')[0]).params.received, undefined);
  });

  it('answers over the same TCP connection, whatever the chunking', async () => {
    const ep = await endpoint({ onRequest: (req, ctx) => ep.respond(req, ctx, 200, 'OK', { 'X-Transport': ctx.remote.transport }) });
    const sock = net.connect({ host: '127.0.0.1', port: ep.port });
    peers.push({ close: () => sock.destroy() });
    const framer = new StreamFramer();
    const got: SipMessage[] = [];
    sock.on('data', (d) => got.push(...framer.push(d)));
    await new Promise((r) => sock.once('connect', r));
    const text = Buffer.from(request('OPTIONS', { via: `SIP/2.0/TCP 127.0.0.1:1;branch=${newBranch()}` }) + request('OPTIONS', { via: `SIP/2.0/TCP 127.0.0.1:1;branch=${newBranch()}` }));
    for (let i = 0; i < text.length; i += 13) { sock.write(text.subarray(i, i + 13)); await sleep(1); }
    await waitFor('two answers', () => got.length === 2, 3000);
    assert.deepEqual(got.map((m) => m.headers.get('x-transport')), ['TCP', 'TCP']);
  });

  it('retransmits a non-2xx final to an INVITE until the ACK, which it absorbs', async () => {
    const dispatched: string[] = [];
    const ep = await endpoint({ onRequest: (req, ctx) => { dispatched.push(req.method); if (req.method === 'INVITE') ep.respond(req, ctx, 403, 'Forbidden'); } });
    const peer = await udpPeer();
    const branch = newBranch();
    const via = `SIP/2.0/UDP 127.0.0.1:${peer.port};branch=${branch};rport`;
    await peer.send(request('INVITE', { via, callId: 'inv-403' }), ep.port);
    await waitFor('the 403 repeated', () => peer.got.length >= 2, 3000);
    await peer.send(request('ACK', { via, callId: 'inv-403' }), ep.port);
    await sleep(100);
    const count = peer.got.length;
    await sleep(2500);
    assert.equal(peer.got.length, count, 'no retransmission after the ACK');
    assert.deepEqual(dispatched, ['INVITE']);
    assert.ok(peer.got.every((m) => m.kind === 'response' && m.status === 403));
  });

  it('answers a CANCEL of a ringing inbound INVITE: 200 to the CANCEL, 487 to the INVITE', async () => {
    const ep = await endpoint({ onRequest: (req, ctx) => { if (req.method === 'INVITE') ep.respond(req, ctx, 180, 'Ringing'); } });
    const peer = await udpPeer();
    const via = `SIP/2.0/UDP 127.0.0.1:${peer.port};branch=${newBranch()};rport`;
    await peer.send(request('INVITE', { via, callId: 'inv-cancel' }), ep.port);
    await waitFor('ringing', () => peer.got.length === 1, 2000);
    await peer.send(request('CANCEL', { via, callId: 'inv-cancel' }), ep.port);
    await waitFor('two answers', () => peer.got.length >= 3, 2000);
    const byMethod = peer.got.map((m) => `${(m as SipResponse).status} ${parseCSeq(m.headers.get('cseq')!).method}`);
    assert.deepEqual(byMethod.slice(0, 3), ['180 INVITE', '200 CANCEL', '487 INVITE']);
    // A CANCEL for nothing we know.
    await peer.send(request('CANCEL', { via: `SIP/2.0/UDP 127.0.0.1:${peer.port};branch=${newBranch()};rport`, callId: 'nothing' }), ep.port);
    await waitFor('481', () => peer.got.some((m) => m.kind === 'response' && m.status === 481), 2000);
  });

  it('without a handler: OPTIONS 200, other methods 501; a handler that throws gives 500', async () => {
    const plain = await endpoint();
    const throwing = await endpoint({ onRequest: () => { throw new Error('boom'); } });
    const peer = await udpPeer();
    await peer.send(request('OPTIONS', { via: `SIP/2.0/UDP 127.0.0.1:${peer.port};branch=${newBranch()};rport` }), plain.port);
    await peer.send(request('SUBSCRIBE', { via: `SIP/2.0/UDP 127.0.0.1:${peer.port};branch=${newBranch()};rport` }), plain.port);
    await peer.send(request('OPTIONS', { via: `SIP/2.0/UDP 127.0.0.1:${peer.port};branch=${newBranch()};rport` }), throwing.port);
    await waitFor('three answers', () => peer.got.length === 3, 2000);
    assert.deepEqual(peer.got.map((m) => (m as SipResponse).status).sort(), [200, 500, 501]);
  });
});

describe('SipEndpoint: client side', () => {
  it('retransmits a request over UDP (T1, doubling) until an answer arrives', async () => {
    const ep = await endpoint();
    const peer = await udpPeer('127.0.0.8');
    const copies: number[] = [];
    peer.sock.on('message', (b, rinfo) => {
      copies.push(Date.now());
      if (copies.length === 3) peer.sock.send(Buffer.from(reply(parseMessage(b) as SipRequest, 200, 'OK')), rinfo.port, rinfo.address);
    });
    const res = await ep.request(options(`sip:peer@127.0.0.8:${peer.port}`), { transport: 'UDP', host: '127.0.0.8', port: peer.port });
    assert.equal(res.status, 200);
    assert.equal(copies.length, 3);
    assert.ok(copies[2] - copies[1] > copies[1] - copies[0], 'intervals double');
  });

  it('rejects with SipTimeoutError after timeoutMs', async () => {
    const ep = await endpoint();
    const port = await freePort('127.0.0.8');
    const err = await ep.request(options('sip:x@127.0.0.8'), { transport: 'UDP', host: '127.0.0.8', port }, { timeoutMs: 700 }).catch((e) => e);
    assert.ok(err instanceof SipTimeoutError);
    assert.equal(err.code, 'SIP_TIMEOUT');
    assert.match(err.message, new RegExp(`no final response to OPTIONS from udp:127\\.0\\.0\\.8:${port} within 700 ms`));
  });

  it('refuses a next hop on its own address (UDP, TCP, and via a wildcard bind)', async () => {
    const ep = await endpoint();
    for (const transport of ['UDP', 'TCP'] as const) {
      await assert.rejects(ep.request(options('sip:me@127.0.0.1'), { transport, host: '127.0.0.1', port: ep.port }), (e: Error) => e instanceof SipTransportError && /own address/.test(e.message));
    }
    const wild = await endpoint({ host: '0.0.0.0' });
    await assert.rejects(wild.request(options('sip:me@127.0.0.1'), { transport: 'UDP', host: '127.0.0.1', port: wild.port }), /own address/);
    await assert.rejects(wild.send(options('sip:me@127.0.0.1'), { transport: 'UDP', host: '127.0.0.1', port: wild.port }), /own address/);
  });

  it('ACKs a non-2xx final to INVITE in the transaction (same branch, To tag) and again for a repeat', async () => {
    const ep = await endpoint();
    const peer = await udpPeer('127.0.0.8');
    const acks: SipRequest[] = [];
    peer.sock.on('message', (b, rinfo) => {
      const m = parseMessage(b) as SipRequest;
      if (m.method === 'INVITE') {
        const r = Buffer.from(reply(m, 486, 'Busy Here'));
        peer.sock.send(r, rinfo.port, rinfo.address);
        setTimeout(() => peer.sock.send(r, rinfo.port, rinfo.address), 100); // as if our ACK were lost
      } else if (m.method === 'ACK') acks.push(m);
    });
    const invite = options(`sip:peer@127.0.0.8:${peer.port}`);
    invite.method = 'INVITE';
    invite.headers.set('CSeq', '7 INVITE');
    const res = await ep.request(invite, { transport: 'UDP', host: '127.0.0.8', port: peer.port });
    assert.equal(res.status, 486);
    await waitFor('two ACKs', () => acks.length === 2, 2000);
    const inviteVia = parseVia(invite.headers.getAll('via')[0]);
    for (const ack of acks) {
      assert.equal(parseVia(ack.headers.getAll('via')[0]).params.branch, inviteVia.params.branch);
      assert.equal(ack.headers.get('cseq'), '7 ACK');
      assert.match(ack.headers.get('to')!, /;tag=far$/);
      assert.equal(ack.uri, invite.uri);
    }
  });

  it('reuses one TCP connection per destination and takes requests arriving on it', async () => {
    const server = net.createServer();
    const conns: net.Socket[] = [];
    const framers = new Map<net.Socket, StreamFramer>();
    server.on('connection', (s) => {
      conns.push(s);
      framers.set(s, new StreamFramer());
      s.on('data', (d) => {
        for (const m of framers.get(s)!.push(d)) {
          if (m.kind === 'request') {
            s.write(reply(m, 200, 'OK'));
            // The registrar's side sends a request back over the same connection.
            s.write(request('OPTIONS', { via: `SIP/2.0/TCP 127.0.0.8:9;branch=${newBranch()}` }));
          }
        }
      });
    });
    await new Promise<void>((r) => server.listen({ host: '127.0.0.8', port: 0 }, () => r()));
    peers.push({ close: () => { for (const c of conns) c.destroy(); server.close(); } });
    const port = (server.address() as net.AddressInfo).port;
    const inbound: string[] = [];
    const ep = await endpoint({ onRequest: (req, ctx) => { inbound.push(`${req.method} ${ctx.remote.transport}`); ep.respond(req, ctx, 200, 'OK'); } });
    for (let i = 0; i < 3; i++) assert.equal((await ep.request(options(`sip:p@127.0.0.8:${port}`), { transport: 'TCP', host: '127.0.0.8', port })).status, 200);
    assert.equal(conns.length, 1);
    assert.equal(conns[0].remoteAddress, '127.0.0.1', 'the connection comes from our address');
    await waitFor('the requests over our connection', () => inbound.length === 3, 2000);
    assert.deepEqual(inbound, ['OPTIONS TCP', 'OPTIONS TCP', 'OPTIONS TCP']);
  });

  it('stop() rejects what is still pending', async () => {
    const ep = new SipEndpoint({ host: '127.0.0.1', port: 0 });
    await ep.start();
    const port = await freePort('127.0.0.8');
    const pending = ep.request(options('sip:x@127.0.0.8'), { transport: 'UDP', host: '127.0.0.8', port });
    await sleep(50);
    await ep.stop();
    await assert.rejects(pending, (e: Error) => e instanceof SipTransportError && /stopped/.test(e.message));
  });
});

describe('SipEndpoint: TLS, host names and IPv6', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-tls-'));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  function cert(): { key: Buffer; cert: Buffer } {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', path.join(dir, 'key.pem'),
      '-out', path.join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1'], { stdio: 'ignore' });
    return { key: fs.readFileSync(path.join(dir, 'key.pem')), cert: fs.readFileSync(path.join(dir, 'cert.pem')) };
  }

  it('sends over TLS to a host name when the CA is trusted, and refuses an untrusted certificate', { skip: toolsSkip('openssl') }, async () => {
    const creds = cert();
    const { address } = await dns.lookup('localhost');
    const server = tls.createServer(creds, (s) => {
      const framer = new StreamFramer();
      s.on('data', (d) => { for (const m of framer.push(d)) if (m.kind === 'request') s.write(reply(m, 200, 'OK', ['X-Over: tls'])); });
      s.on('error', () => undefined);
    });
    await new Promise<void>((r) => server.listen({ host: address, port: 0 }, () => r()));
    peers.push(server);
    const port = (server.address() as net.AddressInfo).port;
    const trusting = await endpoint({ tls: { ca: creds.cert } });
    const res = await trusting.request(options(`sip:p@localhost:${port}`), { transport: 'TLS', host: 'localhost', port });
    assert.equal(res.headers.get('x-over'), 'tls');
    const wary = await endpoint();
    await assert.rejects(wary.request(options(`sip:p@localhost:${port}`), { transport: 'TLS', host: 'localhost', port }), (e: Error) => e instanceof SipTransportError && /TLS connection .* failed: .*(SELF_SIGNED|self-signed)/i.test(e.message));
    const lax = await endpoint({ tls: { rejectUnauthorized: false } });
    assert.equal((await lax.request(options(`sip:p@localhost:${port}`), { transport: 'TLS', host: 'localhost', port })).status, 200);
  });

  it('refuses, before sending anything, a destination the address policy refuses: a literal, and every address a name resolves to', async () => {
    const policy = { allowPrivate: false, allowCidrs: ['127.0.0.30/32'] };
    const ep = await endpoint({ refuseTarget: (address, name) => addressRefusal(address, policy, name) });
    const peer = await udpPeer('127.0.0.1');
    const listener = net.createServer((s) => { connections++; s.destroy(); });
    let connections = 0;
    await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
    const tcpPort = (listener.address() as net.AddressInfo).port;
    try {
      const refused = (re: RegExp) => (e: Error) => e instanceof SipTargetRefusedError && re.test(e.message);
      await assert.rejects(ep.request(options('sip:x@127.0.0.1'), { transport: 'UDP', host: '127.0.0.1', port: peer.port }),
        refused(/^127\.0\.0\.1 is a loopback address; private targets are not allowed \(CALLPLANE_ALLOW_PRIVATE_TARGETS\)$/));
      // localhost resolves to loopback only: a name is checked after it is resolved, each address of it.
      // The refusal of a name does not say what it resolved to (the address is the error's, for our log).
      const byName = /^localhost: the address policy refused the target; private targets are not allowed \(CALLPLANE_ALLOW_PRIVATE_TARGETS\)$/;
      await assert.rejects(ep.request(options('sip:x@localhost'), { transport: 'UDP', host: 'localhost', port: peer.port }), refused(byName));
      await assert.rejects(ep.request(options('sip:x@localhost'), { transport: 'TCP', host: 'localhost', port: tcpPort }), refused(byName));
      await assert.rejects(ep.send(options('sip:x@localhost'), { transport: 'UDP', host: 'localhost', port: peer.port }), refused(byName));
      await assert.rejects(ep.request(options('sip:x@169.254.169.254'), { transport: 'TCP', host: '169.254.169.254', port: 80 }), refused(/cloud metadata/));
      await assert.rejects(ep.request(options('sip:x@[::ffff:127.0.0.1]'), { transport: 'UDP', host: '[::ffff:127.0.0.1]', port: peer.port }), refused(/loopback/));
      await sleep(300);
      assert.equal(peer.got.length, 0, 'no datagram was sent');
      assert.equal(connections, 0, 'no connection was opened');
      // What the allow-list opens is reached.
      const opened = await udpPeer('127.0.0.30');
      const pending = ep.request(options('sip:x@127.0.0.30'), { transport: 'UDP', host: '127.0.0.30', port: opened.port }, { timeoutMs: 3000 });
      const req = await waitFor('the request at the opened address', () => opened.got.find((m) => m.kind === 'request'));
      await opened.send(reply(req as SipRequest, 200, 'OK'), ep.port, '127.0.0.1');
      assert.equal((await pending).status, 200);
    } finally {
      listener.close();
    }
  });

  it('reports a name that does not resolve', async () => {
    const ep = await endpoint();
    await assert.rejects(ep.request(options('sip:x@nowhere.invalid'), { transport: 'UDP', host: 'nowhere.invalid', port: 5060 }), (e: Error) => e instanceof SipTransportError && /cannot resolve SIP host nowhere\.invalid/.test(e.message));
  });

  it('works on IPv6 loopback with bracketed Via and Contact hosts', async () => {
    const ep = await endpoint({ host: '::1', onRequest: (req, ctx) => ep.respond(req, ctx, 200, 'OK') });
    assert.match(ep.viaFor('UDP'), new RegExp(`^SIP/2\\.0/UDP \\[::1\\]:${ep.port};branch=z9hG4bK\\w+;rport$`));
    assert.equal(ep.contactFor('alice', 'TCP'), `<sip:alice@[::1]:${ep.port};transport=tcp>`);
    const peer = await udpPeer('::1');
    await peer.send(request('OPTIONS', { via: `SIP/2.0/UDP [::1]:${peer.port};branch=${newBranch()};rport`, uri: `sip:x@[::1]:${ep.port}` }), ep.port);
    await waitFor('an answer', () => peer.got.length === 1, 2000);
    const via = parseVia((peer.got[0] as SipResponse).headers.getAll('via')[0]);
    assert.equal(via.params.rport, String(peer.port));
    // And as a client.
    peer.sock.on('message', (b, rinfo) => { const m = parseMessage(b); if (m.kind === 'request') peer.sock.send(reply(m, 200, 'OK'), rinfo.port, rinfo.address); });
    assert.equal((await ep.request(options(`sip:p@[::1]:${peer.port}`), { transport: 'UDP', host: '[::1]', port: peer.port })).status, 200);
  });
});
