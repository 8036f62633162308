// The live feed (GET /api/v2/conversations/live), on both engines, over a listening server: a
// client reading the body as it arrives gets a snapshot, then a conversation driven through
// receiveMessage (the SIMULATED model engine answers) as `conversation` and `message` events for
// the person's line and the agent's; another organization's stream, and one on another agent,
// see none of it; a deleted token's stream and a suspended organization's are closed; a client that does
// not read is dropped; the per-token and process-wide caps answer 429.
// @engines sqlite
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { authenticate } from '../../src/http/auth.ts';
import { CallplaneError, createCallplaneClient, liveEvents, type LiveEvent } from '../../sdk/index.ts';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { openLive, type LiveClient, type SseEvent } from '../helpers/live-feed.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { sleep, waitFor, within } from '../helpers/wait.ts';

const FAST = { leaseMs: 5000, heartbeatMs: 500, rescueEveryMs: 500 };

for (const engine of ENGINES) {
  describe(`the live feed of conversations [${engine}]`, () => {
    let h: Harness;
    let hook: Receiver;
    let base: string;
    const clients: LiveClient[] = [];
    const open = async (token: string, query: Record<string, string | number> = {}, bearer = false) => {
      const c = await openLive(base, token, query, bearer);
      clients.push(c);
      return c;
    };

    before(async () => {
      h = await startHarness(engine, { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, {
        turns: true, deliveries: true, deliveryRuntime: FAST, liveRuntime: { heartbeatMs: 300, recheckMs: 300, maxBufferedBytes: 64 * 1024 },
      });
      await h.app.listen({ port: 0, host: '127.0.0.1' });
      base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
      hook = await startReceiver();
    });
    after(async () => {
      for (const c of clients) c.close();
      await h.close();
      await hook.close();
    });

    async function tenant() {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      return { r, o };
    }
    const say = async (r: { token: string }, agentId: number, sourceAddress: string, message: string) => {
      const res = await h.call('POST', '/api/v2/agent/receiveMessage', {
        token: r.token, body: { targetAgent: String(agentId), sourceAddress, message, outboundMessageWebhookUrl: `${hook.url}/replies` },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.messageUuid as string;
    };
    const after0 = (c: LiveClient, name: string, pred: (e: SseEvent) => boolean = () => true) =>
      c.next(name, (e) => e.event === name && pred(e));

    it('a snapshot first, then the conversation and each of its lines as stored; no other tenant or agent sees them', async () => {
      const { r, o } = await tenant();
      const other = await tenant();
      const second = await h.agent(o.id);

      const mine = await open(o.token);
      assert.equal(mine.status, 200);
      assert.match(mine.headers.get('content-type') ?? '', /^text\/event-stream/);
      const snap = await after0(mine, 'snapshot');
      assert.deepEqual(snap.data, { calls: [] });
      // Event ids are this feed's id and a sequence number (a reconnect resumes from one).
      assert.match(snap.id ?? '', /^[0-9a-f]{8}-\d+$/);
      // Another organization's token; the reseller on the organization's other agent; the same
      // reseller on the whole organization, with the header form of the token.
      const theirs = await open(other.o.token);
      const onSecond = await open(r.token, { targetAccountId: second.id });
      const reseller = await open(r.token, { targetAccountId: o.id }, true);
      for (const c of [theirs, onSecond, reseller]) await after0(c, 'snapshot');

      const uuid = await say(r, o.agentId, '+1 (415) 555-2671', 'Hello live');
      const conversation = await after0(mine, 'conversation');
      assert.equal(conversation.data.channel, 'api');
      assert.equal(conversation.data.direction, 'inbound');
      assert.equal(conversation.data.counterpart, '+14155552671');
      assert.equal(conversation.data.accountId, o.agentId);
      assert.equal(conversation.data.agentId, `camp${o.agentId}`);
      assert.equal(conversation.data.outcome, 'open');
      assert.equal(typeof conversation.data.startedAt, 'number');
      assert.match(conversation.data.roomId, new RegExp(`^${o.agentId}:\\d+$`));
      assert.equal(conversation.data.messages, undefined, 'a conversation event has no messages');
      const cid = conversation.data.uuid as string;

      const inbound = await after0(mine, 'message', (e) => e.data.message.direction === 'inbound');
      assert.deepEqual(Object.keys(inbound.data).sort(), ['accountId', 'conversationId', 'message', 'roomId']);
      assert.equal(inbound.data.conversationId, cid);
      assert.equal(inbound.data.roomId, conversation.data.roomId);
      assert.equal(inbound.data.message.uuid, uuid);
      assert.equal(inbound.data.message.message, 'Hello live');
      assert.equal(inbound.data.message.source, 'api');
      const outbound = await after0(mine, 'message', (e) => e.data.message.direction === 'outbound');
      assert.match(outbound.data.message.message, /You said: "Hello live"/);
      assert.ok(mine.events.indexOf(conversation) < mine.events.indexOf(inbound), 'the conversation comes before its first line');
      assert.ok(mine.events.indexOf(inbound) < mine.events.indexOf(outbound));
      // Event ids go up on a stream.
      const ids = mine.events.map((e) => Number(e.id!.split('-')[1]));
      assert.deepEqual(ids, [...ids].sort((a, b) => a - b));
      assert.equal(new Set(ids).size, ids.length);

      // Shaped as the conversation read's lines.
      const read = await h.call('GET', `/api/v2/conversation/${conversation.data.roomId}/${cid}`, { token: o.token });
      assert.equal(read.status, 200);
      const line = read.body[0].conversation.find((l: { uuid: string }) => l.uuid === uuid);
      assert.deepEqual(Object.keys(inbound.data.message).sort(), Object.keys(line).filter((k) => k !== 'latency').sort());
      assert.equal(read.body[0].roomId, conversation.data.roomId);

      // The reseller following the organization sees it too.
      await after0(reseller, 'message', (e) => e.data.message.direction === 'outbound');
      // A stream opened now draws the conversation from its snapshot, with its lines.
      const late = await open(o.token);
      const drawn = await after0(late, 'snapshot');
      const call = drawn.data.calls.find((c: { uuid: string }) => c.uuid === cid);
      assert.ok(call, JSON.stringify(drawn.data));
      assert.deepEqual(call.messages.filter((m: { direction: string }) => m.direction !== 'tool').map((m: { direction: string }) => m.direction), ['inbound', 'outbound']);
      assert.equal(call.messages[0].uuid, uuid);

      // Nothing of it reached another organization's stream, or the stream on the other agent.
      await sleep(500);
      for (const c of [theirs, onSecond]) {
        assert.deepEqual(c.events.map((e) => e.event), ['snapshot'], JSON.stringify(c.events));
        assert.deepEqual(c.events[0]!.data, { calls: [] });
      }
      // The heartbeat keeps quiet streams going.
      await waitFor('a ping', async () => theirs.comments.includes('ping'), 5000);
    });

    it('the typed client follows the feed (liveEvents), and throws a refusal as a CallplaneError', async () => {
      const { r, o } = await tenant();
      const other = await tenant();
      const client = createCallplaneClient({ baseUrl: base, token: o.token });
      const abort = new AbortController();
      const seen: LiveEvent[] = [];
      const following = (async () => {
        try {
          for await (const e of liveEvents(client, {}, abort.signal)) {
            seen.push(e);
            if (e.event === 'snapshot') void say(r, o.agentId, 'sdk-visitor', 'through the client');
            if (e.event === 'message' && e.data.message.direction === 'outbound') break;
          }
        } catch (err) {
          if (!abort.signal.aborted) throw err;
        }
      })();
      await within(following, 10_000, () => assert.fail(`no reply line: ${JSON.stringify(seen)}`));
      abort.abort();
      assert.deepEqual(seen.map((e) => e.event), ['snapshot', 'conversation', 'message', 'message']);
      const line = seen[2]!;
      assert.ok(line.event === 'message' && line.data.message.message === 'through the client');
      await assert.rejects(async () => {
        for await (const e of liveEvents(client, { targetAccountId: other.o.id })) void e;
      }, (err: unknown) => err instanceof CallplaneError && err.status === 404 && /targetAccountId/.test(err.message));
    });

    it('another organization, or an account that does not exist, as targetAccountId: 404; no token: 401', async () => {
      const { o } = await tenant();
      const other = await tenant();
      const refused = await open(o.token, { targetAccountId: other.o.id });
      assert.equal(refused.status, 404);
      assert.equal(refused.body.success, false);
      assert.match(refused.body.message, /targetAccountId/);
      assert.equal((await open(o.token, { targetAccountId: 2_000_000_000 })).status, 404);
      assert.equal((await open('cpl_nonsense')).status, 401);
    });

    it('a deleted token\'s stream is closed, saying why', async () => {
      const { o } = await tenant();
      const token = await h.tokenFor(o.id);
      const c = await open(token);
      await after0(c, 'snapshot');
      const del = await h.call('DELETE', '/api/v2/tokens', { token: o.token, body: { token } });
      assert.equal(del.status, 200, JSON.stringify(del.body));
      const closed = await c.next('closed', (e) => e.event === 'closed', 5000);
      assert.match(closed.data.message, /deleted token/);
      await within(c.ended, 5000, () => assert.fail('the stream did not end'));
      // A stream of the organization's own token goes on.
      const still = await open(o.token);
      await after0(still, 'snapshot');
      await sleep(700);
      assert.equal(still.isEnded(), false);
    });

    it('suspending the organization closes its streams and a reseller\'s stream on it; the reseller\'s own goes on', async () => {
      const { r, o } = await tenant();
      const own = await open(o.token);
      const onOrg = await open(r.token, { targetAccountId: o.id });
      const whole = await open(r.token);
      for (const c of [own, onOrg, whole]) await after0(c, 'snapshot');
      const off = await h.call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body: { active: false } });
      assert.equal(off.status, 200, JSON.stringify(off.body));
      const a = await own.next('closed', (e) => e.event === 'closed', 5000);
      assert.match(a.data.message, new RegExp(`Organization ${o.id} is suspended`));
      const b = await onOrg.next('closed', (e) => e.event === 'closed', 5000);
      assert.match(b.data.message, new RegExp(`targetAccountId ${o.id}: Organization ${o.id} is suspended`));
      await sleep(700);
      assert.equal(whole.isEnded(), false);
      assert.ok(!whole.events.some((e) => e.event === 'closed'));
    });

    it('a client that leaves more than the limit unread is dropped, not buffered for', async () => {
      const { r, o } = await tenant();
      const scope = await authenticate(h.services.tokenLookup, o.token);
      // The response as the feed sees it: what was written, and how much of it the client has not taken.
      let unread = 0;
      const written: string[] = [];
      let destroyed = false;
      let ended = false;
      const before = h.services.live.open;
      await h.services.live.start(scope, o.token, undefined, () => ({
        write: (text) => { written.push(text); unread += text.length; return true; },
        buffered: () => unread,
        drained: async () => {},
        end: () => { ended = true; },
        destroy: () => { destroyed = true; },
      }));
      assert.match(written.join(''), /^id: [0-9a-f]{8}-\d+\nevent: snapshot\ndata: \{"calls":\[\]\}\n\n/);
      assert.equal(h.services.live.open, before + 1);
      // The client reads the snapshot, then stops reading: lines pile up past the limit (64 KiB here).
      unread = 0;
      const text = 'x'.repeat(3000);
      for (let i = 0; i < 30 && !destroyed; i++) await say(r, o.agentId, 'slow-reader', `${i} ${text}`);
      await waitFor('the stream dropped', async () => destroyed, 10_000);
      assert.equal(ended, false, 'dropped at once, not ended politely');
      assert.ok(unread < 64 * 1024 + 20_000, `it stopped at the limit: ${unread} bytes unread`);
      assert.equal(h.services.live.open, before);
      const count = written.length;
      await say(r, o.agentId, 'slow-reader', 'after the drop');
      await sleep(300);
      assert.equal(written.length, count, 'nothing more is written to a dropped stream');
    });

    it('at most 5 streams per token: the 6th is 429 until one closes', async () => {
      const { o } = await tenant();
      const token = await h.tokenFor(o.id);
      const five: LiveClient[] = [];
      for (let i = 0; i < 5; i++) {
        const c = await open(token);
        assert.equal(c.status, 200);
        five.push(c);
      }
      const sixth = await open(token);
      assert.equal(sixth.status, 429);
      assert.equal(sixth.body.success, false);
      assert.match(sixth.body.message, /at most 5 live feeds/);
      // Another token of the same organization is counted on its own.
      assert.equal((await open(o.token)).status, 200);
      five[0]!.close();
      await waitFor('a slot free again', async () => {
        const c = await open(token);
        if (c.status === 200) return true;
        assert.equal(c.status, 429);
        return false;
      }, 5000, 100);
    });
  });
}

for (const engine of ENGINES) {
  describe(`the live feed's process-wide cap [${engine}]`, () => {
    let h: Harness;
    let base: string;
    const clients: LiveClient[] = [];
    before(async () => {
      h = await startHarness(engine, { CALLPLANE_LIVE_STREAMS_MAX: '2' });
      await h.app.listen({ port: 0, host: '127.0.0.1' });
      base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
    });
    after(async () => {
      for (const c of clients) c.close();
      await h.close();
    });

    it('past CALLPLANE_LIVE_STREAMS_MAX streams in the process, whatever the token: 429', async () => {
      const r = await h.reseller();
      const a = await h.organization(r.id);
      const b = await h.organization(r.id);
      for (const token of [a.token, b.token]) {
        const c = await openLive(base, token);
        clients.push(c);
        assert.equal(c.status, 200);
      }
      const third = await openLive(base, r.token);
      assert.equal(third.status, 429);
      assert.equal(third.body.success, false);
      assert.match(third.body.message, /at most 2 live feeds at once/);
      assert.equal(third.headers.get('retry-after'), '5');
    });
  });
}
