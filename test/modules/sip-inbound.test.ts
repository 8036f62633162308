// The worker's SIP listener against hostile and odd input, with the runtime's own handlers (not
// just the endpoint's parser): INVITEs whose To, Request-URI, Contact or Call-ID are strange, from
// a whitelisted source and from a stranger, over UDP and TCP, and raw garbage. The process keeps
// answering, strangers get 403 whatever they send, and nothing of theirs is captured.
import assert from 'node:assert/strict';
import net from 'node:net';
import { it } from 'node:test';
import { REFUSED_CAPTURES_PER_MINUTE } from '../../src/modules/sip/captures.ts';
import { newBranch } from '../../src/sip/endpoint.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { sleep, udpPeer, waitFor } from '../helpers/sip-peers.ts';

const STRANGER = '127.0.0.11';
const FRIEND = '127.0.0.12';

function invite(o: { via: string; uri?: string; to?: string; callId: string; contact?: string | null; extra?: string[]; body?: string }): string {
  const body = o.body ?? '';
  return [
    `INVITE ${o.uri ?? 'sip:reception@127.0.0.1'} SIP/2.0`, `Via: ${o.via}`, 'Max-Forwards: 70', 'From: <sip:caller@pbx.example.test>;tag=c1',
    `To: ${o.to ?? '<sip:reception@127.0.0.1>'}`, `Call-ID: ${o.callId}`, 'CSeq: 1 INVITE',
    ...(o.contact === null ? [] : [`Contact: ${o.contact ?? '<sip:caller@127.0.0.1>'}`]), ...(o.extra ?? []),
    ...(body ? ['Content-Type: application/sdp'] : []), `Content-Length: ${Buffer.byteLength(body)}`, '', body,
  ].join('\r\n');
}

