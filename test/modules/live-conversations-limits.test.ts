// The live feed's limits and lifetime (GET /api/v2/conversations/live), on both engines, over a
// listening server: caps per account, per organization and per reseller as well as per token and
// per process (one organization minting tokens cannot take every stream); stream starts limited
// per account (429 with Retry-After); the snapshot bounded in lines and bytes (and saying so) and
// written as the client takes it; a reconnect with Last-Event-ID resumes with what was missed; a
// deleted token, a signed-out console session, an expired session and a suspended account end
// their streams within a second (the default 15 s recheck is not what ends them).
// @engines sqlite
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { authenticate } from '../../src/http/auth.ts';
import { createCallplaneClient, liveEvents, type LiveEvent } from '../../sdk/index.ts';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { openLive, type LiveClient, type SseEvent } from '../helpers/live-feed.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

const LIMITS = {
  CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
  CALLPLANE_LIVE_STREAMS_MAX: '12',
  CALLPLANE_LIVE_STREAMS_PER_ACCOUNT: '3',
  CALLPLANE_LIVE_STREAMS_PER_ORGANIZATION: '4',
  CALLPLANE_LIVE_STREAMS_PER_RESELLER: '6',
  CALLPLANE_LIVE_STARTS_PER_MINUTE: '6',
};

