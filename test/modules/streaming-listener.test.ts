// The streaming listener (src/modules/voice/streaming-listener.ts) alone, fed espeak-ng speech frame
// by frame, against Deepgram's protocol double on loopback through the official client: one
// speechStart per turn (ours or Deepgram's, whichever came first), the turn heard with Deepgram's
// words and ordered latency stamps, and a stream that does not open in time handing the call to
// the batch recogniser (here Deepgram's pre-recorded API on the same double) without losing the
// utterance under way.
// @lane wall
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { SpeechChange } from '../../src/modules/voice/call-state.ts';
import type { HeardTurn } from '../../src/modules/voice/listener.ts';
import { streamingListener } from '../../src/modules/voice/streaming-listener.ts';
import { DeepgramLive, DeepgramTranscriber } from '../../src/speech/deepgram.ts';
import { startFakeDeepgram, type FakeDeepgram } from '../helpers/fake-deepgram.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { silence, speak } from '../helpers/vad-audio.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

describe('the streaming listener', { skip: toolsSkip('espeak-ng') }, () => {
  let fake: FakeDeepgram;
  let audio: Int16Array;

  before(async () => {
    fake = await startFakeDeepgram();
    const words = await speak('what are your opening hours', 'en-us');
    audio = new Int16Array(words.length + 16_000);
    audio.set(silence(500));
    audio.set(words, 4000);
  });
  after(() => fake.close());

  function listen(engine: DeepgramLive) {
    const events: string[] = [];
    const heard: HeardTurn[] = [];
    const changes: SpeechChange[] = [];
    const listener = streamingListener({ stt: new DeepgramTranscriber({ apiKey: fake.apiKey, baseUrl: fake.url }), now: Date.now }, {
      language: 'en-US', speakingTimeoutMs: 700, engine,
      to: {
        speechStart: () => { events.push('speechStart'); },
        heard: (turn) => { events.push(`heard:${turn.text}`); heard.push(turn); return Promise.resolve(); },
        unheard: () => { events.push('unheard'); },
      },
      inTurn: (step) => { void step(); },
      onFallback: () => {},
      onChange: (c) => { events.push(`change:${c.from}>${c.to}`); changes.push(c); },
      warn: () => {},
    });
    /** The audio, 20 ms frames, ten every 20 ms (five times real time). */
    const play = async (fromMs = 0, toMs = audio.length / 8) => {
      for (let i = fromMs * 8; i < toMs * 8; i += 160) {
        listener.hear(audio.subarray(i, i + 160));
        if ((i / 160) % 10 === 9) await sleep(20);
      }
    };
    return { listener, events, heard, changes, play };
  }

  it('reports one speechStart, then the turn with Deepgram\'s words at its speech_final, stamped in order', async () => {
    fake.hear.push('What are your opening hours?');
    const l = listen(new DeepgramLive({ apiKey: fake.apiKey, baseUrl: fake.url }));
    await l.play();
    await waitFor('the turn heard', async () => l.heard.length > 0, 10_000);
    assert.deepEqual(l.events, ['speechStart', 'heard:What are your opening hours?']);
    assert.deepEqual(l.heard[0]!.engines, { vad: 'deepgram', stt: 'deepgram' });
    const s = l.heard[0]!.stamps;
    assert.ok(s.speechEndedAt <= s.turnEndedAt && s.turnEndedAt <= s.transcriptAt, JSON.stringify(s));
    assert.deepEqual(l.listener.engines, { vad: 'deepgram', stt: 'deepgram' });
    l.listener.stop();
    const conn = fake.connections.at(-1)!;
    await waitFor('the stream closed', async () => conn.closed !== undefined, 5000);
    assert.ok(conn.controls.includes('CloseStream'));
  });

  it('a stream that does not open in time: the batch recogniser hears the utterance under way whole, and the change says why', async () => {
    fake.plan.push({ acceptDelayMs: 2000 });
    fake.hear.push('What are your opening hours?');
    const batch = fake.batch.length;
    const l = listen(new DeepgramLive({ apiKey: fake.apiKey, baseUrl: fake.url, openTimeoutMs: 300 }));
    // The caller starts speaking while the stream is still opening; it gives up mid-utterance.
    await l.play(0, 1000);
    await waitFor('the change', async () => l.changes.length > 0, 5000);
    await l.play(1000);
    await waitFor('the turn heard', async () => l.heard.length > 0, 10_000);
    assert.deepEqual(l.events, ['speechStart', 'change:deepgram>deepgram', 'heard:What are your opening hours?']);
    assert.match(l.changes[0]!.reason, /did not open within 300 ms/);
    assert.equal(fake.batch.length, batch + 1);
    assert.equal(l.heard[0]!.engines.vad, 'energy');
    l.listener.stop();
  });
});