forEachEngine('SIP listener with odd input', (h) => {
  const port = () => h().sip!.endpoint!.port;
  const odd = (host: string, peerPort: number, tag: string) => {
    const via = () => `SIP/2.0/UDP ${host}:${peerPort};branch=${newBranch()};rport`;
    return [
      invite({ via: via(), callId: `${tag}-1`, to: 'not a uri at all' }),
      invite({ via: via(), callId: `${tag}-2`, uri: 'tel:+15551230000', to: '<tel:+15551230000>' }),
      invite({ via: via(), callId: `${tag}-3`, contact: null }),
      invite({ via: via(), callId: `${tag}-4`, contact: '<garbage' }),
      invite({ via: via(), callId: `${tag}-5`, to: '<sip:@[::1]>;tag=already' }),
      invite({ via: via(), callId: `${tag}-6`.padEnd(3000, 'x') }),
      invite({ via: via(), callId: `${tag}-7`, uri: 'sip:%00%ff@127.0.0.1', to: '<sip:%00@x>' }),
      invite({ via: via(), callId: `${tag}-8`, body: 'v=0\r\nthis is not sdp\r\n' }),
      invite({ via: via(), callId: `${tag}-9`, extra: ['Record-Route: <garbage', 'Route: ,,,'] }),
    ];
  };

  it('answers every odd INVITE from a stranger with 403, keeps nothing of it, and keeps serving', async () => {
    const peer = await udpPeer(STRANGER);
    try {
      const sent = odd(STRANGER, peer.port, 'stranger');
      for (const m of sent) await peer.send(m, port(), '127.0.0.1');
      for (let i = 0; i < 50; i++) await peer.send(Buffer.from(Array.from({ length: 20 + i * 13 }, (_, j) => (i * 31 + j * 7) % 256)), port(), '127.0.0.1');
      await waitFor('a final answer to each INVITE', () => new Set(peer.got.filter((m) => m.kind === 'response').map((m) => m.headers.get('call-id'))).size === sent.length, 5000);
      const finals = peer.got.filter((m) => m.kind === 'response' && m.status >= 200);
      assert.ok(finals.every((m) => m.kind === 'response' && m.status === 403), JSON.stringify(finals.map((m) => m.kind === 'response' && m.status)));
      await sleep(500); // a capture flush
      const kept = await h().database.db.selectFrom('sip_captures').select('call_id').where('call_id', 'like', 'stranger-%').execute();
      assert.deepEqual(kept, []);
    } finally {
      peer.close();
    }
  });

  it(`captures at most ${REFUSED_CAPTURES_PER_MINUTE} refused INVITEs a minute for an organization its strangers name`, async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    // A registration names the AOR the strangers call (owned by another worker, so none REGISTERs it here).
    const now = Date.now();
    const aor = `sip:desk-${h().engine}@pbx.callplane.test`;
    await h().database.db.insertInto('sip_registrations').values({
      org_id: o.id, aor, aor_key: aor, username: `desk-${h().engine}`, password: h().box.seal('x'),
      transport: 'UDP', lease_owner: 'another-worker', lease_expires_at: now + 3600_000, created_at: now, updated_at: now,
    }).execute();
    const peer = await udpPeer(STRANGER);
    const sent = 2 * REFUSED_CAPTURES_PER_MINUTE + 10;
    try {
      for (let i = 0; i < sent; i++) {
        await peer.send(invite({ via: `SIP/2.0/UDP ${STRANGER}:${peer.port};branch=${newBranch()};rport`, uri: aor, to: `<${aor}>`, callId: `named-${h().engine}-${i}` }), port(), '127.0.0.1');
      }
      await waitFor('a 403 to each INVITE', () => peer.got.filter((m) => m.kind === 'response' && m.status === 403).length >= sent, 10_000);
      await sleep(500); // a capture flush
      const kept = await h().database.db.selectFrom('sip_captures').select('call_id').distinct()
        .where('org_id', '=', o.id).where('call_id', 'like', `named-${h().engine}-%`).execute();
      // A minute boundary during the burst opens a second window: at most twice the rate.
      assert.ok(kept.length >= REFUSED_CAPTURES_PER_MINUTE, `${kept.length} refused calls captured: the first ones are kept for debugging`);
      assert.ok(kept.length <= 2 * REFUSED_CAPTURES_PER_MINUTE, `${kept.length} of ${sent} refused calls captured`);
    } finally {
      peer.close();
    }
  });

  it('holds at most 4 MiB of strangers\' messages while it waits to learn whose they are', async () => {
    const peer = await udpPeer(STRANGER);
    try {
      // OPTIONS belong to nobody: each is held (10 s) in case its Call-ID turns out to be someone's.
      const body = 'x'.repeat(60_000);
      // Two at a time, each pair answered before the next: a burst of 6 MB would overflow the
      // kernel's receive buffer before it is read, and one at a time took as long as the 10 s the
      // first messages are held on a loaded machine (they were dropped before the check).
      for (let i = 0; i < 100; i += 2) {
        for (const n of [i, i + 1]) {
          await peer.send([
            `OPTIONS sip:reception@127.0.0.1 SIP/2.0`, `Via: SIP/2.0/UDP ${STRANGER}:${peer.port};branch=${newBranch()};rport`, 'From: <sip:p@x>;tag=1',
            'To: <sip:reception@127.0.0.1>', `Call-ID: flood-${n}`, 'CSeq: 1 OPTIONS', 'Content-Type: text/plain', `Content-Length: ${body.length}`, '', body,
          ].join('\r\n'), port(), '127.0.0.1');
        }
        await waitFor(`OPTIONS ${i} and ${i + 1} answered`, () => [i, i + 1].every((n) => peer.got.some((m) => m.headers.get('call-id') === `flood-${n}`)), 3000, 2);
      }
      assert.ok(h().sip!.pendingCaptureBytes > 4 * 1024 * 1024 - 70_000, `${h().sip!.pendingCaptureBytes} bytes held: the flood did not reach the bound`);
      assert.ok(h().sip!.pendingCaptureBytes <= 4 * 1024 * 1024, `${h().sip!.pendingCaptureBytes} bytes held`);
    } finally {
      peer.close();
    }
  });

  it('survives odd INVITEs from a whitelisted address over UDP and TCP, answering each, and still answers OPTIONS', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    assert.equal((await h().call('POST', '/api/v2/sip/ipWhitelist', { token: o.token, body: { ip: FRIEND, label: 'PBX' } })).status, 201);
    const peer = await udpPeer(FRIEND);
    try {
      const sent = odd(FRIEND, peer.port, 'friend');
      for (const m of sent) await peer.send(m, port(), '127.0.0.1');
      await waitFor('a final answer to each INVITE', () => new Set(peer.got.filter((m) => m.kind === 'response' && m.status >= 200).map((m) => m.headers.get('call-id'))).size === sent.length, 5000);
      const byCall = Object.fromEntries(peer.got.filter((m) => m.kind === 'response' && m.status >= 200).map((m) => [m.headers.get('call-id')!.slice(0, 8), m.kind === 'response' && m.status]));
      // Answered (held without media until callMaxSeconds), except an INVITE naming a dialog we do not have.
      assert.deepEqual(byCall, {
        'friend-1': 200, 'friend-2': 200, 'friend-3': 200, 'friend-4': 200, 'friend-5': 481, 'friend-6': 200, 'friend-7': 200, 'friend-8': 200, 'friend-9': 200,
      });

      // The same over TCP, then a stream that loses framing.
      const tcp = net.connect({ host: '127.0.0.1', port: port(), localAddress: FRIEND });
      await new Promise((res) => tcp.once('connect', res));
      let got = '';
      tcp.on('data', (d) => { got += d.toString('latin1'); });
      const tcpVia = () => `SIP/2.0/TCP ${FRIEND}:${tcp.localPort};branch=${newBranch()}`;
      for (const m of odd(FRIEND, tcp.localPort!, 'friendtcp')) tcp.write(m.replace(/^Via: .*$/m, `Via: ${tcpVia()}`));
      await waitFor('answers over TCP', () => (got.match(/^SIP\/2\.0 [2-6]\d\d /gm) ?? []).length >= sent.length, 5000);
      tcp.write('INVITE sip:x SIP/2.0\r\nContent-Length: banana\r\n\r\n');
      await new Promise((res) => tcp.once('close', res));

      const probe = `OPTIONS sip:reception@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP ${FRIEND}:${peer.port};branch=${newBranch()};rport\r\nFrom: <sip:p@x>;tag=1\r\nTo: <sip:reception@127.0.0.1>\r\nCall-ID: probe-after\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n`;
      await peer.send(probe, port(), '127.0.0.1');
      await waitFor('OPTIONS answered', () => peer.got.some((m) => m.kind === 'response' && m.headers.get('call-id') === 'probe-after' && m.status === 200), 3000);
    } finally {
      peer.close();
      // The answered calls are held until callMaxSeconds: end them with the harness.
    }
  });
}, { CALLPLANE_CALL_MAX_SECONDS: '1' }, { sip: { pollMs: 100 } });
