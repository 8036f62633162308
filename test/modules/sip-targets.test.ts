// SIP targets under the address policy of every outbound target, with a worker whose
// CALLPLANE_ALLOW_PRIVATE_TARGETS opens only 127.0.0.21: a registrar named by a host name that
// resolves to loopback (a name that was public when configured, then rebound) is refused when the
// worker sends, before anything reaches it; and a registrar that is refused, hangs up or stays
// silent gets the same 502 text, so the API is no port scanner.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import { freePort, sleep, udpPeer, waitFor } from '../helpers/sip-peers.ts';

const OPENED = '127.0.0.21';

describe('SIP targets and the address policy', () => {
  forEachEngine('SIP targets', (h) => {
    async function org() {
      const r = await h().reseller();
      return h().organization(r.id);
    }

    it('refuses at send time a registrar whose name resolves to a private address, sending nothing to it', async () => {
      const o = await org();
      const peer = await udpPeer('127.0.0.1');
      try {
        // Stored as if the name had been public when it was configured (the API refuses it now).
        const now = Date.now();
        const aor = `sip:rebound-${h().engine}@pbx.callplane.test`;
        await h().database.db.insertInto('sip_registrations').values({
          org_id: o.id, aor, aor_key: aor, username: `rebound-${h().engine}`, password: h().box.seal('x'),
          proxy: `localhost:${peer.port}`, transport: 'UDP', version: 1, attempted_version: 0, created_at: now, updated_at: now,
        }).execute();
        h().sip!.notify();
        const got = await waitFor('the owner to try the registration', async () => {
          const res = await h().call('GET', '/api/v2/sip/registration', { token: o.token });
          return res.body.registration?.lastError ? res.body.registration : undefined;
        }, 10_000);
        assert.equal(got.registered, false);
        // What the name resolved to is not the organization's to read.
        assert.equal(got.lastError, 'localhost: the address policy refused the target; private targets are not allowed (CALLPLANE_ALLOW_PRIVATE_TARGETS)');
        await sleep(300);
        assert.equal(peer.got.length, 0, 'nothing was sent to the loopback address');
      } finally {
        peer.close();
        await h().call('DELETE', '/api/v2/sip/registration', { token: o.token });
      }
    });

    it('answers a refused, a hung-up and a silent registrar port with one 502 text', async () => {
      const o = await org();
      const hangsUp = net.createServer((s) => s.destroy());
      const held: net.Socket[] = [];
      const silent = net.createServer((s) => { held.push(s); });
      await new Promise<void>((r) => hangsUp.listen(0, OPENED, r));
      await new Promise<void>((r) => silent.listen(0, OPENED, r));
      try {
        const ports = [await freePort(OPENED), (hangsUp.address() as net.AddressInfo).port, (silent.address() as net.AddressInfo).port];
        const texts: string[] = [];
        for (const port of ports) {
          const res = await h().call('POST', '/api/v2/sip/registration', {
            token: o.token, body: { aor: `sip:scan-${h().engine}@pbx.callplane.test`, password: 'x', proxy: `${OPENED}:${port}`, transport: 'TCP' },
          });
          assert.equal(res.status, 502, JSON.stringify(res.body));
          assert.equal(res.body.success, false);
          texts.push(String(res.body.message).replace(`:${port}:`, ':PORT:'));
        }
        assert.deepEqual(texts, Array(3).fill(`The registrar did not answer: no SIP answer from tcp:${OPENED}:PORT: refused, unreachable or timed out; the registration was not kept`));
      } finally {
        for (const s of held) s.destroy();
        hangsUp.close();
        silent.close();
      }
    });
  }, { CALLPLANE_ALLOW_PRIVATE_TARGETS: `${OPENED}/32` }, { sip: { pollMs: 100, registerTimeoutMs: 1500 } });
});
