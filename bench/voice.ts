// Voice sessions: the service's own time per spoken turn, and how many calls one worker process
// carries. Three parts (all by default; name some to run only those):
//   latency — a real voice session (src/modules/voice/session.ts) over real RTP on
//             loopback, with engines that answer at once (bench/simulated-speech.ts: a simulated
//             recogniser that returns a fixed text, a simulated synthesizer that returns a 200 ms
//             tone) and the model server of the tests on loopback (test/helpers/fake-llm.ts,
//             streaming at once). The caller (another RtpSession, paced in real time) sends a
//             noise burst the energy VAD takes for speech, then silence. Per turn:
//               added = (first loud frame the caller receives − the caller's last speech frame sent)
//                       − speakingTimeout
//             i.e. everything but the silence window the agent is configured to wait for. SQLite,
//             and PostgreSQL too with BENCH_DATABASE_URL or TEST_DATABASE_URL.
//   offline — the same with the real offline engines (espeak-ng speaks for the caller and the
//             agent, pocketsphinx recognises, on free speech and on a five-phrase grammar): the
//             whole voice-to-voice time. SQLite only.
//   greeting — a call's first sound after it is up, over real RTP on loopback: the agent names
//             ElevenLabs (agentTtsEngine), whose double (test/helpers/fake-elevenlabs.ts) sends its
//             first audio 100 ms after a request (the documented typical first byte of a streamed
//             voice); the call starts (start-call.ts, its state noted, the session, the opening)
//             without a greeting synthesized ahead, as a Twilio Media Stream's does, and the caller
//             times its first loud frame. The first call finds the greeting cache cold (the greeting
//             is synthesized), the next BENCH_GREETING_CALLS (20) find it warm. SQLite, and
//             PostgreSQL too with BENCH_DATABASE_URL or TEST_DATABASE_URL.
//   calls   — N calls at once in this process (the agent side: RtpSession + RtpTransport + voice
//             session each, instant engines, SQLite), callers in a child process
//             (bench/voice-callers.ts, plain UDP sockets, with the model server) so this process
//             carries the agent side only. The child measures how late each of our frames
//             arrives against its RTP timestamp; N grows until p99 lateness > 20 ms or frames are
//             missing.
//   streaming — voice to voice on the audio with streamed engines, at 1, 10 and 50 calls at once:
//             each call over real RTP on loopback, started as a call is (start-call.ts: its greeting
//             from the cache, the session), heard by Deepgram live, answered by the model and spoken
//             by ElevenLabs, all three doubles in a child process (bench/voice-doubles.ts) with the
//             vendors' typical timings (recogniser final BENCH_ENDPOINTING_MS (300) after the last
//             word, model first token 300 ms, voice first byte 100 ms). The caller (an RtpSession in
//             this process) speaks espeak-ng's "what are your opening hours" and records what it
//             hears; per turn, voice to voice = first loud frame heard − the caller's last speech
//             frame sent, and our share = that − the three configured delays. The greeting's first
//             sound after the call is started (cold cache: the first call; warm: every other).
//             Then false barge-ins: while the agent speaks, the caller coughs (a 200 ms noise burst)
//             or says "uh-huh"; how often the reply was cut, heard by our VAD alone (energy; Silero)
//             and by Deepgram's events, with the default interruption rule and the most sensitive.
//             SQLite.
// Usage: npm run bench:voice [-- latency offline greeting calls streaming]
//   BENCH_TURNS (default 100), BENCH_OFFLINE_TURNS (10), BENCH_CALLS (25,50,100,150,200,300,400),
//   BENCH_CALL_SECONDS (10: the measured window per step), BENCH_CALL_AGENT=media (the agent side
//   without voice sessions: RtpSession + RtpTransport only, our side sending silence; to separate
//   the media's cost from the sessions'), BENCH_CALL_ENGINE=postgres (the calls' database; needs
//   BENCH_DATABASE_URL or TEST_DATABASE_URL). streaming: BENCH_STREAMING_CALLS (1,10,50),
//   BENCH_STREAMING_TURNS (turns per step, 30 or 3 a call whichever is more), BENCH_ENDPOINTING_MS,
//   BENCH_MODEL_FIRST_TOKEN_MS, BENCH_VOICE_FIRST_BYTE_MS, BENCH_BARGE_TRIALS (5 per sound, rule and way; 0: none).
import { fork } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, performance, PerformanceObserver } from 'node:perf_hooks';
import { PortPool } from '../src/media/port-pool.ts';
import { RtpSession } from '../src/media/rtp-session.ts';
import { RtpTransport } from '../src/media/rtp-transport.ts';
import { accountRepo } from '../src/modules/accounts/repository.ts';
import { messageSecret } from '../src/modules/accounts/message-secret.ts';
import { turnLatencies } from '../src/modules/voice/latency.ts';
import { turnRunner } from '../src/modules/conversations/turn.ts';
import { voiceSettings } from '../src/modules/agents/voice-settings.ts';
import type { AgentConfig } from '../src/modules/agents/validation.ts';
import { CAPABILITIES, callOpening } from '../src/modules/voice/call-policy.ts';
import { startVoiceSession, type VoiceSession } from '../src/modules/voice/session.ts';
import { createPlatform, type Platform } from '../src/platform.ts';
import { EspeakEngine } from '../src/speech/espeak.ts';
import { PocketsphinxEngine } from '../src/speech/pocketsphinx.ts';
import { resample } from '../src/speech/resample.ts';
import type { SpeechGrammar, SpeechToText, StreamingSpeechToText, TextToSpeech } from '../src/speech/types.ts';
import { vadProvider, type VadProvider } from '../src/speech/detectors.ts';
import { frameDbfs } from '../src/speech/vad.ts';
import { guardedDispatcher, policyFromConfig } from '../src/webhooks/ssrf.ts';
import { startFakeLlm, type FakeLlm } from '../test/helpers/fake-llm.ts';
import { ELEVENLABS_TEST_KEY, startFakeElevenLabs } from '../test/helpers/fake-elevenlabs.ts';
import { GreetingCache } from '../src/modules/voice/greeting-cache.ts';
import { startCall } from '../src/modules/voice/start-call.ts';
import { ElevenLabsEngine } from '../src/speech/elevenlabs.ts';
import { DeepgramLive } from '../src/speech/deepgram.ts';
import { ENGINES, PG_URL, percentile, type Engine } from './lib.ts';
import { SimulatedInstantStt, SimulatedInstantTts, TimedStt, TimedTts } from './simulated-speech.ts';

// The test harness reads TEST_DATABASE_URL when it is loaded; BENCH_DATABASE_URL works as well.
if (PG_URL && !process.env.TEST_DATABASE_URL) process.env.TEST_DATABASE_URL = PG_URL;
const { startHarness } = await import('../test/helpers/harness.ts');
type Harness = Awaited<ReturnType<typeof startHarness>>;

