// The live feed during a spoken call, on both engines, offline: a Twilio call streamed to us with
// real audio (test/helpers/live-call.ts: the fake Twilio, a Media Stream speaking espeak-ng speech)
// shows on the organization's stream as a `conversation` (a call, its task) and then, while the
// call is still in progress, each transcript line as it is said: the agent's welcome, what the
// caller said as the agent heard it, the agent's answer. A stream opened mid-call draws the call
// from its snapshot with its lines so far; the caller hanging up ends it on the stream.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { conversationRepo } from '../../src/modules/conversations/repository.ts';
import { ENGINES } from '../helpers/harness.ts';
import { liveCallServer, startLiveCall, type LiveCallServer } from '../helpers/live-call.ts';
import { openLive, type LiveClient, type SseEvent } from '../helpers/live-feed.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

for (const engine of ENGINES) {
  describe(`the live feed during a spoken call [${engine}]`, { skip: toolsSkip('espeak-ng', 'pocketsphinx') }, () => {
    let server: LiveCallServer;
    const clients: LiveClient[] = [];
    before(async () => { server = await liveCallServer(engine); });
    after(async () => {
      for (const c of clients) c.close();
      await server?.close();
    });

    it('the call and its lines arrive on the stream while the call is in progress; its end too', async () => {
      const org = await server.organization({ welcomeMessage: 'Hello there.' });
      const feed = await openLive(server.baseUrl, org.token);
      clients.push(feed);
      await feed.next('snapshot', (e) => e.event === 'snapshot');

      const call = await startLiveCall(server, org, ['what are your opening hours']);
      const started = await feed.next('the call', (e) => e.event === 'conversation' && e.data.uuid === call.conversation.id, 20_000);
      assert.equal(started.data.channel, 'voice');
      assert.equal(started.data.eventType, 'call');
      assert.equal(started.data.direction, 'outbound');
      assert.equal(started.data.taskId, call.taskId);
      assert.equal(started.data.outcome, 'open');
      assert.equal(started.data.roomId, call.roomId);

      const line = (direction: string, text: string) => (e: SseEvent) =>
        e.event === 'message' && e.data.conversationId === call.conversation.id && e.data.message.direction === direction && e.data.message.message === text;
      const welcome = await feed.next('the welcome', line('outbound', 'Hello there.'), 20_000);
      const heard = await feed.next('what the caller said', line('inbound', 'what are your opening hours'), 30_000);
      const answer = await feed.next('the agent\'s answer', line('outbound', 'reply to: what are your opening hours'), 30_000);
      assert.equal(heard.data.message.source, 'voice');
      assert.ok(welcome.at <= heard.at && heard.at <= answer.at);
      // All of it while the call is in progress.
      assert.equal((await conversationRepo.find(server.h.database.db, call.conversation.id))?.ended_at, null);
      assert.ok(!feed.events.some((e) => e.event === 'conversation' && e.data.uuid === call.conversation.id && e.data.outcome !== 'open'));

      // A stream opened now draws the call in progress from its snapshot, with its lines so far.
      const late = await openLive(server.baseUrl, org.token);
      clients.push(late);
      const snap = await late.next('snapshot', (e) => e.event === 'snapshot');
      const drawn = snap.data.calls.find((c: { uuid: string }) => c.uuid === call.conversation.id);
      assert.ok(drawn, JSON.stringify(snap.data));
      assert.equal(drawn.eventType, 'call');
      assert.deepEqual(drawn.messages.filter((m: { direction: string }) => m.direction !== 'tool').slice(0, 3).map((m: { direction: string; message: string }) => `${m.direction}:${m.message}`),
        ['outbound:Hello there.', 'inbound:what are your opening hours', 'outbound:reply to: what are your opening hours']);

      await call.spoken;
      const ended = await call.hangUp();
      assert.equal(ended.outcome, 'hung_up');
      const end = await feed.next('the end', (e) => e.event === 'conversation' && e.data.uuid === call.conversation.id && e.data.outcome !== 'open', 10_000);
      assert.equal(end.data.outcome, 'hung_up');
      assert.equal(typeof end.data.endedAt, 'number');
    });
  });
}
