// CallRecorder against a stand-in transport (an EventEmitter emitting what a transport emits) and
// a clock the test moves: which side each stream lands on, alignment by time when a frame is
// lost, the WAV header read back, the size limit, and `ended` and a missing agent side.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { CallRecorder } from '../../src/media/call-recorder.ts';
import type { VoiceTransport } from '../../src/media/voice-transport.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-rec-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Only what the recorder listens to: the events. */
const fakeTransport = () => new EventEmitter() as unknown as VoiceTransport & EventEmitter;
const frame = (value: number) => new Int16Array(160).fill(value);

/** Reads a WAV back with nothing of ours: the header's fields and the two channels. */
function readStereo(file: string) {
  const b = fs.readFileSync(file);
  assert.equal(b.toString('latin1', 0, 4), 'RIFF');
  assert.equal(b.readUInt32LE(4), b.length - 8, 'RIFF size');
  assert.equal(b.toString('latin1', 8, 16), 'WAVEfmt ');
  const fmt = { format: b.readUInt16LE(20), channels: b.readUInt16LE(22), rate: b.readUInt32LE(24), byteRate: b.readUInt32LE(28), align: b.readUInt16LE(32), bits: b.readUInt16LE(34) };
  assert.equal(b.toString('latin1', 36, 40), 'data');
  const dataBytes = b.readUInt32LE(40);
  assert.equal(dataBytes, b.length - 44, 'data size');
  const n = dataBytes / 4;
  const left = new Int16Array(n);
  const right = new Int16Array(n);
  for (let i = 0; i < n; i++) {
    left[i] = b.readInt16LE(44 + i * 4);
    right[i] = b.readInt16LE(46 + i * 4);
  }
  return { fmt, left, right };
}