const parts = process.argv.slice(2).filter((a) => a !== '--');
const run = (part: string) => parts.length === 0 || parts.includes(part);
const TURNS = Number(process.env.BENCH_TURNS ?? 100);
// Each call's RTP clock has its own phase against the caller's: a reply's first frame waits for the
// agent's next 20 ms slot, which is the same wait all through one call. Many calls, each opened at a
// random phase, sample that wait the way real calls do.
const TURNS_PER_CALL = 10;
const OFFLINE_TURNS = Number(process.env.BENCH_OFFLINE_TURNS ?? 10);
const GREETING_CALLS = Number(process.env.BENCH_GREETING_CALLS ?? 20);
const CALL_STEPS = (process.env.BENCH_CALLS ?? '25,50,100,150,200,300,400').split(',').map(Number);
const CALL_SECONDS = Number(process.env.BENCH_CALL_SECONDS ?? 10);
const CALL_AGENT = process.env.BENCH_CALL_AGENT === 'media' ? 'media' : 'session';
const CALL_ENGINE: Engine = process.env.BENCH_CALL_ENGINE === 'postgres' ? 'postgres' : 'sqlite';
const SPEAKING_TIMEOUT = 300;
/** The agents' default speakingTimeout (src/modules/agents/validation.ts). */
const DEFAULT_SPEAKING_TIMEOUT = 1200;
const HOST = '127.0.0.1';
const PCMU = { pt: 0, name: 'PCMU' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const loud = (f: Int16Array) => frameDbfs(f) > -40;

/** The heading line in docs/performance.md above the table of the figures last recorded. */
const LAST_RECORDED = 'bench:voice, last recorded';

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
const p = (xs: number[], q: number) => percentile(sorted(xs), q);
const f1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : '—');

/** 600 ms of noise at about −17 dBFS (30 whole frames), the same every run: "speech" to the energy VAD. */
function noiseBurst(ms = 600): Int16Array {
  let s = 0x9e3779b9;
  const pcm = new Int16Array((ms / 20) * 160);
  for (let i = 0; i < pcm.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    pcm[i] = ((s >>> 16) % 16000) - 8000;
  }
  return pcm;
}

/** Drops the quiet end of a recording (whole 20 ms frames under −40 dBFS), so its last frame is speech. */
function trimTrailingQuiet(pcm: Int16Array): Int16Array {
  let frames = Math.floor(pcm.length / 160);
  while (frames > 0 && !loud(pcm.subarray((frames - 1) * 160, frames * 160))) frames--;
  return pcm.slice(0, frames * 160);
}

// ------------------------------------------------------------------------------------------------
// A platform on a fresh database, and calls on it: an agent side (RtpSession + RtpTransport + voice
// session) and, for the in-process parts, a caller RtpSession — as test/modules/voice-session.test.ts.

interface World {
  h: Harness;
  latency: ReturnType<typeof turnLatencies>;
  llm: FakeLlm | undefined;
  platform: Platform;
  turns: ReturnType<typeof turnRunner>;
  http: ReturnType<typeof guardedDispatcher>;
  close(): Promise<void>;
}

