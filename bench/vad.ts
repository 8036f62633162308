// Voice activity detectors side by side: the energy detector (src/speech/vad.ts) and Silero VAD on
// onnxruntime-node (src/speech/silero-vad.ts), on audio made at run time (test/helpers/vad-audio.ts):
// espeak-ng speech in six voices, six utterances a call with 3 s between them, under line noise,
// babble (three other espeak-ng voices at once), music on hold (synthesized chords and a melody)
// and clicks, each at 20, 10, 5 and 0 dB signal-to-noise, and clean. Both detectors read the same
// 8 kHz frames with the agents' default speakingTimeout (1200 ms).
//
// Per detector and scene:
//   false barge-ins — speech starts inside a stretch with no speech (from 300 ms after an utterance
//                     ends until 250 ms before the next begins): each would have cut the agent off;
//   missed          — utterances never heard;
//   ends late       — utterances whose end was decided more than 500 ms after speakingTimeout
//                     past the real end of speech, or not before the next utterance (never);
//   cut early       — utterances ended more than 300 ms before the speaker stopped (the caller
//                     would be answered mid-sentence);
//   end delay       — median of (end decided − real end − speakingTimeout), ms, over ends found.
// And what it costs: CPU ms per second of audio (this process, onnxruntime's threads included),
// Silero's inference time per 32 ms window, the longest push() (the event loop's share), and —
// part `calls` — N calls at once fed in real time (20 ms frames): event-loop delay and CPU.
//
// Usage: npm run bench:vad [-- quality calls]   BENCH_VAD_CALLS (default 25,50,100), BENCH_VAD_SECONDS (10)
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { vadProvider } from '../src/speech/detectors.ts';
import { SileroDetector, type SileroModel } from '../src/speech/silero-vad.ts';
import { VoiceActivityDetector, type VoiceActivity } from '../src/speech/vad.ts';
import { scene, SENTENCES, speak, VOICES, type NoiseKind, type Scene } from '../test/helpers/vad-audio.ts';

const parts = process.argv.slice(2).filter((a) => a !== '--');
const run = (part: string) => parts.length === 0 || parts.includes(part);
const TIMEOUT = 1200;
const FRAME = 160;

const provider = vadProvider({ vad: 'silero', vadModel: undefined });
const status = await provider.ready();
if (status.engine !== 'silero') throw new Error(`Silero did not load: ${status.fallbackReason}`);
const model = provider.model as SileroModel;

type Kind = 'energy' | 'silero';
const make = (kind: Kind): VoiceActivity => (kind === 'energy'
  ? new VoiceActivityDetector({ speakingTimeoutMs: TIMEOUT })
  : new SileroDetector(model, { speakingTimeoutMs: TIMEOUT, maxQueuedWindows: 1_000_000, ...(process.env.BENCH_VAD_NEG ? { negThreshold: Number(process.env.BENCH_VAD_NEG) } : {}) }));

interface Observed { starts: number[]; ends: Array<{ speechEndMs: number; decidedMs: number }>; cpuMs: number; audioMs: number; pushMs: number[] }

/** Feeds a scene frame by frame (Silero: never more than two windows ahead of the model); what the detector said and when. */
async function observe(kind: Kind, s: Scene): Promise<Observed> {
  const vad = make(kind);
  let pushedMs = 0;
  const starts: number[] = [];
  const ends: Observed['ends'] = [];
  vad.on('speechStart', (e) => starts.push(e.atMs));
  vad.on('speechEnd', (e) => ends.push({ speechEndMs: e.speechEndMs, decidedMs: pushedMs }));
  const pushMs: number[] = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i + FRAME <= s.pcm.length; i += FRAME) {
    const t = performance.now();
    vad.push(s.pcm.subarray(i, i + FRAME));
    pushMs.push(performance.now() - t);
    pushedMs += 20;
    if (vad instanceof SileroDetector && vad.queued > 2) await vad.idle();
  }
  if (vad instanceof SileroDetector) await vad.idle();
  const cpu = process.cpuUsage(cpu0);
  return { starts, ends, cpuMs: (cpu.user + cpu.system) / 1000, audioMs: (s.pcm.length / 8000) * 1000, pushMs };
}

