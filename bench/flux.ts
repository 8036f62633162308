// Flux's early end of turn (issue 35): how much asking the model at EagerEndOfTurn saves, from the
// caller's last word to the reply's first audio. A real voice session (session.ts, its turn runner
// on SQLite, or PostgreSQL too with BENCH_DATABASE_URL or TEST_DATABASE_URL) hears the caller
// through the real Flux engine (src/speech/deepgram.ts, the official client) against Deepgram's
// double on loopback (test/helpers/fake-deepgram.ts: EagerEndOfTurn after 250 ms of quiet,
// EndOfTurn after 700 ms), the model server of the tests answers after BENCH_FLUX_MODEL_MS (300)
// and the voice at once (test/helpers/flux-call.ts). The caller's audio goes in real time: 600 ms
// of talk, then quiet. Each turn is run twice: with the eager path (the reply asked at the eager
// end, held, played at EndOfTurn) and without it (the session does not see the eager end: asked at
// EndOfTurn, as before). Per turn:
//   voice-to-voice = first reply audio queued − end of the caller's last loud frame
//   after EndOfTurn = first reply audio queued − EndOfTurn's arrival
// Usage: npm run bench:flux  (BENCH_FLUX_TURNS, default 10 per mode; BENCH_FLUX_MODEL_MS, default 300)
import { performance } from 'node:perf_hooks';
import { startFakeDeepgram } from '../test/helpers/fake-deepgram.ts';
import { fluxCall } from '../test/helpers/flux-call.ts';
import { startFakeLlm } from '../test/helpers/fake-llm.ts';
import { startHarness } from '../test/helpers/harness.ts';
import { ENGINES, percentile } from './lib.ts';

const TURNS = Number(process.env.BENCH_FLUX_TURNS ?? 10);
const MODEL_MS = Number(process.env.BENCH_FLUX_MODEL_MS ?? 300);

const p = (xs: number[], q: number) => percentile([...xs].sort((a, b) => a - b), q);
const f0 = (n: number) => (Number.isFinite(n) ? n.toFixed(0) : '—');

async function until(what: string, fn: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await fn())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const llm = await startFakeLlm();
const deepgram = await startFakeDeepgram();
const summary: string[] = [];
try {
  for (const engine of ENGINES) {
    const h = await startHarness(engine, { CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' });
    try {
      const results: Record<'eager' | 'at EndOfTurn', { v2v: number[]; afterEot: number[]; askedVsEot: number[] }> = {
        eager: { v2v: [], afterEot: [], askedVsEot: [] },
        'at EndOfTurn': { v2v: [], afterEot: [], askedVsEot: [] },
      };
      for (const mode of ['eager', 'at EndOfTurn'] as const) {
        // One call per mode, TURNS turns on it (the history grows as a real call's does).
        const c = await fluxCall(h, deepgram, {}, { eager: mode === 'eager' });
        try {
          await until('listening', () => c.session.phase === 'listening');
          for (let i = 0; i < TURNS; i++) {
            deepgram.hear.push(`Question number ${i + 1}?`);
            llm.script.push({ text: `Answer number ${i + 1}.`, delayMs: MODEL_MS });
            const asked = llm.requests.length;
            const played = c.transport.playedAt.length;
            const ends = c.events.filter((e) => e.type === 'endOfTurn').length;
            const lastWord = await c.speak([{ quiet: 300 }, { talk: 600 }, { quiet: 1200 }]);
            await until('the reply', () => c.transport.playedAt.length > played && c.session.phase === 'listening');
            const end = c.events.filter((e) => e.type === 'endOfTurn')[ends]!.t;
            const first = c.transport.playedAt[played]!;
            const r = results[mode];
            r.v2v.push(first - lastWord);
            r.afterEot.push(first - end);
            r.askedVsEot.push(llm.requests[asked]!.t - end);
          }
        } finally {
          await c.close();
        }
      }
      for (const [mode, r] of Object.entries(results)) {
        console.log(`[${engine}] model asked ${mode} (${TURNS} turns, model ${MODEL_MS} ms): last word → first audio p50 ${f0(p(r.v2v, 50))} / p95 ${f0(p(r.v2v, 95))} ms; ` +
          `EndOfTurn → first audio p50 ${f0(p(r.afterEot, 50))} / p95 ${f0(p(r.afterEot, 95))} ms; model asked at EndOfTurn ${p(r.askedVsEot, 50) < 0 ? '−' : '+'}${f0(Math.abs(p(r.askedVsEot, 50)))} ms (p50)`);
        summary.push(`| ${engine}, model asked ${mode} | ${f0(p(r.v2v, 50))} | ${f0(p(r.v2v, 95))} | ${f0(p(r.afterEot, 50))} | ${f0(p(r.afterEot, 95))} |`);
      }
      const saved = p(results['at EndOfTurn'].v2v, 50) - p(results.eager.v2v, 50);
      console.log(`[${engine}] the eager path saves ${f0(saved)} ms (p50 voice-to-voice)`);
    } finally {
      await h.close();
    }
  }
} finally {
  await deepgram.close();
  await llm.close();
}
console.log('\n| case | last word → first audio p50 | p95 | EndOfTurn → first audio p50 | p95 |\n|---|---|---|---|---|');
for (const s of summary) console.log(s);
