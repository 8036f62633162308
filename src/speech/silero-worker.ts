// The worker thread that runs the Silero model for every call of the process (silero-vad.ts):
// onnxruntime-node's run() is synchronous on the thread that calls it (its promise only defers
// the work to setImmediate), so on the main thread a hundred calls' windows would hold the event
// loop — and the RTP pacing of every call — for tens of milliseconds at a time. Here, windows
// that arrive together (from different calls: a call has at most one in flight) run as one batch,
// which also costs a quarter as much per window as one at a time.
//
// Messages in: {type: 'infer', items: [{id, input (Float32Array 32 + 256), state (Float32Array 2×128)}]}.
// Out: {type: 'ready'} or {type: 'error', message} once; then {type: 'result', ids, probabilities,
// states (2×128 per id), ms} per batch.
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';

const WINDOW_INPUT = 32 + 256;
const STATE = 128;
/** The most windows one batch runs. */
const MAX_BATCH = 256;

interface Infer { id: number; input: Float32Array; state: Float32Array }

const port = parentPort!;
const { file } = workerData as { file: string };

async function main(): Promise<void> {
  if (!fs.existsSync(file)) throw new Error(`the model file ${file} does not exist`);
  let ort: typeof import('onnxruntime-node');
  try {
    const m = await import('onnxruntime-node');
    ort = (m as unknown as { default?: typeof m }).default ?? m;
  } catch (err) {
    throw new Error(`onnxruntime-node could not be loaded: ${(err as Error).message}`, { cause: err });
  }
  // One thread: batches are small, and the machine's other cores carry calls.
  const session = await ort.InferenceSession.create(file, {
    intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
  if (!['input', 'state', 'sr'].every((n) => session.inputNames.includes(n)) || !['output', 'stateN'].every((n) => session.outputNames.includes(n))) {
    throw new Error(`${file} is not a Silero VAD v5 model (inputs ${session.inputNames.join(', ')}; outputs ${session.outputNames.join(', ')})`);
  }
  const sr = new ort.Tensor('int64', BigInt64Array.from([8000n]));

  async function run(batch: Infer[]) {
    const n = batch.length;
    const input = new Float32Array(n * WINDOW_INPUT);
    const state = new Float32Array(2 * n * STATE);
    batch.forEach((b, k) => {
      input.set(b.input, k * WINDOW_INPUT);
      // [2, 1, 128] per call into [2, n, 128].
      state.set(b.state.subarray(0, STATE), k * STATE);
      state.set(b.state.subarray(STATE), (n + k) * STATE);
    });
    const out = await session.run({
      input: new ort.Tensor('float32', input, [n, WINDOW_INPUT]),
      state: new ort.Tensor('float32', state, [2, n, STATE]),
      sr,
    });
    const probs = Float32Array.from(out.output!.data as Float32Array);
    const next = out.stateN!.data as Float32Array;
    const states = new Float32Array(n * 2 * STATE);
    for (let k = 0; k < n; k++) {
      states.set(next.subarray(k * STATE, (k + 1) * STATE), k * 2 * STATE);
      states.set(next.subarray((n + k) * STATE, (n + k + 1) * STATE), k * 2 * STATE + STATE);
    }
    return { probs, states };
  }

  // A model that loads but cannot run is found now, not on a call.
  await run([{ id: -1, input: new Float32Array(WINDOW_INPUT), state: new Float32Array(2 * STATE) }]);

  let pending: Infer[] = [];
  let scheduled = false;
  const flush = async () => {
    while (pending.length > 0) {
      const batch = pending.slice(0, MAX_BATCH);
      pending = pending.slice(batch.length);
      const t0 = performance.now();
      try {
        const { probs, states } = await run(batch);
        port.postMessage({ type: 'result', ids: batch.map((b) => b.id), probabilities: probs, states, ms: performance.now() - t0 }, [probs.buffer, states.buffer]);
      } catch (err) {
        port.postMessage({ type: 'failed', ids: batch.map((b) => b.id), message: (err as Error).message });
      }
    }
    scheduled = false;
  };
  port.on('message', (m: { type: string; items: Infer[] }) => {
    if (m.type !== 'infer') return;
    pending.push(...m.items);
    if (!scheduled) {
      scheduled = true;
      // Whatever else arrives meanwhile joins the batch.
      setImmediate(() => void flush());
    }
  });
  port.postMessage({ type: 'ready' });
}

main().catch((err: Error) => port.postMessage({ type: 'error', message: err.message }));
