// Which engines the configuration picks: offline (pocketsphinx, espeak-ng) unless CALLPLANE_STT /
// CALLPLANE_TTS say `openai`, the remote settings validated at start, and how an agent's
// agentSttEngine maps onto the one configured recogniser.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { DeepgramFlux, DeepgramLive, DeepgramTranscriber } from '../../src/speech/deepgram.ts';
import { EspeakEngine } from '../../src/speech/espeak.ts';
import { OpenAIRealtimeTranscription } from '../../src/speech/openai-realtime.ts';
import { GoogleStreaming, GoogleTranscriber } from '../../src/speech/google.ts';
import { OpenAISynthesizer, OpenAITranscriber } from '../../src/speech/openai-speech.ts';
import { PocketsphinxEngine } from '../../src/speech/pocketsphinx.ts';
import { speechEngines, sttFor } from '../../src/speech/registry.ts';
import { CartesiaEngine } from '../../src/speech/cartesia.ts';
import { DeepgramAuraEngine } from '../../src/speech/deepgram-aura.ts';
import { ElevenLabsEngine } from '../../src/speech/elevenlabs.ts';

describe('speech configuration and registry', () => {
  it('runs offline by default', () => {
    const c = loadConfig({});
    assert.deepEqual(c.speech, {
      stt: 'offline', tts: 'offline', baseUrl: 'https://api.openai.com/v1', apiKey: undefined,
      sttModel: 'whisper-1', sttRealtime: 'auto', ttsModel: 'tts-1', ttsFormat: 'wav', ttsVoices: { female: 'nova', male: 'onyx' },
      timeoutMs: 15_000, maxRetries: 1,
      // The voice activity detector: Silero, its bundled model, loaded by the first call (docs/voice.md).
      vad: 'silero', vadModel: undefined, turnLatencyBudgetMs: 1500,
      // No speech provider without its key (below).
      providers: {},
      // No service account key: no Google engines (below).
      googleCredentials: undefined, googleSpeechUrl: 'https://speech.googleapis.com',
    });
    const e = speechEngines(c.speech);
    assert.ok(e.stt instanceof PocketsphinxEngine);
    assert.ok(e.tts instanceof EspeakEngine);
    assert.equal(e.stt.offline, true);
    assert.equal(e.tts.offline, true);
  });

  it('picks the OpenAI-compatible engines by name, each on its own', () => {
    const c = loadConfig({
      CALLPLANE_STT: 'openai', CALLPLANE_SPEECH_BASE_URL: 'http://127.0.0.1:8000/v1/', CALLPLANE_STT_MODEL: 'Systran/faster-whisper-small',
      CALLPLANE_TTS_MODEL: 'kokoro', CALLPLANE_TTS_FORMAT: 'pcm', CALLPLANE_TTS_VOICES: 'female=af_bella, male=am_adam',
      CALLPLANE_SPEECH_TIMEOUT_MS: '5000', CALLPLANE_SPEECH_MAX_RETRIES: '0',
    });
    assert.equal(c.speech.baseUrl, 'http://127.0.0.1:8000/v1');
    assert.deepEqual(c.speech.ttsVoices, { female: 'af_bella', male: 'am_adam' });
    const e = speechEngines(c.speech);
    assert.ok(e.stt instanceof OpenAITranscriber);
    assert.equal(e.stt.model, 'Systran/faster-whisper-small');
    assert.equal(e.stt.offline, false);
    assert.ok(e.tts instanceof EspeakEngine, 'synthesis stays offline unless CALLPLANE_TTS says otherwise');
    const both = speechEngines(loadConfig({ CALLPLANE_STT: 'openai', CALLPLANE_TTS: 'openai', CALLPLANE_SPEECH_API_KEY: 'sk-x', CALLPLANE_TTS_FORMAT: 'pcm' }).speech);
    assert.ok(both.tts instanceof OpenAISynthesizer);
    assert.equal(both.tts.format, 'pcm');
    assert.equal(both.tts.name, 'openai');
  });

  it('refuses settings that cannot work, naming the variable', () => {
    const bad: Array<[NodeJS.ProcessEnv, RegExp]> = [
      [{ CALLPLANE_STT: 'deepgram' }, /CALLPLANE_STT must be one of offline, openai/],
      [{ CALLPLANE_TTS: 'OpenAI ' }, /CALLPLANE_TTS must be one of/],
      [{ CALLPLANE_STT: 'openai' }, /CALLPLANE_STT=openai needs CALLPLANE_SPEECH_API_KEY/],
      [{ CALLPLANE_TTS: 'openai' }, /CALLPLANE_TTS=openai needs/],
      [{ CALLPLANE_SPEECH_BASE_URL: 'ftp://x' }, /CALLPLANE_SPEECH_BASE_URL must be an http/],
      [{ CALLPLANE_TTS_FORMAT: 'mp3' }, /CALLPLANE_TTS_FORMAT must be one of wav, pcm/],
      [{ CALLPLANE_TTS_VOICES: 'nova' }, /CALLPLANE_TTS_VOICES must look like/],
      [{ CALLPLANE_STT_MODEL: 'two words' }, /CALLPLANE_STT_MODEL must be a model id/],
      [{ CALLPLANE_DEEPGRAM_API_KEY: 'dg-key', CALLPLANE_DEEPGRAM_URL: 'wss://api.deepgram.com' }, /CALLPLANE_DEEPGRAM_URL must be an http\(s\) URL/],
      [{ CALLPLANE_GOOGLE_SPEECH_URL: '127.0.0.1:50051' }, /CALLPLANE_GOOGLE_SPEECH_URL must be an http\(s\) URL/],
      [{ CALLPLANE_GOOGLE_SPEECH_URL: 'https://speech.googleapis.com/v1' }, /CALLPLANE_GOOGLE_SPEECH_URL must be http\(s\):\/\/host\[:port\], with no path/],
      [{ CALLPLANE_SPEECH_TIMEOUT_MS: '10' }, /CALLPLANE_SPEECH_TIMEOUT_MS must be an integer between 1000 and 120000/],
    ];
    for (const [env, re] of bad) assert.throws(() => loadConfig(env), (e: unknown) => e instanceof ConfigError && re.test(e.message), JSON.stringify(env));
  });

  it('runs every agentSttEngine on the configured recogniser and says when that is a substitution', () => {
    const offline = speechEngines(loadConfig({}).speech);
    for (const asked of ['google', 'deepgram', 'deepgramflux', 'openai']) {
      assert.deepEqual(sttFor(offline, asked), { engine: offline.stt, substituted: true }, asked);
    }
    assert.equal(sttFor(offline, null).substituted, false);
    const remote = speechEngines(loadConfig({ CALLPLANE_STT: 'openai', CALLPLANE_SPEECH_API_KEY: 'sk-x' }).speech);
    assert.equal(sttFor(remote, 'openai').substituted, false);
    assert.equal(sttFor(remote, 'deepgram').substituted, true);
  });

  it('has Deepgram\'s engines with a key, and says an agent\'s deepgram is real here while sessions still use the configured recogniser', () => {
    const none = speechEngines(loadConfig({}).speech);
    assert.deepEqual(none.streaming, {});
    assert.deepEqual(none.transcribers, {});
    const c = loadConfig({ CALLPLANE_DEEPGRAM_API_KEY: ' dg-key ', CALLPLANE_DEEPGRAM_URL: 'http://127.0.0.1:9000/' });
    assert.deepEqual(c.speech.providers.deepgram, { apiKey: 'dg-key', url: 'http://127.0.0.1:9000' });
    const e = speechEngines(c.speech);
    assert.ok(e.streaming.deepgram instanceof DeepgramLive);
    assert.ok(e.streaming.deepgramflux instanceof DeepgramFlux);
    assert.ok(e.transcribers.deepgram instanceof DeepgramTranscriber);
    assert.equal(e.streaming.deepgram.model, 'nova-3');
    assert.equal(e.streaming.deepgramflux.model, 'flux-general-en');
    assert.deepEqual(sttFor(e, 'deepgram'), { engine: e.stt, substituted: true, streaming: e.streaming.deepgram });
    assert.deepEqual(sttFor(e, 'deepgramflux'), { engine: e.stt, substituted: true, streaming: e.streaming.deepgramflux });
    assert.deepEqual(sttFor(e, 'google'), { engine: e.stt, substituted: true });
  });

  it('builds a streamed voice for each provider whose key is set, beside what calls use', () => {
    const c = loadConfig({
      CALLPLANE_ELEVENLABS_API_KEY: 'xi-secret', CALLPLANE_CARTESIA_API_KEY: 'sk_car_secret', CALLPLANE_CARTESIA_URL: 'http://127.0.0.1:9100/',
    });
    assert.deepEqual(c.speech.providers, {
      elevenlabs: { apiKey: 'xi-secret', url: 'https://api.elevenlabs.io' },
      cartesia: { apiKey: 'sk_car_secret', url: 'http://127.0.0.1:9100' },
    });
    const e = speechEngines(c.speech);
    assert.ok(e.tts instanceof EspeakEngine, 'calls keep the configured voice');
    assert.ok(e.voices?.elevenlabs instanceof ElevenLabsEngine);
    assert.ok(e.voices?.cartesia instanceof CartesiaEngine);
    assert.equal(e.voices?.deepgram, undefined);
    const dg = speechEngines(loadConfig({ CALLPLANE_DEEPGRAM_API_KEY: 'dg-secret', CALLPLANE_DEEPGRAM_URL: 'http://127.0.0.1:9000' }).speech);
    assert.ok(dg.voices?.deepgram instanceof DeepgramAuraEngine);
    for (const [env, re] of [
      [{ CALLPLANE_DEEPGRAM_URL: 'http://127.0.0.1:9000' }, /CALLPLANE_DEEPGRAM_URL is set but CALLPLANE_DEEPGRAM_API_KEY is not/],
      [{ CALLPLANE_ELEVENLABS_API_KEY: 'xi-secret', CALLPLANE_ELEVENLABS_URL: 'ws://x' }, /CALLPLANE_ELEVENLABS_URL must be an http/],
      [{ CALLPLANE_CARTESIA_API_KEY: 'two words-secret' }, /CALLPLANE_CARTESIA_API_KEY must be printable ASCII/],
    ] as const) {
      assert.throws(() => loadConfig(env), (e: unknown) => e instanceof ConfigError && re.test(e.message) && !e.message.includes('secret'), JSON.stringify(env));
    }
  });

  it('has Google\'s engines with a service account key, and says an agent\'s google is real here while sessions still use the configured recogniser', () => {
    const c = loadConfig({ GOOGLE_APPLICATION_CREDENTIALS: ' /etc/callplane/google.json ', CALLPLANE_GOOGLE_SPEECH_URL: 'http://127.0.0.1:50051/' });
    assert.equal(c.speech.googleCredentials, '/etc/callplane/google.json');
    assert.equal(c.speech.googleSpeechUrl, 'http://127.0.0.1:50051');
    assert.equal(loadConfig({ CALLPLANE_GOOGLE_SPEECH_URL: 'https://eu-speech.googleapis.com' }).speech.googleSpeechUrl, 'https://eu-speech.googleapis.com');
    const e = speechEngines(c.speech);
    assert.ok(e.streaming.google instanceof GoogleStreaming);
    assert.ok(e.transcribers.google instanceof GoogleTranscriber);
    assert.equal(e.streaming.deepgram, undefined, 'no Deepgram key, no Deepgram');
    assert.deepEqual(sttFor(e, 'google'), { engine: e.stt, substituted: true, streaming: e.streaming.google });
    assert.deepEqual(sttFor(e, 'deepgram'), { engine: e.stt, substituted: true });
    const both = speechEngines(loadConfig({ GOOGLE_APPLICATION_CREDENTIALS: '/k.json', CALLPLANE_DEEPGRAM_API_KEY: 'dg' }).speech);
    assert.deepEqual(Object.keys(both.streaming).sort(), ['deepgram', 'deepgramflux', 'google']);
    assert.deepEqual(Object.keys(both.transcribers).sort(), ['deepgram', 'google']);
  });

  it('streams an agent\'s openai to Realtime transcription where the server offers it (CALLPLANE_STT_REALTIME: auto is OpenAI\'s own API), else the batch recogniser hears', () => {
    const openai = speechEngines(loadConfig({ CALLPLANE_STT: 'openai', CALLPLANE_SPEECH_API_KEY: 'sk-x', CALLPLANE_STT_MODEL: 'gpt-4o-transcribe' }).speech);
    assert.ok(openai.streaming.openai instanceof OpenAIRealtimeTranscription);
    assert.equal((openai.streaming.openai as OpenAIRealtimeTranscription).model, 'gpt-4o-transcribe');
    assert.deepEqual(sttFor(openai, 'openai'), { engine: openai.stt, substituted: false, streaming: openai.streaming.openai });
    const local = { CALLPLANE_STT: 'openai', CALLPLANE_SPEECH_BASE_URL: 'http://127.0.0.1:8000/v1' };
    assert.equal(speechEngines(loadConfig(local).speech).streaming.openai, undefined, 'a local server: batch');
    assert.ok(speechEngines(loadConfig({ ...local, CALLPLANE_STT_REALTIME: 'on' }).speech).streaming.openai instanceof OpenAIRealtimeTranscription);
    assert.equal(speechEngines(loadConfig({ CALLPLANE_STT: 'openai', CALLPLANE_SPEECH_API_KEY: 'sk-x', CALLPLANE_STT_REALTIME: 'off' }).speech).streaming.openai, undefined);
    assert.equal(speechEngines(loadConfig({}).speech).streaming.openai, undefined, 'offline: none');
    assert.throws(() => loadConfig({ CALLPLANE_STT_REALTIME: 'sometimes' }), ConfigError);
  });
});