describe('CallRecorder', () => {
  it('puts the caller on the left and the agent on the right, aligned by time across a lost frame, in a valid stereo 8 kHz WAV', async () => {
    const t = fakeTransport();
    let now = 1000;
    const file = path.join(dir, 'org', 'a.wav');
    const rec = new CallRecorder(t, { file, maxMs: 60_000, clock: () => now });
    // 10 frames of 20 ms: the caller's frame 3 never arrives; the agent speaks in frames 5-9.
    for (let k = 0; k < 10; k++) {
      now += 20;
      if (k !== 3) t.emit('audio', frame(1000 + k));
      t.emit('sent', frame(k >= 5 ? -2000 - k : 0));
    }
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(fs.existsSync(file), false, 'only the .part file exists while recording');
    assert.equal(fs.existsSync(`${file}.part`), true);
    const r = await rec.stop();
    assert.ok(r);
    assert.deepEqual([r.durationMs, r.bytes, r.agentChannel, r.reason], [200, 44 + 1600 * 4, true, 'stopped']);
    assert.equal(fs.existsSync(`${file}.part`), false);
    const { fmt, left, right } = readStereo(file);
    assert.deepEqual(fmt, { format: 1, channels: 2, rate: 8000, byteRate: 32_000, align: 4, bits: 16 });
    assert.equal(left.length, 1600);
    for (let k = 0; k < 10; k++) {
      const l = left.subarray(k * 160, (k + 1) * 160);
      const rr = right.subarray(k * 160, (k + 1) * 160);
      // The lost frame is silence in its own slot; the frames after it stay where they were said.
      assert.ok(l.every((x) => x === (k === 3 ? 0 : 1000 + k)), `left frame ${k}: ${l[0]}`);
      assert.ok(rr.every((x) => x === (k >= 5 ? -2000 - k : 0)), `right frame ${k}: ${rr[0]}`);
    }
    assert.deepEqual(await rec.done, r);
    assert.equal(await rec.stop(), r, 'stop is idempotent');
  });

  it('keeps a burst of frames that arrive together after a stall in order, none written over another', async () => {
    const t = fakeTransport();
    let now = 1000;
    const file = path.join(dir, 'org', 'burst.wav');
    const rec = new CallRecorder(t, { file, maxMs: 60_000, clock: () => now });
    // Two frames on time, then 120 ms with nothing (the sender held up), then the 8 frames it owed
    // at once, as a paced sender catching up sends them.
    for (let k = 0; k < 2; k++) { now += 20; t.emit('sent', frame(100 + k)); }
    now += 120;
    for (let k = 2; k < 10; k++) t.emit('sent', frame(100 + k));
    now += 400;
    const r = await rec.stop();
    assert.ok(r);
    const { right } = readStereo(file);
    const heard: number[] = [];
    for (let i = 0; i + 160 <= right.length; i += 160) if (right[i] !== 0) heard.push(right[i]!);
    assert.deepEqual(heard, [100, 101, 102, 103, 104, 105, 106, 107, 108, 109], 'every frame once, in order');
  });

  it('stops at the maximum duration, and what comes after is not recorded', async () => {
    const t = fakeTransport();
    let now = 0;
    const file = path.join(dir, 'org', 'max.wav');
    // The limit's timer is real: 100 ms.
    const rec = new CallRecorder(t, { file, maxMs: 100, clock: () => now });
    for (let k = 0; k < 8; k++) {
      now += 20;
      t.emit('audio', frame(500));
      t.emit('sent', frame(-500));
    }
    const r = await rec.done;
    assert.ok(r);
    assert.equal(r.reason, 'max_duration');
    assert.equal(r.durationMs, 100);
    t.emit('audio', frame(7));
    const { left, right } = readStereo(file);
    assert.equal(left.length, 800);
    assert.ok(left.every((x) => x === 500) && right.every((x) => x === -500));
  });

  it('stops when the call ends; a transport that never reports the agent\'s side records it as silence', async () => {
    const t = fakeTransport();
    let now = 0;
    const file = path.join(dir, 'org', 'ended.wav');
    const rec = new CallRecorder(t, { file, maxMs: 60_000, clock: () => now });
    for (let k = 0; k < 5; k++) {
      now += 20;
      t.emit('audio', frame(300));
    }
    now += 40; // the caller's side stops 40 ms before the end: silence to the end
    t.emit('ended', 'hangup');
    const r = await rec.done;
    assert.ok(r);
    assert.deepEqual([r.reason, r.agentChannel, r.durationMs], ['ended', false, 140]);
    const { left, right } = readStereo(file);
    assert.equal(left.length, 1120);
    assert.ok(left.subarray(0, 800).every((x) => x === 300) && left.subarray(800).every((x) => x === 0));
    assert.ok(right.every((x) => x === 0));
    assert.equal(t.listenerCount('audio') + t.listenerCount('sent') + t.listenerCount('ended'), 0, 'listeners removed');
  });

  it('streams long recordings to the file instead of holding them', async () => {
    const t = fakeTransport();
    let now = 0;
    const file = path.join(dir, 'org', 'long.wav');
    const rec = new CallRecorder(t, { file, maxMs: 120_000, clock: () => now });
    // 60 s of audio: twenty times the window the recorder holds.
    for (let k = 0; k < 3000; k++) {
      now += 20;
      t.emit('audio', frame(k % 100));
      t.emit('sent', frame(-(k % 100)));
    }
    // Written as it goes: all but the last few seconds are in the file before the stop.
    const size = () => (fs.existsSync(`${file}.part`) ? fs.statSync(`${file}.part`).size : 0);
    for (let i = 0; i < 100 && size() < 44 + 50 * 32_000; i++) await new Promise((r) => setTimeout(r, 20));
    const written = size();
    const r = await rec.stop();
    assert.ok(written >= 44 + 50 * 32_000, `written as it goes (${written} bytes)`);
    assert.equal(r?.durationMs, 60_000);
    const { left, right } = readStereo(file);
    for (const k of [0, 1234, 2999]) {
      assert.equal(left[k * 160 + 5], k % 100);
      assert.equal(right[k * 160 + 5], -(k % 100) || 0);
    }
  });

  it('refuses a limit out of bounds', () => {
    assert.throws(() => new CallRecorder(fakeTransport(), { file: path.join(dir, 'x.wav'), maxMs: 0 }), RangeError);
    assert.throws(() => new CallRecorder(fakeTransport(), { file: path.join(dir, 'x.wav'), maxMs: 90_000_000 }), RangeError);
  });
});

describe('recording settings', () => {
  it('are off by default, 30 days, 4 hours; on/off only and bounded', async () => {
    const { ConfigError, loadConfig } = await import('../../src/config.ts');
    const d = loadConfig({});
    assert.deepEqual([d.callRecording, d.recordingRetentionDays, d.recordingMaxSeconds], [false, 30, 14_400]);
    const c = loadConfig({ CALLPLANE_CALL_RECORDING: 'on', CALLPLANE_RECORDING_RETENTION_DAYS: '1', CALLPLANE_RECORDING_MAX_SECONDS: '60' });
    assert.deepEqual([c.callRecording, c.recordingRetentionDays, c.recordingMaxSeconds], [true, 1, 60]);
    for (const [name, value, message] of [
      ['CALLPLANE_CALL_RECORDING', 'yes', /CALLPLANE_CALL_RECORDING must be one of off, on/],
      ['CALLPLANE_RECORDING_RETENTION_DAYS', '0', /CALLPLANE_RECORDING_RETENTION_DAYS must be an integer between 1 and/],
      ['CALLPLANE_RECORDING_MAX_SECONDS', '86401', /CALLPLANE_RECORDING_MAX_SECONDS must be an integer between 1 and 86400/],
    ] as const) {
      assert.throws(() => loadConfig({ [name]: value }), (err: Error) => err instanceof ConfigError && message.test(err.message), name);
    }
  });
});
