// The VoiceTransport over an RtpSession, on 127.0.0.1 against a second RtpSession as the far end:
// audio and digits in, audio out with marks emitted once it was really sent, clear() dropping the
// rest (and its marks), digits out, transfer and hang-up through the dialog owner's callbacks, and
// a dead media stream ending the call. Timing checks are loose: the machine is busy.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, describe, it } from 'node:test';
import { PortPool } from '../../src/media/port-pool.ts';
import { RtpSession, type RtpSessionOptions } from '../../src/media/rtp-session.ts';
import { RtpTransport } from '../../src/media/rtp-transport.ts';

const HOST = '127.0.0.1';
const PCMU = { pt: 0, name: 'PCMU' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const portMin = 26_000 + 2 * crypto.randomInt(0, 2_000);
const pool = new PortPool({ portMin, portMax: portMin + 2 * 39 });
const open: RtpSession[] = [];

async function waitFor(what: string, cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

async function pair(o: Partial<RtpSessionOptions> = {}) {
  const a = await RtpSession.open({ host: HOST, pool, codec: PCMU, telephoneEvent: 101, silence: 'suppress', ...o });
  const b = await RtpSession.open({ host: HOST, pool, codec: PCMU, telephoneEvent: 101, silence: 'suppress' });
  open.push(a, b);
  a.setRemote({ address: HOST, port: b.port });
  b.setRemote({ address: HOST, port: a.port });
  const calls: string[] = [];
  const transport = new RtpTransport(a, {
    transfer: (d) => { calls.push(`transfer ${d}`); return Promise.resolve(); },
    hangup: (r) => { calls.push(`hangup ${r}`); return Promise.resolve(); },
  });
  return { agent: a, far: b, transport, calls };
}

/** A loud 1 kHz tone of `ms` milliseconds at 8 kHz. */
function tone(ms: number): Int16Array {
  const n = (8000 * ms) / 1000;
  return Int16Array.from({ length: n }, (_, i) => Math.round(8000 * Math.sin((2 * Math.PI * 1000 * i) / 8000)));
}
const loud = (f: Int16Array) => Math.sqrt(f.reduce((s, x) => s + x * x, 0) / f.length) > 1000;

after(async () => {
  await Promise.all(open.map((s) => s.close()));
});

describe('RtpTransport', () => {
  it('hands the caller\'s frames and digits to the session, and reports `sip`', async () => {
    const { far, transport } = await pair();
    assert.equal(transport.kind, 'sip');
    const frames: Int16Array[] = [];
    const digits: string[] = [];
    transport.on('audio', (f) => frames.push(f));
    transport.on('dtmf', (d) => digits.push(d));
    far.send(tone(400));
    far.sendDigits('7#');
    await waitFor('frames and digits', () => frames.filter(loud).length >= 15 && digits.length === 2);
    assert.ok(frames.every((f) => f.length === 160));
    assert.deepEqual(digits, ['7', '#']);
  });

  it('emits a mark only once its audio has been sent, in order', async () => {
    const { far, transport } = await pair();
    const heard: Int16Array[] = [];
    far.on('audio', (f) => heard.push(f));
    const played: Array<{ mark: string; at: number; heard: number }> = [];
    transport.on('played', (mark) => played.push({ mark, at: performance.now(), heard: heard.filter(loud).length }));
    const t0 = performance.now();
    transport.play(tone(300), 'first');
    transport.play(tone(300), 'second');
    await waitFor('both marks', () => played.length === 2);
    assert.deepEqual(played.map((p) => p.mark), ['first', 'second']);
    // 300 ms of audio cannot have gone out in much less than 300 ms (pacing at 20 ms a frame).
    assert.ok(played[0]!.at - t0 >= 200, `first mark after ${played[0]!.at - t0} ms`);
    assert.ok(played[1]!.at - played[0]!.at >= 200, 'the second a further 300 ms on');
    await waitFor('the far end hears it all', () => heard.filter(loud).length >= 28);
  });

  it('clear() stops the output within a frame or two and drops the marks of what was never played', async () => {
    const { far, transport } = await pair();
    const heard: Int16Array[] = [];
    far.on('audio', (f) => heard.push(f));
    const played: string[] = [];
    transport.on('played', (m) => played.push(m));
    transport.play(tone(200), 'short');
    transport.play(tone(3000), 'long');
    await waitFor('the short part played', () => played.includes('short'));
    await sleep(200);
    const dropped = transport.clear();
    assert.ok(dropped > 8000, `most of the long part dropped (${dropped} samples)`);
    const atClear = heard.filter(loud).length;
    await sleep(400);
    const after = heard.filter(loud).length;
    assert.ok(after - atClear <= 4, `${after - atClear} loud frames after clear()`);
    assert.deepEqual(played, ['short'], 'the long part\'s mark never comes');
    // It keeps working after a clear.
    transport.play(tone(100), 'again');
    await waitFor('the mark after clear', () => played.includes('again'));
  });

  it('sends digits as RFC 4733 events the far end reads once each', async () => {
    const { far, transport } = await pair();
    const got: string[] = [];
    far.on('dtmf', (d) => got.push(d));
    await transport.sendDigits('12*');
    await waitFor('three digits', () => got.length === 3);
    assert.deepEqual(got, ['1', '2', '*']);
  });

  it('transfer and hang-up go through the dialog owner, then end the call once and close the media', async () => {
    const { agent, transport, calls } = await pair();
    const ended: string[] = [];
    transport.on('ended', (r) => ended.push(r));
    await transport.transfer('+15551230000');
    await transport.hangup();
    assert.deepEqual(calls, ['transfer +15551230000']);
    assert.deepEqual(ended, ['transferred']);
    transport.play(tone(100), 'late');
    assert.equal(agent.queuedSamples, 0, 'nothing is queued after the end');
    const second = await pair();
    await second.transport.hangup('done');
    assert.deepEqual(second.calls, ['hangup done']);
  });

  it('a far end that goes silent ends the call (media timeout)', async () => {
    const { far, transport } = await pair({ mediaTimeoutMs: 300 });
    const ended: string[] = [];
    transport.on('ended', (r) => ended.push(r));
    far.send(tone(100));
    await waitFor('the media timeout', () => ended.length === 1, 5000);
    assert.deepEqual(ended, ['no media from the far end']);
  });
});