interface Score { falseBargeIns: number; gapsMs: number; utterances: number; missed: number; late: number; never: number; cutEarly: number; delays: number[] }

function score(s: Scene, o: Observed): Score {
  const r: Score = { falseBargeIns: 0, gapsMs: 0, utterances: s.speech.length, missed: 0, late: 0, never: 0, cutEarly: 0, delays: [] };
  for (let k = 0; k < s.gaps.length; k++) {
    const g = s.gaps[k]!;
    const from = k === 0 ? g.startMs : g.startMs + 300;
    const to = g.endMs - 250;
    r.gapsMs += Math.max(0, to - from);
    r.falseBargeIns += o.starts.filter((t) => t >= from && t < to).length;
  }
  for (let k = 0; k < s.speech.length; k++) {
    const seg = s.speech[k]!;
    const next = s.speech[k + 1]?.startMs ?? Infinity;
    // Heard: an utterance of the detector overlaps this one (started before its end, not ended before its start).
    const heard = o.starts.some((t, i) => t <= seg.endMs && (o.ends[i]?.speechEndMs ?? Infinity) >= seg.startMs);
    if (!heard) { r.missed++; continue; }
    if (o.ends.some((e) => e.speechEndMs > seg.startMs + 300 && e.speechEndMs < seg.endMs - 300)) r.cutEarly++;
    // The end that closes this utterance: the first decided after the speaker stopped.
    const end = o.ends.find((e) => e.decidedMs >= seg.endMs - 300);
    if (!end || end.decidedMs >= next) { r.never++; continue; }
    const delay = end.decidedMs - seg.endMs - TIMEOUT;
    r.delays.push(delay);
    if (delay > 500) r.late++;
  }
  return r;
}

const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.floor(s.length / 2)]! : NaN; };
const pct = (xs: number[], q: number) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.min(s.length - 1, Math.ceil((q / 100) * s.length) - 1)]! : NaN; };
const f0 = (n: number) => (Number.isFinite(n) ? n.toFixed(0) : '—');

if (run('quality')) {
  const utterances = await Promise.all(SENTENCES.map((t, i) => speak(t, VOICES[i % VOICES.length]!)));
  const scenes: Array<[NoiseKind, number]> = [['none', 99]];
  for (const kind of ['line', 'babble', 'music', 'clicks'] as const) for (const snr of [20, 10, 5, 0]) scenes.push([kind, snr]);
  const totals: Record<Kind, Score & { cpuMs: number; audioMs: number; pushMs: number[] }> = {
    energy: { falseBargeIns: 0, gapsMs: 0, utterances: 0, missed: 0, late: 0, never: 0, cutEarly: 0, delays: [], cpuMs: 0, audioMs: 0, pushMs: [] },
    silero: { falseBargeIns: 0, gapsMs: 0, utterances: 0, missed: 0, late: 0, never: 0, cutEarly: 0, delays: [], cpuMs: 0, audioMs: 0, pushMs: [] },
  };
  // A first pass warms both up (JIT, onnxruntime's arena).
  const warm = await scene(utterances.slice(0, 2), 'line', 10);
  await observe('energy', warm);
  await observe('silero', warm);
  model.stats.windows = 0; model.stats.totalMs = 0; model.stats.maxMs = 0;
  console.log('| noise | SNR dB | detector | false barge-ins | missed | ends late / never | cut early | end delay p50 ms |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const [kind, snr] of scenes) {
    const s = await scene(utterances, kind, snr);
    for (const det of ['energy', 'silero'] as const) {
      const o = await observe(det, s);
      const sc = score(s, o);
      const t = totals[det];
      t.falseBargeIns += sc.falseBargeIns; t.gapsMs += sc.gapsMs; t.utterances += sc.utterances; t.missed += sc.missed;
      t.late += sc.late; t.never += sc.never; t.cutEarly += sc.cutEarly; t.delays.push(...sc.delays);
      t.cpuMs += o.cpuMs; t.audioMs += o.audioMs; for (const x of o.pushMs) t.pushMs.push(x);
      console.log(`| ${kind} | ${kind === 'none' ? '—' : snr} | ${det} | ${sc.falseBargeIns} | ${sc.missed}/${sc.utterances} | ${sc.late} / ${sc.never} | ${sc.cutEarly} | ${f0(median(sc.delays))} |`);
    }
  }
  console.log('\nTotals');
  console.log('| detector | false barge-ins (per minute without speech) | missed | ends late / never | cut early | end delay p50 ms | CPU ms per s of audio | push() of a frame p99 / max ms |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const det of ['energy', 'silero'] as const) {
    const t = totals[det];
    console.log(`| ${det} | ${t.falseBargeIns} (${(t.falseBargeIns / (t.gapsMs / 60_000)).toFixed(1)}) | ${t.missed}/${t.utterances} | ${t.late} / ${t.never} of ${t.utterances} | ${t.cutEarly} | ${f0(median(t.delays))} | ${(t.cpuMs / (t.audioMs / 1000)).toFixed(2)} | ${pct(t.pushMs, 99).toFixed(3)} / ${Math.max(...t.pushMs).toFixed(1)} |`);
  }
  console.log(`\nSilero inference: ${model.stats.windows} windows of 32 ms, mean ${(model.stats.totalMs / model.stats.windows).toFixed(3)} ms, longest ${model.stats.maxMs.toFixed(2)} ms (run() to its answer; onnxruntime's thread, not the event loop)`);
}

