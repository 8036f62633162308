// Google's engines (src/speech/google.ts) through the official client (@google-cloud/speech, gRPC)
// against the double on loopback (test/helpers/fake-google-speech.ts), which serves the proto the
// client ships and checks the self-signed JWT of a real service-account key file; fed speech from
// espeak-ng at the call's rate: what a stream asks for and sends (the call's own μ-law, untouched),
// the turn events made from voice activity and finals, a refused account, a slow first result
// bounded, a dropped call replaced once, and the restart before Google's five-minute limit.
// @lane wall
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pcm16ToBytes } from '../../src/media/pcm.ts';
import { GoogleStreaming, GoogleTranscriber, googleEndpoint, googleModelFor, MAX_CHUNK_BYTES, type GoogleEngineOptions, type GoogleSpeechOptions } from '../../src/speech/google.ts';
import { resample } from '../../src/speech/resample.ts';
import { SpeechError } from '../../src/speech/types.ts';
import { collect, has, mulawFrames, paced, turns } from '../helpers/recognition.ts';
import { makeServiceAccount, startFakeGoogleSpeech, type FakeGoogleSpeech, type ServiceAccount } from '../helpers/fake-google-speech.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { silence, speak } from '../helpers/vad-audio.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

describe('Google Speech-to-Text', { skip: toolsSkip('espeak-ng') }, () => {
  let fake: FakeGoogleSpeech;
  let dir: string;
  let account: ServiceAccount;
  let hours: Int16Array;
  let book: Int16Array;
  const opts = (more: Partial<GoogleEngineOptions> & { keyFile?: string } = {}): GoogleSpeechOptions => ({ keyFile: account.file, url: fake.url, ...more });
  const mulaw8k = { language: 'en-US', encoding: 'mulaw', sampleRate: 8000 } as const;

  before(async () => {
    fake = await startFakeGoogleSpeech();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-google-'));
    account = makeServiceAccount(dir);
    fake.trust(account);
    [hours, book] = await Promise.all([speak('what are your opening hours', 'en-us'), speak('I would like to book a table', 'en-us+f3')]);
  });
  after(async () => {
    await fake.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reads its endpoint and picks the telephony model where Google has it', () => {
    assert.deepEqual(googleEndpoint('http://127.0.0.1:50051'), { host: '127.0.0.1', port: 50051, insecure: true });
    assert.deepEqual(googleEndpoint('https://speech.googleapis.com'), { host: 'speech.googleapis.com', port: 443, insecure: false });
    assert.equal(googleModelFor('en-US'), 'telephony');
    assert.equal(googleModelFor('pt_br'), 'telephony');
    assert.equal(googleModelFor('pl-PL'), undefined, 'Google picks for a language without telephony');
    assert.equal(googleModelFor('en'), undefined);
    assert.equal(googleModelFor('pl-PL', 'latest_long'), 'latest_long');
    assert.throws(() => googleEndpoint('grpc://x:1'), (e: unknown) => e instanceof SpeechError && e.kind === 'input');
  });

  it('streams the call\'s own μ-law: the config asked for, interim results, then the end of the turn after the speech ended and its final came', async () => {
    const stt = new GoogleStreaming(opts());
    fake.hear.push('What are your opening hours?');
    const n = fake.streams.length;
    const stream = await stt.open({ ...mulaw8k, keywords: ['opening hours', ' '], endpointingMs: 300 });
    const events = collect(stream);
    const call = fake.streams[n]!;
    assert.deepEqual(call.config, {
      config: {
        encoding: 'MULAW', sampleRateHertz: 8000, audioChannelCount: 1, languageCode: 'en-US', enableAutomaticPunctuation: true,
        model: 'telephony', useEnhanced: true, speechContexts: [{ phrases: ['opening hours'] }],
      },
      interimResults: true, singleUtterance: false, enableVoiceActivityEvents: true,
    });
    // The token is a self-signed JWT of the service account in the key file, scoped for Cloud.
    assert.match(call.authorization ?? '', /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/);
    assert.equal(call.claims?.iss, account.email);
    assert.equal(call.claims?.scope, 'https://www.googleapis.com/auth/cloud-platform');
    assert.match(call.userAgent ?? '', /gapic\/7\./);
    const speech = mulawFrames(hours);
    for (const f of speech) stream.write(f);
    await waitFor('interim results', has(events, 'interim'), 5000);
    await sleep(150);
    assert.ok(!events.some((e) => e.type === 'final' || e.type === 'endOfTurn'), 'no final while the caller speaks');
    assert.deepEqual(events.slice(0, 2).map((e) => e.type), ['speechStarted', 'startOfTurn']);
    assert.ok(events.some((e) => e.type === 'interim' && e.text !== '' && 'What are your opening hours?'.startsWith(e.text)), JSON.stringify(events));
    const quiet = mulawFrames(silence(200));
    for (const f of quiet) stream.write(f);
    await sleep(150);
    assert.ok(!events.some((e) => e.type === 'endOfTurn'), '200 ms of silence is under the double\'s 400 ms');
    const more = mulawFrames(silence(600));
    for (const f of more) stream.write(f);
    await waitFor('the end of the turn', has(events, 'endOfTurn'), 5000);
    assert.deepEqual(events.find((e) => e.type === 'final'), { type: 'final', text: 'What are your opening hours?', speechFinal: true, confidence: 0.93 });
    assert.deepEqual(turns(events), ['startOfTurn', 'endOfTurn:What are your opening hours?']);
    const end = events.find((e) => e.type === 'endOfTurn');
    assert.ok(end?.type === 'endOfTurn' && end.confidence === 0.93);
    // The double sent SPEECH_ACTIVITY_END before the final: the turn ended on the final, not before.
    const sentTypes = call.sent.map((m) => (Array.isArray(m.results) && m.results.length ? `result:${(m.results[0] as { isFinal: boolean }).isFinal}` : m.speechEventType));
    assert.ok(sentTypes.indexOf('SPEECH_ACTIVITY_END') < sentTypes.indexOf('result:true'), JSON.stringify(sentTypes));
    // The frames arrived as the call carried them: same bytes, one request per frame.
    const sent = [...speech, ...quiet, ...more];
    // The double reads what the client sent as it arrives: under load a few frames may still be on the way.
    await waitFor('every frame at the double', async () => call.audioMessages >= sent.length, 5000);
    assert.equal(call.audioMessages, sent.length);
    assert.ok(Buffer.concat(call.audio).equals(Buffer.concat(sent)), 'μ-law bytes untouched');
    await stream.close();
    assert.equal(call.halfClosed, true, 'closed by a half-close');
    assert.deepEqual(call.ended, { code: 0, details: 'OK', by: 'server' });
    assert.equal(stream.state, 'closed');
    assert.equal(events.at(-1)?.type, 'closed');
    stream.write(Buffer.alloc(160));
    assert.equal(call.audioMessages, sent.length, 'nothing is sent after the close');
  });

  it('sends linear16 at its rate in chunks under Google\'s limit, and a turn that is closed mid-speech ends with what was heard', async () => {
    const stream = await new GoogleStreaming(opts()).open({ language: 'de-DE', encoding: 'linear16', sampleRate: 16_000 });
    const events = collect(stream);
    const call = fake.streams.at(-1)!;
    assert.equal((call.config?.config as Record<string, unknown>).encoding, 'LINEAR16');
    assert.equal((call.config?.config as Record<string, unknown>).sampleRateHertz, 16_000);
    assert.equal((call.config?.config as Record<string, unknown>).model, 'telephony');
    fake.hear.push('Guten Tag');
    const pcm = resample(hours, 8000, 16_000);
    // Writes of a second (32,000 bytes) go as three requests of at most 15,360 bytes.
    for (let i = 0; i < pcm.length; i += 16_000) stream.write(pcm16ToBytes(pcm.subarray(i, Math.min(pcm.length, i + 16_000))));
    await waitFor('the turn', has(events, 'startOfTurn'), 5000);
    await waitFor('every byte at the double', async () => call.bytes >= pcm.length * 2, 5000);
    assert.ok(call.largestMessage <= MAX_CHUNK_BYTES && call.largestMessage > 10_000, `largest ${call.largestMessage}`);
    assert.equal(call.bytes, pcm.length * 2);
    assert.throws(() => stream.write(Buffer.alloc(3)), (e: unknown) => e instanceof SpeechError && e.kind === 'input');
    assert.throws(() => stream.write(Buffer.alloc(32_002)), (e: unknown) => e instanceof SpeechError && /at most a second/.test(e.message));
    await stream.close();
    // The half-close made the double finalize what it heard: the turn ends with it, then the stream.
    assert.deepEqual(events.slice(-2).map((e) => ('text' in e ? `${e.type}:${e.text}` : e.type)), ['endOfTurn:Guten Tag', 'closed']);
    assert.ok(!call.sent.some((m) => m.speechEventType === 'SPEECH_ACTIVITY_END'), 'no activity end: the stream closed first');
  });

  it('keeps a quiet stream alive with silence (Google ends one without audio), and finalize() hears a turn out at once', async () => {
    // The double ends a call without audio after 1.5 s; keep-alives every 200 ms hold it open even
    // when a loaded machine runs the timer late.
    fake.audioTimeoutMs = 1500;
    try {
      const stream = await new GoogleStreaming(opts({ keepAliveMs: 200 })).open(mulaw8k);
      const events = collect(stream);
      const n = fake.streams.length;
      await sleep(2000);
      const first = fake.streams[n - 1]!;
      assert.equal(JSON.stringify(first.ended), undefined, 'still open');
      assert.ok(first.audioMessages >= 4, `${first.audioMessages} keep-alives`);
      assert.ok(first.audio.every((b) => b.length === 800 && b.every((x) => x === 0xff)), '100 ms of μ-law silence each');
      assert.equal(events.length, 0);

      fake.hear.push('book a table');
      for (const f of mulawFrames(book)) stream.write(f);
      await waitFor('the turn', has(events, 'startOfTurn'), 5000);
      const t0 = Date.now();
      await stream.finalize();
      assert.ok(Date.now() - t0 < 1500);
      assert.deepEqual(turns(events), ['startOfTurn', 'endOfTurn:book a table']);
      assert.deepEqual(events.find((e) => e.type === 'final'), { type: 'final', text: 'book a table', speechFinal: false, confidence: 0.93 });
      // A new call took over the audio; the old one was half-closed and ended by the server.
      assert.equal(fake.streams.length, n + 1);
      assert.equal(first.halfClosed, true);
      assert.equal(first.ended?.code, 0);
      assert.equal(stream.state, 'open');
      await stream.finalize();
      assert.equal(fake.streams.length, n + 1, 'nothing heard: nothing to finalize');
      await stream.close();
    } finally {
      fake.audioTimeoutMs = 10_000;
    }
  });

  it('says refused credentials are refused, naming no key or token: an unknown key (UNAUTHENTICATED) and an account without the right (PERMISSION_DENIED)', async () => {
    const stranger = makeServiceAccount(dir, 'stranger');
    await assert.rejects(new GoogleStreaming(opts({ keyFile: stranger.file })).open(mulaw8k), (e: unknown) => {
      assert.ok(e instanceof SpeechError);
      assert.equal(e.kind, 'refused');
      assert.equal(e.status, 401);
      assert.match(e.message, /Google refused the credentials \(UNAUTHENTICATED\); check the service account key \(GOOGLE_APPLICATION_CREDENTIALS, or the organization's own\)/);
      const key = JSON.parse(fs.readFileSync(stranger.file, 'utf8')) as { private_key: string; private_key_id: string };
      assert.ok(!e.message.includes(key.private_key_id) && !e.message.includes('Bearer') && !e.message.includes('BEGIN'));
      return true;
    });
    assert.match(fake.streams.at(-1)!.authorization ?? '', /^Bearer /);
    assert.equal(fake.streams.at(-1)!.audioMessages, 0);
    const denied = makeServiceAccount(dir, 'denied');
    fake.trust(denied, { denied: true });
    await assert.rejects(new GoogleStreaming(opts({ keyFile: denied.file })).open(mulaw8k),
      (e: unknown) => e instanceof SpeechError && e.kind === 'refused' && e.status === 403 && /PERMISSION_DENIED/.test(e.message));
    await assert.rejects(new GoogleTranscriber(opts({ keyFile: stranger.file })).transcribe(hours, 8000, { language: 'en-US' }),
      (e: unknown) => e instanceof SpeechError && e.kind === 'refused' && /transcription: Google refused/.test(e.message));
    // A key file that is not a service account key is said so, without its content.
    const bad = path.join(dir, 'bad.json');
    fs.writeFileSync(bad, JSON.stringify({ type: 'authorized_user', refresh_token: 'secret-refresh-token' }));
    const wrong = new GoogleStreaming(opts({ keyFile: bad }));
    await assert.rejects(wrong.check(), (e: unknown) => e instanceof SpeechError && e.kind === 'unavailable' && /not a service account key/.test(e.message) && !e.message.includes('secret'));
    await assert.rejects(wrong.open(mulaw8k), (e: unknown) => e instanceof SpeechError && e.kind === 'unavailable');
    await new GoogleStreaming(opts()).check();
  });

  it('takes the key as the file\'s JSON text (an organization\'s own key): signed and heard the same; a text that is not a key is said so, without its content', async () => {
    const keyJson = fs.readFileSync(account.file, 'utf8');
    const stt = new GoogleStreaming({ keyJson, url: fake.url });
    await stt.check();
    fake.hear.push('What are your opening hours?');
    const stream = await stt.open(mulaw8k);
    const events = collect(stream);
    for (const f of mulawFrames(hours)) stream.write(f);
    for (const f of mulawFrames(silence(800))) stream.write(f);
    await waitFor('the end of the turn', has(events, 'endOfTurn'), 5000);
    assert.deepEqual(turns(events), ['startOfTurn', 'endOfTurn:What are your opening hours?']);
    await stream.close();
    assert.match(fake.streams.at(-1)!.authorization ?? '', /^Bearer /, 'signed with the JSON text\'s key');
    const stranger = JSON.stringify({ type: 'authorized_user', refresh_token: 'secret-refresh-token' });
    await assert.rejects(new GoogleTranscriber({ keyJson: stranger, url: fake.url }).transcribe(hours, 8000, { language: 'en-US' }),
      (e: unknown) => e instanceof SpeechError && e.kind === 'unavailable' && /the organization's Google key is not a service account key/.test(e.message) && !e.message.includes('secret'));
  });

  it('bounds a slow first result; a slow answer within the bound is heard, and slow headers do not stop the stream', async () => {
    fake.plan.push({ firstResultDelayMs: 3000 });
    const slow = await new GoogleStreaming(opts({ firstResultTimeoutMs: 400 })).open(mulaw8k);
    const events = collect(slow);
    const t1 = Date.now();
    void paced(slow, mulawFrames(hours), 5);
    await waitFor('the error', has(events, 'error'), 3000);
    assert.ok(Date.now() - t1 < 2000);
    const err = events.find((e) => e.type === 'error');
    assert.ok(err?.type === 'error' && err.error.kind === 'timeout' && /no result within 400 ms of the first speech/.test(err.error.message), JSON.stringify(err));
    assert.equal(events.at(-1)?.type, 'closed');
    assert.equal(slow.state, 'closed');
    await waitFor('the call cancelled', () => Promise.resolve(fake.streams.at(-1)!.ended !== undefined), 3000);
    assert.equal(fake.streams.at(-1)!.ended?.by, 'client');

    // Silence starts no clock: Google answers nothing to it.
    const quiet = await new GoogleStreaming(opts({ firstResultTimeoutMs: 300 })).open(mulaw8k);
    const quietEvents = collect(quiet);
    await paced(quiet, mulawFrames(silence(800)), 5);
    await sleep(500);
    assert.deepEqual(quietEvents, []);
    await quiet.close();

    fake.plan.push({ firstResultDelayMs: 300, headersDelayMs: 2500 });
    fake.hear.push('a little late');
    const t2 = Date.now();
    const late = await new GoogleStreaming(opts({ firstResultTimeoutMs: 2000, openTimeoutMs: 300 })).open(mulaw8k);
    assert.ok(Date.now() - t2 < 1500, 'opening waited at most its bound for the headers');
    const lateEvents = collect(late);
    for (const f of [...mulawFrames(hours), ...mulawFrames(silence(600))]) late.write(f);
    await waitFor('the late end of turn', has(lateEvents, 'endOfTurn'), 5000);
    assert.deepEqual(turns(lateEvents), ['startOfTurn', 'endOfTurn:a little late']);
    await late.close();
  });

  it('replaces a call dropped mid-utterance once, resending what was written meanwhile; a second drop ends the stream', async () => {
    fake.plan.push({ dropAfterMessages: 30 }, {});
    fake.hear.push('what are your', 'opening hours');
    const n = fake.streams.length;
    const stream = await new GoogleStreaming(opts()).open(mulaw8k);
    const events = collect(stream);
    const frames = [...mulawFrames(hours), ...mulawFrames(silence(700))];
    await paced(stream, frames, 4);
    await waitFor('the end of the turn', has(events, 'endOfTurn'), 5000);
    assert.equal(fake.streams.length, n + 2, 'one new call');
    const [first, second] = fake.streams.slice(n);
    assert.deepEqual(first!.ended, { code: 14, details: 'Connection dropped', by: 'server' });
    const reconnected = events.find((e) => e.type === 'reconnected');
    assert.ok(reconnected?.type === 'reconnected' && reconnected.droppedBytes === 0, JSON.stringify(reconnected));
    // Frames sent into the failing call before its status came are lost; the rest arrived.
    const lost = frames.length - first!.audioMessages - second!.audioMessages;
    assert.ok(lost >= 0 && lost <= 3, `lost ${lost} frames`);
    assert.ok(second!.bytes >= reconnected.resentBytes);
    assert.equal(stream.state, 'open');
    // One turn: the new call heard the rest of the utterance and ended it.
    assert.deepEqual(turns(events), ['startOfTurn', 'endOfTurn:opening hours'], JSON.stringify(events));
    await stream.close();

    fake.plan.push({ dropAfterMessages: 10 }, { dropAfterMessages: 10 });
    const twice = await new GoogleStreaming(opts()).open(mulaw8k);
    const twiceEvents = collect(twice);
    const m = fake.streams.length;
    void paced(twice, mulawFrames(hours), 4);
    await waitFor('the error', has(twiceEvents, 'error'), 5000);
    const err = twiceEvents.find((e) => e.type === 'error');
    assert.ok(err?.type === 'error' && err.error.kind === 'failed' && /dropped again \(UNAVAILABLE: Connection dropped\)/.test(err.error.message), JSON.stringify(err));
    assert.deepEqual(twiceEvents.filter((e) => !['startOfTurn', 'speechStarted', 'interim', 'endOfTurn'].includes(e.type)).map((e) => e.type), ['reconnected', 'error', 'closed']);
    assert.equal(fake.streams.length, m + 1, 'no third call');
    assert.equal(twice.state, 'closed');
  });

  it('restarts a call before Google\'s stream limit, between turns, without losing audio or a turn', async () => {
    // The double ends calls after 2 s as Google does after ~5 minutes; the engine restarts after
    // 600 ms between turns, and would at 1.9 s inside one (the turns here are far shorter).
    fake.maxStreamMs = 2000;
    try {
      const stream = await new GoogleStreaming(opts({ restartAfterMs: 600, restartDeadlineMs: 1900 })).open(mulaw8k);
      const events = collect(stream);
      const n = fake.streams.length;
      fake.hear.push('one', 'two', 'three');
      const frames = [hours, silence(700), book, silence(700), hours, silence(700)].flatMap(mulawFrames);
      await paced(stream, frames, 10);
      await waitFor('three turns', has(events, 'endOfTurn', 3), 5000);
      assert.deepEqual(turns(events), ['startOfTurn', 'endOfTurn:one', 'startOfTurn', 'endOfTurn:two', 'startOfTurn', 'endOfTurn:three']);
      assert.ok(!events.some((e) => e.type === 'error' || e.type === 'reconnected'), JSON.stringify(events.filter((e) => e.type !== 'interim')));
      const calls = fake.streams.slice(n - 1);
      assert.ok(calls.length >= 3, `${calls.length} calls`);
      assert.ok(calls.every((c) => c.ended === undefined || c.ended.code === 0), JSON.stringify(calls.map((c) => c.ended)));
      assert.ok(calls.slice(0, -1).every((c) => c.halfClosed), 'each replaced call was half-closed');
      // Every frame went to exactly one call.
      assert.equal(calls.reduce((s, c) => s + c.audioMessages, 0), frames.length);
      await stream.close();
    } finally {
      fake.maxStreamMs = 305_000;
    }
  });

  it('closes at once on abort', async () => {
    const ac = new AbortController();
    const stream = await new GoogleStreaming(opts()).open({ ...mulaw8k, signal: ac.signal });
    const events = collect(stream);
    const call = fake.streams.at(-1)!;
    ac.abort();
    assert.equal(stream.state, 'closed');
    assert.deepEqual(events.map((e) => e.type), ['closed']);
    await waitFor('the call cancelled', () => Promise.resolve(call.ended !== undefined), 3000);
    assert.equal(call.ended?.by, 'client');
    assert.equal(call.halfClosed, false);
  });

  it('transcribes one utterance with Recognize', async () => {
    const stt = new GoogleTranscriber(opts());
    fake.hear.push('Opening hours, please.');
    const t = await stt.transcribe(hours, 8000, { language: 'en-GB', grammar: { kind: 'phrases', phrases: ['opening hours'] } });
    assert.deepEqual(t, { text: 'Opening hours, please.', engine: 'google', model: 'telephony', confidence: 0.91 });
    const r = fake.recognizes.at(-1)!;
    assert.deepEqual(r.config, {
      encoding: 'LINEAR16', sampleRateHertz: 8000, audioChannelCount: 1, languageCode: 'en-GB', enableAutomaticPunctuation: true,
      model: 'telephony', useEnhanced: true, speechContexts: [{ phrases: ['opening hours'] }],
    });
    assert.equal(r.bytes, hours.length * 2);
    assert.deepEqual(await stt.transcribe(silence(500), 8000, { language: 'pl-PL' }), { text: '', engine: 'google' });
    assert.equal(fake.recognizes.at(-1)!.config?.model, undefined);
    await assert.rejects(stt.transcribe(new Int16Array(8000 * 31), 8000, { language: 'en-US' }), (e: unknown) => e instanceof SpeechError && e.kind === 'input');
  });
});
