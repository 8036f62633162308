// OpenAI's streaming transcription (src/speech/openai-realtime.ts) against the Realtime double on
// loopback (test/helpers/fake-openai-realtime.ts), fed espeak-ng speech as a call carries it: the
// transcription session asked for (the call's own μ-law, or linear16 resampled to 24 kHz), the
// turn from the server's speech events, deltas and completed transcript, finalize() committing what
// is heard, a refused key, a session the server refuses, a dropped socket ending the stream with an
// error, and which servers are taken to offer it.
// @lane wall
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pcm16ToBytes } from '../../src/media/pcm.ts';
import { offersRealtime, OpenAIRealtimeTranscription, realtimeUrl } from '../../src/speech/openai-realtime.ts';
import { resample } from '../../src/speech/resample.ts';
import { SpeechError } from '../../src/speech/types.ts';
import { startFakeOpenAIRealtime, type FakeOpenAIRealtime } from '../helpers/fake-openai-realtime.ts';
import { collect, has, mulawFrames, turns } from '../helpers/recognition.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { silence, speak } from '../helpers/vad-audio.ts';
import { waitFor } from '../helpers/wait.ts';

describe('OpenAI Realtime transcription', { skip: toolsSkip('espeak-ng') }, () => {
  let fake: FakeOpenAIRealtime;
  let hours: Int16Array;
  const engine = (more: Partial<ConstructorParameters<typeof OpenAIRealtimeTranscription>[0]> = {}) =>
    new OpenAIRealtimeTranscription({ baseUrl: fake.baseUrl, apiKey: fake.apiKey, model: 'gpt-4o-transcribe', ...more });
  const mulaw8k = { language: 'en-US', encoding: 'mulaw', sampleRate: 8000 } as const;

  before(async () => {
    fake = await startFakeOpenAIRealtime();
    hours = await speak('what are your opening hours', 'en-us');
  });
  after(() => fake.close());

  it('knows its URL and which servers offer it', () => {
    assert.equal(realtimeUrl('https://api.openai.com/v1').href, 'wss://api.openai.com/v1/realtime?intent=transcription');
    assert.equal(realtimeUrl('http://127.0.0.1:9000/v1/').href, 'ws://127.0.0.1:9000/v1/realtime?intent=transcription');
    assert.equal(offersRealtime('https://api.openai.com/v1', 'auto'), true);
    assert.equal(offersRealtime('http://127.0.0.1:8000/v1', 'auto'), false, 'a local server: batch unless told');
    assert.equal(offersRealtime('http://127.0.0.1:8000/v1', 'on'), true);
    assert.equal(offersRealtime('https://api.openai.com/v1', 'off'), false);
  });

  it('streams the call\'s own μ-law to a transcription session: the turn from the server\'s speech events, its deltas as interim text, its transcript at the end', async () => {
    fake.hear.push('What are your opening hours?');
    const stream = await engine().open({ ...mulaw8k, endpointingMs: 400, keywords: ['opening hours'] });
    const conn = fake.connections.at(-1)!;
    assert.equal(conn.headers.authorization, `Bearer ${fake.apiKey}`);
    assert.deepEqual(conn.session, {
      type: 'transcription',
      audio: { input: {
        format: { type: 'audio/pcmu' },
        transcription: { model: 'gpt-4o-transcribe', language: 'en', prompt: 'opening hours' },
        turn_detection: { type: 'server_vad', silence_duration_ms: 400, prefix_padding_ms: 300, threshold: 0.5 },
      } },
    });
    const events = collect(stream);
    const frames = mulawFrames(hours);
    for (const f of frames) stream.write(f);
    await waitFor('the start of the turn', has(events, 'startOfTurn'), 5000);
    assert.ok(!events.some((e) => e.type === 'endOfTurn'), 'no end while the caller speaks');
    for (const f of mulawFrames(silence(600))) stream.write(f);
    await waitFor('the end of the turn', has(events, 'endOfTurn'), 5000);
    assert.deepEqual(turns(events), ['startOfTurn', 'endOfTurn:What are your opening hours?']);
    assert.ok(events.some((e) => e.type === 'interim' && 'What are your opening hours?'.startsWith(e.text) && e.text !== ''), JSON.stringify(events));
    assert.deepEqual(events.find((e) => e.type === 'final'), { type: 'final', text: 'What are your opening hours?', speechFinal: true });
    // The audio arrived as it was: μ-law bytes, one append per frame.
    assert.equal(conn.bytes, frames.reduce((n, f) => n + f.length, 0) + 30 * 160);
    await stream.close();
    assert.equal(stream.state, 'closed');
    assert.equal(events.at(-1)!.type, 'closed');
    await waitFor('the socket closed', () => Promise.resolve(conn.closed), 2000);
  });

  it('resamples linear16 to the 24 kHz PCM the session takes, and finalize() commits what is being heard at once', async () => {
    fake.hear.push('book a table');
    const stream = await engine().open({ language: 'en-GB', encoding: 'linear16', sampleRate: 8000 });
    const conn = fake.connections.at(-1)!;
    assert.deepEqual((conn.session as { audio: { input: { format: unknown } } }).audio.input.format, { type: 'audio/pcm', rate: 24_000 });
    const events = collect(stream);
    const bytes = pcm16ToBytes(hours);
    for (let i = 0; i < bytes.length; i += 320) stream.write(bytes.subarray(i, i + 320));
    await waitFor('the start of the turn', has(events, 'startOfTurn'), 5000);
    await stream.finalize();
    assert.equal(conn.commits, 1);
    assert.deepEqual(turns(events), ['startOfTurn', 'endOfTurn:book a table']);
    // Three samples out for each one in (less the filter's tail, given at the end only).
    const expected = resample(hours, 8000, 24_000).length * 2;
    assert.ok(conn.bytes <= expected && conn.bytes > expected - 400, `${conn.bytes} of ${expected} bytes`);
    await stream.close();
  });

  it('a refused key is refused, naming no key; a handshake the server refuses (400) fails the open; bad input is refused before anything is sent', async () => {
    await assert.rejects(engine({ apiKey: 'sk-wrong-key' }).open(mulaw8k), (e: unknown) => {
      assert.ok(e instanceof SpeechError);
      assert.equal(e.kind, 'refused');
      assert.equal(e.status, 401);
      assert.ok(!e.message.includes('sk-wrong-key'));
      return true;
    });
    const before = fake.connections.length;
    await assert.rejects(engine().open({ language: 'en-US', encoding: 'mulaw', sampleRate: 16_000 }), (e: unknown) => e instanceof SpeechError && e.kind === 'input');
    assert.equal(fake.connections.length, before, 'nothing opened');
    await assert.rejects(engine({ baseUrl: fake.baseUrl.replace('/v1', '/v2') }).open(mulaw8k), (e: unknown) => e instanceof SpeechError && e.kind === 'failed' && /HTTP 400/.test(e.message));
  });

  it('a socket that drops mid-utterance ends the turn with what was heard and the stream with an error', async () => {
    fake.hear.push('never completed');
    fake.dropAfterAppends = 60;
    const stream = await engine().open(mulaw8k);
    const events = collect(stream);
    for (const f of mulawFrames(hours)) stream.write(f);
    await waitFor('the stream ended', has(events, 'closed'), 5000);
    const error = events.find((e) => e.type === 'error');
    assert.ok(error?.type === 'error' && error.error.kind === 'failed' && /dropped/.test(error.error.message), JSON.stringify(events));
    const t = turns(events);
    assert.equal(t.filter((x) => x === 'startOfTurn').length, t.filter((x) => x.startsWith('endOfTurn')).length, 'every turn started is ended');
    assert.equal(stream.state, 'closed');
  });
});
