// Flux's early end of turn on a call (issue 35): Deepgram's double (test/helpers/fake-deepgram.ts)
// sends EagerEndOfTurn after 250 ms of the caller's quiet and EndOfTurn after 700 ms, a resumed
// turn's TurnResumed when they speak again in between. The session asks the model at the eager
// end and holds its reply: the first audio goes out as EndOfTurn comes, the caller's words are
// recorded once, and a resumed turn withdraws the early reply — its model request aborted, or its
// audio made and never played, nothing of it recorded; once it plays, a barge-in stops it as any
// reply. Through test/helpers/flux-call.ts (the real session, turn runner and Flux engine, the
// caller's audio in real time), on a real database.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeDeepgram, type FakeDeepgram } from '../helpers/fake-deepgram.ts';
import { fluxCall, type TimedEvent } from '../helpers/flux-call.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { waitFor } from '../helpers/wait.ts';

const at = (events: TimedEvent[], type: TimedEvent['type'], nth = 0) => events.filter((e) => e.type === type)[nth]?.t;

for (const engine of ENGINES) {
  describe(`Flux's eager end of turn on a call [${engine}]`, () => {
    let h: Harness;
    let llm: FakeLlm;
    let deepgram: FakeDeepgram;
    before(async () => {
      llm = await startFakeLlm();
      deepgram = await startFakeDeepgram();
      h = await startHarness(engine, { CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' });
    });
    after(async () => { await h?.close(); await deepgram?.close(); await llm?.close(); });

    it('asks the model at the eager end, before EndOfTurn, and plays the held reply the moment EndOfTurn comes; one inbound message, true stamps', async () => {
      deepgram.hear.push('What time do you open?');
      const c = await fluxCall(h, deepgram, {}, { eager: true });
      await waitFor('listening', async () => c.session.phase === 'listening', 5000, 5);
      llm.script.push({ text: 'We open at nine.', delayMs: 300 });
      const asked = llm.requests.length;
      const lastWord = await c.speak([{ quiet: 200 }, { talk: 600 }, { quiet: 1500 }]);
      await waitFor('the reply played and recorded', async () => c.session.phase === 'listening' && (await c.messages()).some((m) => m.direction === 'outbound'), 10_000, 10);

      const eager = at(c.events, 'eagerEndOfTurn')!;
      const end = at(c.events, 'endOfTurn')!;
      const request = llm.requests[asked]!;
      assert.equal(llm.requests.length, asked + 1, 'the model was asked once');
      assert.ok(eager !== undefined && end !== undefined && eager < end, 'the double sent an eager end, then the end of turn');
      assert.ok(request.t >= eager && request.t < end, `the model was asked ${(request.t - eager).toFixed(0)} ms after the eager end and ${(end - request.t).toFixed(0)} ms before EndOfTurn`);
      assert.equal(request.body.messages.at(-1)!.content, 'What time do you open?');
      assert.equal(request.abortedT, undefined);
      // Nothing played before EndOfTurn (the model had answered before it: 300 ms against the 450 ms between the two).
      const first = c.transport.playedAt[0]!;
      assert.ok(request.doneT! < end, 'the model had answered before EndOfTurn');
      assert.ok(first >= end, `first audio ${(end - first).toFixed(0)} ms before EndOfTurn`);
      assert.ok(first - end < 250, `first audio ${(first - end).toFixed(0)} ms after EndOfTurn`);
      assert.deepEqual(c.tts.said.map((s) => s.text), ['We open at nine.']);

      const messages = await c.messages();
      assert.deepEqual(messages.filter((m) => m.direction !== 'tool').map((m) => [m.direction, m.text]), [['inbound', 'What time do you open?'], ['outbound', 'We open at nine.']]);
      // The turn ended at EndOfTurn: its endpoint is Flux's 700 ms, and the model's first token counts as ready by then.
      const [latency] = await c.latency();
      assert.ok(latency, 'the turn\'s latency was recorded');
      assert.equal(Number(latency.llm_first_token_ms), 0);
      assert.ok(Number(latency.endpoint_ms) >= 600 && Number(latency.endpoint_ms) < 1200, `endpoint ${latency.endpoint_ms} ms`);
      assert.ok(Math.abs(Number(latency.total_ms) - (first - lastWord)) < 150, `total ${latency.total_ms} ms against ${(first - lastWord).toFixed(0)} ms measured here`);
      await c.close();
    });

    it('without the eager end the same turn is asked at EndOfTurn, and its first audio waits for the model', async () => {
      deepgram.hear.push('What time do you open?');
      const c = await fluxCall(h, deepgram, {}, { eager: false });
      await waitFor('listening', async () => c.session.phase === 'listening', 5000, 5);
      llm.script.push({ text: 'We open at nine.', delayMs: 300 });
      const asked = llm.requests.length;
      await c.speak([{ quiet: 200 }, { talk: 600 }, { quiet: 1500 }]);
      await waitFor('the reply played', async () => c.transport.playedAt.length > 0, 10_000, 10);
      const end = at(c.events, 'endOfTurn')!;
      assert.ok(at(c.events, 'eagerEndOfTurn') !== undefined, 'the double sent an eager end the session did not see');
      assert.ok(llm.requests[asked]!.t >= end);
      assert.ok(c.transport.playedAt[0]! - end >= 300, `first audio ${(c.transport.playedAt[0]! - end).toFixed(0)} ms after EndOfTurn`);
      await c.close();
    });

    it('a resumed turn withdraws the early reply: a slow model\'s request is aborted, a quick one\'s audio is made and never played; one inbound message for the whole turn', async () => {
      // Three pieces of one turn: a pause of 600 ms (the early reply is made before the caller goes on),
      // one of 400 ms (the caller goes on while the model is still thinking), then the end.
      deepgram.hear.push('What time', 'do you open', 'on Sunday?');
      const c = await fluxCall(h, deepgram, {}, { eager: true });
      await waitFor('listening', async () => c.session.phase === 'listening', 5000, 5);
      llm.script.push({ text: 'Too early.', delayMs: 50 }, { text: 'Still too early.', delayMs: 300 }, { text: 'We open at ten on Sundays.', delayMs: 300 });
      const asked = llm.requests.length;
      await c.speak([{ quiet: 200 }, { talk: 500 }, { quiet: 600 }, { talk: 500 }, { quiet: 400 }, { talk: 500 }, { quiet: 1500 }]);
      await waitFor('the reply played and recorded', async () => c.session.phase === 'listening' && (await c.messages()).some((m) => m.direction === 'outbound'), 10_000, 10);

      assert.deepEqual(c.events.filter((e) => e.type === 'eagerEndOfTurn' || e.type === 'turnResumed' || e.type === 'endOfTurn').map((e) => e.type),
        ['eagerEndOfTurn', 'turnResumed', 'eagerEndOfTurn', 'turnResumed', 'eagerEndOfTurn', 'endOfTurn']);
      const requests = llm.requests.slice(asked);
      assert.deepEqual(requests.map((r) => r.body.messages.at(-1)!.content), ['What time', 'What time do you open', 'What time do you open on Sunday?']);
      const [quick, slow, final] = requests as [typeof requests[0], typeof requests[0], typeof requests[0]];
      // The quick one answered before the caller went on: its reply was synthesized and held, then dropped.
      assert.ok(quick.doneT! < at(c.events, 'turnResumed', 0)!, 'the first early reply was written before the turn resumed');
      assert.equal(quick.abortedT, undefined);
      // The slow one was given up when the turn resumed, before its answer.
      await waitFor('the slow request aborted', async () => slow.abortedT !== undefined, 2000, 10);
      const resumed = at(c.events, 'turnResumed', 1)!;
      assert.ok(slow.abortedT! >= resumed && slow.abortedT! - resumed < 200, `aborted ${(slow.abortedT! - resumed).toFixed(0)} ms after TurnResumed`);
      assert.equal(final.abortedT, undefined);
      // Nothing played before the end of the turn, and only the last reply's audio (ShortTts: 800 samples a sentence).
      assert.ok(c.transport.playedAt[0]! >= at(c.events, 'endOfTurn')!);
      assert.deepEqual(c.tts.said.map((s) => s.text), ['Too early.', 'We open at ten on Sundays.']);
      assert.deepEqual(c.transport.of('play').map((p) => p.samples), [800]);
      assert.equal(c.transport.of('clear').length, 0, 'nothing to clear: nothing held was ever queued');

      const messages = await c.messages();
      assert.deepEqual(messages.filter((m) => m.direction !== 'tool').map((m) => [m.direction, m.text]),
        [['inbound', 'What time do you open on Sunday?'], ['outbound', 'We open at ten on Sundays.']]);
      assert.equal((await c.latency()).length, 1);
      await c.close();
    });

    it('a reply asked early is barged in on like any other once it plays: its queue cleared, kept as interrupted, the next turn answered', async () => {
      deepgram.hear.push('Tell me your hours.', 'Thanks, bye.');
      const c = await fluxCall(h, deepgram, { interruptionWordCount: 1, interruptionMinimumSpeakingTime: 0 }, { eager: true });
      await waitFor('listening', async () => c.session.phase === 'listening', 5000, 5);
      c.transport.autoPlay = false;
      llm.script.push({ text: 'We open at nine. We close at five. On Sundays we open at ten.', delayMs: 100 }, { text: 'Goodbye.' });
      await c.speak([{ quiet: 200 }, { talk: 600 }, { quiet: 900 }]);
      await waitFor('the reply playing', async () => c.session.reply?.firstAudioAt !== undefined, 5000, 10);
      await c.speak([{ talk: 600 }, { quiet: 1200 }]);
      await waitFor('the next reply', async () => (await c.messages()).filter((m) => m.direction === 'outbound').length === 2, 10_000, 10);

      assert.ok(c.transport.of('clear').length >= 1, 'the queued reply was cleared');
      const messages = (await c.messages()).filter((m) => m.direction !== 'tool');
      assert.deepEqual(messages.map((m) => [m.direction, m.status === 'interrupted' ? 'interrupted' : m.text]),
        [['inbound', 'Tell me your hours.'], ['outbound', 'interrupted'], ['inbound', 'Thanks, bye.'], ['outbound', 'Goodbye.']]);
      await c.close();
    });
  });
}
