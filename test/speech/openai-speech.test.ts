// The OpenAI-compatible speech engines through the real `openai` client against the fake server on
// loopback (test/helpers/fake-audio.ts): what arrives (the WAV file and the form fields, the JSON
// of a speech request), what comes back (PCM at 24 kHz for `pcm`, at the WAV's own rate for `wav`,
// streamed in pieces), retries, timeouts, aborts, and errors that name the provider.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { OpenAISynthesizer, OpenAITranscriber } from '../../src/speech/openai-speech.ts';
import { parseWav } from '../../src/speech/wav.ts';
import { MAX_SYNTHESIS_CHARS, SpeechError } from '../../src/speech/types.ts';
import { fakeSpeechPcm } from '../helpers/fake-audio.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';

describe('OpenAI-compatible speech', () => {
  let fake: FakeLlm;
  const common = () => ({ name: 'local-audio', baseUrl: fake.baseUrl, apiKey: 'sk-speech', timeoutMs: 2000, maxRetries: 2 });
  before(async () => {
    fake = await startFakeLlm();
  });
  after(() => fake.close());

  describe('transcription', () => {
    it('uploads the utterance as a WAV with the model and the language, and returns the text', async () => {
      const stt = new OpenAITranscriber({ ...common(), model: 'whisper-1' });
      assert.equal(stt.offline, false);
      fake.audioScript.push({ text: ' What are your opening hours? ' });
      const pcm = Int16Array.from({ length: 8000 }, (_, i) => Math.round(4000 * Math.sin(i / 3)));
      const r = await stt.transcribe(pcm, 8000, { language: 'en-US' });
      assert.deepEqual(r, { text: 'What are your opening hours?', engine: 'local-audio', model: 'whisper-1' });
      const req = fake.audioRequests.at(-1)!;
      assert.equal(req.route, 'transcriptions');
      assert.equal(req.headers.authorization, 'Bearer sk-speech');
      assert.match(String(req.headers['content-type']), /^multipart\/form-data; boundary=/);
      assert.equal(req.fields.model, 'whisper-1');
      assert.equal(req.fields.language, 'en');
      assert.equal(req.fields.response_format, 'json');
      assert.equal(req.fields.prompt, undefined);
      assert.equal(req.file?.filename, 'utterance.wav');
      assert.equal(req.file?.contentType, 'audio/wav');
      const wav = parseWav(req.file!.data);
      assert.equal(wav.sampleRate, 8000);
      assert.deepEqual(wav.pcm16, pcm, 'the samples arrive as they were');
    });

    it('sends a grammar\'s phrases as the prompt, and takes little-endian bytes', async () => {
      const stt = new OpenAITranscriber({ ...common(), model: 'gpt-4o-mini-transcribe' });
      const bytes = Buffer.alloc(3200);
      const r = await stt.transcribe(bytes, 16_000, { language: 'es-MX', grammar: { kind: 'phrases', phrases: ['sí', 'no', 'hablar con una persona'] } });
      assert.equal(r.text, `fake transcript of ${44 + 3200} bytes`);
      const req = fake.audioRequests.at(-1)!;
      assert.equal(req.fields.model, 'gpt-4o-mini-transcribe');
      assert.equal(req.fields.language, 'es');
      assert.equal(req.fields.prompt, 'sí, no, hablar con una persona');
      assert.equal(parseWav(req.file!.data).sampleRate, 16_000);
    });

    it('retries a 503 and names the provider when it keeps failing', async () => {
      const stt = new OpenAITranscriber({ ...common(), model: 'whisper-1', maxRetries: 1 });
      fake.audioScript.push({ status: 503 }, { text: 'second time lucky' });
      const before = fake.audioRequests.length;
      assert.equal((await stt.transcribe(new Int16Array(800), 8000, { language: 'en-US' })).text, 'second time lucky');
      assert.equal(fake.audioRequests.length - before, 2);
      fake.audioScript.push({ status: 500 }, { status: 500 });
      await assert.rejects(stt.transcribe(new Int16Array(800), 8000, { language: 'en-US' }),
        (e: unknown) => e instanceof SpeechError && e.engine === 'local-audio' && e.status === 500 && /speech engine 'local-audio' failed: transcription: 500/.test(e.message));
      fake.audioScript.push({ status: 401 });
      await assert.rejects(stt.transcribe(new Int16Array(800), 8000, { language: 'en-US' }), (e: unknown) => e instanceof SpeechError && e.status === 401);
    });

    it('times out, passes an abort through, and refuses too much audio before sending it', async () => {
      const slow = new OpenAITranscriber({ ...common(), model: 'whisper-1', timeoutMs: 200, maxRetries: 0 });
      fake.audioScript.push({ delayMs: 1000 });
      await assert.rejects(slow.transcribe(new Int16Array(800), 8000, { language: 'en-US' }), (e: unknown) => e instanceof SpeechError && e.kind === 'timeout');
      const stt = new OpenAITranscriber({ ...common(), model: 'whisper-1' });
      fake.audioScript.push({ delayMs: 1000 });
      const ac = new AbortController();
      setTimeout(() => ac.abort(), 50);
      await assert.rejects(stt.transcribe(new Int16Array(800), 8000, { language: 'en-US', signal: ac.signal }), (e: unknown) => e instanceof Error && e.name === 'AbortError');
      const n = fake.audioRequests.length;
      await assert.rejects(stt.transcribe(new Int16Array(8000 * 31), 8000, { language: 'en-US' }), (e: unknown) => e instanceof SpeechError && e.kind === 'input' && /at most 30 s/.test(e.message));
      assert.equal(fake.audioRequests.length, n, 'nothing was sent');
    });
  });

  describe('speech', () => {
    it('asks for pcm and gets 24 kHz PCM16 back, with the model, the voice for the gender and the speed', async () => {
      const tts = new OpenAISynthesizer({ ...common(), model: 'tts-1', format: 'pcm' });
      const r = await tts.synthesize('What are your opening hours?', { language: 'en-US', gender: 'male', speed: 1.25 });
      assert.equal(r.sampleRate, 24_000);
      assert.equal(r.engine, 'local-audio');
      assert.equal(r.model, 'tts-1');
      assert.deepEqual(r.pcm16, fakeSpeechPcm('What are your opening hours?', 24_000));
      const req = fake.audioRequests.at(-1)!;
      assert.equal(req.route, 'speech');
      assert.equal(req.headers.authorization, 'Bearer sk-speech');
      assert.deepEqual(req.body, { model: 'tts-1', voice: 'onyx', input: 'What are your opening hours?', response_format: 'pcm', speed: 1.25 });
    });

    it('asks for wav and reads the rate from its header; a named voice wins over the gender', async () => {
      const tts = new OpenAISynthesizer({ ...common(), model: 'kokoro', voices: { female: 'af_bella', male: 'am_adam' } });
      assert.equal(tts.format, 'wav');
      const r = await tts.synthesize('Hello there', { language: 'en-GB', gender: 'female' });
      assert.equal(r.sampleRate, 22_050);
      assert.deepEqual(r.pcm16, fakeSpeechPcm('Hello there', 22_050));
      assert.deepEqual(fake.audioRequests.at(-1)!.body, { model: 'kokoro', voice: 'af_bella', input: 'Hello there', response_format: 'wav' });
      await tts.synthesize('Hello there', { language: 'en-GB', gender: 'female', voice: 'bf_emma' });
      assert.equal(fake.audioRequests.at(-1)!.body?.voice, 'bf_emma');
      const defaults = new OpenAISynthesizer({ ...common(), model: 'tts-1' });
      await defaults.synthesize('Hi', { language: 'en-US' });
      assert.equal(fake.audioRequests.at(-1)!.body?.voice, 'nova', 'female by default');
    });

    it('streams the audio as it arrives, whole samples only, the same as the whole', async () => {
      for (const format of ['pcm', 'wav'] as const) {
        const tts = new OpenAISynthesizer({ ...common(), model: 'tts-1', format });
        const chunks: Int16Array[] = [];
        let rate = 0;
        for await (const c of tts.synthesizeStream('Streaming, one piece at a time.', { language: 'en-US' })) {
          chunks.push(c.pcm16);
          rate = c.sampleRate;
        }
        assert.ok(chunks.length > 5, `${format}: ${chunks.length} pieces`);
        const joined = new Int16Array(chunks.reduce((n, c) => n + c.length, 0));
        chunks.reduce((at, c) => (joined.set(c, at), at + c.length), 0);
        assert.equal(rate, format === 'pcm' ? 24_000 : 22_050);
        assert.deepEqual(joined, fakeSpeechPcm('Streaming, one piece at a time.', rate), format);
      }
    });

    it('stops reading when the consumer stops, and times out an audio body that stalls', async () => {
      const tts = new OpenAISynthesizer({ ...common(), model: 'tts-1', format: 'pcm', timeoutMs: 300 });
      for await (const c of tts.synthesizeStream('x'.repeat(80), { language: 'en-US' })) {
        assert.ok(c.pcm16.length > 0);
        break;
      }
      fake.audioScript.push({ stallMs: 2000 });
      const t0 = performance.now();
      await assert.rejects(tts.synthesize('a stalled answer', { language: 'en-US' }),
        (e: unknown) => e instanceof SpeechError && e.kind === 'timeout' && e.engine === 'local-audio');
      assert.ok(performance.now() - t0 < 1500);
      fake.audioScript.push({ stallMs: 2000 });
      const ac = new AbortController();
      setTimeout(() => ac.abort(), 100);
      await assert.rejects(tts.synthesize('an aborted answer', { language: 'en-US', signal: ac.signal }), (e: unknown) => e instanceof Error && e.name === 'AbortError');
    });

    it('names the provider on errors and refuses bad input before sending', async () => {
      const tts = new OpenAISynthesizer({ ...common(), model: 'tts-1', maxRetries: 0 });
      fake.audioScript.push({ status: 429 });
      await assert.rejects(tts.synthesize('Hi', { language: 'en-US' }),
        (e: unknown) => e instanceof SpeechError && e.status === 429 && /speech engine 'local-audio' failed: speech: 429/.test(e.message));
      const n = fake.audioRequests.length;
      await assert.rejects(tts.synthesize('a'.repeat(MAX_SYNTHESIS_CHARS + 1), { language: 'en-US' }), (e: unknown) => e instanceof SpeechError && e.kind === 'input');
      await assert.rejects(tts.synthesize('Hi', { language: 'en-US', voice: 'no such voice' }), (e: unknown) => e instanceof SpeechError && e.kind === 'input');
      await assert.rejects(tts.synthesize('Hi', { language: 'en-US', speed: 0.1 }), (e: unknown) => e instanceof SpeechError && e.kind === 'input');
      assert.equal((await tts.synthesize('   ', { language: 'en-US' })).pcm16.length, 0);
      assert.equal(fake.audioRequests.length, n, 'nothing was sent');
    });
  });

  it('leaves the chat routes of the fake server as they were', async () => {
    const res = await fetch(`${fake.baseUrl}/models`);
    assert.equal(res.status, 200);
    assert.equal((await fetch(`${fake.baseUrl}/audio/unknown`, { method: 'POST', body: '{}' })).status, 404);
  });
});