async function world(engine: Engine, llmBaseUrl?: string): Promise<World> {
  const llm = llmBaseUrl ? undefined : await startFakeLlm();
  const h = await startHarness(engine, { CALLPLANE_LLM_BASE_URL: llmBaseUrl ?? llm!.baseUrl, CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' });
  const platform = createPlatform({ config: h.config, database: h.database, box: h.box });
  const db = h.database.db;
  const http = guardedDispatcher(policyFromConfig(h.config));
  const { services } = platform;
  const turns = turnRunner({
    db, models: services.models, knowledge: services.knowledge, context: services.context, tasks: services.tasks,
    http, messageSecret: (orgId) => messageSecret(db, h.box, orgId), now: Date.now,
  });
  const latency = turnLatencies({ db, metrics: platform.metrics, budgetMs: 1500, now: Date.now });
  return {
    h, llm, platform, turns, http, latency,
    async close() { await http.close(); await platform.close(); await h.close(); await llm?.close(); },
  };
}

/** An organization's agent with this live configuration; returns what opening a call on it needs. */
async function agentWith(w: World, config: Record<string, unknown>) {
  const r = await w.h.reseller();
  const o = await w.h.organization(r.id);
  const token = await w.h.tokenFor(o.agentId);
  for (const url of ['/api/v2/agent', '/api/v2/agent/publish']) {
    const res = await w.h.call('POST', url, { token, body: url.endsWith('publish') ? undefined : config });
    if (res.status !== 200) throw new Error(`${url}: ${res.status} ${JSON.stringify(res.body)}`);
  }
  const agent = (await accountRepo.findById(w.h.database.db, o.agentId))!;
  return { agent, live: await w.platform.services.agents.liveConfig(agent) };
}

interface AgentCall {
  agentSide: RtpSession;
  transport: RtpTransport;
  session: Pick<VoiceSession, 'done'>;
  /** performance.now() of every transport.play() call. */
  plays: number[];
  /** Per turn run: when it started and when it returned. */
  runs: Array<{ start: number; end: number }>;
  end(): Promise<void>;
}

/** Opens a conversation and the agent's end of a call (media to `remote`), with a voice session on it. */
async function agentCall(w: World, a: Awaited<ReturnType<typeof agentWith>>, pool: PortPool, stt: SpeechToText, tts: TextToSpeech, remotePort?: number, mediaOnly = false, grammar?: SpeechGrammar, vad?: VadProvider): Promise<AgentCall> {
  const { services } = w.platform;
  const db = w.h.database.db;
  const opened = await db.transaction().execute((tx) => services.conversations.open(tx, {
    agent: a.agent, channel: 'sip', direction: 'inbound', counterpart: `+1415555${String(crypto.randomInt(1000, 9999))}`, counterpartKind: 'phone', fresh: true,
  }, Date.now()));
  const agentSide = await RtpSession.open({ host: HOST, pool, codec: PCMU, telephoneEvent: 101 });
  if (remotePort !== undefined) agentSide.setRemote({ address: HOST, port: remotePort });
  const transport = new RtpTransport(agentSide, { transfer: () => Promise.resolve(), hangup: () => Promise.resolve() });
  const plays: number[] = [];
  const play = transport.play.bind(transport);
  transport.play = (pcm, mark) => { plays.push(performance.now()); play(pcm, mark); };
  const runs: AgentCall['runs'] = [];
  const timedTurns: Pick<typeof w.turns, 'run'> = {
    async run(input) {
      const r = { start: performance.now(), end: NaN };
      runs.push(r);
      try {
        return await w.turns.run(input);
      } finally {
        r.end = performance.now();
      }
    },
  };
  if (mediaOnly) {
    return { agentSide, transport, plays, runs, session: { done: Promise.resolve() }, async end() { transport.end('bench over'); } };
  }
  const session = startVoiceSession({
    turns: timedTurns, stt, tts, now: Date.now,
    // Each turn's latency recorded as on a real call (the row, the histograms); the VAD stays the
    // energy detector: the caller's "speech" here is a noise burst, which Silero rightly ignores.
    latency: w.latency, vad,
    log: { warn: (o, m) => console.error(`voice session: ${m}`, o) },
  }, { transport, transcript: services.conversations.callTranscript(opened), conversation: opened.conversation, room: opened.room, config: a.live, ...sipSession(a.live), grammar });
  return {
    agentSide, transport, session, plays, runs,
    async end() { transport.end('bench over'); await session.done; },
  };
}

/** A SIP call's settings, opening and capabilities, as voice/sip-calls.ts gives a session. */
function sipSession(config: AgentConfig) {
  const settings = voiceSettings(config);
  return { settings, opening: callOpening(settings, { recorded: false }), capabilities: CAPABILITIES.sip };
}

// ------------------------------------------------------------------------------------------------
// Parts 1 and 2: turns one at a time over one call's RTP, timed from the caller's side.

interface TurnTimes {
  /** Caller's last speech frame sent → first loud frame received, ms. */
  voiceToVoice: number;
  /** voiceToVoice − speakingTimeout. */
  added: number;
  // The breakdown (ms), each from the previous step.
  vad: number; stt: number; record: number; toModel: number; model: number; toTts: number; tts: number; toPlay: number; rtpOut: number;
  /** The model's last byte → the turn returned (the reply recorded, counts, the room touched). */
  afterModel: number;
}

async function turns(w: World, opts: {
  n: number; speech: Int16Array; reply: string; stt: TimedStt; tts: TimedTts; config: Record<string, unknown>; label: string; grammar?: SpeechGrammar; vad?: VadProvider;
}): Promise<TurnTimes[]> {
  const llm = w.llm!;
  const speakingTimeout = Number(opts.config.speakingTimeout);
  const a = await agentWith(w, { welcomeMessage: '', callerResponseTimeout: 120, interruptionWordCount: 20, ...opts.config });
  const portMin = 20_000 + 2 * crypto.randomInt(0, 2_000);
  const pool = new PortPool({ portMin, portMax: portMin + 2 * 9 });
  const out: TurnTimes[] = [];
  for (let done = 0; done < opts.n;) {
    const caller = await RtpSession.open({ host: HOST, pool, codec: PCMU, telephoneEvent: 101 });
    await sleep(crypto.randomInt(0, 20));
    const c = await agentCall(w, a, pool, opts.stt, opts.tts, caller.port, false, opts.grammar, opts.vad);
    caller.setRemote({ address: HOST, port: c.agentSide.port });
    await sleep(300); // both ends latched, the VAD's noise floor settled on the line's silence
    try {
      for (let i = 0; i < TURNS_PER_CALL && done < opts.n; i++, done++) {
        llm.script.push({ text: opts.reply });
        const before = { llm: llm.requests.length, stt: opts.stt.spans.length, tts: opts.tts.spans.length, plays: c.plays.length, runs: c.runs.length };
        const drained = new Promise<number>((r) => caller.once('drained', () => r(performance.now())));
        caller.send(opts.speech);
        const tEnd = await drained;
        let lastLoud = NaN;
        const first = await new Promise<number>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`${opts.label}: no answer within 15 s`)), 15_000);
          const onAudio = (f: Int16Array) => {
            if (!loud(f)) return;
            clearTimeout(timer);
            lastLoud = performance.now();
            resolve(lastLoud);
          };
          caller.on('audio', onAudio);
        });
        // Until the reply has been heard out (300 ms without a loud frame) and the turn settled.
        caller.removeAllListeners('audio');
        caller.on('audio', (f) => { if (loud(f)) lastLoud = performance.now(); });
        while (performance.now() - lastLoud < 300) await sleep(20);
        caller.removeAllListeners('audio');
        await sleep(100);
        const req = llm.requests[before.llm];
        const stt = opts.stt.spans[before.stt];
        const tts = opts.tts.spans[before.tts];
        const play = c.plays[before.plays];
        const turn = c.runs[before.runs];
        if (!req || !stt || !tts || play === undefined || !turn) throw new Error(`${opts.label}: turn ${done} incomplete`);
        out.push({
          voiceToVoice: first - tEnd,
          added: first - tEnd - speakingTimeout,
          vad: stt.start - tEnd - speakingTimeout,
          stt: stt.end - stt.start,
          record: turn.start - stt.end,
          toModel: req.t - turn.start,
          model: (req.doneT ?? NaN) - req.t,
          toTts: tts.start - (req.doneT ?? NaN),
          afterModel: turn.end - (req.doneT ?? NaN),
          tts: tts.end - tts.start,
          toPlay: play - tts.end,
          rtpOut: first - play,
        });
      }
    } finally {
      await c.end();
      await caller.close();
    }
  }
  return out;
}

function printTurns(label: string, t: TurnTimes[], speakingTimeout: number) {
  const row = (name: string, xs: number[]) => `  ${name.padEnd(66)} ${f1(p(xs, 50)).padStart(7)} ${f1(p(xs, 95)).padStart(7)} ${f1(Math.max(...xs)).padStart(7)}`;
  console.log(`\n${label}: ${t.length} turns, speakingTimeout ${speakingTimeout} ms`);
  console.log(`  ${''.padEnd(66)} ${'p50'.padStart(7)} ${'p95'.padStart(7)} ${'max'.padStart(7)}  (ms)`);
  console.log(row('voice to voice (end of speech → first agent audio)', t.map((x) => x.voiceToVoice)));
  console.log(row('ADDED (voice to voice − speakingTimeout)', t.map((x) => x.added)));
  console.log(row('  VAD end (STT called − end of speech − speakingTimeout)', t.map((x) => x.vad)));
  console.log(row('  recognition', t.map((x) => x.stt)));
  console.log(row('  recognised → turn starts (the message recorded, committed)', t.map((x) => x.record)));
  console.log(row('  turn starts → model request arrives (reads, prompt, HTTP)', t.map((x) => x.toModel)));
  console.log(row('  model request → its last byte written', t.map((x) => x.model)));
  console.log(row('  model\'s last byte → first sentence to synthesis (< 0: before)', t.map((x) => x.toTts)));
  console.log(row('  synthesis', t.map((x) => x.tts)));
  console.log(row('  synthesized → transport.play', t.map((x) => x.toPlay)));
  console.log(row('  transport.play → caller hears the first frame', t.map((x) => x.rtpOut)));
  console.log(row('  (aside) model\'s last byte → the turn returned', t.map((x) => x.afterModel)));
}

