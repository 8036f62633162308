// Background audio as a caller can make it cost: a 10 MB MP3 (the largest file fetched) holding
// 43 minutes of 48 kHz audio, served on loopback and loaded through backgroundAudio() as a call
// does, while a timer measures how late the event loop runs. Before decoding moved to a worker
// thread (and a piece at a time, stopping at MAX_AUDIO_SECONDS), it held the loop, and so every
// call's audio, for about 5 s and grew the process by about 1 GB. The bounds are generous (a busy
// machine); the decode itself now leaves the loop free within tens of milliseconds.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Mp3Encoder } from '@breezystack/lamejs';
import { MAX_AUDIO_SECONDS } from '../../src/media/audio-file.ts';
import { backgroundAudio, MAX_BACKGROUND_BYTES } from '../../src/modules/voice/background-audio.ts';
import { guardedDispatcher, policyFromConfig } from '../../src/webhooks/ssrf.ts';

/** Ten seconds of a 48 kHz tone at 32 kbit/s, repeated up to `bytes`: about 43 minutes in 10 MB. */
function longMp3(bytes: number): Buffer {
  const rate = 48_000;
  const enc = new Mp3Encoder(1, rate, 32);
  const pcm = Int16Array.from({ length: rate * 10 }, (_, i) => Math.round(3000 * Math.sin((2 * Math.PI * 440 * i) / rate)));
  const parts = [enc.encodeBuffer(pcm), enc.flush()];
  const ten = Buffer.concat(parts.map((p) => Buffer.from(p.buffer, p.byteOffset, p.length)));
  return Buffer.concat(Array.from({ length: Math.floor(bytes / ten.length) }, () => ten));
}

const peakMb = () => Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;

describe('background audio limits', () => {
  let server: http.Server;
  let base = '';
  const mp3 = longMp3(MAX_BACKGROUND_BYTES - 64 * 1024);
  before(async () => {
    server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'audio/mpeg', 'content-length': mp3.length });
      res.end(mp3);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  it('a 10 MB MP3 of 43 minutes is decoded off the event loop, to MAX_AUDIO_SECONDS, memory bounded', async (t) => {
    const policy = policyFromConfig({ allowPrivateTargets: true, privateTargetCidrs: [] });
    const dispatcher = guardedDispatcher(policy);
    const audio = backgroundAudio({ http: dispatcher, policy, now: Date.now });
    let last = performance.now();
    let slowest = 0;
    const timer = setInterval(() => {
      const now = performance.now();
      slowest = Math.max(slowest, now - last);
      last = now;
    }, 10);
    const before = process.memoryUsage().rss / 1024 / 1024;
    fs.writeFileSync('/proc/self/clear_refs', '5');
    const t0 = performance.now();
    try {
      const pcm = await audio.load(`${base}/long.mp3`);
      const ms = performance.now() - t0;
      slowest = Math.max(slowest, performance.now() - last);
      const growth = peakMb() - before;
      t.diagnostic(`decoded in ${Math.round(ms)} ms; event loop late by at most ${Math.round(slowest)} ms; peak memory +${Math.round(growth)} MB`);
      assert.ok(slowest < 1000, `the event loop was held for ${Math.round(slowest)} ms`);
      assert.ok(growth < 400, `peak memory grew by ${Math.round(growth)} MB`);
      assert.equal(pcm.length, MAX_AUDIO_SECONDS * 8000);
      assert.ok(ms < 30_000, `decoded after ${Math.round(ms)} ms`);
    } finally {
      clearInterval(timer);
      await dispatcher.close();
    }
  });
});
