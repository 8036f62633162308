// The tests every streamed synthesis engine passes against its vendor's double (each vendor's test
// file runs them, then its own protocol checks): audio before end(), in the encoding and at the
// rate asked, as long as the text; cancel at once; a refused key; a slow first audio bounded; a
// socket dropped mid-reply an error, not a hang; the voices list; one-shot synthesis.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { decodeG711 } from '../../src/media/g711.ts';
import type { StreamBounds } from '../../src/speech/tts-stream.ts';
import { SpeechError, type SynthesisChunk, type TextToSpeech } from '../../src/speech/types.ts';
import { joined, readAll, rms, samplesFor, type FakeTtsServer, type RecordedSocket } from './fake-tts.ts';
import { sleep, waitFor, within } from './wait.ts';

export interface StreamedTtsSpec {
  start(): Promise<FakeTtsServer>;
  key: string;
  engine(baseUrl: string, apiKey: string, bounds?: Partial<StreamBounds>): Required<Pick<TextToSpeech, 'openStream' | 'listVoices'>> & TextToSpeech;
  /** The text the double was given to speak on a socket, in order. */
  spoken(socket: RecordedSocket): string;
  /** Whether the client told the provider to stop (its cancel message, or closing the socket). */
  stopSeen(socket: RecordedSocket): boolean;
  /** What listVoices() gives for the double's list. */
  voices: { count: number; female: { id: string; name: string; previewUrl?: string } };
}

const squash = (s: string) => s.replace(/\s+/g, '');