/** A child process of this directory's `file`, and its messages one at a time. */
function forkChild(file: string) {
  const child = fork(path.join(import.meta.dirname, file), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const messages: any[] = [];
  const waiters: Array<(m: any) => void> = [];
  child.on('message', (m) => { const w = waiters.shift(); if (w) w(m); else messages.push(m); });
  const next = () => new Promise<any>((r) => { const m = messages.shift(); if (m) r(m); else waiters.push(r); });
  return { child, next };
}

const summary: string[] = [];

if (run('latency')) {
  for (const engine of ENGINES) {
    const w = await world(engine);
    try {
      const stt = new TimedStt(new SimulatedInstantStt('what are your opening hours'));
      const tts = new TimedTts(new SimulatedInstantTts(200));
      const speech = noiseBurst(600);
      const config = { speakingTimeout: SPEAKING_TIMEOUT };
      // Warm-up: the first turns compile and cache what the rest reuse.
      await turns(w, { n: 5, speech, reply: 'We open at nine. Anything else?', stt, tts, config, label: 'warm-up' });
      for (const [shape, reply, n] of [
        ['two sentences (the first is spoken while the model still streams)', 'We open at nine. Is there anything else?', TURNS],
        ['one sentence (spoken once the turn has returned)', 'We open at nine.', Math.max(10, Math.round(TURNS / 2))],
        // What speaking the buffer's rest at the end of the model's stream would give: a trailing
        // space lets the session's sentence splitter take the sentence while the stream is read.
        ['one sentence, trailing space (spoken as the stream is read)', 'We open at nine. ', Math.max(10, Math.round(TURNS / 2))],
      ] as const) {
        const t = await turns(w, { n, speech, reply, stt, tts, config, label: shape });
        printTurns(`[${engine}] instant engines, reply in ${shape}`, t, SPEAKING_TIMEOUT);
        const added = t.map((x) => x.added);
        summary.push(`| added per turn, ${engine}, ${shape.split(' (')[0]} | ${f1(p(added, 50))} | ${f1(p(added, 95))} | ${f1(Math.max(...added))} | ${p(added, 95) <= 50 ? 'p95 ≤ 50 ms: yes' : 'p95 ≤ 50 ms: NO'} |`);
      }
    } finally {
      await w.close();
    }
  }
}

if (run('greeting')) {
  for (const engine of ENGINES) {
    const w = await world(engine);
    const el = await startFakeElevenLabs();
    el.failures.firstAudioDelayMs = 100;
    const elevenlabs = new ElevenLabsEngine({ apiKey: ELEVENLABS_TEST_KEY, baseUrl: el.baseUrl, maxRetries: 0, timeoutMs: 5000 });
    const greetings = new GreetingCache();
    const portMin = 22_000 + 2 * crypto.randomInt(0, 1_000);
    const pool = new PortPool({ portMin, portMax: portMin + 2 * 9 });
    const firsts: number[] = [];
    try {
      const a = await agentWith(w, { welcomeMessage: 'Thank you for calling the bakery. How can I help?', agentTtsEngine: 'elevenlabs', callerResponseTimeout: 120 });
      const db = w.h.database.db;
      const { services } = w.platform;
      for (let i = 0; i <= GREETING_CALLS; i++) {
        const caller = await RtpSession.open({ host: HOST, pool, codec: PCMU, telephoneEvent: 101 });
        const agentSide = await RtpSession.open({ host: HOST, pool, codec: PCMU, telephoneEvent: 101 });
        agentSide.setRemote({ address: HOST, port: caller.port });
        caller.setRemote({ address: HOST, port: agentSide.port });
        const transport = new RtpTransport(agentSide, { transfer: () => Promise.resolve(), hangup: () => Promise.resolve() });
        const opened = await db.transaction().execute((tx) => services.conversations.open(tx, {
          agent: a.agent, channel: 'sip', direction: 'inbound', counterpart: `+1415555${String(crypto.randomInt(1000, 9999))}`, counterpartKind: 'phone', fresh: true,
        }, Date.now()));
        await sleep(crypto.randomInt(0, 20));
        const heard = new Promise<number>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error('greeting: no sound within 10 s')), 10_000);
          caller.on('audio', (f: Int16Array) => { if (loud(f)) { clearTimeout(timer); resolve(performance.now()); } });
        });
        const up = performance.now();
        const started = await startCall({
          db, conversations: services.conversations, turns: w.turns, stt: new SimulatedInstantStt(''), tts: new SimulatedInstantTts(200),
          voices: { elevenlabs }, greetings, now: Date.now, log: { warn: (o, m) => console.error(`greeting: ${m}`, o) },
        }, transport, { conversation: opened.conversation, room: opened.room, config: a.live, settings: voiceSettings(a.live), capabilities: CAPABILITIES.sip, opening: {} });
        firsts.push((await heard) - up);
        transport.end('bench over');
        await started.done;
        await caller.close();
      }
      const [cold, ...warm] = firsts;
      console.log(`\n[${engine}] greeting's first sound after the call is up (voice first byte 100 ms): cold cache ${f1(cold!)} ms; warm (${warm.length} calls) p50 ${f1(p(warm, 50))}, p95 ${f1(p(warm, 95))}, max ${f1(Math.max(...warm))} ms; cache ${greetings.stats.hits} hits, ${greetings.stats.misses} misses`);
      summary.push(`| greeting's first sound after the call is up, ${engine}, warm cache | ${f1(p(warm, 50))} | ${f1(p(warm, 95))} | ${f1(Math.max(...warm))} | cold: ${f1(cold!)} |`);
    } finally {
      await el.close();
      await w.close();
    }
  }
}

if (run('offline')) {
  const w = await world('sqlite');
  try {
    const espeak = new EspeakEngine();
    const sphinx = new PocketsphinxEngine();
    await espeak.check();
    await sphinx.check();
    const said = await espeak.synthesize('what are your opening hours', { language: 'en-US' });
    const speech = trimTrailingQuiet(resample(said.pcm16, said.sampleRate, 8000));
    const stt = new TimedStt(sphinx);
    const tts = new TimedTts(espeak);
    // The agents' default speakingTimeout would add 1.2 s of waiting; the same small window as above.
    // Free speech (pocketsphinx's full language model, a call without a grammar), then a grammar of
    // a few phrases (a menu), which pocketsphinx searches far faster.
    const config = { speakingTimeout: SPEAKING_TIMEOUT };
    await turns(w, { n: 2, speech, reply: 'We open at nine. Is there anything else?', stt, tts, config, label: 'offline warm-up' });
    // The third is a SIP call as the service runs one by default: the Silero VAD (loaded before the
    // call, as a process that has carried a call has it) and the agents' default speakingTimeout.
    const silero = vadProvider({ vad: 'silero', vadModel: undefined });
    await silero.ready();
    try {
      for (const [how, grammar, vad, timeout] of [
        ['free speech (full language model)', undefined, undefined, SPEAKING_TIMEOUT],
        ['a grammar of five phrases', { kind: 'phrases', phrases: ['what are your opening hours', 'goodbye', 'yes', 'no', 'talk to a person'] }, undefined, SPEAKING_TIMEOUT],
        ['free speech, Silero VAD, the default speakingTimeout (a SIP call as configured by default)', undefined, silero, DEFAULT_SPEAKING_TIMEOUT],
      ] as const) {
        const before = stt.spans.length;
        const t = await turns(w, { n: OFFLINE_TURNS, speech, reply: 'We open at nine. Is there anything else?', stt, tts, config: { speakingTimeout: timeout }, label: 'offline', grammar, vad });
        printTurns(`[sqlite] offline engines (pocketsphinx on ${how}, espeak-ng), reply in two sentences`, t, timeout);
        const heard = new Map<string, number>();
        for (const x of stt.spans.slice(before)) heard.set(x.text ?? '', (heard.get(x.text ?? '') ?? 0) + 1);
        console.log(`  the caller said "what are your opening hours"; pocketsphinx heard: ${[...heard].map(([k, v]) => `"${k}" ×${v}`).join(', ')}`);
        const v = t.map((x) => x.voiceToVoice);
        const added = t.map((x) => x.added);
        const label = `voice to voice, offline engines, pocketsphinx on ${how.split(' (')[0]}, sqlite`;
        summary.push(`| ${label} | ${f1(p(v, 50))} | ${f1(p(v, 95))} | ${f1(Math.max(...v))} | added ${f1(p(added, 50))} / ${f1(p(added, 95))} ms |`);
      }
    } finally {
      await silero.close();
    }
  } finally {
    await w.close();
  }
}

