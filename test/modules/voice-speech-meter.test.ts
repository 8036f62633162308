// What a call's speech meter counts (src/modules/voice/speech-meter.ts), against Deepgram's real
// engines (official client) and their double on loopback (test/helpers/fake-deepgram.ts): the
// seconds of the call's own μ-law written to a live stream are the bytes the double received over
// 8000; nothing written after the stream closed counts; a one-utterance recogniser counts the
// audio it was sent; offline engines are passed through untouched and count nothing. (A call's
// counts reaching the usage rollups, once: test/modules/voice-org-keys.test.ts.)
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SpeechMeter, vendorOf } from '../../src/modules/voice/speech-meter.ts';
import { DeepgramFlux, DeepgramLive, DeepgramTranscriber } from '../../src/speech/deepgram.ts';
import { startFakeDeepgram, type FakeDeepgram } from '../helpers/fake-deepgram.ts';
import { ScriptedStt, ShortTts } from '../helpers/fake-voice-transport.ts';
import { mulawFrames } from '../helpers/recognition.ts';
import { silence } from '../helpers/vad-audio.ts';
import { waitFor } from '../helpers/wait.ts';

describe('a call\'s speech meter', () => {
  let fake: FakeDeepgram;
  before(async () => { fake = await startFakeDeepgram(); });
  after(() => fake.close());
  const opts = () => ({ apiKey: fake.apiKey, baseUrl: fake.url, maxRetries: 0 });

  it('names the vendor a remote engine is billed by, and none for an offline one', () => {
    assert.equal(vendorOf(new DeepgramLive(opts())), 'deepgram');
    assert.equal(vendorOf(new DeepgramFlux(opts())), 'deepgram');
    assert.equal(vendorOf(new ScriptedStt([])), undefined);
    assert.equal(vendorOf(new ShortTts()), undefined);
  });

  it('counts the seconds of μ-law written to a live stream (what the double received), none after it closed', async () => {
    const meter = new SpeechMeter();
    const engine = meter.recognising(new DeepgramLive(opts()));
    assert.deepEqual([engine.name, engine.offline], ['deepgram', false]);
    const stream = await engine.open({ language: 'en-US', encoding: 'mulaw', sampleRate: 8000 });
    const frames = mulawFrames(silence(1500));
    for (const f of frames) stream.write(f);
    const conn = fake.connections.at(-1)!;
    await waitFor('the frames received', async () => conn.bytes === 12_000, 5000, 10);
    await stream.close();
    stream.write(frames[0]!);
    assert.deepEqual(meter.entries(), [{ vendor: 'deepgram', unit: 'audioSeconds', amount: 1.5 }]);
    assert.equal(conn.bytes, 12_000);
  });

  it('counts the audio sent to a one-utterance recogniser; offline engines are not wrapped', async () => {
    const meter = new SpeechMeter();
    const stt = meter.transcribing(new DeepgramTranscriber(opts()));
    const sent = fake.batch.length;
    fake.hear.push('hello');
    await stt.transcribe(silence(800), 8000, { language: 'en-US' });
    await stt.transcribe(Buffer.alloc(16_000 * 2), 16_000, { language: 'en-US' });
    assert.equal(fake.batch.length, sent + 2);
    assert.deepEqual(meter.entries(), [{ vendor: 'deepgram', unit: 'audioSeconds', amount: 1.8 }]);
    const offline = new ScriptedStt(['x']);
    assert.equal(meter.transcribing(offline), offline);
  });
});
