// The callers of bench/voice's `streaming` steps, in a process of their own (as real callers are
// elsewhere), so their RTP and their timing are not counted against the agents' process. Started
// by bench/voice.ts with fork(). Each caller is an RtpSession that speaks the bench's sentence in
// real time and notes when every loud frame it receives arrives, on this process's clock; voice
// to voice is measured here, end to end on the audio.
// Messages (each with the call's `id`):
//   init {speech: number[] (8 kHz PCM16), portMin, portMax} → ready
//   open {id} → opened {id, port}: the caller's RTP port, for the agent's side
//   run {id, agentPort, turns} → done {id, greeting, v2v} | failed {id, message}: the call is up
//     now (the greeting's first sound is timed from here), then `turns` turns each after a pause of
//     0.2–1.2 s: voice to voice = the reply's first loud frame − the moment the question's last
//     frame went out
//   exit
import crypto from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { PortPool } from '../src/media/port-pool.ts';
import { RtpSession } from '../src/media/rtp-session.ts';
import { frameDbfs } from '../src/speech/vad.ts';

const HOST = '127.0.0.1';
const PCMU = { pt: 0, name: 'PCMU' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const loud = (f: Int16Array) => frameDbfs(f) > -40;

let speech = new Int16Array(0);
let pool: PortPool | undefined;
const calls = new Map<string, { rtp: RtpSession; loudAt: number[] }>();

async function firstLoudAfter(loudAt: number[], t: number, label: string, timeoutMs = 15_000): Promise<number> {
  for (const until = performance.now() + timeoutMs; performance.now() < until; await sleep(5)) {
    const at = loudAt.find((x) => x > t);
    if (at !== undefined) return at;
  }
  throw new Error(`${label}: nothing heard within ${timeoutMs} ms`);
}

async function heardOut(loudAt: number[], quietMs = 400): Promise<void> {
  while (performance.now() - (loudAt.at(-1) ?? 0) < quietMs) await sleep(20);
}

async function run(id: string, agentPort: number, turns: number): Promise<{ greeting: number; v2v: number[] }> {
  const c = calls.get(id)!;
  const up = performance.now();
  c.rtp.setRemote({ address: HOST, port: agentPort });
  const greeting = (await firstLoudAfter(c.loudAt, up, 'greeting')) - up;
  await heardOut(c.loudAt);
  const v2v: number[] = [];
  for (let i = 0; i < turns; i++) {
    await sleep(crypto.randomInt(200, 1200));
    const end = await new Promise<number>((r) => {
      c.rtp.once('drained', () => r(performance.now()));
      c.rtp.send(speech);
    });
    v2v.push((await firstLoudAfter(c.loudAt, end, 'reply')) - end);
    await heardOut(c.loudAt);
  }
  return { greeting, v2v };
}

process.on('message', (m: { type: string; id?: string; speech?: number[]; portMin?: number; portMax?: number; agentPort?: number; turns?: number }) => {
  void (async () => {
    try {
      if (m.type === 'init') {
        speech = Int16Array.from(m.speech!);
        pool = new PortPool({ portMin: m.portMin!, portMax: m.portMax! });
        process.send!({ type: 'ready' });
      } else if (m.type === 'open') {
        const rtp = await RtpSession.open({ host: HOST, pool: pool!, codec: PCMU, telephoneEvent: 101 });
        const loudAt: number[] = [];
        rtp.on('audio', (f: Int16Array) => { if (loud(f)) loudAt.push(performance.now()); });
        calls.set(m.id!, { rtp, loudAt });
        process.send!({ type: 'opened', id: m.id, port: rtp.port });
      } else if (m.type === 'run') {
        try {
          process.send!({ type: 'done', id: m.id, ...(await run(m.id!, m.agentPort!, m.turns!)) });
        } finally {
          await calls.get(m.id!)?.rtp.close();
          calls.delete(m.id!);
        }
      } else if (m.type === 'exit') {
        for (const c of calls.values()) await c.rtp.close();
        process.disconnect();
      }
    } catch (err) {
      process.send!({ type: 'failed', id: m.id, message: (err as Error).message });
    }
  })();
});
