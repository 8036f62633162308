// Deepgram's engines (src/speech/deepgram.ts) through the official client (@deepgram/sdk) against
// the protocol double on loopback (test/helpers/fake-deepgram.ts), fed real speech from espeak-ng
// at the call's rate: what the socket is asked for and sent (the call's own μ-law, untouched), the
// turn events made from live's results, keep-alives, Finalize and CloseStream, a refused key, slow
// answers bounded, a dropped socket replaced once, and Flux's eager end, resumed turn and end.
// @lane wall
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pcm16ToBytes } from '../../src/media/pcm.ts';
import { DeepgramFlux, DeepgramLive, DeepgramTranscriber, deepgramEnvironment, type DeepgramOptions } from '../../src/speech/deepgram.ts';
import { resample } from '../../src/speech/resample.ts';
import { SpeechError } from '../../src/speech/types.ts';
import { collect, has, mulawFrames, paced, turns } from '../helpers/recognition.ts';
import { startFakeDeepgram, type FakeDeepgram } from '../helpers/fake-deepgram.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { silence, speak } from '../helpers/vad-audio.ts';
// The platform loads npm's undici (its own dispatcher replaces the one behind Node's fetch): the
// engines must work in such a process, so this file loads it as the service does.
import 'undici';
import { sleep, waitFor } from '../helpers/wait.ts';

function linear16Frames(pcm: Int16Array, rate: number): Buffer[] {
  const n = rate / 50;
  const out: Buffer[] = [];
  for (let i = 0; i < pcm.length; i += n) out.push(pcm16ToBytes(pcm.subarray(i, Math.min(pcm.length, i + n))));
  return out;
}