for (const engine of ENGINES) {
  describe(`the live feed's limits and lifetime [${engine}]`, () => {
    let h: Harness;
    let hook: Receiver;
    let base: string;
    /** The feed's clock runs this far ahead of the real one (an expired session without waiting hours). */
    let ahead = 0;
    const clients: LiveClient[] = [];
    const open = async (token: string, query: Record<string, string | number> = {}, headers: Record<string, string> = {}) => {
      const c = await openLive(base, token, query, false, headers);
      clients.push(c);
      return c;
    };
    const first = (c: LiveClient) => c.next('the first event', () => true, 5000);

    before(async () => {
      h = await startHarness(engine, LIMITS, {
        turns: true, liveRuntime: { snapshotLines: 12, snapshotBytes: 6000, now: () => Date.now() + ahead },
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

    const say = async (token: string, agentId: number, sourceAddress: string, message: string) => {
      const res = await h.call('POST', '/api/v2/agent/receiveMessage', {
        token, body: { targetAgent: String(agentId), sourceAddress, message, outboundMessageWebhookUrl: `${hook.url}/replies` },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
    };
    /** Waits until the organization's conversations hold `n` lines (the agent's replies are written by the turn worker). */
    const lines = (orgId: number, n: number) => waitFor(`${n} lines`, async () => {
      const row = await h.database.db.selectFrom('conversation_messages').where('org_id', '=', orgId).where('direction', '!=', 'tool')
        .select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      return Number(row.n) >= n;
    }, 10_000, 50);
    const closeAll = async (list: LiveClient[]) => {
      for (const c of list) c.close();
      await sleep(200);
    };

    it('caps per account, per organization and per reseller: one organization minting tokens cannot take every stream', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const held: LiveClient[] = [];
      // Three tokens of the organization's own account: the third stream fills the account's cap
      // (each token alone is far below its 5).
      for (let i = 0; i < 3; i++) {
        const c = await open(await h.tokenFor(o.id));
        assert.equal(c.status, 200);
        held.push(c);
      }
      const fourth = await open(await h.tokenFor(o.id));
      assert.equal(fourth.status, 429);
      assert.equal(fourth.body.success, false);
      assert.match(fourth.body.message, new RegExp(`account ${o.id} may have at most 3 live feeds.*CALLPLANE_LIVE_STREAMS_PER_ACCOUNT`));
      assert.equal(fourth.headers.get('retry-after'), '5');
      // An agent of the organization has its own account, but the organization's subtree is full after one more.
      const agent = await h.agent(o.id);
      const byAgent = await open(agent.token);
      assert.equal(byAgent.status, 200);
      held.push(byAgent);
      const again = await open(await h.tokenFor(agent.id));
      assert.equal(again.status, 429);
      assert.match(again.body.message, new RegExp(`Organization ${o.id} and the accounts below it may have at most 4 live feeds.*CALLPLANE_LIVE_STREAMS_PER_ORGANIZATION`));
      // A sibling organization of the same reseller: the reseller's subtree is full after two more.
      const sibling = await h.organization(r.id);
      for (let i = 0; i < 2; i++) {
        const c = await open(await h.tokenFor(sibling.id));
        assert.equal(c.status, 200);
        held.push(c);
      }
      const third = await open(await h.tokenFor(sibling.id));
      assert.equal(third.status, 429);
      assert.match(third.body.message, new RegExp(`Reseller ${r.id} and the accounts below it may have at most 6 live feeds.*CALLPLANE_LIVE_STREAMS_PER_RESELLER`));
      // Everyone else still gets a stream.
      const other = await h.reseller();
      const otherOrg = await h.organization(other.id);
      const theirs = await open(otherOrg.token);
      assert.equal(theirs.status, 200);
      assert.equal((await first(theirs)).event, 'snapshot');
      held.push(theirs);
      // A stream that closes frees its place in every cap.
      held[0]!.close();
      await waitFor('a place in the organization again', async () => {
        const c = await open(await h.tokenFor(o.id));
        if (c.status === 200) return true;
        assert.equal(c.status, 429);
        return false;
      }, 5000, 100);
      await closeAll([...held, ...clients]);
    });

    it('stream starts per account per minute: past them 429 with Retry-After, another account unaffected', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      for (let i = 0; i < 6; i++) {
        const c = await open(o.token);
        assert.equal(c.status, 200, JSON.stringify(c.body));
        await first(c);
        c.close();
      }
      const seventh = await open(o.token);
      assert.equal(seventh.status, 429);
      assert.equal(seventh.body.success, false);
      assert.match(seventh.body.message, /at most 6 live feeds a minute \(CALLPLANE_LIVE_STARTS_PER_MINUTE\)/);
      const retry = Number(seventh.headers.get('retry-after'));
      assert.ok(retry >= 1 && retry <= 10, `Retry-After ${retry}`);
      const other = await h.organization(r.id);
      assert.equal((await open(other.token)).status, 200);
      await closeAll(clients);
    });

    it('the snapshot is bounded in lines and bytes and says what was cut', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      // Four conversations of four lines each (two messages, two replies): 16 lines past the 12 allowed.
      for (let i = 0; i < 4; i++) {
        await say(r.token, o.agentId, `visitor-${i}`, `first ${i}`);
        await lines(o.id, 4 * i + 2);
        await say(r.token, o.agentId, `visitor-${i}`, `second ${i}`);
        await lines(o.id, 4 * i + 4);
      }
      await lines(o.id, 16);
      const c = await open(o.token);
      const snap = await first(c);
      assert.equal(snap.event, 'snapshot');
      assert.equal(snap.data.calls.length, 4);
      for (const call of snap.data.calls) assert.equal(call.messages.length, 3, 'a fair share of the 12 lines each: their last 3');
      for (const call of snap.data.calls) assert.match(call.messages[2].message, /You said: "second \d"/, `the last lines are kept: ${JSON.stringify(call.messages.map((m: { message: string; date: string }) => [m.message, m.date]))}`);
      assert.match(snap.data.truncated, /at most the last 3 lines of each conversation/);
      // More conversations: the bytes cap (6000 here) leaves some out, and says so.
      for (let i = 4; i < 12; i++) await say(r.token, o.agentId, `visitor-${i}`, `${i} ${'x'.repeat(100)}`);
      await lines(o.id, 32);
      const d = await open(o.token);
      const cut = await first(d);
      assert.equal(cut.event, 'snapshot');
      assert.ok(JSON.stringify(cut.data.calls).length <= 6000, `${JSON.stringify(cut.data.calls).length} bytes`);
      assert.ok(cut.data.calls.length < 12 && cut.data.calls.length > 3, `${cut.data.calls.length} conversations`);
      assert.match(cut.data.truncated, /conversations left out past 6000 bytes/);
      await closeAll(clients);
    });

    it('the snapshot is written as the client takes it (backpressure), not as one string', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      for (let i = 0; i < 3; i++) await say(r.token, o.agentId, `reader-${i}`, `hello ${i}`);
      const scope = await authenticate(h.services.tokenLookup, o.token);
      const writes: string[] = [];
      let release: () => void = () => {};
      let waiting = 0;
      const started = h.services.live.start(scope, o.token, undefined, () => ({
        // Every write fills the client's buffer: the feed must wait for `drained` before the next.
        write: (text) => { writes.push(text); return false; },
        buffered: () => 0,
        drained: () => { waiting++; return new Promise<void>((resolve) => { release = resolve; }); },
        end: () => {},
        destroy: () => {},
      }));
      await waitFor('the first piece', async () => waiting === 1, 5000, 10);
      await sleep(100);
      assert.equal(writes.length, 1, 'nothing more is written before the client took the first piece');
      for (let i = 0; i < 20 && writes.length < 5; i++) {
        release();
        await sleep(20);
      }
      release();
      await started;
      assert.ok(writes.length >= 5, `the snapshot came in ${writes.length} pieces`);
      const text = writes.join('');
      assert.match(text, /^id: [0-9a-f]{8}-\d+\nevent: snapshot\ndata: \{"calls":\[/);
      const data = JSON.parse(text.split('\n')[2]!.slice('data: '.length));
      assert.equal(data.calls.length, 3);
      assert.equal(h.services.live.open > 0, true);
    });

    it('a reconnect with Last-Event-ID resumes with what was missed; an id it cannot resume from gets a snapshot saying so', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const c = await open(o.token);
      assert.equal((await first(c)).event, 'snapshot');
      await say(r.token, o.agentId, 'resumer', 'before the drop');
      const seen = await c.next('the reply', (e) => e.event === 'message' && e.data.message.direction === 'outbound', 10_000);
      const lastId = seen.id!;
      c.close();
      // While the client is away: a line of this organization, and one of another organization.
      const other = await h.organization(r.id);
      await say(r.token, o.agentId, 'resumer', 'while away');
      await say(r.token, other.agentId, 'elsewhere', 'not yours');
      await sleep(800);
      const back = await open(o.token, {}, { 'last-event-id': lastId });
      assert.equal(back.status, 200);
      const resumed = await first(back);
      assert.equal(resumed.event, 'resumed', JSON.stringify(back.events));
      assert.equal(resumed.data.lastEventId, lastId);
      await back.next('the missed reply', (e) => e.event === 'message' && /while away/.test(e.data.message.message) && e.data.message.direction === 'outbound', 5000);
      assert.ok(!back.events.some((e) => e.event === 'snapshot'), 'no snapshot on a resume');
      const lines = back.events.filter((e) => e.event === 'message').map((e) => e.data.message.message as string);
      assert.ok(lines.includes('while away'), JSON.stringify(lines));
      // (A line stored before may come again when it changed since: a reply's status.)
      assert.ok(!lines.includes('before the drop') && !lines.some((l) => /not yours/.test(l)), `only what was missed, only its own: ${JSON.stringify(lines)}`);
      assert.equal(resumed.data.replayed, back.events.filter((e: SseEvent) => e.event !== 'resumed').length);
      // Ids resume in order: each replayed id is past the one given.
      const n = (id: string) => Number(id.split('-')[1]);
      for (const e of back.events.slice(1)) assert.ok(n(e.id!) > n(lastId));
      // An id of no event of this server (another process, a restart): a snapshot, saying why.
      const stranger = await open(o.token, {}, { 'last-event-id': '0badc0de-5' });
      const snap = await first(stranger);
      assert.equal(snap.event, 'snapshot');
      assert.match(snap.data.resumeFailed, /names no event of this server/);
      await closeAll(clients);
    });

    it('the typed client resumes: liveEvents with lastEventId yields `resumed` and what was missed', { timeout: 20_000 }, async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const client = createCallplaneClient({ baseUrl: base, token: o.token });
      const abort = new AbortController();
      let lastId: string | undefined;
      for await (const e of liveEvents(client, {}, abort.signal)) {
        lastId = e.id;
        if (e.event === 'snapshot') break;
      }
      abort.abort();
      await say(r.token, o.agentId, 'sdk-resumer', 'said while away');
      await lines(o.id, 2);
      await sleep(300);
      const again = new AbortController();
      const seen: LiveEvent[] = [];
      for await (const e of liveEvents(client, {}, again.signal, lastId)) {
        seen.push(e);
        if (e.event === 'message' && e.data.message.direction === 'outbound') break;
      }
      again.abort();
      assert.equal(seen[0]!.event, 'resumed', JSON.stringify(seen));
      assert.ok(!seen.some((e) => e.event === 'snapshot'));
      assert.ok(seen.some((e) => e.event === 'message' && e.data.message.message === 'said while away'));
    });

    it('a deleted token, a signed-out console session and a suspended organization end their streams within a second', async () => {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const token = await h.tokenFor(o.id);
      const c = await open(token);
      await first(c);
      let t0 = Date.now();
      const del = await h.call('DELETE', '/api/v2/tokens', { token: o.token, body: { token } });
      assert.equal(del.status, 200, JSON.stringify(del.body));
      const closed = await c.next('closed', (e) => e.event === 'closed', 5000);
      assert.ok(closed.at - t0 < 1000, `closed ${closed.at - t0} ms after the deletion`);
      assert.match(closed.data.message, /deleted token/);

      // A console session (the cookie with the console header), then signing out.
      const signIn = await fetch(`${base}/console/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: o.token }) });
      assert.equal(signIn.status, 200);
      const cookie = signIn.headers.getSetCookie()[0]!.split(';')[0]!;
      const consoleHeaders = { cookie, 'x-callplane-console': '1' };
      const session = await open('', {}, consoleHeaders);
      assert.equal(session.status, 200, JSON.stringify(session.body));
      await first(session);
      t0 = Date.now();
      const out = await fetch(`${base}/console/session`, { method: 'DELETE', headers: consoleHeaders });
      assert.equal(out.status, 200);
      const ended = await session.next('closed', (e) => e.event === 'closed', 5000);
      assert.ok(ended.at - t0 < 1000, `closed ${ended.at - t0} ms after signing out`);

      // A console session that expires (the feed's clock moved past its end).
      const again = await fetch(`${base}/console/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: o.token }) });
      const expiring = await open('', {}, { cookie: again.headers.getSetCookie()[0]!.split(';')[0]!, 'x-callplane-console': '1' });
      await first(expiring);
      t0 = Date.now();
      ahead = 13 * 3600_000;
      try {
        const expired = await expiring.next('closed', (e) => e.event === 'closed', 5000);
        assert.ok(expired.at - t0 < 1000, `closed ${expired.at - t0} ms after expiring`);
        assert.match(expired.data.message, /expired/);
      } finally {
        ahead = 0;
      }

      // Suspension of the organization.
      const own = await open(o.token);
      await first(own);
      t0 = Date.now();
      const off = await h.call('POST', '/api/v2/updateOrganization', { token: r.token, query: { targetOrganizationId: o.id }, body: { active: false } });
      assert.equal(off.status, 200, JSON.stringify(off.body));
      const suspended = await own.next('closed', (e) => e.event === 'closed', 5000);
      assert.ok(suspended.at - t0 < 1000, `closed ${suspended.at - t0} ms after the suspension`);
      await closeAll(clients);
    });
  });
}
