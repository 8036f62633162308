// The worker's SIP listener against hostile and odd input, with the runtime's own handlers (not
// just the endpoint's parser): INVITEs whose To, Request-URI, Contact or Call-ID are strange, from
// a whitelisted source and from a stranger, over UDP and TCP, and raw garbage. The process keeps
// answering, strangers get 403 whatever they send, and nothing of theirs is captured.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import net from 'node:net';
import { it } from 'node:test';
import { REFUSED_CAPTURES_PER_MINUTE } from '../../src/modules/sip/captures.ts';
import { newBranch } from '../../src/sip/endpoint.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { sleep, udpPeer, waitFor } from '../helpers/sip-peers.ts';

const STRANGER = '127.0.0.11';
const FRIEND = '127.0.0.12';
const TRUNK = '127.0.0.13';

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
  /** A registration naming the organization's AOR and user, owned by another (live) worker so none REGISTERs it here. */
  const registration = async (orgId: number, aor: string, username: string) => {
    const now = Date.now();
    await h().database.db.insertInto('sip_registrations').values({
      org_id: orgId, aor, aor_key: aor, username, password: h().box.seal('x'),
      transport: 'UDP', lease_owner: 'another-worker', lease_expires_at: now + 3600_000, created_at: now, updated_at: now,
    }).execute();
  };
  /** The organization's numbering provider names the number as its own. */
  const ownNumber = async (resellerToken: string, orgId: number, phoneNumber: string) => {
    const res = await h().call('POST', '/api/v2/numberingProvider', {
      token: resellerToken, query: { targetOrganizationId: orgId }, body: { providerId: 'simulated', config: { phoneNumber } },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
  };
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

  it('gives each of several organizations whitelisting the same trunk only the calls addressed to it; nobody\'s callee gets 404, a callee off its own whitelist 403', async () => {
    const e = h().engine;
    const r = await h().reseller();
    const [a, b, c, d] = [await h().organization(r.id), await h().organization(r.id), await h().organization(r.id), await h().organization(r.id)];
    await registration(a.id, `sip:alice-${e}@trunk.callplane.test`, `alice-${e}`);
    await ownNumber(r.token, b.id, '+14155550100');
    await registration(d.id, `sip:dave-${e}@trunk.callplane.test`, `dave-${e}`);
    // a, b and c whitelist the one trunk; c also tries to claim everything, which is refused.
    for (const o of [a, b, c]) assert.equal((await h().call('POST', '/api/v2/sip/ipWhitelist', { token: o.token, body: { ip: TRUNK, label: 'shared trunk' } })).status, 201);
    const wide = await h().call('POST', '/api/v2/sip/ipWhitelist', { token: c.token, body: { ip: '0.0.0.0/0', label: 'everything' } });
    assert.equal(wide.status, 400);
    assert.match(wide.body.message, /^ip '0\.0\.0\.0\/0' covers too many addresses/);

    const peer = await udpPeer(TRUNK);
    try {
      const via = () => `SIP/2.0/UDP ${TRUNK}:${peer.port};branch=${newBranch()};rport`;
      const calls: Array<[string, { uri: string; to: string }, number, number | undefined]> = [
        // To names a's AOR (Request-URI a contact of ours): a's call.
        [`shared-a-${e}`, { uri: `sip:alice-${e}@127.0.0.1:${port()}`, to: `<sip:alice-${e}@trunk.callplane.test>` }, 200, a.id],
        // The number b owns, in the Request-URI: b's call, though a and c whitelist the trunk as well.
        [`shared-b-${e}`, { uri: `sip:+14155550100@127.0.0.1:${port()}`, to: '<sip:+14155550100@trunk.callplane.test>' }, 200, b.id],
        [`shared-b2-${e}`, { uri: 'tel:+14155550100', to: '<tel:+14155550100>' }, 200, b.id],
        // Nobody's: not a or b or c's, whichever whitelist holds the trunk.
        [`shared-none-${e}`, { uri: `sip:nobody-${e}@127.0.0.1:${port()}`, to: `<sip:nobody-${e}@127.0.0.1>` }, 404, undefined],
        // d's, but d did not whitelist the trunk: its own admission check refuses.
        [`shared-d-${e}`, { uri: `sip:dave-${e}@127.0.0.1:${port()}`, to: `<sip:dave-${e}@trunk.callplane.test>` }, 403, d.id],
      ];
      for (const [callId, to] of calls) await peer.send(invite({ via: via(), callId, ...to }), port(), '127.0.0.1');
      const finals = await waitFor('a final answer to each INVITE', () => {
        const got = new Map(peer.got.filter((m) => m.kind === 'response' && m.status >= 200).map((m) => [m.headers.get('call-id'), m.kind === 'response' ? m.status : 0]));
        return got.size === calls.length ? got : undefined;
      }, 5000);
      assert.deepEqual(Object.fromEntries(finals), Object.fromEntries(calls.map(([id, , status]) => [id, status])));
      await sleep(500); // a capture flush
      const captured = await h().database.db.selectFrom('sip_captures').select(['call_id', 'org_id']).distinct()
        .where('call_id', 'like', `shared-%-${e}`).execute();
      assert.deepEqual(Object.fromEntries(captured.map((x) => [x.call_id, x.org_id])),
        Object.fromEntries(calls.filter(([, , , org]) => org !== undefined).map(([id, , , org]) => [id, org])));
    } finally {
      peer.close();
    }
  });

  it('survives odd INVITEs from a whitelisted address over UDP and TCP, answering each, and still answers OPTIONS', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    assert.equal((await h().call('POST', '/api/v2/sip/ipWhitelist', { token: o.token, body: { ip: FRIEND, label: 'PBX' } })).status, 201);
    // What the odd INVITEs call is the organization's: the user `reception` (its registration's) and the number +15551230000.
    await registration(o.id, 'sip:reception@pbx.callplane.test', 'reception');
    await ownNumber(r.token, o.id, '+1 555-123-0000');
    const peer = await udpPeer(FRIEND);
    try {
      const sent = odd(FRIEND, peer.port, 'friend');
      for (const m of sent) await peer.send(m, port(), '127.0.0.1');
      await waitFor('a final answer to each INVITE', () => new Set(peer.got.filter((m) => m.kind === 'response' && m.status >= 200).map((m) => m.headers.get('call-id'))).size === sent.length, 5000);
      const byCall = Object.fromEntries(peer.got.filter((m) => m.kind === 'response' && m.status >= 200).map((m) => [m.headers.get('call-id')!.slice(0, 8), m.kind === 'response' && m.status]));
      // Answered (held without media until callMaxSeconds), except an INVITE naming a dialog we do not have
      // and one whose callee (%00) is nobody's: 404, since the source is a trunk someone whitelisted.
      assert.deepEqual(byCall, {
        'friend-1': 200, 'friend-2': 200, 'friend-3': 200, 'friend-4': 200, 'friend-5': 481, 'friend-6': 200, 'friend-7': 404, 'friend-8': 200, 'friend-9': 200,
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
}, { CALLPLANE_CALL_MAX_SECONDS: '1', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, { sip: { pollMs: 100 } });