// ------------------------------------------------------------------------------------------------
// Part 3: calls at once.

interface CallerResult {
  frames: number; missing: number; lost: number;
  lateP50: number; lateP99: number; lateMax: number;
  childLoopP99: number; childCpu: number;
}

if (run('calls')) {
  const { child, next } = forkChild('voice-callers.ts');
  const { llmBaseUrl } = await next();
  const w = await world(CALL_ENGINE, llmBaseUrl as string);
  const maxN = Math.max(...CALL_STEPS);
  const portMin = 30_000 + 2 * crypto.randomInt(0, 1_000);
  const pool = new PortPool({ portMin, portMax: portMin + 2 * (maxN + 20) });
  const stt = new SimulatedInstantStt('what are your opening hours');
  const tts = new SimulatedInstantTts(1000);
  const a = await agentWith(w, { welcomeMessage: '', speakingTimeout: 700, callerResponseTimeout: 120, interruptionWordCount: 20 });
  const rows: string[] = [];
  let holds = 0;
  try {
    for (const n of CALL_STEPS) {
      const calls: AgentCall[] = [];
      // Memory a call holds: the process's resident set and heap with the step's calls up, less before them.
      (globalThis as { gc?: () => void }).gc?.();
      const mem0 = process.memoryUsage();
      for (let i = 0; i < n; i++) calls.push(await agentCall(w, a, pool, stt, tts, undefined, CALL_AGENT === 'media'));
      child.send({ type: 'start', agentPorts: calls.map((c) => c.agentSide.port) });
      const { callerPorts } = await next();
      calls.forEach((c, i) => c.agentSide.setRemote({ address: HOST, port: (callerPorts as number[])[i]! }));
      await sleep(3000); // warm-up: every call latched, the first turns under way
      const loop = monitorEventLoopDelay({ resolution: 1 });
      loop.enable();
      // Garbage collection in the window: its total time and the longest pause.
      let gcTotal = 0;
      let gcMax = 0;
      const gc = new PerformanceObserver((list) => {
        for (const e of list.getEntries()) { gcTotal += e.duration; gcMax = Math.max(gcMax, e.duration); }
      });
      gc.observe({ entryTypes: ['gc'] });
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      child.send({ type: 'measure' });
      await next();
      await sleep(CALL_SECONDS * 1000);
      child.send({ type: 'stop' });
      const r = (await next()) as CallerResult & { turns: number };
      const elapsed = (performance.now() - t0) / 1000;
      (globalThis as { gc?: () => void }).gc?.();
      const mem1 = process.memoryUsage();
      const perCall = (k: 'rss' | 'heapUsed' | 'external') => ((mem1[k] - mem0[k]) / n / 1024 / 1024).toFixed(2);
      const cpu = process.cpuUsage(cpu0);
      loop.disable();
      gc.disconnect();
      await Promise.all(calls.map((c) => c.end()));
      const cpuShare = (cpu.user + cpu.system) / 1e6 / elapsed;
      const ok = r.lateP99 <= 20 && r.missing === 0 && r.lost === 0;
      if (ok && n > holds) holds = n;
      rows.push(`| ${n} | ${f1(r.lateP50)} / ${f1(r.lateP99)} / ${f1(r.lateMax)} | ${r.missing} + ${r.lost} of ${r.frames} | ${f1(loop.percentile(99) / 1e6)} / ${f1(loop.max / 1e6)} | ${(cpuShare * 100).toFixed(0)} % (${(cpuShare * 100 / n).toFixed(2)} % a call) | ${f1(gcMax)} / ${(gcTotal / elapsed / 10).toFixed(1)} % | ${(r.turns / elapsed).toFixed(1)} | ${f1(r.childLoopP99)} / ${(r.childCpu * 100).toFixed(0)} % | ${perCall('rss')} / ${perCall('heapUsed')} / ${perCall('external')} | ${ok ? 'holds' : 'LATE'} |`);
      console.log(rows.at(-1));
      await sleep(500);
      if (!ok && CALL_STEPS.indexOf(n) < CALL_STEPS.length - 1 && r.lateP99 > 100) break;
    }
  } finally {
    child.send({ type: 'exit' });
    await new Promise((r) => child.once('exit', r));
    await w.close();
  }
  console.log(`\nCalls at once in this process (${CALL_ENGINE}; agent side: ${CALL_AGENT === 'media' ? 'RtpSession + RtpTransport only, no voice session' : 'voice sessions'}; callers and the model server in a child process):`);
  console.log('| calls | our frames late at the caller, p50 / p99 / max ms | missing (skipped) + lost of received | agent event-loop delay p99 / max ms | agent CPU of one core | agent GC longest pause ms / share of time | turns/s | caller process loop p99 ms / CPU | memory a call: RSS / heap / external MB | |');
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(r);
  summary.push(`| calls one worker process carries (${CALL_ENGINE}, ${CALL_AGENT === 'media' ? 'media only' : 'voice sessions'}) with p99 frame lateness ≤ 20 ms and nothing missing | ${holds || 'none of the steps'} | | | |`);
}

// ------------------------------------------------------------------------------------------------
// Part 4: streamed engines, voice to voice on the audio, calls at once; false barge-ins.

