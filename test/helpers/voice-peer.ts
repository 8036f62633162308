// The far end of a call's audio in voice tests: an RtpSession of the test's own, named in the SIP
// peer's SDP, that speaks with espeak-ng and listens to the agent frame by frame (recognising what
// it said with pocketsphinx and a grammar, so the check is deterministic).
import assert from 'node:assert/strict';
import type { PortPool } from '../../src/media/port-pool.ts';
import { RtpSession } from '../../src/media/rtp-session.ts';
import { EspeakEngine } from '../../src/speech/espeak.ts';
import { PocketsphinxEngine } from '../../src/speech/pocketsphinx.ts';
import { resample } from '../../src/speech/resample.ts';
import type { Harness } from './harness.ts';
import { waitFor } from './sip-peers.ts';

export const tts = new EspeakEngine();
export const stt = new PocketsphinxEngine();

const rms = (f: Int16Array) => Math.sqrt(f.reduce((s, x) => s + x * x, 0) / Math.max(1, f.length));
export const loud = (f: Int16Array) => rms(f) > 300;

/** Edits the agent's staging configuration and publishes it (the live one calls use). */
export async function publishAgent(h: Harness, token: string, config: Record<string, unknown>): Promise<void> {
  assert.equal((await h.call('POST', '/api/v2/agent', { token, body: config })).status, 200);
  assert.equal((await h.call('POST', '/api/v2/agent/publish', { token })).status, 200);
}

/** The test's end of a call: what it heard, frame by frame, and the keys it received. */
export async function voicePeer(pool: PortPool, host = '127.0.0.1') {
  const rtp = await RtpSession.open({ host, pool, codec: { pt: 0, name: 'PCMU' }, telephoneEvent: 101, mediaTimeoutMs: 0 });
  const heard: Int16Array[] = [];
  const keys: string[] = [];
  let lastFrameAt = Date.now();
  rtp.on('audio', (f) => { heard.push(f); lastFrameAt = Date.now(); });
  rtp.on('dtmf', (k) => keys.push(k));
  /**
   * Waits for the agent to speak from frame `from` on and fall silent (`quietMs`, default half a
   * second, or no audio any more: the call ended). A test whose two sentences have a signalling
   * round trip between them (a REFER and its NOTIFY) waits longer, so that gap is not taken for the end.
   */
  async function agentSpoke(from: number, quietMs = 500): Promise<Int16Array> {
    const quietFrames = Math.round(quietMs / 20);
    await waitFor('the agent to speak', () => heard.slice(from).filter(loud).length >= 15, 20_000, 20);
    await waitFor('the agent to finish speaking', () => {
      const part = heard.slice(from);
      const last = part.map(loud).lastIndexOf(true);
      return last > 0 && (part.length - last > quietFrames || Date.now() - lastFrameAt > quietMs);
    }, 20_000, 20);
    const part = heard.slice(from);
    const pcm = new Int16Array(part.length * 160);
    part.forEach((f, i) => pcm.set(f, i * 160));
    return pcm;
  }
  return {
    rtp, heard, keys, agentSpoke,
    async say(text: string) {
      const s = await tts.synthesize(text, { language: 'en-US' });
      rtp.send(resample(s.pcm16, s.sampleRate, 8000));
    },
    /** What the agent said from frame `from` on, recognised among `phrases`. */
    async recognise(from: number, phrases: string[], quietMs?: number): Promise<string> {
      return this.recognisePcm(await agentSpoke(from, quietMs), phrases);
    },
    /** Audio (what agentSpoke gave) recognised among `phrases`. */
    async recognisePcm(pcm: Int16Array, phrases: string[]): Promise<string> {
      return (await stt.transcribe(pcm, 8000, { language: 'en-US', grammar: { kind: 'phrases', phrases } })).text;
    },
  };
}
