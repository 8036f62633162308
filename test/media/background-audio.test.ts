// Background audio: files decoded (WAV, and MP3 made here with lamejs) to 8 kHz; fetched from a
// real HTTP server on loopback through the outbound guard, bounded and kept per URL; and mixed
// under the agent over real RTP, after the greeting, so the caller hears it between the agent's words.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Mp3Encoder } from '@breezystack/lamejs';
import { AudioFileError, decodeAudioFile } from '../../src/media/audio-file.ts';
import { FRAME_SAMPLES } from '../../src/media/pcm.ts';
import { PortPool } from '../../src/media/port-pool.ts';
import { RtpSession } from '../../src/media/rtp-session.ts';
import { RtpTransport } from '../../src/media/rtp-transport.ts';
import { backgroundAudio, bedFrom, MAX_BACKGROUND_BYTES } from '../../src/modules/voice/background-audio.ts';
import { voiceSettings } from '../../src/modules/agents/voice-settings.ts';
import { buildWav } from '../../src/speech/wav.ts';
import { guardedDispatcher, policyFromConfig } from '../../src/webhooks/ssrf.ts';

const tone = (hz: number, rate: number, seconds: number, amp = 8000) =>
  Int16Array.from({ length: Math.round(rate * seconds) }, (_, i) => Math.round(amp * Math.sin((2 * Math.PI * hz * i) / rate)));
const rms = (pcm: Int16Array) => Math.sqrt(pcm.reduce((s, x) => s + x * x, 0) / Math.max(1, pcm.length));
/** The signal's energy at `hz` (Goertzel), relative to its total energy: near 1 for a pure tone at hz. */
function share(pcm: Int16Array, hz: number, rate = 8000): number {
  const k = 2 * Math.cos((2 * Math.PI * hz) / rate);
  let s1 = 0, s2 = 0;
  for (const x of pcm) { const s0 = x + k * s1 - s2; s2 = s1; s1 = s0; }
  const power = s1 * s1 + s2 * s2 - k * s1 * s2;
  const total = pcm.reduce((s, x) => s + x * x, 0);
  return total === 0 ? 0 : (2 * power) / (pcm.length * total);
}
function mp3Of(pcm: Int16Array, rate: number): Buffer {
  const enc = new Mp3Encoder(1, rate, 64);
  const parts = [enc.encodeBuffer(pcm), enc.flush()];
  return Buffer.concat(parts.map((p) => Buffer.from(p.buffer, p.byteOffset, p.length)));
}

describe('audio files', () => {
  it('decodes WAV and MP3 to 8 kHz, keeping length and pitch, and refuses anything else', async () => {
    const wav = await decodeAudioFile(buildWav(tone(440, 16_000, 1), 16_000));
    assert.ok(Math.abs(wav.length - 8000) <= 1, `1 s at 8 kHz: ${wav.length}`);
    assert.ok(share(wav, 440) > 0.8, 'still 440 Hz');
    const mp3 = await decodeAudioFile(mp3Of(tone(1000, 22_050, 1), 22_050));
    assert.ok(Math.abs(mp3.length - 8000) < 800, `about 1 s at 8 kHz (the encoder pads): ${mp3.length}`);
    assert.ok(share(mp3.subarray(1000, 7000), 1000) > 0.8, 'still 1 kHz');
    await assert.rejects(decodeAudioFile(Buffer.from('<html>not audio</html>')), AudioFileError);
    await assert.rejects(decodeAudioFile(Buffer.from('RIFF0000WAVEjunk')), AudioFileError);
  });

  it('reads the agent\'s setting with the contract\'s defaults, and a bed loops or ends at its gain', () => {
    const setting = (config: Parameters<typeof voiceSettings>[0]) => voiceSettings(config).backgroundAudio;
    assert.deepEqual(setting({ backgroundAudio: 'https://x.test/a.mp3' }), { url: 'https://x.test/a.mp3', loop: true, gain: 0, startAfterGreeting: true, track: 'bg' });
    assert.deepEqual(setting({ backgroundAudio: { url: 'https://x.test/a.mp3', loop: false, gain: -6, startAfterGreeting: false, track: 'fx' } }),
      { url: 'https://x.test/a.mp3', loop: false, gain: -6, startAfterGreeting: false, track: 'fx' });
    assert.equal(setting({ backgroundAudio: null }), null);
    const pcm = tone(400, 8000, 0.05); // 400 samples: two and a half frames
    const once = bedFrom(pcm, { loop: false, gain: 0 });
    const frames = [once.next(), once.next(), once.next(), once.next()];
    assert.equal(frames[3], null, 'played once, then over');
    assert.deepEqual(Array.from(frames[0]!), Array.from(pcm.subarray(0, FRAME_SAMPLES)));
    const quiet = bedFrom(pcm, { loop: true, gain: -20 });
    for (let i = 0; i < 10; i++) assert.ok(quiet.next() !== null, 'a loop never ends');
    assert.ok(Math.abs(rms(bedFrom(pcm, { loop: true, gain: -20 }).next()!) / rms(pcm.subarray(0, FRAME_SAMPLES)) - 0.1) < 0.01, '-20 dB is a tenth');
  });
});