const STREAMING_STEPS = (process.env.BENCH_STREAMING_CALLS ?? '1,10,50').split(',').map(Number);
const STREAMING_TURNS = Number(process.env.BENCH_STREAMING_TURNS ?? 30);
const ENDPOINTING_MS = Number(process.env.BENCH_ENDPOINTING_MS ?? 300);
const MODEL_FIRST_TOKEN_MS = Number(process.env.BENCH_MODEL_FIRST_TOKEN_MS ?? 300);
const VOICE_FIRST_BYTE_MS = Number(process.env.BENCH_VOICE_FIRST_BYTE_MS ?? 100);
const BARGE_TRIALS = Number(process.env.BENCH_BARGE_TRIALS ?? 5);
/** Where the streaming steps' callers run: `process` (default, a child of their own) or `inline` (this process, as before). */
const STREAMING_CALLERS = process.env.BENCH_CALLERS === 'inline' ? 'inline' : 'process';
/** What the doubles add to every turn: what is left of voice to voice is ours (and the line's). */
const CONFIGURED_DELAYS_MS = ENDPOINTING_MS + MODEL_FIRST_TOKEN_MS + VOICE_FIRST_BYTE_MS;
const STREAMING_GREETING = 'Thank you for calling the bakery. How can I help?';

/** Deepgram live as the agent's calls open it, with the endpointing this bench sets (the double's final comes that long after the last word). */
function withEndpointing(engine: StreamingSpeechToText, endpointingMs: number): StreamingSpeechToText {
  return { name: engine.name, offline: false, open: (o) => engine.open({ ...o, endpointingMs }), check: (signal) => engine.check(signal) };
}

/** The caller's end of one call: its RTP session, and when each loud frame it received arrived (performance.now()). */
class RecordingCaller {
  readonly loudAt: number[] = [];
  constructor(readonly rtp: RtpSession) {
    rtp.on('audio', (f: Int16Array) => { if (loud(f)) this.loudAt.push(performance.now()); });
  }

  /** The first loud frame heard after `t`. */
  async firstLoudAfter(t: number, label: string, timeoutMs = 15_000): Promise<number> {
    for (const until = performance.now() + timeoutMs; performance.now() < until; await sleep(10)) {
      const at = this.loudAt.find((x) => x > t);
      if (at !== undefined) return at;
    }
    throw new Error(`${label}: nothing heard within ${timeoutMs} ms`);
  }

  /** Waits until nothing loud came for `quietMs`; returns the last loud frame's time. */
  async heardOut(quietMs = 400): Promise<number> {
    while (performance.now() - (this.loudAt.at(-1) ?? 0) < quietMs) await sleep(20);
    return this.loudAt.at(-1) ?? NaN;
  }

  /** Once the sound that started at `from` stops (no loud frame for `gapMs`): its last loud frame's time. */
  async soundStops(from: number, gapMs: number): Promise<number> {
    for (;;) {
      const after = this.loudAt.filter((x) => x >= from);
      const gap = after.findIndex((x, i) => i + 1 < after.length && after[i + 1]! - x >= gapMs);
      if (gap >= 0) return after[gap]!;
      if (performance.now() - after.at(-1)! >= gapMs) return after.at(-1)!;
      await sleep(20);
    }
  }

  /** Sends `pcm` in real time; resolves when its last frame went out. */
  say(pcm: Int16Array): Promise<number> {
    const drained = new Promise<number>((r) => this.rtp.once('drained', () => r(performance.now())));
    this.rtp.send(pcm);
    return drained;
  }
}

interface StreamingRig {
  w: World;
  pool: PortPool;
  deepgram: StreamingSpeechToText;
  elevenlabs: ElevenLabsEngine;
  greetings: GreetingCache;
}

/** A call started as a SIP call's is (start-call.ts) on the agent `a`, with a recording caller on the other end of its RTP. */
async function streamedCall(rig: StreamingRig, a: Awaited<ReturnType<typeof agentWith>>, how: { streaming: boolean; vad?: VadProvider }) {
  const { w, pool } = rig;
  const db = w.h.database.db;
  const { services } = w.platform;
  const caller = new RecordingCaller(await RtpSession.open({ host: HOST, pool, codec: PCMU, telephoneEvent: 101 }));
  const agentSide = await RtpSession.open({ host: HOST, pool, codec: PCMU, telephoneEvent: 101 });
  agentSide.setRemote({ address: HOST, port: caller.rtp.port });
  caller.rtp.setRemote({ address: HOST, port: agentSide.port });
  const transport = new RtpTransport(agentSide, { transfer: () => Promise.resolve(), hangup: () => Promise.resolve() });
  const opened = await db.transaction().execute((tx) => services.conversations.open(tx, {
    agent: a.agent, channel: 'sip', direction: 'inbound', counterpart: `+1415555${String(crypto.randomInt(1000, 9999))}`, counterpartKind: 'phone', fresh: true,
  }, Date.now()));
  const up = performance.now();
  const started = await startCall({
    db, conversations: services.conversations, turns: w.turns, latency: w.latency, vad: how.vad,
    // The batch recogniser and the configured voice, used only if a streamed engine fails.
    stt: new SimulatedInstantStt('what are your opening hours'), tts: new SimulatedInstantTts(200),
    streaming: how.streaming ? { deepgram: rig.deepgram } : {}, voices: { elevenlabs: rig.elevenlabs }, greetings: rig.greetings,
    // A call ended by the bench while a turn is under way (after a cough) aborts that turn: not news.
    now: Date.now, log: { warn: (o, m) => { if (!/aborted/.test(JSON.stringify(o))) console.error(`streaming: ${m}`, o); } },
  }, transport, { conversation: opened.conversation, room: opened.room, config: a.live, settings: voiceSettings(a.live), capabilities: CAPABILITIES.sip, opening: {} });
  return {
    caller, up, conversationId: opened.conversation.id,
    async end() {
      transport.end('bench over');
      await started.done;
      await caller.rtp.close();
    },
  };
}

/** One call of a step: the greeting, then `turns` turns; voice to voice per turn, on the audio. */
async function streamedTurns(rig: StreamingRig, a: Awaited<ReturnType<typeof agentWith>>, speech: Int16Array, turns: number, startDelayMs: number) {
  await sleep(startDelayMs);
  const c = await streamedCall(rig, a, { streaming: true });
  try {
    const greeting = (await c.caller.firstLoudAfter(c.up, 'greeting')) - c.up;
    await c.caller.heardOut();
    const v2v: number[] = [];
    for (let i = 0; i < turns; i++) {
      await sleep(crypto.randomInt(200, 1200));
      const end = await c.caller.say(speech);
      v2v.push((await c.caller.firstLoudAfter(end, 'reply')) - end);
      await c.caller.heardOut();
    }
    return { greeting, v2v, conversationId: c.conversationId };
  } finally {
    await c.end();
  }
}

