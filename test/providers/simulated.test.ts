// The SIMULATED carrier: outcomes by test number, timings, cancellation, labelling.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  PermanentCarrierError, SIMULATED_TEST_NUMBERS, SimulatedCarrier, TransientCarrierError, createCarrier,
} from '../../src/providers/index.ts';

const CALL_SECONDS = 0.06;
const fast = () => new SimulatedCarrier({ callSeconds: CALL_SECONDS, textSeconds: 0.03 });
const never = () => new AbortController().signal;

async function timed<T>(p: Promise<T>): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  const value = await p;
  return { value, ms: performance.now() - start };
}

describe('simulated carrier', () => {
  it('an ordinary number answers, lasts callSeconds and finishes completed, labelled simulated', async () => {
    const carrier = fast();
    const { value, ms } = await timed(carrier.placeCall({ taskId: 'tsk_1', to: '+14155550100', greeting: 'Hi' }, never()));
    assert.ok(ms >= CALL_SECONDS * 1000 - 5, `returned after ${ms} ms`);
    assert.ok(ms < 1000, `took ${ms} ms`);
    assert.equal(carrier.name, 'simulated');
    assert.equal(carrier.simulated, true);
    assert.equal(value.provider, 'simulated');
    assert.equal(value.simulated, true);
    assert.equal(value.providerRef, 'sim_call_tsk_1');
    assert.equal(value.final?.state, 'finished');
    assert.equal(value.final?.result.outcome, 'completed');
    assert.equal(value.final?.result.provider, 'simulated');
    assert.equal(value.final?.result.simulated, true);
    assert.equal(value.final?.result.greeted, true);
    assert.match(String(value.final?.result.note), /SIMULATED/);
    const duration = value.final?.result.durationSeconds ?? -1;
    assert.ok(duration >= CALL_SECONDS - 0.01 && duration < 1, `durationSeconds ${duration}`);
  });

  it('a call lasts 3 seconds by default, the organization setting changes it and options override both', () => {
    assert.equal(new SimulatedCarrier().callMs, 3000);
    assert.equal((createCarrier(null) as SimulatedCarrier).callMs, 3000);
    assert.equal((createCarrier({ providerId: 'simulated', config: { callSeconds: '7' } }) as SimulatedCarrier).callMs, 7000);
    const overridden = createCarrier({ providerId: 'simulated', config: { callSeconds: '7' } }, { simulated: { callSeconds: 0.05 } });
    assert.equal((overridden as SimulatedCarrier).callMs, 50);
    assert.throws(() => new SimulatedCarrier({ callSeconds: 'soon' }), RangeError);
    assert.throws(() => new SimulatedCarrier({ callSeconds: -1 }), RangeError);
  });

  it('the busy test number gives a busy outcome after a short ring, not a failure', async () => {
    const carrier = new SimulatedCarrier({ callSeconds: 6 });
    const { value, ms } = await timed(carrier.placeCall({ taskId: 'tsk_b', to: SIMULATED_TEST_NUMBERS.busy }, never()));
    assert.equal(value.final?.state, 'finished');
    assert.equal(value.final?.result.outcome, 'busy');
    assert.equal(value.final?.result.durationSeconds, 0);
    // The ring is 1 s; the margin to the 6 s call holds on a loaded machine.
    assert.ok(ms < 4000, `busy took ${ms} ms, the whole call time is 6000`);
  });

  it('the no-answer test number rings for the whole call time and finishes with outcome no-answer', async () => {
    const { value, ms } = await timed(fast().placeCall({ taskId: 'tsk_n', to: SIMULATED_TEST_NUMBERS.noAnswer }, never()));
    assert.equal(value.final?.state, 'finished');
    assert.equal(value.final?.result.outcome, 'no-answer');
    assert.ok(ms >= CALL_SECONDS * 1000 - 5, `rang ${ms} ms`);
  });

  it('the failed test number fails the call with an error naming the carrier status', async () => {
    const { value } = await timed(fast().placeCall({ taskId: 'tsk_f', to: SIMULATED_TEST_NUMBERS.failed }, never()));
    assert.equal(value.final?.state, 'failed');
    assert.equal(value.final?.result.outcome, 'failed');
    assert.match(value.final?.error ?? '', /simulated: call failed/);
  });

  it('the invalid test number is refused at once with a permanent error', async () => {
    const err = await fast().placeCall({ taskId: 'tsk_i', to: SIMULATED_TEST_NUMBERS.invalid }, never()).catch((e: unknown) => e);
    assert.ok(err instanceof PermanentCarrierError);
    assert.equal(err.permanent, true);
    assert.equal(err.code, '21211');
    const textErr = await fast().sendText({ taskId: 'tsk_i2', to: SIMULATED_TEST_NUMBERS.invalid, body: 'x' }, never()).catch((e: unknown) => e);
    assert.ok(textErr instanceof PermanentCarrierError);
  });

  it('the unavailable test number raises a transient error the queue retries', async () => {
    const err = await fast().placeCall({ taskId: 'tsk_u', to: SIMULATED_TEST_NUMBERS.unavailable }, never()).catch((e: unknown) => e);
    assert.ok(err instanceof TransientCarrierError);
    assert.equal(err.permanent, false);
  });

  it('aborting the signal mid-call ends it promptly as canceled, with the time spent so far', async () => {
    const carrier = new SimulatedCarrier({ callSeconds: 5 });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 40);
    const { value, ms } = await timed(carrier.placeCall({ taskId: 'tsk_c', to: '+14155550101' }, ac.signal));
    assert.ok(ms < 1000, `cancel took ${ms} ms`);
    assert.equal(value.final?.state, 'canceled');
    assert.equal(value.final?.result.outcome, 'canceled');
    assert.equal(value.final?.result.simulated, true);
    assert.ok((value.final?.result.durationSeconds ?? 99) < 1);
  });

  it('a signal already aborted cancels before the call starts', async () => {
    const ac = new AbortController();
    ac.abort();
    const { value, ms } = await timed(new SimulatedCarrier({ callSeconds: 5 }).placeCall({ taskId: 'tsk_c0', to: SIMULATED_TEST_NUMBERS.noAnswer }, ac.signal));
    assert.equal(value.final?.state, 'canceled');
    assert.ok(ms < 2000, `took ${ms} ms; the call would take 5000`);
  });

  it('endCall hangs up a call in progress, which completes early; ending an unknown call is not an error', async () => {
    const carrier = new SimulatedCarrier({ callSeconds: 5 });
    const call = carrier.placeCall({ taskId: 'tsk_e', to: '+14155550102' }, never());
    await new Promise((r) => setTimeout(r, 30));
    await carrier.endCall('sim_call_tsk_e');
    const { value, ms } = await timed(call);
    assert.ok(ms < 1000);
    assert.equal(value.final?.state, 'finished');
    assert.equal(value.final?.result.outcome, 'completed');
    assert.equal(value.final?.result.endedBy, 'us');
    await carrier.endCall('sim_call_nothing');
  });

  it('a text is delivered after a short delay, labelled simulated', async () => {
    const { value, ms } = await timed(fast().sendText({ taskId: 'tsk_t', to: '+14155550103', body: 'hello' }, never()));
    assert.ok(ms >= 25, `delivered after ${ms} ms`);
    assert.equal(value.provider, 'simulated');
    assert.equal(value.providerRef, 'sim_text_tsk_t');
    assert.equal(value.final?.state, 'finished');
    assert.equal(value.final?.result.outcome, 'delivered');
    assert.equal(value.final?.result.simulated, true);
    assert.match(String(value.final?.result.note), /SIMULATED: no real text/);
  });

  it('a text to the failed test number is undelivered and fails the task', async () => {
    const { value } = await timed(fast().sendText({ taskId: 'tsk_tf', to: SIMULATED_TEST_NUMBERS.failed, body: 'hello' }, never()));
    assert.equal(value.final?.state, 'failed');
    assert.equal(value.final?.result.outcome, 'undelivered');
    assert.equal(value.final?.result.errorCode, '30003');
  });

  it('a text canceled before delivery is canceled', async () => {
    const ac = new AbortController();
    const p = new SimulatedCarrier({ textSeconds: 5 }).sendText({ taskId: 'tsk_tc', to: '+14155550104', body: 'x' }, ac.signal);
    setTimeout(() => ac.abort(), 20);
    const { value, ms } = await timed(p);
    assert.equal(value.final?.state, 'canceled');
    assert.ok(ms < 1000);
  });
  describe('an answered call\'s simulated conversation (docs/tasks.md, "Simulated calls")', () => {
    it('runs in place of the call, lasts callSeconds at least, and its answer goes into the result', async () => {
      let asked = 0;
      const { value, ms } = await timed(fast().placeCall({ taskId: 'tsk_c', to: '+14155550100', simulatedConversation: async () => { asked++; return { conversationId: 'c1', turns: 2 }; } }, never()));
      assert.equal(asked, 1);
      assert.ok(ms >= CALL_SECONDS * 1000 - 5, `returned after ${ms} ms`);
      assert.equal(value.final?.result.outcome, 'completed');
      assert.deepEqual(value.final?.result.conversation, { conversationId: 'c1', turns: 2 });
      assert.match(String(value.final?.result.note), /^SIMULATED: .*simulated caller answered/);
    });

    it('one that cannot run is said in the result, and the call still completes', async () => {
      const { value } = await timed(fast().placeCall({ taskId: 'tsk_e', to: '+14155550100', simulatedConversation: async () => { throw new Error('the task\'s agent is gone'); } }, never()));
      assert.equal(value.final?.state, 'finished');
      assert.deepEqual(value.final?.result.conversation, { error: 'SIMULATED: the simulated caller could not talk with the agent: the task\'s agent is gone' });
    });

    it('a cancel during it cancels the call; the busy and no-answer numbers never talk', async () => {
      const cancel = new AbortController();
      const talking = fast().placeCall({ taskId: 'tsk_x', to: '+14155550100', simulatedConversation: (signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('stopped')), { once: true })) }, cancel.signal);
      setTimeout(() => cancel.abort(), 20);
      assert.equal((await talking).final?.state, 'canceled');
      let asked = 0;
      const talk = async () => { asked++; return {}; };
      assert.equal((await fast().placeCall({ taskId: 'tsk_b2', to: SIMULATED_TEST_NUMBERS.busy, simulatedConversation: talk }, never())).final?.result.outcome, 'busy');
      assert.equal((await fast().placeCall({ taskId: 'tsk_n2', to: SIMULATED_TEST_NUMBERS.noAnswer, simulatedConversation: talk }, never())).final?.result.outcome, 'no-answer');
      assert.equal(asked, 0);
    });
  });
});