if (run('calls')) {
  const steps = (process.env.BENCH_VAD_CALLS ?? '25,50,100').split(',').map(Number);
  const seconds = Number(process.env.BENCH_VAD_SECONDS ?? 10);
  const speech = await scene(await Promise.all(SENTENCES.slice(0, 3).map((t, i) => speak(t, VOICES[i]!))), 'line', 10, { gapMs: 1500 });
  console.log(`\nCalls at once in this process, each fed 20 ms frames in real time for ${seconds} s (speech and line noise at 10 dB):`);
  console.log('| detector | calls | event-loop delay p99 / max ms | CPU of one core | CPU ms per call-second | calls that fell back to energy |');
  console.log('|---|---|---|---|---|---|');
  for (const det of ['energy', 'silero'] as const) {
    for (const n of steps) {
      let fellBack = 0;
      const vads = Array.from({ length: n }, () => (det === 'energy'
        ? new VoiceActivityDetector({ speakingTimeoutMs: TIMEOUT })
        : new SileroDetector(model, { speakingTimeoutMs: TIMEOUT, onFallback: () => { fellBack++; } })));
      const offsets = vads.map((_, i) => (i * 7919 * FRAME) % speech.pcm.length);
      const loop = monitorEventLoopDelay({ resolution: 1 });
      loop.enable();
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      let slot = 0;
      await new Promise<void>((done) => {
        const tick = () => {
          const due = Math.floor((performance.now() - t0) / 20);
          for (; slot <= due; slot++) {
            vads.forEach((v, i) => {
              const at = (offsets[i]! + slot * FRAME) % (speech.pcm.length - FRAME);
              v.push(speech.pcm.subarray(at - (at % FRAME), at - (at % FRAME) + FRAME));
            });
          }
          if (performance.now() - t0 >= seconds * 1000) return done();
          setTimeout(tick, Math.max(0, t0 + slot * 20 - performance.now()));
        };
        tick();
      });
      const cpu = process.cpuUsage(cpu0);
      const elapsed = (performance.now() - t0) / 1000;
      loop.disable();
      vads.forEach((v) => v.flush());
      const share = (cpu.user + cpu.system) / 1e6 / elapsed;
      console.log(`| ${det} | ${n} | ${(loop.percentile(99) / 1e6).toFixed(1)} / ${(loop.max / 1e6).toFixed(1)} | ${(share * 100).toFixed(0)} % | ${((cpu.user + cpu.system) / 1000 / (n * elapsed)).toFixed(2)} | ${fellBack} |`);
      await new Promise((r) => setTimeout(r, 300));
    }
  }
}

await provider.close();