describe('Deepgram', { skip: toolsSkip('espeak-ng') }, () => {
  let fake: FakeDeepgram;
  let hours: Int16Array;
  let book: Int16Array;
  let table: Int16Array;
  const opts = (more: Partial<DeepgramOptions> = {}): DeepgramOptions => ({ apiKey: fake.apiKey, baseUrl: fake.url, ...more });

  before(async () => {
    fake = await startFakeDeepgram();
    [hours, book, table] = await Promise.all([
      speak('what are your opening hours', 'en-us'),
      speak('I would like to book', 'en-us+f3'),
      speak('a table for two tonight', 'en-us+f3'),
    ]);
  });
  after(() => fake.close());

  it('makes one base URL into the HTTP and WebSocket environment', () => {
    assert.deepEqual(deepgramEnvironment('http://127.0.0.1:9000/'), { base: 'http://127.0.0.1:9000', production: 'ws://127.0.0.1:9000', agent: 'ws://127.0.0.1:9000', agentRest: 'http://127.0.0.1:9000' });
    assert.equal(deepgramEnvironment('https://dg.example.eu').production, 'wss://dg.example.eu');
  });

  describe('live', () => {
    it('streams the call\'s own μ-law: interim, then a final with speech_final only after the endpointing silence, and the end of the turn', async () => {
      const stt = new DeepgramLive(opts());
      fake.hear.push('What are your opening hours?');
      const stream = await stt.open({ language: 'en-US', encoding: 'mulaw', sampleRate: 8000, endpointingMs: 300, keywords: ['opening hours', ' '] });
      const events = collect(stream);
      const conn = fake.connections.at(-1)!;
      assert.equal(conn.path, '/v1/listen');
      assert.equal(conn.headers.authorization, `Token ${fake.apiKey}`);
      assert.deepEqual(
        { ...conn.query },
        {
          model: 'nova-3', language: 'en-US', encoding: 'mulaw', sample_rate: '8000', channels: '1', interim_results: 'true', endpointing: '300',
          utterance_end_ms: '1000', vad_events: 'true', smart_format: 'true', keyterm: 'opening hours',
        },
      );
      const speech = mulawFrames(hours);
      for (const f of speech) stream.write(f);
      await waitFor('interim results', has(events, 'interim'), 5000);
      // Speech alone ends no turn: the double heard no silence yet.
      await sleep(150);
      assert.ok(!events.some((e) => e.type === 'final' || e.type === 'endOfTurn'), 'no final before the silence');
      assert.ok(events.some((e) => e.type === 'speechStarted'));
      assert.ok(events.some((e) => e.type === 'interim' && e.text !== '' && 'What are your opening hours?'.startsWith(e.text)), JSON.stringify(events));
      const quiet = mulawFrames(silence(200));
      for (const f of quiet) stream.write(f);
      await sleep(150);
      assert.ok(!events.some((e) => e.type === 'endOfTurn'), '200 ms of silence is under the 300 ms endpointing');
      const more = mulawFrames(silence(1200));
      for (const f of more) stream.write(f);
      await waitFor('the end of the turn', has(events, 'endOfTurn'), 5000);
      await waitFor('the utterance end', has(events, 'utteranceEnd'), 5000);
      const final = events.find((e) => e.type === 'final');
      assert.deepEqual(final, { type: 'final', text: 'What are your opening hours?', speechFinal: true, confidence: 0.95 });
      assert.deepEqual(turns(events), ['startOfTurn', 'endOfTurn:What are your opening hours?']);
      assert.ok(events.findIndex((e) => e.type === 'startOfTurn') < events.findIndex((e) => e.type === 'interim'));
      // The frames arrived as the call carried them: same bytes, same framing.
      const sent = [...speech, ...quiet, ...more];
      assert.equal(conn.frames, sent.length);
      assert.ok(Buffer.concat(conn.audio).equals(Buffer.concat(sent)), 'μ-law bytes untouched');
      await stream.close();
      assert.deepEqual(conn.controls, ['CloseStream']);
      assert.equal(stream.state, 'closed');
      assert.equal(events.at(-1)?.type, 'closed');
    });

    it('sends linear16 at the rate it is given, and hears it', async () => {
      const stt = new DeepgramLive(opts());
      const stream = await stt.open({ language: 'en-GB', encoding: 'linear16', sampleRate: 16_000 });
      const events = collect(stream);
      const conn = fake.connections.at(-1)!;
      assert.equal(conn.query.encoding, 'linear16');
      assert.equal(conn.query.sample_rate, '16000');
      assert.equal(conn.query.language, 'en-GB');
      fake.hear.push('Hello there');
      const pcm = resample(hours, 8000, 16_000);
      const frames = [...linear16Frames(pcm, 16_000), ...linear16Frames(new Int16Array(16_000), 16_000)];
      for (const f of frames) stream.write(f);
      await waitFor('the end of the turn', has(events, 'endOfTurn'), 5000);
      assert.deepEqual(turns(events), ['startOfTurn', 'endOfTurn:Hello there']);
      assert.equal(conn.bytes, frames.reduce((n, f) => n + f.length, 0));
      assert.throws(() => stream.write(Buffer.alloc(3)), (e: unknown) => e instanceof SpeechError && e.kind === 'input');
      assert.throws(() => stream.write(Buffer.alloc(32_002)), (e: unknown) => e instanceof SpeechError && /at most a second/.test(e.message));
      await stream.close();
    });

    it('sends KeepAlive while nothing is written, which keeps the socket open past the server\'s idle timeout', async () => {
      fake.idleTimeoutMs = 700;
      try {
        const stream = await new DeepgramLive(opts({ keepAliveMs: 200 })).open({ language: 'en-US', encoding: 'mulaw', sampleRate: 8000 });
        const events = collect(stream);
        const conn = fake.connections.at(-1)!;
        stream.write(mulawFrames(silence(100))[0]!);
        await sleep(1500);
        assert.ok(conn.controls.filter((c) => c === 'KeepAlive').length >= 4, JSON.stringify(conn.controls));
        assert.equal(conn.closed, undefined, 'still open');
        assert.equal(stream.state, 'open');
        assert.deepEqual(events, []);
        await stream.close();

        // Without them (keep-alives every 5 s), the double closes the idle socket: the stream replaces it.
        const lazy = await new DeepgramLive(opts({ keepAliveMs: 5000 })).open({ language: 'en-US', encoding: 'mulaw', sampleRate: 8000 });
        const lazyEvents = collect(lazy);
        const first = fake.connections.at(-1)!;
        await waitFor('the reconnection', has(lazyEvents, 'reconnected'), 5000);
        assert.deepEqual(first.closed, { code: 1011, by: 'server' });
        await lazy.close();
      } finally {
        fake.idleTimeoutMs = 10_000;
      }
    });

    it('finalizes what was heard on Finalize, and ends with CloseStream, the server\'s Metadata and close', async () => {
      const stream = await new DeepgramLive(opts()).open({ language: 'en-US', encoding: 'mulaw', sampleRate: 8000 });
      const events = collect(stream);
      const conn = fake.connections.at(-1)!;
      fake.hear.push('opening hours');
      for (const f of mulawFrames(hours)) stream.write(f);
      await waitFor('speech heard', has(events, 'startOfTurn'), 5000);
      await stream.finalize();
      assert.deepEqual(events.find((e) => e.type === 'final'), { type: 'final', text: 'opening hours', speechFinal: false, confidence: 0.95 });
      assert.ok(conn.sent.some((m) => m.type === 'Results' && m.from_finalize === true));
      assert.ok(!events.some((e) => e.type === 'endOfTurn'));
      await stream.close();
      assert.deepEqual(conn.controls, ['Finalize', 'CloseStream']);
      assert.equal(conn.sent.at(-1)?.type, 'Metadata');
      assert.deepEqual(conn.closed, { code: 1000, by: 'server' });
      // The turn the engine had not ended ends at the close with what it heard, then the stream.
      assert.deepEqual(events.slice(-2).map((e) => ('text' in e ? `${e.type}:${e.text}` : e.type)), ['endOfTurn:opening hours', 'closed']);
      stream.write(Buffer.alloc(160));
      assert.equal(conn.frames, mulawFrames(hours).length, 'nothing is sent after the close');
    });

    it('says a refused key is refused (401), without the key, and sends nothing', async () => {
      const key = 'dg-wrong-key-abcdef';
      const before = fake.connections.length;
      await assert.rejects(new DeepgramLive(opts({ apiKey: key })).open({ language: 'en-US', encoding: 'mulaw', sampleRate: 8000 }), (e: unknown) => {
        assert.ok(e instanceof SpeechError);
        assert.equal(e.kind, 'refused');
        assert.equal(e.status, 401);
        assert.match(e.message, /Deepgram refused the API key \(HTTP 401\)/);
        assert.ok(!e.message.includes(key));
        return true;
      });
      assert.equal(fake.connections.length, before);
      assert.deepEqual(fake.handshakes.at(-1), { path: '/v1/listen', status: 401, authorization: `Token ${key}` });
      await assert.rejects(new DeepgramFlux(opts({ apiKey: key })).open({ language: 'en-US', encoding: 'mulaw', sampleRate: 8000 }), (e: unknown) => e instanceof SpeechError && e.kind === 'refused');
    });

    it('bounds a slow open and a slow first result; a slow answer within the bound is heard', async () => {
      fake.plan.push({ acceptDelayMs: 3000 });
      const t0 = Date.now();
      await assert.rejects(new DeepgramLive(opts({ openTimeoutMs: 300 })).open({ language: 'en-US', encoding: 'mulaw', sampleRate: 8000 }),
        (e: unknown) => e instanceof SpeechError && e.kind === 'timeout' && /did not open within 300 ms/.test(e.message));
      assert.ok(Date.now() - t0 < 2000, `gave up after ${Date.now() - t0} ms`);

      fake.plan.push({ firstResultDelayMs: 3000 });
      const slow = await new DeepgramLive(opts({ firstResultTimeoutMs: 400 })).open({ language: 'en-US', encoding: 'mulaw', sampleRate: 8000 });
      const events = collect(slow);
      const t1 = Date.now();
      void paced(slow, mulawFrames(hours), 5);
      await waitFor('the error', has(events, 'error'), 3000);
      assert.ok(Date.now() - t1 < 2000);
      const err = events.find((e) => e.type === 'error');
      assert.ok(err?.type === 'error' && err.error.kind === 'timeout' && /no result within 400 ms/.test(err.error.message));
      assert.equal(events.at(-1)?.type, 'closed');
      assert.equal(slow.state, 'closed');

      fake.plan.push({ firstResultDelayMs: 300 });
      fake.hear.push('a little late');
      const late = await new DeepgramLive(opts({ firstResultTimeoutMs: 2000 })).open({ language: 'en-US', encoding: 'mulaw', sampleRate: 8000 });
      const lateEvents = collect(late);
      for (const f of [...mulawFrames(hours), ...mulawFrames(silence(500))]) late.write(f);
      await waitFor('the late end of turn', has(lateEvents, 'endOfTurn'), 5000);
      assert.deepEqual(turns(lateEvents), ['startOfTurn', 'endOfTurn:a little late']);
      await late.close();
    });

    it('replaces a socket dropped mid-utterance once, resending what was written meanwhile; a second drop ends the stream', async () => {
      fake.plan.push({ dropAfterFrames: 30 }, {});
      fake.hear.push('what are your', 'opening hours');
      const stream = await new DeepgramLive(opts()).open({ language: 'en-US', encoding: 'mulaw', sampleRate: 8000 });
      const events = collect(stream);
      const n = fake.connections.length;
      const frames = [...mulawFrames(hours), ...mulawFrames(silence(600))];
      await paced(stream, frames, 4);
      await waitFor('the end of the turn', has(events, 'endOfTurn'), 5000);
      assert.equal(fake.connections.length, n + 1, 'one new socket');
      const [first, second] = fake.connections.slice(n - 1);
      assert.deepEqual(first!.closed, { code: 1006, by: 'server' });
      const reconnected = events.find((e) => e.type === 'reconnected');
      assert.ok(reconnected?.type === 'reconnected' && reconnected.droppedBytes === 0);
      // Frames the engine sent into the dying socket before it heard of the drop are lost; the rest arrived.
      const lost = frames.length - first!.frames - second!.frames;
      assert.ok(lost >= 0 && lost <= 3, `lost ${lost} frames`);
      assert.ok(second!.bytes >= reconnected.resentBytes);
      assert.equal(stream.state, 'open');
      assert.ok(turns(events).at(-1)?.startsWith('endOfTurn:'), JSON.stringify(turns(events)));
      await stream.close();

      fake.plan.push({ dropAfterFrames: 10 }, { dropAfterFrames: 10 });
      const twice = await new DeepgramLive(opts()).open({ language: 'en-US', encoding: 'mulaw', sampleRate: 8000 });
      const twiceEvents = collect(twice);
      const m = fake.connections.length;
      void paced(twice, mulawFrames(hours), 4);
      await waitFor('the error', has(twiceEvents, 'error'), 5000);
      const err = twiceEvents.find((e) => e.type === 'error');
      assert.ok(err?.type === 'error' && err.error.kind === 'failed' && /dropped again/.test(err.error.message), JSON.stringify(err));
      assert.deepEqual(twiceEvents.filter((e) => e.type !== 'startOfTurn' && e.type !== 'speechStarted' && e.type !== 'interim').map((e) => e.type), ['reconnected', 'error', 'closed']);
      assert.equal(fake.connections.length, m + 1, 'no third socket');
      assert.equal(twice.state, 'closed');
    });

    it('closes at once on abort', async () => {
      const ac = new AbortController();
      const stream = await new DeepgramLive(opts()).open({ language: 'en-US', encoding: 'mulaw', sampleRate: 8000, signal: ac.signal });
      const events = collect(stream);
      const conn = fake.connections.at(-1)!;
      ac.abort();
      assert.equal(stream.state, 'closed');
      assert.deepEqual(events.map((e) => e.type), ['closed']);
      await waitFor('the socket closed', () => Promise.resolve(conn.closed !== undefined), 3000);
      assert.deepEqual(conn.closed, { code: 1000, by: 'client' });
      assert.deepEqual(conn.controls, []);
    });
  });

  describe('Flux', () => {
    it('reports EagerEndOfTurn, TurnResumed and EndOfTurn in order, from the pauses in the audio', async () => {
      const stt = new DeepgramFlux(opts());
      const stream = await stt.open({ language: 'en-US', encoding: 'mulaw', sampleRate: 8000 });
      const events = collect(stream);
      const conn = fake.connections.at(-1)!;
      assert.equal(conn.path, '/v2/listen');
      assert.deepEqual({ ...conn.query }, { model: 'flux-general-en', encoding: 'mulaw', sample_rate: '8000', eager_eot_threshold: '0.5' });
      fake.hear.push('I would like to book', 'a table for two tonight');
      // A pause long enough for an eager end (250 ms) but short of the end of the turn (700 ms).
      for (const f of [...mulawFrames(book), ...mulawFrames(silence(450)), ...mulawFrames(table), ...mulawFrames(silence(1000))]) stream.write(f);
      await waitFor('the end of the turn', has(events, 'endOfTurn'), 5000);
      assert.deepEqual(turns(events), [
        'startOfTurn',
        'eagerEndOfTurn:I would like to book',
        'turnResumed',
        'eagerEndOfTurn:I would like to book a table for two tonight',
        'endOfTurn:I would like to book a table for two tonight',
      ]);
      const end = events.find((e) => e.type === 'endOfTurn');
      assert.ok(end?.type === 'endOfTurn' && end.confidence === 0.9);
      assert.ok(events.some((e) => e.type === 'interim' && e.text.startsWith('I would')));
      await stream.close();
      assert.deepEqual(conn.controls, ['CloseStream']);
      assert.deepEqual(conn.closed, { code: 1000, by: 'server' });
    });

    it('keeps the socket open with pings (Flux closes on a KeepAlive message), ends a turn on finalize, and hears English only', async () => {
      fake.idleTimeoutMs = 700;
      try {
        const stream = await new DeepgramFlux(opts({ keepAliveMs: 200 })).open({ language: 'en-US', encoding: 'linear16', sampleRate: 16_000 });
        const events = collect(stream);
        const conn = fake.connections.at(-1)!;
        await sleep(1500);
        assert.ok(conn.pings >= 4, `${conn.pings} pings`);
        assert.deepEqual(conn.controls, []);
        assert.equal(conn.closed, undefined);
        fake.hear.push('hello');
        for (const f of linear16Frames(resample(hours, 8000, 16_000), 16_000)) stream.write(f);
        await waitFor('the turn', has(events, 'startOfTurn'), 5000);
        await stream.finalize();
        assert.deepEqual(conn.controls, ['ForceEndTurn']);
        assert.deepEqual(turns(events), ['startOfTurn', 'endOfTurn:hello']);
        assert.equal(conn.sent.filter((m) => m.type === 'TurnInfo' && m.event === 'EndOfTurn').at(-1)?.trigger, 'manual');
        await stream.close();
      } finally {
        fake.idleTimeoutMs = 10_000;
      }
      await assert.rejects(new DeepgramFlux(opts()).open({ language: 'es-MX', encoding: 'mulaw', sampleRate: 8000 }),
        (e: unknown) => e instanceof SpeechError && e.kind === 'input' && /English only/.test(e.message));
    });
  });

  describe('pre-recorded', () => {
    it('transcribes one utterance as a WAV at its own rate; silence is empty; a refused key is refused', async () => {
      const stt = new DeepgramTranscriber(opts());
      fake.hear.push('What are your opening hours?');
      const r = await stt.transcribe(hours, 8000, { language: 'en-US', grammar: { kind: 'phrases', phrases: ['opening hours'] } });
      assert.deepEqual(r, { text: 'What are your opening hours?', engine: 'deepgram', model: 'nova-3', confidence: 0.97 });
      const req = fake.batch.at(-1)!;
      assert.equal(req.headers.authorization, `Token ${fake.apiKey}`);
      assert.equal(req.sampleRate, 8000);
      assert.equal(req.bytes, 44 + hours.length * 2);
      assert.deepEqual({ ...req.query }, { model: 'nova-3', language: 'en-US', smart_format: 'true', keyterm: 'opening hours' });
      assert.equal((await stt.transcribe(silence(500), 8000, { language: 'en-US' })).text, '');
      await assert.rejects(new DeepgramTranscriber(opts({ apiKey: 'nope-nope' })).transcribe(hours, 8000, { language: 'en-US' }),
        (e: unknown) => e instanceof SpeechError && e.kind === 'refused' && e.status === 401 && !e.message.includes('nope-nope'));
      fake.batchFailures.push(503, 503);
      await assert.rejects(new DeepgramTranscriber(opts({ maxRetries: 1 })).transcribe(hours, 8000, { language: 'en-US' }),
        (e: unknown) => e instanceof SpeechError && e.kind === 'failed' && e.status === 503);
    });
  });
});
