// Voice activity detection on synthetic 8 kHz signals, where the right answer is known to the
// frame: silence and line noise are not speech, a tone burst is one utterance with its pre-roll
// and tail, bursts separated by pauses shorter than speakingTimeout stay one utterance and longer
// pauses split them, a click does not start speech, a steady hum stops counting, and the events do
// not depend on how the audio was cut into pushes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { frameDbfs, VoiceActivityDetector, type SpeechEnd, type VadEvent } from '../../src/speech/vad.ts';

const RATE = 8000;
const samples = (ms: number) => Math.round((ms * RATE) / 1000);
const amp = (dbfs: number) => 32768 * 10 ** (dbfs / 20);

function silence(ms: number): Int16Array {
  return new Int16Array(samples(ms));
}
/** A sine at `dbfs` RMS. */
function tone(ms: number, dbfs: number, hz = 440): Int16Array {
  const a = amp(dbfs) * Math.SQRT2;
  return Int16Array.from({ length: samples(ms) }, (_, i) => Math.round(a * Math.sin((2 * Math.PI * hz * i) / RATE)));
}
/** White noise at `dbfs` RMS, from a seed. */
function noise(ms: number, dbfs: number, seed = 7): Int16Array {
  const a = amp(dbfs) * Math.sqrt(3);
  let s = seed;
  return Int16Array.from({ length: samples(ms) }, () => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return Math.round(a * (2 * (s / 0x7fffffff) - 1));
  });
}
/** Speech-like: a syllable of a few harmonics of a gliding pitch under an envelope, at about `dbfs`. */
function syllable(ms: number, dbfs: number, pitch = 140): Int16Array {
  const n = samples(ms);
  const a = amp(dbfs) * 1.6;
  let phase = 0;
  return Int16Array.from({ length: n }, (_, i) => {
    const env = Math.sin((Math.PI * i) / n) ** 0.5;
    phase += (2 * Math.PI * (pitch * (1 + 0.2 * (i / n)))) / RATE;
    return Math.round(a * env * (0.6 * Math.sin(phase) + 0.3 * Math.sin(3 * phase) + 0.15 * Math.sin(7 * phase)));
  });
}
function concat(...parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
/** Adds `b` onto `a` (same length or shorter). */
function mix(a: Int16Array, b: Int16Array): Int16Array {
  return a.map((v, i) => Math.max(-32768, Math.min(32767, v + (b[i] ?? 0))));
}
const ends = (events: VadEvent[]) => events.filter((e): e is { type: 'speechEnd' } & SpeechEnd => e.type === 'speechEnd');
const starts = (events: VadEvent[]) => events.filter((e) => e.type === 'speechStart');

describe('voice activity detection', () => {
  it('hears nothing in digital silence or in line noise', () => {
    const vad = new VoiceActivityDetector();
    assert.deepEqual([...vad.push(silence(3000)), ...vad.flush()], []);
    const noisy = new VoiceActivityDetector();
    assert.deepEqual([...noisy.push(noise(4000, -55)), ...noisy.flush()], []);
    assert.ok(Math.abs(noisy.noiseFloorDbfs - -55) < 2, `the floor found the noise: ${noisy.noiseFloorDbfs}`);
  });

  it('takes a tone burst as one utterance: start after 3 voiced frames, end after speakingTimeout, pre-roll and tail kept', () => {
    const vad = new VoiceActivityDetector({ speakingTimeoutMs: 800 });
    const seen: VadEvent[] = [];
    vad.on('speechStart', (e) => seen.push({ type: 'speechStart', ...e }));
    vad.on('speechEnd', (e) => seen.push({ type: 'speechEnd', ...e }));
    const events: VadEvent[] = [];
    events.push(...vad.push(silence(1000)));
    assert.equal(events.length, 0);
    events.push(...vad.push(tone(40, -20)));
    assert.equal(events.length, 0, 'two voiced frames are not speech yet');
    events.push(...vad.push(tone(20, -20)));
    assert.deepEqual(events, [{ type: 'speechStart', atMs: 1000 }]);
    assert.ok(vad.inSpeech);
    events.push(...vad.push(tone(440, -20)));
    events.push(...vad.push(silence(780)));
    assert.equal(ends(events).length, 0, '780 ms of silence is not enough');
    events.push(...vad.push(silence(20)));
    const [end] = ends(events);
    assert.ok(end);
    assert.equal(end.reason, 'silence');
    // 200 ms of pre-roll, 500 ms of tone, 200 ms of the silence after it.
    assert.equal(end.startMs, 800);
    assert.equal(end.endMs, 1700);
    assert.equal(end.pcm16.length, samples(900));
    assert.equal(end.sampleRate, 8000);
    assert.ok(frameDbfs(end.pcm16.subarray(samples(200), samples(700))) > -21, 'the tone is inside');
    assert.ok(frameDbfs(end.pcm16.subarray(0, samples(200))) < -90, 'the pre-roll is the silence before it');
    assert.equal(vad.inSpeech, false);
    assert.deepEqual(seen, events, 'the emitted events are the returned ones');
  });

  it('keeps bursts separated by pauses shorter than speakingTimeout together, and splits at a longer pause', () => {
    const vad = new VoiceActivityDetector({ speakingTimeoutMs: 600 });
    const line = noise(8000, -58, 3);
    const speech = concat(
      silence(1000),
      syllable(180, -22), silence(250), syllable(220, -24, 120), silence(400), syllable(160, -21), // one utterance: pauses 250 and 400 < 600
      silence(900), // > 600: ends it
      syllable(200, -23, 180), silence(120), syllable(240, -22, 170), // a second
      silence(2000),
    );
    const events = vad.push(mix(concat(speech, silence(Math.max(0, 8000 - speech.length / 8))), line));
    assert.equal(starts(events).length, 2);
    const [first, second] = ends(events);
    assert.ok(first && second);
    assert.ok(Math.abs(first.startMs - 800) <= 40, `first begins at ${first.startMs}`);
    // The first holds its three syllables and the pauses between them: about 1210 ms of speech.
    const firstSpeech = first.endMs - first.startMs - 200 - 200;
    assert.ok(firstSpeech >= 1100 && firstSpeech <= 1300, `first utterance has ${firstSpeech} ms of speech`);
    assert.ok(second.startMs >= 3110 - 200 - 60 && second.startMs <= 3110, `second begins at ${second.startMs}`);
    const secondSpeech = second.endMs - second.startMs - 200 - 200;
    assert.ok(secondSpeech >= 480 && secondSpeech <= 620, `second utterance has ${secondSpeech} ms of speech`);
    assert.deepEqual([first.reason, second.reason], ['silence', 'silence']);
  });

  it('gives the same events whatever the pushes look like', () => {
    const signal = mix(concat(silence(500), syllable(300, -20), silence(300), syllable(300, -25), silence(1500)), noise(2900, -50));
    const whole = new VoiceActivityDetector({ speakingTimeoutMs: 500 }).push(signal);
    const pieces = new VoiceActivityDetector({ speakingTimeoutMs: 500 });
    const events: VadEvent[] = [];
    let seed = 11;
    for (let at = 0; at < signal.length;) {
      seed = (seed * 69069 + 1) >>> 0;
      const n = 1 + (seed % 400);
      events.push(...pieces.push(signal.subarray(at, at + n)));
      at += n;
    }
    assert.ok(whole.length >= 2);
    assert.deepEqual(events, whole);
  });

  it('does not start on a click, and needs startFrames voiced frames in a row', () => {
    const vad = new VoiceActivityDetector({ speakingTimeoutMs: 300 });
    assert.deepEqual(vad.push(concat(silence(500), tone(20, -6), silence(500), tone(40, -6), silence(500))), []);
    const eager = new VoiceActivityDetector({ speakingTimeoutMs: 300, startFrames: 1 });
    assert.equal(starts(eager.push(concat(silence(500), tone(20, -6), silence(500)))).length, 1);
  });

  it('follows the noise floor: speech over a noisy line is heard, a louder line stops counting as speech', () => {
    // Noise below the speech minimum: the floor settles on it and speech 12 dB above it is heard.
    const quiet = new VoiceActivityDetector({ speakingTimeoutMs: 400 });
    const a = quiet.push(mix(concat(silence(2500), tone(300, -38), silence(1000)), noise(3800, -50)));
    assert.equal(ends(a).length, 1);
    // A line that gets louder (-42 dBFS, above the speech minimum) is taken for speech at first,
    // until its level is the floor (2 s window); speech over it is heard afterwards.
    const loud = new VoiceActivityDetector({ speakingTimeoutMs: 400 });
    const b = loud.push(mix(concat(silence(4000), tone(400, -20), silence(1000)), concat(noise(5400, -42))));
    const [noiseUtt, speechUtt] = ends(b);
    assert.ok(noiseUtt && speechUtt, `${ends(b).length} utterances`);
    assert.ok(noiseUtt.endMs <= 2600, `the noise stopped counting by ${noiseUtt.endMs} ms`);
    assert.ok(Math.abs(loud.noiseFloorDbfs - -42) < 2, `floor ${loud.noiseFloorDbfs}`);
    assert.ok(speechUtt.startMs >= 3700 && speechUtt.startMs <= 4000, `speech at ${speechUtt.startMs}`);
  });

  it('ends a steady hum once the floor reaches it, and an endless utterance at maxUtteranceMs', () => {
    const hum = new VoiceActivityDetector({ speakingTimeoutMs: 500 });
    const h = hum.push(concat(silence(500), tone(6000, -30, 100)));
    const [end] = ends(h);
    assert.ok(end && end.reason === 'silence' && end.endMs < 500 + 2000 + 500 + 100, `hum ended at ${end?.endMs}`);
    assert.equal(hum.inSpeech, false);

    const talker = new VoiceActivityDetector({ speakingTimeoutMs: 500, maxUtteranceMs: 1000, floorWindowMs: 10_000 });
    const t = talker.push(concat(silence(500), tone(2500, -20)));
    // 2.5 s of tone: two utterances cut at 1 s (pre-roll included), a third under way.
    assert.deepEqual(ends(t).map((e) => e.reason), ['maxLength', 'maxLength']);
    assert.ok(ends(t).every((e) => e.pcm16.length === samples(1000)));
    assert.equal(starts(t).length, 3, 'what follows each cut is a new utterance');
    const flushed = talker.flush();
    assert.equal(ends(flushed)[0]?.reason, 'flush');
    assert.deepEqual(talker.flush(), []);
  });

  it('works at 16 kHz in 20 ms frames, and refuses rates that are not whole frames', () => {
    const vad = new VoiceActivityDetector({ sampleRate: 16_000, speakingTimeoutMs: 300 });
    assert.equal(vad.frameSamples, 320);
    const up = new Int16Array(32_000);
    for (let i = 8000; i < 16_000; i++) up[i] = Math.round(8000 * Math.sin(i / 5));
    const e = vad.push(up);
    assert.deepEqual(starts(e), [{ type: 'speechStart', atMs: 500 }]);
    assert.equal(ends(e)[0]?.sampleRate, 16_000);
    assert.throws(() => new VoiceActivityDetector({ sampleRate: 8001 }), RangeError);
    assert.throws(() => new VoiceActivityDetector({ speakingTimeoutMs: 0 }), RangeError);
  });
});