export function streamedTtsSuite(name: string, spec: StreamedTtsSpec): void {
  describe(`${name}: streamed synthesis`, () => {
    let fake: FakeTtsServer;
    before(async () => {
      fake = await spec.start();
    });
    after(() => fake.close());
    const reset = () => {
      fake.failures = {};
      fake.pacing = { chunkMs: 40, gapMs: 3 };
    };

    it('speaks the first sentence before end(), μ-law at 8 kHz, as long as the text', async () => {
      reset();
      const tts = spec.engine(fake.baseUrl, spec.key);
      const s = tts.openStream({ language: 'en-US', sampleRate: 8000 });
      assert.equal(s.encoding, 'mulaw');
      s.push('Hello there. ');
      const it = s.chunks[Symbol.asyncIterator]();
      const first = await within(it.next(), 5000, () => assert.fail('no audio before end()'));
      assert.equal(first.done, false);
      assert.ok(s.timing.firstAudioAt! >= s.timing.firstFlushAt!, 'the first audio follows the first sentence');
      s.push('How can I ');
      s.push('help you today?');
      s.end();
      const chunks: SynthesisChunk[] = [first.value as SynthesisChunk];
      for (let r = await it.next(); !r.done; r = await it.next()) chunks.push(r.value);
      for (const c of chunks) {
        assert.equal(c.encoding, 'mulaw');
        assert.equal(c.sampleRate, 8000);
        assert.equal(c.audio.length, c.pcm16.length, 'one μ-law byte per sample');
        assert.deepEqual(decodeG711('PCMU', c.audio), c.pcm16);
      }
      const pcm = joined(chunks);
      assert.ok(rms(pcm) > 2000, `the audio is not silence (rms ${rms(pcm).toFixed(0)})`);
      const sock = fake.sockets.at(-1)!;
      const spoken = spec.spoken(sock);
      assert.equal(squash(spoken), squash('Hello there. How can I help you today?'), 'every word reached the provider, in order');
      assert.equal(pcm.length, samplesFor(spoken, 8000), 'the audio is as long as the double made it for the text');
      assert.ok(s.timing.endedAt !== undefined);
    });

    it('gives PCM16 at 16 kHz when asked, and more text gives more audio', async () => {
      reset();
      const tts = spec.engine(fake.baseUrl, spec.key);
      const lengths: number[] = [];
      for (const text of ['Yes.', 'Yes, we are open from nine to five on weekdays.']) {
        const s = tts.openStream({ language: 'en-US', sampleRate: 16000, encoding: 'pcm' });
        s.push(text);
        s.end();
        const r = await readAll(s.chunks);
        assert.equal(r.error, undefined);
        for (const c of r.chunks) {
          assert.equal(c.encoding, 'pcm');
          assert.equal(c.sampleRate, 16000);
          assert.equal(c.audio.length, c.pcm16.length * 2);
        }
        assert.ok(rms(joined(r.chunks)) > 2000);
        assert.equal(r.samples, samplesFor(spec.spoken(fake.sockets.at(-1)!), 16000));
        lengths.push(r.samples);
      }
      assert.ok(lengths[1]! > 5 * lengths[0]!, `more text, more audio (${lengths.join(' vs ')})`);
    });

    it('cancel() stops the provider and drops what is queued: nothing more arrives', async () => {
      reset();
      fake.pacing = { chunkMs: 20, gapMs: 15 };
      const tts = spec.engine(fake.baseUrl, spec.key);
      const s = tts.openStream({ language: 'en-US', sampleRate: 8000 });
      s.push('This is a long answer that would take a good many seconds to say in full. ');
      s.end();
      let n = 0;
      let afterCancel = 0;
      let cancelled = false;
      const reading = (async () => {
        for await (const _c of s.chunks) {
          if (cancelled) afterCancel++;
          if (++n === 3) {
            s.cancel();
            cancelled = true;
          }
        }
      })();
      await within(reading, 5000, () => assert.fail('the stream did not end on cancel'));
      assert.equal(n, 3);
      assert.equal(afterCancel, 0, 'no chunk after cancel()');
      const sock = fake.sockets.at(-1)!;
      await waitFor('the provider told to stop', async () => spec.stopSeen(sock), 3000);
      const sent = sock.audioChunks;
      await sleep(150);
      assert.equal(sock.audioChunks, sent, 'the double stopped sending');
      assert.ok(sent < 40, `the double stopped well before the end (${sent} chunks)`);
    });

    it('a refused key is a SpeechError saying so, without the key', async () => {
      reset();
      const tts = spec.engine(fake.baseUrl, 'wrong-key-secret-42');
      const s = tts.openStream({ language: 'en-US', sampleRate: 8000 });
      s.push('Hello.');
      s.end();
      const r = await within(readAll(s.chunks), 5000, () => assert.fail('hung on a refused key'));
      assert.ok(r.error instanceof SpeechError, String(r.error));
      assert.equal(r.error.engine, tts.name);
      assert.equal(r.error.status, 401);
      assert.match(r.error.message, /refused/);
      assert.doesNotMatch(r.error.message, /wrong-key-secret-42/);
      await assert.rejects(tts.listVoices(), (e: SpeechError) => e.status === 401 && /refused/.test(e.message) && !e.message.includes('wrong-key-secret-42'));
      await assert.rejects(tts.synthesize('Hello.', { language: 'en-US' }), (e: SpeechError) => e.status === 401);
    });

    it('a first audio slower than its bound is a timeout', async () => {
      reset();
      fake.failures.firstAudioDelayMs = 3000;
      const tts = spec.engine(fake.baseUrl, spec.key, { firstAudioMs: 300 });
      const s = tts.openStream({ language: 'en-US', sampleRate: 8000 });
      s.push('Hello.');
      const t0 = Date.now();
      const r = await within(readAll(s.chunks), 2500, () => assert.fail('the first-audio bound did not hold'));
      assert.ok(r.error instanceof SpeechError);
      assert.equal(r.error.kind, 'timeout');
      assert.match(r.error.message, /no audio within 300 ms/);
      assert.ok(Date.now() - t0 < 2000);
      await waitFor('the socket closed', async () => fake.sockets.at(-1)!.closedByClient, 3000);
    });

    it('a socket dropped mid-reply is an error after the audio that came, not a hang', async () => {
      reset();
      fake.failures.dropAfterChunks = 2;
      const tts = spec.engine(fake.baseUrl, spec.key);
      const s = tts.openStream({ language: 'en-US', sampleRate: 8000 });
      s.push('A sentence long enough for several chunks of audio. ');
      s.end();
      const r = await within(readAll(s.chunks), 5000, () => assert.fail('hung on a dropped socket'));
      assert.equal(r.chunks.length, 2, 'the audio that came before the drop');
      assert.ok(r.error instanceof SpeechError, String(r.error));
      assert.equal(r.error.engine, tts.name);
      assert.match(r.error.message, /closed|socket/i);
    });

    it('end() with no text ends without audio; text after end() is refused', async () => {
      reset();
      const tts = spec.engine(fake.baseUrl, spec.key);
      const s = tts.openStream({ language: 'en-US', sampleRate: 8000 });
      s.end();
      assert.throws(() => s.push('late'), SpeechError);
      const r = await within(readAll(s.chunks), 5000, () => assert.fail('hung'));
      assert.deepEqual([r.chunks.length, r.error], [0, undefined]);
    });

    it('lists the voices from the provider', async () => {
      reset();
      const tts = spec.engine(fake.baseUrl, spec.key);
      const voices = await tts.listVoices();
      assert.equal(voices.length, spec.voices.count);
      const f = voices.find((v) => v.id === spec.voices.female.id);
      assert.ok(f, 'the female voice is listed');
      assert.equal(f.name, spec.voices.female.name);
      assert.equal(f.gender, 'female');
      assert.equal(f.engine, tts.name);
      if (spec.voices.female.previewUrl) assert.equal(f.previewUrl, spec.voices.female.previewUrl);
      await tts.check();
    });

    it('synthesizes one text over HTTP streaming: PCM16 at 16 kHz, as long as the text', async () => {
      reset();
      const tts = spec.engine(fake.baseUrl, spec.key);
      const text = 'Thank you for calling.';
      const speech = await tts.synthesize(text, { language: 'en-US', gender: 'male' });
      assert.equal(speech.sampleRate, 16000);
      assert.equal(speech.engine, tts.name);
      assert.equal(speech.pcm16.length, samplesFor(text, 16000));
      assert.ok(rms(speech.pcm16) > 2000);
      assert.equal((await tts.synthesize('   ', { language: 'en-US' })).pcm16.length, 0);
    });

    it('refuses what it cannot speak before opening anything', async () => {
      reset();
      const tts = spec.engine(fake.baseUrl, spec.key);
      const before = fake.sockets.length;
      assert.throws(() => tts.openStream({ language: 'en-US', sampleRate: 16000, encoding: 'mulaw' }), (e: SpeechError) => e.kind === 'input');
      assert.throws(() => tts.openStream({ language: 'en-US', sampleRate: 11025 as 8000 }), (e: SpeechError) => e.kind === 'input');
      assert.throws(() => tts.openStream({ language: 'en-US', sampleRate: 8000, voice: 'no spaces please' }), (e: SpeechError) => e.kind === 'input');
      assert.equal(fake.sockets.length, before);
    });
  });
}