/** The streaming steps' callers in their own process (bench/voice-streaming-callers.ts), addressed by call id. */
function streamingCallers(speech: Int16Array, portMin: number, portMax: number) {
  const child = fork(path.join(import.meta.dirname, 'voice-streaming-callers.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiting = new Map<string, (m: any) => void>();
  child.on('message', (m: any) => { waiting.get(m.id ?? '')?.(m); });
  const ask = (id: string, msg: object) => new Promise<any>((resolve, reject) => {
    waiting.set(id, (m) => { waiting.delete(id); if (m.type === 'failed') reject(new Error(m.message)); else resolve(m); });
    child.send({ ...msg, id });
  });
  let seq = 0;
  return {
    ready: ask('', { type: 'init', speech: Array.from(speech), portMin, portMax }),
    /** One call of a step with its caller over there: the greeting, then `turns` turns, measured by the caller. */
    async call(rig: StreamingRig, a: Awaited<ReturnType<typeof agentWith>>, turns: number, startDelayMs: number) {
      await sleep(startDelayMs);
      const id = `c${++seq}`;
      const { port } = await ask(id, { type: 'open' }) as { port: number };
      const { w, pool } = rig;
      const db = w.h.database.db;
      const { services } = w.platform;
      const agentSide = await RtpSession.open({ host: HOST, pool, codec: PCMU, telephoneEvent: 101 });
      agentSide.setRemote({ address: HOST, port });
      const transport = new RtpTransport(agentSide, { transfer: () => Promise.resolve(), hangup: () => Promise.resolve() });
      const opened = await db.transaction().execute((tx) => services.conversations.open(tx, {
        agent: a.agent, channel: 'sip', direction: 'inbound', counterpart: `+1415555${String(crypto.randomInt(1000, 9999))}`, counterpartKind: 'phone', fresh: true,
      }, Date.now()));
      const measured = ask(id, { type: 'run', agentPort: agentSide.port, turns }) as Promise<{ greeting: number; v2v: number[] }>;
      const started = await startCall({
        db, conversations: services.conversations, turns: w.turns, latency: w.latency,
        stt: new SimulatedInstantStt('what are your opening hours'), tts: new SimulatedInstantTts(200),
        streaming: { deepgram: rig.deepgram }, voices: { elevenlabs: rig.elevenlabs }, greetings: rig.greetings,
        now: Date.now, log: { warn: (o, m) => { if (!/aborted/.test(JSON.stringify(o))) console.error(`streaming: ${m}`, o); } },
      }, transport, { conversation: opened.conversation, room: opened.room, config: a.live, settings: voiceSettings(a.live), capabilities: CAPABILITIES.sip, opening: {} });
      try {
        return { ...(await measured), conversationId: opened.conversation.id };
      } finally {
        transport.end('bench over');
        await started.done;
      }
    },
    exit() { child.send({ type: 'exit' }); },
  };
}

/** A cough: 200 ms of noise rising and falling, about as loud as the caller's speech. */
function cough(): Int16Array {
  const pcm = noiseBurst(200);
  for (let i = 0; i < pcm.length; i++) pcm[i] = Math.round(pcm[i]! * Math.sin((Math.PI * i) / pcm.length));
  return pcm;
}

if (run('streaming')) {
  const doubles = forkChild('voice-doubles.ts');
  const urls = await doubles.next() as { llmBaseUrl: string; deepgramUrl: string; deepgramKey: string; elevenlabsUrl: string };
  const w = await world('sqlite', urls.llmBaseUrl);
  const maxN = Math.max(...STREAMING_STEPS);
  const portMin = 24_000 + 2 * crypto.randomInt(0, 500);
  const rig: StreamingRig = {
    w, pool: new PortPool({ portMin, portMax: portMin + 4 * (maxN + 10) }),
    deepgram: withEndpointing(new DeepgramLive({ apiKey: urls.deepgramKey, baseUrl: urls.deepgramUrl }), ENDPOINTING_MS),
    elevenlabs: new ElevenLabsEngine({ apiKey: ELEVENLABS_TEST_KEY, baseUrl: urls.elevenlabsUrl, maxRetries: 0, timeoutMs: 5000 }),
    greetings: new GreetingCache(),
  };
  const hear = async (words: string[]) => { doubles.child.send({ type: 'hear', words }); await doubles.next(); };
  const reply = async (text: string) => { doubles.child.send({ type: 'reply', text }); await doubles.next(); };
  try {
    const espeak = new EspeakEngine();
    const said = await espeak.synthesize('what are your opening hours', { language: 'en-US' });
    const speech = trimTrailingQuiet(resample(said.pcm16, said.sampleRate, 8000));
    const a = await agentWith(w, { welcomeMessage: STREAMING_GREETING, agentSttEngine: 'deepgram', agentTtsEngine: 'elevenlabs', speakingTimeout: 5000, callerResponseTimeout: 120, interruptionWordCount: 20 });
    console.log(`\nStreamed engines (doubles: recogniser final ${ENDPOINTING_MS} ms after the last word, model first token ${MODEL_FIRST_TOKEN_MS} ms, voice first byte ${VOICE_FIRST_BYTE_MS} ms: ${CONFIGURED_DELAYS_MS} ms a turn); load average before: ${os.loadavg().map((x) => x.toFixed(2)).join(', ')}`);
    console.log(`| calls at once | turns | voice to voice p50 / p95 / max ms | our share p50 / p95 / max ms | greeting's first sound p50 / p95 / max ms | load average (1 min) after |`);
    console.log('|---|---|---|---|---|---|');
    let cold: number | undefined;
    // The callers in a process of their own (BENCH_CALLERS=inline: in this one, beside the agents).
    const callers = STREAMING_CALLERS === 'process' ? streamingCallers(speech, portMin + 4 * (maxN + 10) + 2, portMin + 8 * (maxN + 10)) : undefined;
    await callers?.ready;
    console.log(`callers: ${callers ? 'in a process of their own' : 'in this process, beside the agents'}`);
    for (const n of STREAMING_STEPS) {
      const perCall = Math.max(3, Math.ceil(STREAMING_TURNS / n));
      // Calls start over a second or two, as calls arrive, and talk at their own pace after.
      const results = await Promise.all(Array.from({ length: n }, () => {
        const delay = crypto.randomInt(0, Math.min(2000, 50 * n + 1));
        return callers ? callers.call(rig, a, perCall, delay) : streamedTurns(rig, a, speech, perCall, delay);
      }));
      const greetings = results.map((r) => r.greeting);
      if (cold === undefined) cold = greetings.shift();
      const v = results.flatMap((r) => r.v2v);
      const ours = v.map((x) => x - CONFIGURED_DELAYS_MS);
      const three = (xs: number[]) => `${f1(p(xs, 50))} / ${f1(p(xs, 95))} / ${f1(Math.max(...xs))}`;
      console.log(`| ${n} | ${v.length} | ${three(v)} | ${three(ours)} | ${greetings.length ? three(greetings) : '—'} (warm) | ${os.loadavg()[0]!.toFixed(2)} |`);
      summary.push(`| voice to voice, streamed engines, ${n} calls at once | ${f1(p(v, 50))} | ${f1(p(v, 95))} | ${f1(Math.max(...v))} | our share ${f1(p(ours, 50))} / ${f1(p(ours, 95))} ms${n >= 50 ? (p(ours, 95) <= 80 ? ', p95 ≤ 80 ms: yes' : ', p95 ≤ 80 ms: NO') : ''} |`);
      // The service's own record of the same turns (turn_latencies), where the time went.
      const rows = await w.h.database.db.selectFrom('turn_latencies').selectAll().where('conversation_id', 'in', results.map((r) => r.conversationId)).execute();
      const step = (k: 'endpoint_ms' | 'stt_ms' | 'llm_first_token_ms' | 'tts_first_audio_ms' | 'total_ms') => {
        const xs = rows.map((r) => r[k]).filter((x): x is number => x !== null).map(Number);
        return `${f1(p(xs, 50))} / ${f1(p(xs, 95))}`;
      };
      console.log(`    the service's record of these ${rows.length} turns, p50 / p95 ms: end of speech → recogniser's end of turn ${step('endpoint_ms')}, → transcript ${step('stt_ms')}, → model's first token ${step('llm_first_token_ms')}, → first audio out ${step('tts_first_audio_ms')}; total ${step('total_ms')}`);
      if (greetings.length) summary.push(`| greeting's first sound after answer, streamed voice, warm cache, ${n} calls at once | ${f1(p(greetings, 50))} | ${f1(p(greetings, 95))} | ${f1(Math.max(...greetings))} | ${p(greetings, 95) <= 200 ? 'p95 ≤ 200 ms: yes' : 'p95 ≤ 200 ms: NO'} |`);
    }
    callers?.exit();
    console.log(`greeting's first sound, cold cache (the first call; ElevenLabs synthesizes it): ${f1(cold ?? NaN)} ms; cache ${rig.greetings.stats.hits} hits, ${rig.greetings.stats.misses} misses`);
    summary.push(`| greeting's first sound after answer, streamed voice, cold cache | ${f1(cold ?? NaN)} | | | one call |`);

    // False barge-ins: the caller asks, the agent answers at length, and 3.2–3.7 s into the answer
    // (past the default rule's 3 s of the agent speaking before it can be cut)
    // the caller coughs or says "uh-huh". Cut = the answer's sound stopped (its first 300 ms gap)
    // before 80 % of how long it lasts uncut (measured first, on the same setup).
    if (BARGE_TRIALS > 0) {
      const uhhuh = trimTrailingQuiet(resample((await espeak.synthesize('uh-huh', { language: 'en-US' })).pcm16, said.sampleRate, 8000));
      await reply('We open at nine in the morning and close at six in the evening, every day but Sunday, and on Saturdays we close at four.');
      const silero = vadProvider({ vad: 'silero', vadModel: undefined });
      await silero.ready();
      console.log(`\nFalse barge-ins: 3.2–3.7 s into the agent's answer, a cough (200 ms of noise) or "uh-huh" (${(uhhuh.length / 8).toFixed(0)} ms, espeak-ng); ${BARGE_TRIALS} trials each; an answer counts as cut when its sound stops before 80 % of its uncut length`);
      console.log('| interruption rule | heard by | uncut answer ms | cough: answers cut | "uh-huh": answers cut |');
      console.log('|---|---|---|---|---|');
      try {
        for (const [rule, config] of [
          ['default (3 words, after 3 s)', {}],
          ['most sensitive (1 word, at once)', { interruptionWordCount: 1, interruptionMinimumSpeakingTime: 0 }],
        ] as const) {
          const b = await agentWith(w, { welcomeMessage: 'Hello.', agentSttEngine: 'deepgram', agentTtsEngine: 'elevenlabs', speakingTimeout: 700, callerResponseTimeout: 120, ...config });
          for (const [by, how] of [
            ['our VAD alone (energy)', { streaming: false }],
            ['our VAD alone (Silero)', { streaming: false, vad: silero }],
            ['Deepgram\'s events and our energy VAD', { streaming: true }],
          ] as const) {
            const answerLength = async (sound?: Int16Array) => {
              const c = await streamedCall(rig, b, how);
              try {
                await c.caller.firstLoudAfter(c.up, 'greeting');
                await c.caller.heardOut();
                const first = await c.caller.firstLoudAfter(await c.caller.say(speech), 'answer');
                if (sound) {
                  await sleep(3200 + crypto.randomInt(0, 500));
                  await c.caller.say(sound);
                }
                return (await c.caller.soundStops(first, 300)) - first;
              } finally {
                await c.end();
              }
            };
            await hear([]);
            const full = await answerLength();
            const cut: Record<string, number> = {};
            for (const [name, sound, words] of [['cough', cough(), ''], ['uh-huh', uhhuh, 'uh-huh']] as const) {
              cut[name] = 0;
              for (let i = 0; i < BARGE_TRIALS; i++) {
              // What Deepgram hears: the question's words, then nothing in a cough, the word in "uh-huh".
                await hear(['What are your opening hours?', words]);
                if ((await answerLength(sound)) < 0.8 * full) cut[name]++;
              }
            }
            console.log(`| ${rule} | ${by} | ${f1(full)} | ${cut.cough} of ${BARGE_TRIALS} | ${cut['uh-huh']} of ${BARGE_TRIALS} |`);
            summary.push(`| false barge-ins (answers cut of ${BARGE_TRIALS}), ${rule.split(' (')[0]} rule, ${by}: cough / "uh-huh" | ${cut.cough} | ${cut['uh-huh']} | | |`);
          }
        }
      } finally {
        await silero.close();
      }
    }
  } finally {
    doubles.child.send({ type: 'exit' });
    await new Promise((r) => doubles.child.once('exit', r));
    await w.close();
  }
}

/**
 * The figures last recorded in docs/performance.md, in its table under "bench:voice, last recorded":
 * `| label | p50 | p95 | max | … |`, the labels as this script prints them in its summary.
 */
function lastRecorded(): Map<string, { p50: string; p95: string }> {
  const out = new Map<string, { p50: string; p95: string }>();
  const doc = fs.readFileSync(path.join(import.meta.dirname, '..', 'docs', 'performance.md'), 'utf8');
  const at = doc.indexOf(LAST_RECORDED);
  if (at < 0) return out;
  let inTable = false;
  for (const line of doc.slice(at).split('\n').slice(1)) {
    if (!line.startsWith('|')) {
      if (inTable) break;
      continue;
    }
    inTable = true;
    const cells = line.split('|').map((c) => c.trim());
    if (cells[1] && cells[1] !== 'label' && !/^-+$/.test(cells[1])) out.set(cells[1], { p50: cells[2] ?? '', p95: cells[3] ?? '' });
  }
  return out;
}

if (summary.length) {
  const last = lastRecorded();
  console.log('\nSummary (ms), each beside the figure last recorded in docs/performance.md ("' + LAST_RECORDED + '")');
  console.log('| | p50 | p95 | max | | last recorded p50 / p95 |');
  console.log('|---|---|---|---|---|---|');
  for (const s of summary) {
    const label = s.split('|')[1]!.trim();
    const was = last.get(label);
    console.log(`${s} ${was ? `${was.p50} / ${was.p95}` : 'none recorded'} |`);
  }
}
