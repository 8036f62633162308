// Presence of a registration (`subscribe`) against a real Kamailio presence server
// (test/helpers/sip-peers.ts, `presence: true`: kamailio-presence-modules, SUBSCRIBEs challenged
// like REGISTERs, PUBLISH handled by handle_publish()). The worker's runtime runs in the harness on
// 127.0.0.1, Kamailio on 127.0.0.7; the test publishes the AOR's status from its own SipEndpoint and
// reads what the API, the captures, sip_events and a signed `registration` webhook say.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { SipEndpoint, newCallId, newTag } from '../../src/sip/endpoint.ts';
import { SipHeaders } from '../../src/sip/message.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { presenceSkip, sleep, startKamailio, udpPeer, waitFor, type Kamailio } from '../helpers/sip-peers.ts';

describe('SIP presence subscription with Kamailio', { skip: presenceSkip() }, () => {
  let kam: Kamailio;
  let receiver: Receiver;
  let publisher: SipEndpoint;
  before(async () => {
    kam = await startKamailio({ host: '127.0.0.7', maxExpires: 60, minExpires: 1, presence: true });
    receiver = await startReceiver();
    publisher = new SipEndpoint({ host: '127.0.0.1', port: 0 });
    await publisher.start();
  });
  after(async () => {
    await publisher?.stop();
    await kam?.stop();
    await receiver?.close();
  });

  /** PUBLISHes the AOR's presence to Kamailio (RFC 3903); answers the SIP-ETag to modify it with. */
  async function publish(user: string, basic: 'open' | 'closed', etag?: string): Promise<string> {
    const aor = `sip:${user}@${kam.domain}`;
    const h = new SipHeaders();
    h.append('From', `<${aor}>;tag=${newTag()}`);
    h.append('To', `<${aor}>`);
    h.append('Call-ID', newCallId());
    h.append('CSeq', '1 PUBLISH');
    h.append('Event', 'presence');
    h.append('Expires', 60);
    if (etag) h.append('SIP-If-Match', etag);
    h.append('Content-Type', 'application/pidf+xml');
    const body = `<?xml version="1.0" encoding="UTF-8"?>\r\n<presence xmlns="urn:ietf:params:xml:ns:pidf" entity="${aor}"><tuple id="desk"><status><basic>${basic}</basic></status></tuple></presence>`;
    const res = await publisher.request({ kind: 'request', method: 'PUBLISH', uri: aor, headers: h, body: Buffer.from(body) },
      { transport: 'UDP', host: kam.host, port: kam.port }, { timeoutMs: 5000 });
    assert.equal(res.status, 200, `PUBLISH answered ${res.status} ${res.reason}`);
    return res.headers.get('sip-etag')!;
  }

  forEachEngine('presence', (h) => {
    let n = 0;
    const user = () => `${h().engine === 'sqlite' ? 'lite' : 'pg'}p${++n}`;
    const body = (u: string, over: Record<string, unknown> = {}) => ({
      aor: `sip:${u}@${kam.domain}`, authUsername: kam.user, password: kam.password, proxy: `${kam.host}:${kam.port}`, subscribe: true, ...over,
    });
    const post = (token: string, b: Record<string, unknown>) => h().call('POST', '/api/v2/sip/registration', { token, body: b });
    const presence = async (token: string) => (await h().call('GET', '/api/v2/sip/registration', { token })).body.registration?.presence;
    async function org() {
      const r = await h().reseller();
      return h().organization(r.id);
    }
    /** The captured messages of the organization's SUBSCRIBE dialogs: `dir first-line`, with the raw text. */
    async function subscribeDialogs(orgId: number) {
      const rows = await h().database.db.selectFrom('sip_captures').select(['call_id', 'direction', 'message', 'id']).where('org_id', '=', orgId).orderBy('id').execute();
      const ids = new Set(rows.filter((r) => /^SUBSCRIBE /.test(r.message)).map((r) => r.call_id));
      return rows.filter((r) => ids.has(r.call_id));
    }
    const unsubscribed = (rows: Array<{ direction: string; message: string }>) =>
      rows.some((r) => r.direction === 'out' && /^SUBSCRIBE /.test(r.message) && /\r\nExpires: 0\r\n/.test(r.message));
    /** Our SUBSCRIBE with Expires: 0 and the answer to it are both in the captures (they are written in batches). */
    const unsubscribeAnswered = (rows: Array<{ direction: string; message: string }>) => {
      const sent = rows.findIndex((r) => r.direction === 'out' && /^SUBSCRIBE /.test(r.message) && /\r\nExpires: 0\r\n/.test(r.message));
      return sent >= 0 && rows.slice(sent + 1).some((r) => r.direction === 'in' && r.message.startsWith('SIP/2.0'));
    };

    it('subscribes once registered: GET shows open then closed as Kamailio notifies, each change a signed registration.presence webhook; DELETE unsubscribes', async () => {
      const o = await org();
      const path = `/presence-${h().engine}`;
      const hook = await h().call('POST', '/api/v2/webhooks', { token: o.token, body: { url: `${receiver.url}${path}`, label: 'presence', type: 'registration' } });
      assert.equal(hook.status, 201, JSON.stringify(hook.body));
      const u = user();
      const res = await post(o.token, body(u));
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.registration.subscribe, true);

      const active = await waitFor('the subscription to be active', async () => {
        const p = await presence(o.token);
        return p?.subscription === 'active' ? p : undefined;
      });
      assert.deepEqual([active.state, active.code], [null, 200]);

      const etag = await publish(u, 'open');
      const open = await waitFor('presence open', async () => {
        const p = await presence(o.token);
        return p?.state === 'open' ? p : undefined;
      });
      assert.equal(open.subscription, 'active');
      assert.ok(open.updatedAt >= Math.floor(Date.now() / 1000) - 5, `updatedAt ${open.updatedAt}`);
      await publish(u, 'closed', etag);
      await waitFor('presence closed', async () => (await presence(o.token))?.state === 'closed');

      // One event per change of state, each delivered signed to the registration webhook.
      const events = await h().database.db.selectFrom('sip_events').select(['type', 'payload']).where('org_id', '=', o.id).orderBy('id').execute();
      assert.deepEqual(events.map((e) => e.type === 'registration.presence' ? `presence ${JSON.parse(e.payload).data.presence.state}` : e.type),
        ['registration.registered', 'presence open', 'presence closed']);
      const delivered = await waitFor('two presence webhooks', () => {
        const got = receiver.requests.filter((r) => r.path === path && r.body.toString().includes('registration.presence'));
        return got.length >= 2 ? got : undefined;
      }, 15_000);
      const secret = hook.body.webhook?.signingSecret ?? hook.body.signingSecret;
      const verified = delivered.map((d) => new Webhook(secret).verify(d.body.toString(), d.headers as Record<string, string>) as any);
      assert.deepEqual(verified.map((e) => [e.type, e.data.aor, e.data.registered, e.data.presence.subscription, e.data.presence.state]).sort((a, b) => String(a[4]).localeCompare(String(b[4]))), [
        ['registration.presence', `sip:${u}@${kam.domain}`, true, 'active', 'closed'],
        ['registration.presence', `sip:${u}@${kam.domain}`, true, 'active', 'open'],
      ]);

      // The SUBSCRIBE dialog is captured for the organization: challenge, 200, NOTIFYs answered 200.
      // Captures are written in batches, so wait for the closed NOTIFY and its 200 to be stored. Kamailio
      // may fold the initial NOTIFY into the one carrying `open` when the PUBLISH comes quickly, so two
      // NOTIFYs (open, closed) is the least we can expect.
      const notified = (rows: Array<{ direction: string; message: string }>, basic: string) =>
        rows.some((r) => r.direction === 'in' && /^NOTIFY /.test(r.message) && r.message.includes(`<basic>${basic}</basic>`));
      const dialog = await waitFor('the closed NOTIFY and its answer captured', async () => {
        const rows = await subscribeDialogs(o.id);
        const last = rows[rows.length - 1];
        return notified(rows, 'closed') && last?.direction === 'out' && /^SIP\/2\.0 200 /.test(last.message) ? rows : undefined;
      });
      // A retransmission (Timer A, when a loaded machine answers late) is the same message again, and so is its answer: each once.
      const once = dialog.filter((r, i) => !dialog.slice(0, i).some((p) => p.direction === r.direction && p.message === r.message));
      const flow = once.map((r) => `${r.direction} ${r.message.split('\r\n')[0].replace(/ sip:\S+/, '')}`);
      assert.deepEqual(flow.slice(0, 4), ['out SUBSCRIBE SIP/2.0', 'in SIP/2.0 401 Unauthorized', 'out SUBSCRIBE SIP/2.0', 'in SIP/2.0 200 OK']);
      assert.ok(flow.filter((f) => f === 'in NOTIFY SIP/2.0').length >= 2, flow.join('\n'));
      assert.ok(notified(dialog, 'open'), flow.join('\n'));
      assert.deepEqual(flow.filter((f) => f.startsWith('in NOTIFY')).length, flow.filter((f) => f === 'out SIP/2.0 200 OK').length, 'every NOTIFY answered 200');
      const subscribeSent = dialog.find((r) => r.direction === 'out' && /^SUBSCRIBE /.test(r.message))!;
      assert.match(subscribeSent.message, /\r\nEvent: presence\r\n/);
      assert.match(subscribeSent.message, /\r\nAccept: application\/pidf\+xml\r\n/);
      assert.match(subscribeSent.message, /\r\nExpires: 60\r\n/);

      // NOTIFYs for a dialog we do not have: 481 (an unknown Call-ID, and ours with another To tag).
      const peer = await udpPeer('127.0.0.1');
      try {
        const port = h().sip!.endpoint!.port;
        const stray = (callId: string, toTag: string) => [
          `NOTIFY sip:${u}@127.0.0.1:${port} SIP/2.0`, `Via: SIP/2.0/UDP 127.0.0.1:${peer.port};branch=z9hG4bK${newTag()}`,
          `From: <sip:${u}@${kam.domain}>;tag=${newTag()}`, `To: <sip:${u}@${kam.domain}>;tag=${toTag}`, `Call-ID: ${callId}`, 'CSeq: 9 NOTIFY',
          'Event: presence', 'Subscription-State: active;expires=60', 'Max-Forwards: 70', 'Content-Length: 0', '', ''].join('\r\n');
        await peer.send(stray(newCallId(), newTag()), port);
        await peer.send(stray(subscribeSent.call_id, 'not-ours'), port);
        const answers = await waitFor('two answers', () => (peer.got.length >= 2 ? peer.got : undefined), 5000);
        assert.deepEqual(answers.map((m) => (m.kind === 'response' ? m.status : 0)), [481, 481]);
      } finally {
        peer.close();
      }
      assert.equal((await presence(o.token)).state, 'closed', 'a stray NOTIFY changes nothing');

      // DELETE: SUBSCRIBE with Expires: 0 in the dialog (answered 200), then the un-REGISTER.
      const del = await h().call('DELETE', '/api/v2/sip/registration', { token: o.token });
      assert.equal(del.status, 200, JSON.stringify(del.body));
      const after = await waitFor('the unsubscribe in the captures', async () => {
        const rows = await subscribeDialogs(o.id);
        return unsubscribeAnswered(rows) ? rows : undefined;
      });
      const ended = after.findIndex((r) => r.direction === 'out' && /\r\nExpires: 0\r\n/.test(r.message));
      assert.match(after.slice(ended + 1).find((r) => r.direction === 'in' && r.message.startsWith('SIP/2.0'))!.message, /^SIP\/2\.0 200 OK\r\n[\s\S]*CSeq: \d+ SUBSCRIBE/);
      // Kamailio no longer has us as a watcher: a new publication notifies nobody.
      const before = (await subscribeDialogs(o.id)).filter((r) => /^NOTIFY /.test(r.message)).length;
      await publish(u, 'open');
      await sleep(700);
      assert.equal((await subscribeDialogs(o.id)).filter((r) => /^NOTIFY /.test(r.message)).length, before);
    });

    it('without subscribe sends no SUBSCRIBE and shows no presence; an update switches it on, and off again with Expires: 0', async () => {
      const o = await org();
      const u = user();
      const res = await post(o.token, body(u, { subscribe: false }));
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.registration.presence, null);
      await sleep(500);
      assert.deepEqual(await subscribeDialogs(o.id), []);

      const on = await post(o.token, body(u, { password: undefined }));
      assert.equal(on.status, 200, JSON.stringify(on.body));
      await waitFor('the subscription to be active', async () => (await presence(o.token))?.subscription === 'active');
      await publish(u, 'open');
      await waitFor('presence open', async () => (await presence(o.token))?.state === 'open');

      const off = await post(o.token, body(u, { password: undefined, subscribe: false }));
      assert.equal(off.status, 200, JSON.stringify(off.body));
      assert.equal(off.body.registration.presence, null);
      // Captures are written in batches: the SUBSCRIBE with Expires: 0 (sent before the new REGISTER) shows up within moments.
      await waitFor('the unsubscribe in the captures', async () => unsubscribed(await subscribeDialogs(o.id)), 3000);
      const row = await h().database.db.selectFrom('sip_registrations').selectAll().where('org_id', '=', o.id).executeTakeFirstOrThrow();
      assert.deepEqual([row.presence_subscription, row.presence_state], [null, null]);
    });

    it('a clean stop of the owner ends its subscriptions (SUBSCRIBE with Expires: 0)', async () => {
      const o = await org();
      const u = user();
      assert.equal((await post(o.token, body(u))).status, 201);
      await waitFor('the subscription to be active', async () => (await presence(o.token))?.subscription === 'active');
      assert.equal(unsubscribed(await subscribeDialogs(o.id)), false);
      await h().sip!.stop();
      assert.ok(unsubscribed(await subscribeDialogs(o.id)), 'SUBSCRIBE with Expires: 0 sent and captured on stop');
    });
  }, { CALLPLANE_SIP_REGISTER_EXPIRES: '60', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, {
    sip: { pollMs: 100, registerTimeoutMs: 2000, retryMinMs: 30_000 }, deliveries: true,
  });
});
