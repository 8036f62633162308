// GET /api/v2/sip/captures?format=pcap and format=transaction. The pcap is read back twice: by a
// parser written here from the libpcap/Ethernet/IP/UDP/TCP layouts, and by tshark (Wireshark's
// reader; CI installs it) when it is installed. The captures come from a real REGISTER exchange
// of the harness's SIP runtime (UDP, IPv4) and from rows of a call over TCP and IPv6.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, it } from 'node:test';
import { newId } from '../../src/lib/ids.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { startFakeRegistrar, type FakeRegistrar } from '../helpers/fake-registrar.ts';
import { waitFor } from '../helpers/sip-peers.ts';
import { toolsSkip, which } from '../helpers/system-tools.ts';

const TSHARK = which('tshark', ['/usr/bin', '/usr/local/bin']);

interface Packet {
  tsMs: number; ethertype: number; src: string; dst: string; proto: number; srcPort: number; dstPort: number;
  seq?: number; ack?: number; payload: string;
}

/** An IPv6 address from 16 bytes, in the shortest form (for comparison with what we sent). */
function v6(b: Buffer): string {
  const groups = Array.from({ length: 8 }, (_, i) => b.readUInt16BE(i * 2).toString(16));
  return groups.join(':').replace(/(^|:)0(:0)+(:|$)/, '::').replace(/:{3,}/, '::');
}

/** Reads a libpcap file (little-endian, microseconds, Ethernet) into its packets. */
function readPcap(file: Buffer): Packet[] {
  assert.equal(file.readUInt32LE(0), 0xa1b2c3d4, 'libpcap magic (microsecond timestamps)');
  assert.deepEqual([file.readUInt16LE(4), file.readUInt16LE(6)], [2, 4], 'version 2.4');
  assert.equal(file.readUInt32LE(20), 1, 'link type Ethernet');
  const out: Packet[] = [];
  let at = 24;
  while (at < file.length) {
    const tsMs = file.readUInt32LE(at) * 1000 + file.readUInt32LE(at + 4) / 1000;
    const incl = file.readUInt32LE(at + 8);
    assert.equal(file.readUInt32LE(at + 12), incl);
    const frame = file.subarray(at + 16, at + 16 + incl);
    at += 16 + incl;
    const ethertype = frame.readUInt16BE(12);
    let l4: Buffer; let src: string; let dst: string; let proto: number;
    if (ethertype === 0x0800) {
      const ip = frame.subarray(14);
      assert.equal(ip[0], 0x45);
      assert.equal(ip.readUInt16BE(2), ip.length, 'IPv4 total length');
      proto = ip[9];
      src = [...ip.subarray(12, 16)].join('.');
      dst = [...ip.subarray(16, 20)].join('.');
      l4 = ip.subarray(20);
    } else {
      assert.equal(ethertype, 0x86dd);
      const ip = frame.subarray(14);
      assert.equal(ip[0] >> 4, 6);
      assert.equal(ip.readUInt16BE(4), ip.length - 40, 'IPv6 payload length');
      proto = ip[6];
      src = v6(ip.subarray(8, 24));
      dst = v6(ip.subarray(24, 40));
      l4 = ip.subarray(40);
    }
    const srcPort = l4.readUInt16BE(0);
    const dstPort = l4.readUInt16BE(2);
    if (proto === 17) {
      assert.equal(l4.readUInt16BE(4), l4.length, 'UDP length');
      out.push({ tsMs, ethertype, src, dst, proto, srcPort, dstPort, payload: l4.subarray(8).toString('utf8') });
    } else {
      assert.equal(proto, 6);
      const offset = (l4[12] >> 4) * 4;
      out.push({ tsMs, ethertype, src, dst, proto, srcPort, dstPort, seq: l4.readUInt32BE(4), ack: l4.readUInt32BE(8), payload: l4.subarray(offset).toString('utf8') });
    }
  }
  return out;
}

