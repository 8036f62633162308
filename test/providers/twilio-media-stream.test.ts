// TwilioMediaStream on loopback: a real `ws` server holds our transport, the fake Twilio side
// (test/helpers/fake-media-stream.ts) plays what it is sent in real time and echoes marks.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { parseStreamMessage, readStreamStart, TwilioMediaStream, type StreamStart } from '../../src/providers/twilio/media-stream.ts';
import { FakeMediaStream } from '../helpers/fake-media-stream.ts';
import { waitFor } from '../helpers/wait.ts';

const tone = (ms: number, amp = 8000) => Int16Array.from({ length: (ms / 1000) * 8000 }, (_, i) => Math.round(amp * Math.sin((2 * Math.PI * 440 * i) / 8000)));

describe('TwilioMediaStream', () => {
  let wss: WebSocketServer;
  let url: string;
  const accepted: Array<{ socket: WebSocket; start: StreamStart | null; backlog: RawData[] }> = [];
  const backlogs = new Map<WebSocket, () => RawData[]>();
  const backlogOf = (socket: WebSocket) => backlogs.get(socket)?.() ?? [];
  const waiting: Array<(a: { socket: WebSocket; start: StreamStart | null; backlog: RawData[] }) => void> = [];
  before(async () => {
    wss = new WebSocketServer({ host: '127.0.0.1', port: 0, maxPayload: 64 * 1024 });
    await new Promise<void>((r) => wss.once('listening', () => r()));
    url = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`;
    wss.on('connection', (socket) => {
      void readStreamStart(socket, 500).then((pending) => {
        const a = { socket, start: pending?.start ?? null, backlog: [] as RawData[] };
        // Kept until the test builds the transport, as the service does after its lookups.
        if (pending) backlogs.set(socket, () => pending.take());
        const w = waiting.shift();
        if (w) w(a); else accepted.push(a);
      });
    });
  });
  after(async () => { for (const c of wss.clients) c.terminate(); await new Promise((r) => wss.close(r)); });
  const next = () => new Promise<{ socket: WebSocket; start: StreamStart | null; backlog: RawData[] }>((resolve) => {
    const a = accepted.shift();
    if (a) resolve(a); else waiting.push(resolve);
  });

  async function pair(calls: { digits: string[]; transfers: string[]; hangups: string[] } = { digits: [], transfers: [], hangups: [] }) {
    const client = await FakeMediaStream.connect({ url, callSid: 'CA0123', parameters: { token: 't' } });
    const { socket, start } = await next();
    assert.ok(start, 'a start');
    assert.equal(start.callSid, 'CA0123');
    assert.deepEqual(start.customParameters, { token: 't' });
    const t = new TwilioMediaStream(socket, start, {
      sendDigits: async (d) => { calls.digits.push(d); },
      transfer: async (d) => { calls.transfers.push(d); },
      hangup: async (r) => { calls.hangups.push(r); },
    }, backlogOf(socket));
    return { client, t, calls };
  }

  it('parses only well-formed Twilio messages', () => {
    assert.equal(parseStreamMessage('{not json'), null);
    assert.equal(parseStreamMessage('[1,2]'), null);
    assert.equal(parseStreamMessage(JSON.stringify({ event: 'media', media: { payload: '***' } })), null);
    assert.equal(parseStreamMessage(JSON.stringify({ event: 'dtmf', dtmf: { digit: '55' } })), null);
    assert.equal(parseStreamMessage(JSON.stringify({ event: 'start', start: { streamSid: 'MZ1', callSid: 'CA1', mediaFormat: { encoding: 'audio/l16', sampleRate: 16000 } } })), null);
    assert.deepEqual(parseStreamMessage(JSON.stringify({ event: 'whatever' })), { event: 'other' });
    assert.equal(parseStreamMessage('x'.repeat(70_000)), null);
    const m = parseStreamMessage(JSON.stringify({ event: 'dtmf', dtmf: { digit: '#' } }));
    assert.deepEqual(m, { event: 'dtmf', digit: '#' });
  });

  it('a stream that never starts is not handed over', async () => {
    const client = await FakeMediaStream.connect({ url, callSid: 'CA1', start: false });
    const { start } = await next();
    assert.equal(start, null);
    await client.close();
  });

  it('caller audio comes out as 160-sample frames, keys as dtmf; garbage is counted and ignored', async () => {
    const { client, t } = await pair();
    const frames: Int16Array[] = [];
    const keys: string[] = [];
    t.on('audio', (f) => frames.push(f));
    t.on('dtmf', (k) => keys.push(k));
    client.send('{nope');
    client.send({ event: 'media', media: { track: 'outbound', payload: 'AAAA' } });
    client.pressKey('5');
    await client.speak(tone(200));
    await waitFor('frames', async () => frames.length >= 10);
    assert.ok(frames.every((f) => f.length === 160));
    await waitFor('the tone', async () => frames.length >= 15);
    const rms = Math.max(...frames.map((f) => Math.sqrt(f.reduce((s, x) => s + x * x, 0) / 160)));
    assert.ok(rms > 3000 && rms < 8000, `decoded tone ${rms}`);
    assert.deepEqual(keys, ['5']);
    assert.equal(t.counters.malformed, 1);
    assert.equal(t.counters.ignored, 1);
    t.end('test over');
    await client.whenClosed;
  });

  it('marks are played once Twilio echoes them; a clear sends `clear` and the echoes of cleared marks never count', async () => {
    const { client, t } = await pair();
    const played: string[] = [];
    t.on('played', (m) => played.push(m));
    t.play(tone(100), 'a');
    t.play(tone(2000), 'b');
    assert.equal(t.unconfirmedSamples, 800 + 16000);
    await waitFor('a played', async () => played.includes('a'));
    assert.deepEqual(played, ['a'], 'b is still playing');
    assert.equal(t.unconfirmedSamples, 16000);
    const dropped = t.clear();
    assert.equal(dropped, 16000);
    await waitFor('the clear reached Twilio', async () => client.clears === 1);
    await waitFor('b echoed', async () => client.echoed.includes('w2'));
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(played, ['a'], 'a cleared mark is not played');
    assert.equal(t.counters.clearedEchoes, 1);
    t.play(tone(60), 'c');
    await waitFor('c played', async () => played.includes('c'));
    assert.deepEqual(played, ['a', 'c']);
    assert.ok(client.heard.length < 5 + 3 + 100, `the cleared audio was not all played (${client.heard.length} frames)`);
    t.end('test over');
  });

  it('what the caller sent while the call was being looked up is read first, once the session listens; a stop in it ends the call', async () => {
    const client = await FakeMediaStream.connect({ url, callSid: 'CA0123', parameters: { token: 't' } });
    client.pressKey('7');
    client.pressKey('8');
    client.stop();
    const { socket, start } = await next();
    await new Promise((r) => setTimeout(r, 150));
    const t = new TwilioMediaStream(socket, start!, { sendDigits: async () => {}, transfer: async () => {}, hangup: async () => {} },
      backlogOf(socket));
    const keys: string[] = [];
    const ended: string[] = [];
    t.on('dtmf', (k) => keys.push(k));
    t.on('ended', (r) => ended.push(r));
    await waitFor('ended', async () => ended.length > 0);
    assert.deepEqual(keys, ['7', '8']);
    assert.deepEqual(ended, ['the call ended']);
  });

  it('stop ends the call once; hang-up goes through the owner', async () => {
    const { client, t, calls } = await pair();
    const ended: string[] = [];
    t.on('ended', (r) => ended.push(r));
    client.stop();
    await waitFor('ended', async () => ended.length > 0);
    await t.hangup('bye');
    assert.deepEqual(ended, ['the call ended']);
    assert.deepEqual(calls.hangups, [], 'no hang-up of a call that is over');

    const second = await pair();
    const ended2: string[] = [];
    second.t.on('ended', (r) => ended2.push(r));
    await second.t.hangup('no_response');
    assert.deepEqual(second.calls.hangups, ['no_response']);
    assert.deepEqual(ended2, ['no_response']);
    await second.client.whenClosed;
  });

  it('digits redirect the call: the old stream stops, the next one is adopted and gets what was not yet played', async () => {
    const { client, t, calls } = await pair();
    const played: string[] = [];
    const ended: string[] = [];
    t.on('played', (m) => played.push(m));
    t.on('ended', (r) => ended.push(r));
    await t.sendDigits('12#');
    assert.deepEqual(calls.digits, ['12#']);
    assert.equal(t.awaitingStream, true);
    client.stop();
    t.play(tone(100), 'after');
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(ended, [], 'the redirect\'s stop is not the end of the call');
    const again = await FakeMediaStream.connect({ url, callSid: 'CA0123' });
    const { socket, start } = await next();
    assert.equal(t.adopt(socket, start!, backlogOf(socket)), true);
    await waitFor('played on the new stream', async () => played.includes('after'));
    assert.ok(again.heard.length >= 5);
    assert.equal(t.adopt(socket, start!), false, 'no redirect under way');
    t.end('test over');
  });
});
