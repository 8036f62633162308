// The caller's end of a voice-mode test call (docs/testing-agents.md, "Voice mode"): a real SIP call
// over loopback, placed with our own stack (src/sip/call.ts: INVITE with an SDP offer, ACK, BYE) and
// its media on an RtpSession of src/media. It speaks PCM into the call (paced 20 ms a frame, as any
// RTP peer) and listens to the agent frame by frame: `hear` waits for the agent to start speaking
// and fall silent, and says when its first loud frame arrived (what a turn's latency is measured to).
import { PortPool } from '../../media/port-pool.ts';
import { RtpSession } from '../../media/rtp-session.ts';
import { placeSipCall, type AnsweredCall, type CallResult } from '../../sip/call.ts';
import { SipEndpoint } from '../../sip/endpoint.ts';
import { buildOffer, negotiateAudio, OFFER_CODECS, rtpParams } from '../../sip/sdp.ts';

const LOOPBACK = '127.0.0.1';
/** Samples per 20 ms frame at 8 kHz. */
const FRAME = 160;
/** A frame this loud (RMS of PCM16) is speech; G.711 silence and line noise are far below it. */
const LOUD_RMS = 300;

const rms = (f: Int16Array) => Math.sqrt(f.reduce((s, x) => s + x * x, 0) / Math.max(1, f.length));

export interface HeardSpeech {
  /** The agent's speech (8 kHz PCM16), from its first loud frame to its last. */
  pcm: Int16Array;
  /** When its first loud frame arrived (ms, the caller's clock). */
  startedAt: number;
}

export interface LoopbackCall {
  /** Frames heard so far (its length is where the next `hear` starts). */
  readonly frames: number;
  /** The call has ended (either side). */
  readonly ended: boolean;
  /**
   * The agent's next speech from frame `from` on: waits up to `waitMs` for it to start and until it
   * has been quiet `quietMs` (or the call ended); null when it did not speak.
   */
  hear(from: number, o: { waitMs: number; quietMs: number; signal: AbortSignal }): Promise<HeardSpeech | null>;
  /** Sends 8 kHz PCM16 into the call; resolves once the last frame has gone (ms, the caller's clock). */
  say(pcm: Int16Array, signal: AbortSignal): Promise<number>;
  hangup(): Promise<CallResult>;
}

export interface LoopbackCallOptions {
  host: string;
  port: number;
  /** The user part of the Request-URI. */
  target: string;
  /** Our user (the caller's number as the agent sees it). */
  from: string;
  maxDurationMs: number;
  signal: AbortSignal;
  /** RTP ports for the caller's media (a pool of its own). */
  ports: PortPool;
  now(): number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Places the call and resolves once it is answered (rejects when it is not). */
export async function callOverLoopback(o: LoopbackCallOptions): Promise<LoopbackCall> {
  const endpoint = new SipEndpoint({
    host: LOOPBACK, port: 0, listen: ['UDP'], userAgent: 'callplane-agent-test-caller',
    refuseTarget: (address) => (address === LOOPBACK ? null : 'an agent test caller calls loopback only'),
    onRequest: (req, ctx) => { if (req.method !== 'ACK') endpoint.respond(req, ctx, req.method === 'REFER' ? 603 : 481, req.method === 'REFER' ? 'Decline' : 'Call/Transaction Does Not Exist'); },
  });
  await endpoint.start();
  const rtp = await RtpSession.open({ host: LOOPBACK, pool: o.ports, codec: OFFER_CODECS[0]!, telephoneEvent: OFFER_CODECS[2]!.pt, mediaTimeoutMs: 0 });
  const heard: Array<{ frame: Int16Array; at: number; loud: boolean }> = [];
  rtp.on('audio', (frame) => heard.push({ frame, at: o.now(), loud: rms(frame) > LOUD_RMS }));
  let answered: AnsweredCall | undefined;
  let ended = false;
  let result!: Promise<CallResult>;
  const up = new Promise<AnsweredCall>((resolve) => {
    const done = placeSipCall(endpoint, {
      target: o.target, from: o.from.replace(/[^\d+]/g, '') || 'agent-test', route: { host: o.host, port: o.port },
      ringTimeoutMs: 10_000, maxDurationMs: o.maxDurationMs, signal: o.signal,
      sdp: buildOffer({ address: LOOPBACK, port: rtp.port }),
      onAnswered: (call) => {
        const n = call.remote ? negotiateAudio(call.remote) : null;
        if (!n) return call.hangup();
        rtp.negotiated(rtpParams(n));
        answered = call;
        resolve(call);
      },
    });
    result = done.finally(async () => {
      ended = true;
      await rtp.close();
      await endpoint.stop();
    });
  });
  const first = await Promise.race([up, result.then((r) => r)]);
  if (!('hangup' in first)) throw new Error(`the test call into the agent was not answered: ${first.outcome}${first.status ? ` (${first.status})` : ''}${first.reason ? `: ${first.reason}` : ''}`);

  return {
    get frames() { return heard.length; },
    get ended() { return ended; },
    async hear(from, w) {
      const until = o.now() + w.waitMs;
      let start = -1;
      for (;;) {
        w.signal.throwIfAborted();
        if (start < 0) start = heard.findIndex((h, i) => i >= from && h.loud);
        if (start >= 0) {
          let last = start;
          for (let i = heard.length - 1; i > start; i--) if (heard[i]!.loud) { last = i; break; }
          const quiet = heard.length - 1 - last >= w.quietMs / 20 || (ended && heard.length - 1 === last) || (ended && o.now() - heard.at(-1)!.at > w.quietMs);
          if (quiet || ended) {
            const part = heard.slice(start, last + 1);
            const pcm = new Int16Array(part.length * FRAME);
            part.forEach((h, i) => pcm.set(h.frame.subarray(0, FRAME), i * FRAME));
            return { pcm, startedAt: heard[start]!.at };
          }
        } else if (ended || o.now() > until) {
          return null;
        }
        await sleep(20);
      }
    },
    async say(pcm, signal) {
      if (ended) return o.now();
      rtp.send(pcm);
      await new Promise<void>((resolve) => {
        const stop = () => { rtp.off('drained', stop); signal.removeEventListener('abort', stop); clearInterval(poll); resolve(); };
        rtp.once('drained', stop);
        signal.addEventListener('abort', stop, { once: true });
        // A call that ends while speaking drains nothing more.
        const poll = setInterval(() => { if (ended) stop(); }, 100);
      });
      return o.now();
    },
    async hangup() {
      if (!ended) answered?.hangup();
      return result;
    },
  };
}

/** A pool of RTP ports for test callers: the process's range, shared with calls (a port in use is skipped). */
export function callerPorts(range: { portMin: number; portMax: number }): PortPool {
  return new PortPool(range);
}
