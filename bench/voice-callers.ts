// The callers of bench/voice's `calls` part, in a process of their own so the benchmark process
// carries only the agent side. Started by bench/voice.ts with fork(); it also runs the model
// server (test/helpers/fake-llm.ts) the agents' turns go to, so that is not counted against the
// agent side either.
//
// Each caller is a plain UDP socket (no RtpSession: as little work here as possible) sending PCMU
// every 20 ms from one shared clock: 1.5 s of noise the VAD takes for speech, then 4.5 s of
// silence, over and over, each caller at its own phase. What the agent sends back is timed on
// arrival against its RTP timestamp: d = arrival − timestamp/8 ms, lateness = d − the smallest d
// of that call in the window (its best frame), pooled over all calls. Frames whose timestamps were
// skipped (the sender's clock fell more than 5 frames behind and let the time pass unsent) are
// `missing`; sequence gaps are `lost`.
//
// Messages: start {agentPorts} → {callerPorts}; measure → {}; stop → the figures; exit.
import dgram from 'node:dgram';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { encodeG711 } from '../src/media/g711.ts';
import { buildRtp, parseRtp } from '../src/media/rtp.ts';
import { startFakeLlm } from '../test/helpers/fake-llm.ts';

const FRAME_MS = 20;
const CYCLE_FRAMES = 300; // 6 s
const SPEECH_FRAMES = 75; // 1.5 s

const llm = await startFakeLlm();

let s = 0x2545f491;
const rand = () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s; };
const speech: Buffer[] = Array.from({ length: SPEECH_FRAMES }, () => {
  const pcm = new Int16Array(160);
  for (let i = 0; i < 160; i++) pcm[i] = ((rand() >>> 16) % 16000) - 8000;
  return encodeG711('PCMU', pcm);
});
const silence = Buffer.alloc(160, 0xff);

interface Caller {
  socket: dgram.Socket;
  agentPort: number;
  phase: number;
  seq: number;
  ts: number;
  ssrc: number;
  // Receiving, in the measured window.
  ts0: number | undefined;
  ds: number[];
  maxTs: number;
  lastSeq: number | undefined;
  lost: number;
}

let callers: Caller[] = [];
let measuring = false;
let timer: NodeJS.Timeout | undefined;
let started = 0;
let slots = 0;
let loop = monitorEventLoopDelay({ resolution: 1 });
let cpu0 = process.cpuUsage();
let t0 = 0;
let llm0 = 0;

function tick() {
  const now = performance.now();
  let pending = Math.floor((now - started) / FRAME_MS) + 1 - slots;
  if (pending > 5) { slots += pending - 5; pending = 5; }
  for (let k = 0; k < pending; k++, slots++) {
    for (const c of callers) {
      const f = (slots + c.phase) % CYCLE_FRAMES;
      const payload = f < SPEECH_FRAMES ? speech[f]! : silence;
      const packet = buildRtp({ marker: false, payloadType: 0, sequence: c.seq, timestamp: c.ts, ssrc: c.ssrc, csrc: [], payload });
      c.seq = (c.seq + 1) & 0xffff;
      c.ts = (c.ts + 160) >>> 0;
      c.socket.send(packet, c.agentPort, '127.0.0.1');
    }
  }
  timer = setTimeout(tick, Math.max(0, started + slots * FRAME_MS - performance.now()));
}

function onPacket(c: Caller, buf: Buffer) {
  if (!measuring) return;
  const at = performance.now();
  const p = parseRtp(buf);
  if (!p || p.payloadType !== 0) return;
  if (c.ts0 === undefined) c.ts0 = p.timestamp;
  let dt = (p.timestamp - c.ts0) >>> 0;
  if (dt > 2 ** 31) dt -= 2 ** 32;
  c.ds.push(at - dt / 8);
  if (dt > c.maxTs) c.maxTs = dt;
  if (c.lastSeq !== undefined) {
    const gap = ((p.sequence - c.lastSeq) & 0xffff) - 1;
    if (gap > 0 && gap < 1000) c.lost += gap;
  }
  c.lastSeq = p.sequence;
}

async function start(agentPorts: number[]): Promise<number[]> {
  callers = await Promise.all(agentPorts.map(async (agentPort, i) => {
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((r) => socket.bind(0, '127.0.0.1', r));
    const c: Caller = {
      socket, agentPort, phase: Math.floor((i * CYCLE_FRAMES) / agentPorts.length), seq: rand() & 0xffff, ts: rand(), ssrc: rand(),
      ts0: undefined, ds: [], maxTs: 0, lastSeq: undefined, lost: 0,
    };
    socket.on('message', (buf) => onPacket(c, buf));
    return c;
  }));
  started = performance.now();
  slots = 0;
  tick();
  return callers.map((c) => c.socket.address().port);
}

function stop() {
  measuring = false;
  clearTimeout(timer);
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  loop.disable();
  const late: number[] = [];
  let frames = 0;
  let missing = 0;
  let lost = 0;
  for (const c of callers) {
    if (c.ds.length === 0) continue;
    const min = Math.min(...c.ds);
    for (const d of c.ds) late.push(d - min);
    frames += c.ds.length;
    lost += c.lost;
    missing += Math.max(0, c.maxTs / 160 + 1 - c.ds.length - c.lost);
    c.socket.close();
  }
  late.sort((a, b) => a - b);
  const at = (q: number) => late[Math.min(late.length - 1, Math.max(0, Math.ceil((q / 100) * late.length) - 1))] ?? NaN;
  callers = [];
  return {
    type: 'result', frames, missing, lost, lateP50: at(50), lateP99: at(99), lateMax: late.at(-1) ?? NaN,
    childLoopP99: loop.percentile(99) / 1e6, childCpu: (cpu.user + cpu.system) / 1e6 / elapsed, turns: llm.requests.length - llm0,
  };
}

process.on('message', (m: { type: string; agentPorts?: number[] }) => {
  void (async () => {
    if (m.type === 'start') process.send!({ type: 'callers', callerPorts: await start(m.agentPorts!) });
    else if (m.type === 'measure') {
      for (const c of callers) { c.ts0 = undefined; c.ds = []; c.maxTs = 0; c.lastSeq = undefined; c.lost = 0; }
      loop = monitorEventLoopDelay({ resolution: 1 });
      loop.enable();
      cpu0 = process.cpuUsage();
      t0 = performance.now();
      llm0 = llm.requests.length;
      measuring = true;
      process.send!({ type: 'measuring' });
    } else if (m.type === 'stop') process.send!(stop());
    else if (m.type === 'exit') {
      await llm.close();
      process.disconnect();
    }
  })();
});
process.send!({ type: 'ready', llmBaseUrl: llm.baseUrl });