describe('fetching background audio', () => {
  let server: http.Server;
  let base: string;
  const hits: string[] = [];
  const mp3 = mp3Of(tone(1000, 16_000, 0.5), 16_000);
  before(async () => {
    server = http.createServer((req, res) => {
      hits.push(req.url!);
      if (req.url === '/tone.mp3') res.writeHead(200, { 'content-type': 'audio/mpeg' }).end(mp3);
      else if (req.url === '/huge.wav') res.writeHead(200, { 'content-length': String(MAX_BACKGROUND_BYTES + 1) }).end();
      else if (req.url === '/moved.mp3') res.writeHead(302, { location: '/tone.mp3' }).end();
      else res.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  it('fetches through the guard, keeps it per URL, refuses private addresses unless allowed, oversized files and redirects', async () => {
    const allowed = policyFromConfig({ allowPrivateTargets: true, privateTargetCidrs: [] });
    const http1 = guardedDispatcher(allowed);
    const open = backgroundAudio({ http: http1, policy: allowed, now: Date.now });
    const a = await open.load(`${base}/tone.mp3`);
    const b = await open.load(`${base}/tone.mp3`);
    assert.equal(a, b);
    assert.equal(hits.filter((h) => h === '/tone.mp3').length, 1, 'fetched once');
    assert.ok(share(a.subarray(500, 3500), 1000) > 0.8);
    await assert.rejects(open.load(`${base}/huge.wav`), /larger than/);
    await assert.rejects(open.load(`${base}/moved.mp3`), /answered 302/);
    await assert.rejects(open.load(`${base}/missing.mp3`), /answered 404/);
    await http1.close();

    const strict = policyFromConfig({ allowPrivateTargets: false, privateTargetCidrs: [] });
    const http2 = guardedDispatcher(strict);
    const before = hits.length;
    await assert.rejects(backgroundAudio({ http: http2, policy: strict, now: Date.now }).load(`${base}/tone.mp3`), /backgroundAudio/);
    assert.equal(hits.length, before, 'nothing reached the private address');
    await http2.close();
  });
});

describe('background audio on a call', () => {
  it('is mixed under the agent over RTP: the caller hears it where the agent is silent, and it stops with the call', async () => {
    const portMin = 36_000 + 2 * crypto.randomInt(0, 500);
    const pool = new PortPool({ portMin, portMax: portMin + 10 });
    const PCMU = { pt: 0, name: 'PCMU' };
    const agent = await RtpSession.open({ host: '127.0.0.1', pool, codec: PCMU });
    const caller = await RtpSession.open({ host: '127.0.0.1', pool, codec: PCMU });
    agent.setRemote({ address: '127.0.0.1', port: caller.port });
    caller.setRemote({ address: '127.0.0.1', port: agent.port });
    const heard: Int16Array[] = [];
    caller.on('audio', (f) => heard.push(f));
    const transport = new RtpTransport(agent, { transfer: () => Promise.resolve(), hangup: () => Promise.resolve() });
    try {
      await new Promise((r) => setTimeout(r, 200));
      const before = heard.length;
      assert.ok(heard.slice(0, before).every((f) => rms(f) < 50), 'silence before the bed');
      transport.background(bedFrom(tone(1000, 8000, 0.3), { loop: true, gain: -6 }));
      await new Promise((r) => setTimeout(r, 500));
      const withBed = heard.slice(before + 5);
      const pcm = new Int16Array(withBed.length * FRAME_SAMPLES);
      withBed.forEach((f, i) => pcm.set(f, i * FRAME_SAMPLES));
      assert.ok(rms(pcm) > 1500 && share(pcm, 1000) > 0.7, `the bed is heard (rms ${rms(pcm)}, 1 kHz share ${share(pcm, 1000)})`);
      // The agent speaks over it: its voice (500 Hz) and the bed (1 kHz) both reach the caller.
      const spoken = heard.length;
      transport.play(tone(500, 8000, 0.3));
      await new Promise((r) => setTimeout(r, 300));
      const both = heard.slice(spoken + 3, spoken + 12);
      const mixed = new Int16Array(both.length * FRAME_SAMPLES);
      both.forEach((f, i) => mixed.set(f, i * FRAME_SAMPLES));
      assert.ok(share(mixed, 500) > 0.2 && share(mixed, 1000) > 0.1, `voice and bed mixed (500 Hz ${share(mixed, 500)}, 1 kHz ${share(mixed, 1000)})`);
      transport.background(null);
      await new Promise((r) => setTimeout(r, 500));
      assert.ok(heard.slice(-5).every((f) => rms(f) < 50), 'silence once the bed stops');
    } finally {
      transport.end('test over');
      await caller.close();
    }
  });
});
