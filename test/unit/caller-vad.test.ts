// How long the caller "has spoken" (callerVad's speakingMs, what barge-in is measured against):
// up to the last voiced frame, not through the silence the detector waits for before it ends the
// utterance. A 400 ms "uh-huh" over the agent is 400 ms of speech, not 400 ms and the speakingTimeout
// (bench/voice.ts's streaming profile counted such false barge-ins).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { callerVad } from '../../src/modules/voice/listener.ts';
import { silence } from '../helpers/vad-audio.ts';

/** A 300 Hz tone at about −12 dBFS: voiced to the energy detector. */
function tone(ms: number): Int16Array {
  const n = Math.round(ms * 8);
  return Int16Array.from({ length: n }, (_, i) => Math.round(8000 * Math.sin((2 * Math.PI * 300 * i) / 8000)));
}

function feed(vad: ReturnType<typeof callerVad>, pcm: Int16Array): void {
  for (let i = 0; i < pcm.length; i += 160) vad.hear(pcm.subarray(i, i + 160));
}

describe('the caller\'s speaking time', () => {
  it('counts to the last voiced frame, not through the silence before the utterance ends', () => {
    const ends: number[] = [];
    const vad = callerVad({ stt: undefined as never, now: Date.now }, { speakingTimeoutMs: 1200, onFallback: () => {} }, { start: () => {}, end: (ev) => { ends.push(ev.endMs); } });
    feed(vad, silence(600));
    assert.equal(vad.speakingMs(), undefined, 'quiet: not speaking');
    feed(vad, tone(400));
    const spoken = vad.speakingMs();
    assert.ok(spoken !== undefined && spoken >= 300 && spoken <= 420, `after 400 ms of tone: ${spoken}`);
    feed(vad, silence(800));
    assert.equal(ends.length, 0, 'the utterance is not over yet (1,200 ms of silence ends it)');
    const after = vad.speakingMs();
    assert.ok(after !== undefined && after <= 440, `800 ms of silence later it is still about 400 ms of speech: ${after}`);
    feed(vad, tone(600));
    const more = vad.speakingMs();
    assert.ok(more !== undefined && more >= 1600, `speaking again within the utterance counts from its start: ${more}`);
    vad.stop();
  });
});
