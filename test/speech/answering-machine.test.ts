// The answering-machine detector (src/speech/answering-machine.ts) on generated audio through
// μ-law, as a SIP call carries it: machine greetings spoken by espeak-ng end with a beep (one or two
// tones) and are decided machine by the end of the beep; people answering are decided human
// within about 1.5 s of their last word — a long front-desk greeting too, which waits for what
// follows it; speech that never pauses is a machine at the hard maximum; the same audio gives the same events however it is cut;
// a cue phrase decides machine; nothing said is unknown.
// @lane wall
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { decodeG711, encodeG711 } from '../../src/media/g711.ts';
import { AnsweringMachineDetector, type AmdEvent } from '../../src/speech/answering-machine.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { beep, espeak, join, silence } from '../helpers/voicemail-audio.ts';

const line = (pcm: Int16Array) => decodeG711('PCMU', encodeG711('PCMU', pcm));
const ms = (pcm: Int16Array) => (pcm.length / 8000) * 1000;

/** The audio through a detector in pieces of `chunk` samples; every event. */
function run(pcm: Int16Array, chunk = 160, d = new AnsweringMachineDetector()): AmdEvent[] {
  const out: AmdEvent[] = [];
  for (let i = 0; i < pcm.length; i += chunk) out.push(...d.push(pcm.subarray(i, Math.min(pcm.length, i + chunk))));
  return out;
}
const verdict = (evs: AmdEvent[]) => evs.find((e) => e.type === 'verdict') as Extract<AmdEvent, { type: 'verdict' }> | undefined;
const ending = (evs: AmdEvent[]) => evs.find((e) => e.type === 'greetingEnd') as Extract<AmdEvent, { type: 'greetingEnd' }> | undefined;

describe('answering-machine detection on generated audio', { skip: toolsSkip('espeak-ng') }, () => {
  let greeting: Int16Array;
  let shortGreeting: Int16Array;
  let hello: Int16Array;
  before(async () => {
    greeting = await espeak('Hi, you have reached Jordan. I can not take your call right now. Please leave a message after the tone.', 'en-us');
    shortGreeting = await espeak('Leave a message.', 'en-gb', { pitch: 30, speed: 140 });
    hello = await espeak('Hello?', 'en-us+f3', { pitch: 65 });
  });

  it('a long greeting is a machine by its beep (each usual tone), which ends it, after the beep and within 3 s of the greeting', () => {
    for (const tone of [[1000], [440], [850], [1400], [440, 850]]) {
      const b = beep(tone, 400);
      const audio = line(join([silence(400), greeting, silence(400), b, silence(3000)]));
      const evs = run(audio);
      const v = verdict(evs)!;
      assert.equal(v.answeredBy, 'machine', `tone ${tone.join('+')}`);
      assert.equal(v.reason, 'beep');
      assert.ok(v.atMs <= 400 + ms(greeting) + 400 + 400, 'decided by the end of the beep');
      const end = ending(evs)!;
      assert.equal(end.reason, 'beep', `tone ${tone.join('+')}`);
      const beepEnd = 400 + ms(greeting) + 400 + 400;
      assert.ok(end.atMs >= beepEnd && end.atMs <= beepEnd + 60, `the greeting ends where the beep does (${end.atMs} vs ${beepEnd})`);
    }
  });

  it('a short greeting is decided by its beep; without a beep, by the silence after it', () => {
    const withBeep = run(line(join([silence(300), shortGreeting, silence(500), beep([1000], 300), silence(2000)])));
    assert.deepEqual([verdict(withBeep)!.answeredBy, verdict(withBeep)!.reason, ending(withBeep)!.reason], ['machine', 'beep', 'beep']);
    // A short greeting with no beep and a pause is what a person does: human (the cue phrases are what catch it).
    const d = new AnsweringMachineDetector();
    const noBeep = run(line(join([silence(300), shortGreeting, silence(3000)])), 160, d);
    assert.equal(verdict(noBeep)!.answeredBy, 'human');
    const cued = new AnsweringMachineDetector();
    run(line(join([silence(300), shortGreeting.subarray(0, 4000)])), 160, cued);
    assert.deepEqual(cued.cue().map((e) => e.type === 'verdict' && [e.answeredBy, e.reason]), [['machine', 'cue']]);
    assert.deepEqual(cued.cue(), [], 'decided once');
  });

  it('a person saying "Hello?" and waiting is human within about 1.5 s of answer\'s last word, never a beep', () => {
    const evs = run(line(join([silence(500), hello, silence(4000)])));
    const v = verdict(evs)!;
    assert.equal(v.answeredBy, 'human');
    assert.ok(v.atMs - (500 + ms(hello)) <= 1100, `decided ${v.atMs - (500 + ms(hello))} ms after the word`);
    assert.equal(ending(evs), undefined);
  });

  it('a person answering with a long sentence and waiting is human within about 1.5 s of its end; speech with no pause is a machine by 8 s', async () => {
    for (const voice of [{ voice: 'en-us', pitch: 50, speed: 165 }, { voice: 'en-gb+m3', pitch: 30, speed: 140 }]) {
      const desk = await espeak('Hello, this is Maria from the front desk at Riverside Dental, how can I help you today?', voice.voice, voice);
      const speechEnd = 500 + ms(desk);
      const evs = run(line(join([silence(500), desk, silence(4000)])));
      const v = verdict(evs)!;
      assert.ok(ms(desk) > 4000, `a long greeting (${ms(desk)} ms)`);
      assert.deepEqual([v.answeredBy, v.reason], ['human', 'long-greeting'], `${voice.voice}: decided ${v.answeredBy} (${v.reason}) at ${v.atMs} ms, speech ended ${speechEnd} ms`);
      assert.ok(v.atMs >= speechEnd && v.atMs - speechEnd <= 1700, `${voice.voice}: decided ${v.atMs - speechEnd} ms after the sentence`);
      assert.equal(ending(evs), undefined);
    }
    // A machine reading on and on with no pause of a second and no beep: a machine, at the maximum.
    const message = join([silence(300), greeting, silence(300), greeting, silence(300), greeting, silence(3000)]);
    const v = verdict(run(line(message)))!;
    assert.deepEqual([v.answeredBy, v.reason], ['machine', 'greeting-length']);
    assert.ok(v.atMs >= 8000 && v.atMs <= 8400, `decided at ${v.atMs} ms`);
  });

  it('the same events however the audio is cut; nothing said is unknown after 5 s', () => {
    const audio = line(join([silence(400), greeting, silence(400), beep([850], 400), silence(3000)]));
    const framed = run(audio, 160);
    for (const chunk of [1, 37, 333, 4096]) assert.deepEqual(run(audio, chunk), framed, `pieces of ${chunk}`);
    const quiet = run(line(join([silence(6000)])));
    assert.deepEqual(verdict(quiet), { type: 'verdict', answeredBy: 'unknown', reason: 'silence', atMs: 5000 });
  });
});