/** tshark's reading of the file: one array of the fields per packet. */
function tshark(file: Buffer, decodeAs: string[], fields: string[]): string[][] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-pcap-'));
  try {
    const f = path.join(dir, 'capture.pcap');
    fs.writeFileSync(f, file);
    const out = execFileSync(TSHARK!, [
      '-r', f, '-o', 'tcp.check_checksum:TRUE', '-o', 'udp.check_checksum:TRUE', '-o', 'ip.check_checksum:TRUE',
      ...decodeAs.flatMap((d) => ['-d', d]), '-T', 'fields', '-E', 'separator=|', ...fields.flatMap((e) => ['-e', e]),
    ], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return out.trim().split('\n').map((line) => line.split('|'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

let registrar: FakeRegistrar;
before(async () => { registrar = await startFakeRegistrar(); });
after(async () => { await registrar?.close(); });

forEachEngine('SIP captures as pcap and transactions', (h) => {
  const captures = (token: string, query: Record<string, unknown>) => h().app.inject({ method: 'GET', url: '/api/v2/sip/captures', query: { token, ...query } as Record<string, string> });

  it('format=pcap of a REGISTER exchange: one UDP/IPv4 packet per message, addresses, ports and times as captured', async (t) => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const aor = `sip:${h().engine}-pcap@${registrar.host}:${registrar.port}`;
    const created = await h().call('POST', '/api/v2/sip/registration', { token: o.token, body: { aor, password: 'pw-1' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const row = await waitFor('captured REGISTER', () => h().database.db.selectFrom('sip_captures').select('call_id').where('org_id', '=', o.id).executeTakeFirst());
    const json = await waitFor('both messages captured', async () => {
      const res = await h().call('GET', '/api/v2/sip/captures', { token: o.token, query: { sipCallId: row.call_id } });
      return res.status === 200 && res.body.captures.length >= 2 ? res.body : undefined;
    });

    const res = await captures(o.token, { sipCallId: row.call_id, format: 'PCAP' });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.headers['content-type'], 'application/vnd.tcpdump.pcap');
    assert.match(String(res.headers['content-disposition']), /^attachment; filename="sip-[\w.-]+\.pcap"$/);
    const packets = readPcap(res.rawPayload);
    assert.equal(packets.length, json.captures.length);
    const ourPort = h().sip!.endpoint!.port;
    packets.forEach((p, i) => {
      const c = json.captures[i];
      assert.equal(p.tsMs, c.timestamp, 'the capture time');
      assert.deepEqual([p.ethertype, p.proto], [0x0800, 17]);
      assert.equal(`${p.src}:${p.srcPort}`, c.source);
      assert.equal(`${p.dst}:${p.dstPort}`, c.destination);
      assert.equal(p.payload, c.message);
    });
    assert.deepEqual([packets[0].src, packets[0].srcPort, packets[0].dst, packets[0].dstPort], ['127.0.0.1', ourPort, registrar.host, registrar.port]);
    assert.match(packets[0].payload, /^REGISTER sip:/);
    assert.match(packets[1].payload, /^SIP\/2\.0 200 OK/);

    await t.test('tshark reads the file the same way', { skip: toolsSkip('tshark') }, () => {
      const read = tshark(res.rawPayload, [`udp.port==${registrar.port},sip`],
        ['frame.time_epoch', 'ip.src', 'udp.srcport', 'ip.dst', 'udp.dstport', 'sip.Method', 'sip.Status-Code', 'sip.Call-ID', 'ip.checksum.status', 'udp.checksum.status']);
      assert.equal(read.length, packets.length, JSON.stringify(read));
      read.forEach(([time, src, sport, dst, dport, method, status, callId, ipSum, udpSum], i) => {
        assert.equal(Math.round(Number(time) * 1000), json.captures[i].timestamp);
        assert.equal(`${src}:${sport}`, json.captures[i].source);
        assert.equal(`${dst}:${dport}`, json.captures[i].destination);
        assert.equal(callId, row.call_id);
        assert.deepEqual([ipSum, udpSum], ['1', '1'], 'tshark finds the checksums good (0 bad, 1 good, 2 unverified)');
        if (i === 0) assert.deepEqual([method, status], ['REGISTER', '']);
        if (i === 1) assert.deepEqual([method, status], ['', '200']);
      });
    });
  });

  // A call over TCP and IPv6: an INVITE challenged (407) and ACKed in its transaction, the INVITE
  // again (a new branch) answered 200 twice (a retransmission), its ACK (a branch of its own), a BYE.
  const callId = 'tx-call@2001:db8::9';
  const via = (branch: string, host = '[2001:db8::1]:5070') => `Via: SIP/2.0/TCP ${host};branch=${branch}`;
  const msg = (start: string, branch: string, cseq: string) =>
    `${start}\r\n${via(branch)}\r\nFrom: <sip:a@x>;tag=1\r\nTo: <sip:b@y>\r\nCall-ID: ${callId}\r\nCSeq: ${cseq}\r\nContent-Length: 0\r\n\r\n`;
  const CALL: Array<['in' | 'out', string]> = [
    ['out', msg('INVITE sip:b@[2001:db8::9] SIP/2.0', 'z9hG4bK-1', '1 INVITE')],
    ['in', msg('SIP/2.0 100 Trying', 'z9hG4bK-1', '1 INVITE')],
    ['in', msg('SIP/2.0 407 Proxy Authentication Required', 'z9hG4bK-1', '1 INVITE')],
    ['out', msg('ACK sip:b@[2001:db8::9] SIP/2.0', 'z9hG4bK-1', '1 ACK')],
    ['out', msg('INVITE sip:b@[2001:db8::9] SIP/2.0', 'z9hG4bK-2', '2 INVITE')],
    ['in', msg('SIP/2.0 200 OK', 'z9hG4bK-2', '2 INVITE')],
    ['in', msg('SIP/2.0 200 OK', 'z9hG4bK-2', '2 INVITE')],
    ['out', msg('ACK sip:b@[2001:db8::9] SIP/2.0', 'z9hG4bK-3', '2 ACK')],
    ['in', msg('BYE sip:a@[2001:db8::1]:5070 SIP/2.0', 'z9hG4bK-far', '7 BYE')],
    ['out', msg('SIP/2.0 200 OK', 'z9hG4bK-far', '7 BYE')],
  ];
  async function insertCall(orgId: number, t0: number) {
    await h().database.db.insertInto('sip_captures').values(CALL.map(([direction, message], i) => ({
      id: newId('cap', t0 + i), org_id: orgId, call_id: callId, direction, transport: 'TCP',
      remote: '[2001:db8::9]:5060', local: '[2001:db8::1]:5070', message, created_at: t0 + i * 10 + (i % 3),
    }))).execute();
  }

  it('format=transaction groups the messages by top Via branch and CSeq method (the ACK of a non-2xx in its INVITE transaction)', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const t0 = Date.now() - 10_000;
    await insertCall(o.id, t0);
    const res = await h().call('GET', '/api/v2/sip/captures', { token: o.token, query: { sipCallId: callId, format: 'transaction' } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual([res.body.success, res.body.sipCallId, res.body.count], [true, callId, 4]);
    const summary = res.body.transactions.map((t: any) => [t.branch, t.method, t.cseq, t.finalStatus, t.messages.map((m: any) => m.message.split('\r\n')[0].replace(/ sip:\S+ SIP\/2\.0$/, ''))]);
    assert.deepEqual(summary, [
      ['z9hG4bK-1', 'INVITE', 1, 407, ['INVITE', 'SIP/2.0 100 Trying', 'SIP/2.0 407 Proxy Authentication Required', 'ACK']],
      ['z9hG4bK-2', 'INVITE', 2, 200, ['INVITE', 'SIP/2.0 200 OK', 'SIP/2.0 200 OK']],
      ['z9hG4bK-3', 'ACK', 2, null, ['ACK']],
      ['z9hG4bK-far', 'BYE', 7, 200, ['BYE', 'SIP/2.0 200 OK']],
    ]);
    const first = res.body.transactions[0];
    assert.deepEqual([first.firstAt, first.lastAt], [t0, t0 + 30]);
    assert.deepEqual(Object.keys(first.messages[0]).sort(), ['destination', 'direction', 'firstLine', 'message', 'source', 'timestamp', 'transport']);
    assert.deepEqual([first.messages[0].source, first.messages[1].source], ['[2001:db8::1]:5070', '[2001:db8::9]:5060']);
    // The window applies as for json; nothing in it is a 404.
    const later = await h().call('GET', '/api/v2/sip/captures', { token: o.token, query: { sipCallId: callId, format: 'transaction', from: t0 + 80 } });
    assert.deepEqual(later.body.transactions.map((t: any) => t.method), ['BYE']);
    assert.equal((await h().call('GET', '/api/v2/sip/captures', { token: o.token, query: { sipCallId: 'none@x', format: 'transaction' } })).status, 404);
  });

  it('format=pcap of a call over TCP and IPv6: IPv6/TCP segments with sequence numbers continuing per direction', async (t) => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const t0 = Date.now() - 10_000;
    await insertCall(o.id, t0);
    const res = await captures(o.token, { sipCallId: callId, format: 'pcap' });
    assert.equal(res.statusCode, 200, res.body);
    const packets = readPcap(res.rawPayload);
    assert.equal(packets.length, CALL.length);
    const next = new Map<string, number>();
    packets.forEach((p, i) => {
      const [direction, message] = CALL[i];
      assert.deepEqual([p.ethertype, p.proto], [0x86dd, 6]);
      const [src, dst] = direction === 'out' ? [['2001:db8::1', 5070], ['2001:db8::9', 5060]] : [['2001:db8::9', 5060], ['2001:db8::1', 5070]];
      assert.deepEqual([p.src, p.srcPort, p.dst, p.dstPort], [...src, ...dst]);
      assert.equal(p.payload, message);
      assert.equal(p.tsMs, t0 + i * 10 + (i % 3));
      const key = direction;
      assert.equal(p.seq, next.get(key) ?? 1, 'a direction\'s bytes follow on');
      next.set(key, (next.get(key) ?? 1) + Buffer.byteLength(message));
      assert.equal(p.ack, next.get(direction === 'out' ? 'in' : 'out') ?? 1, 'acknowledges what the other side sent');
    });

    await t.test('tshark reads the file the same way', { skip: toolsSkip('tshark') }, () => {
      const read = tshark(res.rawPayload, ['tcp.port==5070,sip'],
        ['ipv6.src', 'tcp.srcport', 'ipv6.dst', 'tcp.dstport', 'sip.Method', 'sip.Status-Code', 'sip.CSeq.method', 'tcp.checksum.status']);
      assert.deepEqual(read.map((f) => [f[0], f[1], f[2], f[3]].join(' ')), CALL.map(([d]) => (d === 'out' ? '2001:db8::1 5070 2001:db8::9 5060' : '2001:db8::9 5060 2001:db8::1 5070')));
      assert.deepEqual(read.map((f) => f[4] || f[5]), ['INVITE', '100', '407', 'ACK', 'INVITE', '200', '200', 'ACK', 'BYE', '200']);
      assert.deepEqual(read.map((f) => f[6]), ['INVITE', 'INVITE', 'INVITE', 'ACK', 'INVITE', 'INVITE', 'INVITE', 'ACK', 'BYE', 'BYE']);
      assert.ok(read.every((f) => f[7] === '1'), `tshark finds every TCP checksum good: ${JSON.stringify(read.map((f) => f[7]))}`);
    });
  });
}, { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, { sip: {} }); // the registrar under test listens on loopback
